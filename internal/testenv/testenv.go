// Package testenv holds what tests of several packages need from the
// machine they run on. It is imported by tests only.
package testenv

import (
	"syscall"
	"testing"
)

// NeedFiles raises the soft limit on open files to n if it is lower, for
// the rest of t (restored at cleanup), or skips t if the hard limit does
// not allow it: floods of connections open thousands of sockets.
func NeedFiles(t testing.TB, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("testenv: getrlimit: %v", err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Skipf("needs %d open files; the hard limit (ulimit -Hn) is %d", n, lim.Max)
	}
	old := lim.Cur
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("testenv: setrlimit: %v", err)
	}
	t.Cleanup(func() {
		lim.Cur = old
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	})
}

//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bench

import (
	"syscall"
	"testing"
	"time"
)

// cpuMeasured is true: getrusage gives the process's CPU time here.
const cpuMeasured = true

// processCPU returns the process's user plus system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pageFaults returns the process's minor page faults so far: on a virtual
// machine each costs the first touch of a page of new memory several
// microseconds (about 12 µs on the machine of bench/README.md), so what an
// index allocates while it grows shows in its build time.
func pageFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return int64(ru.Minflt)
}

// BenchmarkMachinePageFault measures this machine's cost of a minor page
// fault: the first write to each 4 KB page of fresh anonymous memory
// (ns/op is per page). It explains part of ns-build/filter, which pays one
// for every page of memory an index allocates while it grows (see
// faults-build/filter): about 12 µs on the virtual machine of
// bench/README.md, against well under 1 µs on bare metal.
func BenchmarkMachinePageFault(b *testing.B) {
	const page, pages = 4096, 16384 // 64 MB mappings
	var m []byte
	next := pages
	defer func() {
		if m != nil {
			_ = syscall.Munmap(m)
		}
	}()
	for b.Loop() {
		if next == pages {
			if m != nil {
				_ = syscall.Munmap(m)
			}
			var err error
			m, err = syscall.Mmap(-1, 0, page*pages, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
			if err != nil {
				b.Fatal(err)
			}
			next = 0
		}
		m[next*page] = 1
		next++
	}
}

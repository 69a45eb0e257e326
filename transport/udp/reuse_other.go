//go:build !linux && !js && !wasip1 && !plan9

package udp

import (
	"errors"
	"os"
	"runtime"
	"syscall"
)

// Windows error numbers, which package syscall does not export.
const (
	wsaeMsgSize   syscall.Errno = 10040 // WSAEMSGSIZE
	wsaeAddrInUse syscall.Errno = 10048 // WSAEADDRINUSE
)

// soReusePort returns SO_REUSEPORT where Config.Shared needs it besides
// SO_REUSEADDR to bind an address twice (macOS and the BSDs, where it is
// 0x200), or 0 where it sets SO_REUSEADDR only (Windows, Solaris,
// illumos, AIX).
func soReusePort() int {
	switch runtime.GOOS {
	case "darwin", "ios", "dragonfly", "freebsd", "netbsd", "openbsd":
		return 0x200
	}
	return 0
}

// setsockoptInt sets the int option opt of level to 1 on the socket fd,
// with set, which is syscall.SetsockoptInt: its socket is an int on Unix
// and a syscall.Handle on Windows.
func setsockoptInt[FD ~int | ~uintptr](set func(FD, int, int, int) error, fd uintptr, level, opt int) error {
	return set(FD(fd), level, opt, 1)
}

// setBroadcast sets SO_BROADCAST on the socket fd.
func setBroadcast(fd uintptr) error {
	return os.NewSyscallError("setsockopt SO_BROADCAST",
		setsockoptInt(syscall.SetsockoptInt, fd, syscall.SOL_SOCKET, syscall.SO_BROADCAST))
}

// setShared sets the options of Config.Shared on the socket fd:
// SO_REUSEADDR, and SO_REUSEPORT where soReusePort says so.
func setShared(fd uintptr) error {
	if err := setsockoptInt(syscall.SetsockoptInt, fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR); err != nil {
		return os.NewSyscallError("setsockopt SO_REUSEADDR", err)
	}
	if opt := soReusePort(); opt != 0 {
		return os.NewSyscallError("setsockopt SO_REUSEPORT",
			setsockoptInt(syscall.SetsockoptInt, fd, syscall.SOL_SOCKET, opt))
	}
	return nil
}

// isAddrInUse reports whether err is the system's "address in use".
func isAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) ||
		runtime.GOOS == "windows" && errors.Is(err, wsaeAddrInUse)
}

// isMsgSize reports whether err is a read of a datagram longer than the
// buffer, which Windows reports (after filling the buffer) where Unix
// truncates without an error.
func isMsgSize(err error) bool {
	return runtime.GOOS == "windows" && errors.Is(err, wsaeMsgSize)
}

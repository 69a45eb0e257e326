//go:build linux

package udp

import (
	"errors"
	"os"
	"runtime"
	"syscall"
)

// soReusePort returns SO_REUSEPORT, which package syscall does not export
// on linux/386, amd64 and arm: 0xf in the generic Linux ABI, 0x200 on
// MIPS.
func soReusePort() int {
	switch runtime.GOARCH {
	case "mips", "mipsle", "mips64", "mips64le":
		return 0x200
	}
	return 0xf
}

// setBroadcast sets SO_BROADCAST on the socket fd.
func setBroadcast(fd uintptr) error {
	return os.NewSyscallError("setsockopt SO_BROADCAST",
		syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1))
}

// setShared sets the options of Config.Shared on the socket fd:
// SO_REUSEADDR and SO_REUSEPORT.
func setShared(fd uintptr) error {
	if err := syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		return os.NewSyscallError("setsockopt SO_REUSEADDR", err)
	}
	return os.NewSyscallError("setsockopt SO_REUSEPORT",
		syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, soReusePort(), 1))
}

// isAddrInUse reports whether err is the system's "address in use".
func isAddrInUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }

// isMsgSize reports whether err is a read of a datagram longer than the
// buffer; Linux truncates it without an error instead.
func isMsgSize(error) bool { return false }

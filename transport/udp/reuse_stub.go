//go:build js || wasip1 || plan9

package udp

import (
	"errors"
	"fmt"
	"runtime"
)

// setBroadcast does nothing: these systems have no socket options.
func setBroadcast(uintptr) error { return nil }

// setShared fails: these systems cannot share a port.
func setShared(uintptr) error {
	return fmt.Errorf("udp: Config.Shared on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// isAddrInUse reports whether err is the system's "address in use",
// which these systems do not tell apart.
func isAddrInUse(error) bool { return false }

// isMsgSize reports whether err is a read of a datagram longer than the
// buffer.
func isMsgSize(error) bool { return false }

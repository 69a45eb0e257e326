package tcp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/sion-go/sion/transport"
)

// Sentinel errors of this package, besides those of package transport;
// they come back wrapped with detail, so test them with errors.Is.
var (
	// ErrPeerDead reports a Conn whose peer sent nothing, not even a
	// heartbeat, for Config.DeadAfter while the Conn waited for it. The
	// Conn is then closed: Recv (once the frames already received are
	// taken) and Send return errors that wrap both ErrPeerDead and
	// transport.ErrClosed.
	ErrPeerDead = errors.New("tcp: peer dead")

	// ErrWriteBufferFull reports a Send that waited Config.WriteTimeout for
	// room in a full write buffer (Config.WriteBufferBytes): the peer is
	// alive but does not receive. The frame is not sent and the Conn
	// stays usable.
	ErrWriteBufferFull = errors.New("tcp: write buffer full")

	// ErrProtocol reports a peer that does not speak this package's
	// protocol: a preamble with a wrong magic or version fails that Dial
	// (an Accept skips the connection), and a frame length over the Conn's
	// MaxFrameBytes, or over Config.PendingReadBytes before the accepted
	// Conn is admitted (Conn.Admit), closes the Conn, whose Recv and Send
	// then return errors wrapping both ErrProtocol and
	// transport.ErrClosed.
	ErrProtocol = errors.New("tcp: protocol violation")
)

var errClosed = fmt.Errorf("tcp: use of closed connection: %w", transport.ErrClosed)

// errPeerClosed is the error of a Conn whose peer closed: it matches
// transport.ErrClosed and io.EOF.
func errPeerClosed(remote net.Addr) error {
	return fmt.Errorf("tcp: connection closed by peer %v: %w (%w)", remote, transport.ErrClosed, io.EOF)
}

// errDead is the error of a Conn whose peer sent nothing for deadAfter.
func errDead(remote net.Addr, deadAfter time.Duration) error {
	return fmt.Errorf("%w: nothing received from %v for %v: %w",
		ErrPeerDead, remote, deadAfter, transport.ErrClosed)
}

// errLost is the error of a Conn whose socket failed with err.
func errLost(remote net.Addr, err error) error {
	return fmt.Errorf("tcp: connection to %v lost: %w: %w", remote, err, transport.ErrClosed)
}

// errFrameOverLimit is the error of a Conn whose peer announced a frame
// of n bytes, over the Conn's limit of max.
func errFrameOverLimit(remote net.Addr, n uint32, max int) error {
	return fmt.Errorf("%w: %v sent a frame of %d bytes, over MaxFrameBytes %d; connection closed: %w",
		ErrProtocol, remote, n, max, transport.ErrClosed)
}

// errFrameOverBudget is the error of an accepted Conn, not yet admitted,
// whose peer announced a frame of n bytes, over its budget of pending.
func errFrameOverBudget(remote net.Addr, n uint32, pending int) error {
	return fmt.Errorf("%w: %v sent a frame of %d bytes before it was admitted, over PendingReadBytes %d; connection closed: %w",
		ErrProtocol, remote, n, pending, transport.ErrClosed)
}

// isTimeout reports whether err is a socket deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

package nats

import (
	"errors"
	"fmt"
	"io"

	"github.com/sion-go/sion/transport"
)

// Sentinel errors of this package, besides those of package transport;
// they come back wrapped with detail, so test them with errors.Is.
var (
	// ErrPeerDead reports a Conn whose peer sent nothing — no frame, no
	// acknowledgement, no keepalive — for Config.DeadAfter: its process
	// died, its NATS server died and it found no other, or the network
	// between them is cut. The Conn is then closed: Recv (once the frames
	// already received are taken) and Send return errors wrapping both
	// ErrPeerDead and transport.ErrClosed.
	ErrPeerDead = errors.New("nats: peer dead")

	// ErrProtocol reports a peer that breaks this package's protocol: a
	// malformed message, a frame over MaxFrameBytes, more than the
	// receive window. The Conn is then closed: Recv and Send return errors
	// wrapping both ErrProtocol and transport.ErrClosed. A malformed Dial
	// request is ignored by the Listener; a malformed reply fails Dial.
	ErrProtocol = errors.New("nats: protocol violation")

	// ErrConnLost reports a Conn whose NATS connection (Config.Conn) was
	// closed by its owner, or failed for good (no server left to
	// reconnect to). Recv and Send then return errors wrapping both
	// ErrConnLost and transport.ErrClosed.
	ErrConnLost = errors.New("nats: NATS connection closed")
)

var errClosed = fmt.Errorf("nats: use of closed connection: %w", transport.ErrClosed)

// errPeerClosed is the error of a Conn whose peer closed: it matches
// transport.ErrClosed and io.EOF.
func errPeerClosed(remote Addr) error {
	return fmt.Errorf("nats: connection closed by peer %v: %w (%w)", remote, transport.ErrClosed, io.EOF)
}

// errAborted is the error of a Conn whose peer gave it up before it was
// established (a Dial cancelled, a Listener closed before Accept).
func errAborted(remote Addr) error {
	return fmt.Errorf("nats: connection aborted by peer %v: %w", remote, transport.ErrClosed)
}

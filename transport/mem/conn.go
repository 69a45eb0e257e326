package mem

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/sion-go/sion/transport"
)

var (
	errClosed         = fmt.Errorf("mem: use of closed connection: %w", transport.ErrClosed)
	errPeerClosed     = fmt.Errorf("mem: connection closed by peer: %w", transport.ErrClosed)
	errPeerClosedRecv = fmt.Errorf("mem: connection closed by peer: %w (%w)", transport.ErrClosed, io.EOF)
)

// conn is one end of a connection of a Network. The two ends share two
// buffered channels of frames, one per direction.
type conn struct {
	local, remote Addr
	maxFrameBytes int
	peer          *conn

	in   <-chan []byte // frames from peer
	out  chan<- []byte // frames to peer
	done chan struct{} // closed when Close starts
	eof  chan struct{} // closed when Close ends: no frame enters out any more
	once sync.Once

	// mu orders Close after the Sends that may still put a frame in out:
	// Send holds it shared from its check of done on, and Close closes
	// eof holding it, after closing done.
	mu sync.RWMutex
}

var _ transport.Conn = (*conn)(nil)

// newPair returns the two ends of a new connection: c, dialed from local,
// and s, accepted at remote.
func newPair(local, remote Addr, maxFrameBytes, bufferFrames int) (c, s *conn) {
	cs := make(chan []byte, bufferFrames)
	sc := make(chan []byte, bufferFrames)
	c = &conn{local: local, remote: remote, maxFrameBytes: maxFrameBytes,
		in: sc, out: cs, done: make(chan struct{}), eof: make(chan struct{})}
	s = &conn{local: remote, remote: local, maxFrameBytes: maxFrameBytes,
		in: cs, out: sc, done: make(chan struct{}), eof: make(chan struct{})}
	c.peer, s.peer = s, c
	return c, s
}

// Send queues a copy of frame for the peer. It blocks while the direction's
// queue is full (Config.BufferFrames frames), until the peer receives, ctx
// is done, or either end closes; see transport.Conn.
func (c *conn) Send(ctx context.Context, frame []byte) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	switch {
	case isDone(c.done):
		return errClosed
	case isDone(c.peer.done):
		return errPeerClosed
	case len(frame) > c.maxFrameBytes:
		return fmt.Errorf("mem: send of %d bytes: %w (MaxFrameBytes is %d)",
			len(frame), transport.ErrFrameTooLarge, c.maxFrameBytes)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f := make([]byte, len(frame))
	copy(f, frame)
	select {
	case c.out <- f:
		return nil
	case <-c.done:
		return errClosed
	case <-c.peer.done:
		return errPeerClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Recv returns the next frame from the peer; the slice is the copy made by
// the peer's Send, now the caller's. See transport.Conn.
func (c *conn) Recv(ctx context.Context) ([]byte, error) {
	if isDone(c.done) {
		return nil, errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case f := <-c.in:
		return f, nil
	case <-c.done:
		return nil, errClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.peer.eof:
		// The peer sends no more: drain what it queued.
		select {
		case f := <-c.in:
			return f, nil
		default:
			return nil, errPeerClosedRecv
		}
	}
}

// Close closes this end; frames already queued stay for the peer. See
// transport.Conn.
func (c *conn) Close() error {
	c.once.Do(func() {
		close(c.done)
		c.mu.Lock() // once Sends that may still queue a frame are done
		close(c.eof)
		c.mu.Unlock()
	})
	return nil
}

// LocalAddr returns the address of this end, as an Addr.
func (c *conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the address of the peer, as an Addr.
func (c *conn) RemoteAddr() net.Addr { return c.remote }

// MaxFrameBytes returns the frame size limit of the Network that made c.
func (c *conn) MaxFrameBytes() int { return c.maxFrameBytes }

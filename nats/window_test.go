package nats_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/nats"
	"github.com/sion-go/sion/transport"
)

// TestWindowBytes: Send blocks once the frames the peer has not taken
// fill its WindowBytes, and goes on when Recv takes one.
func TestWindowBytes(t *testing.T) {
	s := startServer(t, nil)
	cfg := nats.Config{SubjectPrefix: prefix(t), WindowBytes: 1000}
	tr := newTransport(t, connect(t, s.ClientURL()), cfg)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, a := connPair(ctx, t, tr)
	a.(transport.Admitter).Admit()

	frame := make([]byte, 300)
	for i := range 3 {
		require.NoError(t, c.Send(ctx, frame), "Send %d within the window", i)
	}
	probe, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	require.ErrorIs(t, c.Send(probe, frame), context.DeadlineExceeded, "Send past WindowBytes did not block")
	_, err := a.Recv(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Send(ctx, frame), "Send once Recv made room")
}

// TestWindowOverrun: a peer that sends more than the receive window
// breaks the protocol; the Conn closes with ErrProtocol.
func TestWindowOverrun(t *testing.T) {
	s := startServer(t, nil)
	pfx := prefix(t)
	nc := connect(t, s.ClientURL())
	tr := newTransport(t, nc, nats.Config{SubjectPrefix: pfx, WindowFrames: 4})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, a := connPair(ctx, t, tr)

	// Data messages 0..4, each a whole frame, straight to the accepted
	// end's subject, as a peer ignoring the window would send them.
	d := c.LocalAddr().String()
	for seq := range 5 {
		m := make([]byte, 10+8)
		m[0], m[1] = 'D', 1
		binary.BigEndian.PutUint64(m[2:], uint64(seq))
		require.NoError(t, nc.Publish(d[:len(d)-1]+"a", m))
	}
	// Nothing is received before the fifth has arrived (a Recv would
	// widen the window): a's Send reports the failure once it has.
	require.Eventually(t, func() bool {
		probe, stop := context.WithTimeout(ctx, 10*time.Millisecond)
		defer stop()
		return errors.Is(a.Send(probe, nil), nats.ErrProtocol)
	}, time.Minute, time.Millisecond)
	var err2 error
	for range 5 {
		if _, err2 = a.Recv(ctx); err2 != nil {
			break
		}
	}
	assert.ErrorIs(t, err2, nats.ErrProtocol)
	assert.ErrorIs(t, err2, transport.ErrClosed)
}

// connPair listens on tr and dials that listener, and returns the dialed
// end and the accepted one, closed (with the listener) when t ends.
func connPair(ctx context.Context, t *testing.T, tr *nats.Transport) (dialed, accepted transport.Conn) {
	t.Helper()
	l, err := tr.Listen("")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	c, err := tr.Dial(ctx, l.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	a, err := l.Accept(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	return c, a
}

package transporttest

import (
	"sync"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/transport"
)

// requireClosed checks that every call on c fails with ErrClosed.
func (e *env) requireClosed(c transport.Conn, name string) {
	e.t.Helper()
	_, err := c.Recv(e.ctx)
	require.ErrorIs(e.t, err, transport.ErrClosed, "Recv on %s", name)
	require.ErrorIs(e.t, c.Send(e.ctx, []byte("x")), transport.ErrClosed, "Send on %s", name)
}

func (s *suite) closeUnblocksRecv(e *env) {
	c, _ := e.pair()
	pending := goRecv(e.ctx, c)
	require.NoError(e.t, c.Close())
	require.ErrorIs(e.t, await(e.t, pending, "Recv pending on Close"), transport.ErrClosed)
	e.requireClosed(c, "closed Conn")
}

func (s *suite) closeUnblocksSend(e *env) {
	c, sc := e.pair()
	pending := e.fill(e.ctx, c)
	require.NoError(e.t, c.Close())
	r := await(e.t, pending, "Send pending on Close")
	require.ErrorIs(e.t, r.err, transport.ErrClosed)
	if e.caps.BufferFrames > 0 {
		require.Equal(e.t, e.caps.BufferFrames, r.sent, "Sends that returned nil")
	}
	// What was sent before Close is still delivered, then the end.
	e.checkSeq(sc, r.sent)
	_, err := sc.Recv(e.ctx)
	require.ErrorIs(e.t, err, transport.ErrClosed, "Recv after the delivered frames")
}

func (s *suite) closeUnblocksAccept(e *env) {
	l := e.listen()
	pending := goAccept(e.ctx, l)
	require.NoError(e.t, l.Close())
	require.ErrorIs(e.t, await(e.t, pending, "Accept pending on Close"), transport.ErrClosed)
	_, err := l.Accept(e.ctx)
	require.ErrorIs(e.t, err, transport.ErrClosed, "Accept after Close")
}

func (s *suite) closeIdempotent(e *env) {
	l := e.listen()
	c, sc := e.dial(l)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() { errs <- c.Close() })
		wg.Go(func() { errs <- l.Close() })
	}
	await(e.t, waitChan(&wg), "concurrent Closes")
	close(errs)
	for err := range errs {
		require.NoError(e.t, err, "concurrent Close")
	}
	require.NoError(e.t, c.Close(), "Conn.Close after Close")
	require.NoError(e.t, l.Close(), "Listener.Close after Close")
	require.NoError(e.t, sc.Close(), "Close of the peer")
	require.NoError(e.t, sc.Close(), "Close of the peer, again")
	e.requireClosed(c, "closed Conn")
	e.requireClosed(sc, "closed peer")
	_, err := l.Accept(e.ctx)
	require.ErrorIs(e.t, err, transport.ErrClosed, "Accept after Close")
}

func (s *suite) closeIsolated(e *env) {
	// Closing one Conn, or the Listener, leaves the other Conns working.
	l := e.listen()
	c1, s1 := e.dial(l)
	c2, s2 := e.dial(l)
	require.NoError(e.t, c1.Close())
	require.NoError(e.t, l.Close())
	e.send(c2, []byte("ping"))
	require.Equal(e.t, "ping", string(e.recv(s2)))
	e.send(s2, []byte("pong"))
	require.Equal(e.t, "pong", string(e.recv(c2)))
	_, err := s1.Recv(e.ctx)
	require.ErrorIs(e.t, err, transport.ErrClosed, "Recv on the peer of the closed Conn")
}

func (s *suite) peerCloseDrains(e *env) {
	const n = 10
	c, sc := e.pair()
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			if err := c.Send(e.ctx, makeFrame(0, i, e.frameSize(i))); err != nil {
				sent <- err
				return
			}
		}
		sent <- c.Close()
	}()
	e.checkSeq(sc, n)
	require.NoError(e.t, await(e.t, sent, "Sends and Close"))
	for i := range 2 {
		_, err := sc.Recv(e.ctx)
		require.ErrorIs(e.t, err, transport.ErrClosed, "Recv %d after the frames", i)
	}
	require.ErrorIs(e.t, sc.Send(e.ctx, []byte("x")), transport.ErrClosed,
		"Send once Recv reported the peer's close")
}

func (s *suite) peerCloseUnblocksRecv(e *env) {
	c, sc := e.pair()
	pending := goRecv(e.ctx, sc)
	require.NoError(e.t, c.Close())
	require.ErrorIs(e.t, await(e.t, pending, "Recv pending on the peer's Close"), transport.ErrClosed)
}

func (s *suite) peerCloseUnblocksSend(e *env) {
	c, sc := e.pair()
	pending := e.fill(e.ctx, c)
	require.NoError(e.t, sc.Close())
	r := await(e.t, pending, "Send pending on the peer's Close")
	require.ErrorIs(e.t, r.err, transport.ErrClosed)
	if e.caps.BufferFrames > 0 {
		require.Equal(e.t, e.caps.BufferFrames, r.sent, "Sends that returned nil")
	}
}

func (s *suite) listenerCloseClosesUnaccepted(e *env) {
	l := e.listen()
	addr := l.Addr().String()
	c, err := e.tr.Dial(e.ctx, addr)
	require.NoError(e.t, err, "Dial before Accept")
	e.t.Cleanup(func() { c.Close() })
	require.NoError(e.t, l.Close())
	_, err = c.Recv(e.ctx)
	require.ErrorIs(e.t, err, transport.ErrClosed, "Recv on a Conn its Listener never accepted")
	c2, err := e.tr.Dial(e.ctx, addr)
	if c2 != nil {
		c2.Close()
	}
	require.ErrorIs(e.t, err, transport.ErrNoListener, "Dial to a closed Listener")
}

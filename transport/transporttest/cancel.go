package transporttest

import (
	"context"

	"github.com/stretchr/testify/require"
)

func (s *suite) cancelRecv(e *env) {
	c, sc := e.pair()
	ctx, cancel := context.WithCancel(e.ctx)
	pending := goRecv(ctx, sc)
	cancel()
	require.ErrorIs(e.t, await(e.t, pending, "Recv pending on cancel"), context.Canceled)

	err := within(e.t, "Recv past its deadline", func() error {
		ctx, cancel := context.WithTimeout(e.ctx, blockTimeout)
		defer cancel()
		_, err := sc.Recv(ctx)
		return err
	})
	require.ErrorIs(e.t, err, context.DeadlineExceeded, "Recv past its deadline")

	// The Conn still works, and the cancelled Recvs took no frame.
	e.send(c, []byte("after"))
	require.Equal(e.t, "after", string(e.recv(sc)))
	e.send(sc, []byte("back"))
	require.Equal(e.t, "back", string(e.recv(c)))
}

func (s *suite) cancelSend(e *env) {
	c, sc := e.pair()
	ctx, cancel := context.WithCancel(e.ctx)
	pending := e.fill(ctx, c)
	cancel()
	r := await(e.t, pending, "Send pending on cancel")
	require.ErrorIs(e.t, r.err, context.Canceled)
	if e.caps.BufferFrames > 0 {
		require.Equal(e.t, e.caps.BufferFrames, r.sent, "Sends that returned nil")
	}
	// The Conn still works: the frames sent arrive, and those whose Send
	// failed do not.
	e.checkSeq(sc, r.sent)
	e.send(c, []byte("after"))
	require.Equal(e.t, "after", string(e.recv(sc)), "first frame after those sent")
}

func (s *suite) cancelAccept(e *env) {
	l := e.listen()
	ctx, cancel := context.WithCancel(e.ctx)
	pending := goAccept(ctx, l)
	cancel()
	require.ErrorIs(e.t, await(e.t, pending, "Accept pending on cancel"), context.Canceled)
	err := within(e.t, "Accept past its deadline", func() error {
		ctx, cancel := context.WithTimeout(e.ctx, blockTimeout)
		defer cancel()
		c, err := l.Accept(ctx)
		if c != nil {
			c.Close()
		}
		return err
	})
	require.ErrorIs(e.t, err, context.DeadlineExceeded, "Accept past its deadline")
	c, sc := e.dial(l) // the Listener still works
	e.send(c, []byte("ping"))
	require.Equal(e.t, "ping", string(e.recv(sc)))
}

func (s *suite) cancelDial(e *env) {
	l := e.listen()
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	c, err := e.tr.Dial(ctx, l.Addr().String())
	if c != nil {
		c.Close()
	}
	require.ErrorIs(e.t, err, context.Canceled, "Dial with a cancelled ctx")
	// No connection was left for Accept: the next one accepted is the
	// next one dialed.
	c, sc := e.dial(l)
	e.send(c, []byte("ping"))
	require.Equal(e.t, "ping", string(e.recv(sc)))
}

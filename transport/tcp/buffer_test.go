package tcp_test

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// withSmallBuffers returns cfg with 64 KiB buffers each way and
// writeTimeout, so that a peer that does not receive fills them soon.
func withSmallBuffers(cfg tcp.Config, writeTimeout time.Duration) tcp.Config {
	cfg.WriteBufferBytes, cfg.ReadBufferBytes = 64<<10, 64<<10
	cfg.WriteTimeout = writeTimeout
	return cfg
}

// floodVariants are the variants whose frames may be large enough to
// fill the kernel's buffers (some MiB) in a few hundred Sends: not
// "small", whose 64-byte frames would take a hundred thousand.
func floodVariants(t *testing.T) []variant {
	var vs []variant
	for _, v := range variants(t) {
		if v.cfg.MaxFrameBytes == 0 {
			vs = append(vs, v)
		}
	}
	return vs
}

func TestWriteBufferFull(t *testing.T) {
	// The peer does not receive: Sends fill every buffer, then one waits
	// WriteTimeout for room and fails with ErrWriteBufferFull. The Conn
	// stays usable: once the peer receives, it gets the frames sent, not
	// the refused one, then those sent next.
	for _, v := range floodVariants(t) {
		t.Run(v.name, func(t *testing.T) {
			ctx := testCtx(t)
			cfg := withSmallBuffers(v.cfg, 100*time.Millisecond)
			c, s := pair(t, cfg)
			size := min(16<<10, c.MaxFrameBytes())
			n := 0
			var err error
			for ; err == nil; n++ {
				err = c.Send(ctx, frame(n, size))
			}
			n-- // the refused one
			require.ErrorIs(t, err, tcp.ErrWriteBufferFull, "after %d frames", n)
			assert.NotErrorIs(t, err, transport.ErrClosed)
			assert.Regexp(t, `^tcp: send of \d+ bytes to 127\.0\.0\.1:\d+: tcp: write buffer full for 100ms \(WriteBufferBytes is 65536\)$`, err.Error())

			recvSeq(t, ctx, s, n, size)
			require.NoError(t, c.Send(ctx, []byte("after")))
			f, err := s.Recv(ctx)
			require.NoError(t, err)
			assert.Equal(t, "after", string(f), "the frame after those sent")
			pingPong(t, ctx, c, s)
		})
	}
}

func TestCloseFlushes(t *testing.T) {
	// Frames queued when Close is called, more than the peer's buffers
	// and the kernel's hold (about 4 MiB here), still reach the peer,
	// which then sees the end of the stream.
	const frames = 100
	for _, v := range variants(t) {
		t.Run(v.name, func(t *testing.T) {
			ctx := testCtx(t)
			cfg := v.cfg
			cfg.WriteBufferBytes, cfg.ReadBufferBytes = 16<<20, 64<<10
			c, s := pair(t, cfg)
			size := min(64<<10, c.MaxFrameBytes())
			for i := range frames {
				require.NoError(t, c.Send(ctx, frame(i, size)))
			}
			require.NoError(t, c.Close())
			require.ErrorIs(t, c.Send(ctx, []byte("x")), transport.ErrClosed, "Send after Close")

			recvSeq(t, ctx, s, frames, size)
			_, err := s.Recv(ctx)
			require.ErrorIs(t, err, transport.ErrClosed, "Recv after the frames")
			assert.ErrorIs(t, err, io.EOF)
			assert.Regexp(t, `^tcp: connection closed by peer 127\.0\.0\.1:\d+: transport: closed \(EOF\)$`, err.Error())
			assert.ErrorIs(t, s.Send(ctx, []byte("x")), transport.ErrClosed, "Send once Recv reported the close")
			await(t, c.Done(), "end of the closed Conn")
			await(t, s.Done(), "end of its peer")
		})
	}
}

func TestCloseBounded(t *testing.T) {
	// The peer never receives: Close returns, and the closed Conn gives
	// up delivering its queued frames after WriteTimeout. The peer gets
	// the frames that reached it, then an error.
	for _, v := range floodVariants(t) {
		t.Run(v.name, func(t *testing.T) {
			ctx := testCtx(t)
			c, s := pair(t, withSmallBuffers(v.cfg, 100*time.Millisecond))
			size := min(16<<10, c.MaxFrameBytes())
			n := 0
			for ; ; n++ {
				if err := c.Send(ctx, frame(n, size)); err != nil {
					require.ErrorIs(t, err, tcp.ErrWriteBufferFull)
					break
				}
			}
			require.NoError(t, c.Close())
			await(t, c.Done(), "end of the closed Conn, whose peer does not receive")

			got := 0
			for ; ; got++ {
				f, err := s.Recv(ctx)
				if err != nil {
					require.ErrorIs(t, err, transport.ErrClosed)
					break
				}
				require.Equal(t, frame(got, size), f, "frame %d", got)
			}
			assert.LessOrEqual(t, got, n, "frames received of those sent")
		})
	}
}

func TestSendAfterPeerDead(t *testing.T) {
	// A Send blocked on a full buffer returns when the Conn learns that
	// its peer is dead: here a peer that reads nothing and sends nothing.
	ctx := testCtx(t)
	tr := newTransport(t, tcp.Config{
		HeartbeatInterval: 20 * time.Millisecond,
		DeadAfter:         200 * time.Millisecond,
		WriteBufferBytes:  64 << 10,
	})
	l := listen(t, tr)
	nc := rawDial(t, l.Addr().String())
	_, err := nc.Write(preamble(1 << 20))
	require.NoError(t, err)
	readPreamble(t, nc, transport.DefaultMaxFrameBytes)
	sc, err := l.Accept(ctx)
	require.NoError(t, err)
	s := sc.(*tcp.Conn)
	closeAtEnd(t, s)
	for i := 0; ; i++ {
		if err = s.Send(ctx, frame(i, 16<<10)); err != nil {
			break
		}
	}
	require.True(t, errors.Is(err, tcp.ErrPeerDead), "Send: %v", err)
	require.ErrorIs(t, err, transport.ErrClosed)
}

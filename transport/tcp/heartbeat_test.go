package tcp_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// Short heartbeats, with a wide margin (50 intervals) for a loaded
// machine that stalls a process, for tests that let several DeadAfter
// periods pass.
const (
	testHeartbeat = 20 * time.Millisecond
	testDeadAfter = time.Second
)

func TestDeadPeer(t *testing.T) {
	// A raw peer completes the preamble, sends a frame, then nothing,
	// not even heartbeats: the Conn returns the frame, then declares the
	// peer dead and closes.
	cfg := tcp.Config{HeartbeatInterval: 20 * time.Millisecond, DeadAfter: 200 * time.Millisecond}
	for _, tc := range []struct {
		name    string
		connect func(t *testing.T, tr *tcp.Transport) (*tcp.Conn, net.Conn)
	}{
		{"accepted end", func(t *testing.T, tr *tcp.Transport) (*tcp.Conn, net.Conn) {
			l := listen(t, tr)
			nc := rawDial(t, l.Addr().String())
			_, err := nc.Write(preamble(1 << 20))
			require.NoError(t, err)
			readPreamble(t, nc, transport.DefaultMaxFrameBytes)
			s, err := l.Accept(testCtx(t))
			require.NoError(t, err)
			return s.(*tcp.Conn), nc
		}},
		{"dialed end", func(t *testing.T, tr *tcp.Transport) (*tcp.Conn, net.Conn) {
			nl, accepted := rawListen(t)
			type result struct {
				c   transport.Conn
				err error
			}
			dialed := make(chan result, 1)
			go func() {
				c, err := tr.Dial(testCtx(t), nl.Addr().String())
				dialed <- result{c, err}
			}()
			nc := await(t, accepted, "raw Accept")
			_, err := nc.Write(preamble(1 << 20))
			require.NoError(t, err)
			readPreamble(t, nc, transport.DefaultMaxFrameBytes)
			r := await(t, dialed, "Dial")
			require.NoError(t, r.err)
			return r.c.(*tcp.Conn), nc
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			c, nc := tc.connect(t, newTransport(t, cfg))
			closeAtEnd(t, c)
			_, err := nc.Write(record([]byte("last words")))
			require.NoError(t, err)

			f, err := c.Recv(ctx)
			require.NoError(t, err)
			require.Equal(t, "last words", string(f))
			_, err = c.Recv(ctx)
			require.ErrorIs(t, err, tcp.ErrPeerDead)
			require.ErrorIs(t, err, transport.ErrClosed)
			assert.Regexp(t, `^tcp: peer dead: nothing received from 127\.0\.0\.1:\d+ for 200ms: transport: closed$`, err.Error())
			err = c.Send(ctx, []byte("x"))
			assert.ErrorIs(t, err, tcp.ErrPeerDead, "Send to a dead peer")
			assert.ErrorIs(t, err, transport.ErrClosed, "Send to a dead peer")
			await(t, c.Done(), "end of the Conn")
			requireEnd(t, nc, "the dead peer's socket is closed")
		})
	}
}

func TestIdlePairStaysUp(t *testing.T) {
	// Two Conns that send no frame for several DeadAfter periods stay up
	// on heartbeats, which Recv does not return. The pairs of all
	// variants idle at once.
	t.Parallel() // mostly waits
	ctx := testCtx(t)
	type idle struct {
		name    string
		c, s    *tcp.Conn
		pending <-chan recvResult
	}
	var pairs []idle
	for _, v := range variants(t) {
		cfg := v.cfg
		cfg.HeartbeatInterval, cfg.DeadAfter = testHeartbeat, testDeadAfter
		c, s := pair(t, cfg)
		pairs = append(pairs, idle{v.name, c, s, goRecv(ctx, s)})
	}
	<-time.After(2 * testDeadAfter) // let time pass; nothing to wait for
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			requireUp(t, p.c, p.s)
			require.NoError(t, p.c.Send(ctx, []byte("still here")))
			r := await(t, p.pending, "Recv pending through the heartbeats")
			require.NoError(t, r.err)
			require.Equal(t, "still here", string(r.frame))
			pingPong(t, ctx, p.c, p.s)
		})
	}
}

func TestSlowReceiverNotDead(t *testing.T) {
	// While the application does not call Recv and the receive buffer is
	// full, the reader does not read the socket: that is not a dead peer,
	// however long it lasts. Nor is a peer whose writer is blocked. The
	// pairs of all cases wait at once.
	t.Parallel() // mostly waits
	const size = 16 << 10
	ctx := testCtx(t)
	type flooded struct {
		name         string
		c, s         *tcp.Conn
		fromC, fromS int // frames sent each way
	}
	var pairs []flooded
	for _, tc := range []struct {
		name     string
		bothWays bool
	}{
		{"one way", false},
		{"both ways", true},
	} {
		c, s := pair(t, tcp.Config{
			HeartbeatInterval: testHeartbeat,
			DeadAfter:         testDeadAfter,
			WriteBufferBytes:  64 << 10,
			ReadBufferBytes:   64 << 10,
		})
		p := flooded{name: tc.name, c: c, s: s, fromC: sendUntilBlocked(t, ctx, c, size)}
		if tc.bothWays {
			p.fromS = sendUntilBlocked(t, ctx, s, size)
		}
		pairs = append(pairs, p)
	}
	<-time.After(2 * testDeadAfter) // let time pass; nothing to wait for
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			requireUp(t, p.c, p.s)
			recvSeq(t, ctx, p.s, p.fromC, size)
			recvSeq(t, ctx, p.c, p.fromS, size)
			pingPong(t, ctx, p.c, p.s)
		})
	}
}

// requireUp checks that the goroutines of the Conns are still running.
func requireUp(t *testing.T, conns ...*tcp.Conn) {
	t.Helper()
	for _, c := range conns {
		select {
		case <-c.Done():
			_, err := c.Recv(testCtx(t))
			require.Fail(t, "Conn ended", "%v: %v", c.LocalAddr(), err)
		default:
		}
	}
}

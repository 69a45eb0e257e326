package tcp_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// badPreambles are what raw peers send in place of a good preamble.
var badPreambles = []struct {
	name     string
	sent     []byte
	protocol bool // whether the error wraps tcp.ErrProtocol
	wantErr  string
}{
	{"wrong magic", []byte("GET / HTTP/1.1\r\n"), true, `preamble starts with "GET ", want "SION"`},
	{"wrong version", append([]byte("SION\x02"), 0, 0, 4, 0), true, `peer speaks protocol version 2, want 1`},
	{"cut short", []byte("SIO"), false, `reading preamble: unexpected EOF`},
}

func TestBadPreambleDialed(t *testing.T) {
	// A raw server answers Dial with a bad preamble: Dial fails and
	// closes the socket, without sending its own preamble.
	for _, tc := range badPreambles {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			nl, accepted := rawListen(t)
			dialed := make(chan error, 1)
			go func() {
				c, err := newTransport(t, tcp.Config{}).Dial(ctx, nl.Addr().String())
				if c != nil {
					c.Close()
				}
				dialed <- err
			}()
			nc := await(t, accepted, "raw Accept")
			sendAndEnd(t, nc, tc.sent)
			err := await(t, dialed, "Dial")
			require.Error(t, err)
			assert.Equal(t, tc.protocol, errors.Is(err, tcp.ErrProtocol), "error wraps ErrProtocol")
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Regexp(t, `^tcp: dial 127\.0\.0\.1:\d+: `, err.Error())
			assert.Empty(t, readToEnd(t, nc, "the dialer's end"), "the dialer closes its end without sending its preamble")
		})
	}
}

// sendAndEnd writes b on nc and ends nc's stream: a peer waiting for
// more bytes than b reads an EOF.
func sendAndEnd(t *testing.T, nc net.Conn, b []byte) {
	t.Helper()
	_, err := nc.Write(b)
	require.NoError(t, err)
	// The peer may already have refused b and reset the connection: the
	// half-close then fails, and is not needed.
	nc.(*net.TCPConn).CloseWrite()
}

func TestBadPreambleAccepted(t *testing.T) {
	// A raw client sends a bad preamble: the Listener closes that socket,
	// Accept does not return it and keeps accepting.
	for _, tc := range badPreambles {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			tr := newTransport(t, tcp.Config{})
			l := listen(t, tr)
			type result struct {
				s   transport.Conn
				err error
			}
			accepted := make(chan result, 1)
			go func() {
				s, err := l.Accept(ctx)
				accepted <- result{s, err}
			}()
			nc := rawDial(t, l.Addr().String())
			readPreamble(t, nc, transport.DefaultMaxFrameBytes)
			sendAndEnd(t, nc, tc.sent)
			requireEnd(t, nc, "the Listener closes the bad connection")

			c, err := tr.Dial(ctx, l.Addr().String())
			require.NoError(t, err)
			closeAtEnd(t, c.(*tcp.Conn))
			r := await(t, accepted, "Accept")
			require.NoError(t, r.err, "Accept")
			s := r.s
			closeAtEnd(t, s.(*tcp.Conn))
			assert.Equal(t, c.LocalAddr().String(), s.RemoteAddr().String(), "the Conn Accept returned")
			pingPong(t, ctx, c, s)
		})
	}
}

func TestPeerAnnouncesMore(t *testing.T) {
	// A raw peer announcing a larger limit than ours gets ours.
	ctx := testCtx(t)
	tr := newTransport(t, tcp.Config{MaxFrameBytes: 100})
	l := listen(t, tr)
	nc := rawDial(t, l.Addr().String())
	_, err := nc.Write(preamble(1 << 30))
	require.NoError(t, err)
	readPreamble(t, nc, 100)
	s, err := l.Accept(ctx)
	require.NoError(t, err)
	closeAtEnd(t, s.(*tcp.Conn))
	assert.Equal(t, 100, s.MaxFrameBytes())
	nc.Close() // or s, closed, waits DeadAfter for the end of the peer's stream
}

func TestOversizeFrame(t *testing.T) {
	// A raw peer announces a frame over the limit: that Conn closes with
	// an error saying so, after the frames before; another Conn of the
	// same Listener is unaffected.
	const limit = 1000
	for _, tc := range []struct {
		name   string
		length uint32
	}{
		{"one byte over", limit + 1},
		{"over 2^31", 1 << 31},
		{"just under the heartbeat", 0xFFFF_FFFE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			tr := newTransport(t, tcp.Config{MaxFrameBytes: limit})
			l := listen(t, tr)
			nc := rawDial(t, l.Addr().String())
			_, err := nc.Write(preamble(1 << 20))
			require.NoError(t, err)
			readPreamble(t, nc, limit)
			bad, err := l.Accept(ctx)
			require.NoError(t, err)
			closeAtEnd(t, bad.(*tcp.Conn))
			good, goodPeer := connect(t, tr, l)

			wire := append(record([]byte("before")), binary.BigEndian.AppendUint32(nil, tc.length)...)
			_, err = nc.Write(wire)
			require.NoError(t, err)
			f, err := bad.Recv(ctx)
			require.NoError(t, err)
			require.Equal(t, "before", string(f))
			_, err = bad.Recv(ctx)
			require.ErrorIs(t, err, tcp.ErrProtocol)
			require.ErrorIs(t, err, transport.ErrClosed)
			assert.Regexp(t, `^tcp: protocol violation: 127\.0\.0\.1:\d+ sent a frame of \d+ bytes, over MaxFrameBytes 1000; connection closed: transport: closed$`, err.Error())
			assert.ErrorIs(t, bad.Send(ctx, []byte("x")), tcp.ErrProtocol, "Send on the closed Conn")
			await(t, bad.(*tcp.Conn).Done(), "end of the bad Conn")
			requireEnd(t, nc, "the raw peer sees the end")

			pingPong(t, ctx, good, goodPeer)
		})
	}
}

func TestStalledHandshake(t *testing.T) {
	// A client that connects and sends nothing delays no other
	// connection, and is dropped after HandshakeTimeout.
	t.Parallel() // mostly waits
	for _, v := range variants(t) {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel() // each waits HandshakeTimeout
			ctx := testCtx(t)
			cfg := v.cfg
			cfg.HandshakeTimeout = 500 * time.Millisecond // ample for the good one
			tr := newTransport(t, cfg)
			l := listen(t, tr)
			stalled := rawDial(t, l.Addr().String())
			c, s := connect(t, tr, l)
			pingPong(t, ctx, c, s)
			requireEnd(t, stalled, "the Listener gives up on the stalled client")
		})
	}
}

func TestDialTimeouts(t *testing.T) {
	// A server that accepts but never answers: Dial gives up at its ctx's
	// deadline or at HandshakeTimeout, whichever is first.
	for _, tc := range []struct {
		name             string
		ctxTimeout       time.Duration
		handshakeTimeout time.Duration
		wantErr          error
		wantMsg          string
	}{
		{"ctx", 100 * time.Millisecond, time.Hour, context.DeadlineExceeded, "context deadline exceeded"},
		{"HandshakeTimeout", time.Hour, 100 * time.Millisecond, os.ErrDeadlineExceeded, "handshake not done within 100ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nl, _ := rawListen(t)
			tr := newTransport(t, tcp.Config{HandshakeTimeout: tc.handshakeTimeout})
			ctx, cancel := context.WithTimeout(testCtx(t), tc.ctxTimeout)
			defer cancel()
			c, err := tr.Dial(ctx, nl.Addr().String())
			require.Error(t, err)
			assert.Nil(t, c)
			assert.ErrorIs(t, err, tc.wantErr)
			assert.Contains(t, err.Error(), tc.wantMsg)
		})
	}
}

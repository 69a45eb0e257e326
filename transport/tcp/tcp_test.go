package tcp_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sion-go/sion/internal/testcert"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
	"github.com/sion-go/sion/transport/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// variant is a configuration that test bodies run over.
type variant struct {
	name string
	cfg  tcp.Config
}

// variants are the configurations that every test body meant for all of
// them runs over. A TLS config serves both as server and client config
// of the one Transport that listens and dials.
func variants(t *testing.T) []variant {
	certs := testcert.New(t)
	serverAuth := certs.PeerTLS("node")
	serverAuth.ClientAuth = tls.NoClientCert
	return []variant{
		{"defaults", tcp.Config{}},
		{"small", tcp.Config{
			MaxFrameBytes:    transporttest.MinFrameBytes,
			WriteBufferBytes: 1 << 10,
			ReadBufferBytes:  1 << 10,
			BacklogConns:     2,
		}},
		{"TLS", tcp.Config{TLS: serverAuth}},
		{"mutual TLS", tcp.Config{TLS: certs.PeerTLS("node")}},
	}
}

func TestConformance(t *testing.T) {
	for _, v := range variants(t) {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel() // the suite waits for blocked calls' deadlines
			tr := newTransport(t, v.cfg)
			caps := transporttest.Caps{ // BufferFrames unknown: bytes
				MaxFrameBytes:     tr.MaxFrameBytes(),
				PendingFrameBytes: min(tcp.DefaultPendingReadBytes, tr.MaxFrameBytes()),
			}
			transporttest.Run(t, func(t *testing.T) (transport.Transport, string) {
				return newTransport(t, v.cfg), "127.0.0.1:0"
			}, caps)
		})
	}
}

func TestConformanceFreshAddr(t *testing.T) {
	// Listen("") in place of a port 0; the zero Transport.
	transporttest.Run(t, func(t *testing.T) (transport.Transport, string) {
		return new(tcp.Transport), ""
	}, transporttest.Caps{PendingFrameBytes: tcp.DefaultPendingReadBytes})
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     tcp.Config
		wantErr string // a regexp; "" for none
	}{
		{"zero means defaults", tcp.Config{}, ""},
		{"set", tcp.Config{MaxFrameBytes: 10, HeartbeatInterval: 1, DeadAfter: 2, WriteTimeout: 1}, ""},
		{"largest MaxFrameBytes", tcp.Config{MaxFrameBytes: tcp.MaxFrameBytesLimit}, ""},
		{"HeartbeatInterval alone scales DeadAfter", tcp.Config{HeartbeatInterval: 1 << 40}, ""},
		{"negative MaxFrameBytes", tcp.Config{MaxFrameBytes: -1}, `^tcp: Config\.MaxFrameBytes is -1, want >= 0$`},
		{"negative HandshakeTimeout", tcp.Config{HandshakeTimeout: -1}, `^tcp: Config\.HandshakeTimeout is -1ns, want >= 0$`},
		{"negative HeartbeatInterval", tcp.Config{HeartbeatInterval: -1}, `^tcp: Config\.HeartbeatInterval is -1ns`},
		{"negative DeadAfter", tcp.Config{DeadAfter: -1}, `^tcp: Config\.DeadAfter is -1ns`},
		{"negative WriteBufferBytes", tcp.Config{WriteBufferBytes: -1}, `^tcp: Config\.WriteBufferBytes is -1`},
		{"negative WriteTimeout", tcp.Config{WriteTimeout: -1}, `^tcp: Config\.WriteTimeout is -1ns`},
		{"negative ReadBufferBytes", tcp.Config{ReadBufferBytes: -1}, `^tcp: Config\.ReadBufferBytes is -1`},
		{"negative BacklogConns", tcp.Config{BacklogConns: -1}, `^tcp: Config\.BacklogConns is -1`},
		{"negative MaxHandshakes", tcp.Config{MaxHandshakes: -1}, `^tcp: Config\.MaxHandshakes is -1`},
		{"negative PendingReadBytes", tcp.Config{PendingReadBytes: -1}, `^tcp: Config\.PendingReadBytes is -1`},
		{"DeadAfter equal to HeartbeatInterval", tcp.Config{HeartbeatInterval: 5, DeadAfter: 5},
			`^tcp: Config\.DeadAfter is 5ns, want more than HeartbeatInterval \(5ns\)$`},
		{"DeadAfter below the default HeartbeatInterval", tcp.Config{DeadAfter: 1},
			`^tcp: Config\.DeadAfter is 1ns, want more than HeartbeatInterval \(1s\)$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := tcp.New(tc.cfg)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Nil(t, tr)
				assert.Regexp(t, tc.wantErr, err.Error())
				return
			}
			require.NoError(t, err)
			want := tc.cfg.MaxFrameBytes
			if want == 0 {
				want = transport.DefaultMaxFrameBytes
			}
			assert.Equal(t, want, tr.MaxFrameBytes())
		})
	}
}

func TestNewMaxFrameBytesOverLimit(t *testing.T) {
	over := int64(tcp.MaxFrameBytesLimit) + 1
	if over > math.MaxInt {
		t.Skip("an int cannot hold MaxFrameBytesLimit+1")
	}
	tr, err := tcp.New(tcp.Config{MaxFrameBytes: int(over)})
	assert.Nil(t, tr)
	assert.EqualError(t, err, "tcp: Config.MaxFrameBytes is 2147483648, want <= 2147483647")
}

func TestAddresses(t *testing.T) {
	tr := newTransport(t, tcp.Config{})
	l, err := tr.Listen("")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	a, ok := l.Addr().(*net.TCPAddr)
	require.True(t, ok, "Addr is a %T", l.Addr())
	assert.True(t, a.IP.Equal(net.IPv4(127, 0, 0, 1)), "Listen(\"\") on %v", a)
	assert.NotZero(t, a.Port)

	_, err = tr.Listen(l.Addr().String())
	require.ErrorIs(t, err, transport.ErrAddrInUse)
	assert.Regexp(t, `^tcp: listen 127\.0\.0\.1:\d+: transport: address in use \(`, err.Error())
	require.NoError(t, l.Close())
	_, err = tr.Dial(testCtx(t), l.Addr().String())
	require.ErrorIs(t, err, transport.ErrNoListener)
	assert.Regexp(t, `^tcp: dial 127\.0\.0\.1:\d+: transport: no listener \(`, err.Error())
}

func TestFramesTooLarge(t *testing.T) {
	// Each end's limit is the smaller of the two announced, whoever
	// dials; Sends over it are refused, at it accepted.
	for _, tc := range []struct {
		name             string
		dialer, listener int
		want             int
	}{
		{"dialer smaller", 500, 1000, 500},
		{"listener smaller", 1000, 500, 500},
		{"equal", 700, 700, 700},
		{"default and small", 0, transporttest.MinFrameBytes, transporttest.MinFrameBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			dialer := newTransport(t, tcp.Config{MaxFrameBytes: tc.dialer})
			listener := newTransport(t, tcp.Config{MaxFrameBytes: tc.listener})
			c, s := connect(t, dialer, listen(t, listener))
			for _, ends := range []struct {
				name     string
				from, to *tcp.Conn
			}{{"dialed to accepted", c, s}, {"accepted to dialed", s, c}} {
				require.Equal(t, tc.want, ends.from.MaxFrameBytes(), "%s: MaxFrameBytes", ends.name)
				err := ends.from.Send(ctx, make([]byte, tc.want+1))
				require.ErrorIs(t, err, transport.ErrFrameTooLarge, ends.name)
				assert.EqualError(t, err, fmt.Sprintf(
					"tcp: send of %d bytes: transport: frame too large (MaxFrameBytes is %d)", tc.want+1, tc.want))
				require.NoError(t, ends.from.Send(ctx, frame(1, tc.want)), ends.name)
				f, err := ends.to.Recv(ctx)
				require.NoError(t, err, ends.name)
				require.Equal(t, frame(1, tc.want), f, ends.name)
			}
		})
	}
}

func TestTLSConnectionStatePlain(t *testing.T) {
	c, s := pair(t, tcp.Config{})
	for _, end := range []*tcp.Conn{c, s} {
		_, ok := end.TLSConnectionState()
		assert.False(t, ok, "TLSConnectionState of a plain TCP Conn")
	}
}

func TestDialBacklog(t *testing.T) {
	// With BacklogConns established connections not yet accepted, the
	// Listener takes in no more sockets: a Dial waits until an Accept
	// makes room, or its ctx is done. The handshakes in progress when the
	// backlog fills may still complete, so a Dial or two may pass first.
	ctx := testCtx(t)
	tr := newTransport(t, tcp.Config{BacklogConns: 1})
	l := listen(t, tr)
	first, err := tr.Dial(ctx, l.Addr().String())
	require.NoError(t, err)
	closeAtEnd(t, first.(*tcp.Conn))
	established := map[string]transport.Conn{first.LocalAddr().String(): first}
	for {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		c, err := tr.Dial(short, l.Addr().String())
		cancel()
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded, "Dial with the backlog full")
			break
		}
		closeAtEnd(t, c.(*tcp.Conn))
		established[c.LocalAddr().String()] = c
		require.LessOrEqual(t, len(established), 1+tcp.DefaultMaxHandshakes, "Dials established with BacklogConns 1")
	}
	t.Logf("%d Dials established before one waited", len(established))

	type result struct {
		c   transport.Conn
		err error
	}
	dialed := make(chan result, 1)
	go func() {
		c, err := tr.Dial(ctx, l.Addr().String())
		dialed <- result{c, err}
	}()
	for range len(established) + 1 {
		s, err := l.Accept(ctx)
		require.NoError(t, err, "Accept")
		closeAtEnd(t, s.(*tcp.Conn))
		c, ok := established[s.RemoteAddr().String()]
		if !ok {
			r := await(t, dialed, "Dial waiting for room")
			require.NoError(t, r.err)
			c = r.c
			closeAtEnd(t, c.(*tcp.Conn))
			require.Equal(t, c.LocalAddr().String(), s.RemoteAddr().String(), "Accept after the backlog")
		}
		delete(established, s.RemoteAddr().String())
		require.NoError(t, c.Send(ctx, []byte("hello")))
		f, err := s.Recv(ctx)
		require.NoError(t, err)
		assert.Equal(t, "hello", string(f))
	}
	assert.Empty(t, established, "established Dials never accepted")
}

func TestListenerCloseEndsHandshakes(t *testing.T) {
	// Listener.Close ends the handshakes in progress, however long
	// HandshakeTimeout, and closes the connections not yet accepted.
	for _, v := range variants(t) {
		t.Run(v.name, func(t *testing.T) {
			ctx := testCtx(t)
			cfg := v.cfg
			cfg.HandshakeTimeout = time.Hour
			tr := newTransport(t, cfg)
			l, err := tr.Listen("")
			require.NoError(t, err)
			stalled := rawDial(t, l.Addr().String())
			established, err := tr.Dial(ctx, l.Addr().String())
			require.NoError(t, err)
			closeAtEnd(t, established.(*tcp.Conn))

			closed := make(chan error, 1)
			go func() { closed <- l.Close() }()
			require.NoError(t, await(t, closed, "Listener.Close"))
			requireEnd(t, stalled, "the stalled client")
			_, err = established.Recv(ctx)
			require.ErrorIs(t, err, transport.ErrClosed, "Recv on the Conn never accepted")
		})
	}
}

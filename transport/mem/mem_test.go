package mem_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
	"github.com/sion-go/sion/transport/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// configs are the variants every test body runs over.
var configs = []struct {
	name string
	cfg  mem.Config
}{
	{"defaults", mem.Config{}},
	{"small", mem.Config{MaxFrameBytes: transporttest.MinFrameBytes, BufferFrames: 1, BacklogConns: 1}},
	{"odd", mem.Config{MaxFrameBytes: 1000, BufferFrames: 7, BacklogConns: 3}},
}

func newNetwork(t *testing.T, cfg mem.Config) *mem.Network {
	t.Helper()
	n, err := mem.NewNetwork(cfg)
	require.NoError(t, err)
	return n
}

func TestConformance(t *testing.T) {
	for _, tc := range configs {
		t.Run(tc.name, func(t *testing.T) {
			n := newNetwork(t, tc.cfg)
			caps := transporttest.Caps{MaxFrameBytes: n.MaxFrameBytes(), BufferFrames: n.BufferFrames()}
			transporttest.Run(t, func(t *testing.T) (transport.Transport, string) {
				return newNetwork(t, tc.cfg), "switch-1"
			}, caps)
		})
	}
}

func TestConformanceFreshAddr(t *testing.T) {
	// Listen("") in place of a named address; the zero Network.
	transporttest.Run(t, func(t *testing.T) (transport.Transport, string) {
		return new(mem.Network), ""
	}, transporttest.Caps{BufferFrames: mem.DefaultBufferFrames})
}

func TestNewNetwork(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		cfg                         mem.Config
		wantErr                     bool
		maxFrameBytes, bufferFrames int
	}{
		{"zero means defaults", mem.Config{}, false, transport.DefaultMaxFrameBytes, mem.DefaultBufferFrames},
		{"set", mem.Config{MaxFrameBytes: 10, BufferFrames: 2, BacklogConns: 3}, false, 10, 2},
		{"negative MaxFrameBytes", mem.Config{MaxFrameBytes: -1}, true, 0, 0},
		{"negative BufferFrames", mem.Config{BufferFrames: -1}, true, 0, 0},
		{"negative BacklogConns", mem.Config{BacklogConns: -1}, true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := mem.NewNetwork(tc.cfg)
			if tc.wantErr {
				require.Error(t, err)
				assert.Nil(t, n)
				assert.Regexp(t, `^mem: Config\.\w+ is -1`, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.maxFrameBytes, n.MaxFrameBytes())
			assert.Equal(t, tc.bufferFrames, n.BufferFrames())
		})
	}
}

func TestListenFreshAddr(t *testing.T) {
	n := newNetwork(t, mem.Config{})
	// Named addresses in the fresh form are skipped, not handed out again.
	for _, a := range []string{"@1", "@3"} {
		l, err := n.Listen(a)
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
	}
	seen := map[string]bool{"@1": true, "@3": true}
	for range 100 {
		l, err := n.Listen("")
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		a := l.Addr()
		assert.Equal(t, "mem", a.Network())
		assert.Regexp(t, `^@[0-9]+$`, a.String())
		require.False(t, seen[a.String()], "address %s handed out twice", a)
		seen[a.String()] = true
	}
	// A closed Listener's fresh address is not handed out again.
	l, err := n.Listen("")
	require.NoError(t, err)
	old := l.Addr().String()
	require.NoError(t, l.Close())
	l, err = n.Listen("")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	assert.NotEqual(t, old, l.Addr().String())
}

func TestAddrReuse(t *testing.T) {
	n := newNetwork(t, mem.Config{})
	ctx := t.Context()
	for i := range 3 {
		l, err := n.Listen("switch-1")
		require.NoError(t, err, "Listen %d", i)
		c, err := n.Dial(ctx, "switch-1")
		require.NoError(t, err)
		s, err := l.Accept(ctx)
		require.NoError(t, err)
		msg := []byte(fmt.Sprint("round ", i))
		require.NoError(t, c.Send(ctx, msg))
		got, err := s.Recv(ctx)
		require.NoError(t, err)
		assert.Equal(t, msg, got)
		assert.Equal(t, mem.Addr("switch-1"), s.LocalAddr())
		assert.Equal(t, mem.Addr("switch-1"), c.RemoteAddr())
		require.NoError(t, l.Close())
		// The accepted Conn outlives its Listener.
		require.NoError(t, s.Send(ctx, msg))
		got, err = c.Recv(ctx)
		require.NoError(t, err)
		assert.Equal(t, msg, got)
		require.NoError(t, c.Close())
		require.NoError(t, s.Close())
	}
}

func TestNetworksIsolated(t *testing.T) {
	a, b := newNetwork(t, mem.Config{}), newNetwork(t, mem.Config{})
	l, err := a.Listen("x")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	_, err = b.Dial(t.Context(), "x")
	require.ErrorIs(t, err, transport.ErrNoListener)
	lb, err := b.Listen("x")
	require.NoError(t, err, "same address in another Network")
	require.NoError(t, lb.Close())
}

func TestDialBacklog(t *testing.T) {
	// With the backlog full, Dial blocks until Accept makes room or its
	// ctx is done.
	n := newNetwork(t, mem.Config{BacklogConns: 1})
	ctx := t.Context()
	l, err := n.Listen("")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	first, err := n.Dial(ctx, l.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { first.Close() })

	short, cancel := context.WithCancel(ctx)
	cancel()
	_, err = n.Dial(short, l.Addr().String())
	require.ErrorIs(t, err, context.Canceled)

	dialed := make(chan error, 1)
	go func() {
		c, err := n.Dial(ctx, l.Addr().String())
		if err == nil {
			err = c.Send(ctx, []byte("second"))
			c.Close()
		}
		dialed <- err
	}()
	s1, err := l.Accept(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { s1.Close() })
	s2, err := l.Accept(ctx) // the blocked Dial's connection
	require.NoError(t, err)
	t.Cleanup(func() { s2.Close() })
	require.NoError(t, <-dialed)
	got, err := s2.Recv(ctx)
	require.NoError(t, err)
	assert.Equal(t, "second", string(got))
	require.NoError(t, first.Send(ctx, []byte("first")))
	got, err = s1.Recv(ctx)
	require.NoError(t, err)
	assert.Equal(t, "first", string(got))
}

func TestErrors(t *testing.T) {
	n := newNetwork(t, mem.Config{MaxFrameBytes: 4})
	ctx := t.Context()
	l, err := n.Listen("a")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	_, err = n.Listen("a")
	assert.EqualError(t, err, `mem: listen "a": transport: address in use`)
	_, err = n.Dial(ctx, "b")
	assert.EqualError(t, err, `mem: dial "b": transport: no listener`)

	c, err := n.Dial(ctx, "a")
	require.NoError(t, err)
	s, err := l.Accept(ctx)
	require.NoError(t, err)
	assert.EqualError(t, c.Send(ctx, make([]byte, 5)),
		"mem: send of 5 bytes: transport: frame too large (MaxFrameBytes is 4)")
	require.NoError(t, c.Close())
	_, err = s.Recv(ctx)
	require.ErrorIs(t, err, transport.ErrClosed)
	assert.ErrorIs(t, err, io.EOF, "Recv after the peer closed")
	_, err = c.Recv(ctx)
	assert.NotErrorIs(t, err, io.EOF, "Recv after a local Close")
	require.NoError(t, s.Close())
	require.NoError(t, l.Close())
	_, err = l.Accept(ctx)
	assert.EqualError(t, err, `mem: accept on closed listener "a": transport: closed`)
}

package udp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/udp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait for something that must happen, so that
// a hang fails the test; a correct Conn on loopback never reaches it.
const waitTimeout = 30 * time.Second

var (
	loopback      = netip.MustParseAddr("127.0.0.1")
	loopbackBcast = netip.MustParseAddr("127.255.255.255")
)

// testCtx returns a context done after waitTimeout or when t ends.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// listen listens on addr and closes the Conn when t ends.
func listen(t *testing.T, addr string, cfg udp.Config) *udp.Conn {
	t.Helper()
	c, err := udp.Listen(addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// at returns c's port on 127.0.0.1, where c can be reached whether it is
// bound to 127.0.0.1 or to 0.0.0.0.
func at(c *udp.Conn) netip.AddrPort { return netip.AddrPortFrom(loopback, c.LocalAddr().Port()) }

// payload returns n bytes that differ from those of another n or seed.
func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

// recv receives one datagram on c, which must come.
func recv(t *testing.T, c *udp.Conn) ([]byte, netip.AddrPort) {
	t.Helper()
	b, from, err := c.Recv(testCtx(t))
	require.NoError(t, err)
	return b, from
}

// variant is a configuration that test bodies run over.
type variant struct {
	name string
	cfg  udp.Config
}

var variants = []variant{
	{"defaults", udp.Config{}},
	{"small", udp.Config{MaxDatagramBytes: 100}},
	{"largest", udp.Config{MaxDatagramBytes: udp.MaxDatagramBytesLimit}},
	{"shared", udp.Config{Shared: true}},
}

func TestListen(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			c := listen(t, "127.0.0.1:0", v.cfg)
			assert.Equal(t, loopback, c.LocalAddr().Addr())
			assert.NotZero(t, c.LocalAddr().Port())
			want := v.cfg.MaxDatagramBytes
			if want == 0 {
				want = udp.DefaultMaxDatagramBytes
			}
			assert.Equal(t, want, c.MaxDatagramBytes())

			all := listen(t, ":0", v.cfg)
			assert.True(t, all.LocalAddr().Addr().IsUnspecified(), "LocalAddr %v", all.LocalAddr())
			assert.True(t, all.LocalAddr().Addr().Is4(), "LocalAddr %v", all.LocalAddr())
		})
	}
}

func TestSendRecv(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			a := listen(t, "127.0.0.1:0", v.cfg)
			b := listen(t, "127.0.0.1:0", v.cfg)
			ctx := testCtx(t)
			for _, n := range []int{0, 1, 64, a.MaxDatagramBytes()} {
				want := payload(n, byte(n))
				sent := bytes.Clone(want)
				require.NoError(t, a.Send(ctx, sent, at(b)))
				clear(sent) // Send keeps no reference
				got, from := recv(t, b)
				assert.Equal(t, want, got, "datagram of %d bytes", n)
				assert.Equal(t, a.LocalAddr(), from)
			}

			// Both ways, and Recv hands over a slice of its own.
			require.NoError(t, b.Send(ctx, []byte("first"), at(a)))
			require.NoError(t, b.Send(ctx, []byte("second"), at(a)))
			first, from := recv(t, a)
			second, _ := recv(t, a)
			assert.Equal(t, b.LocalAddr(), from)
			assert.ElementsMatch(t, []string{"first", "second"}, []string{string(first), string(second)})
		})
	}
}

func TestSendTooLarge(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			a := listen(t, "127.0.0.1:0", v.cfg)
			b := listen(t, "127.0.0.1:0", v.cfg)
			ctx := testCtx(t)

			err := a.Send(ctx, payload(a.MaxDatagramBytes()+1, 1), at(b))
			require.ErrorIs(t, err, transport.ErrDatagramTooLarge)
			assert.NotErrorIs(t, err, transport.ErrClosed)
			sent, err := a.Broadcast(ctx, payload(a.MaxDatagramBytes()+1, 1), b.LocalAddr().Port())
			require.ErrorIs(t, err, transport.ErrDatagramTooLarge)
			assert.Empty(t, sent)

			// Nothing was sent: the first datagram b gets is the next one,
			// and a is still usable.
			require.NoError(t, a.Send(ctx, []byte("next"), at(b)))
			got, _ := recv(t, b)
			assert.Equal(t, "next", string(got))
		})
	}
}

func TestRecvTooLarge(t *testing.T) {
	small := listen(t, "127.0.0.1:0", udp.Config{MaxDatagramBytes: 100})
	big := listen(t, "127.0.0.1:0", udp.Config{})
	ctx := testCtx(t)

	for _, n := range []int{101, 200, udp.DefaultMaxDatagramBytes} {
		require.NoError(t, big.Send(ctx, payload(n, 1), at(small)))
		got, from, err := small.Recv(ctx)
		require.ErrorIs(t, err, transport.ErrDatagramTooLarge, "datagram of %d bytes", n)
		assert.NotErrorIs(t, err, transport.ErrClosed)
		assert.Nil(t, got)
		assert.Equal(t, big.LocalAddr(), from)
		assert.Contains(t, err.Error(), big.LocalAddr().String())

		// The next datagram arrives intact.
		want := payload(100, 2)
		require.NoError(t, big.Send(ctx, want, at(small)))
		got, from = recv(t, small)
		assert.Equal(t, want, got)
		assert.Equal(t, big.LocalAddr(), from)
	}
}

// TestSharedBroadcast runs three Shared Conns on one port of 0.0.0.0 (a
// socket bound to 127.0.0.1 hears no broadcast) and checks that each gets
// a Broadcast exactly once by way of 127.255.255.255. Copies by way of
// other interfaces' broadcast addresses, which the system delivers to
// this host's sockets too, come from the sender's address on that
// interface and are not counted.
func TestSharedBroadcast(t *testing.T) {
	shared := udp.Config{Shared: true}
	first := listen(t, "0.0.0.0:0", shared)
	port := first.LocalAddr().Port()
	receivers := []*udp.Conn{
		first,
		listen(t, fmt.Sprintf("0.0.0.0:%d", port), shared),
		listen(t, fmt.Sprintf("0.0.0.0:%d", port), shared),
	}
	sender := listen(t, "0.0.0.0:0", udp.Config{})
	ctx := testCtx(t)

	one, two := []byte("probe one"), []byte("probe two")
	sent, err := sender.Broadcast(ctx, one, port)
	require.NoError(t, err)
	require.Contains(t, sent, netip.AddrPortFrom(loopbackBcast, port))
	_, err = sender.Broadcast(ctx, two, port)
	require.NoError(t, err)

	// Each receiver gets one, then two, by way of loopback; the
	// loopback copies are counted until two arrives.
	for i, r := range receivers {
		counts := map[string]int{}
		for counts[string(two)] == 0 {
			got, from := recv(t, r)
			require.Contains(t, [][]byte{one, two}, got, "receiver %d", i)
			require.Equal(t, sender.LocalAddr().Port(), from.Port(), "receiver %d", i)
			if from.Addr().IsLoopback() {
				counts[string(got)]++
			}
		}
		assert.Equal(t, 1, counts[string(one)], "receiver %d: copies of the first broadcast", i)
	}
}

func TestBroadcastAddrs(t *testing.T) {
	addrs, err := udp.BroadcastAddrs()
	require.NoError(t, err)
	var loop []udp.BroadcastAddr
	for _, ba := range addrs {
		assert.NotEmpty(t, ba.Interface, "%+v", ba)
		assert.True(t, ba.Addr.Is4(), "%+v", ba)
		assert.False(t, ba.Addr.IsUnspecified(), "%+v", ba)
		assert.False(t, ba.Local.Addr().IsUnspecified(), "%+v", ba)
		assert.True(t, ba.Local.Addr().Is4(), "%+v", ba)
		assert.LessOrEqual(t, ba.Local.Bits(), 30, "%+v", ba)
		assert.True(t, ba.Local.Contains(ba.Addr), "%+v", ba)
		// Addr is the last address of Local's network.
		next := ba.Addr.Next()
		assert.True(t, !next.IsValid() || !ba.Local.Contains(next), "%+v", ba)
		if ba.Addr == loopbackBcast {
			loop = append(loop, ba)
		}
	}
	require.NotEmpty(t, loop, "no loopback entry in %+v", addrs)
	assert.Equal(t, netip.MustParsePrefix("127.0.0.1/8"), loop[0].Local)
}

func TestSourceFor(t *testing.T) {
	for _, remote := range []string{"127.0.0.1", "127.0.0.2", "127.255.255.255", "::ffff:127.0.0.1"} {
		t.Run(remote, func(t *testing.T) {
			src, err := udp.SourceFor(netip.MustParseAddr(remote))
			require.NoError(t, err)
			assert.Equal(t, loopback, src)
		})
	}
	t.Run("IPv6", func(t *testing.T) {
		_, err := udp.SourceFor(netip.IPv6Loopback())
		require.Error(t, err)
		_, err = udp.SourceFor(netip.Addr{})
		require.Error(t, err)
	})
}

func TestRecvContext(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			a := listen(t, "127.0.0.1:0", v.cfg)
			b := listen(t, "127.0.0.1:0", v.cfg)

			// Cancelled while waiting (or before: the outcome is the same).
			ctx, cancel := context.WithCancel(testCtx(t))
			done := make(chan error, 1)
			go func() {
				_, _, err := b.Recv(ctx)
				done <- err
			}()
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)

			// A deadline.
			ctx, cancel = context.WithTimeout(testCtx(t), 20*time.Millisecond)
			defer cancel()
			_, _, err := b.Recv(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded)

			// Done before the call: the datagram waiting is not consumed.
			require.NoError(t, a.Send(testCtx(t), []byte("kept"), at(b)))
			_, _, err = b.Recv(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			got, from := recv(t, b)
			assert.Equal(t, "kept", string(got))
			assert.Equal(t, a.LocalAddr(), from)
		})
	}
}

func TestSendContext(t *testing.T) {
	a := listen(t, "127.0.0.1:0", udp.Config{})
	b := listen(t, "127.0.0.1:0", udp.Config{})
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	require.ErrorIs(t, a.Send(ctx, []byte("lost"), at(b)), context.Canceled)
	_, err := a.Broadcast(ctx, []byte("lost"), b.LocalAddr().Port())
	require.ErrorIs(t, err, context.Canceled)

	// With a deadline still ahead, Send goes through; nothing was sent
	// before.
	ctx, cancel = context.WithTimeout(testCtx(t), waitTimeout)
	defer cancel()
	require.NoError(t, a.Send(ctx, []byte("sent"), at(b)))
	got, _ := recv(t, b)
	assert.Equal(t, "sent", string(got))
}

func TestSendErrors(t *testing.T) {
	a := listen(t, "127.0.0.1:0", udp.Config{})
	ctx := testCtx(t)
	for _, to := range []netip.AddrPort{
		netip.AddrPortFrom(netip.IPv6Loopback(), 9),
		{},
	} {
		err := a.Send(ctx, []byte("x"), to)
		require.Error(t, err, "to %v", to)
		assert.NotErrorIs(t, err, transport.ErrClosed)
	}
	// An IPv4-mapped address is IPv4.
	b := listen(t, "127.0.0.1:0", udp.Config{})
	require.NoError(t, a.Send(ctx, []byte("mapped"), netip.AddrPortFrom(netip.MustParseAddr("::ffff:127.0.0.1"), b.LocalAddr().Port())))
	got, from := recv(t, b)
	assert.Equal(t, "mapped", string(got))
	assert.Equal(t, a.LocalAddr(), from)
}

func TestClose(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			c, err := udp.Listen("127.0.0.1:0", v.cfg)
			require.NoError(t, err)
			ctx := testCtx(t)

			// Close unblocks a pending Recv, and those queued behind it.
			const pending = 3
			done := make(chan error, pending)
			for range pending {
				go func() {
					_, _, err := c.Recv(ctx)
					done <- err
				}()
			}
			require.NoError(t, c.Close())
			for range pending {
				require.ErrorIs(t, <-done, transport.ErrClosed)
			}

			_, _, err = c.Recv(ctx)
			require.ErrorIs(t, err, transport.ErrClosed)
			require.ErrorIs(t, c.Send(ctx, []byte("x"), netip.AddrPortFrom(loopback, 9)), transport.ErrClosed)
			_, err = c.Broadcast(ctx, []byte("x"), 9)
			require.ErrorIs(t, err, transport.ErrClosed)
			assert.NoError(t, c.Close())
			assert.NoError(t, c.Close())

			// The port is free again.
			again := listen(t, c.LocalAddr().String(), udp.Config{})
			assert.Equal(t, c.LocalAddr(), again.LocalAddr())
		})
	}
}

func TestConcurrent(t *testing.T) {
	a := listen(t, "127.0.0.1:0", udp.Config{})
	b := listen(t, "127.0.0.1:0", udp.Config{})
	ctx := testCtx(t)
	const n = 16

	var wg sync.WaitGroup
	got := make(chan string, n)
	for range n {
		wg.Go(func() {
			b, _, err := b.Recv(ctx)
			assert.NoError(t, err)
			got <- string(b)
		})
	}
	for i := range n {
		wg.Go(func() {
			assert.NoError(t, a.Send(ctx, fmt.Appendf(nil, "datagram %d", i), at(b)))
		})
	}
	wg.Wait()
	close(got)
	var all []string
	for s := range got {
		all = append(all, s)
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("datagram %d", i)
	}
	assert.ElementsMatch(t, want, all)
}

func TestListenErrors(t *testing.T) {
	taken := listen(t, "127.0.0.1:0", udp.Config{})
	sharedTaken := listen(t, "127.0.0.1:0", udp.Config{Shared: true})
	for _, tc := range []struct {
		name  string
		addr  string
		cfg   udp.Config
		inUse bool
	}{
		{name: "no port", addr: "127.0.0.1"},
		{name: "bad host", addr: "not an address:0"},
		{name: "port out of range", addr: "127.0.0.1:65536"},
		{name: "IPv6", addr: "[::1]:0"},
		{name: "limit too big", addr: "127.0.0.1:0", cfg: udp.Config{MaxDatagramBytes: udp.MaxDatagramBytesLimit + 1}},
		{name: "limit negative", addr: "127.0.0.1:0", cfg: udp.Config{MaxDatagramBytes: -1}},
		{name: "port taken", addr: taken.LocalAddr().String(), inUse: true},
		{name: "port taken, shared", addr: taken.LocalAddr().String(), cfg: udp.Config{Shared: true}, inUse: true},
		{name: "shared port, not shared", addr: sharedTaken.LocalAddr().String(), inUse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := udp.Listen(tc.addr, tc.cfg)
			if err == nil {
				c.Close()
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "udp: ")
			if tc.inUse {
				assert.ErrorIs(t, err, transport.ErrAddrInUse)
			} else {
				assert.False(t, errors.Is(err, transport.ErrAddrInUse), "%v", err)
			}
		})
	}
}

// TestRecvWaitingTurn checks that a Recv waiting behind another one still
// returns when its ctx is done, and when the Conn is closed.
func TestRecvWaitingTurn(t *testing.T) {
	c, err := udp.Listen("127.0.0.1:0", udp.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	long := make(chan error, 1)
	go func() {
		_, _, err := c.Recv(testCtx(t))
		long <- err
	}()
	for range 3 {
		ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Millisecond)
		_, _, err := c.Recv(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}

	short := make(chan error, 1)
	go func() {
		_, _, err := c.Recv(testCtx(t))
		short <- err
	}()
	require.NoError(t, c.Close())
	require.ErrorIs(t, <-long, transport.ErrClosed)
	require.ErrorIs(t, <-short, transport.ErrClosed)
}

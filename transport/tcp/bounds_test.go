package tcp_test

import (
	"context"
	"log/slog"
	"maps"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// floodConns is how many connections the tests of a flood open: 1,000,
// as in the attacks of issue 13.
const floodConns = 1000

// needFiles raises the soft limit on open files to n if it is lower, or
// skips t if the hard limit does not allow it.
func needFiles(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Skipf("needs %d open files; the hard limit (ulimit -Hn) is %d", n, lim.Max)
	}
	old := lim.Cur
	lim.Cur = n
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	t.Cleanup(func() {
		lim.Cur = old
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	})
}

// idleFlood opens n raw connections to addr that send nothing, holds
// them open until t ends, and returns them, oldest first.
func idleFlood(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: waitTimeout}
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, nc := range conns {
			nc.Close()
		}
	})
	for i := range n {
		nc, err := d.Dial("tcp", addr)
		require.NoError(t, err, "idle connection %d of %d", i, n)
		conns = append(conns, nc)
	}
	return conns
}

func TestIdleFloodDoesNotStarveDials(t *testing.T) {
	// 1,000 connections that connect and send nothing, from the same
	// address as the legitimate dialer, while it dials: each Dial is
	// established within a few seconds and Accept returns it. Handshakes
	// have a table of their own (MaxHandshakes), and a new socket evicts
	// the oldest handshake of the busiest source.
	//
	// dialBound is a functional bound, far above the milliseconds a Dial
	// takes: before the table, a Dial waited for idle handshakes to reach
	// HandshakeTimeout (10 s) by the BacklogConns, and failed.
	const dials, dialBound = 5, 3 * time.Second
	needFiles(t, 2*floodConns+256)
	ctx := testCtx(t)
	tr := newTransport(t, tcp.Config{})
	l := listen(t, tr)
	idleFlood(t, l.Addr().String(), floodConns)

	dialed := map[string]bool{}
	for i := range dials {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		c, err := tr.Dial(dctx, l.Addr().String())
		took := time.Since(start)
		cancel()
		t.Logf("Dial %d: %v, err %v", i, took, err)
		require.NoError(t, err, "Dial %d after %v", i, took)
		closeAtEnd(t, c.(*tcp.Conn))
		assert.Less(t, took, dialBound, "Dial %d", i)
		dialed[c.LocalAddr().String()] = true
	}
	for i := range dials {
		s, err := l.Accept(ctx)
		require.NoError(t, err, "Accept %d", i)
		closeAtEnd(t, s.(*tcp.Conn))
		assert.True(t, dialed[s.RemoteAddr().String()], "Accept %d returned %v, not one of the Dials", i, s.RemoteAddr())
	}
}

// countingHandler is a slog.Handler that counts the records of each
// message and keeps the first of each.
type countingHandler struct {
	mu    sync.Mutex
	n     map[string]int         // mu
	first map[string]slog.Record // mu
}

func newCountingHandler() *countingHandler {
	return &countingHandler{n: map[string]int{}, first: map[string]slog.Record{}}
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countingHandler) WithGroup(string) slog.Handler            { return h }

func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[r.Message] == 0 {
		h.first[r.Message] = r.Clone()
	}
	h.n[r.Message]++
	return nil
}

// counts returns the number of records of each message, and the first
// record's attributes of each, by key.
func (h *countingHandler) counts() (map[string]int, map[string]map[string]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := maps.Clone(h.n)
	attrs := map[string]map[string]string{}
	for msg, r := range h.first {
		attrs[msg] = map[string]string{"level": r.Level.String()}
		r.Attrs(func(a slog.Attr) bool {
			attrs[msg][a.Key] = a.Value.String()
			return true
		})
	}
	return n, attrs
}

func TestFloodLoggedOncePerSource(t *testing.T) {
	// A flood of refused or evicted handshakes from one source costs one
	// record each kind per interval (10 s), not one per connection.
	const (
		refusedMsg = "tcp: connection refused in its handshake"
		evictedMsg = "tcp: handshake evicted: too many connections in their handshake"
	)
	needFiles(t, 2*floodConns+256)
	for _, tc := range []struct {
		name  string
		cfg   tcp.Config
		flood func(t *testing.T, addr string)
		want  string
	}{
		{"bad preambles", tcp.Config{}, func(t *testing.T, addr string) {
			for range floodConns {
				nc := rawDial(t, addr)
				sendAndEnd(t, nc, []byte("GET / HTTP/1.1\r\n"))
				requireEnd(t, nc, "the Listener refuses the connection")
				nc.Close()
			}
		}, refusedMsg},
		{"evictions", tcp.Config{MaxHandshakes: 4}, func(t *testing.T, addr string) {
			idle := idleFlood(t, addr, floodConns)
			for _, nc := range idle[:floodConns-4] { // the oldest
				requireEnd(t, nc, "the Listener evicts the handshake")
			}
		}, evictedMsg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newCountingHandler()
			tc.cfg.Logger = slog.New(h)
			l, err := newTransport(t, tc.cfg).Listen("")
			require.NoError(t, err)
			tc.flood(t, l.Addr().String())
			require.NoError(t, l.Close()) // waits for every handshake to have logged
			n, attrs := h.counts()
			assert.Equal(t, map[string]int{tc.want: 1}, n, "records")
			assert.Equal(t, "WARN", attrs[tc.want]["level"])
			assert.Equal(t, "0", attrs[tc.want]["suppressed"], "suppressed before the first record")
			assert.Equal(t, l.Addr().String(), attrs[tc.want]["listener"])
			t.Logf("%d connections: %v; first: %v", floodConns, n, attrs[tc.want])
		})
	}
}

func TestPendingBudget(t *testing.T) {
	// Until Admit, an accepted Conn takes frames of at most
	// PendingReadBytes, and a larger one breaks the protocol; after, up
	// to MaxFrameBytes. The dialed end is admitted from the start.
	const budget, limit = 1 << 10, 8 << 10
	cfg := tcp.Config{PendingReadBytes: budget, MaxFrameBytes: limit}
	for _, tc := range []struct {
		name    string
		admit   bool
		frame   int
		wantErr string // a regexp; "" for none
	}{
		{"at the budget", false, budget, ""},
		{"over the budget", false, budget + 1,
			`^tcp: protocol violation: 127\.0\.0\.1:\d+ sent a frame of 1025 bytes before it was admitted, over PendingReadBytes 1024; connection closed: transport: closed$`},
		{"over MaxFrameBytes", false, limit + 1,
			`^tcp: protocol violation: 127\.0\.0\.1:\d+ sent a frame of 8193 bytes, over MaxFrameBytes 8192; connection closed: transport: closed$`},
		{"admitted, over the budget", true, budget + 1, ""},
		{"admitted, at MaxFrameBytes", true, limit, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			tr := newTransport(t, cfg)
			l := listen(t, tr)
			nc := rawDial(t, l.Addr().String())
			_, err := nc.Write(preamble(limit))
			require.NoError(t, err)
			readPreamble(t, nc, limit)
			sc, err := l.Accept(ctx)
			require.NoError(t, err)
			s := sc.(*tcp.Conn)
			closeAtEnd(t, s)
			if tc.admit {
				s.Admit()
				s.Admit() // idempotent
			}
			_, err = nc.Write(append(record([]byte("before")), record(frame(1, tc.frame))...))
			require.NoError(t, err)
			f, err := s.Recv(ctx)
			require.NoError(t, err)
			require.Equal(t, "before", string(f))
			f, err = s.Recv(ctx)
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, frame(1, tc.frame), f)
				nc.Close() // or s, closed, waits for the end of the peer's stream
				return
			}
			require.ErrorIs(t, err, tcp.ErrProtocol)
			require.ErrorIs(t, err, transport.ErrClosed)
			assert.Regexp(t, tc.wantErr, err.Error())
			await(t, s.Done(), "end of the Conn")
			requireEnd(t, nc, "the raw peer sees the end")
		})
	}
	t.Run("dialed end", func(t *testing.T) {
		ctx := testCtx(t)
		c, s := pair(t, cfg)
		require.NoError(t, s.Send(ctx, frame(1, limit)))
		f, err := c.Recv(ctx)
		require.NoError(t, err)
		assert.Equal(t, frame(1, limit), f)
	})
}

func TestPendingQueue(t *testing.T) {
	// Until Admit, an accepted Conn holds at most PendingReadBytes of
	// received frames and stops reading; Admit lifts that to
	// ReadBufferBytes, and the frames arrive whole and in order.
	const budget, size, frames = 4 << 10, 1020, 64 // 4 frames of 1 KiB on the wire fill the budget
	ctx := testCtx(t)
	tr := newTransport(t, tcp.Config{PendingReadBytes: budget})
	l := listen(t, tr)
	nc := rawDial(t, l.Addr().String())
	_, err := nc.Write(preamble(transport.DefaultMaxFrameBytes))
	require.NoError(t, err)
	sc, err := l.Accept(ctx)
	require.NoError(t, err)
	s := sc.(*tcp.Conn)
	closeAtEnd(t, s)
	var wire []byte
	for i := range frames {
		wire = append(wire, record(frame(i, size))...)
	}
	_, err = nc.Write(wire) // the kernel's buffers hold what the Conn does not
	require.NoError(t, err)

	require.Eventually(t, func() bool { return tcp.ReceiveQueued(s) >= budget }, waitTimeout, time.Millisecond,
		"the receive queue fills up to the budget")
	assert.Equal(t, budget, tcp.ReceiveQueued(s), "bytes queued before Admit")
	s.Admit()
	require.Eventually(t, func() bool { return tcp.ReceiveQueued(s) == frames*(size+4) }, waitTimeout, time.Millisecond,
		"after Admit, the receive queue takes every frame")
	recvSeq(t, ctx, s, frames, size)
	nc.Close()
}

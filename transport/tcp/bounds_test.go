package tcp_test

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/internal/testenv"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// floodConns is how many connections the tests of a flood open: 1,000,
// as in the attacks of issue 13.
const floodConns = 1000

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
	testenv.NeedFiles(t, 2*floodConns+256)
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
	testenv.NeedFiles(t, 2*floodConns+256)
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
				nc.Close() // or s, if admitted, closed, waits for the end of the peer's stream
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

// rawHeartbeatInterval is how often the raw peers of the tests below
// send a heartbeat, as a live tcp Conn does (every HeartbeatInterval).
const rawHeartbeatInterval = 100 * time.Millisecond

// heartbeat writes a heartbeat to each of peers every
// rawHeartbeatInterval, until stop is called or t ends; a peer whose
// write fails (its connection was reset) gets no more.
func heartbeat(t *testing.T, peers ...net.Conn) (stop func()) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		hb := binary.BigEndian.AppendUint32(nil, 0xFFFF_FFFF)
		live := slices.Clone(peers)
		tick := time.NewTicker(rawHeartbeatInterval)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			live = slices.DeleteFunc(live, func(nc net.Conn) bool {
				nc.SetWriteDeadline(time.Now().Add(rawHeartbeatInterval))
				_, err := nc.Write(hb)
				return err != nil
			})
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit); <-done }) }
	t.Cleanup(stop)
	return stop
}

// acceptRaw connects a raw peer to l, which completes the preambles, and
// returns the Conn that l's Accept returns, not admitted, and the peer.
func acceptRaw(t *testing.T, ctx context.Context, l transport.Listener) (*tcp.Conn, net.Conn) {
	t.Helper()
	nc := rawDial(t, l.Addr().String())
	_, err := nc.Write(preamble(transport.DefaultMaxFrameBytes))
	require.NoError(t, err)
	readPreamble(t, nc, transport.DefaultMaxFrameBytes)
	s, err := l.Accept(ctx)
	require.NoError(t, err)
	return s.(*tcp.Conn), nc
}

// framesIn returns the frames of the records in b, without the
// heartbeats, and the bytes left after the last whole record.
func framesIn(b []byte) (frames []string, rest []byte) {
	for len(b) >= 4 {
		n := binary.BigEndian.Uint32(b)
		if n == 0xFFFF_FFFF {
			b = b[4:]
			continue
		}
		if uint64(len(b)-4) < uint64(n) {
			break
		}
		frames = append(frames, string(b[4:4+n]))
		b = b[4+n:]
	}
	return frames, b
}

// closeBound bounds the end of a Conn closed before it was admitted,
// whose peer holds its side open: a functional bound, far above the
// milliseconds its few queued bytes take and well under WriteTimeout
// (10 s by default), which is what a graceful Close may wait for such a
// peer.
const closeBound = 3 * time.Second

func TestCloseNotAdmitted(t *testing.T) {
	// A raw peer that completes the preamble, sends heartbeats and holds
	// its side open, as a peer that never passes the application's
	// handshake does. A Conn closed before it admitted the peer writes
	// the frame queued before Close and then closes its socket without
	// waiting for the peer's end: its goroutines and socket are gone
	// within closeBound, and the peer sees the end (EOF, or a reset: the
	// peer's heartbeats are left unread). An admitted Conn, and a dialed
	// one, close gracefully: the peer gets the frame and a clean end of
	// stream, and the Conn waits for the peer to end its side.
	for _, tc := range []struct {
		name     string
		connect  func(t *testing.T, ctx context.Context, tr *tcp.Transport) (*tcp.Conn, net.Conn)
		graceful bool
	}{
		{"accepted, not admitted", func(t *testing.T, ctx context.Context, tr *tcp.Transport) (*tcp.Conn, net.Conn) {
			return acceptRaw(t, ctx, listen(t, tr))
		}, false},
		{"accepted, admitted", func(t *testing.T, ctx context.Context, tr *tcp.Transport) (*tcp.Conn, net.Conn) {
			s, nc := acceptRaw(t, ctx, listen(t, tr))
			s.Admit()
			return s, nc
		}, true},
		{"dialed", func(t *testing.T, ctx context.Context, tr *tcp.Transport) (*tcp.Conn, net.Conn) {
			nl, accepted := rawListen(t)
			dialed := make(chan transport.Conn, 1)
			go func() {
				c, err := tr.Dial(ctx, nl.Addr().String())
				assert.NoError(t, err, "Dial")
				dialed <- c
			}()
			nc := await(t, accepted, "the raw listener accepts")
			_, err := nc.Write(preamble(transport.DefaultMaxFrameBytes))
			require.NoError(t, err)
			c := await(t, dialed, "Dial")
			require.NotNil(t, c)
			readPreamble(t, nc, transport.DefaultMaxFrameBytes)
			return c.(*tcp.Conn), nc
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			tr := newTransport(t, tcp.Config{}) // WriteTimeout 10 s
			c, nc := tc.connect(t, ctx, tr)
			closeAtEnd(t, c)
			stop := heartbeat(t, nc)
			require.NoError(t, c.Send(ctx, []byte("refused")))
			require.NoError(t, c.Close())

			if !tc.graceful {
				timer := time.NewTimer(closeBound)
				defer timer.Stop()
				select {
				case <-c.Done():
				case <-timer.C:
					t.Fatalf("the Conn closed before Admit still holds its socket %v after Close, its peer holding its side open", closeBound)
				}
				frames, rest := framesIn(readToEnd(t, nc, "the peer sees the end"))
				if runtime.GOOS == "linux" { // a reset keeps the bytes received before it
					assert.Equal(t, []string{"refused"}, frames, "frames the peer received")
					assert.Empty(t, rest, "bytes after the last record")
				}
				return
			}
			nc.SetReadDeadline(time.Now().Add(waitTimeout))
			b, err := io.ReadAll(nc)
			require.NoError(t, err, "the peer reads a clean end of stream, not a reset")
			frames, rest := framesIn(b)
			assert.Equal(t, []string{"refused"}, frames, "frames the peer received")
			assert.Empty(t, rest, "bytes after the last record")
			select {
			case <-c.Done():
				t.Fatal("the Conn ended before its peer ended its side")
			default:
			}
			stop()
			require.NoError(t, nc.(*net.TCPConn).CloseWrite())
			await(t, c.Done(), "end of the Conn once its peer ended its side")
		})
	}
}

// openFiles returns the number of files the process has open, or skips
// t where /proc/self/fd does not list them.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	return len(fds)
}

func TestCloseNotAdmittedFlood(t *testing.T) {
	// 2,000 raw peers complete the preamble, send heartbeats and hold
	// their side open; the application accepts each and, as a switch
	// does when it evicts or refuses a handshake, sends a refusal and
	// closes it without Admit. Within closeBound, every Conn is done and
	// the process is back to the sockets and goroutines it had before,
	// but for the peers' own sockets, which they still hold. slack allows
	// for the runtime's and the test's own. Done closes in the
	// background, shortly after Close (Conn.Close), so the test waits for
	// each Conn's, within the same bound, rather than expecting it closed
	// once the counts are: with up to slack goroutines to spare, the
	// counts may be down while a few Conns are still ending.
	const peers, slack = 2000, 50
	testenv.NeedFiles(t, 2*peers+256)
	ctx := testCtx(t)
	l := listen(t, newTransport(t, tcp.Config{}))
	fds0, gs0 := openFiles(t), runtime.NumGoroutine()
	conns := make([]*tcp.Conn, peers)
	ncs := make([]net.Conn, peers)
	t.Cleanup(func() { // last, once the peers have closed their side
		for _, c := range conns {
			if c != nil {
				c.Close()
				await(t, c.Done(), "end of the Conn's goroutines")
			}
		}
	})
	for i := range peers {
		conns[i], ncs[i] = acceptRaw(t, ctx, l)
	}
	heartbeat(t, ncs...)
	fds1, gs1 := openFiles(t), runtime.NumGoroutine()
	start := time.Now()
	for _, c := range conns {
		require.NoError(t, c.Send(ctx, []byte("refused")))
		require.NoError(t, c.Close())
	}
	bound, cancel := context.WithTimeout(context.Background(), closeBound)
	defer cancel()
	for i, c := range conns {
		select {
		case <-c.Done():
			continue
		case <-bound.Done():
		}
		var open []int
		for j, c := range conns[i:] {
			select {
			case <-c.Done():
			default:
				open = append(open, i+j)
			}
		}
		if len(open) > 0 {
			t.Fatalf("%v after closing %d Conns not admitted, %d have not ended (the first: Conns %v)",
				time.Since(start).Round(time.Millisecond), peers, len(open), open[:min(len(open), 10)])
		}
		break
	}
	var fds, gs int
	freed := func() bool {
		fds, gs = openFiles(t), runtime.NumGoroutine()
		return fds <= fds0+peers+slack && gs <= gs0+slack
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for done := freed(); !done; done = freed() {
		select {
		case <-bound.Done():
			t.Fatalf("%v after closing %d Conns not admitted: %d open files, %d goroutines; want at most %d and %d "+
				"(before the peers %d and %d; with the Conns open %d and %d)",
				time.Since(start).Round(time.Millisecond), peers, fds, gs, fds0+peers+slack, gs0+slack, fds0, gs0, fds1, gs1)
		case <-tick.C:
		}
	}
	t.Logf("%d peers holding their side open: open files %d before the peers, %d with the Conns open, %d %v after Close; goroutines %d, %d, %d",
		peers, fds0, fds1, fds, time.Since(start).Round(time.Millisecond), gs0, gs1, gs)
	for i, nc := range ncs {
		requireEnd(t, nc, "peer "+strconv.Itoa(i)+" sees the end")
	}
}

func TestFloodFromManySourcesLoggedBounded(t *testing.T) {
	// Bad preambles from 300 source addresses (127.3.0.0/16 on loopback):
	// the per-source limit alone would write a record for each; over all
	// sources the Listener writes at most 64 per interval.
	const sources = 300
	testenv.NeedFiles(t, 2*sources+256)
	h := newCountingHandler()
	l, err := newTransport(t, tcp.Config{Logger: slog.New(h)}).Listen("")
	require.NoError(t, err)
	for i := range sources {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 3, byte(i/250), byte(1+i%250))}, Timeout: waitTimeout}
		nc, err := d.Dial("tcp", l.Addr().String())
		require.NoError(t, err)
		sendAndEnd(t, nc, []byte("GET / HTTP/1.1\r\n"))
		requireEnd(t, nc, "the Listener refuses the connection")
		nc.Close()
	}
	require.NoError(t, l.Close())
	n, _ := h.counts()
	t.Logf("%d sources: %v", sources, n)
	assert.Equal(t, 64, n["tcp: connection refused in its handshake"])
}

func TestArrivedAt(t *testing.T) {
	// An accepted Conn tells when its socket arrived, before its
	// handshake, so that a server can bound the whole handshake; a dialed
	// one has the zero time.
	ctx := testCtx(t)
	tr := newTransport(t, tcp.Config{})
	l := listen(t, tr)
	before := time.Now()
	c, err := tr.Dial(ctx, l.Addr().String())
	require.NoError(t, err)
	closeAtEnd(t, c.(*tcp.Conn))
	s, err := l.Accept(ctx)
	require.NoError(t, err)
	closeAtEnd(t, s.(*tcp.Conn))
	at := s.(transport.Arrival).ArrivedAt()
	assert.False(t, at.Before(before.Add(-time.Second)), "arrived at %v, dialed at %v", at, before)
	assert.False(t, at.After(time.Now()))
	assert.True(t, c.(transport.Arrival).ArrivedAt().IsZero())
}

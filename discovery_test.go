package sion_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport/udp"
)

// rawProbe returns a probe of the discovery protocol for base with nonce,
// padded with trailing spaces to size bytes (not padded when size is
// smaller than the probe).
func rawProbe(t *testing.T, base string, nonce uint64, size int) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"v": 1, "kind": "probe", "id": "4242", "name": "raw", "base": base, "nonce": fmt.Sprint(nonce)})
	require.NoError(t, err)
	if len(b) < size {
		b = append(b, bytes.Repeat([]byte{' '}, size-len(b))...)
	}
	return b
}

// rawAnswer is the part of an answer the tests read.
type rawAnswer struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Nonce  uint64 `json:"nonce,string"`
	Active bool   `json:"active"`
	Addr   string `json:"addr"`
}

// rawSocket is a UDP socket of the test's own, bound to ip, that sends to
// an entity's discovery port like a prober (or an attacker) would.
type rawSocket struct {
	t  *testing.T
	c  *net.UDPConn
	to *net.UDPAddr
}

func newRawSocket(t *testing.T, ip netip.Addr, port uint16) *rawSocket {
	t.Helper()
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &rawSocket{t: t, c: c, to: net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, port))}
}

func (r *rawSocket) addr() netip.AddrPort { return r.c.LocalAddr().(*net.UDPAddr).AddrPort() }

func (r *rawSocket) send(b []byte) {
	r.t.Helper()
	_, err := r.c.WriteToUDP(b, r.to)
	require.NoError(r.t, err)
}

// recv returns the next datagram, failing the test if none comes within
// 5 s.
func (r *rawSocket) recv() []byte {
	r.t.Helper()
	buf := make([]byte, 65536)
	require.NoError(r.t, r.c.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, _, err := r.c.ReadFromUDP(buf)
	require.NoError(r.t, err, "no answer")
	return buf[:n]
}

// nonLoopbackAddr returns an IPv4 address of one of the host's
// interfaces other than loopback, or skips the test.
func nonLoopbackAddr(t *testing.T) netip.Addr {
	t.Helper()
	bs, err := udp.BroadcastAddrs()
	require.NoError(t, err)
	for _, b := range bs {
		if !b.Local.Addr().IsLoopback() {
			return b.Local.Addr()
		}
	}
	t.Skip("the host has no IPv4 address but loopback")
	return netip.Addr{}
}

// TestDiscoveryAnswerNoLargerThanProbe: an Active entity answers a probe
// with at most as many bytes as the probe had. A probe padded to 1,200
// bytes, or exactly as long as its answer, is answered; a probe one byte
// shorter than its answer, or unpadded, is not (and is counted in
// ShortProbes). Each probe that must go unanswered is followed by a
// padded one: the first answer to arrive must be the padded probe's.
func TestDiscoveryAnswerNoLargerThanProbe(t *testing.T) {
	n := newEntityNet(t)
	a := n.entity("a", func(c *sion.EntityConfig) { c.NoBroadcast = true })
	waitActive(t, a)
	r := newRawSocket(t, netip.AddrFrom4([4]byte{127, 0, 0, 1}), n.port)

	nonce := uint64(1_000_000) // answers to nonces of one width have one size
	ask := func(t *testing.T, size int) (probe, answer []byte) {
		t.Helper()
		nonce++
		probe = rawProbe(t, n.base, nonce, size)
		r.send(probe)
		answer = r.recv()
		var got rawAnswer
		require.NoError(t, json.Unmarshal(answer, &got), "%q", answer)
		require.Equal(t, nonce, got.Nonce, "the first answer is to the last probe: %q", answer)
		assert.Equal(t, "answer", got.Kind)
		assert.Equal(t, "a", got.Name)
		assert.True(t, got.Active)
		assert.Equal(t, a.Addr(n.base), got.Addr)
		return probe, answer
	}
	probe, answer := ask(t, 1200)
	assert.Len(t, probe, 1200)
	assert.LessOrEqual(t, len(answer), len(probe), "answer bytes ≤ probe bytes")
	answerBytes := len(answer)
	t.Logf("a padded probe of %d bytes: an answer of %d bytes", len(probe), answerBytes)

	minimal := len(rawProbe(t, n.base, nonce, 0))
	require.Less(t, minimal, answerBytes, "an unpadded probe is shorter than its answer")
	t.Logf("an unpadded probe has %d bytes", minimal)
	for _, tc := range []struct {
		name     string
		size     int
		answered bool
	}{
		{"as long as its answer", answerBytes, true},
		{"one byte short", answerBytes - 1, false},
		{"unpadded", 0, false},
		{"padded to 1200", 1200, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := a.Stats().ShortProbes
			if tc.answered {
				probe, answer := ask(t, tc.size)
				assert.LessOrEqual(t, len(answer), len(probe))
				assert.Equal(t, before, a.Stats().ShortProbes)
				return
			}
			nonce++
			probe := rawProbe(t, n.base, nonce, tc.size)
			r.send(probe)
			ask(t, 1200) // answered after the probe above was refused, or it would come first
			assert.Equal(t, before+1, a.Stats().ShortProbes, "a probe of %d bytes is not answered", len(probe))
		})
	}
}

// TestDiscoveryAnswerRate: 200 padded probes from one (non-loopback)
// source get at most ProbeAnswerBurst answers, plus ProbeAnswersPerSecond
// for each second they took; the others are counted in ThrottledProbes.
func TestDiscoveryAnswerRate(t *testing.T) {
	ip := nonLoopbackAddr(t)
	n := newEntityNet(t)
	a := n.entity("a", func(c *sion.EntityConfig) { c.NoBroadcast, c.ListenHost = true, "0.0.0.0" })
	waitActive(t, a)
	r := newRawSocket(t, ip, n.port)

	const probes, batch = 200, 20 // in batches, so as not to overflow the entity's socket buffer
	start := time.Now()
	for i := range probes {
		r.send(rawProbe(t, n.base, uint64(i+1), 1200))
		if (i+1)%batch == 0 {
			require.Eventually(t, func() bool { return a.Stats().ProbesReceived == uint64(i+1) }, 10*time.Second, time.Millisecond, "probes received")
		}
	}
	elapsed := time.Since(start)
	require.Eventually(t, func() bool { s := a.Stats(); return s.ProbeAnswersSent+s.ThrottledProbes == probes }, 10*time.Second, time.Millisecond,
		"every probe answered or counted (a probe is counted received before it is answered or throttled)")
	s := a.Stats()
	limit := sion.ProbeAnswerBurst + int(sion.ProbeAnswersPerSecond*elapsed.Seconds()) + 1
	t.Logf("%d probes in %v: %d answers (limit %d), %d throttled", probes, elapsed.Round(time.Millisecond), s.ProbeAnswersSent, limit, s.ThrottledProbes)
	assert.LessOrEqual(t, s.ProbeAnswersSent, uint64(limit), "answers to one source")
	assert.GreaterOrEqual(t, s.ProbeAnswersSent, uint64(sion.ProbeAnswerBurst), "a burst is answered")
	for range s.ProbeAnswersSent {
		var got rawAnswer
		require.NoError(t, json.Unmarshal(r.recv(), &got))
		assert.Equal(t, "a", got.Name)
	}
}

// logCounter is a slog handler that counts records by level, message and
// "from" attribute.
type logCounter struct {
	mu sync.Mutex
	n  map[string]int // "level message from" → records
}

func (h *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logCounter) WithGroup(string) slog.Handler            { return h }
func (h *logCounter) Handle(_ context.Context, r slog.Record) error {
	from := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "from" {
			from = a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[r.Level.String()+" "+r.Message+" "+from]++
	return nil
}

// count returns the records at level (any level if "") from from.
func (h *logCounter) count(level string, from netip.AddrPort) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	total := 0
	for k, n := range h.n {
		if strings.HasPrefix(k, level) && strings.HasSuffix(k, " "+from.String()) {
			total += n
		}
	}
	return total
}

// TestDiscoveryLogsOncePerSource: 211 junk datagrams on the discovery
// port, and 211 forged answers with an unusable address on the probe
// socket, all from one source, are each logged once (within the log
// interval of 10 s), while BadDatagrams counts every one. (The entity's
// own probes, which the test reads to learn its probe socket, are padded
// to 1,200 bytes.)
func TestDiscoveryLogsOncePerSource(t *testing.T) {
	const datagrams = 211
	loopback := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	t.Run("junk on the discovery port", func(t *testing.T) {
		n := newEntityNet(t)
		var logs logCounter
		a := n.entity("a", func(c *sion.EntityConfig) { c.NoBroadcast, c.Logger = true, slog.New(&logs) })
		waitActive(t, a)
		r := newRawSocket(t, loopback, n.port)
		junk := []string{"hello", `{"v":1,"kind":"probe"}`, `{"v":9,"kind":"probe","id":"5"}`, `{"v":1,"kind":"answer","id":"5"}`}
		for i := range datagrams {
			r.send([]byte(junk[i%len(junk)]))
			if (i+1)%20 == 0 || i+1 == datagrams {
				require.Eventually(t, func() bool { return a.Stats().BadDatagrams == uint64(i+1) }, 10*time.Second, time.Millisecond)
			}
		}
		t.Logf("%d junk datagrams: %d records, %d at Warn", datagrams, logs.count("", r.addr()), logs.count("WARN", r.addr()))
		assert.LessOrEqual(t, logs.count("", r.addr()), 1, "records about the junk from one source")
		assert.Equal(t, uint64(datagrams), a.Stats().BadDatagrams)
	})
	t.Run("forged answers", func(t *testing.T) {
		n := newEntityNet(t)
		var logs logCounter
		a := n.entity("a", func(c *sion.EntityConfig) { c.Logger = slog.New(&logs) })
		// Listen on the discovery port too, to learn a's probe socket
		// from its probes (a root probes every CheckInterval).
		port, err := udp.Listen(fmt.Sprintf("0.0.0.0:%d", n.port), udp.Config{Shared: true})
		require.NoError(t, err)
		defer port.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var prober netip.AddrPort
		for !prober.IsValid() {
			b, from, err := port.Recv(ctx)
			require.NoError(t, err)
			if bytes.Contains(b, []byte(`"name":"a"`)) && from.Addr().IsLoopback() {
				prober = from
				assert.Len(t, b, 1200, "a pads its probes")
			}
		}
		require.NoError(t, port.Close())
		r := newRawSocket(t, loopback, prober.Port())
		forged, err := json.Marshal(map[string]any{"v": 1, "kind": "answer", "id": "99", "name": "mallory", "base": n.base, "nonce": "1", "active": true, "addr": "0.0.0.0:1"})
		require.NoError(t, err)
		before := a.Stats().BadDatagrams
		for i := range datagrams {
			r.send(forged)
			if (i+1)%20 == 0 || i+1 == datagrams {
				require.Eventually(t, func() bool { return a.Stats().BadDatagrams == before+uint64(i+1) }, 10*time.Second, time.Millisecond)
			}
		}
		t.Logf("%d forged answers: %d records at Warn", datagrams, logs.count("WARN", r.addr()))
		assert.LessOrEqual(t, logs.count("WARN", r.addr()), 1, "Warn records about the answers from one source")
		assert.Equal(t, before+datagrams, a.Stats().BadDatagrams)
	})
}

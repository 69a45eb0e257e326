package sion

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/internal/guard"
)

// TestAnswerLimit: each source gets a burst of answers at once, then
// answers at the rate; sources are limited apart; when full, the limit
// forgets the source used longest ago, which gets a full burst again.
func TestAnswerLimit(t *testing.T) {
	a, b, c := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	t0 := time.Unix(1000, 0)
	allowed := func(l *answerLimit, src netip.Addr, now time.Time, tries int) int {
		n := 0
		for range tries {
			if l.allow(src, now) {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, l *answerLimit)
	}{
		{"burst, then the rate", func(t *testing.T, l *answerLimit) {
			assert.Equal(t, 16, allowed(l, a, t0, 100), "the burst at once")
			assert.Equal(t, 0, allowed(l, a, t0.Add(200*time.Millisecond), 10), "less than one token later")
			assert.Equal(t, 1, allowed(l, a, t0.Add(250*time.Millisecond), 10), "one token at 4 per second")
			assert.Equal(t, 4, allowed(l, a, t0.Add(1250*time.Millisecond), 10), "4 a second")
			assert.Equal(t, 16, allowed(l, a, t0.Add(time.Hour), 100), "refilled up to the burst, no more")
		}},
		{"sources apart", func(t *testing.T, l *answerLimit) {
			assert.Equal(t, 16, allowed(l, a, t0, 100))
			assert.Equal(t, 16, allowed(l, b, t0, 100), "another source has its own burst")
		}},
		{"forgets the least recently used", func(t *testing.T, l *answerLimit) {
			assert.Equal(t, 16, allowed(l, a, t0, 100))
			assert.Equal(t, 16, allowed(l, b, t0, 100))
			assert.Equal(t, 0, allowed(l, a, t0, 1), "a is used after b")
			assert.Equal(t, 16, allowed(l, c, t0, 100), "c makes the limit forget b")
			assert.Equal(t, 0, allowed(l, a, t0, 1), "a is remembered")
			assert.Equal(t, 16, allowed(l, b, t0, 100), "b was forgotten: a full burst again")
			assert.Len(t, l.buckets, 2)
			assert.Equal(t, 2, l.lru.Len())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newAnswerLimit(4, 16, 2)) })
	}
}

// records is a slog handler that keeps its records.
type records struct {
	level slog.Level
	mu    sync.Mutex
	got   []slog.Record
}

func (h *records) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *records) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *records) WithGroup(string) slog.Handler                { return h }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, r)
	return nil
}

func (h *records) attrs(i int) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]string{"msg": h.got[i].Message}
	h.got[i].Attrs(func(a slog.Attr) bool {
		out[a.Key] = a.Value.String()
		return true
	})
	return out
}

// TestLogDatagramOncePerSource: a record about a datagram is written at
// most once per message and source address per discoveryLogInterval,
// with the number suppressed since the last one; records below the
// logger's level cost nothing and are not counted.
func TestLogDatagramOncePerSource(t *testing.T) {
	h := &records{level: slog.LevelInfo}
	e := &Entity{cfg: EntityConfig{Name: "a"}, log: slog.New(h), logLimit: guard.NewEvery(discoveryLogInterval, 16), logAll: guard.NewWindow(maxLogRecords, discoveryLogInterval)}
	src := netip.MustParseAddrPort("192.0.2.7:4000")
	t0 := time.Unix(1000, 0)
	for i := range 5 {
		from := netip.AddrPortFrom(src.Addr(), uint16(4000+i)) // every port of one address is one source
		e.logDatagramAt(t0.Add(time.Duration(i)*time.Second), slog.LevelWarn, "junk", from, "n", i)
	}
	e.logDatagramAt(t0, slog.LevelWarn, "other", src)
	e.logDatagramAt(t0, slog.LevelWarn, "junk", netip.MustParseAddrPort("192.0.2.8:1"))
	for range 3 {
		e.logDatagramAt(t0, slog.LevelDebug, "junk", src) // below Info
	}
	e.logDatagramAt(t0.Add(discoveryLogInterval), slog.LevelWarn, "junk", src)
	require.Len(t, h.got, 4)
	assert.Equal(t, map[string]string{"msg": "junk", "entity": "a", "from": "192.0.2.7:4000", "n": "0"}, h.attrs(0))
	assert.Equal(t, map[string]string{"msg": "other", "entity": "a", "from": "192.0.2.7:4000"}, h.attrs(1))
	assert.Equal(t, map[string]string{"msg": "junk", "entity": "a", "from": "192.0.2.8:1"}, h.attrs(2))
	assert.Equal(t, map[string]string{"msg": "junk", "entity": "a", "from": "192.0.2.7:4000", "suppressed": "4"}, h.attrs(3),
		"the next record, an interval later, tells how many were suppressed")
}

// TestLogDatagramBoundedOverManySources: datagrams from 3,000 source
// addresses get at most maxLogRecords records per interval in all (the
// per-source limit forgets sources past maxDiscoverySources); the next
// record counts those held back. Before: 7,590 records for 9,000 probes
// from 3,000 sources.
func TestLogDatagramBoundedOverManySources(t *testing.T) {
	h := &records{level: slog.LevelInfo}
	e := &Entity{cfg: EntityConfig{Name: "a"}, log: slog.New(h),
		logLimit: guard.NewEvery(discoveryLogInterval, maxDiscoverySources), logAll: guard.NewWindow(maxLogRecords, discoveryLogInterval)}
	t0 := time.Unix(1000, 0)
	for i := range 3000 {
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(1 + i%250)}), 4000)
		e.logDatagramAt(t0, slog.LevelInfo, "short probe", from)
	}
	require.Len(t, h.got, maxLogRecords)
	e.logDatagramAt(t0.Add(discoveryLogInterval), slog.LevelInfo, "short probe", netip.MustParseAddrPort("192.0.2.9:1"))
	require.Len(t, h.got, maxLogRecords+1)
	assert.Equal(t, fmt.Sprint(3000-maxLogRecords), h.attrs(maxLogRecords)["suppressed_all_sources"])
}

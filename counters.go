package sion

import (
	"slices"
	"sync/atomic"
	"time"
)

// dropReason says why a subscription lost an event (Stats.Drops).
type dropReason int

const (
	dropQueueFull dropReason = iota // its queue was full: DropNewest, or Block's wait ended
	dropEvicted                     // DropOldest evicted it from its queue
	dropSpool                       // the look-in spool evicted it: full or expired
	dropStream                      // a remote session's stream: full, or ended unconfirmed
	numDropReasons
)

// DropCounts breaks Stats.Dropped down by reason; the four sum to it.
type DropCounts struct {
	// QueueFull counts the events a full subscription queue refused
	// (DropNewest; Block when its wait ended); Evicted those DropOldest
	// evicted from a queue; Spool those a look-in spool evicted (full or
	// expired); Stream those a remote session's stream dropped (full, too
	// large for a frame, or ended before the entity confirmed them).
	QueueFull, Evicted, Spool, Stream uint64
}

// Histogram is a snapshot of a distribution of durations, in buckets
// with fixed upper bounds (Prometheus' layout, non-cumulative).
type Histogram struct {
	// Bounds are the buckets' upper bounds, ascending (inclusive: a
	// duration equal to a bound counts in its bucket).
	Bounds []time.Duration
	// Counts has one count per bucket of Bounds, then one for the
	// durations above the last bound: len(Bounds)+1 entries.
	Counts []uint64
	// Count is the number of durations observed, Sum their total.
	Count uint64
	Sum   time.Duration
}

// matchBounds are the buckets of Switch.MatchTime: 250 ns to 10 ms, about
// ×2.5 apart. A match takes about 100 ns with a few filters and tens of
// µs at a million (bench/).
var matchBounds = []time.Duration{
	250 * time.Nanosecond, 500 * time.Nanosecond,
	time.Microsecond, 2500 * time.Nanosecond, 5 * time.Microsecond,
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 10 * time.Millisecond,
}

// MatchTime returns the distribution of the filter index's match times
// over the switch's life, sampled: one event in 8 that the switch matched
// (published here or arrived over a link or gateway) is timed, so its
// Count is about Stats.EventsIn/8. Timing one match costs about 140 ns on
// the 2-core test machine (BenchmarkMatchTiming), 17 ns per event once
// sampled. Safe for concurrent use.
func (sw *Switch) MatchTime() Histogram { return sw.matchTime.snapshot() }

// matchSampling is how many events the switch matches per match it times
// (Switch.MatchTime).
const matchSampling = 8

// durations is a histogram of durations over matchBounds, updated with
// atomic operations: an observation costs a search of 14 bounds and two
// atomic adds.
type durations struct {
	counts [15]atomic.Uint64 // len(matchBounds)+1
	sum    atomic.Int64      // nanoseconds
}

func (h *durations) observe(d time.Duration) {
	i := 0
	for i < len(matchBounds) && d > matchBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// snapshot returns the histogram. Its buckets are read one by one while
// observations go on, so Count is their sum as read, and Sum may include
// an observation or two that the buckets do not.
func (h *durations) snapshot() Histogram {
	out := Histogram{Bounds: slices.Clone(matchBounds), Counts: make([]uint64, len(h.counts)), Sum: time.Duration(h.sum.Load())}
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
		out.Count += out.Counts[i]
	}
	return out
}

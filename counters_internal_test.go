package sion

import (
	"testing"
	"time"
)

// BenchmarkMatchTiming measures what timing one match adds to a publish
// (Switch.MatchTime): two clock reads and an observation.
func BenchmarkMatchTiming(b *testing.B) {
	var h durations
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		h.observe(time.Since(start))
	}
}

// TestDurationsBuckets checks that a duration counts in the first bucket
// whose bound it does not exceed, and above the last bound in the last.
func TestDurationsBuckets(t *testing.T) {
	var h durations
	for _, d := range []time.Duration{0, 250 * time.Nanosecond, 251 * time.Nanosecond, time.Millisecond, time.Hour} {
		h.observe(d)
	}
	s := h.snapshot()
	want := make([]uint64, len(matchBounds)+1)
	want[0], want[1], want[11], want[14] = 2, 1, 1, 1
	if len(s.Counts) != len(want) {
		t.Fatalf("%d buckets, want %d", len(s.Counts), len(want))
	}
	for i := range want {
		if s.Counts[i] != want[i] {
			t.Errorf("bucket %d (≤ %v): %d, want %d", i, append(matchBounds, 0)[i], s.Counts[i], want[i])
		}
	}
	if s.Count != 5 || s.Sum != 250*time.Nanosecond+251*time.Nanosecond+time.Millisecond+time.Hour {
		t.Errorf("count %d sum %v", s.Count, s.Sum)
	}
}

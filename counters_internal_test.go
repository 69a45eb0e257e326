package sion

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
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

// TestLinkTotalsBeyondTheCap: the links of peers that come after
// maxPeerTotals others add up under "", live and ended alike, so that no
// key of LinkTotals ever goes back: such a peer never has a key of its
// own, not even while its link is up, and "" keeps what its link counted
// after the link ends.
func TestLinkTotalsBeyondTheCap(t *testing.T) {
	defer func(n int) { maxPeerTotals = n }(maxPeerTotals)
	maxPeerTotals = 2
	o, err := ontology.New([]ontology.TypeDef{{Name: "Notice"}})
	require.NoError(t, err)
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	p, err := NewEventPlace(PlaceConfig{Name: "P", Ontology: o})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	parent := activeSwitch(t, tr, p, "parent")
	links := map[string]*SharedLink{}
	for _, name := range []string{"c1", "c2", "c3"} {
		c := activeSwitch(t, tr, p, name)
		l, err := c.Link(ctx, tr, "parent", LinkConfig{})
		require.NoError(t, err)
		links[name] = l
		s, err := c.Open(ctx, SessionConfig{Name: "sub"})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		_, err = s.Subscribe(ctx, `{type ⊑ Notice}`)
		require.NoError(t, err)
	}
	pub, err := parent.Open(ctx, SessionConfig{Name: "pub"})
	require.NoError(t, err)
	t.Cleanup(func() { pub.Close() })
	require.Eventually(t, func() bool {
		for _, st := range parent.Links() {
			if st.Proxies < 1 {
				return false
			}
		}
		return len(parent.Links()) == 3
	}, 10*time.Second, time.Millisecond, "every child's interest reached the parent")
	require.NoError(t, pub.Publish(ctx, &Event{Type: "Notice"}))
	require.Eventually(t, func() bool {
		tot := parent.LinkTotals()
		return tot["c1"].EventsSent == 1 && tot["c2"].EventsSent == 1 && tot[""].EventsSent == 1
	}, 10*time.Second, time.Millisecond, "%v", parent.LinkTotals())
	live := parent.LinkTotals()
	assert.NotContains(t, live, "c3", "a peer beyond the cap has no key, even while its link is up")

	require.NoError(t, links["c3"].Close())
	require.Eventually(t, func() bool { return len(parent.Links()) == 2 }, 10*time.Second, time.Millisecond)
	ended := parent.LinkTotals()
	assert.NotContains(t, ended, "c3")
	assert.Equal(t, uint64(1), ended[""].EventsSent, "what c3's link counted stays under \"\", once")
	for key, was := range live {
		assert.GreaterOrEqual(t, ended[key].EventsSent, was.EventsSent, "key %q went back", key)
		assert.GreaterOrEqual(t, ended[key].FramesSent, was.FramesSent, "key %q went back", key)
	}
}

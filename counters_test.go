package sion_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport/tcp"
)

// TestStatsCounters checks the switch counters issue 20's metrics read:
// published, matched, spilled, and drops by reason, which add up to
// Dropped, and the sampled match times.
func TestStatsCounters(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	ctx := context.Background()
	s, err := sw.Open(ctx, sion.SessionConfig{Name: "s", SpoolSize: 2})
	require.NoError(t, err)
	subscribe(t, s, "{type ⊑ Alarm}", sion.WithQueue(1))                                     // DropNewest: 2 of 4 refused
	subscribe(t, s, "{type ⊑ Alarm}", sion.WithQueue(1), sion.WithOverflow(sion.DropOldest)) // 3 evicted
	subscribe(t, s, "{type ⊑ Alarm}", sion.WithQueue(1), sion.WithOverflow(sion.Spill))      // 3 spilled, 1 of them evicted from the spool of 2
	p := open(t, sw, "p")
	for range 4 {
		publish(t, p, &sion.Event{Type: "FireAlarm"})
	}
	publish(t, p, &sion.Event{Type: "TempReading"}) // matches nothing
	for range 11 {
		publish(t, p, &sion.Event{Type: "Notice"}) // matches nothing either: 16 events, 2 timed
	}

	st := sw.Stats()
	assert.Equal(t, uint64(16), st.Published)
	assert.Equal(t, uint64(16), st.EventsIn)
	assert.Equal(t, uint64(12), st.Matched, "3 subscriptions × 4 alarms")
	assert.Equal(t, uint64(3), st.Spilled)
	assert.Equal(t, sion.DropCounts{QueueFull: 3, Evicted: 3, Spool: 1}, st.Drops)
	assert.Equal(t, st.Drops.QueueFull+st.Drops.Evicted+st.Drops.Spool+st.Drops.Stream, st.Dropped)
	h := sw.MatchTime()
	assert.Equal(t, uint64(2), h.Count, "one match in 8 is timed")
	require.Len(t, h.Counts, len(h.Bounds)+1)
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	assert.Equal(t, h.Count, n)
	assert.Positive(t, h.Sum)
	assert.IsIncreasing(t, h.Bounds)
}

// TestLinkCounters checks a shared link's frame, byte and queue
// counters, the same on both ends, and that LinkTotals keeps a peer's
// counters when its link re-forms.
func TestLinkCounters(t *testing.T) {
	tr, addr := transports[1].make(t) // tcp
	n := newNetwork(t, tr, addr, sion.PlaceConfig{}, []int{-1, 0})
	sub := subscribe(t, open(t, n.sws[1], "sub"), "{type ⊑ Alarm}", sion.WithQueue(100))
	p := open(t, n.sws[0], "p")
	for range 10 {
		publish(t, p, &sion.Event{Type: "FireAlarm"})
	}
	require.Eventually(t, func() bool { return sub.Stats().Delivered == 10 }, waitFor, time.Millisecond)

	link := func(i int) sion.LinkInfo {
		ls := n.sws[i].Links()
		require.Len(t, ls, 1)
		return ls[0]
	}
	require.Eventually(t, func() bool {
		a, b := link(0), link(1)
		return a.FramesSent == b.FramesReceived && b.FramesSent == a.FramesReceived
	}, waitFor, time.Millisecond, "every frame sent arrives")
	a, b := link(0), link(1)
	assert.Equal(t, uint64(10), a.EventsSent)
	assert.Equal(t, b.EventsSent+b.ControlSent, b.FramesSent, "the requester's frames: its events and control messages")
	assert.Equal(t, a.EventsSent+a.ControlSent-1, a.FramesSent, "the accepter's: the same, but for the accept, which is the handshake's")
	assert.Equal(t, a.BytesSent, b.BytesReceived)
	assert.Equal(t, b.BytesSent, a.BytesReceived)
	assert.Greater(t, a.BytesSent, uint64(10*20), "ten events of some bytes each")
	assert.Zero(t, a.Queued, "nothing waits once everything arrived")

	totals := n.sws[0].LinkTotals()
	peer := n.sws[1].Name()
	assert.Equal(t, a.FramesSent, totals[peer].FramesSent)
	assert.Equal(t, a.EventsSent, totals[peer].EventsSent)
	assert.Equal(t, n.sws[0].Stats().Links.BytesSent, totals[peer].BytesSent)

	// The link re-forms: sw1 requests it again. The per-peer totals go on
	// from where they were.
	require.NoError(t, n.links[1].Close())
	require.Eventually(t, func() bool { return len(n.sws[0].Links()) == 0 }, waitFor, time.Millisecond)
	n.link(1, 0)
	require.NoError(t, n.sws[1].Flush(context.Background()))
	publish(t, p, &sion.Event{Type: "FireAlarm"})
	require.Eventually(t, func() bool { return sub.Stats().Delivered == 11 }, waitFor, time.Millisecond)
	after := n.sws[0].LinkTotals()[peer]
	assert.Equal(t, uint64(11), after.EventsSent, "10 over the first link, 1 over the second")
	assert.Greater(t, after.FramesSent, totals[peer].FramesSent)
	assert.Less(t, link(0).EventsSent, after.EventsSent, "a link's own counters start again")
}

// TestGatewayCountersOverReestablishment checks that both ends of a
// gateway count over its life: the accepting end keeps its counters when
// the gateway is cut and re-established, as the requesting end does.
func TestGatewayCountersOverReestablishment(t *testing.T) {
	tr := newTCP(t, tcp.Config{})
	o := ont1(t)
	a := newPlace(t, tr, placeAddrs("tcp", "A"), "A", o, 1)
	b := newPlace(t, tr, placeAddrs("tcp", "B"), "B", o, 1)
	sub := collector(t, open(t, b.sws[0], "sub"), "{type ⊑ Notice}")
	proxy := newFreezeProxy(t, b.addrs[0])
	g := federate(t, a, 0, &network{t: t, tr: tr, addrs: []string{proxy.addr()}}, 0,
		sion.GatewayConfig{Name: "AB", Export: &sion.DirectionConfig{}})
	pub := open(t, a.sws[0], "pub")
	for range 3 {
		publish(t, pub, &sion.Event{Type: "Notice"})
	}
	sub.exactlyOnce(t, 3, "before the cut")
	assert.Equal(t, uint64(3), gatewayInfo(t, b.sws[0], "AB").Import.Forwarded)

	proxy.cut()
	require.Eventually(t, func() bool { st, _ := g.State(); return st == sion.LinkUp && g.Establishments() == 2 }, waitFor, time.Millisecond)
	require.NoError(t, a.sws[0].Flush(context.Background()))
	for range 2 {
		publish(t, pub, &sion.Event{Type: "Notice"})
	}
	sub.exactlyOnce(t, 5, "after the gateway is re-established")
	assert.Equal(t, uint64(5), gatewayInfo(t, b.sws[0], "AB").Import.Forwarded, "the accepting end counts on")
	assert.Equal(t, uint64(5), gatewayInfo(t, a.sws[0], "AB").Export.Forwarded, "as the requesting end does")
}

package sion_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/tcp"
)

// compileAll compiles srcs, each a filter.
func compileAll(t testing.TB, srcs ...string) []*filter.Filter {
	t.Helper()
	fs := make([]*filter.Filter, len(srcs))
	for i, src := range srcs {
		f, err := filter.Compile(src)
		require.NoError(t, err, src)
		fs[i] = f
	}
	return fs
}

// Three filters of one subscription over readings 1..10: n ≤ 3 (score
// 1), n ≥ 3 weighted 2 (score 2), and every Reading (score 0). Every
// reading matches one or more of them; n = 3 matches all three.
var readingFilters = []string{
	`{type ⊑ Reading; n <= 3}`,
	`{type ⊑ Reading; match score >= 2; n >= 3 weight 2}`,
	`{type ⊑ Reading}`,
}

// TestSubscribeFiltersDeliversOncePerEvent: a subscription with several
// filters receives an event once however many of them match, listed once
// in Delivery.Matched with the best score, on a local session and on a
// remote one (whose switch holds one registration per filter).
func TestSubscribeFiltersDeliversOncePerEvent(t *testing.T) {
	variants(t, sion.PlaceConfig{}, func(t *testing.T, w *world) {
		ctx := context.Background()
		pub := w.session(t, "pub")
		s := w.session(t, "sub")
		before := w.sw.Stats()
		sub, err := s.SubscribeFilters(ctx, compileAll(t, readingFilters...))
		require.NoError(t, err)
		single := subscribe(t, s, `{type ⊑ Reading; n == 7}`)
		assert.Equal(t, before.Filters+4, w.sw.Stats().Filters, "one registration per filter")
		assert.Equal(t, readingFilters, sources(sub.Filters()))
		assert.Equal(t, readingFilters[0], sub.Filter().String())

		for n := 1; n <= 10; n++ {
			publish(t, pub, reading(n))
		}
		publish(t, pub, &sion.Event{Type: "Alarm"}) // matches none
		settle(t, s)
		got := queued(sub)
		require.Equal(t, seq(1, 10), ns(got))
		wantScore := map[int64]float64{1: 1, 2: 1, 3: 2, 4: 2, 5: 2, 6: 2, 7: 2, 8: 2, 9: 2, 10: 2}
		for _, d := range got {
			n := d.Event.Attrs[0].Value.Int()
			if n == 7 { // the session fired once for both subscriptions
				assert.Equal(t, []sion.Match{{Subscription: sub.ID(), Score: 2}, {Subscription: single.ID(), Score: 1}}, d.Matched)
				continue
			}
			assert.Equal(t, []sion.Match{{Subscription: sub.ID(), Score: wantScore[n]}}, d.Matched, "n=%d", n)
		}
		assert.Equal(t, []int64{7}, ns(queued(single)))
		st := sub.Stats()
		assert.Equal(t, uint64(10), st.Matched)
		assert.Equal(t, uint64(0), st.Dropped)
		if !w.remote {
			assert.Equal(t, uint64(10), st.Delivered)
		}
		ss := s.Stats()
		require.Len(t, ss.Subscriptions, 2, "a session lists the subscription, not its filters")

		require.NoError(t, sub.Cancel())
		settle(t, s)
		require.Eventually(t, func() bool { return w.sw.Stats().Filters == before.Filters+1 }, waitFor, tick,
			"Cancel releases every filter of the subscription")
		publish(t, pub, reading(2))
		settle(t, s)
		_, ok := <-sub.C()
		assert.False(t, ok, "closed")
	})
}

// TestSubscribeFiltersLookInAndHandler: a look-in subscription with
// several filters is spooled once per event under its own ID; a handler
// is called once per event.
func TestSubscribeFiltersLookInAndHandler(t *testing.T) {
	variants(t, sion.PlaceConfig{}, func(t *testing.T, w *world) {
		ctx := context.Background()
		pub := w.session(t, "pub")
		away := w.session(t, "away")
		look, err := away.SubscribeFilters(ctx, compileAll(t, readingFilters...), sion.WithLookIn())
		require.NoError(t, err)
		h := w.session(t, "handler")
		var calls, scored atomic.Int64
		_, err = h.SubscribeFilters(ctx, compileAll(t, readingFilters...), sion.WithHandler(func(d sion.Delivery) {
			calls.Add(1)
			if len(d.Matched) == 1 && d.Matched[0].Score > 0 {
				scored.Add(1)
			}
		}))
		require.NoError(t, err)
		for n := 1; n <= 6; n++ {
			publish(t, pub, reading(n))
		}
		settle(t, away, h)
		got, err := away.Pull(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, seq(1, 6), ns(got))
		for _, d := range got {
			require.Len(t, d.Matched, 1)
			assert.Equal(t, look.ID(), d.Matched[0].Subscription)
		}
		require.NoError(t, h.Drain(ctx))
		assert.Equal(t, int64(6), calls.Load())
		assert.Equal(t, int64(6), scored.Load())
	})
}

// TestSubscribeFiltersRefusedLeavesNothing: a subscription one of whose
// filters is refused is refused whole, and none of its filters stays
// installed; an empty list and a nil filter are refused by position.
func TestSubscribeFiltersRefusedLeavesNothing(t *testing.T) {
	variants(t, sion.PlaceConfig{}, func(t *testing.T, w *world) {
		ctx := context.Background()
		s := w.session(t, "sub")
		before := w.sw.Stats().Filters
		fs := compileAll(t, `{type ⊑ Reading}`, `{type ⊑ Alarm}`, `{type ⊑ Unheard}`, `{type ⊑ Notice}`)
		_, err := s.SubscribeFilters(ctx, fs)
		require.ErrorIs(t, err, sion.ErrUnknownEventType)
		assert.Contains(t, err.Error(), "Unheard")
		settle(t, s)
		require.Eventually(t, func() bool { return w.sw.Stats().Filters == before }, waitFor, tick)
		assert.Empty(t, s.Stats().Subscriptions)

		_, err = s.SubscribeFilters(ctx, nil)
		require.ErrorIs(t, err, sion.ErrInvalidFilter)
		_, err = s.SubscribeFilters(ctx, []*filter.Filter{fs[0], nil})
		require.ErrorIs(t, err, sion.ErrInvalidFilter)
		assert.Contains(t, err.Error(), "filter 2 of 2")
		_, err = s.SubscribeFilters(ctx, fs[:1], sion.WithQueue(0))
		require.ErrorIs(t, err, sion.ErrInvalidConfig)
		assert.Equal(t, before, w.sw.Stats().Filters)
	})
}

// TestSubscribeFiltersOverLinks: each filter of a subscription is
// propagated over shared links as its own (S1 event-path propagation);
// an event that two of them match crosses the links once and arrives
// once; Cancel releases every filter on every switch.
func TestSubscribeFiltersOverLinks(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			tr, addr := tc.make(t)
			n := newNetwork(t, tr, addr, sion.PlaceConfig{}, line(3))
			ctx := context.Background()
			before := make([]int, 3)
			for i, sw := range n.sws {
				before[i] = sw.Stats().Filters
			}
			s := open(t, n.sws[2], "far")
			sub, err := s.SubscribeFilters(ctx, compileAll(t, `{type ⊑ Reading; n <= 3}`, `{type ⊑ Reading; n >= 3}`, `{type ⊑ Alarm}`))
			require.NoError(t, err)
			for i, sw := range n.sws {
				assert.Equal(t, before[i]+3, sw.Stats().Filters, "switch %d holds each filter", i)
			}
			pub := open(t, n.sws[0], "pub")
			sent := n.sws[0].Stats().Links.EventsSent
			for k := 1; k <= 5; k++ {
				publish(t, pub, reading(k))
			}
			publish(t, pub, &sion.Event{Type: "FireAlarm"})
			publish(t, pub, &sion.Event{Type: "Notice"}) // matches none: does not cross
			got := make([]int64, 0, 6)
			for range 6 {
				d, err := sub.Next(ctxWithTimeout(t))
				require.NoError(t, err)
				require.Len(t, d.Matched, 1)
				if d.Event.Type == "FireAlarm" {
					got = append(got, 0)
					continue
				}
				got = append(got, d.Event.Attrs[0].Value.Int())
			}
			assert.Equal(t, []int64{1, 2, 3, 4, 5, 0}, got)
			n.flush()
			assert.Empty(t, queued(sub), "n=3 matched two filters and arrived once")
			assert.Equal(t, uint64(6), n.sws[0].Stats().Links.EventsSent-sent, "each event crossed the first link once")

			require.NoError(t, sub.Cancel())
			for i, sw := range n.sws {
				require.Eventually(t, func() bool { return sw.Stats().Filters == before[i] }, waitFor, tick,
					"switch %d released the filters", i)
			}
		})
	}
}

// TestSubscribeFiltersRemoteReconnect: a remote session that reconnects
// to a restarted switch registers every filter of its subscriptions
// again, and each still receives an event once. A subscription one of
// whose filters the new switch refuses (its ontology lacks the type) ends
// whole, with the cause, and its other filters are released there.
func TestSubscribeFiltersRemoteReconnect(t *testing.T) {
	tr := newTCP(t, tcp.Config{})
	ctx := context.Background()
	first, err := sion.NewEventPlace(sion.PlaceConfig{Name: "test", Ontology: ont1(t)})
	require.NoError(t, err)
	sw, addr, stop := serveOn(t, tr, "127.0.0.1:0", first)
	log := newConnectionLog()
	policy := fastReconnect
	policy.OnChange = log.record
	s, err := sion.Dial(ctx, tr, addr, sion.SessionConfig{Name: "app", Reconnect: policy})
	require.NoError(t, err)
	defer s.Close()
	kept, err := s.SubscribeFilters(ctx, compileAll(t, readingFilters...))
	require.NoError(t, err)
	ended, err := s.SubscribeFilters(ctx, compileAll(t, `{type ⊑ Reading; n == 2}`, `{type ⊑ Alarm}`))
	require.NoError(t, err)
	require.Equal(t, 5, sw.Stats().Filters)
	stop()
	require.False(t, log.next(t).Connected)

	readingsOnly, err := ontology.New([]ontology.TypeDef{
		{Name: "Event"},
		{Name: "Reading", Parents: []string{"Event"}, Attributes: []ontology.Attribute{{Name: "n", Kind: ontology.KindInt}}},
	})
	require.NoError(t, err)
	second, err := sion.NewEventPlace(sion.PlaceConfig{Name: "test", Ontology: readingsOnly})
	require.NoError(t, err)
	sw, _, stop = serveOn(t, tr, addr, second)
	defer stop()
	ev := log.next(t)
	require.True(t, ev.Connected)
	require.False(t, ev.Resumed)
	_, err = ended.Next(ctx)
	require.ErrorIs(t, err, sion.ErrClosed)
	assert.ErrorContains(t, err, "registering it again after a reconnect failed")
	require.Eventually(t, func() bool { return sw.Stats().Filters == 3 }, waitFor, tick,
		"the ended subscription's other filter is released; the kept one's three stay")
	pub := open(t, sw, "pub")
	for n := 1; n <= 4; n++ {
		publish(t, pub, reading(n))
	}
	require.NoError(t, s.Sync(ctx))
	got := queued(kept)
	assert.Equal(t, seq(1, 4), ns(got))
	for _, d := range got {
		assert.Len(t, d.Matched, 1)
	}
	assert.Equal(t, []sion.SubscriptionStats{kept.Stats()}, s.Stats().Subscriptions)
}

func sources(fs []*filter.Filter) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}

func ctxWithTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

const (
	waitFor = 10 * time.Second
	tick    = time.Millisecond
)

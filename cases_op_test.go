package sion_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
)

// The scenarios of ../shared/CASES-2.md about metrics (OP) that concern
// the switch's counters, which the metrics module exports as they are:
// here every counter a scrape would read is read, at the same moments.

// counterScrape is one reading of every counter of a switch and of one
// client-side subscription, by a name that stays the same for as long as
// what it counts lives: a session's by its ID, a link's by its peer.
type counterScrape map[string]uint64

// scrapeCounters reads sw's counters as a metrics scrape does: Stats
// (Links and Drops included), LinkTotals, Gateways, and every session's
// subscriptions; sub, when not nil, is read on the entity's side.
func scrapeCounters(sw *sion.Switch, sub *sion.Subscription) counterScrape {
	out := counterScrape{}
	addUints(out, "stats", reflect.ValueOf(sw.Stats()))
	for peer, lt := range sw.LinkTotals() {
		addUints(out, "link/"+peer, reflect.ValueOf(lt))
	}
	for _, g := range sw.Gateways() {
		addUints(out, "gateway/"+g.Name+"/import", reflect.ValueOf(g.Import))
		addUints(out, "gateway/"+g.Name+"/export", reflect.ValueOf(g.Export))
	}
	for _, s := range sw.Sessions() {
		for _, st := range s.Subscriptions {
			st.Queued, st.Slow = 0, false // gauges
			addUints(out, fmt.Sprintf("session/%d/%d", s.ID, st.ID), reflect.ValueOf(st.SubscriptionStats))
		}
		out[fmt.Sprintf("session/%d/spool_dropped", s.ID)] = s.SpoolDropped
	}
	if sub != nil {
		addUints(out, "client", reflect.ValueOf(sub.Stats()))
	}
	h := sw.MatchTime()
	out["match_time/count"] = h.Count
	for i, c := range h.Counts {
		out[fmt.Sprintf("match_time/%d", i)] = c
	}
	return out
}

// addUints adds the uint64 fields of struct v, and of the structs in it,
// under prefix.
func addUints(out counterScrape, prefix string, v reflect.Value) {
	for i := range v.NumField() {
		f, name := v.Field(i), prefix+"/"+v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.Uint64:
			out[name] = f.Uint()
		case reflect.Struct:
			addUints(out, name, f)
		}
	}
}

// scrapes keeps every scrape and checks each against the one before: a
// counter never goes down; it may disappear with what it counts.
type scrapes struct {
	t    *testing.T
	mu   sync.Mutex
	last counterScrape
	n    int
}

func (s *scrapes) take(sc counterScrape) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range sc {
		if was, ok := s.last[k]; ok {
			assert.GreaterOrEqual(s.t, v, was, "scrape %d: counter %s went down", s.n, k)
		}
	}
	s.last, s.n = sc, s.n+1
}

// TestCaseB35CountersNeverGoBack: a remote session R is cut while 20
// events are published for it — 8 fit what the switch holds for it, 12
// overflow — and stays away past its retention, so the 8 expire too; it
// returns, opened anew with a gap report of 20; then 50 events arrive
// while its drop-oldest subscription's handler is blocked, and it
// closes. Scraped every 250 ms throughout, no counter ever goes down
// (A18): not the drops by overflow, age or eviction, not the delivered
// count of a subscription whose events are evicted later. What R's
// switch holds for it is a gauge: 8 events' bytes while it is away, 0
// once it is gone.
func TestCaseB35CountersNeverGoBack(t *testing.T) {
	w := newRSWorld(t, sion.ReconnectPolicy{RetentionBytes: 1}) // set below, once the frame's size is known
	pub := open(t, w.sw, "P")
	size := deliverFrameBytes(t, w, pub, notice(0))
	require.NoError(t, w.r.Close())
	// Close returns once the switch has ended the connection; the session
	// ends a moment later, and must not be counted among R's below.
	require.Eventually(t, func() bool {
		return !slices.ContainsFunc(w.sw.Sessions(), func(si sion.SessionInfo) bool { return si.Name == "R" })
	}, waitFor, time.Millisecond, "the first R's session ended")
	w.log = newConnectionLog()
	var err error
	w.r, err = sion.Dial(context.Background(), w.tr, w.proxy.Addr(), sion.SessionConfig{Name: "R", Reconnect: sion.ReconnectPolicy{
		RetentionBytes: 8*size + size/2, Retention: 2 * time.Second,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, OnChange: w.log.record}})
	require.NoError(t, err) // newRSWorld's cleanup closes it, after unblock below
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // a failed check must not leave the handler blocked: Close waits for it
	s := subscribe(t, w.r, `{type ⊑ Notice; seq >= 1}`, sion.WithQueue(4), sion.WithOverflow(sion.DropOldest),
		sion.WithHandler(func(sion.Delivery) { <-release }))

	sc := &scrapes{t: t}
	ctx := context.Background()
	scrape := func() { sc.take(scrapeCounters(w.sw, s)) }
	scrapeFor := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			scrape()
		}
	}
	scrape() // the baseline

	rIDs := map[uint64]bool{} // R's sessions on the switch: this one, and the one it is opened anew as
	noteR := func() {
		for _, si := range w.sw.Sessions() {
			if si.Name == "R" {
				rIDs[si.ID] = true
			}
		}
	}
	noteR()
	// Step 1: R is cut, 20 events are published for it.
	w.cut(t)
	before := w.sw.Stats()
	for n := 1; n <= 20; n++ {
		publish(t, pub, notice(n))
	}
	assert.Equal(t, int64(8*size), w.sw.Stats().RetainedBytes, "the switch holds R's newest 8")
	assert.Equal(t, uint64(12), w.sw.Stats().Drops.Stream-before.Drops.Stream, "12 overflowed")
	// Steps 2 and 3: scraped while R stays away past its retention.
	scrapeFor(3 * time.Second)
	require.Eventually(t, func() bool { return w.sw.Stats().Away == 0 }, waitFor, 10*time.Millisecond, "R's retention passed")
	after := w.sw.Stats()
	assert.Equal(t, uint64(20), after.Drops.Stream-before.Drops.Stream, "12 for overflow, 8 for age")
	assert.Equal(t, after.Dropped-before.Dropped, after.Drops.Stream-before.Drops.Stream)
	assert.Zero(t, after.RetainedBytes, "nothing held once R's session ended")
	ev := w.restore(t)
	assert.True(t, ev.Expired)
	assert.Equal(t, uint64(20), ev.Lost, "the gap report")
	require.NoError(t, w.r.Sync(ctx))
	noteR()
	require.Len(t, rIDs, 2, "R was opened anew")
	scrape()

	// Step 4: 50 events while the handler is blocked: the queue of 4
	// evicts its oldest, over and over.
	var scraping sync.WaitGroup
	stop := make(chan struct{})
	scraping.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
				scrape()
			}
		}
	})
	base := s.Stats().Matched
	for n := 21; n <= 70; n++ { // each waits for the last to reach R: the 8 events' bytes R's switch holds in flight do not overflow
		publish(t, pub, notice(n))
		require.Eventually(t, func() bool { return s.Stats().Matched == base+uint64(n-20) }, waitFor, time.Millisecond)
	}
	time.Sleep(time.Second) // the handler stays blocked for a second, scraped meanwhile
	close(stop)
	scraping.Wait()
	st := s.Stats()
	assert.Equal(t, uint64(50), st.Delivered, "every event was handed over; those evicted later stay counted")
	assert.Equal(t, 4, st.Queued)
	assert.Equal(t, uint64(20+45), st.Dropped, "the 20 of the gap report, and 45 evicted: the handler holds one, 4 wait")
	unblock()
	scrape()

	// Step 5: R closes; its series go, none goes down.
	require.NoError(t, w.r.Close())
	require.Eventually(t, func() bool { return w.sw.Stats().Sessions == 1 }, waitFor, time.Millisecond, "only P is left")
	scrape()
	for k := range sc.last {
		for id := range rIDs {
			assert.NotContains(t, k, fmt.Sprintf("session/%d/", id), "R's sessions' series are gone")
		}
	}
	assert.GreaterOrEqual(t, sc.n, 12, "scraped throughout")
}

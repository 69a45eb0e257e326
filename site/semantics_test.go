package site_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/site"
)

// Timing of the scenarios (CASES-2 conventions): an event is received
// within tReceive; a withdrawal reaches the switches within tSettle.
const (
	tReceive = 2 * time.Second
	tSettle  = 5 * time.Second
)

// subscribe subscribes sess to filter src, requiring it granted.
func subscribe(t testing.TB, sess *sion.Session, src string) *sion.Subscription {
	t.Helper()
	sub, err := sess.Subscribe(context.Background(), src)
	require.NoError(t, err, "subscribe %s", src)
	return sub
}

// receive returns the n of the next k events sub receives, each within
// tReceive.
func receive(t testing.TB, sub *sion.Subscription, k int) []int64 {
	t.Helper()
	var got []int64
	for len(got) < k {
		ctx, cancel := context.WithTimeout(context.Background(), tReceive)
		d, err := sub.Next(ctx)
		cancel()
		require.NoError(t, err, "after %v", got)
		v, _ := d.Event.Value("n")
		got = append(got, v.Int())
	}
	return got
}

// receiveEvents is receive with the events themselves.
func receiveEvents(t testing.TB, sub *sion.Subscription, k int) []*sion.Event {
	t.Helper()
	var got []*sion.Event
	for len(got) < k {
		ctx, cancel := context.WithTimeout(context.Background(), tReceive)
		d, err := sub.Next(ctx)
		cancel()
		require.NoError(t, err, "after %d events", len(got))
		got = append(got, d.Event)
	}
	return got
}

// nothingMore asserts that none of subs receives anything within T_quiet
// (one window for all of them).
func nothingMore(t testing.TB, subs map[string]*sion.Subscription) {
	t.Helper()
	ctx := quiet(t)
	type result struct {
		name string
		d    sion.Delivery
		err  error
	}
	ch := make(chan result, len(subs))
	for name, sub := range subs {
		go func() {
			d, err := sub.Next(ctx)
			ch <- result{name, d, err}
		}()
	}
	for range subs {
		r := <-ch
		if !assert.ErrorIs(t, r.err, context.DeadlineExceeded, "%s received more", r.name) && r.d.Event != nil {
			t.Logf("%s received %v", r.name, r.d.Event)
		}
	}
}

// interSite returns each proxy's ProxyStats.InterSiteEvents, by address.
func (s *system) interSite() map[string]uint64 {
	out := map[string]uint64{}
	for addr, p := range s.proxies {
		out[addr] = p.Stats().InterSiteEvents
	}
	return out
}

// crossings returns the events that crossed between sites: the sum of the
// proxies' ProxyStats.InterSiteEvents.
func (s *system) crossings() uint64 {
	var n uint64
	for _, v := range s.interSite() {
		n += v
	}
	return n
}

// subscriptions returns the subscriptions open on the switches at addrs.
func (s *system) subscriptions(addrs ...string) map[string]int {
	out := map[string]int{}
	for _, a := range addrs {
		out[a] = s.switches[a].Stats().Subscriptions
	}
	return out
}

// waitSubscriptions waits until the switches hold want subscriptions.
func (s *system) waitSubscriptions(want map[string]int, msg string) {
	s.t.Helper()
	addrs := slices.Sorted(maps.Keys(want))
	if !assert.Eventually(s.t, func() bool { return maps.Equal(s.subscriptions(addrs...), want) }, tSettle, 5*time.Millisecond) {
		require.Equal(s.t, want, s.subscriptions(addrs...), "%s: subscriptions at the switches", msg)
	}
}

// b25Sites: hub H and edge sites A and B, each with two switches, its
// representative proxy (the first) and a second proxy.
var b25Sites = []siteSpec{
	{id: "H", switches: []string{"h.0", "h.1"}, proxies: []string{"h", "h2"}},
	{id: "A", switches: []string{"a.0", "a.1"}, proxies: []string{"a", "a2"}},
	{id: "B", switches: []string{"b.0", "b.1"}, proxies: []string{"b", "b2"}},
}

// TestCaseB25EchoBetweenSites: CASES-2 B25 with ONT-1's Notice mapped to
// TopicB of the test ontology and {type ⊑ Notice} to {type ⊑ Topic}. H
// plays the hub (the cloud); the site manager runs apart. Each subscriber's
// proxy subscribes once at each other site's representative proxy, so an
// event crosses straight from its site to each other site with a
// subscriber — A→H and A→B for n = 1, not A→H→B as through a hub — and
// the count of crossings is the same, 6 (A14: at most once per inter-site
// link). A crossing is an event arriving at a proxy from another site
// (ProxyStats.InterSiteEvents); an event that came back to its origin site
// would be one more, at a proxy of that site. Run with the subscribers at
// the second proxies (publishers at the representatives) and at the
// representatives (publishers at the second proxies), where a
// representative proxy both takes other sites' subscriptions and places
// its own application's at other sites.
func TestCaseB25EchoBetweenSites(t *testing.T) {
	for _, tc := range []struct {
		name       string
		subAt      map[string]string // site → proxy address of its subscriber
		pubAt      map[string]string // site → proxy address of its publisher
		notCrossed []string          // proxies that receive nothing from other sites
	}{
		{"subscribers at second proxies",
			map[string]string{"H": "h2", "A": "a2", "B": "b2"}, map[string]string{"H": "h", "A": "a", "B": "b"},
			[]string{"h", "a", "b"}},
		{"subscribers at representatives",
			map[string]string{"H": "h", "A": "a", "B": "b"}, map[string]string{"H": "h2", "A": "a2", "B": "b2"},
			[]string{"h2", "a2", "b2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSystem(t, b25Sites)
			// SB's filter differs from the others' only so that its
			// withdrawal shows in A's and H's switches: identical filters
			// are placed once at a representative proxy, reference-counted,
			// and a count falling from 2 to 1 changes nothing there. It
			// matches every event of the scenario.
			filters := map[string]string{"H": "{type ⊑ Topic}", "A": "{type ⊑ Topic}", "B": "{type ⊑ Topic; n >= 1}"}
			subs := map[string]*sion.Subscription{}
			for _, id := range []string{"A", "B", "H"} {
				subs[id] = subscribe(t, s.session(tc.subAt[id], "S"+id), filters[id])
			}
			pubs := map[string]*sion.Session{}
			for _, id := range []string{"A", "B", "H"} {
				pubs[id] = s.session(tc.pubAt[id], "P"+id)
			}

			// Step 1.
			publish(t, pubs["A"], "TopicB", 1)
			publish(t, pubs["B"], "TopicB", 2)
			publish(t, pubs["H"], "TopicB", 3)
			for _, id := range []string{"A", "B", "H"} {
				got := receive(t, subs[id], 3)
				slices.Sort(got)
				assert.Equal(t, []int64{1, 2, 3}, got, "S%s", id)
			}
			nothingMore(t, map[string]*sion.Subscription{"SA": subs["A"], "SB": subs["B"], "SH": subs["H"]})
			want := map[string]uint64{}
			for _, id := range []string{"A", "B", "H"} {
				want[tc.subAt[id]] = 2 // the events of the two other sites
			}
			for _, addr := range tc.notCrossed {
				want[addr] = 0
			}
			assert.Equal(t, want, s.interSite(), "events that reached each proxy from other sites (step 1, after T_quiet)")
			assert.Equal(t, uint64(6), s.crossings())

			// Step 2: SB ends; once its withdrawal has reached the
			// switches of A and H, n = 4 at A crosses to H only.
			aSw, hSw := s.subscriptions("a.0", "a.1"), s.subscriptions("h.0", "h.1")
			require.NoError(t, subs["B"].Cancel())
			waitDrop(t, s, aSw, "A")
			waitDrop(t, s, hSw, "H")
			before := s.interSite()
			publish(t, pubs["A"], "TopicB", 4)
			assert.Equal(t, []int64{4}, receive(t, subs["A"], 1), "SA")
			assert.Equal(t, []int64{4}, receive(t, subs["H"], 1), "SH")
			nothingMore(t, map[string]*sion.Subscription{"SA": subs["A"], "SH": subs["H"]})
			_, err := subs["B"].Next(context.Background())
			assert.ErrorIs(t, err, sion.ErrClosed, "SB after Cancel")
			want = before
			want[tc.subAt["H"]]++
			assert.Equal(t, want, s.interSite(), "step 2: one crossing, A→H")
			assert.Equal(t, uint64(7), s.crossings())
		})
	}
}

func total(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// waitDrop waits until the switches of a site (those in was) hold one
// subscription fewer in all than they did: a withdrawn subscription of
// another site's proxy, which the site's representative proxy had placed
// at one of them.
func waitDrop(t testing.TB, s *system, was map[string]int, site string) {
	t.Helper()
	addrs := slices.Sorted(maps.Keys(was))
	if !assert.Eventually(t, func() bool { return total(s.subscriptions(addrs...)) == total(was)-1 }, tSettle, 5*time.Millisecond) {
		require.Equal(t, total(was)-1, total(s.subscriptions(addrs...)), "site %s: subscriptions at the switches, %v before the withdrawal", site, was)
	}
}

// startProxyWith starts the proxy at addr of site sp as startProxy does,
// with cfg changed by edit first (a front's SharedKey, say), and waits
// until the manager knows it.
func (s *system) startProxyWith(sp siteSpec, addr string, edit func(*site.ProxyConfig)) *site.Proxy {
	s.t.Helper()
	p := s.addProxy(sp, addr, edit)
	require.Eventually(s.t, func() bool {
		for _, si := range s.manager.Sites() {
			for _, pi := range si.Proxies {
				if pi.Addr == addr && pi.Reachable {
					return true
				}
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond, "proxy %s not registered", addr)
	return p
}

// addProxy starts the proxy at addr of site sp, with cfg changed by edit
// first, and does not wait for it.
func (s *system) addProxy(sp siteSpec, addr string, edit func(*site.ProxyConfig)) *site.Proxy {
	s.t.Helper()
	cfg := site.ProxyConfig{
		Name: "proxy-" + addr, Site: sp.id, Addr: addr, Transport: s.net, Manager: "manager",
		Place: sion.PlaceConfig{Ontology: s.ont}, Direct: s.direct,
	}
	edit(&cfg)
	p, err := site.NewProxy(cfg)
	require.NoError(s.t, err)
	s.proxies[addr] = p
	s.serve(addr, p.Serve)
	return p
}

// TestInheritance: a cloud subscription to Topic (the root type) or
// TopicB receives the TopicB2 events published at site B1, and one to
// TopicA only TopicA's, each exactly once — whether it was made before
// the types were first published (the manager holds the first publish
// until it is placed) or after.
func TestInheritance(t *testing.T) {
	for _, first := range []string{"subscribe", "publish"} {
		t.Run(first+" first", func(t *testing.T) {
			s := newSystem(t, figSites, fallback("B0"))
			sensor := s.session("5", "sensor")
			if first == "publish" {
				publish(t, sensor, "TopicB2", -1)
				publish(t, sensor, "TopicA", -2)
			}
			proc := s.session("0", "process")
			subs := map[string]*sion.Subscription{}
			for _, typ := range []string{"Topic", "TopicB", "TopicA"} {
				subs[typ] = subscribe(t, proc, "{type ⊑ "+typ+"}")
			}
			for i := 1; i <= 6; i++ {
				publish(t, sensor, "TopicB2", i)
			}
			publish(t, sensor, "TopicA", 100)
			want := map[string][]int64{"Topic": {1, 2, 3, 4, 5, 6, 100}, "TopicB": {1, 2, 3, 4, 5, 6}, "TopicA": {100}}
			for typ, sub := range subs {
				got := receive(t, sub, len(want[typ]))
				slices.Sort(got)
				assert.Equal(t, want[typ], got, "{type ⊑ %s}", typ)
			}
			nothingMore(t, subs)
		})
	}
}

// TestFallback: sensor C at proxy 2 (site B2, no switch) publishes
// TopicC; it lands on switch 3 of the fallback site B0, and subscribers at
// proxy 0 (B0) and proxy 1 (B1, across sites to B0's only switch) receive
// it exactly once, whether they subscribed before its first publish or
// after. Without a fallback site, the publish is refused with an error
// wrapping site.ErrNoSwitch.
func TestFallback(t *testing.T) {
	for _, first := range []string{"subscribe", "publish"} {
		t.Run(first+" first", func(t *testing.T) {
			s := newSystem(t, figSites, fallback("B0"))
			sensor := s.session("2", "sensor-C")
			if first == "publish" {
				publish(t, sensor, "TopicC", -1)
			}
			in := s.publishes("3")
			subs := map[string]*sion.Subscription{
				"0": subscribe(t, s.session("0", "process-C"), "{type ⊑ TopicC}"),
				"1": subscribe(t, s.session("1", "process-C1"), "{type ⊑ TopicC}"),
			}
			const n = 5
			for i := 1; i <= n; i++ {
				publish(t, sensor, "TopicC", i)
			}
			for addr, sub := range subs {
				got := receive(t, sub, n)
				slices.Sort(got)
				assert.Equal(t, []int64{1, 2, 3, 4, 5}, got, "subscriber at proxy %s", addr)
			}
			nothingMore(t, subs)
			assert.Equal(t, in+n, s.publishes("3"), "switch 3 of B0 took the publishes")
			assert.Zero(t, s.publishes("4.0")+s.publishes("4.1"))
			assert.Equal(t, uint64(n), s.proxies["1"].Stats().InterSiteEvents, "B0 → B1")
			assert.Zero(t, s.proxies["0"].Stats().InterSiteEvents, "B0's own switch")
		})
	}
	t.Run("no fallback", func(t *testing.T) {
		s := newSystem(t, figSites)
		sensor := s.session("2", "sensor-C")
		err := sensor.Publish(context.Background(), &sion.Event{Type: "TopicC"})
		require.Error(t, err)
		assert.ErrorIs(t, err, site.ErrNoSwitch)
		assert.Zero(t, s.publishes("3"))
	})
}

// TestReferenceCounting: identical filters at one proxy cross to a site
// once (InterSiteSubscribes), and are withdrawn there — at the
// representative proxy and at its site's switches — when the last of
// them is cancelled or its session closed. Filters, not event types,
// aggregate: two different filters of one type cross separately, even
// when one implies the other.
func TestReferenceCounting(t *testing.T) {
	for _, end := range []string{"cancel", "close"} {
		t.Run(end, func(t *testing.T) {
			s := newSystem(t, figSites, fallback("B0"))
			sensor := s.session("5", "sensor-B")
			publish(t, sensor, "TopicB", -1) // both of B1's switches carry TopicB
			publish(t, sensor, "TopicB", -2)
			base := s.subscriptions("3", "4.0", "4.1")
			p0, p1 := s.proxies["0"], s.proxies["1"]
			cross, fanned := p0.Stats().InterSiteSubscribes, p1.Stats().FannedOut

			s1, s2 := s.session("0", "process-B1"), s.session("0", "process-B2")
			sub1 := subscribe(t, s1, "{type ⊑ TopicB}")
			sub2 := subscribe(t, s2, "{type ⊑ TopicB}")
			assert.Equal(t, cross+1, p0.Stats().InterSiteSubscribes, "one filter crosses once")
			assert.Equal(t, fanned+1, p1.Stats().FannedOut, "the representative took it once")
			s.waitSubscriptions(map[string]int{"3": base["3"] + 1, "4.0": base["4.0"] + 1, "4.1": base["4.1"] + 1}, "placed once per switch")
			publish(t, sensor, "TopicB", 1)
			assert.Equal(t, []int64{1}, receive(t, sub1, 1))
			assert.Equal(t, []int64{1}, receive(t, sub2, 1))

			// The first goes; the other keeps receiving.
			if end == "cancel" {
				require.NoError(t, sub1.Cancel())
			} else {
				require.NoError(t, s1.Close())
			}
			publish(t, sensor, "TopicB", 2)
			assert.Equal(t, []int64{2}, receive(t, sub2, 1))
			_, err := sub1.Next(context.Background())
			assert.ErrorIs(t, err, sion.ErrClosed)
			assert.Equal(t, map[string]int{"3": base["3"] + 1, "4.0": base["4.0"] + 1, "4.1": base["4.1"] + 1}, s.subscriptions("3", "4.0", "4.1"), "still placed")

			// The last goes: withdrawn at B0's switch, and by the
			// representative at B1's.
			if end == "cancel" {
				require.NoError(t, sub2.Cancel())
			} else {
				require.NoError(t, s2.Close())
			}
			s.waitSubscriptions(base, "withdrawn")
			assert.Equal(t, cross+1, p0.Stats().InterSiteSubscribes)

			// Subscribing again crosses again: nothing was left over.
			sub3 := subscribe(t, s.session("0", "process-B3"), "{type ⊑ TopicB}")
			assert.Equal(t, cross+2, p0.Stats().InterSiteSubscribes)
			publish(t, sensor, "TopicB", 3)
			assert.Equal(t, []int64{3}, receive(t, sub3, 1))
		})
	}
	t.Run("different filters", func(t *testing.T) {
		s := newSystem(t, figSites, fallback("B0"))
		sensor := s.session("5", "sensor-B")
		publish(t, sensor, "TopicB", -1)
		publish(t, sensor, "TopicB", -2)
		base := s.subscriptions("3", "4.0", "4.1")
		cross := s.proxies["0"].Stats().InterSiteSubscribes
		proc := s.session("0", "process-B")
		all := subscribe(t, proc, "{type ⊑ TopicB}")
		some := subscribe(t, proc, "{type ⊑ TopicB; n >= 0}")
		assert.Equal(t, cross+2, s.proxies["0"].Stats().InterSiteSubscribes, "two filters of one type cross twice")
		s.waitSubscriptions(map[string]int{"3": base["3"] + 2, "4.0": base["4.0"] + 2, "4.1": base["4.1"] + 2}, "two filters placed")
		publish(t, sensor, "TopicB", 1)
		assert.Equal(t, []int64{1}, receive(t, all, 1))
		assert.Equal(t, []int64{1}, receive(t, some, 1))
		require.NoError(t, all.Cancel())
		s.waitSubscriptions(map[string]int{"3": base["3"] + 1, "4.0": base["4.0"] + 1, "4.1": base["4.1"] + 1}, "one withdrawn")
		publish(t, sensor, "TopicB", 2)
		assert.Equal(t, []int64{2}, receive(t, some, 1))
	})
}

// TestFirstPublishOfNewType: a subscriber subscribes to an event type no
// site publishes yet; the very first event of the type, published at
// another site, reaches it (the site manager holds the publish's answer
// until the subscriber's proxy has placed the subscription there,
// ManagerConfig.SettleTimeout). Each path runs on fresh systems, several
// times, to catch races: from B1's second proxy (handed to the
// representative, spread) and from the representative itself to the
// cloud; from B2 (fallback to B0's only switch) to B1's second proxy.
func TestFirstPublishOfNewType(t *testing.T) {
	for _, tc := range []struct {
		name         string
		pubAt, subAt string
		runs         int
	}{
		{"B1 second proxy to cloud", "5", "0", 20},
		{"B1 representative to cloud", "1", "0", 5},
		{"B2 via fallback to B1", "2", "5", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for run := range tc.runs {
				s := newSystem(t, figSites, fallback("B0"))
				sub := subscribe(t, s.session(tc.subAt, "process-C"), "{type ⊑ TopicC}")
				sensor := s.session(tc.pubAt, "sensor-C")
				publish(t, sensor, "TopicC", 1)
				publish(t, sensor, "TopicC", 2)
				got := receive(t, sub, 2)
				slices.Sort(got)
				require.Equal(t, []int64{1, 2}, got, "run %d", run)
				s.close()
			}
		})
	}
}

// TestContentFilterCrossesWhole: a cloud subscription {type ⊑ TopicB;
// n >= 50} is placed whole at site B1, so only the events it matches
// cross sites: proxy 0's InterSiteEvents counts exactly those.
func TestContentFilterCrossesWhole(t *testing.T) {
	s := newSystem(t, figSites, fallback("B0"))
	sensor := s.session("5", "sensor")
	publish(t, sensor, "TopicB", -1)
	publish(t, sensor, "TopicA", -1)
	sub := subscribe(t, s.session("0", "process"), "{type ⊑ TopicB; n >= 50}")
	before := s.proxies["0"].Stats().InterSiteEvents
	for i := range 100 {
		publish(t, sensor, []string{"TopicB", "TopicB2"}[i%2], i)
		publish(t, sensor, "TopicA", 1000+i) // matches n >= 50, not the type
	}
	got := receive(t, sub, 50)
	slices.Sort(got)
	want := make([]int64, 0, 50)
	for i := 50; i < 100; i++ {
		want = append(want, int64(i))
	}
	assert.Equal(t, want, got)
	nothingMore(t, map[string]*sion.Subscription{"sub": sub})
	assert.Equal(t, before+50, s.proxies["0"].Stats().InterSiteEvents, "only matching events crossed")
}

// TestRemoteSessions: an application that dials a proxy's address
// (sion.Dial over the system's network) publishes and subscribes exactly
// as one in the proxy's process (Proxy.Open); with a shared key on the
// proxies' fronts, a Dial without it, or with another, is refused with
// ErrNotAdmitted. An event has one ID everywhere: the front where it is
// published gives it one (or keeps its publisher's), and subscribers at
// two proxies of two sites see that ID; a second publish of a caller-set
// ID is dropped.
func TestRemoteSessions(t *testing.T) {
	key := []byte("0123456789abcdef-front")
	for _, kind := range []string{"local", "remote"} {
		t.Run(kind, func(t *testing.T) {
			var bare []siteSpec
			for _, sp := range figSites {
				bare = append(bare, siteSpec{id: sp.id, switches: sp.switches})
			}
			s := newSystem(t, bare, fallback("B0"))
			for _, addr := range []string{"0", "1", "5", "2"} {
				sp := figSites[slices.IndexFunc(figSites, func(sp siteSpec) bool { return slices.Contains(sp.proxies, addr) })]
				s.startProxyWith(sp, addr, func(c *site.ProxyConfig) { c.Place.SharedKey = key })
			}
			open := func(addr, name string) *sion.Session {
				t.Helper()
				if kind == "local" {
					return s.session(addr, name)
				}
				ctx, cancel := context.WithTimeout(context.Background(), tReceive)
				defer cancel()
				sess, err := sion.Dial(ctx, s.net, addr, sion.SessionConfig{Name: name, SharedKey: key})
				require.NoError(t, err)
				t.Cleanup(func() { sess.Close() })
				return sess
			}
			sensor := open("5", "sensor-B")
			publish(t, sensor, "TopicB", -1)
			sub0 := subscribe(t, open("0", "process-B"), "{type ⊑ TopicB}")
			sub1 := subscribe(t, open("1", "process-B1"), "{type ⊑ TopicB}")
			for i := 1; i <= 5; i++ {
				publish(t, sensor, "TopicB", i)
			}
			own := sion.EventID{0xfe, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
			for range 2 { // the second is a duplicate
				require.NoError(t, sensor.Publish(context.Background(), &sion.Event{ID: own, Type: "TopicB2", Attrs: attrsN(6)}))
			}
			ids := map[int64]sion.EventID{}
			for _, ev := range receiveEvents(t, sub0, 6) {
				v, _ := ev.Value("n")
				ids[v.Int()] = ev.ID
			}
			require.Len(t, ids, 6)
			seen := map[sion.EventID]bool{}
			for _, ev := range receiveEvents(t, sub1, 6) {
				v, _ := ev.Value("n")
				assert.Equal(t, ids[v.Int()], ev.ID, "event n = %d has one ID at proxies 0 and 1", v.Int())
				assert.False(t, ev.ID.IsZero())
				assert.False(t, seen[ev.ID], "ID %s twice", ev.ID)
				seen[ev.ID] = true
			}
			assert.Equal(t, own, ids[6], "the publisher's ID is kept")
			nothingMore(t, map[string]*sion.Subscription{"sub0": sub0, "sub1": sub1})
		})
	}
	t.Run("admission", func(t *testing.T) {
		s := newSystem(t, []siteSpec{{id: "B0", switches: []string{"3"}}})
		s.startProxyWith(siteSpec{id: "B0"}, "0", func(c *site.ProxyConfig) { c.Place.SharedKey = key })
		for _, tc := range []struct {
			name string
			key  []byte
			ok   bool
		}{
			{"no key", nil, false},
			{"another key", []byte("fedcba9876543210-other"), false},
			{"the key", key, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), tReceive)
				defer cancel()
				sess, err := sion.Dial(ctx, s.net, "0", sion.SessionConfig{Name: "app", SharedKey: tc.key})
				if !tc.ok {
					assert.ErrorIs(t, err, sion.ErrNotAdmitted)
					return
				}
				require.NoError(t, err)
				t.Cleanup(func() { sess.Close() })
				sub := subscribe(t, sess, "{type ⊑ TopicA}")
				publish(t, sess, "TopicA", 1)
				assert.Equal(t, []int64{1}, receive(t, sub, 1))
			})
		}
	})
}

func attrsN(n int64) []ontology.Attr { return []ontology.Attr{{Name: "n", Value: ontology.Int(n)}} }

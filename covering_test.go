package sion_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/transport/mem"
)

// Covering in S1 routing (PlaceConfig.Covering): a key covered by one
// registered over the same link, with the same places and at least its
// TTL, is counted under it instead of being registered.

// coveringNet starts switches of one place over mem, linked as parent
// says, named prefix0…; cfg's Name and Ontology default to prefix and
// ONT-1, and the place approves federation requests.
func coveringNet(t *testing.T, prefix string, cfg sion.PlaceConfig, parent []int) *network {
	t.Helper()
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	return coveringNetOver(t, tr, prefix, cfg, parent)
}

func coveringNetOver(t *testing.T, tr *mem.Network, prefix string, cfg sion.PlaceConfig, parent []int) *network {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = prefix
	}
	if cfg.Ontology == nil {
		cfg.Ontology = ont1(t)
	}
	cfg.Federation = approve
	p, err := sion.NewEventPlace(cfg)
	require.NoError(t, err)
	n := &network{t: t, tr: tr, place: p, parent: parent, links: make([]*sion.SharedLink, len(parent)), prefix: prefix,
		linkCfg: sion.LinkConfig{RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond, ProbeHops: -1}}
	for i := range parent {
		n.start(i, fmt.Sprintf("%s-%d", prefix, i))
	}
	for i, p := range parent {
		if p >= 0 {
			n.link(i, p)
		}
	}
	return n
}

// mustLink returns sw's shared link to the switch named peer, failing the
// test when there is none.
func mustLink(t *testing.T, sw *sion.Switch, peer string) sion.LinkInfo {
	t.Helper()
	for _, li := range sw.Links() {
		if li.Peer == peer {
			return li
		}
	}
	t.Fatalf("switch %s has no link to %s: %+v", sw.Name(), peer, sw.Links())
	return sion.LinkInfo{}
}

// routesTo returns the keys sw propagated to the switch named peer over
// a shared link, by filter text and places.
func routesTo(sw *sion.Switch, peer string) map[string]sion.RouteInfo {
	out := map[string]sion.RouteInfo{}
	for _, ri := range sw.Routes() {
		if ri.Peer == peer && ri.Gateway == "" {
			out[strings.Join(append(ri.Places, ri.Filter), "|")] = ri
		}
	}
	return out
}

// mustRoute returns the route of rs under key (routesTo's), failing the
// test when there is none.
func mustRoute(t *testing.T, rs map[string]sion.RouteInfo, key string) sion.RouteInfo {
	t.Helper()
	ri, ok := rs[key]
	require.True(t, ok, "no route %s among %v", key, rs)
	return ri
}

// eventID returns a distinct event ID for test event k.
func eventID(k uint64) sion.EventID {
	var id sion.EventID
	id[0] = 0xc0
	binary.BigEndian.PutUint64(id[8:], k)
	return id
}

// wants returns the IDs of the events of evs that f matches (Eval).
func wants(f *filter.Filter, evs []*sion.Event) map[sion.EventID]int {
	out := map[sion.EventID]int{}
	for _, e := range evs {
		if ok, _ := f.Eval(e); ok {
			out[e.ID]++
		}
	}
	return out
}

// received counts the events waiting in sub's queue by ID.
func received(sub *sion.Subscription) map[sion.EventID]int {
	out := map[sion.EventID]int{}
	for _, d := range queued(sub) {
		out[d.Event.ID]++
	}
	return out
}

// TestCoveringSendsNoRegisterForCoveredFilter: under a subscription on a
// whole type, narrower subscriptions send no Register over the link and
// none goes further; without Covering each costs a Register per link.
// Delivery is the same. Releasing the cover re-homes them: each goes
// under another registered key that covers it, or is registered.
func TestCoveringSendsNoRegisterForCoveredFilter(t *testing.T) {
	narrow := []string{}
	for i := range 8 {
		narrow = append(narrow, fmt.Sprintf(`{type ⊑ Reading; n == %d}`, i))
		narrow = append(narrow, fmt.Sprintf(`{type ⊑ TempReading; celsius > %d}`, 5*i))
		narrow = append(narrow, fmt.Sprintf(`{type ⊑ TempReading; n in {%d, %d}; celsius <= 30}`, i, i+1))
	}
	for _, covering := range []bool{true, false} {
		t.Run(fmt.Sprintf("covering=%v", covering), func(t *testing.T) {
			n := coveringNet(t, "sw", sion.PlaceConfig{Covering: covering}, line(3))
			s := open(t, n.sws[0], "app")
			broad := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(1024))
			c0, c1 := mustLink(t, n.sws[0], "sw1").ControlSent, mustLink(t, n.sws[1], "sw2").ControlSent
			r0 := mustLink(t, n.sws[0], "sw1").ControlReceived
			subs := make([]*sion.Subscription, len(narrow))
			for i, src := range narrow {
				subs[i] = subscribe(t, s, src, sion.WithQueue(1024))
			}
			d0, d1 := mustLink(t, n.sws[0], "sw1").ControlSent-c0, mustLink(t, n.sws[1], "sw2").ControlSent-c1
			l0, p1 := mustLink(t, n.sws[0], "sw1"), mustLink(t, n.sws[1], "sw0")
			t.Logf("covering=%v: %d subscriptions under {type ⊑ Reading}: control messages sent sw0→sw1 %d (acknowledgements back %d), sw1→sw2 %d; keys registered at sw1 %d, proxies there %d",
				covering, len(narrow), d0, l0.ControlReceived-r0, d1, l0.Routes, p1.Proxies)
			rs := routesTo(n.sws[0], "sw1")
			require.Len(t, rs, len(narrow)+1)
			if covering {
				assert.Zero(t, d0, "covered subscriptions register nothing at sw1")
				assert.Zero(t, d1, "nor further")
				assert.Equal(t, 1, l0.Routes)
				assert.Equal(t, 1, p1.Proxies)
				assert.Equal(t, 1, mustLink(t, n.sws[2], "sw1").Proxies)
				for _, sub := range subs {
					ri := mustRoute(t, rs, sub.Filter().String())
					assert.Equal(t, broad.Filter().String(), ri.CoveredBy, ri.Filter)
					assert.True(t, ri.Acknowledged, "a covered key is acknowledged as its cover is")
					assert.Equal(t, sion.DefaultTTL-1, ri.TTL)
					assert.Equal(t, 1, ri.Refs)
				}
			} else {
				assert.Equal(t, uint64(len(narrow)), d0)
				assert.Equal(t, uint64(len(narrow)), d1)
				assert.Equal(t, len(narrow)+1, l0.Routes)
				assert.Equal(t, len(narrow)+1, p1.Proxies)
				for _, ri := range rs {
					assert.Empty(t, ri.CoveredBy)
				}
			}
			assert.Empty(t, mustRoute(t, rs, broad.Filter().String()).CoveredBy)

			// Delivery from the far switch is what each filter matches.
			pub := open(t, n.sws[2], "pub")
			rng := rand.New(rand.NewPCG(3, 4))
			var evs []*sion.Event
			next := uint64(0) // event IDs: a switch drops an ID it has seen
			check := func(what string) {
				t.Helper()
				for range 40 {
					next++
					e := &sion.Event{ID: eventID(next), Type: "TempReading", Attrs: attrs("n", rng.IntN(10), "celsius", float64(rng.IntN(45)))}
					if rng.IntN(3) == 0 {
						e = &sion.Event{ID: eventID(next), Type: "Reading", Attrs: attrs("n", rng.IntN(10))}
					}
					publish(t, pub, e)
					evs = append(evs, e)
				}
				n.flush()
				for _, sub := range subs {
					if sub.Err() == nil {
						assert.Equal(t, wants(sub.Filter(), evs), received(sub), "%s: %s", what, sub.Filter())
					}
				}
				evs = evs[:0]
			}
			check("covered")

			// Releasing the cover re-homes every key it covered.
			require.NoError(t, broad.Cancel())
			n.flush()
			rs = routesTo(n.sws[0], "sw1")
			require.Len(t, rs, len(narrow))
			registered := 0
			for _, ri := range rs {
				if ri.CoveredBy == "" {
					registered++
					continue
				}
				cover, ok := rs[ri.CoveredBy]
				if assert.True(t, ok, "%s is covered by %s, which is gone", ri.Filter, ri.CoveredBy) {
					assert.Empty(t, cover.CoveredBy, "a cover is registered itself")
				}
			}
			l0 = mustLink(t, n.sws[0], "sw1")
			assert.Equal(t, registered, l0.Routes)
			assert.Equal(t, registered, mustLink(t, n.sws[1], "sw0").Proxies)
			if covering {
				// {TempReading; celsius > 0} covers the other bounds on
				// celsius: they stay under it.
				assert.Less(t, registered, len(narrow))
				assert.Equal(t, `{type ⊑ TempReading; celsius > 0}`, mustRoute(t, rs, `{type ⊑ TempReading; celsius > 10}`).CoveredBy)
			}
			check("re-homed")
		})
	}
}

// coveringFilter returns a random filter over ONT-1 that overlaps with
// others: a type (or "*") and up to two predicates on its attributes.
func coveringFilter(rng *rand.Rand) string {
	types := []string{"*", "Event", "Reading", "TempReading", "Notice", "Alarm", "FireAlarm", "KitchenFireAlarm", "Changed", "Created"}
	typ := types[rng.IntN(len(types))]
	var pool []string
	nPreds := []string{"n >= 2", "n >= 5", "n < 4", "n in {1, 2, 3}", "n == 2", "n in [2, 6)", "n exists"}
	switch typ {
	case "*", "Event", "Reading":
		pool = nPreds
	case "TempReading":
		pool = append(slices.Clone(nPreds), "celsius > 20", "celsius >= 10", "celsius in [10, 30]", "celsius < 15.5")
	case "Notice":
		pool = []string{`zone prefix "hall"`, `zone prefix "hall."`, `zone == "hall.north"`, `zone != "yard"`, `zone in {"hall", "Hall"}`, `json(order.id) > 9007199254740992`}
	case "Changed", "Created":
		pool = []string{`entity == "role"`, `entity in {"role", "user"}`, `entity prefix "r"`}
	}
	var preds []string
	if len(pool) > 0 {
		for range rng.IntN(3) {
			if p := pool[rng.IntN(len(pool))]; !slices.Contains(preds, p) {
				preds = append(preds, p)
			}
		}
	}
	if typ == "*" && len(preds) == 0 && rng.IntN(2) == 0 {
		return "{}"
	}
	return "{" + strings.Join(append([]string{"type ⊑ " + typ}, preds...), "; ") + "}"
}

// TestCoveringAgainstReferenceModel: on a tree of 7 switches with random
// overlapping filters, routed by filter or by event type, every
// subscription receives exactly the events its filter matches that were
// published within min(filter TTL, event TTL) links of its switch, each
// exactly once — with random TTLs, and after cancelling the
// subscriptions that cover others (re-homing).
func TestCoveringAgainstReferenceModel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  sion.Routing
		seed  uint64
		ttls  []int // a subscription's TTL is one of them
		churn bool  // cancel the covering subscriptions and some others before publishing
	}{
		{"by-filter/ttls", sion.RouteByFilter, 5, []int{0, 1, 2, 3, 64}, false},
		// A key's TTL is never lowered while it is registered, so a
		// cancelled subscription may leave its key further out than the
		// model says: churn uses one TTL.
		{"by-filter/churn", sion.RouteByFilter, 6, []int{64}, true},
		{"by-filter/churn-2", sion.RouteByFilter, 7, []int{64}, true},
		{"by-event-type/ttls", sion.RouteByEventType, 8, []int{0, 1, 2, 3, 64}, false},
		{"by-event-type/churn", sion.RouteByEventType, 9, []int{64}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tc.seed, 1))
			n := coveringNet(t, "sw", sion.PlaceConfig{Covering: true, TTL: 64, Routing: tc.mode}, randomTree(7, rng))
			type sub struct {
				sub  *sion.Subscription
				at   int
				ttl  int
				live bool
			}
			var subs []*sub
			sessions := make([]*sion.Session, len(n.sws))
			for i := range n.sws {
				sessions[i] = open(t, n.sws[i], fmt.Sprintf("app%d", i))
			}
			add := func(k int) {
				for range k {
					at := rng.IntN(len(n.sws))
					ttl := tc.ttls[rng.IntN(len(tc.ttls))]
					subs = append(subs, &sub{at: at, ttl: ttl, live: true,
						sub: subscribe(t, sessions[at], coveringFilter(rng), sion.WithTTL(ttl), sion.WithQueue(4096))})
				}
			}
			add(28)
			covered := func() (k int) {
				for _, sw := range n.sws {
					for _, ri := range sw.Routes() {
						if ri.CoveredBy != "" {
							k++
						}
					}
				}
				return k
			}
			before := covered()
			t.Logf("%d keys counted under a cover", before)
			require.Positive(t, before, "the filters overlap: some keys must be covered")
			if tc.churn {
				// Cancel every subscription whose filter covers a key on
				// its own switch's links, and a few others; then more
				// subscriptions come.
				for _, sb := range subs {
					key := sb.sub.Filter().String()
					if tc.mode == sion.RouteByEventType {
						key = filter.MustCompile("{type ⊑ " + sb.sub.Filter().Type() + "}").String()
					}
					covers := false
					for _, ri := range n.sws[sb.at].Routes() {
						covers = covers || ri.CoveredBy == key
					}
					if covers || rng.IntN(5) == 0 {
						require.NoError(t, sb.sub.Cancel())
						sb.live = false
					}
				}
				add(8)
				n.flush() // the releases and registers have reached every switch
			}

			// oracle holds the live subscriptions' filters; fits what
			// their keys are (by event type: their types' filters).
			oracle, fits := filter.NewBruteForce(n.place.Ontology()), filter.NewBruteForce(n.place.Ontology())
			for i, sb := range subs {
				if sb.live {
					key := sb.sub.Filter()
					if tc.mode == sion.RouteByEventType {
						key = filter.MustCompile("{type ⊑ " + key.Type() + "}")
					}
					require.NoError(t, oracle.Add(uint64(i), sb.sub.Filter()))
					require.NoError(t, fits.Add(uint64(i), key))
				}
			}
			pubs := make([]*sion.Session, len(n.sws))
			for i := range n.sws {
				pubs[i] = open(t, n.sws[i], fmt.Sprintf("pub%d", i))
			}
			type published struct {
				ev      *sion.Event
				at, ttl int
			}
			var evs []published
			for k := range 300 {
				at := rng.IntN(len(n.sws))
				ev := randomEvent(rng)
				ev.ID = eventID(uint64(k))
				ev.Control.TTL = []int{1, 3, 64}[rng.IntN(3)]
				publish(t, pubs[at], ev)
				evs = append(evs, published{ev: ev, at: at, ttl: ev.Control.TTL})
			}
			n.flush()

			// The model (as TestNetworkAgainstReferenceModel's): an event
			// crosses from switch x to its neighbour y when its TTL left
			// at x allows and the key of a live subscription beyond y,
			// registered at most its TTL links away, matches it.
			want := make([]map[sion.EventID]int, len(subs))
			for i := range want {
				want[i] = map[sion.EventID]int{}
			}
			for _, p := range evs {
				full, fit := map[int]bool{}, map[int]bool{}
				oracle.Match(p.ev, func(id uint64, _ float64) { full[int(id)] = true })
				fits.Match(p.ev, func(id uint64, _ float64) { fit[int(id)] = true })
				crosses := func(x, y int) bool {
					if p.ttl-n.dist(p.at, x) <= 0 {
						return false
					}
					for i, sb := range subs {
						if fit[i] && n.dist(sb.at, y) < n.dist(sb.at, x) && n.dist(sb.at, x) <= sb.ttl {
							return true
						}
					}
					return false
				}
				at := make([]bool, len(n.sws))
				at[p.at] = true
				for changed := true; changed; {
					changed = false
					for y, x := range n.parent {
						if x < 0 {
							continue
						}
						for _, e := range [][2]int{{x, y}, {y, x}} {
							if at[e[0]] && !at[e[1]] && crosses(e[0], e[1]) {
								at[e[1]], changed = true, true
							}
						}
					}
				}
				for i, sb := range subs {
					if at[sb.at] && full[i] {
						want[i][p.ev.ID] = 1
					}
				}
			}
			for i, sb := range subs {
				if !sb.live {
					continue
				}
				assert.Equal(t, want[i], received(sb.sub), "subscription %d (%s at sw%d, TTL %d)", i, sb.sub.Filter(), sb.at, sb.ttl)
			}
			// Every covered key's cover is registered on its link.
			for _, sw := range n.sws {
				for _, ri := range sw.Routes() {
					if ri.CoveredBy != "" {
						cover, ok := routesTo(sw, ri.Peer)[strings.Join(append(ri.Places, ri.CoveredBy), "|")]
						if assert.True(t, ok, "%s: %s covered by %s, which is gone", sw.Name(), ri.Filter, ri.CoveredBy) {
							assert.Empty(t, cover.CoveredBy)
							assert.GreaterOrEqual(t, cover.TTL, ri.TTL)
						}
					}
				}
			}
		})
	}
}

// TestCoveringReleaseMakesBeforeBreak: a subscription covered by another
// on the same switch, fed by a publisher three links away that publishes
// without pause; the covering subscription is cancelled meanwhile. The
// covered one misses no event (the publisher numbers them), receives
// none twice, and ends up registered itself on every link of the path.
func TestCoveringReleaseMakesBeforeBreak(t *testing.T) {
	n := coveringNet(t, "sw", sion.PlaceConfig{Covering: true}, line(4))
	ctx := context.Background()
	s := open(t, n.sws[0], "app")
	pub := open(t, n.sws[3], "pub")
	for round := range 8 {
		cover := subscribe(t, s, []string{`{type ⊑ Notice}`, `{type ⊑ Event}`, `{type ⊑ *}`, `{type ⊑ Notice; zone prefix "r"}`}[round%4], sion.WithQueue(1<<12))
		zone := fmt.Sprintf("r%d", round)
		sub := subscribe(t, s, fmt.Sprintf(`{type ⊑ Notice; zone == %q}`, zone), sion.WithQueue(1<<16))
		ri := mustRoute(t, routesTo(n.sws[0], "sw1"), sub.Filter().String())
		require.Equal(t, cover.Filter().String(), ri.CoveredBy, "round %d", round)
		_, further := routesTo(n.sws[1], "sw2")[sub.Filter().String()]
		require.False(t, further, "round %d: a covered key goes no further", round)

		// The publisher publishes numbered events without pause, except
		// for a Flush after every batch, which keeps the links' queues
		// within bounds (a drop would be a gap for another reason); the
		// cover is cancelled in the middle of a batch, while events are
		// on every link of the path.
		const total, batch = 1536, 256
		cancelAt := batch*(1+round%3) + 97
		half := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for seq := range total {
				if seq == cancelAt {
					close(half)
				}
				if err := pub.Publish(ctx, &sion.Event{Type: "Notice", Attrs: attrs("zone", zone, "seq", seq)}); err != nil {
					t.Error(err)
					return
				}
				if (seq+1)%batch == 0 {
					if err := n.sws[3].Flush(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
		<-half
		require.NoError(t, cover.Cancel())
		wg.Wait()
		n.flush()
		var got []int64
		for _, d := range queued(sub) {
			v, _ := d.Event.Value("seq")
			got = append(got, v.Int())
		}
		require.Len(t, got, total, "round %d: events missed or doubled", round)
		for i, k := range got {
			if !assert.Equal(t, int64(i), k, "round %d: event %d of the publisher", round, i) {
				break
			}
		}
		for _, li := range slices.Concat(n.sws[0].Links(), n.sws[1].Links(), n.sws[2].Links(), n.sws[3].Links()) {
			require.Zero(t, li.Dropped, "%s: no event dropped for a full queue", li.Peer)
		}
		// Registered itself on every link toward the publisher (the
		// acknowledgement of its Register may still be on its way).
		for i := range 3 {
			peer := fmt.Sprintf("sw%d", i+1)
			rs := routesTo(n.sws[i], peer)
			assert.Empty(t, mustRoute(t, rs, sub.Filter().String()).CoveredBy, "round %d: sw%d", round, i)
			_, gone := rs[cover.Filter().String()]
			assert.False(t, gone, "round %d: sw%d still has the cover's key", round, i)
			assert.Eventually(t, func() bool { return routesTo(n.sws[i], peer)[sub.Filter().String()].Acknowledged }, 10*time.Second, time.Millisecond, "round %d: sw%d", round, i)
		}
		require.NoError(t, sub.Cancel())
		n.flush()
		assert.Zero(t, mustLink(t, n.sws[3], "sw2").Proxies, "round %d", round)
	}
}

// TestCoveringTTL: a key is counted under a cover only when the cover's
// TTL reaches as far; one whose TTL rises above its cover's is
// registered itself.
func TestCoveringTTL(t *testing.T) {
	n := coveringNet(t, "sw", sion.PlaceConfig{Covering: true}, line(3))
	s := open(t, n.sws[0], "app")
	near := subscribe(t, s, `{type ⊑ Notice}`, sion.WithTTL(1)) // reaches sw1
	far := subscribe(t, s, `{type ⊑ Notice; zone == "x"}`, sion.WithTTL(3))
	rs := routesTo(n.sws[0], "sw1")
	require.Len(t, rs, 2)
	assert.Empty(t, mustRoute(t, rs, far.Filter().String()).CoveredBy, "the cover does not reach as far")
	assert.Equal(t, 2, mustRoute(t, rs, far.Filter().String()).TTL)
	assert.Equal(t, 0, mustRoute(t, rs, near.Filter().String()).TTL)

	c0 := mustLink(t, n.sws[0], "sw1").ControlSent
	low := subscribe(t, s, `{type ⊑ Notice; zone == "y"}`, sion.WithTTL(1))
	rs = routesTo(n.sws[0], "sw1")
	assert.Equal(t, near.Filter().String(), mustRoute(t, rs, low.Filter().String()).CoveredBy)
	assert.Equal(t, c0, mustLink(t, n.sws[0], "sw1").ControlSent, "covered: nothing sent")

	high := subscribe(t, s, `{type ⊑ Notice; zone == "y"}`, sion.WithTTL(3)) // the same key, further
	rs = routesTo(n.sws[0], "sw1")
	ri := mustRoute(t, rs, high.Filter().String())
	assert.Empty(t, ri.CoveredBy, "its TTL rose above its cover's: registered itself")
	assert.Equal(t, 2, ri.TTL)
	assert.Equal(t, 2, ri.Refs)
	assert.True(t, ri.Acknowledged)
	assert.Equal(t, c0+1, mustLink(t, n.sws[0], "sw1").ControlSent, "one Register")
	assert.Equal(t, 2, mustLink(t, n.sws[2], "sw1").Proxies, "x and y reach sw2")

	p := open(t, n.sws[2], "pub")
	for _, z := range []string{"x", "y", "z"} {
		publish(t, p, &sion.Event{Type: "Notice", Attrs: attrs("zone", z)})
	}
	n.flush()
	assert.Equal(t, 1, count(far), "x from two links away")
	assert.Equal(t, 1, count(high), "y from two links away")
	assert.Equal(t, 1, count(low), "y reached sw0 under high's key")
	assert.Equal(t, 2, count(near), "x and y reached sw0; z did not")
}

// TestCoveringKeepsPlacesApart: a key of interest that came from another
// place through a gateway and one of this place's own never cover each
// other, whatever their filters; keys with the same places do.
func TestCoveringKeepsPlacesApart(t *testing.T) {
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	a := coveringNetOver(t, tr, "a", sion.PlaceConfig{Covering: true}, line(2))
	b := coveringNetOver(t, tr, "b", sion.PlaceConfig{Covering: true}, line(1))
	federate(t, a, 0, b, 0, sion.GatewayConfig{Name: "a→b", Export: &sion.DirectionConfig{}})
	local, remote := open(t, a.sws[0], "local"), open(t, b.sws[0], "remote")

	notice := subscribe(t, local, `{type ⊑ Notice}`)
	fromB := collector(t, remote, `{type ⊑ Notice; zone == "x"}`)
	alarms := collector(t, remote, `{type ⊑ Alarm}`)
	fire := subscribe(t, local, `{type ⊑ FireAlarm}`, sion.WithQueue(16))
	x := subscribe(t, local, `{type ⊑ Notice; zone == "x"}`, sion.WithQueue(16))

	rs := routesTo(a.sws[0], "a1")
	require.Len(t, rs, 5)
	assert.Empty(t, mustRoute(t, rs, `b|a|{type ⊑ Notice; zone == "x"}`).CoveredBy, "b's interest is not covered by a's own")
	assert.Empty(t, mustRoute(t, rs, `b|a|{type ⊑ Alarm}`).CoveredBy)
	assert.Empty(t, mustRoute(t, rs, fire.Filter().String()).CoveredBy, "a's own interest is not covered by b's")
	assert.Equal(t, notice.Filter().String(), mustRoute(t, rs, x.Filter().String()).CoveredBy, "a's own covers a's own")
	assert.Equal(t, 4, mustLink(t, a.sws[0], "a1").Routes)
	assert.Equal(t, 4, mustLink(t, a.sws[1], "a0").Proxies)

	p := open(t, a.sws[1], "pub")
	publish(t, p, &sion.Event{Type: "Notice", Attrs: attrs("zone", "x")})
	publish(t, p, &sion.Event{Type: "KitchenFireAlarm"})
	a.flush()
	fromB.exactlyOnce(t, 1, "b's Notice")
	alarms.exactlyOnce(t, 1, "b's Alarm")
	assert.Equal(t, 1, count(fire))
	assert.Equal(t, 1, count(x))
	assert.Equal(t, 1, count(notice))
}

// TestCoveringCancelLeavesNoProxies: cancelling a covered subscription
// and its cover, in either order, leaves the peer with no proxy filter
// and the link with no key, at the cost of the Releases (and Register)
// it takes.
func TestCoveringCancelLeavesNoProxies(t *testing.T) {
	for _, tc := range []struct {
		name       string
		coverFirst bool
		sent       uint64 // control messages over the link for the two cancellations
	}{
		{"covered-then-cover", false, 1}, // the cover's Release
		{"cover-then-covered", true, 3},  // the covered key's Register, the cover's Release, its Release
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := coveringNet(t, "sw", sion.PlaceConfig{Covering: true}, line(2))
			s := open(t, n.sws[0], "app")
			cover := subscribe(t, s, `{type ⊑ Alarm}`)
			covered := subscribe(t, s, `{type ⊑ FireAlarm}`)
			require.Equal(t, cover.Filter().String(), mustRoute(t, routesTo(n.sws[0], "sw1"), covered.Filter().String()).CoveredBy)
			require.Equal(t, 1, mustLink(t, n.sws[1], "sw0").Proxies)
			first, second := covered, cover
			if tc.coverFirst {
				first, second = cover, covered
			}
			// Cancel queues what it sends before it returns.
			c0 := mustLink(t, n.sws[0], "sw1").ControlSent
			require.NoError(t, first.Cancel())
			sent := mustLink(t, n.sws[0], "sw1").ControlSent - c0
			n.flush()
			assert.Equal(t, 1, mustLink(t, n.sws[1], "sw0").Proxies)
			assert.Len(t, routesTo(n.sws[0], "sw1"), 1)
			c0 = mustLink(t, n.sws[0], "sw1").ControlSent
			require.NoError(t, second.Cancel())
			sent += mustLink(t, n.sws[0], "sw1").ControlSent - c0
			n.flush()
			assert.Zero(t, mustLink(t, n.sws[1], "sw0").Proxies)
			assert.Zero(t, mustLink(t, n.sws[0], "sw1").Routes)
			assert.Empty(t, n.sws[0].Routes())
			assert.Equal(t, tc.sent, sent)
		})
	}
}

package sion_test

// Advertisement pruning of S1 propagation (PlaceConfig.RequireAdvertisements):
// subscriptions go only toward links behind which an advertisement
// overlaps their type; Advertise keeps the S2 contract; tables follow
// sessions and links; hostile advertisements are refused.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// adTree is the tree the pruning tests run on:
//
//	    0
//	 1     2
//	3 4   5 6
//	7       8
var adTree = []int{-1, 0, 0, 1, 1, 2, 2, 3, 6}

// prunedModes are the routings whose propagation advertisements prune.
var prunedModes = []sion.Routing{sion.RouteByFilter, sion.RouteByEventType}

// adNetwork starts the switches of parent over mem with cfg.
func adNetwork(t *testing.T, cfg sion.PlaceConfig, parent []int) *network {
	t.Helper()
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	return newNetwork(t, tr, func(i int) string { return fmt.Sprintf("sw%d", i) }, cfg, parent)
}

// nextHop returns the neighbour of switch i on the way to switch j.
func (n *network) nextHop(i, j int) int {
	for k, p := range n.parent {
		if (k == n.parent[i] || p == i) && k != i && n.dist(k, j) < n.dist(i, j) {
			return k
		}
	}
	panic(fmt.Sprintf("no way from %d to %d", i, j))
}

// controlSent sums the control messages every switch has sent over its
// shared links so far.
func (n *network) controlSent() uint64 {
	var sum uint64
	for _, sw := range n.sws {
		sum += sw.Stats().Links.ControlSent
	}
	return sum
}

// tablesEmpty reports whether no switch of n but those of except has an
// advertisement in its table, and says which has.
func (n *network) tablesEmpty(except ...int) (bool, string) {
	for i, sw := range n.sws {
		if ads := sw.Advertisements(); len(ads) > 0 && !slices.Contains(except, i) {
			return false, fmt.Sprintf("sw%d: %+v", i, ads)
		}
	}
	return true, ""
}

// routesEmpty reports whether no switch of n has a key registered at a
// peer, and says which has.
func (n *network) routesEmpty() (bool, string) {
	for i, sw := range n.sws {
		if rs := sw.Routes(); len(rs) > 0 {
			return false, fmt.Sprintf("sw%d: %+v", i, rs)
		}
	}
	return true, ""
}

// TestAdvertisementPrunesPropagation: with one publisher of TempReading at
// sw7, only the subscriptions whose types overlap it (Reading, "*") are
// registered, and only toward sw7; the others (Alarm, Notice) stay where
// they were made. Every switch's table holds the advertisement, behind
// the link toward sw7.
func TestAdvertisementPrunesPropagation(t *testing.T) {
	ctx := context.Background()
	for _, mode := range prunedModes {
		t.Run(mode.String(), func(t *testing.T) {
			n := adNetwork(t, sion.PlaceConfig{Routing: mode, RequireAdvertisements: true}, adTree)
			require.NoError(t, open(t, n.sws[7], "pub").Advertise(ctx, sion.Advertisement{Type: "TempReading"}))
			for i, sw := range n.sws {
				s := open(t, sw, fmt.Sprintf("app%d", i))
				for _, src := range []string{`{type ⊑ Reading; n >= 1}`, `{type ⊑ Alarm}`, `{type ⊑ Notice; zone == "a"}`, `{type ⊑ *; n in {1, 2}}`} {
					subscribe(t, s, src)
				}
			}
			for i, sw := range n.sws {
				ads := sw.Advertisements()
				routes := sw.Routes()
				if i == 7 {
					assert.Equal(t, []sion.AdvertisementInfo{{Type: "TempReading", Local: 1}}, ads, "sw7")
					assert.Empty(t, routes, "sw7 has the publisher: nothing goes anywhere")
					continue
				}
				toward := fmt.Sprintf("sw%d", n.nextHop(i, 7))
				assert.Equal(t, []sion.AdvertisementInfo{{Type: "TempReading", Behind: []string{toward}}}, ads, "sw%d", i)
				require.Len(t, routes, 2, "sw%d: the Reading and the * key: %+v", i, routes)
				for _, r := range routes {
					assert.Equal(t, toward, r.Peer, "sw%d: %+v", i, r)
					assert.NotContains(t, r.Filter, "Alarm", "sw%d", i)
					assert.NotContains(t, r.Filter, "Notice", "sw%d", i)
					assert.True(t, r.Acknowledged, "sw%d: %+v", i, r)
				}
			}
		})
	}
}

// TestAdvertisementPruningSavesControl counts the control messages that
// advertising two types and making 60 subscriptions costs, with and
// without RequireAdvertisements (advertisements included).
func TestAdvertisementPruningSavesControl(t *testing.T) {
	ctx := context.Background()
	for _, mode := range prunedModes {
		t.Run(mode.String(), func(t *testing.T) {
			run := func(require_ bool) uint64 {
				n := adNetwork(t, sion.PlaceConfig{Routing: mode, RequireAdvertisements: require_}, adTree)
				before := n.controlSent()
				require.NoError(t, open(t, n.sws[7], "pub7").Advertise(ctx, sion.Advertisement{Type: "TempReading"}))
				require.NoError(t, open(t, n.sws[4], "pub4").Advertise(ctx, sion.Advertisement{Type: "Alarm"}))
				rng := rand.New(rand.NewPCG(7, 60))
				for k := range 60 {
					at := rng.IntN(len(n.sws))
					subscribe(t, open(t, n.sws[at], fmt.Sprintf("app%d", k)), filterPool[rng.IntN(len(filterPool))])
				}
				return n.controlSent() - before
			}
			pruned, full := run(true), run(false)
			t.Logf("%v, 9 switches, 2 advertised types, 60 subscriptions: %d control messages with RequireAdvertisements, %d without (%.0f%%)",
				mode, pruned, full, 100*float64(pruned)/float64(full))
			assert.Less(t, pruned, full)
		})
	}
}

// adEventOf returns an event of type typ with attributes the filter pool
// tests, and ID seq.
func adEventOf(rng *rand.Rand, typ string, seq uint64) *sion.Event {
	var ev *sion.Event
	switch typ {
	case "Reading":
		ev = &sion.Event{Type: typ, Attrs: attrs("n", rng.IntN(8))}
	case "TempReading":
		ev = &sion.Event{Type: typ, Attrs: attrs("n", rng.IntN(8), "celsius", float64(rng.IntN(40)))}
	case "Notice":
		if rng.IntN(2) == 0 {
			ev = jsonEvent(typ, fmt.Sprintf(`{"order":{"id":%d}}`, 9007199254740991+rng.IntN(4)))
		} else {
			ev = &sion.Event{Type: typ, Attrs: attrs("zone", []string{"hall", "hall.north", "Hall", "yard"}[rng.IntN(4)])}
		}
	case "Changed", "Created":
		ev = &sion.Event{Type: typ, Attrs: attrs("entity", []string{"role", "user"}[rng.IntN(2)])}
	default:
		ev = &sion.Event{Type: typ}
	}
	ev.ID[0] = 0xad
	binary.BigEndian.PutUint64(ev.ID[8:], seq)
	return ev
}

// TestAdvertiseThenPublishIsExact: subscriptions made before any
// advertisement registered nothing; publishers that advertise and publish
// at once, right after Advertise returns, reach every subscription whose
// filter matches (checked against brute force), and so do subscriptions
// made afterwards, and a switch that links afterwards (a publisher and a
// subscriber on it), from the moment Link returns.
func TestAdvertiseThenPublishIsExact(t *testing.T) {
	ctx := context.Background()
	for _, mode := range prunedModes {
		t.Run(mode.String(), func(t *testing.T) {
			n := adNetwork(t, sion.PlaceConfig{Routing: mode, RequireAdvertisements: true}, slices.Clone(adTree))
			rng := rand.New(rand.NewPCG(17, 4))
			oracle := filter.NewBruteForce(n.place.Ontology())
			var subs []*sion.Subscription
			var since []int // the first event each subscription must get
			var evs []*sion.Event
			sub := func(sw *sion.Switch, src string) {
				s := subscribe(t, open(t, sw, fmt.Sprintf("app%d", len(subs))), src, sion.WithQueue(4096))
				require.NoError(t, oracle.Add(uint64(len(subs)), s.Filter()))
				subs = append(subs, s)
				since = append(since, len(evs))
			}
			for _, sw := range n.sws {
				for range 3 {
					sub(sw, filterPool[rng.IntN(len(filterPool))])
				}
			}
			for _, sw := range n.sws {
				assert.Empty(t, sw.Routes(), "%s: nothing is advertised yet", sw.Name())
			}

			type publisher struct {
				s     *sion.Session
				types []string // the event types it publishes, all advertised
			}
			var seq uint64
			burst := func(p publisher) {
				for range 15 {
					seq++
					ev := adEventOf(rng, p.types[rng.IntN(len(p.types))], seq)
					publish(t, p.s, ev)
					evs = append(evs, ev)
				}
			}
			var pubs []publisher
			for _, p := range []struct {
				at    int
				ads   []string
				types []string
			}{
				{7, []string{"Reading"}, []string{"Reading", "TempReading"}},
				{5, []string{"Alarm", "Notice"}, []string{"FireAlarm", "KitchenFireAlarm", "Notice"}},
				{0, []string{"Changed"}, []string{"Changed", "Created"}},
			} {
				s := open(t, n.sws[p.at], fmt.Sprintf("pub%d", p.at))
				var ads []sion.Advertisement
				for _, a := range p.ads {
					ads = append(ads, sion.Advertisement{Type: a})
				}
				require.NoError(t, s.Advertise(ctx, ads...))
				pubs = append(pubs, publisher{s, p.types})
				burst(pubs[len(pubs)-1]) // at once
			}

			// Subscriptions made after the advertisements (and after the
			// events so far have arrived: the reference counts those
			// published after a subscription only).
			n.flush()
			for _, sw := range n.sws {
				sub(sw, filterPool[rng.IntN(len(filterPool))])
			}
			for _, p := range pubs {
				burst(p)
			}

			// Switches that link afterwards: sw9 with a subscriber that
			// was there before the link, whose peer has a publisher, and
			// sw10 with a publisher that advertised before the link. Each
			// publishes at once once Link returns.
			near := publisher{open(t, n.sws[8], "pub8"), []string{"TempReading"}}
			require.NoError(t, near.s.Advertise(ctx, sion.Advertisement{Type: "TempReading"}))
			n.flush()
			n.parent = append(n.parent, 8, 4)
			n.links = append(n.links, nil, nil)
			n.start(9, "sw9")
			sub(n.sws[9], `{type ⊑ Reading}`)
			n.link(9, 8)
			burst(near)    // from the peer
			burst(pubs[0]) // from afar
			n.start(10, "sw10")
			late := publisher{open(t, n.sws[10], "pub10"), []string{"Notice"}}
			require.NoError(t, late.s.Advertise(ctx, sion.Advertisement{Type: "Notice"}))
			n.link(10, 4)
			burst(late)
			n.flush()

			for i, s := range subs {
				want := map[sion.EventID]bool{}
				for _, ev := range evs[since[i]:] {
					oracle.Match(ev, func(id uint64, _ float64) {
						if id == uint64(i) {
							want[ev.ID] = true
						}
					})
				}
				got := map[sion.EventID]bool{}
				for _, d := range queued(s) {
					assert.False(t, got[d.Event.ID], "subscription %d (%s): event %s twice", i, s.Filter(), d.Event.ID)
					got[d.Event.ID] = true
				}
				assert.Equal(t, want, got, "subscription %d (%s)", i, s.Filter())
			}
		})
	}
}

// TestPublishRequiresAdvertisement: in a place that requires
// advertisements, whatever its routing, Publish refuses an event its
// session has not advertised — type, subtype and attribute detail — with
// ErrNotAdvertised; a place that does not require them checks nothing.
func TestPublishRequiresAdvertisement(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []sion.Routing{sion.RouteByFilter, sion.RouteByEventType, sion.RouteUnconditional} {
		t.Run(mode.String(), func(t *testing.T) {
			sw := newSwitch(t, sion.PlaceConfig{Routing: mode, RequireAdvertisements: true})
			s := open(t, sw, "pub")
			require.ErrorIs(t, s.Publish(ctx, &sion.Event{Type: "Reading"}), sion.ErrNotAdvertised, "nothing advertised")
			require.NoError(t, s.Advertise(ctx,
				sion.Advertisement{Type: "Reading"},
				sion.Advertisement{Type: "Notice", Attrs: attrs("zone", "a")}))
			for _, tc := range []struct {
				ev *sion.Event
				ok bool
			}{
				{&sion.Event{Type: "Reading", Attrs: attrs("n", 1)}, true},
				{&sion.Event{Type: "TempReading", Attrs: attrs("celsius", 3.5)}, true}, // a subtype
				{&sion.Event{Type: "Event"}, false},                                    // a supertype
				{&sion.Event{Type: "Alarm"}, false},
				{&sion.Event{Type: "Notice", Attrs: attrs("zone", "a", "seq", 2)}, true},
				{&sion.Event{Type: "Notice", Attrs: attrs("zone", "b")}, false}, // another detail
				{&sion.Event{Type: "Notice"}, false},
			} {
				err := s.Publish(ctx, tc.ev)
				if tc.ok {
					assert.NoError(t, err, "%s %v", tc.ev.Type, tc.ev.Attrs)
				} else {
					assert.ErrorIs(t, err, sion.ErrNotAdvertised, "%s %v", tc.ev.Type, tc.ev.Attrs)
				}
			}
			other := open(t, sw, "other")
			assert.ErrorIs(t, other.Publish(ctx, &sion.Event{Type: "Reading"}), sion.ErrNotAdvertised, "advertisements are per session")

			free := open(t, newSwitch(t, sion.PlaceConfig{Routing: mode}), "free")
			assert.NoError(t, free.Publish(ctx, &sion.Event{Type: "Reading"}), "a place that does not require advertisements")
		})
	}
}

// TestAdvertisementsWithdrawn: a publisher's session that ends withdraws
// its advertisements from every table, and the keys registered for them
// are released; a link that ends takes the advertisements behind it out
// of the tables on the other side.
func TestAdvertisementsWithdrawn(t *testing.T) {
	ctx := context.Background()
	for _, mode := range prunedModes {
		t.Run(mode.String(), func(t *testing.T) {
			n := adNetwork(t, sion.PlaceConfig{Routing: mode, RequireAdvertisements: true}, adTree)
			subscribe(t, open(t, n.sws[8], "far"), `{type ⊑ Reading}`)
			subscribe(t, open(t, n.sws[5], "alarms"), `{type ⊑ Alarm}`)
			pub := open(t, n.sws[7], "pub7")
			require.NoError(t, pub.Advertise(ctx, sion.Advertisement{Type: "TempReading"}, sion.Advertisement{Type: "Notice", Attrs: attrs("zone", "a")}))
			for i, sw := range n.sws {
				assert.Len(t, sw.Advertisements(), 2, "sw%d", i)
			}
			assert.NotEmpty(t, n.sws[8].Routes(), "sw8's subscription goes toward sw7")

			require.NoError(t, pub.Close())
			require.Eventually(t, func() bool { ok, _ := n.tablesEmpty(); return ok }, 10*time.Second, time.Millisecond, "tables after the publisher's session ended")
			require.Eventually(t, func() bool { ok, _ := n.routesEmpty(); return ok }, 10*time.Second, time.Millisecond, "keys after the publisher's session ended")

			pub4 := open(t, n.sws[4], "pub4")
			require.NoError(t, pub4.Advertise(ctx, sion.Advertisement{Type: "FireAlarm"}))
			for i, sw := range n.sws {
				assert.Len(t, sw.Advertisements(), 1, "sw%d", i)
			}
			assert.NotEmpty(t, n.sws[5].Routes(), "sw5's subscription goes toward sw4")
			require.NoError(t, n.links[4].Close())
			require.Eventually(t, func() bool { ok, _ := n.tablesEmpty(4); return ok }, 10*time.Second, time.Millisecond, "tables after sw4's link ended")
			require.Eventually(t, func() bool { ok, _ := n.routesEmpty(); return ok }, 10*time.Second, time.Millisecond, "keys after sw4's link ended")
			assert.Equal(t, []sion.AdvertisementInfo{{Type: "FireAlarm", Local: 1}}, n.sws[4].Advertisements(), "sw4 keeps its own")
		})
	}
}

// advertiseOver sends an Advertise over a hand-made link and returns the
// error its Ack carries.
func (l *rawLink) advertise(m *linkctl.Advertise) string {
	l.t.Helper()
	l.sendControl(m)
	ack := l.recvControl(linkctl.KindAck).(*linkctl.Ack)
	require.Equal(l.t, m.Ack, ack.Ack)
	return ack.Error
}

// TestHostileAdvertisements: a neighbour's advertisement is checked field
// by field — refused ones are answered with an error and kept nowhere —
// and one link's peer may keep at most 4096 entries; an Unadvertise of
// an unknown key is harmless; a place that does not require
// advertisements ends a link that carries one.
func TestHostileAdvertisements(t *testing.T) {
	n := adNetwork(t, sion.PlaceConfig{RequireAdvertisements: true}, []int{-1, 0})
	m := dialRawLink(t, n, 0, "mallory")
	for i, tc := range []struct {
		name  string
		typ   string
		attrs []linkctl.AttrDetail
		err   string
	}{
		{"unknown type", "NoSuchType", nil, "unknown event type"},
		{"reserved type", "sion.Discovery", nil, "unknown event type"},
		{"synonym", "Fire", nil, "unknown event type"},
		{"empty type", "", nil, "unknown event type"},
		{"attribute outside the vocabulary", "Reading", []linkctl.AttrDetail{{Name: "zone", Value: `"a"`}}, "vocabulary"},
		{"synonym attribute", "TempReading", []linkctl.AttrDetail{{Name: "tempC", Value: "3"}}, "vocabulary"},
		{"value of the wrong kind", "Reading", []linkctl.AttrDetail{{Name: "n", Value: "many"}}, "is not a"},
		{"unquoted string", "Notice", []linkctl.AttrDetail{{Name: "zone", Value: "a"}}, "is not a"},
		{"attribute twice", "Reading", []linkctl.AttrDetail{{Name: "n", Value: "1"}, {Name: "n", Value: "2"}}, "twice"},
		{"every type with a detail", "*", []linkctl.AttrDetail{{Name: "n", Value: "1"}}, "unknown event type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := m.advertise(&linkctl.Advertise{Key: uint64(i + 1), Ack: uint64(i + 1), Type: tc.typ, Attrs: tc.attrs})
			assert.Contains(t, strings.ToLower(msg), tc.err)
			ok, which := n.tablesEmpty()
			assert.True(t, ok, which)
		})
	}

	m.sendControl(&linkctl.Unadvertise{Key: 999}) // never advertised: ignored
	require.Empty(t, m.advertise(&linkctl.Advertise{Key: 1, Ack: 100, Type: "Reading", Attrs: []linkctl.AttrDetail{{Name: "n", Value: "1"}}}))
	assert.Equal(t, []sion.AdvertisementInfo{{Type: "Reading", Attrs: attrs("n", 1), Behind: []string{"mallory"}}}, n.sws[0].Advertisements())
	assert.Equal(t, []sion.AdvertisementInfo{{Type: "Reading", Attrs: attrs("n", 1), Behind: []string{"sw0"}}}, n.sws[1].Advertisements())

	// The bound: 4096 entries from one link, the one above included.
	const bound = 4096
	for k := uint64(2); k <= bound+1; k++ {
		m.sendControl(&linkctl.Advertise{Key: k, Ack: 100 + k, Type: "Notice", Attrs: []linkctl.AttrDetail{{Name: "seq", Value: fmt.Sprint(k)}}})
	}
	errs := map[uint64]string{}
	for len(errs) < bound {
		ack := m.recvControl(linkctl.KindAck).(*linkctl.Ack)
		errs[ack.Ack-100] = ack.Error
	}
	for k := uint64(2); k <= bound; k++ {
		require.Empty(t, errs[k], "advertisement %d", k)
	}
	assert.Contains(t, errs[bound+1], "bound")
	assert.Len(t, n.sws[0].Advertisements(), bound)
	assert.Len(t, n.sws[1].Advertisements(), bound)

	// A publisher behind the full link: its Advertise is refused, and its
	// Publish too (no subscription was registered toward it: its events
	// would be lost); it is kept in no table, so once the link's entries
	// go it advertises afresh.
	ctx := context.Background()
	sub := subscribe(t, open(t, n.sws[1], "app"), `{type ⊑ Alarm}`)
	pub := open(t, n.sws[0], "pub")
	require.ErrorIs(t, pub.Advertise(ctx, sion.Advertisement{Type: "Alarm"}), sion.ErrNotGranted)
	require.ErrorIs(t, pub.Publish(ctx, &sion.Event{Type: "Alarm"}), sion.ErrNotAdvertised)

	m.conn.Close()
	require.Eventually(t, func() bool { ok, _ := n.tablesEmpty(); return ok }, 10*time.Second, time.Millisecond, "the link ended: its advertisements go")
	require.NoError(t, pub.Advertise(ctx, sion.Advertisement{Type: "Alarm"}))
	publish(t, pub, &sion.Event{Type: "Alarm"})
	require.Eventually(t, func() bool { return count(sub) == 1 }, 10*time.Second, time.Millisecond)

	plain := adNetwork(t, sion.PlaceConfig{}, []int{-1})
	l := dialRawLink(t, plain, 0, "mallory")
	l.sendControl(&linkctl.Advertise{Key: 1, Ack: 1, Type: "Reading"})
	assert.Contains(t, l.closedWith(), "advertise")
}

// overlapOntology has multiple inheritance: BGM is-a Music and is-a
// Seasonal.
func overlapOntology(t *testing.T) *ontology.Ontology {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "Media"},
		{Name: "Music", Parents: []string{"Media"}},
		{Name: "Talk", Parents: []string{"Media"}},
		{Name: "Seasonal"},
		{Name: "BGM", Parents: []string{"Music", "Seasonal"}},
		{Name: "Weather"},
	})
	require.NoError(t, err)
	return o
}

// TestAdvertisementTypeOverlap: a subscription is registered toward an
// advertisement of its type's subtype, of its supertype, of a type that
// shares a subtype with it, and for "*"; not toward one of an unrelated
// type. Where it is registered, the events published at once reach it.
func TestAdvertisementTypeOverlap(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, ad, filter, event string
		overlap                 bool
	}{
		{"subtype advertised", "Music", "{type ⊑ Media}", "Music", true},
		{"supertype advertised", "Media", "{type ⊑ Music}", "Music", true},
		{"shared subtype", "Music", "{type ⊑ Seasonal}", "BGM", true},
		{"shared subtype, other way", "Seasonal", "{type ⊑ Music}", "BGM", true},
		{"wildcard", "Talk", "{type ⊑ *}", "Talk", true},
		{"siblings", "Music", "{type ⊑ Talk}", "Music", false},
		{"unrelated", "Weather", "{type ⊑ Media}", "Weather", false},
	} {
		for _, mode := range prunedModes {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) {
				n := adNetwork(t, sion.PlaceConfig{Routing: mode, RequireAdvertisements: true, Ontology: overlapOntology(t)}, line(3))
				sub := subscribe(t, open(t, n.sws[2], "app"), tc.filter)
				pub := open(t, n.sws[0], "pub")
				require.NoError(t, pub.Advertise(ctx, sion.Advertisement{Type: tc.ad}))
				publish(t, pub, &sion.Event{Type: tc.event})
				n.flush()
				if tc.overlap {
					assert.Len(t, n.sws[2].Routes(), 1, "registered toward sw1")
					assert.Len(t, n.sws[1].Routes(), 1, "registered toward sw0")
					assert.Equal(t, 1, count(sub))
				} else {
					assert.Empty(t, n.sws[2].Routes())
					assert.Empty(t, n.sws[1].Routes())
					assert.Equal(t, 0, count(sub), "the filter does not match the event either")
				}
			})
		}
	}
}

// TestAdvertisementGatewayAdvertisesEverything: events that enter a place
// requiring advertisements through a gateway reach a subscription two
// links away from it, although no session of the place advertised them:
// the gateway counts as advertising every type.
func TestAdvertisementGatewayAdvertisesEverything(t *testing.T) {
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	mo, io := metricOntology(t), imperialOntology(t)
	lab := newPlace(t, tr, placeAddrs("mem", "lab"), "lab", mo, 1)
	field := newNetwork(t, tr, placeAddrs("mem", "field"), sion.PlaceConfig{Name: "field", Ontology: io, Federation: approve, RequireAdvertisements: true}, line(3))
	got := collector(t, open(t, field.sws[2], "dashboard"), "{type ⊑ Obs}")
	assert.Empty(t, field.sws[2].Routes(), "nothing advertised yet")
	federate(t, lab, 0, field, 0, sion.GatewayConfig{Name: "lab→field", Export: &sion.DirectionConfig{Mapping: metricToImperial(t, mo, io, true)}})
	for i, sw := range field.sws {
		ads := sw.Advertisements()
		require.Len(t, ads, 1, "field sw%d", i)
		assert.Equal(t, filter.AnyType, ads[0].Type)
	}
	publish(t, open(t, lab.sws[0], "sensor"), &sion.Event{Type: "Weather", Attrs: kv("station", "north", "celsius", 21.5, "humidity", 40)})
	got.exactlyOnce(t, 1, "dashboard")
}

// In a place that requires advertisements, a subscription travels only
// toward the publishers of its types. The listener's filter on seasonal
// stays on its switch until the shop advertises music (BGM is both music
// and seasonal); then it is registered toward the shop, before Advertise
// returns, and the event published at once reaches the listener.
func ExampleSwitch_Advertisements() {
	ctx := context.Background()
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "shop", Ontology: musicPlace().Ontology(), RequireAdvertisements: true})
	if err != nil {
		log.Fatal(err)
	}
	tr, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	shopSw, _ := sion.NewSwitch(sion.SwitchConfig{Name: "shop-sw", Place: place})
	homeSw, _ := sion.NewSwitch(sion.SwitchConfig{Name: "home-sw", Place: place})
	l, err := tr.Listen("shop-sw")
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- shopSw.Serve(ctx, l) }()
	defer func() { shopSw.Close(); <-served }()
	defer homeSw.Close()
	if _, err := homeSw.Link(ctx, tr, "shop-sw", sion.LinkConfig{}); err != nil {
		log.Fatal(err)
	}

	listener, _ := homeSw.Open(ctx, sion.SessionConfig{Name: "listener"})
	sub, err := listener.Subscribe(ctx, `{type ⊑ seasonal}`)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("keys registered at the shop:", len(homeSw.Routes()))

	shop, _ := shopSw.Open(ctx, sion.SessionConfig{Name: "shop"})
	if err := shop.Advertise(ctx, sion.Advertisement{Type: "music"}); err != nil {
		log.Fatal(err)
	}
	for _, ad := range homeSw.Advertisements() {
		fmt.Println("advertised:", ad.Type, "behind", ad.Behind)
	}
	fmt.Println("keys registered at the shop:", len(homeSw.Routes()))
	if err := shop.Publish(ctx, &sion.Event{Type: "BGM", Attrs: price(25)}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("received:", (<-sub.C()).Event.Type)
	err = shop.Publish(ctx, &sion.Event{Type: "seasonal"})
	fmt.Println(errors.Is(err, sion.ErrNotAdvertised))
	// Output:
	// keys registered at the shop: 0
	// advertised: music behind [shop-sw]
	// keys registered at the shop: 1
	// received: BGM
	// true
}

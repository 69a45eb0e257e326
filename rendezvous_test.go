package sion_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
)

// overlayPlace is a place routed by rendezvous whose switches serve over
// one transport and have joined its overlay.
type overlayPlace struct {
	t     testing.TB
	tr    transport.Transport
	place *sion.EventPlace
	sws   []*sion.Switch
	addrs []string
	stops []func() // closes switch i and waits for its Serve
}

// newOverlayPlace starts n switches in a place routed by rendezvous over
// a new mem network, each joining through the first.
func newOverlayPlace(t testing.TB, n int, cfg sion.PlaceConfig) *overlayPlace {
	t.Helper()
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	if cfg.Name == "" {
		cfg.Name = "overlay"
	}
	if cfg.Ontology == nil {
		cfg.Ontology = ont1(t)
	}
	if cfg.Routing == nil {
		cfg.Routing = sion.RouteByRendezvous(sion.RendezvousConfig{})
	}
	place, err := sion.NewEventPlace(cfg)
	require.NoError(t, err)
	p := &overlayPlace{t: t, tr: tr, place: place}
	for i := range n {
		p.add(fmt.Sprintf("sw%d", i))
	}
	return p
}

// add starts a switch named name and joins it through switch 0 (the
// first switch joins alone).
func (p *overlayPlace) add(name string) *sion.Switch {
	t := p.t
	t.Helper()
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: name, Place: p.place})
	require.NoError(t, err)
	l, err := p.tr.Listen(name)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- sw.Serve(context.Background(), l) }()
	require.Eventually(t, func() bool { return sw.State() == sion.Active }, 10*time.Second, time.Millisecond)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			require.NoError(t, sw.Close())
			require.NoError(t, <-served)
		})
	}
	t.Cleanup(stop)
	seed := ""
	if len(p.sws) > 0 {
		seed = p.addrs[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, sw.Join(ctx, p.tr, seed), "join %s", name)
	p.sws = append(p.sws, sw)
	p.addrs = append(p.addrs, l.Addr().String())
	p.stops = append(p.stops, stop)
	return sw
}

// open opens a session on switch i, closed at cleanup.
func (p *overlayPlace) open(i int, name string) *sion.Session {
	p.t.Helper()
	s, err := p.sws[i].Open(context.Background(), sion.SessionConfig{Name: name})
	require.NoError(p.t, err)
	p.t.Cleanup(func() { s.Close() })
	return s
}

// TestRendezvousDeliversExactlyOnce: in a place routed by rendezvous,
// every event published after Advertise and Subscribe returned reaches
// exactly the subscriptions whose filters match it, once, whichever
// switches the publisher and the subscribers are on — subtypes included
// (a subscription to Alarm gets FireAlarm events, whose rendezvous switch
// is another).
func TestRendezvousDeliversExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n, leaves int
	}{
		{"12 switches, one hop", 12, 0},
		{"40 switches, leaf sets of 2", 40, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newOverlayPlace(t, tc.n, sion.PlaceConfig{Routing: sion.RouteByRendezvous(sion.RendezvousConfig{Leaves: tc.leaves})})
			checkExactlyOnce(t, p)
		})
	}
}

func checkExactlyOnce(t *testing.T, p *overlayPlace) {
	ctx := context.Background()
	maxHops := 0

	type want struct {
		sw     int
		filter string
		types  map[string]bool // the types it gets
	}
	subs := []want{
		{0, "{type ⊑ Alarm}", map[string]bool{"Alarm": true, "FireAlarm": true, "KitchenFireAlarm": true}},
		{3, "{type ⊑ FireAlarm}", map[string]bool{"FireAlarm": true, "KitchenFireAlarm": true}},
		{7, "{type ⊑ Notice; seq >= 0}", map[string]bool{"Notice": true}},
		{11, "{type ⊑ *}", map[string]bool{"Alarm": true, "FireAlarm": true, "KitchenFireAlarm": true, "Notice": true}},
		{5, "{type ⊑ KitchenFireAlarm}", map[string]bool{"KitchenFireAlarm": true}},
	}
	got := make([]*sion.Subscription, len(subs))
	for i, w := range subs {
		s := p.open(w.sw, fmt.Sprintf("sub%d", i))
		sub, err := s.Subscribe(ctx, w.filter, sion.WithQueue(4096))
		require.NoError(t, err, w.filter)
		got[i] = sub
	}
	pubs := map[string]int{"Alarm": 2, "FireAlarm": 9, "KitchenFireAlarm": 4, "Notice": 6}
	sessions := map[string]*sion.Session{}
	for typ, at := range pubs {
		s := p.open(at, "pub-"+typ)
		require.NoError(t, s.Advertise(ctx, sion.Advertisement{Type: typ}))
		sessions[typ] = s
	}
	const per = 20
	for typ, s := range sessions {
		for k := range per {
			require.NoError(t, s.Publish(ctx, &sion.Event{Type: typ, Attrs: seqAttr(typ, k)}))
		}
	}
	for i, w := range subs {
		wantN := per * len(w.types)
		seen := map[string]int{}
		for range wantN {
			d := next(t, got[i])
			seen[d.Event.Type]++
			maxHops = max(maxHops, d.Event.Control.Hops)
		}
		for typ := range w.types {
			assert.Equal(t, per, seen[typ], "subscription %d (%s) on sw%d: events of %s", i, w.filter, w.sw, typ)
		}
	}
	assertNoDuplicates(t, p)
	t.Logf("%d switches: longest path of an event %d hops", len(p.sws), maxHops)
}

func seqAttr(typ string, k int) []ontology.Attr {
	if typ == "Notice" {
		return []ontology.Attr{{Name: "seq", Value: ontology.Int(int64(k))}}
	}
	return nil
}

// TestRendezvousRefusesUnadvertised: in a place routed by rendezvous a
// session publishes only what it advertised.
func TestRendezvousRefusesUnadvertised(t *testing.T) {
	p := newOverlayPlace(t, 3, sion.PlaceConfig{})
	ctx := context.Background()
	s := p.open(1, "pub")
	err := s.Publish(ctx, &sion.Event{Type: "Alarm"})
	require.ErrorIs(t, err, sion.ErrNotAdvertised)
	assert.Contains(t, err.Error(), `"pub" publishes Alarm`)
	require.NoError(t, s.Advertise(ctx, sion.Advertisement{Type: "Alarm"}))
	require.NoError(t, s.Publish(ctx, &sion.Event{Type: "FireAlarm"}), "a subtype of an advertised type")
	require.ErrorIs(t, s.Publish(ctx, &sion.Event{Type: "Notice"}), sion.ErrNotAdvertised)
	require.ErrorIs(t, s.Advertise(ctx, sion.Advertisement{Type: "Nope"}), sion.ErrUnknownEventType)
}

// next returns sub's next delivery, failing the test after 10 s.
func next(t testing.TB, sub *sion.Subscription) sion.Delivery {
	t.Helper()
	select {
	case d := <-sub.C():
		return d
	case <-time.After(10 * time.Second):
		t.Fatalf("no delivery within 10 s")
	}
	return sion.Delivery{}
}

// assertNoDuplicates checks that no event reached any switch of p twice:
// each type's paths form a tree, so the safety net (dropping an event
// seen before) never catches anything.
func assertNoDuplicates(t testing.TB, p *overlayPlace) {
	t.Helper()
	for _, sw := range p.sws {
		for _, l := range sw.Links() {
			assert.Zero(t, l.Duplicates, "%s: duplicates from %s", sw.Name(), l.Peer)
		}
	}
}

// rendezvousOf follows eventType's route from every switch of sws and
// returns the switch all routes end at, or nil while they do not agree
// (or a route passes a switch not in sws).
func rendezvousOf(sws []*sion.Switch, eventType string) *sion.Switch {
	byName := map[string]*sion.Switch{}
	for _, sw := range sws {
		byName[sw.Name()] = sw
	}
	var end *sion.Switch
	for _, sw := range sws {
		at := sw
		for hops := 0; ; hops++ {
			peer, ok := at.RendezvousNextHop(eventType)
			if !ok || hops > 64 {
				return nil
			}
			if peer == "" {
				break
			}
			if at = byName[peer]; at == nil {
				return nil
			}
		}
		if end != nil && end != at {
			return nil
		}
		end = at
	}
	return end
}

// TestRendezvousSwitchLeavesOrDies: when the rendezvous switch of a type
// leaves the overlay (Leave) or dies (Close, without a word), the others
// repair their tables, the advertisement and the subscription move to the
// switch now closest to the type's key, and events flow again.
func TestRendezvousSwitchLeavesOrDies(t *testing.T) {
	for _, how := range []string{"leaves", "dies"} {
		t.Run(how, func(t *testing.T) {
			p := newOverlayPlace(t, 16, sion.PlaceConfig{Routing: sion.RouteByRendezvous(sion.RendezvousConfig{Leaves: 4})})
			ctx := context.Background()
			rv := rendezvousOf(p.sws, "Alarm")
			require.NotNil(t, rv)
			var hosts []int
			for i, sw := range p.sws {
				if sw != rv && len(hosts) < 2 {
					hosts = append(hosts, i)
				}
			}
			pub := p.open(hosts[0], "pub")
			require.NoError(t, pub.Advertise(ctx, sion.Advertisement{Type: "Alarm"}))
			sub, err := p.open(hosts[1], "sub").Subscribe(ctx, "{type ⊑ Alarm}")
			require.NoError(t, err)
			require.NoError(t, pub.Publish(ctx, &sion.Event{Type: "Alarm"}))
			next(t, sub)

			i := slices.Index(p.sws, rv)
			if how == "leaves" {
				require.NoError(t, rv.Leave(ctx))
			}
			p.stops[i]()
			live := slices.Delete(slices.Clone(p.sws), i, i+1)
			var now *sion.Switch
			require.Eventually(t, func() bool {
				now = rendezvousOf(live, "Alarm")
				if now == nil {
					return false
				}
				info, _ := now.Rendezvous()
				up, ok := p.sws[hosts[0]].RendezvousNextHop("Alarm")
				return ok && info.Advertisements > 0 && info.Requests > 0 && (up == "" || linkTo(p.sws[hosts[0]], up).Proxies > 0)
			}, 20*time.Second, 10*time.Millisecond)
			assert.NotEqual(t, rv.Name(), now.Name())
			require.NoError(t, pub.Publish(ctx, &sion.Event{Type: "Alarm"}))
			next(t, sub)
		})
	}
}

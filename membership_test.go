package sion_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport/mem"
)

// Membership of a place's network (S1): probes, failure of a parent,
// leave, states, merge, split and absorb.

func names(rs []sion.ProbeResult) (out []string) {
	for _, r := range rs {
		out = append(out, r.Switch)
	}
	return out
}

func TestProbeHopAttribute(t *testing.T) {
	//        sw0
	//         |
	//        sw1
	//       /   \
	//     sw2   sw3
	//      |
	//     sw4
	overTransports(t, sion.PlaceConfig{}, []int{-1, 0, 1, 1, 2}, func(t *testing.T, n *network) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		up, err := n.sws[4].Probe(ctx, 3, sion.TowardParents)
		require.NoError(t, err)
		assert.Equal(t, []sion.ProbeResult{{Switch: "sw2", Addr: n.addrs[2], Hops: 1}, {Switch: "sw1", Addr: n.addrs[1], Hops: 2}, {Switch: "sw0", Addr: n.addrs[0], Hops: 3}}, up)
		up, err = n.sws[4].Probe(ctx, 10, sion.TowardParents)
		require.NoError(t, err)
		assert.Equal(t, []string{"sw2", "sw1", "sw0"}, names(up), "the root ends the chain before 10 hops")

		short, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel2()
		down, err := n.sws[0].Probe(short, 2, sion.TowardChildren)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"sw1", "sw2", "sw3"}, names(down), "children within two links")
		short, cancel3 := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel3()
		all, err := n.sws[2].Probe(short, 1, sion.AllDirections)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"sw1", "sw4"}, names(all))

		_, err = n.sws[0].Probe(ctx, 0, sion.AllDirections)
		require.ErrorIs(t, err, sion.ErrInvalidConfig)
	})
}

// TestParentFailureRelinksToAlternative: the middle switch of a line
// dies for good; its child re-links to the grandparent its probe found,
// and events published afterwards reach it.
func TestParentFailureRelinksToAlternative(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			tr, addr := tc.make(t)
			n := &network{}
			*n = *newNetwork(t, tr, addr, sion.PlaceConfig{}, []int{-1})
			n.linkCfg.ProbeHops = 3
			n.start(1, addr(1))
			n.start(2, addr(2))
			n.parent = []int{-1, 0, 1}
			n.links = make([]*sion.SharedLink, 3)
			n.link(1, 0)
			n.link(2, 1)
			require.Eventually(t, func() bool { return len(n.links[2].Alternatives()) == 1 }, 10*time.Second, time.Millisecond, "the probe found the grandparent")
			assert.Equal(t, []sion.ProbeResult{{Switch: "sw0", Addr: n.addrs[0], Hops: 2}}, n.links[2].Alternatives())

			sub := subscribe(t, open(t, n.sws[2], "far"), `{type ⊑ Alarm}`)
			require.NoError(t, n.sws[1].Close()) // dies, never comes back
			require.Eventually(t, func() bool {
				st, _ := n.links[2].State()
				return st == sion.LinkUp && n.links[2].Parent() == n.addrs[0]
			}, 10*time.Second, time.Millisecond, "re-linked to sw0")
			publish(t, open(t, n.sws[0], "pub"), &sion.Event{Type: "FireAlarm"})
			require.NoError(t, n.sws[0].Flush(context.Background()))
			assert.Equal(t, 1, count(sub))
		})
	}
}

// TestLeave: a leaving switch's children link to its parent; a leaving
// root elects a child as the new root and the others link to it.
func TestLeave(t *testing.T) {
	//        sw0
	//       /   \
	//     sw1   sw4
	//    /   \
	//  sw2   sw3
	overTransports(t, sion.PlaceConfig{}, []int{-1, 0, 1, 1, 0}, func(t *testing.T, n *network) {
		ctx := context.Background()
		subs := map[int]*sion.Subscription{}
		for _, i := range []int{2, 3, 4} {
			subs[i] = subscribe(t, open(t, n.sws[i], "app"), `{type ⊑ Alarm}`)
		}
		check := func(from int, want ...int) {
			t.Helper()
			publish(t, open(t, n.sws[from], "pub"), &sion.Event{Type: "Alarm"})
			require.NoError(t, n.sws[from].Flush(ctx))
			for i, sub := range subs {
				assert.Equal(t, boolCount(contains(want, i)), count(sub), "sw%d", i)
			}
		}
		assert.Equal(t, sion.Active, n.sws[1].State())
		require.NoError(t, n.sws[1].Leave(ctx))
		assert.Equal(t, sion.Suspended, n.sws[1].State())
		for _, i := range []int{2, 3} {
			require.Eventually(t, func() bool {
				st, _ := n.links[i].State()
				return st == sion.LinkUp && n.links[i].Parent() == n.addrs[0]
			}, 10*time.Second, time.Millisecond, "sw%d links to sw0", i)
		}
		require.Eventually(t, func() bool { return len(n.sws[0].Links()) == 3 }, 10*time.Second, time.Millisecond, "sw2, sw3 and sw4: sw0 has seen sw1's link end")
		assert.Empty(t, n.sws[1].Links())
		check(0, 2, 3, 4)

		// A suspended switch refuses requests until it links again.
		twin, err := sion.NewSwitch(sion.SwitchConfig{Name: "late", Place: n.place})
		require.NoError(t, err)
		defer twin.Close()
		_, err = twin.Link(ctx, n.tr, n.addrs[1], sion.LinkConfig{ProbeHops: -1})
		require.ErrorIs(t, err, sion.ErrLinkRefused)
		assert.Contains(t, err.Error(), "has left")

		// The root leaves: sw2 (first by name among sw2, sw3, sw4) is elected.
		require.NoError(t, n.sws[0].Leave(ctx))
		require.Eventually(t, func() bool { return n.sws[2].State() == sion.Active && len(n.sws[2].Links()) == 2 }, 10*time.Second, time.Millisecond)
		for _, i := range []int{3, 4} {
			require.Eventually(t, func() bool {
				st, _ := n.links[i].State()
				return st == sion.LinkUp && n.links[i].Parent() == n.addrs[2]
			}, 10*time.Second, time.Millisecond, "sw%d links to sw2", i)
		}
		require.Eventually(t, func() bool { st, _ := n.links[2].State(); return st == sion.LinkClosed }, 10*time.Second, time.Millisecond,
			"the elected root's own link is closed, not being re-established")
		// Its end of the old link to sw0 goes once that link has closed.
		require.Eventually(t, func() bool {
			ls := n.sws[2].Links()
			for _, l := range ls {
				if l.Parent {
					return false
				}
			}
			return len(ls) == 2
		}, 10*time.Second, time.Millisecond, "sw2 is the root now: no parent link")
		check(3, 2, 3, 4)
	})
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func boolCount(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestSwitchStates(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			tr, addr := tc.make(t)
			place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "p", Ontology: ont1(t)})
			require.NoError(t, err)
			sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "s", Place: place})
			require.NoError(t, err)
			assert.Equal(t, sion.Suspended, sw.State(), "a new switch belongs to no network")
			l, err := tr.Listen(addr(0))
			require.NoError(t, err)
			served := make(chan error, 1)
			go func() { served <- sw.Serve(context.Background(), l) }()
			require.Eventually(t, func() bool { return sw.State() == sion.Active }, 10*time.Second, time.Millisecond, "serving link requests")
			require.NoError(t, sw.Leave(context.Background()))
			assert.Equal(t, sion.Suspended, sw.State())
			require.NoError(t, sw.Close())
			require.NoError(t, <-served)
			assert.Equal(t, sion.NonExistent, sw.State())
		})
	}
}

// TestMergeSplitAbsorb: S1's combination and separation of places, and
// absorption of a switch.
func TestMergeSplitAbsorb(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tr, addr := tc.make(t)
			a := newNetwork(t, tr, addr, sion.PlaceConfig{Name: "a"}, []int{-1})
			bPlace, err := sion.NewEventPlace(sion.PlaceConfig{Name: "b", Ontology: a.place.Ontology()})
			require.NoError(t, err)
			b := &network{t: t, tr: tr, place: bPlace, linkCfg: a.linkCfg, prefix: "b"}
			b.start(0, addr(10))

			subA := subscribe(t, open(t, a.sws[0], "app"), `{type ⊑ Alarm}`)
			pubB := open(t, b.sws[0], "pub")

			// Merge: a switch of b links into a.
			_, err = b.sws[0].Link(ctx, tr, a.addrs[0], sion.LinkConfig{ProbeHops: -1})
			require.ErrorIs(t, err, sion.ErrLinkRefused, "without Merge, another place is refused")
			merged, err := b.sws[0].Link(ctx, tr, a.addrs[0], sion.LinkConfig{ProbeHops: -1, Merge: true})
			require.NoError(t, err)
			publish(t, pubB, &sion.Event{Type: "Alarm"})
			require.NoError(t, b.sws[0].Flush(ctx))
			d := queued(subA)
			require.Len(t, d, 1, "events spread over the combined place")
			assert.Equal(t, "b", d[0].Event.Control.Place)

			// Split: releasing the link separates them again.
			require.NoError(t, merged.Close())
			publish(t, pubB, &sion.Event{Type: "Alarm"})
			require.NoError(t, b.sws[0].Flush(ctx))
			assert.Equal(t, 0, count(subA))

			// Absorb: a's switch takes in a suspended switch that can dial.
			x, err := sion.NewSwitch(sion.SwitchConfig{Name: "x", Place: a.place, Transport: tr})
			require.NoError(t, err)
			xl, err := tr.Listen(addr(11))
			require.NoError(t, err)
			served := make(chan error, 1)
			go func() { served <- x.Serve(ctx, xl) }()
			defer func() {
				require.NoError(t, x.Close())
				require.NoError(t, <-served)
			}()
			require.NoError(t, a.sws[0].Absorb(ctx, tr, xl.Addr().String()))
			links := x.Links()
			require.Len(t, links, 1)
			assert.True(t, links[0].Parent, "x requested the link: a's switch is its parent")
			publish(t, open(t, x, "pub"), &sion.Event{Type: "FireAlarm"})
			require.NoError(t, x.Flush(ctx))
			assert.Equal(t, 1, count(subA))
			err = a.sws[0].Absorb(ctx, tr, xl.Addr().String())
			require.ErrorIs(t, err, sion.ErrLinkRefused, "x has a parent already")
			// Another place's switch is not absorbed; nor one that cannot dial.
			err = a.sws[0].Absorb(ctx, tr, b.addrs[0])
			require.ErrorIs(t, err, sion.ErrLinkRefused)
			assert.Contains(t, err.Error(), `is in place "b"`)
			a.start(1, addr(12)) // no SwitchConfig.Transport
			err = a.sws[0].Absorb(ctx, tr, a.addrs[1])
			require.ErrorIs(t, err, sion.ErrLinkRefused)
			assert.Contains(t, err.Error(), "SwitchConfig.Transport")
		})
	}
}

// TestCloseDuringLink: Switch.Close while its Link is still being set up
// (the parent accepts the connection and never answers) returns, and so
// does Link, with an error.
func TestCloseDuringLink(t *testing.T) {
	net, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	l, err := net.Listen("silent")
	require.NoError(t, err)
	defer l.Close()
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "p", Ontology: ont1(t)})
	require.NoError(t, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "child", Place: place})
	require.NoError(t, err)
	linked := make(chan error, 1)
	go func() {
		_, err := sw.Link(context.Background(), net, "silent", sion.LinkConfig{})
		linked <- err
	}()
	conn, err := l.Accept(context.Background()) // the request is in flight
	require.NoError(t, err)
	defer conn.Close()
	closed := make(chan error, 1)
	go func() { closed <- sw.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Switch.Close hangs while a Link is being set up")
	}
	require.Error(t, <-linked)
	assert.Equal(t, sion.NonExistent, sw.State())
	require.ErrorIs(t, sw.Flush(context.Background()), sion.ErrClosed)
	_, err = sw.Probe(context.Background(), 1, sion.AllDirections)
	require.ErrorIs(t, err, sion.ErrClosed)
}

// TestNetworkConfigRefused: what cannot work is refused with
// ErrInvalidConfig naming it, never a panic.
func TestNetworkConfigRefused(t *testing.T) {
	ctx := context.Background()
	sw := newSwitch(t, sion.PlaceConfig{})
	_, err := sw.Link(ctx, nil, "x", sion.LinkConfig{})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	require.ErrorIs(t, sw.Serve(ctx, nil), sion.ErrInvalidConfig)
	require.ErrorIs(t, sw.Absorb(ctx, nil, "x"), sion.ErrInvalidConfig)
	_, err = sion.Dial(ctx, nil, "x", sion.SessionConfig{})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	net, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	_, err = sw.Link(ctx, net, "x", sion.LinkConfig{RetryMin: time.Second, RetryMax: time.Millisecond})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	_, err = sion.Dial(ctx, net, "x", sion.SessionConfig{SharedKey: []byte("short")})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	for name, cfg := range map[string]sion.PlaceConfig{
		"empty key":   {SharedKey: []byte{}},
		"short key":   {SharedKey: []byte("0123456789")},
		"TTL too big": {TTL: 1 << 20},
	} {
		cfg.Name, cfg.Ontology = "p", ont1(t)
		_, err := sion.NewEventPlace(cfg)
		require.ErrorIs(t, err, sion.ErrInvalidConfig, name)
	}
	assert.Equal(t, sion.Suspended, sw.State(), "a failed Serve left nothing behind")
	require.NoError(t, sw.Close())
}

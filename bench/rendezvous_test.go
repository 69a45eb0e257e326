package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// Publish → deliver across a place of many switches routed by rendezvous
// (S3, sion.RouteByRendezvous) against the same place routed by filter
// (S1, sion.RouteByFilter, the default) over a tree of shared links, in
// the same run, so that the two compare as a ratio.
//
// Both places: n switches sw0…sw(n-1) in one process over one
// transport/mem network, the ontology and events of network_test.go
// (Reading{n, t, value, zone} with a 60-byte JSON payload). The
// publisher is a local session on sw(n-1) that advertises Reading
// (Session.Advertise; in the S1 place it only records it); the
// subscriber {type ⊑ Reading; n >= 0} (it matches every event) a local
// session on sw(subAt(n)), WithQueue(4000), WithOverflow(Block) and a
// handler. No other sessions.
//
//   - routing=filter-tree: switch i links to switch (i-1)/4 with
//     LinkConfig{ProbeHops: -1}: a tree of fan-out 4, depth 2 at 16
//     switches and 3 at 64. sw(n-1) and sw(subAt(n)) are leaves of the
//     deepest level under different children of sw0, so the event
//     crosses the tree's diameter: 4 links at 16 switches, 6 at 64. (A
//     line of 64 switches would exceed the place's TTL, 16, and put all
//     of them between the two sessions.)
//   - routing=rendezvous: every switch serves on the network, waits
//     until it is Active and joins the overlay through sw0
//     (Switch.Join), RendezvousConfig{} (no bypass). The overlay decides
//     the path: publisher → rendezvous switch of Reading → subscriber.
//
// Load as BenchmarkNetworkHops's load=burst: an op publishes netBatch
// events back to back from one goroutine, then waits until the
// subscriber has all of them; netWarmup events before the clock starts.
// Reported: events/s; allocs/op and B/op for the whole process per op
// (per 1,000 events); hops, the hops the last event took
// (Event.Control.Hops at the subscriber); ctl-msgs/sub, the control
// messages the one Subscribe cost — the sum of LinkInfo.ControlSent over
// every switch's Links() after Subscribe returned minus before it was
// called; links, the shared links of the place (counted at both ends,
// halved); and, in the rendezvous row, x-filter-tree: its events/s
// divided by that of the filter-tree row of the same size run last in
// the same process. go test runs each sub-benchmark -count times in a
// row, so with -count > 1 that is the last filter-tree run: compare the
// medians of the two rows then.

// rvSizes are the place sizes BenchmarkRendezvous runs.
var rvSizes = []int{16, 64}

// rvFanout is the fan-out of the S1 tree.
const rvFanout = 4

// rvParent is switch i's parent in the S1 tree (-1 for the root).
func rvParent(i int) int {
	if i == 0 {
		return -1
	}
	return (i - 1) / rvFanout
}

// rvDepth is switch i's depth in the S1 tree.
func rvDepth(i int) int {
	d := 0
	for ; i > 0; i = rvParent(i) {
		d++
	}
	return d
}

// subAt is where the subscriber is in a place of n switches: the first
// switch of the S1 tree's deepest level (the publisher is on the last).
func subAt(n int) int {
	i := 0
	for rvDepth(i) < rvDepth(n-1) {
		i++
	}
	return i
}

// placeRig is one place with its two sessions.
type placeRig struct {
	publish func(i int) error
	sws     []*sion.Switch
	subCtl  uint64       // control messages sent during the Subscribe
	hops    atomic.Int64 // Control.Hops of the last event delivered
}

// ctlSent sums ControlSent over every link of every switch of the rig.
func (r *placeRig) ctlSent() uint64 {
	var n uint64
	for _, sw := range r.sws {
		for _, l := range sw.Links() {
			n += l.ControlSent
		}
	}
	return n
}

// links returns the number of shared links of the rig's place.
func (r *placeRig) links() int {
	n := 0
	for _, sw := range r.sws {
		n += len(sw.Links())
	}
	return n / 2
}

// check fails tb if any link dropped, expired, refused or saw twice an
// event.
func (r *placeRig) check(tb testing.TB) {
	tb.Helper()
	for _, sw := range r.sws {
		for _, l := range sw.Links() {
			require.Zero(tb, l.Dropped+l.Expired+l.Refused+l.Duplicates, "%s → %s: %+v", sw.Name(), l.Peer, l)
		}
	}
}

// newPlaceRig starts a place of n switches routed by rendezvous or, if
// not rendezvous, by filter over the tree (see the top of this file),
// and its two sessions; everything closes at cleanup.
func newPlaceRig(tb testing.TB, n int, rendezvous bool, a *arrivals) *placeRig {
	tb.Helper()
	ctx := context.Background()
	ont, err := netOnt()
	require.NoError(tb, err)
	cfg := sion.PlaceConfig{Name: "place", Ontology: ont}
	if rendezvous {
		cfg.Routing = sion.RouteByRendezvous(sion.RendezvousConfig{})
	}
	place, err := sion.NewEventPlace(cfg)
	require.NoError(tb, err)
	network, err := mem.NewNetwork(mem.Config{})
	require.NoError(tb, err)
	r := &placeRig{sws: make([]*sion.Switch, n)}
	for i := range r.sws {
		name := fmt.Sprint("sw", i)
		sw, err := sion.NewSwitch(sion.SwitchConfig{Name: name, Place: place})
		require.NoError(tb, err)
		l, err := network.Listen(name)
		require.NoError(tb, err)
		served := make(chan error, 1)
		go func() { served <- sw.Serve(ctx, l) }()
		// Cleanups run last-in first-out: the last switch closes first.
		tb.Cleanup(func() {
			require.NoError(tb, sw.Close())
			require.NoError(tb, <-served)
		})
		r.sws[i] = sw
		if rendezvous {
			require.Eventually(tb, func() bool { return sw.State() == sion.Active }, 10*time.Second, time.Millisecond)
			seed := ""
			if i > 0 {
				seed = "sw0"
			}
			jctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			err := sw.Join(jctx, network, seed)
			cancel()
			require.NoError(tb, err, "join %s", name)
		}
	}
	if !rendezvous {
		for i := 1; i < n; i++ {
			lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			_, err := r.sws[i].Link(lctx, network, fmt.Sprint("sw", rvParent(i)), sion.LinkConfig{ProbeHops: -1})
			cancel()
			require.NoError(tb, err, "link sw%d to sw%d", i, rvParent(i))
		}
	}
	open := func(i int, name string) *sion.Session {
		s, err := r.sws[i].Open(ctx, sion.SessionConfig{Name: name})
		require.NoError(tb, err)
		tb.Cleanup(func() { s.Close() })
		return s
	}
	pub := open(n-1, "pub")
	require.NoError(tb, pub.Advertise(ctx, sion.Advertisement{Type: "Reading"}))
	sub := open(subAt(n), "sub")
	before := r.ctlSent()
	_, err = sub.Subscribe(ctx, `{type ⊑ Reading; n >= 0}`,
		sion.WithQueue(4*netBatch), overflow(false), sion.WithHandler(func(d sion.Delivery) {
			t, _ := d.Event.Value("t")
			r.hops.Store(int64(d.Event.Control.Hops))
			a.arrived(t.Int())
		}))
	require.NoError(tb, err)
	r.subCtl = r.ctlSent() - before
	ev := &sion.Event{Type: "Reading", ContentType: "application/json", Data: netPayload, Attrs: []ontology.Attr{
		{Name: "n"}, {Name: "t"}, {Name: "value"}, {Name: "zone", Value: ontology.String("hall")},
	}}
	r.publish = func(i int) error {
		ev.Attrs[0].Value = ontology.Int(int64(i % 100))
		ev.Attrs[2].Value = ontology.Float(20 + float64(i%50)/10)
		ev.Attrs[1].Value = ontology.Int(time.Now().UnixNano())
		return pub.Publish(ctx, ev) // Publish copies ev
	}
	return r
}

// rvRoutings are the two places BenchmarkRendezvous compares, filter-tree
// first (the rendezvous row reports the ratio to it).
var rvRoutings = []struct {
	name       string
	rendezvous bool
}{{"filter-tree", false}, {"rendezvous", true}}

func BenchmarkRendezvous(b *testing.B) {
	for _, n := range rvSizes {
		b.Run(fmt.Sprintf("switches=%d", n), func(b *testing.B) {
			var treeRate float64 // events/s of the filter-tree row
			for _, routing := range rvRoutings {
				b.Run("routing="+routing.name, func(b *testing.B) {
					if !routing.rendezvous {
						treeRate = 0
					}
					a := newArrivals()
					rig := newPlaceRig(b, n, routing.rendezvous, a)
					i := 0
					send := func(k int) {
						a.expect(int64(i + k))
						for range k {
							if err := rig.publish(i); err != nil {
								b.Fatal(err)
							}
							i++
						}
						a.await(b)
					}
					send(netWarmup)
					b.ReportAllocs()
					start, from := time.Now(), i
					for b.Loop() {
						send(netBatch)
					}
					rate := float64(i-from) / time.Since(start).Seconds()
					b.ReportMetric(rate, "events/s")
					b.ReportMetric(float64(rig.subCtl), "ctl-msgs/sub")
					b.ReportMetric(float64(rig.hops.Load()), "hops")
					b.ReportMetric(float64(rig.links()), "links")
					if !routing.rendezvous {
						treeRate = rate
					} else if treeRate > 0 {
						b.ReportMetric(rate/treeRate, "x-filter-tree")
					}
					require.Equal(b, int64(i), a.got.Load(), "every event arrived once")
					rig.check(b)
				})
			}
		})
	}
}

// TestRendezvousRigs runs each place of BenchmarkRendezvous at 16
// switches with a few events: every event arrives once, nothing is
// dropped or duplicated, the Subscribe cost some control messages, and
// nothing is left running afterwards.
func TestRendezvousRigs(t *testing.T) {
	for _, routing := range rvRoutings {
		t.Run(routing.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			t.Run("run", func(t *testing.T) {
				a := newArrivals()
				rig := newPlaceRig(t, rvSizes[0], routing.rendezvous, a)
				a.expect(50)
				for i := range 50 {
					require.NoError(t, rig.publish(i))
				}
				a.await(t)
				require.Equal(t, int64(50), a.got.Load())
				require.NotZero(t, rig.subCtl)
				require.NotZero(t, rig.hops.Load())
				rig.check(t)
				t.Logf("%s, %d switches: %d control messages for the Subscribe, %d hops, %d links",
					routing.name, rvSizes[0], rig.subCtl, rig.hops.Load(), rig.links())
			})
		})
	}
}

package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/site"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
)

// Publish → deliver through S4's edge sites (package site) against the
// same publisher and subscriber on one ordinary switch, in the same run,
// so that what a proxy, a representative proxy and a crossing between
// sites add comes out as a ratio.
//
// Every case runs in one process over one transport/mem network, with
// the ontology and events of network_test.go (Reading{n, t, value, zone},
// a 60-byte JSON payload). The publisher and the subscriber are remote
// sessions (sion.Dial over mem) in every case, so that each crosses the
// same kind of hop to the switch or proxy it uses: an application of a
// site dials its proxy, and a session opened in the proxy's process would
// skip the one hop every case shares. The proxies' own sessions — at the
// switches, and at other proxies' fronts — are remote sessions over mem
// too (that is how package site works). The subscriber
// {type ⊑ Reading; n >= 0} matches every event (WithQueue(4000), the
// default DropNewest: a remote session cannot Block).
//
//   - switch: one sion.Switch; publisher and subscriber dial it. Hops:
//     publisher → switch → subscriber.
//   - proxy-one-switch: site A with one switch and one proxy; both dial
//     the proxy, which publishes at the site's only switch. Hops:
//     publisher → proxy → switch → proxy → subscriber.
//   - proxy-representative: site A with two switches and proxies a1 (the
//     representative, SiteConfig.Representative) and a2; the publisher
//     dials a2, which hands each event to a1, which spreads them over
//     the two switches; the subscriber dials a1, which subscribed at both
//     switches. Hops: publisher → a2 → a1 → switch → a1 → subscriber.
//   - inter-site: sites A and B with two switches and two proxies each
//     (a1, b1 the representatives); the publisher dials b2 and the
//     subscriber a2. a2 sends the subscription to b1, which places it at
//     the B switches it spreads Reading to. Hops: publisher → b2 → b1 →
//     switch of B → b1 → a2 → subscriber.
//
// An op publishes one event and waits until the subscriber has it (the
// "single" load of BenchmarkNetworkHops): ns/op is the publish → deliver
// latency of an idle system, which is what the extra hops add to. A burst
// would measure throughput instead, where the proxies and switches of a
// path work in parallel and hide their hops on a machine of few cores,
// and a burst of more than a subscription's queue (ProxyConfig.Queue,
// 1,024, at each proxy's subscriptions; remote sessions cannot Block)
// would drop events. siteWarmup events before the clock starts (dials,
// the first publish's registration at the site manager, and each
// switch's first event of the type). Reported: events/s; allocs/op and
// B/op per event for the whole process (switches, proxies, site manager
// and both clients); x-switch, the case's ns/op over that of the switch
// case run last in the same process (also logged). go test runs each
// sub-benchmark -count times in a row, so with -count > 1 that is the
// last switch run: run the benchmark in a loop of processes, -count=1
// each, for ratios of runs side by side.

// siteWarmup is how many events each case publishes before the clock
// starts.
const siteWarmup = 50

// siteFilter is the subscriber's filter: every event.
const siteFilter = `{type ⊑ Reading; n >= 0}`

// siteSpec is one site of a rig: its switches' and proxies' addresses;
// the first proxy is the site's representative proxy.
type siteSpec struct {
	id       string
	switches []string
	proxies  []string
}

// siteRig is one case of BenchmarkSitePublishDeliver: publish publishes
// event i (n = i, t = now) at the publisher's switch or proxy; the
// subscriber calls the arrive function the rig was made with.
type siteRig struct {
	publish func(i int) error
	sub     *sion.Subscription
	proxies map[string]*site.Proxy
}

// check fails tb if the subscriber or any proxy's subscriptions dropped
// an event.
func (r *siteRig) check(tb testing.TB) {
	tb.Helper()
	require.Zero(tb, r.sub.Stats().Dropped, "dropped at the subscriber")
	for addr, p := range r.proxies {
		require.Zero(tb, p.Stats().Dropped, "dropped at proxy %s", addr)
	}
}

// siteCases are the cases of BenchmarkSitePublishDeliver, the baseline
// first: pubAt and subAt are the addresses the two sessions dial; sites
// nil is one plain switch at "sw".
var siteCases = []struct {
	name         string
	sites        []siteSpec
	pubAt, subAt string
}{
	{name: "switch", pubAt: "sw", subAt: "sw"},
	{name: "proxy-one-switch", sites: []siteSpec{{"A", []string{"a.0"}, []string{"a1"}}}, pubAt: "a1", subAt: "a1"},
	{name: "proxy-representative", sites: []siteSpec{{"A", []string{"a.0", "a.1"}, []string{"a1", "a2"}}}, pubAt: "a2", subAt: "a1"},
	{name: "inter-site", sites: []siteSpec{
		{"A", []string{"a.0", "a.1"}, []string{"a1", "a2"}},
		{"B", []string{"b.0", "b.1"}, []string{"b1", "b2"}},
	}, pubAt: "b2", subAt: "a2"},
}

// newSiteRig starts the switches, site manager and proxies of sites (or,
// sites nil, one switch "sw") over a new mem network, and the two
// sessions; everything closes at cleanup. arrive is called with each
// event's n and t as the subscriber receives it.
func newSiteRig(tb testing.TB, sites []siteSpec, pubAt, subAt string, arrive func(n, t int64)) *siteRig {
	tb.Helper()
	ctx := context.Background()
	ont, err := netOnt()
	require.NoError(tb, err)
	network, err := mem.NewNetwork(mem.Config{})
	require.NoError(tb, err)
	sctx, stop := context.WithCancel(ctx)
	var serving sync.WaitGroup
	var closers []func() error // in the order they close
	tb.Cleanup(func() {
		for _, c := range closers {
			require.NoError(tb, c())
		}
		stop()
		serving.Wait()
	})
	serve := func(addr string, fn func(context.Context, transport.Listener) error) {
		l, err := network.Listen(addr)
		require.NoError(tb, err)
		serving.Go(func() { _ = fn(sctx, l) }) // Serve returns once its switch closes
	}
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "edge", Ontology: ont})
	require.NoError(tb, err)
	var switches []*sion.Switch
	newSwitch := func(addr string) {
		sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "switch-" + addr, Place: place})
		require.NoError(tb, err)
		switches = append(switches, sw)
		serve(addr, sw.Serve)
	}
	r := &siteRig{proxies: map[string]*site.Proxy{}}
	var m *site.Manager
	if sites == nil {
		newSwitch("sw")
	} else {
		var mcfg site.ManagerConfig
		for _, sp := range sites {
			mcfg.Sites = append(mcfg.Sites, site.SiteConfig{ID: sp.id, Switches: sp.switches, Representative: sp.proxies[0]})
		}
		m, err = site.NewManager(mcfg)
		require.NoError(tb, err)
		serve("manager", m.Serve)
		for _, sp := range sites {
			for _, addr := range sp.switches {
				newSwitch(addr)
			}
		}
		var proxies []*site.Proxy
		for _, sp := range sites {
			for _, addr := range sp.proxies {
				p, err := site.NewProxy(site.ProxyConfig{
					Name: "proxy-" + addr, Site: sp.id, Addr: addr, Transport: network, Manager: "manager",
					Place: sion.PlaceConfig{Ontology: ont},
				})
				require.NoError(tb, err)
				proxies = append(proxies, p)
				r.proxies[addr] = p
				serve(addr, p.Serve)
			}
		}
		// Proxies first (their sessions at the switches and the manager
		// end), then the switches and the manager.
		for _, p := range proxies {
			closers = append(closers, p.Close)
		}
		// Every proxy registered, and each site's first proxy knows it is
		// the representative: the publishes route as described above
		// from the first event on.
		require.Eventually(tb, func() bool {
			reachable := map[string]bool{}
			for _, si := range m.Sites() {
				for _, pi := range si.Proxies {
					reachable[pi.Addr] = pi.Reachable
				}
			}
			for _, sp := range sites {
				for _, addr := range sp.proxies {
					if !reachable[addr] {
						return false
					}
				}
				if !r.proxies[sp.proxies[0]].Stats().Representative {
					return false
				}
			}
			return true
		}, 10*time.Second, time.Millisecond, "proxies not registered")
	}
	for _, sw := range switches {
		closers = append(closers, sw.Close)
	}
	if m != nil {
		closers = append(closers, m.Close)
	}
	dial := func(addr, name string) *sion.Session {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		s, err := sion.Dial(dctx, network, addr, sion.SessionConfig{Name: name})
		require.NoError(tb, err, "dial %s", addr)
		tb.Cleanup(func() { s.Close() }) // before the rig's closers
		return s
	}
	sub := dial(subAt, "sub")
	r.sub, err = sub.Subscribe(ctx, siteFilter, sion.WithQueue(4*netBatch), overflow(true), sion.WithHandler(func(d sion.Delivery) {
		n, _ := d.Event.Value("n")
		t, _ := d.Event.Value("t")
		arrive(n.Int(), t.Int())
	}))
	require.NoError(tb, err)
	pub := dial(pubAt, "pub")
	ev := &sion.Event{Type: "Reading", ContentType: "application/json", Data: netPayload, Attrs: []ontology.Attr{
		{Name: "n"}, {Name: "t"}, {Name: "value"}, {Name: "zone", Value: ontology.String("hall")},
	}}
	r.publish = func(i int) error {
		ev.Attrs[0].Value = ontology.Int(int64(i))
		ev.Attrs[2].Value = ontology.Float(20 + float64(i%50)/10)
		ev.Attrs[1].Value = ontology.Int(time.Now().UnixNano())
		return pub.Publish(ctx, ev) // Publish copies ev
	}
	return r
}

func BenchmarkSitePublishDeliver(b *testing.B) {
	var base float64 // ns/op of the last switch run
	for _, c := range siteCases {
		b.Run(c.name, func(b *testing.B) {
			a := newArrivals()
			rig := newSiteRig(b, c.sites, c.pubAt, c.subAt, func(_, t int64) { a.arrived(t) })
			i := 0
			send := func() {
				a.expect(int64(i + 1))
				if err := rig.publish(i); err != nil {
					b.Fatal(err)
				}
				i++
				a.await(b)
			}
			for range siteWarmup {
				send()
			}
			b.ReportAllocs()
			from := i
			for b.Loop() {
				send()
			}
			el := b.Elapsed()
			ns := float64(el.Nanoseconds()) / float64(i-from)
			b.ReportMetric(float64(i-from)/el.Seconds(), "events/s")
			if c.sites == nil {
				base = ns
			}
			if base > 0 {
				b.ReportMetric(ns/base, "x-switch")
				b.Logf("%s: %.0f ns/event, %.2f× switch (%.0f ns/event)", c.name, ns, ns/base, base)
			}
			require.Equal(b, int64(i), a.got.Load(), "every event arrived once")
			rig.check(b)
		})
	}
}

// TestSitePublishDeliver runs each case of BenchmarkSitePublishDeliver
// with a few events: each arrives exactly once, by the path the case
// describes (the proxies' counters), nothing is dropped, and nothing is
// left running afterwards.
func TestSitePublishDeliver(t *testing.T) {
	const events = 20
	for _, c := range siteCases {
		t.Run(c.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			t.Run("run", func(t *testing.T) {
				a := newArrivals()
				var mu sync.Mutex
				times := map[int64]int{} // deliveries per n
				rig := newSiteRig(t, c.sites, c.pubAt, c.subAt, func(n, ts int64) {
					mu.Lock()
					times[n]++
					mu.Unlock()
					a.arrived(ts)
				})
				a.expect(events)
				for i := range events {
					require.NoError(t, rig.publish(i))
				}
				a.await(t)
				// One more, waited for: a second copy of an earlier event,
				// had one been on its way, would most likely be in by then.
				a.expect(events + 1)
				require.NoError(t, rig.publish(events))
				a.await(t)
				want := map[int64]int{}
				for i := range events + 1 {
					want[int64(i)] = 1
				}
				mu.Lock()
				require.Equal(t, want, times, "deliveries per event")
				mu.Unlock()
				rig.check(t)
				sent := uint64(events + 1)
				p := func(addr string) site.ProxyStats { return rig.proxies[addr].Stats() }
				// The counters of a publish move when its Publish returns,
				// which may be after the subscriber has the event.
				switch c.name {
				case "proxy-one-switch":
					require.Eventually(t, func() bool { return p("a1").Direct == sent }, 5*time.Second, time.Millisecond, "%+v", p("a1"))
				case "proxy-representative":
					require.Eventually(t, func() bool { return p("a2").ToRepresentative == sent }, 5*time.Second, time.Millisecond, "%+v", p("a2"))
					require.Eventually(t, func() bool {
						s := p("a1").Spread
						return s["a.0"]+s["a.1"] == sent && s["a.0"] > 0 && s["a.1"] > 0
					}, 5*time.Second, time.Millisecond, "%+v", p("a1"))
				case "inter-site":
					require.Eventually(t, func() bool { return p("b2").ToRepresentative == sent }, 5*time.Second, time.Millisecond, "%+v", p("b2"))
					require.Equal(t, sent, p("a2").InterSiteEvents, "events that reached a2 from site B")
					require.Zero(t, p("a1").InterSiteEvents)
				}
			})
		})
	}
}

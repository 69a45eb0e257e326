package sion_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
	"github.com/sion-go/sion/transport/tcp"
)

// transports are the transports network tests run over, by name; each
// returns a Transport and the address switch i listens on.
var transports = []struct {
	name string
	make func(t *testing.T) (transport.Transport, func(i int) string)
}{
	{"mem", func(t *testing.T) (transport.Transport, func(int) string) {
		n, err := mem.NewNetwork(mem.Config{})
		require.NoError(t, err)
		return n, func(i int) string { return fmt.Sprintf("sw%d", i) }
	}},
	{"tcp", func(t *testing.T) (transport.Transport, func(int) string) {
		tr, err := tcp.New(tcp.Config{})
		require.NoError(t, err)
		return tr, func(int) string { return "127.0.0.1:0" }
	}},
}

// network is a set of switches of one place, each serving on its own
// address, linked into a tree: parent[i] is the switch that switch i
// requested its link to (-1 for the root).
type network struct {
	t      testing.TB
	tr     transport.Transport
	place  *sion.EventPlace
	sws    []*sion.Switch
	addrs  []string
	links  []*sion.SharedLink
	parent []int
	// linkCfg is what link uses; no probes by default, so that control
	// message counts are exact.
	linkCfg sion.LinkConfig
	// prefix starts the switches' names ("sw" when empty).
	prefix string
}

// newFuzzNetwork is two linked switches over mem for a fuzz target.
func newFuzzNetwork(f *testing.F) *network {
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(f, err)
	return newNetwork(f, tr, func(i int) string { return fmt.Sprintf("sw%d", i) }, sion.PlaceConfig{}, []int{-1, 0})
}

// newNetwork starts len(parent) switches over tr and links them; every
// switch closes at cleanup, and its Serve returns.
func newNetwork(t testing.TB, tr transport.Transport, addr func(int) string, cfg sion.PlaceConfig, parent []int) *network {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "net"
	}
	if cfg.Ontology == nil {
		cfg.Ontology = ont1(t)
	}
	place, err := sion.NewEventPlace(cfg)
	require.NoError(t, err)
	n := &network{t: t, tr: tr, place: place, parent: parent, links: make([]*sion.SharedLink, len(parent)),
		linkCfg: sion.LinkConfig{RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond, ProbeHops: -1}}
	for i := range parent {
		n.start(i, addr(i))
	}
	for i, p := range parent {
		if p >= 0 {
			n.link(i, p)
		}
	}
	return n
}

// start starts switch i serving on addr (replacing a closed one).
func (n *network) start(i int, addr string) {
	t := n.t
	t.Helper()
	prefix := n.prefix
	if prefix == "" {
		prefix = "sw"
	}
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: fmt.Sprintf("%s%d", prefix, i), Place: n.place})
	require.NoError(t, err)
	l, err := n.tr.Listen(addr)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- sw.Serve(context.Background(), l) }()
	// Serving makes the switch Active and gives it the address its
	// children and probes learn.
	require.Eventually(t, func() bool { return sw.State() == sion.Active }, 10*time.Second, time.Millisecond)
	t.Cleanup(func() {
		require.NoError(t, sw.Close())
		require.NoError(t, <-served)
	})
	if i < len(n.sws) {
		n.sws[i], n.addrs[i] = sw, l.Addr().String()
	} else {
		n.sws = append(n.sws, sw)
		n.addrs = append(n.addrs, l.Addr().String())
	}
}

func (n *network) link(child, parent int) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sl, err := n.sws[child].Link(ctx, n.tr, n.addrs[parent], n.linkCfg)
	require.NoError(n.t, err, "link sw%d to sw%d", child, parent)
	n.links[child] = sl
	// Link returns when the child's end is up; the parent's end comes up
	// when the child's Synced reaches it, a moment later. (A parent that
	// is no switch of n — fakePeer — is left alone.)
	if parent >= len(n.sws) || n.sws[parent] == nil {
		return
	}
	name := n.sws[child].Name()
	require.Eventually(n.t, func() bool {
		for _, l := range n.sws[parent].Links() {
			if l.Peer == name && l.State == sion.LinkUp {
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "sw%d's end of the link from sw%d did not come up", parent, child)
}

// dist returns the number of links between switches a and b.
func (n *network) dist(a, b int) int {
	depth := func(i int) (path []int) {
		for ; i >= 0; i = n.parent[i] {
			path = append(path, i)
		}
		return path
	}
	pa, pb := depth(a), depth(b)
	for i, x := range pa {
		if j := slices.Index(pb, x); j >= 0 {
			return i + j
		}
	}
	panic("not a tree")
}

// flush waits until every event published at the switches so far has
// reached every subscription.
func (n *network) flush() {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, sw := range n.sws {
		require.NoError(n.t, sw.Flush(ctx))
	}
}

// Topologies: parent arrays.
func line(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i - 1
	}
	return p
}

func star(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = 0
	}
	p[0] = -1
	return p
}

func randomTree(n int, rng *rand.Rand) []int {
	p := make([]int, n)
	p[0] = -1
	for i := 1; i < n; i++ {
		p[i] = rng.IntN(i)
	}
	return p
}

func TestSharedLinkCarriesEventsBothWays(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			tr, addr := tc.make(t)
			n := newNetwork(t, tr, addr, sion.PlaceConfig{}, []int{-1, 0})
			a, b := open(t, n.sws[0], "a"), open(t, n.sws[1], "b")
			subA := subscribe(t, a, `{type ⊑ Alarm}`)
			subB := subscribe(t, b, `{type ⊑ Reading; n >= 2}`)

			publish(t, a, &sion.Event{Type: "TempReading", Attrs: attrs("n", 3, "celsius", 21.5)})
			publish(t, a, &sion.Event{Type: "Reading", Attrs: attrs("n", 1)})
			publish(t, b, &sion.Event{Type: "KitchenFireAlarm"})
			publish(t, b, &sion.Event{Type: "Notice"})
			n.flush()

			gotB := queued(subB)
			require.Len(t, gotB, 1)
			e := gotB[0].Event
			assert.Equal(t, "TempReading", e.Type)
			assert.Equal(t, 1, e.Control.Hops)
			assert.Equal(t, sion.DefaultTTL-1, e.Control.TTL)
			assert.Equal(t, "sw0", e.Control.Origin)
			gotA := queued(subA)
			require.Len(t, gotA, 1)
			assert.Equal(t, "KitchenFireAlarm", gotA[0].Event.Type)

			// Only what the other side wants crosses.
			l0, l1 := n.sws[0].Links(), n.sws[1].Links()
			require.Len(t, l0, 1)
			require.Len(t, l1, 1)
			assert.Equal(t, "sw1", l0[0].Peer)
			assert.False(t, l0[0].Parent)
			assert.True(t, l1[0].Parent)
			assert.Equal(t, sion.LinkUp, l0[0].State)
			assert.Equal(t, uint64(1), l0[0].EventsSent)
			assert.Equal(t, uint64(1), l0[0].EventsReceived)
			assert.Equal(t, uint64(1), l1[0].EventsSent)
			assert.Equal(t, 1, l0[0].Routes)
			assert.Equal(t, 1, l0[0].Proxies)

			// The switch's totals keep a link's counters after it ends.
			require.NoError(t, n.sws[1].Close())
			require.Eventually(t, func() bool { return len(n.sws[0].Links()) == 0 }, 10*time.Second, time.Millisecond)
			tot := n.sws[0].Stats().Links
			assert.Equal(t, uint64(1), tot.EventsSent)
			assert.Equal(t, uint64(1), tot.EventsReceived)
			assert.Positive(t, tot.ControlSent)
		})
	}
}

// TestSharedLinkAbsorbsABurst: 10,000 events published at once from 20
// goroutines while the link's transport takes nothing all cross the link
// once it does: its queue bounds memory (64 MiB), not a small count of
// events. (With 4,096 events, watermill's universal suite lost 865 of
// its 10,000 in one run of two on a loaded machine.)
func TestSharedLinkAbsorbsABurst(t *testing.T) {
	const publishers, each = 20, 500
	mt, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	tr := &gatedDials{Transport: mt, open: make(chan struct{})}
	n := newNetwork(t, tr, func(i int) string { return fmt.Sprintf("sw%d", i) }, sion.PlaceConfig{}, []int{-1, 0})
	// sw1 dialled sw0: sw1's end of the link sends through the gate.
	sub := subscribe(t, open(t, n.sws[0], "far"), `{type ⊑ Reading}`, sion.WithQueue(publishers*each))
	pub := open(t, n.sws[1], "pub")
	tr.closed.Store(true)
	var wg sync.WaitGroup
	for g := range publishers {
		wg.Go(func() {
			for i := range each {
				publish(t, pub, &sion.Event{Type: "Reading", Attrs: attrs("n", g*each+i)})
			}
		})
	}
	wg.Wait()
	close(tr.open)
	n.flush()
	got := map[int64]bool{}
	for _, d := range queued(sub) {
		v, _ := d.Event.Value("n")
		got[v.Int()] = true
	}
	assert.Equal(t, publishers*each, len(got), "events that crossed the link")
	assert.Zero(t, n.sws[1].Stats().Links.Dropped)
}

// gatedDials is a transport whose dialled Conns, once closed is set,
// send nothing until open is closed: a peer that stopped reading for a
// while.
type gatedDials struct {
	transport.Transport
	closed atomic.Bool
	open   chan struct{}
}

func (g *gatedDials) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	c, err := g.Transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, g: g}, nil
}

type gatedConn struct {
	transport.Conn
	g *gatedDials
}

func (c *gatedConn) Send(ctx context.Context, frame []byte) error {
	if c.g.closed.Load() {
		select {
		case <-c.g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.Conn.Send(ctx, frame)
}

// filterPool and eventPool drive the reference-model tests: type
// inheritance, the wildcard type, attribute and content predicates.
var filterPool = []string{
	`{type ⊑ Event}`,
	`{type ⊑ Alarm}`,
	`{type ⊑ FireAlarm}`,
	`{type ⊑ Reading; n >= 5}`,
	`{type ⊑ TempReading; celsius > 20}`,
	`{type ⊑ Notice; zone prefix "hall"}`,
	`{type ⊑ *; n in {1, 2, 3}}`,
	`{type ⊑ Changed; entity == "role"}`,
	`{type ⊑ Created}`,
	`{type ⊑ Notice; json(order.id) > 9007199254740992}`,
}

func randomEvent(rng *rand.Rand) *sion.Event {
	switch rng.IntN(8) {
	case 0:
		return &sion.Event{Type: "Reading", Attrs: attrs("n", rng.IntN(8))}
	case 1:
		return &sion.Event{Type: "TempReading", Attrs: attrs("n", rng.IntN(8), "celsius", float64(rng.IntN(40)))}
	case 2:
		return &sion.Event{Type: []string{"Alarm", "FireAlarm", "KitchenFireAlarm"}[rng.IntN(3)]}
	case 3:
		return &sion.Event{Type: "Notice", Attrs: attrs("zone", []string{"hall", "hall.north", "Hall", "yard"}[rng.IntN(4)])}
	case 4:
		return jsonEvent("Notice", fmt.Sprintf(`{"order":{"id":%d}}`, 9007199254740991+rng.IntN(4)))
	case 5:
		return &sion.Event{Type: "Changed", Attrs: attrs("entity", []string{"role", "user"}[rng.IntN(2)])}
	case 6:
		return &sion.Event{Type: "Created", Attrs: attrs("entity", []string{"role", "user"}[rng.IntN(2)])}
	}
	return &sion.Event{Type: "Event"}
}

// TestNetworkAgainstReferenceModel runs lines, stars and random trees of 2
// to 50 switches under every routing mode: every subscription receives
// exactly the events its filter matches that were published within
// min(filter TTL, event TTL) links of its switch, each exactly once.
func TestNetworkAgainstReferenceModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type topo struct {
		name   string
		parent []int
	}
	topos := []topo{{"line-2", line(2)}, {"line-12", line(12)}, {"star-10", star(10)}, {"random-20", randomTree(20, rng)}, {"random-50", randomTree(50, rng)}}
	if testing.Short() {
		topos = topos[:4]
	}
	for _, tc := range transports {
		for _, mode := range []sion.RoutingMode{sion.RouteByFilter, sion.RouteByEventType, sion.RouteUnconditional} {
			for _, tp := range topos {
				t.Run(fmt.Sprintf("%s/%v/%s", tc.name, mode, tp.name), func(t *testing.T) {
					tr, addr := tc.make(t)
					checkReferenceModel(t, newNetwork(t, tr, addr, sion.PlaceConfig{Routing: mode, TTL: 64}, tp.parent), mode, rng)
				})
			}
		}
	}
}

func checkReferenceModel(t *testing.T, n *network, mode sion.RoutingMode, rng *rand.Rand) {
	ctx := context.Background()
	type sub struct {
		sub *sion.Subscription
		at  int
		ttl int
	}
	oracle := filter.NewBruteForce(n.place.Ontology())
	var subs []*sub
	for i := range n.sws {
		s := open(t, n.sws[i], fmt.Sprintf("app%d", i))
		for range 1 + rng.IntN(3) {
			src := filterPool[rng.IntN(len(filterPool))]
			ttl := []int{0, 1, 2, 64}[rng.IntN(4)]
			if mode == sion.RouteUnconditional {
				ttl = 64 // the filter does not spread; events flood
			}
			sb := &sub{at: i, ttl: ttl}
			sb.sub = subscribe(t, s, src, sion.WithTTL(ttl), sion.WithQueue(4096))
			require.NoError(t, oracle.Add(uint64(len(subs)), sb.sub.Filter()))
			subs = append(subs, sb)
		}
	}
	type published struct {
		ev  *sion.Event
		at  int
		ttl int
	}
	var evs []published
	pubs := make([]*sion.Session, len(n.sws))
	for i := range n.sws {
		pubs[i] = open(t, n.sws[i], fmt.Sprintf("pub%d", i))
	}
	// Capture IDs: a subscription on each publisher's own switch with
	// TTL 0 sees every event published there before Publish returns.
	all := make([]*sion.Subscription, len(n.sws))
	for i := range n.sws {
		all[i] = subscribe(t, pubs[i], `{}`, sion.WithTTL(0), sion.WithQueue(4096))
	}
	for range 300 {
		at := rng.IntN(len(n.sws))
		ev := randomEvent(rng)
		ev.Control.TTL = []int{1, 3, 64}[rng.IntN(3)]
		require.NoError(t, pubs[at].Publish(ctx, ev))
		var mine []*sion.Event // events from elsewhere arrive here too
		for _, d := range queued(all[at]) {
			if d.Event.Control.Origin == n.sws[at].Name() {
				mine = append(mine, d.Event)
			}
		}
		require.Len(t, mine, 1)
		evs = append(evs, published{ev: mine[0], at: at, ttl: ev.Control.TTL})
	}
	n.flush()

	// The reference model: an event crosses the link from switch x to its
	// neighbour y when its TTL left at x allows and x holds a proxy for
	// y's side matching it: a subscription beyond y whose filter (by
	// filter), filter type (by event type) or anything (unconditional)
	// fits, registered at most its TTL links away. Every subscription on
	// a switch the event reaches and whose filter matches receives it.
	typeOracle := filter.NewBruteForce(n.place.Ontology())
	for i, sb := range subs {
		require.NoError(t, typeOracle.Add(uint64(i), filter.MustCompile("{type ⊑ "+sb.sub.Filter().Type()+"}")))
	}
	matches := func(o *filter.BruteForce, ev *sion.Event) map[int]bool {
		out := map[int]bool{}
		o.Match(ev, func(id uint64, _ float64) { out[int(id)] = true })
		return out
	}
	reached := func(p published) []bool {
		full, types := matches(oracle, p.ev), matches(typeOracle, p.ev)
		crosses := func(x, y int) bool {
			if p.ttl-n.dist(p.at, x) <= 0 {
				return false
			}
			if mode == sion.RouteUnconditional {
				return true
			}
			for i, sb := range subs {
				fits := full[i]
				if mode == sion.RouteByEventType {
					fits = types[i]
				}
				if fits && n.dist(sb.at, y) < n.dist(sb.at, x) && n.dist(sb.at, x) <= sb.ttl {
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
		return at
	}
	want := make([]map[sion.EventID]int, len(subs))
	for i := range want {
		want[i] = map[sion.EventID]int{}
	}
	for _, p := range evs {
		at, full := reached(p), matches(oracle, p.ev)
		for i, sb := range subs {
			if at[sb.at] && full[i] {
				want[i][p.ev.ID] = 1
			}
		}
	}
	for i, sb := range subs {
		want := want[i]
		got := map[sion.EventID]int{}
		for _, d := range queued(sb.sub) { // flush has put them all in the queue
			got[d.Event.ID]++
		}
		assert.Equal(t, len(want), len(got), "subscription %d (%s at sw%d, TTL %d)", i, sb.sub.Filter(), sb.at, sb.ttl)
		assert.Equal(t, want, got, "subscription %d (%s at sw%d, TTL %d)", i, sb.sub.Filter(), sb.at, sb.ttl)
	}
}

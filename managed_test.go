package sion_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
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
)

// mnet is a managed place (RouteManaged, S2) over mem: switches linked
// into a tree, each logging to a buffer of its own, and its agent.
type mnet struct {
	t      *testing.T
	tr     *mem.Network
	place  *sion.EventPlace
	sws    []*sion.Switch
	addrs  []string
	logs   []*logBuffer
	links  []*sion.SharedLink
	parent []int
	agent  *sion.Agent
	// agentTr is the agents' transport; nil: tr.
	agentTr transport.Transport

	mu   sync.Mutex
	deps []sion.Deployment // mu; the agents' records
}

// newMnet starts len(parent) switches of a managed place with cfg (its
// name, ontology and routing filled in) and links them; no agent yet.
func newMnet(t *testing.T, cfg sion.PlaceConfig, parent []int) *mnet {
	t.Helper()
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	if cfg.Name == "" {
		cfg.Name = "managed"
	}
	if cfg.Ontology == nil {
		cfg.Ontology = ont1(t)
	}
	cfg.Routing = sion.RouteManaged
	place, err := sion.NewEventPlace(cfg)
	require.NoError(t, err)
	n := &mnet{t: t, tr: tr, place: place, parent: parent, links: make([]*sion.SharedLink, len(parent))}
	for i := range parent {
		n.start(i)
	}
	for i, p := range parent {
		if p >= 0 {
			n.link(i, p)
		}
	}
	return n
}

// start starts switch i, serving at "sw<i>".
func (n *mnet) start(i int) {
	t := n.t
	t.Helper()
	logs := &logBuffer{}
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: fmt.Sprintf("sw%d", i), Place: n.place, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	l, err := n.tr.Listen(fmt.Sprintf("sw%d", i))
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- sw.Serve(context.Background(), l) }()
	require.Eventually(t, func() bool { return sw.State() == sion.Active }, 10*time.Second, time.Millisecond)
	t.Cleanup(func() {
		require.NoError(t, sw.Close())
		require.NoError(t, <-served)
	})
	n.sws = append(n.sws, sw)
	n.addrs = append(n.addrs, l.Addr().String())
	n.logs = append(n.logs, logs)
}

// link links switch child to switch parent.
func (n *mnet) link(child, parent int) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sl, err := n.sws[child].Link(ctx, n.tr, n.addrs[parent], sion.LinkConfig{RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond, ProbeHops: -1})
	require.NoError(n.t, err, "link sw%d to sw%d", child, parent)
	n.links[child] = sl
	n.parent[child] = parent
}

// startAgent starts an agent named name connected to every switch,
// closed at cleanup, and makes it n.agent.
func (n *mnet) startAgent(name string) *sion.Agent {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr := n.agentTr
	if tr == nil {
		tr = n.tr
	}
	a, err := sion.StartAgent(ctx, sion.AgentConfig{Name: name, Place: n.place, Transport: tr, Switches: n.addrs, OnDeployment: func(d sion.Deployment) {
		n.mu.Lock()
		n.deps = append(n.deps, d)
		n.mu.Unlock()
	}})
	require.NoError(n.t, err)
	n.t.Cleanup(func() {
		require.NoError(n.t, a.Close())
		if n.t.Failed() {
			for _, d := range n.deployments() {
				n.t.Logf("deployment %+v", d)
			}
		}
	})
	n.agent = a
	return a
}

// laggyTransport delays each frame sent over the connections it dials
// by up to max, at random, keeping their order: an agent's out-of-band
// signalling that is slow and uneven, which S2's bleeders make harmless.
type laggyTransport struct {
	transport.Transport
	max time.Duration
}

func (l laggyTransport) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	c, err := l.Transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &laggyConn{Conn: c, max: l.max}, nil
}

type laggyConn struct {
	transport.Conn
	max time.Duration
}

func (c *laggyConn) Send(ctx context.Context, frame []byte) error {
	t := time.NewTimer(rand.N(c.max))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.Conn.Send(ctx, frame)
}

// constraints returns what every switch forwards over each of its
// links, by direction ("swX→swY"), read from the switches.
func (n *mnet) constraints() map[string][]string {
	out := map[string][]string{}
	for _, sw := range n.sws {
		for peer, fs := range sw.Constraints() {
			out[sw.Name()+"→"+peer] = fs
		}
	}
	return out
}

// settled waits until the agent's constraints are the switches'.
func (n *mnet) settled() {
	n.t.Helper()
	require.Eventually(n.t, func() bool { return maps.EqualFunc(n.agent.Constraints(), n.constraints(), slices.Equal) },
		20*time.Second, time.Millisecond, "the agent's constraints %v, the switches' %v", n.agent.Constraints(), n.constraints())
}

// settledAt waits until the agent's constraints and the switches' are
// want.
func (n *mnet) settledAt(want map[string][]string) {
	n.t.Helper()
	n.settledTo(want, want)
}

// settledTo waits until the agent's constraints are agent and the
// switches' are switches.
func (n *mnet) settledTo(agent, switches map[string][]string) {
	n.t.Helper()
	var atAgent, atSwitches map[string][]string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		atAgent, atSwitches = n.agent.Constraints(), n.constraints()
		if maps.EqualFunc(atAgent, agent, slices.Equal) && maps.EqualFunc(atSwitches, switches, slices.Equal) {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	n.t.Fatalf("want %v at the agent and %v at the switches; they have %v and %v", agent, switches, atAgent, atSwitches)
}

// flush waits until every event published at switches at so far has
// reached every subscription.
func (n *mnet) flush(at ...int) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, i := range at {
		require.NoError(n.t, n.sws[i].Flush(ctx))
	}
}

// deployments returns the agents' records so far.
func (n *mnet) deployments() []sion.Deployment {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.deps)
}

// producer publishes events numbered 1, 2, … (seq) from its own
// goroutine until stopped; started is the number of the last Publish
// that began, done of the last that returned.
type producer struct {
	sess    *sion.Session
	origin  string
	event   func(seq int) *sion.Event
	started atomic.Int64
	done    atomic.Int64
	quit    chan struct{}
	wg      sync.WaitGroup
	err     atomic.Pointer[error]
}

func (p *producer) run() {
	p.quit = make(chan struct{})
	p.wg.Go(func() {
		for seq := 1; ; seq++ {
			select {
			case <-p.quit:
				return
			default:
			}
			p.started.Store(int64(seq))
			if err := p.sess.Publish(context.Background(), p.event(seq)); err != nil {
				p.err.Store(&err)
				return
			}
			p.done.Store(int64(seq))
			time.Sleep(100 * time.Microsecond) // pacing, so that no queue fills
		}
	})
}

func (p *producer) stop() int {
	close(p.quit)
	p.wg.Wait()
	return int(p.done.Load())
}

// oracle returns the filter.BruteForce of one filter, for reference.
func oracleOf(t *testing.T, o *sion.EventPlace, src string) *filter.BruteForce {
	t.Helper()
	bf := filter.NewBruteForce(o.Ontology())
	require.NoError(t, bf.Add(1, filter.MustCompile(src)))
	return bf
}

func matchesOracle(bf *filter.BruteForce, ev *sion.Event) bool {
	hit := false
	bf.Match(ev, func(uint64, float64) { hit = true })
	return hit
}

// seqOf returns a delivery's producer (by origin) and sequence number.
func seqOf(t *testing.T, prods []*producer, d sion.Delivery) (int, int) {
	t.Helper()
	for i, p := range prods {
		if d.Event.Control.Origin == p.origin {
			for _, name := range []string{"n", "seq"} {
				if v, ok := d.Event.Value(name); ok {
					return i, int(v.Int())
				}
			}
		}
	}
	t.Fatalf("a delivery from nowhere: %v from %s", d.Event.Type, d.Event.Control.Origin)
	return 0, 0
}

// checkDeliveries checks what sub received: per producer p, in order,
// no duplicate, each event its filter matches; and every matching event
// numbered above from[p] and up to to[p] is there.
func checkDeliveries(t *testing.T, name string, prods []*producer, bf *filter.BruteForce, got []sion.Delivery, from, to []int) bool {
	t.Helper()
	seen := make([]map[int]bool, len(prods))
	last := make([]int, len(prods))
	ok := true
	for i := range seen {
		seen[i] = map[int]bool{}
	}
	for _, d := range got {
		p, seq := seqOf(t, prods, d)
		ok = assert.Greater(t, seq, last[p], "%s: producer %d's events out of order or twice", name, p) && ok
		last[p] = seq
		seen[p][seq] = true
		ok = assert.True(t, matchesOracle(bf, d.Event), "%s: got %v, which its filter does not match", name, d.Event) && ok
	}
	for p, prod := range prods {
		var missing []int
		for seq := from[p] + 1; seq <= to[p]; seq++ {
			if !seen[p][seq] && matchesOracle(bf, prod.event(seq)) {
				missing = append(missing, seq)
			}
		}
		ok = assert.Empty(t, missing, "%s: events of producer %d published after Subscribe returned and not received (from %d to %d)", name, p, from[p], to[p]) && ok
	}
	return ok
}

// TestManagedContractDuringDeployments is S2's point: while deployments
// run — consumers subscribing and cancelling over and over, so that the
// constraints on the paths they share widen and narrow, to no constraint
// ({type ⊑ *}) and back — events keep flowing from three producers, and
// no consumer with a contract misses one: each consumer subscribed
// before gets every event of its filter, in order, once; each new
// subscription gets every matching event published after its Subscribe
// returned.
func TestManagedContractDuringDeployments(t *testing.T) {
	//        0
	//      /   \
	//     1     2
	//    / \   / \
	//   3   4 5   6
	//   |     |   |
	//   7     8   9
	n := newMnet(t, sion.PlaceConfig{}, []int{-1, 0, 0, 1, 1, 2, 2, 3, 5, 6})
	n.agentTr = laggyTransport{Transport: n.tr, max: 5 * time.Millisecond}
	n.startAgent("agent")
	ctx := context.Background()
	prods := []*producer{
		{origin: "sw7", event: func(seq int) *sion.Event {
			return &sion.Event{Type: "Reading", Attrs: attrs("n", seq, "tier", 0)}
		}},
		{origin: "sw9", event: func(seq int) *sion.Event {
			return &sion.Event{Type: "TempReading", Attrs: attrs("n", seq, "tier", 1, "celsius", float64(seq%40))}
		}},
		{origin: "sw4", event: func(seq int) *sion.Event {
			return &sion.Event{Type: "Notice", Attrs: attrs("seq", seq, "zone", []string{"hall", "yard"}[seq%2])}
		}},
	}
	prodAt := []int{7, 9, 4}
	for i, p := range prods {
		p.sess = open(t, n.sws[prodAt[i]], fmt.Sprintf("producer%d", i))
		require.NoError(t, p.sess.Advertise(ctx, sion.Advertisement{Type: p.event(1).Type}))
	}
	type consumer struct {
		at  int
		src string
		sub *sion.Subscription
	}
	before := []*consumer{
		{at: 8, src: `{type ⊑ Reading; tier == 0}`},
		{at: 0, src: `{type ⊑ TempReading; celsius > 20}`},
		{at: 6, src: `{type ⊑ Notice; zone == "hall"}`},
		{at: 3, src: `{type ⊑ Notice}`},
		{at: 9, src: `{type ⊑ Reading; n > 10}`},
	}
	for i, c := range before {
		c.sub = subscribe(t, open(t, n.sws[c.at], fmt.Sprintf("before%d", i)), c.src, sion.WithQueue(sion.MaxQueue))
	}
	n.settled()
	for _, p := range prods {
		p.run()
	}

	pool := []string{
		`{type ⊑ *}`, `{type ⊑ Event}`, `{type ⊑ Alarm}`, `{type ⊑ Notice; zone == "yard"}`,
		`{type ⊑ Reading; n > 100}`, `{type ⊑ TempReading}`, `{type ⊑ Reading; tier == 1}`, `{type ⊑ *; seq >= 0}`,
	}
	churnAt := []int{1, 5, 8, 0}
	const rounds = 12
	var wg sync.WaitGroup
	for c, at := range churnAt {
		wg.Go(func() {
			sess, err := n.sws[at].Open(ctx, sion.SessionConfig{Name: fmt.Sprintf("churn%d", c)})
			if !assert.NoError(t, err) {
				return
			}
			for r := range rounds {
				src := pool[(c*5+r*3)%len(pool)]
				sub, err := sess.Subscribe(ctx, src, sion.WithQueue(sion.MaxQueue))
				if !assert.NoError(t, err, "churn%d round %d: %s", c, r, src) {
					return
				}
				from := make([]int, len(prods))
				for i, p := range prods {
					from[i] = int(p.started.Load())
				}
				time.Sleep(time.Duration(r%4) * 5 * time.Millisecond) // let some events come
				to := make([]int, len(prods))
				for i, p := range prods {
					to[i] = int(p.done.Load())
				}
				fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				for _, i := range prodAt {
					assert.NoError(t, n.sws[i].Flush(fctx))
				}
				cancel()
				if !checkDeliveries(t, fmt.Sprintf("churn%d round %d %s at sw%d", c, r, src, at), prods, oracleOf(t, n.place, src), queued(sub), from, to) {
					return
				}
				require.NoError(t, sub.Cancel())
			}
		})
	}
	wg.Wait()
	final := make([]int, len(prods))
	for i, p := range prods {
		final[i] = p.stop()
		require.Nil(t, p.err.Load(), "producer %d", i)
		assert.Greater(t, final[i], 50, "producer %d published through the churn", i)
	}
	n.flush(prodAt...)
	zero := make([]int, len(prods))
	for i, c := range before {
		checkDeliveries(t, fmt.Sprintf("before%d %s at sw%d", i, c.src, c.at), prods, oracleOf(t, n.place, c.src), queued(c.sub), zero, final)
	}
	for _, sw := range n.sws {
		assert.Zero(t, sw.Stats().Links.Dropped, "%s dropped events", sw.Name())
		assert.Zero(t, sw.Stats().Dropped, "%s's subscriptions dropped events", sw.Name())
	}
	n.settled()
	// The churn did what it is for: deployments widened a shared path to
	// no constraint and narrowed it again, and granted while others ran.
	widened, narrowed, granted := 0, 0, 0
	for _, d := range n.deployments() {
		for _, f := range d.SetB {
			switch {
			case slices.Contains(f.Constraint, "{type ⊑ *}") && !slices.Contains(f.Old, "{type ⊑ *}"):
				widened++
			case slices.Contains(f.Old, "{type ⊑ *}") && !slices.Contains(f.Constraint, "{type ⊑ *}"):
				narrowed++
			}
		}
		if d.Granted {
			granted += len(d.Requests)
		}
	}
	t.Logf("widened %d narrowed %d granted %d final %v", widened, narrowed, granted, final)
	assert.Positive(t, widened, "a path widened to no constraint")
	assert.Positive(t, narrowed, "a path narrowed from no constraint")
	assert.GreaterOrEqual(t, granted, len(churnAt)*rounds, "requests granted")
}

// TestManagedAdvertiseContract: consumers subscribe first; a producer
// that advertises at a far switch and publishes as soon as Advertise
// returns reaches every consumer with every event (the paths were
// deployed before the grant, though the agent's signalling lags); Publish
// of what was not advertised is refused; the producer's session closing
// withdraws its advertisement, and the constraints narrow to the optimal
// ones again.
func TestManagedAdvertiseContract(t *testing.T) {
	ctx := context.Background()
	// 0 — 1 — 2 — 3 — 4 — 5
	n := newMnet(t, sion.PlaceConfig{}, line(6))
	n.agentTr = laggyTransport{Transport: n.tr, max: 5 * time.Millisecond}
	n.startAgent("agent")
	alarms := open(t, n.sws[0], "alarms")
	require.NoError(t, alarms.Advertise(ctx, sion.Advertisement{Type: "Alarm"}))
	srcs := map[int]string{
		0: `{type ⊑ Reading; n > 3}`,
		1: `{type ⊑ TempReading; celsius > 10}`,
		3: `{type ⊑ TempReading; celsius < 5}`,
		4: `{type ⊑ Alarm}`,
	}
	subs := map[int]*sion.Subscription{}
	for at, src := range srcs {
		subs[at] = subscribe(t, open(t, n.sws[at], fmt.Sprintf("c%d", at)), src, sion.WithQueue(4096))
	}
	before := map[string][]string{"sw0→sw1": {"{type ⊑ *}"}, "sw1→sw2": {"{type ⊑ *}"}, "sw2→sw3": {"{type ⊑ *}"}, "sw3→sw4": {"{type ⊑ *}"}}
	n.settledAt(before)

	p := open(t, n.sws[5], "far")
	err := p.Publish(ctx, &sion.Event{Type: "TempReading", Attrs: attrs("n", 1)})
	require.ErrorIs(t, err, sion.ErrNotAdvertised)
	require.NoError(t, p.Advertise(ctx, sion.Advertisement{Type: "TempReading"}))
	const events = 200
	for k := 1; k <= events; k++ {
		publish(t, p, &sion.Event{Type: "TempReading", Attrs: attrs("n", k, "celsius", float64(k%20))})
	}
	require.ErrorIs(t, p.Publish(ctx, &sion.Event{Type: "Reading"}), sion.ErrNotAdvertised, "a supertype of the advertised type")
	require.ErrorIs(t, p.Publish(ctx, &sion.Event{Type: "Alarm"}), sion.ErrNotAdvertised)
	n.flush(5)
	for at, src := range srcs {
		bf := oracleOf(t, n.place, src)
		var want []int
		for k := 1; k <= events; k++ {
			if matchesOracle(bf, &sion.Event{Type: "TempReading", Attrs: attrs("n", k, "celsius", float64(k%20))}) {
				want = append(want, k)
			}
		}
		var got []int
		for _, d := range queued(subs[at]) {
			got = append(got, int(must(d.Event.Value("n")).Int()))
		}
		assert.Equal(t, want, got, "sw%d %s", at, src)
	}
	// The optimal constraints with the producer: toward the consumers of
	// TempReading its events pass exactly their filters (C at 4 wants
	// Alarm only, and 2 has no consumer).
	with := maps.Clone(before)
	with["sw5→sw4"] = []string{`{type ⊑ Reading; n > 3}`, `{type ⊑ TempReading; celsius < 5}`, `{type ⊑ TempReading; celsius > 10}`}
	with["sw4→sw3"] = with["sw5→sw4"]
	with["sw3→sw2"] = []string{`{type ⊑ Reading; n > 3}`, `{type ⊑ TempReading; celsius > 10}`}
	with["sw2→sw1"] = with["sw3→sw2"]
	with["sw1→sw0"] = []string{`{type ⊑ Reading; n > 3}`}
	n.settledAt(with)

	require.NoError(t, p.Close())
	n.settledAt(before)
	assert.Empty(t, n.sws[5].Constraints(), "nothing leaves the producer's switch")
}

// TestManagedTopologyChange: links of a managed place end and form again
// — a switch moves to another parent, a middle switch leaves (its
// children link to its parent), a middle switch dies and its child links
// elsewhere — and once the agent has redeployed, events flow exactly
// again: the constraints are the optimal ones for the new tree and every
// consumer gets what it wants.
func TestManagedTopologyChange(t *testing.T) {
	ctx := context.Background()
	//   0 — 1 — 2
	//   |
	//   3
	setup := func(t *testing.T) (*mnet, *sion.Session, *sion.Subscription, *sion.Subscription) {
		n := newMnet(t, sion.PlaceConfig{}, []int{-1, 0, 1, 0})
		n.startAgent("agent")
		p := open(t, n.sws[0], "p")
		require.NoError(t, p.Advertise(ctx, sion.Advertisement{Type: "Reading"}))
		far := subscribe(t, open(t, n.sws[2], "far"), `{type ⊑ TempReading}`, sion.WithQueue(4096))
		side := subscribe(t, open(t, n.sws[3], "side"), `{type ⊑ Reading; n > 5}`, sion.WithQueue(4096))
		n.settledAt(map[string][]string{
			"sw0→sw1": {"{type ⊑ TempReading}"}, "sw1→sw2": {"{type ⊑ TempReading}"},
			"sw0→sw3": {"{type ⊑ Reading; n > 5}"},
		})
		return n, p, far, side
	}
	check := func(t *testing.T, n *mnet, p *sion.Session, far, side *sion.Subscription) {
		t.Helper()
		// Switch.Constraints shows a proxy filter as it goes into the
		// switch's index: wait until probes pass them all — one that only
		// {type ⊑ TempReading} lets through toward far (n > 5 would let
		// n = 100 through an old constraint), one for side.
		farSeen, sideSeen := false, false
		require.Eventually(t, func() bool {
			publish(t, p, &sion.Event{Type: "TempReading", Attrs: attrs("n", 0)})
			publish(t, p, &sion.Event{Type: "TempReading", Attrs: attrs("n", 100)})
			n.flush(0)
			for _, d := range queued(far) {
				farSeen = farSeen || must(d.Event.Value("n")).Int() == 0
			}
			sideSeen = sideSeen || len(queued(side)) > 0
			return farSeen && sideSeen
		}, 10*time.Second, time.Millisecond)
		queued(far)
		queued(side)
		for k := range 10 {
			publish(t, p, &sion.Event{Type: "Reading", Attrs: attrs("n", k)})
			publish(t, p, &sion.Event{Type: "TempReading", Attrs: attrs("n", k)})
		}
		n.flush(0)
		assert.Len(t, queued(far), 10, "far gets every TempReading")
		assert.Len(t, queued(side), 8, "side gets Reading and TempReading with n > 5")
	}

	t.Run("moves", func(t *testing.T) {
		n, p, far, side := setup(t)
		check(t, n, p, far, side)
		require.NoError(t, n.links[2].Close())
		n.link(2, 3)
		n.settledAt(map[string][]string{
			"sw0→sw3": {"{type ⊑ Reading; n > 5}", "{type ⊑ TempReading}"}, "sw3→sw2": {"{type ⊑ TempReading}"},
		})
		check(t, n, p, far, side)
	})

	t.Run("middle leaves", func(t *testing.T) {
		n, p, far, side := setup(t)
		require.NoError(t, n.sws[1].Leave(ctx))
		n.settledAt(map[string][]string{
			"sw0→sw2": {"{type ⊑ TempReading}"}, "sw0→sw3": {"{type ⊑ Reading; n > 5}"},
		})
		check(t, n, p, far, side)
	})

	t.Run("middle dies", func(t *testing.T) {
		n, p, far, side := setup(t)
		require.NoError(t, n.sws[1].Close())
		require.NoError(t, n.links[2].Close())
		n.link(2, 3)
		n.settledAt(map[string][]string{
			"sw0→sw3": {"{type ⊑ Reading; n > 5}", "{type ⊑ TempReading}"}, "sw3→sw2": {"{type ⊑ TempReading}"},
		})
		check(t, n, p, far, side)
		// A new subscription is granted over the new paths.
		sub := subscribe(t, open(t, n.sws[2], "late"), `{type ⊑ Reading; n < 2}`)
		publish(t, p, &sion.Event{Type: "Reading", Attrs: attrs("n", 1)})
		n.flush(0)
		assert.Len(t, queued(sub), 1)
	})
}

// TestManagedAdvertisementNarrowsNoConstraint: a direction with no
// constraint — everything its side makes is wanted beyond it — gets one
// when a producer of something else appears on its side, so that the new
// events do not cross where nobody wants them; and loses it again when
// that producer goes.
func TestManagedAdvertisementNarrowsNoConstraint(t *testing.T) {
	ctx := context.Background()
	// 0 — 1 — 2, Reading from 0 to 2.
	n := newMnet(t, sion.PlaceConfig{}, line(3))
	n.startAgent("agent")
	p := open(t, n.sws[0], "p")
	require.NoError(t, p.Advertise(ctx, sion.Advertisement{Type: "Reading"}))
	sub := subscribe(t, open(t, n.sws[2], "c"), `{type ⊑ Reading}`, sion.WithQueue(4096))
	all := map[string][]string{"sw0→sw1": {"{type ⊑ *}"}, "sw1→sw2": {"{type ⊑ *}"}}
	n.settledAt(all)

	alarms := open(t, n.sws[0], "alarms")
	require.NoError(t, alarms.Advertise(ctx, sion.Advertisement{Type: "Alarm"}))
	n.settledAt(map[string][]string{"sw0→sw1": {"{type ⊑ Reading}"}, "sw1→sw2": {"{type ⊑ Reading}"}})
	sentBefore := n.sws[0].Stats().Links.EventsSent
	publish(t, alarms, &sion.Event{Type: "Alarm"})
	publish(t, p, &sion.Event{Type: "TempReading"})
	n.flush(0)
	assert.Len(t, queued(sub), 1)
	assert.Equal(t, sentBefore+1, n.sws[0].Stats().Links.EventsSent, "the Alarm stays at sw0")

	require.NoError(t, alarms.Close())
	n.settledAt(all)
}

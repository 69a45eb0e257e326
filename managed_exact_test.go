package sion_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// exactWorkload is what TestManagedExact publishes and subscribes in one
// ontology: the types producers advertise, the filters consumers take,
// and an event of (a subtype of) an advertised type.
type exactWorkload struct {
	ont     func(t *testing.T) *ontology.Ontology
	types   []string
	filters []string
	event   func(rng *rand.Rand, advertised string) *sion.Event
}

// ont1Subtypes are the types of ONT-1 at or below each type.
var ont1Subtypes = map[string][]string{
	"Reading": {"Reading", "TempReading"}, "TempReading": {"TempReading"},
	"Alarm": {"Alarm", "FireAlarm", "KitchenFireAlarm"}, "FireAlarm": {"FireAlarm", "KitchenFireAlarm"},
	"Notice": {"Notice"}, "Changed": {"Changed", "Created"}, "Created": {"Created"},
}

var ont1Workload = exactWorkload{
	ont:   func(t *testing.T) *ontology.Ontology { return ont1(t) },
	types: []string{"Reading", "TempReading", "Alarm", "FireAlarm", "Notice", "Changed", "Created"},
	filters: []string{
		`{type ⊑ Event}`, `{type ⊑ *}`, `{type ⊑ *; n in {1, 2, 3}}`, `{type ⊑ Alarm}`, `{type ⊑ FireAlarm}`,
		`{type ⊑ KitchenFireAlarm}`, `{type ⊑ Reading}`, `{type ⊑ Reading; n >= 5}`, `{type ⊑ Reading; tier == 2}`,
		`{type ⊑ TempReading}`, `{type ⊑ TempReading; celsius > 20}`, `{type ⊑ Notice}`, `{type ⊑ Notice; zone prefix "hall"}`,
		`{type ⊑ Changed; entity == "role"}`, `{type ⊑ Created}`, `{type ⊑ *; entity == "user"}`,
	},
	event: func(rng *rand.Rand, advertised string) *sion.Event {
		sub := ont1Subtypes[advertised]
		typ := sub[rng.IntN(len(sub))]
		switch typ {
		case "Reading":
			return &sion.Event{Type: typ, Attrs: attrs("n", rng.IntN(8), "tier", rng.IntN(3))}
		case "TempReading":
			return &sion.Event{Type: typ, Attrs: attrs("n", rng.IntN(8), "tier", rng.IntN(3), "celsius", float64(rng.IntN(40)))}
		case "Notice":
			return &sion.Event{Type: typ, Attrs: attrs("zone", []string{"hall", "hall.north", "Hall", "yard"}[rng.IntN(4)], "seq", rng.IntN(100))}
		case "Changed", "Created":
			return &sion.Event{Type: typ, Attrs: attrs("entity", []string{"role", "user"}[rng.IntN(2)])}
		}
		return &sion.Event{Type: typ}
	},
}

// bgmSubtypes are the types of overlapOntology at or below each type:
// BGM is-a Music and is-a Seasonal.
var bgmSubtypes = map[string][]string{
	"Media": {"Media", "Music", "Talk", "BGM"}, "Music": {"Music", "BGM"}, "Seasonal": {"Seasonal", "BGM"},
	"BGM": {"BGM"}, "Talk": {"Talk"}, "Weather": {"Weather"},
}

var bgmWorkload = exactWorkload{
	ont:     overlapOntology,
	types:   []string{"Media", "Music", "Seasonal", "Talk", "Weather"},
	filters: []string{`{type ⊑ Media}`, `{type ⊑ Music}`, `{type ⊑ Seasonal}`, `{type ⊑ BGM}`, `{type ⊑ Talk}`, `{type ⊑ Weather}`},
	event: func(rng *rand.Rand, advertised string) *sion.Event {
		sub := bgmSubtypes[advertised]
		return &sion.Event{Type: sub[rng.IntN(len(sub))]}
	},
}

// TestManagedExact: on random trees with random producers (types and
// subtypes of the ontology, multiple inheritance too) and consumers
// (content filters, "*" filters, subtype and supertype filters), some
// of which subscribe and cancel first, the advertisements before the
// subscriptions or among them: once every request is granted the
// agent's constraints are the switches',
// every subscription receives exactly the events its filter matches
// (filter.BruteForce), once each, and an event crosses a link exactly
// when a consumer beyond it wants it (LinkInfo.EventsSent against a
// reference computed from the tree) — the optimal constraints of S2.
func TestManagedExact(t *testing.T) {
	// 0 — 1 — 2 — 3 — 4, by hand.
	small := exactPlan{
		prods: []exactProd{{0, "Reading"}, {4, "Alarm"}, {2, "Changed"}},
		cons: []exactCons{{4, 0, `{type ⊑ TempReading; celsius > 20}`}, {3, 0, `{type ⊑ Reading; n >= 5}`}, {1, 0, `{type ⊑ FireAlarm}`},
			{0, 0, `{type ⊑ *; entity == "user"}`}, {2, 0, `{type ⊑ Alarm}`}, {4, 1, `{type ⊑ Created}`}, {4, 1, `{type ⊑ Reading; tier == 2}`}},
		gone: []exactCons{{3, 9, `{type ⊑ *}`}, {1, 9, `{type ⊑ Event}`}, {4, 0, `{type ⊑ Reading}`}},
	}
	// A star around 0: BGM is-a Music and is-a Seasonal, so consumers of
	// Seasonal want BGM from the producers of Music and of Media.
	bgm := exactPlan{
		prods: []exactProd{{1, "Music"}, {2, "Talk"}, {3, "Media"}},
		cons: []exactCons{{4, 0, `{type ⊑ Seasonal}`}, {5, 0, `{type ⊑ Music}`}, {0, 0, `{type ⊑ BGM}`},
			{3, 0, `{type ⊑ Talk}`}, {2, 0, `{type ⊑ Weather}`}, {1, 0, `{type ⊑ Seasonal}`}},
		gone: []exactCons{{4, 9, `{type ⊑ Media}`}, {0, 9, `{type ⊑ *}`}},
	}
	for _, tc := range []struct {
		name   string
		w      exactWorkload
		parent []int
		plan   *exactPlan
		seed   uint64
		mixed  bool
	}{
		{"line-5", ont1Workload, line(5), &small, 1, false},
		{"line-5/mixed", ont1Workload, line(5), &small, 1, true},
		{"star-6", bgmWorkload, star(6), &bgm, 2, false},
		{"star-6/mixed", bgmWorkload, star(6), &bgm, 2, true},
		{"random-20", ont1Workload, nil, nil, 3, false},
		{"random-20/mixed", ont1Workload, nil, nil, 3, true},
		{"random-20-bis", ont1Workload, nil, nil, 4, false},
		{"random-20-bgm", bgmWorkload, nil, nil, 5, false},
		{"random-20-bgm/mixed", bgmWorkload, nil, nil, 5, true},
		{"random-20-bgm/mixed-bis", bgmWorkload, nil, nil, 11, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tc.seed, 17))
			parent := tc.parent
			if parent == nil {
				parent = randomTree(20, rng)
			}
			plan := tc.plan
			if plan == nil {
				plan = randomPlan(tc.w, len(parent), rng)
			}
			checkManagedExact(t, tc.w, parent, *plan, tc.mixed, rng)
		})
	}
}

// exactPlan places producers (a switch and the type it advertises) and
// consumers (a switch, a session there, a filter); gone are
// subscriptions made and cancelled before those of cons at the same
// switch (whose contracts wait for the agent to have taken the cancels:
// they come over the same connection).
type exactPlan struct {
	prods []exactProd
	cons  []exactCons
	gone  []exactCons
}

type exactProd struct {
	at  int
	typ string
}

type exactCons struct {
	at, session int
	src         string
}

// randomPlan places a producer on about one switch in three and about a
// subscription per switch, at random.
func randomPlan(w exactWorkload, switches int, rng *rand.Rand) *exactPlan {
	p := &exactPlan{}
	for len(p.prods) < max(2, switches/3) {
		p.prods = append(p.prods, exactProd{rng.IntN(switches), w.types[rng.IntN(len(w.types))]})
	}
	for s := 0; len(p.cons) < switches; s++ {
		at := rng.IntN(switches)
		for range 1 + rng.IntN(2) {
			p.cons = append(p.cons, exactCons{at, s, w.filters[rng.IntN(len(w.filters))]})
		}
	}
	for range switches / 2 {
		c := p.cons[rng.IntN(len(p.cons))]
		p.gone = append(p.gone, exactCons{c.at, 1000 + rng.IntN(2), w.filters[rng.IntN(len(w.filters))]})
	}
	return p
}

func checkManagedExact(t *testing.T, w exactWorkload, parent []int, plan exactPlan, mixed bool, rng *rand.Rand) {
	ctx := context.Background()
	n := newMnet(t, sion.PlaceConfig{Ontology: w.ont(t), TTL: 64}, parent)
	n.startAgent("agent")
	type producer struct {
		sess *sion.Session
		at   int
		typ  string
	}
	var prods []producer
	advertise := func(i int) {
		pp := plan.prods[i]
		p := producer{sess: open(t, n.sws[pp.at], fmt.Sprintf("p%d", i)), at: pp.at, typ: pp.typ}
		require.NoError(t, p.sess.Advertise(ctx, sion.Advertisement{Type: p.typ}), "sw%d %s", p.at, p.typ)
		prods = append(prods, p)
	}
	if !mixed {
		for i := range plan.prods {
			advertise(i)
		}
	}
	type consumer struct {
		sub *sion.Subscription
		at  int
		bf  *filter.BruteForce
	}
	var cons []consumer
	sessions := map[[2]int]*sion.Session{}
	subscribeTo := func(c exactCons) *sion.Subscription {
		sess := sessions[[2]int{c.at, c.session}]
		if sess == nil {
			sess = open(t, n.sws[c.at], fmt.Sprintf("c%d", c.session))
			sessions[[2]int{c.at, c.session}] = sess
		}
		sub, err := sess.Subscribe(ctx, c.src, sion.WithQueue(4096))
		require.NoError(t, err, "sw%d %s", c.at, c.src)
		return sub
	}
	var gone []*sion.Subscription
	for _, c := range plan.gone {
		gone = append(gone, subscribeTo(c))
	}
	for _, sub := range gone {
		require.NoError(t, sub.Cancel())
	}
	// In a random order; mixed, the advertisements come among the
	// subscriptions.
	for _, k := range rng.Perm(len(plan.cons) + len(plan.prods)) {
		switch {
		case k < len(plan.cons):
			c := plan.cons[k]
			cons = append(cons, consumer{sub: subscribeTo(c), at: c.at, bf: oracleOf(t, n.place, c.src)})
		case mixed:
			advertise(k - len(plan.cons))
		}
	}
	t.Logf("%d switches, %d producers, %d subscriptions", len(n.sws), len(prods), len(cons))
	n.settled()

	// The tree's distances, for the reference.
	adj := make([][]int, len(parent))
	for c, p := range parent {
		if p >= 0 {
			adj[c], adj[p] = append(adj[c], p), append(adj[p], c)
		}
	}
	dist := make([][]int, len(parent))
	for s := range dist {
		dist[s] = make([]int, len(parent))
		for i := range dist[s] {
			dist[s][i] = -1
		}
		dist[s][s] = 0
		for q := []int{s}; len(q) > 0; q = q[1:] {
			for _, v := range adj[q[0]] {
				if dist[s][v] < 0 {
					dist[s][v] = dist[s][q[0]] + 1
					q = append(q, v)
				}
			}
		}
	}
	sent := func() map[[2]string]uint64 {
		out := map[[2]string]uint64{}
		for _, sw := range n.sws {
			for _, l := range sw.Links() {
				out[[2]string{sw.Name(), l.Peer}] = l.EventsSent
			}
		}
		return out
	}
	before := sent()

	want := make([]map[sion.EventID]bool, len(cons))
	for i := range want {
		want[i] = map[sion.EventID]bool{}
	}
	crossings := map[[2]string]uint64{}
	for k := range 300 {
		p := prods[rng.IntN(len(prods))]
		ev := w.event(rng, p.typ)
		ev.ID = sion.EventID{byte(k), byte(k >> 8), 0xee, byte(rng.Uint32())}
		matched := make([]bool, len(cons))
		for i, c := range cons {
			if matchesOracle(c.bf, ev) {
				matched[i] = true
				want[i][ev.ID] = true
			}
		}
		publish(t, p.sess, ev)
		// It crosses x→y, leading away from its producer, when a consumer
		// on y's side of the link wants it.
		for c, par := range parent {
			if par < 0 {
				continue
			}
			x, y := par, c
			if dist[p.at][x] > dist[p.at][y] {
				x, y = y, x
			}
			for i, con := range cons {
				if matched[i] && dist[con.at][y] < dist[con.at][x] {
					crossings[[2]string{n.sws[x].Name(), n.sws[y].Name()}]++
					break
				}
			}
		}
	}
	for _, p := range prods {
		n.flush(p.at)
	}
	for i, c := range cons {
		got := map[sion.EventID]bool{}
		for _, d := range queued(c.sub) {
			assert.False(t, got[d.Event.ID], "subscription %d (%s at sw%d) got %v twice", i, c.sub.Filter(), c.at, d.Event.ID)
			got[d.Event.ID] = true
		}
		assert.Equal(t, want[i], got, "subscription %d (%s at sw%d)", i, c.sub.Filter(), c.at)
	}
	after := sent()
	crossed, idle := 0, 0
	for k, v := range after {
		assert.Equal(t, crossings[k], v-before[k], "events sent %s→%s", k[0], k[1])
		if crossings[k] > 0 {
			crossed++
		} else {
			idle++
		}
	}
	t.Logf("%d link directions carried events, %d none", crossed, idle)
	n.settled()
}

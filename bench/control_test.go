package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// What each routing mode costs in control and event messages (S1 routing
// modes): a tree of switches over transport/mem, subscriptions with
// varied filters at random switches, then events published at random
// switches. Counted from Switch.Links:
//
//   - ctl-msgs/sub: control events (registers, acknowledgements,
//     releases) sent over all links from before the first Subscribe to
//     after the last, divided by the number of subscriptions;
//   - event-msgs/event: data events sent over all links, divided by the
//     number of events;
//   - needed-msgs/event: the link crossings an event must make — the
//     links of the smallest subtree joining its publisher's switch with
//     the switches where a subscription matches it (from a brute-force
//     match of the same filters);
//   - wasted-frac: the share of the link crossings made that are not
//     needed, i.e. that lead to no matching subscriber.
//
// Flooding (RouteUnconditional) propagates no filters — its only control
// traffic is a register and its acknowledgement each way per link when
// the link comes up (ctl-msgs/links)
// — and sends every event over every link.

// ctlScenario is one run's shape.
type ctlScenario struct {
	switches, subs, events int
	seed                   uint64
}

// ctlResult is what one run measured.
type ctlResult struct {
	linkCtl    uint64 // control events sent while the links came up
	subCtl     uint64 // control events sent by the subscriptions
	eventMsgs  uint64 // data events sent over links
	neededMsgs uint64 // link crossings needed (see above)
	deliveries int    // (subscription, event) deliveries
}

var ctlOnt = sync.OnceValues(func() (*ontology.Ontology, error) {
	vocab := []ontology.Attribute{
		{Name: "n", Kind: ontology.KindInt}, {Name: "zone", Kind: ontology.KindString}, {Name: "seq", Kind: ontology.KindInt},
	}
	return ontology.New([]ontology.TypeDef{
		{Name: "Reading", Attributes: vocab},
		{Name: "TempReading", Parents: []string{"Reading"}},
		{Name: "HumidityReading", Parents: []string{"Reading"}},
		{Name: "PressureReading", Parents: []string{"Reading"}},
		{Name: "Alarm", Attributes: vocab},
		{Name: "FireAlarm", Parents: []string{"Alarm"}},
		{Name: "SmokeAlarm", Parents: []string{"Alarm"}},
		{Name: "Notice", Attributes: vocab},
	})
})

var (
	ctlTypes  = []string{"Reading", "TempReading", "HumidityReading", "PressureReading", "Alarm", "FireAlarm", "SmokeAlarm", "Notice"}
	ctlLeaves = []string{"TempReading", "HumidityReading", "PressureReading", "FireAlarm", "SmokeAlarm", "Notice"}
)

// ctlFilter draws a subscription's filter: an event type (a leaf, or
// one of the two parents) and one or two predicates on zone (10 values)
// and n (0…99), so that each filter matches a few percent of the events
// of its type.
func ctlFilter(rng *rand.Rand) string {
	typ := ctlTypes[rng.IntN(len(ctlTypes))]
	preds := []string{}
	switch rng.IntN(4) {
	case 0:
		preds = append(preds, fmt.Sprintf(`zone == "z%d"`, rng.IntN(10)))
	case 1:
		preds = append(preds, fmt.Sprintf(`n >= %d`, 80+rng.IntN(20)))
	case 2:
		lo := rng.IntN(90)
		preds = append(preds, fmt.Sprintf(`n in [%d, %d]`, lo, lo+9))
	default:
		preds = append(preds, fmt.Sprintf(`zone in {"z%d", "z%d"}`, rng.IntN(10), rng.IntN(10)),
			fmt.Sprintf(`n < %d`, 10+rng.IntN(40)))
	}
	f := "{type ⊑ " + typ
	for _, p := range preds {
		f += "; " + p
	}
	return f + "}"
}

// ctlEvent draws event seq: a leaf type, n uniform in 0…99, zone uniform
// over 10 values.
func ctlEvent(rng *rand.Rand, seq int) *sion.Event {
	return &sion.Event{Type: ctlLeaves[rng.IntN(len(ctlLeaves))], Attrs: []ontology.Attr{
		{Name: "n", Value: ontology.Int(int64(rng.IntN(100)))},
		{Name: "seq", Value: ontology.Int(int64(seq))},
		{Name: "zone", Value: ontology.String(fmt.Sprintf("z%d", rng.IntN(10)))},
	}}
}

// runControl builds the tree for sc under mode, subscribes, publishes,
// checks every delivery against a brute-force match, and counts.
// Everything it starts is closed when it returns.
func runControl(tb testing.TB, sc ctlScenario, mode sion.Routing) ctlResult {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ont, err := ctlOnt()
	require.NoError(tb, err)
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "ctl", Ontology: ont, Routing: mode})
	require.NoError(tb, err)
	network, err := mem.NewNetwork(mem.Config{})
	require.NoError(tb, err)

	// The same tree, placements, filters and events for every mode.
	rng := rand.New(rand.NewPCG(sc.seed, 1))
	parent := make([]int, sc.switches)
	parent[0] = -1
	for i := 1; i < sc.switches; i++ {
		parent[i] = rng.IntN(i)
	}
	sws := make([]*sion.Switch, sc.switches)
	var served sync.WaitGroup
	defer func() {
		for i := len(sws) - 1; i >= 0; i-- {
			if sws[i] != nil {
				require.NoError(tb, sws[i].Close())
			}
		}
		served.Wait()
	}()
	for i := range sws {
		sw, err := sion.NewSwitch(sion.SwitchConfig{Name: fmt.Sprint("sw", i), Place: place})
		require.NoError(tb, err)
		sws[i] = sw
		l, err := network.Listen(fmt.Sprint("sw", i))
		require.NoError(tb, err)
		served.Go(func() { sw.Serve(ctx, l) })
	}
	for i := 1; i < sc.switches; i++ {
		_, err := sws[i].Link(ctx, network, fmt.Sprint("sw", parent[i]), sion.LinkConfig{ProbeHops: -1})
		require.NoError(tb, err)
	}
	counts := func() (ctl, events uint64) {
		for _, sw := range sws {
			for _, l := range sw.Links() {
				require.Zero(tb, l.Dropped+l.Expired+l.Duplicates+l.Refused, "%s → %s: %+v", sw.Name(), l.Peer, l)
				ctl += l.ControlSent
				events += l.EventsSent
			}
		}
		return ctl, events
	}

	var res ctlResult
	res.linkCtl, _ = counts()
	sessions := make([]*sion.Session, sc.switches)
	for i, sw := range sws {
		sessions[i], err = sw.Open(ctx, sion.SessionConfig{Name: "app"})
		require.NoError(tb, err)
	}
	oracle := filter.NewBruteForce(ont)
	at := make([]int, sc.subs) // subscription k is at switch at[k]
	var mu sync.Mutex
	got := map[[2]int]int{} // (subscription, event seq) → deliveries
	for k := range sc.subs {
		at[k] = rng.IntN(sc.switches)
		src := ctlFilter(rng)
		require.NoError(tb, oracle.Add(uint64(k), filter.MustCompile(src)))
		_, err := sessions[at[k]].Subscribe(ctx, src, sion.WithQueue(4096), sion.WithOverflow(sion.Block),
			sion.WithHandler(func(d sion.Delivery) {
				seq, _ := d.Event.Value("seq")
				mu.Lock()
				got[[2]int{k, int(seq.Int())}]++
				mu.Unlock()
			}))
		require.NoError(tb, err)
	}
	ctl, _ := counts()
	res.subCtl = ctl - res.linkCtl

	erng := rand.New(rand.NewPCG(sc.seed, 2))
	want := map[[2]int]int{}
	for seq := range sc.events {
		from := erng.IntN(sc.switches)
		ev := ctlEvent(erng, seq)
		marked := make([]bool, sc.switches) // switches the event must reach
		marked[from] = true
		oracle.Match(ev, func(id uint64, _ float64) {
			want[[2]int{int(id), seq}] = 1
			marked[at[id]] = true
		})
		res.neededMsgs += uint64(steinerEdges(parent, marked))
		require.NoError(tb, sessions[from].Publish(ctx, ev))
	}
	for _, sw := range sws {
		require.NoError(tb, sw.Flush(ctx))
	}
	for i := range sws { // the last handlers run after the queues are filled
		require.NoError(tb, sessions[i].Drain(ctx))
	}
	_, res.eventMsgs = counts()
	mu.Lock()
	defer mu.Unlock()
	require.Equal(tb, want, got, "each subscription received exactly the events its filter matches, once")
	res.deliveries = len(got)
	return res
}

// steinerEdges returns the number of links of the smallest subtree of
// the tree parent that joins the marked switches: a link is in it when
// marked switches lie on both of its sides.
func steinerEdges(parent []int, marked []bool) int {
	below := make([]int, len(parent)) // marked switches in the subtree of i
	total := 0
	for i, m := range marked {
		if m {
			total++
			for j := i; j >= 0; j = parent[j] {
				below[j]++
			}
		}
	}
	n := 0
	for i := range parent {
		if parent[i] >= 0 && below[i] > 0 && below[i] < total {
			n++
		}
	}
	return n
}

var ctlModes = []sion.Routing{sion.RouteByFilter, sion.RouteByEventType, sion.RouteUnconditional}

func BenchmarkControlMessages(b *testing.B) {
	for _, subs := range []int{10, 100, 1000} {
		for _, mode := range ctlModes {
			benchControl(b, ctlScenario{switches: 10, subs: subs, events: 1000, seed: 1}, mode)
		}
	}
}

func benchControl(b *testing.B, sc ctlScenario, mode sion.Routing) {
	b.Run(fmt.Sprintf("subs=%d/mode=%v", sc.subs, mode), func(b *testing.B) {
		b.ReportAllocs()
		var res ctlResult
		for b.Loop() {
			res = runControl(b, sc, mode)
		}
		b.ReportMetric(float64(res.linkCtl), "ctl-msgs/links")
		b.ReportMetric(float64(res.subCtl)/float64(sc.subs), "ctl-msgs/sub")
		b.ReportMetric(float64(res.eventMsgs)/float64(sc.events), "event-msgs/event")
		b.ReportMetric(float64(res.neededMsgs)/float64(sc.events), "needed-msgs/event")
		b.ReportMetric(float64(res.eventMsgs-res.neededMsgs)/float64(res.eventMsgs), "wasted-frac")
		b.ReportMetric(float64(res.deliveries)/float64(sc.events), "deliveries/event")
	})
}

// TestControlMessages runs the scenario of BenchmarkControlMessages at a
// smaller size and checks what the modes promise: routing by filter
// sends an event only where a subscriber wants it; flooding sends no
// control events per subscription and every event over every link;
// routing by event type lies in between.
func TestControlMessages(t *testing.T) {
	sc := ctlScenario{switches: 8, subs: 30, events: 200, seed: 3}
	links := uint64(sc.switches - 1)
	res := map[sion.Routing]ctlResult{}
	for _, mode := range ctlModes {
		res[mode] = runControl(t, sc, mode)
	}
	byFilter, byType, flood := res[sion.RouteByFilter], res[sion.RouteByEventType], res[sion.RouteUnconditional]
	assert.Equal(t, byFilter.neededMsgs, byFilter.eventMsgs, "by filter: no crossing is wasted")
	assert.LessOrEqual(t, byFilter.subCtl, uint64(sc.subs)*2*links, "by filter: at most a register and an acknowledgement per link")
	assert.Less(t, byType.subCtl, byFilter.subCtl, "by event type: fewer distinct keys than filters")
	assert.Zero(t, flood.subCtl, "flooding propagates no filters")
	assert.Equal(t, 4*links, flood.linkCtl-byFilter.linkCtl, "flooding: a register and its acknowledgement each way per link at link-up")
	assert.Equal(t, uint64(sc.events)*links, flood.eventMsgs, "flooding: every event over every link")
	assert.True(t, slices.IsSorted([]uint64{byFilter.eventMsgs, byType.eventMsgs, flood.eventMsgs}), "%+v", res)
	for mode, r := range res {
		t.Logf("%v: %+v", mode, r)
		assert.Equal(t, byFilter.deliveries, r.deliveries)
		assert.Equal(t, byFilter.neededMsgs, r.neededMsgs)
	}
}

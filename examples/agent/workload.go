package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/examples/internal/usgs"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// The workload every mode runs, drawn once from the seed (each part from
// a random stream of its own, so that -subs does not change the tree):
//
// The tree. Switch 0 is the root; each switch i > 0 requests its shared
// link to a uniformly random earlier switch (a random recursive tree:
// depth about ln n on average, e·ln n at most, as n grows). The place's
// TTL is the tree's diameter, or DefaultTTL if that is larger, so that
// every filter and every event can reach every switch: S1 with a TTL
// shorter than the tree would keep some events from consumers that the
// reference says match them.
//
// Producers. The week's features are dealt to the producers by seismic
// network (properties.net: 14 codes, sorted by name and dealt
// round-robin): a producer is one network's — or a few networks' — feed,
// at a random switch of its own. Each advertises (Session.Advertise)
// exactly the event types of its features before the subscriptions are
// made, and publishes its features in the feed's order.
//
// Consumers. Sessions at random switches (a switch may hold several, a
// producer's switch too), each with 2 to 4 subscriptions (the last one
// with what remains). Each filter is one of a few shapes, with its
// values taken from a feature of the week drawn at random — a magnitude range, a region (the end of the
// feature's place) alone or with a lower magnitude bound, a depth range,
// the feature's type or its parent with a magnitude bound, "stronger
// than this one anywhere" — or one of the examples' own subscribers
// (examples/internal/usgs). Values are rounded (magnitudes to halves or
// wholes, depths to 5 km), so that consumers share filters and some
// filters cover others, as real interest does.
//
// The reference. filter.BruteForce — every filter evaluated against every
// event with Filter.Eval, types by the ontology — says which events each
// subscription must receive.

// workload is what every mode runs.
type workload struct {
	o         *ontology.Ontology
	n         int
	parent    []int   // parent[i] is the switch i links to; -1 for the root
	adj       [][]int // the tree's neighbours of each switch
	depth     int     // the tree's depth (root at 0)
	diameter  int     // the tree's diameter, in links
	ttl       int     // the place's TTL
	producers []producer
	events    []*sion.Event // in publish order
	from      []int         // events[i] is published by producers[from[i]]
	consumers []consumer
	subs      []subSpec // in subscription order
	want      [][]int   // want[j]: the indexes of the events subs[j] must receive, ascending
	wanted    int       // the sum of len(want[j])
}

// producer is a session that publishes one or more networks' features at
// switch at.
type producer struct {
	at    int
	codes []string // seismic network codes
	types []string // the event types of its features: what it advertises
}

// consumer is a session at switch at holding subscriptions subs (indexes
// into workload.subs).
type consumer struct {
	at   int
	subs []int
}

// subSpec is one subscription of a consumer.
type subSpec struct {
	consumer int
	at       int    // the consumer's switch
	src      string // the filter as written
	key      string // its canonical form (filter.Filter.String): equal keys share a route
}

// feature is one feature of the week read as an event, with its network
// code.
type feature struct {
	ev  *sion.Event
	net string
}

// loadOntology loads the hazards ontology of examples/internal/usgs.
func loadOntology() (*ontology.Ontology, error) {
	return ontology.LoadJSON(bytes.NewReader(usgs.Hazards), "hazards.json")
}

// readWeek reads every feature of the USGS week as an event.
func readWeek(o *ontology.Ontology) ([]feature, error) {
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "usgs", Ontology: o})
	if err != nil {
		return nil, err
	}
	reader, err := place.NewJSONReader(usgs.Fields)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Features []json.RawMessage `json:"features"`
	}
	if err := json.Unmarshal(usgs.Week, &doc); err != nil {
		return nil, err
	}
	out := make([]feature, 0, len(doc.Features))
	for i, raw := range doc.Features {
		var f struct {
			Properties struct {
				Net string `json:"net"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			return nil, fmt.Errorf("feature %d: %w", i, err)
		}
		ev, err := reader.Read(raw)
		if err != nil {
			return nil, fmt.Errorf("feature %d: %w", i, err)
		}
		out = append(out, feature{ev: ev, net: f.Properties.Net})
	}
	return out, nil
}

// workloadConfig sizes a workload.
type workloadConfig struct {
	switches  int    // switches in the tree, at least 2
	producers int    // producer sessions, each at a switch of its own
	subs      int    // subscriptions in all
	events    int    // events published: a seeded sample of the week, in its order; 0 or more than the week: all of it
	seed      uint64 // seed of every random choice
}

// newWorkload draws the workload of cfg.
func newWorkload(cfg workloadConfig) (*workload, error) {
	switch {
	case cfg.switches < 2:
		return nil, fmt.Errorf("agent: %d switches, want at least 2", cfg.switches)
	case cfg.producers < 1 || cfg.producers > cfg.switches:
		return nil, fmt.Errorf("agent: %d producers, want 1 to the number of switches", cfg.producers)
	case cfg.subs < 1:
		return nil, fmt.Errorf("agent: %d subscriptions, want at least 1", cfg.subs)
	case cfg.events < 0:
		return nil, fmt.Errorf("agent: %d events, want 0 (the whole week) or more", cfg.events)
	}
	o, err := loadOntology()
	if err != nil {
		return nil, err
	}
	week, err := readWeek(o)
	if err != nil {
		return nil, err
	}
	w := &workload{o: o, n: cfg.switches}
	w.tree(rand.New(rand.NewPCG(cfg.seed, 1)))
	w.ttl = max(sion.DefaultTTL, w.diameter)

	// The sample, in the feed's order.
	if cfg.events > 0 && cfg.events < len(week) {
		idx := rand.New(rand.NewPCG(cfg.seed, 2)).Perm(len(week))[:cfg.events]
		slices.Sort(idx)
		sample := make([]feature, len(idx))
		for k, i := range idx {
			sample[k] = week[i]
		}
		week = sample
	}

	// Producers: networks dealt round-robin, each producer at a switch of
	// its own.
	rng := rand.New(rand.NewPCG(cfg.seed, 3))
	var codes []string
	for _, f := range week {
		codes = append(codes, f.net)
	}
	slices.Sort(codes)
	codes = slices.Compact(codes)
	at := rng.Perm(cfg.switches)[:cfg.producers]
	w.producers = make([]producer, cfg.producers)
	byCode := map[string]int{}
	for j, c := range codes {
		p := j % cfg.producers
		byCode[c] = p
		w.producers[p].codes = append(w.producers[p].codes, c)
	}
	for p := range w.producers {
		w.producers[p].at = at[p]
	}
	for _, f := range week {
		p := byCode[f.net]
		w.events = append(w.events, f.ev)
		w.from = append(w.from, p)
		if !slices.Contains(w.producers[p].types, f.ev.Type) {
			w.producers[p].types = append(w.producers[p].types, f.ev.Type)
		}
	}
	for p := range w.producers {
		slices.Sort(w.producers[p].types)
	}

	// Consumers and their filters.
	rng = rand.New(rand.NewPCG(cfg.seed, 4))
	for len(w.subs) < cfg.subs {
		c := consumer{at: rng.IntN(cfg.switches)}
		k := min(2+rng.IntN(3), cfg.subs-len(w.subs))
		for range k {
			src := drawFilter(rng, o, week)
			f, err := filter.Compile(src)
			if err != nil {
				return nil, fmt.Errorf("agent: drawn filter %s: %w", src, err)
			}
			c.subs = append(c.subs, len(w.subs))
			w.subs = append(w.subs, subSpec{consumer: len(w.consumers), at: c.at, src: src, key: f.String()})
		}
		w.consumers = append(w.consumers, c)
	}
	return w, w.reference()
}

// tree draws the random recursive tree and measures its depth and
// diameter.
func (w *workload) tree(rng *rand.Rand) {
	w.parent = make([]int, w.n)
	w.adj = make([][]int, w.n)
	w.parent[0] = -1
	for i := 1; i < w.n; i++ {
		p := rng.IntN(i)
		w.parent[i] = p
		w.adj[i] = append(w.adj[i], p)
		w.adj[p] = append(w.adj[p], i)
	}
	d0 := w.distances(0)
	far := 0
	for i, d := range d0 {
		w.depth = max(w.depth, d)
		if d > d0[far] {
			far = i
		}
	}
	w.diameter = slices.Max(w.distances(far))
}

// distances returns the number of links from switch s to each switch.
func (w *workload) distances(s int) []int {
	d := make([]int, w.n)
	for i := range d {
		d[i] = -1
	}
	d[s] = 0
	queue := []int{s}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, v := range w.adj[u] {
			if d[v] < 0 {
				d[v] = d[u] + 1
				queue = append(queue, v)
			}
		}
	}
	return d
}

// reference fills want from filter.BruteForce.
func (w *workload) reference() error {
	bf := filter.NewBruteForce(w.o)
	for j, s := range w.subs {
		if err := bf.Add(uint64(j), filter.MustCompile(s.src)); err != nil {
			return fmt.Errorf("agent: filter %s: %w", s.src, err)
		}
	}
	w.want = make([][]int, len(w.subs))
	for i, ev := range w.events {
		bf.Match(ev, func(id uint64, _ float64) { w.want[id] = append(w.want[id], i) })
	}
	w.wanted = 0
	for _, evs := range w.want {
		w.wanted += len(evs)
	}
	return nil
}

// drawFilter draws one consumer filter from the week's values.
func drawFilter(rng *rand.Rand, o *ontology.Ontology, week []feature) string {
	ev := week[rng.IntN(len(week))].ev
	mag, _ := number(ev, "mag")
	depth, _ := number(ev, "depth")
	place, _ := ev.Value("place")
	region := place.Str()
	if i := strings.LastIndex(region, ", "); i >= 0 {
		region = region[i+2:]
	}
	switch k := rng.IntN(13); {
	case k < 3: // a magnitude range
		lo := math.Floor(mag*2) / 2
		return fmt.Sprintf("{type ⊑ earthquake; mag in [%s, %s)}", num(lo), num(lo+[]float64{0.5, 1, 2}[rng.IntN(3)]))
	case k < 5: // a region
		return fmt.Sprintf("{type ⊑ hazard; place contains %q}", region)
	case k < 7: // a region, above a magnitude
		return fmt.Sprintf("{type ⊑ seismic; place contains %q; mag >= %s}", region, num(math.Floor(mag)))
	case k < 9: // a depth range
		lo := math.Floor(depth/5) * 5
		return fmt.Sprintf("{type ⊑ seismic; depth in [%s, %s)}", num(lo), num(lo+[]float64{5, 20, 100}[rng.IntN(3)]))
	case k < 10: // the type or its parent, above a magnitude
		t := ev.Type
		if et, ok := o.Lookup(t); ok && len(et.Parents) > 0 && rng.IntN(2) == 0 {
			t = et.Parents[0]
		}
		return fmt.Sprintf("{type ⊑ %s; mag >= %s}", quoteType(t), num(math.Floor(mag)))
	case k < 11: // anything stronger than this one
		return fmt.Sprintf("{type ⊑ hazard; mag >= %s}", num(math.Floor(mag)+1))
	default: // one of the examples' subscribers
		return usgs.Subscribers[rng.IntN(len(usgs.Subscribers))].Filter
	}
}

// number returns the numeric attribute name of ev as a float64.
func number(ev *sion.Event, name string) (float64, bool) {
	v, ok := ev.Value(name)
	if !ok {
		return 0, false
	}
	switch v.Kind() {
	case ontology.KindFloat:
		return v.Float(), true
	case ontology.KindInt:
		return float64(v.Int()), true
	}
	return 0, false
}

// num writes x for a filter: the shortest decimal that reads back as x.
func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// quoteType writes an event type's name for a filter: quoted when it is
// not a bare word ("quarry blast").
func quoteType(t string) string {
	if strings.ContainsAny(t, " \t") {
		return strconv.Quote(t)
	}
	return t
}

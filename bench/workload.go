// Package bench generates the matcher workloads that sion's benchmarks and
// correctness checks run: the standard W-INT and W-SPARSE workloads of the
// content-based matching literature (REIN, HEM, BEGen) and deltas that
// exercise what sion adds to them (event type trees, prefix predicates,
// partial and weighted matching, JSON payload paths).
//
// Every workload is deterministic: a Workload is made from a Config with a
// Seed, and Filters(n) and Events(k) draw from two separate random streams
// derived from it, so the first n filters of Filters(m), m ≥ n, are the
// filters of Filters(n), and events do not depend on how many filters were
// drawn. See README.md for the parameters and the measured figures.
package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// Workload makes the filters and events of one workload. A Workload is
// immutable after its constructor returns and safe for concurrent use;
// each call to Specs, Filters or Events starts its random stream afresh.
type Workload struct {
	// Name is the workload's name as the README and benchmarks write it,
	// such as "W-INT".
	Name string
	// Ontology holds the event types and attributes the filters and
	// events use.
	Ontology *ontology.Ontology

	seed  uint64
	spec  func(r *rand.Rand) filter.Spec
	event func(r *rand.Rand) *filter.BasicEvent
	attrs []string // attribute names by index (rank, for Zipf draws)
}

// The two random streams of a workload.
const (
	streamFilters = 1
	streamEvents  = 2
)

// Specs returns the first n filter specs of the workload.
func (w *Workload) Specs(n int) []filter.Spec {
	r := rand.New(rand.NewPCG(w.seed, streamFilters))
	out := make([]filter.Spec, n)
	for i := range out {
		out[i] = w.spec(r)
	}
	return out
}

// Filters returns the first n filters of the workload, built with
// filter.Build. It keeps no spec, so the memory it retains is that of the
// *Filter values and the slice.
func (w *Workload) Filters(n int) ([]*filter.Filter, error) {
	r := rand.New(rand.NewPCG(w.seed, streamFilters))
	out := make([]*filter.Filter, n)
	for i := range out {
		f, err := filter.Build(w.spec(r))
		if err != nil {
			return nil, fmt.Errorf("bench: %s filter %d: %w", w.Name, i, err)
		}
		out[i] = f
	}
	return out, nil
}

// EachFilter builds the first n filters of the workload one at a time, as
// Filters does, and calls fn with each; it keeps none, so that indexes of
// millions of filters can be built and checked without holding them. It
// stops at fn's first error and returns it.
func (w *Workload) EachFilter(n int, fn func(i int, f *filter.Filter) error) error {
	r := rand.New(rand.NewPCG(w.seed, streamFilters))
	for i := range n {
		f, err := filter.Build(w.spec(r))
		if err != nil {
			return fmt.Errorf("bench: %s filter %d: %w", w.Name, i, err)
		}
		if err := fn(i, f); err != nil {
			return err
		}
	}
	return nil
}

// Events returns the first k events of the workload.
func (w *Workload) Events(k int) []*filter.BasicEvent {
	r := rand.New(rand.NewPCG(w.seed, streamEvents))
	out := make([]*filter.BasicEvent, k)
	for i := range out {
		out[i] = w.event(r)
	}
	return out
}

// Zipf draws ranks 0..n-1 with P(rank i) ∝ 1/(i+1)^alpha. Unlike
// math/rand/v2's Zipf it allows alpha = 1, the exponent of the W-SPARSE
// workload. Draw costs a binary search over n; no allocation.
type Zipf struct{ cdf []float64 }

// NewZipf returns a Zipf sampler over n ≥ 1 ranks with exponent alpha ≥ 0.
func NewZipf(n int, alpha float64) *Zipf {
	z := &Zipf{cdf: make([]float64, n)}
	sum := 0.0
	for i := range n {
		sum += 1 / math.Pow(float64(i+1), alpha)
		z.cdf[i] = sum
	}
	for i := range z.cdf {
		z.cdf[i] /= sum
	}
	return z
}

// Draw returns a rank in [0, n).
func (z *Zipf) Draw(r *rand.Rand) int {
	i := sort.SearchFloat64s(z.cdf, r.Float64())
	if i >= len(z.cdf) {
		i = len(z.cdf) - 1
	}
	return i
}

// P returns the probability of rank i.
func (z *Zipf) P(i int) float64 {
	if i == 0 {
		return z.cdf[0]
	}
	return z.cdf[i] - z.cdf[i-1]
}

// distinct draws k distinct ranks with draw, in the order drawn.
func distinct(k int, draw func() int) []int {
	out := make([]int, 0, k)
outer:
	for len(out) < k {
		x := draw()
		for _, y := range out {
			if y == x {
				continue outer
			}
		}
		out = append(out, x)
	}
	return out
}

func attrNames(prefix string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = prefix + strconv.Itoa(i)
	}
	return s
}

// ---- type tree ----

// TypeTree is an event type tree for the type deltas: a root type that
// declares the attributes, and Fanout children per type down to Depth
// levels below the root. Types are named by their path: "T", "T.3",
// "T.3.7", …; the Fanout^Depth types at the last level are the leaves.
type TypeTree struct {
	Depth, Fanout int
	Ontology      *ontology.Ontology
	// Names lists the types below the root in breadth-first order: level 1
	// first, the leaves last. It does not include the root "T".
	Names []string
	// Level[k] is the index in Names of the first type at depth k+1.
	Level []int
}

// NewTypeTree builds a TypeTree whose root declares attrs as attributes.
// Depth 6 with fan-out 8 has 299,592 types below the root; ontology.New
// then takes seconds and its inherited vocabularies take memory in
// proportion to types × attributes (see README.md).
func NewTypeTree(depth, fanout int, attrs []ontology.Attribute) (*TypeTree, error) {
	t := &TypeTree{Depth: depth, Fanout: fanout}
	defs := []ontology.TypeDef{{Name: "T", Attributes: attrs}}
	prev := []string{"T"}
	for k := 1; k <= depth; k++ {
		t.Level = append(t.Level, len(t.Names))
		next := make([]string, 0, len(prev)*fanout)
		for _, p := range prev {
			for c := range fanout {
				next = append(next, p+"."+strconv.Itoa(c))
			}
		}
		for _, n := range next {
			defs = append(defs, ontology.TypeDef{Name: n, Parents: []string{n[:strings.LastIndexByte(n, '.')]}})
		}
		t.Names = append(t.Names, next...)
		prev = next
	}
	o, err := ontology.New(defs)
	if err != nil {
		return nil, fmt.Errorf("bench: type tree: %w", err)
	}
	t.Ontology = o
	return t, nil
}

// Leaf returns a type of the last level, uniformly.
func (t *TypeTree) Leaf(r *rand.Rand) string {
	first := t.Level[len(t.Level)-1]
	return t.Names[first+r.IntN(len(t.Names)-first)]
}

// Type returns a type below the root: uniformly over all types when
// depthUniform is false (so most are leaves, and an event of a random
// leaf type is of the type of about Depth/len(Names) of the filters), or a
// uniform depth 1..Depth first and then a uniform type at that depth.
func (t *TypeTree) Type(r *rand.Rand, depthUniform bool) string {
	if !depthUniform {
		return t.Names[r.IntN(len(t.Names))]
	}
	k := r.IntN(t.Depth)
	end := len(t.Names)
	if k+1 < len(t.Level) {
		end = t.Level[k+1]
	}
	return t.Names[t.Level[k]+r.IntN(end-t.Level[k])]
}

// ---- W-INT ----

// WINTConfig configures the W-INT workload (REIN/HEM): D integer
// attributes, S closed-interval predicates per filter on distinct
// attributes chosen uniformly, every event carries all D attributes with
// values uniform in [0, Domain), and each interval has width Width×Domain
// with its lower end uniform in [0, Domain−width]. Zero fields take the
// standard values: D 20, S 10, Domain 1,000,000, Width 0.3, Seed 1.
type WINTConfig struct {
	D, S   int
	Domain int64
	Width  float64
	Seed   uint64
	// Mode is the filters' match mode. ModeAtLeast uses AtLeast (0 means
	// 8); ModeScore gives each predicate an integer weight uniform in 1..3
	// and a threshold of ThresholdFrac (0 means 0.6) of the filter's total
	// weight.
	Mode          filter.Mode
	AtLeast       int
	ThresholdFrac float64
	// Tree, when set, spreads the filters over its types (TypeTree.Type
	// with DepthUniform) and gives each event a random leaf type; Tree's
	// root must declare the attributes a0..a{D-1} as ints (WINTAttributes).
	Tree         *TypeTree
	DepthUniform bool
}

// WINTAttributes returns the d int attributes a0..a{d-1} of W-INT.
func WINTAttributes(d int) []ontology.Attribute {
	a := make([]ontology.Attribute, d)
	for i := range a {
		a[i] = ontology.Attribute{Name: "a" + strconv.Itoa(i), Kind: ontology.KindInt}
	}
	return a
}

// NewWINT returns the W-INT workload of c.
func NewWINT(c WINTConfig) (*Workload, error) {
	if c.D == 0 {
		c.D = 20
	}
	if c.S == 0 {
		c.S = 10
	}
	if c.Domain == 0 {
		c.Domain = 1_000_000
	}
	if c.Width == 0 {
		c.Width = 0.3
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.AtLeast == 0 {
		c.AtLeast = 8
	}
	if c.ThresholdFrac == 0 {
		c.ThresholdFrac = 0.6
	}
	if c.S > c.D {
		return nil, fmt.Errorf("bench: W-INT with S %d > D %d", c.S, c.D)
	}
	w := &Workload{Name: "W-INT", seed: c.Seed, attrs: attrNames("a", c.D)}
	typ := "winT"
	if c.Tree != nil {
		w.Ontology = c.Tree.Ontology
	} else {
		o, err := ontology.New([]ontology.TypeDef{{Name: typ, Attributes: WINTAttributes(c.D)}})
		if err != nil {
			return nil, fmt.Errorf("bench: W-INT ontology: %w", err)
		}
		w.Ontology = o
	}
	width := int64(c.Width * float64(c.Domain))
	w.spec = func(r *rand.Rand) filter.Spec {
		s := filter.Spec{Type: typ, Mode: c.Mode, Predicates: make([]filter.Predicate, c.S)}
		if c.Tree != nil {
			s.Type = c.Tree.Type(r, c.DepthUniform)
		}
		total := 0.0
		for i, a := range r.Perm(c.D)[:c.S] {
			lo := r.Int64N(c.Domain - width + 1)
			p := filter.Attr(w.attrs[a]).Range(ontology.Int(lo), ontology.Int(lo+width), false, false)
			if c.Mode == filter.ModeScore {
				wt := float64(1 + r.IntN(3))
				p = p.WithWeight(wt)
				total += wt
			}
			s.Predicates[i] = p
		}
		switch c.Mode {
		case filter.ModeAtLeast:
			s.AtLeast = c.AtLeast
		case filter.ModeScore:
			s.Threshold = c.ThresholdFrac * total
		}
		return s
	}
	w.event = func(r *rand.Rand) *filter.BasicEvent {
		ev := &filter.BasicEvent{Type: typ, Attrs: make([]ontology.Attr, c.D)}
		if c.Tree != nil {
			ev.Type = c.Tree.Leaf(r)
		}
		for i := range ev.Attrs {
			ev.Attrs[i] = ontology.Attr{Name: w.attrs[i], Value: ontology.Int(r.Int64N(c.Domain))}
		}
		return ev
	}
	return w, nil
}

// ---- W-SPARSE ----

// WSPARSEConfig configures the W-SPARSE workload (BEGen-like): D
// attributes, filters of MinPreds..MaxPreds predicates on distinct
// attributes, events of EventAttrs distinct attributes, attributes and
// values drawn Zipf(Alpha) by rank (attribute rank i is "s{i}", value rank
// j is the int j, or StringValue(j) when Strings is set) over Cardinality
// values per attribute.
//
// The operator mix: 35 % `=`, 35 % `∈` (a set of 2–4 distinct Zipf
// values), 20 % closed ranges covering RangeValues consecutive values with
// the lower end uniform, 5 % `≠` and 5 % `∉` (2–4 values). With
// PrefixFrac > 0 (Strings required), that fraction of predicates are
// prefix predicates — the first one or two segments of a Zipf value — and
// the rest follow the mix above.
//
// Zero fields take the standard values: D 400, MinPreds 3, MaxPreds 7,
// EventAttrs 15, Alpha 1, Cardinality 48, RangeValues 12, Seed 1.
type WSPARSEConfig struct {
	D                  int
	MinPreds, MaxPreds int
	EventAttrs         int
	Alpha              float64
	Cardinality        int
	RangeValues        int
	Strings            bool
	PrefixFrac         float64
	Seed               uint64
}

// StringValue returns the string of value rank j for the string variants:
// "a.b.c" with a = j/16, b = (j/4)%4, c = j%4, so that for j < 160 byte
// order is rank order and prefixes "a." and "a.b." select 16 and 4 values.
func StringValue(j int) string {
	return strconv.Itoa(j/16) + "." + strconv.Itoa(j/4%4) + "." + strconv.Itoa(j%4)
}

// NewWSPARSE returns the W-SPARSE workload of c.
func NewWSPARSE(c WSPARSEConfig) (*Workload, error) {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.D, 400)
	def(&c.MinPreds, 3)
	def(&c.MaxPreds, 7)
	def(&c.EventAttrs, 15)
	def(&c.Cardinality, 48)
	def(&c.RangeValues, 12)
	if c.Alpha == 0 {
		c.Alpha = 1
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.PrefixFrac > 0 && !c.Strings {
		return nil, fmt.Errorf("bench: W-SPARSE prefix predicates need string values")
	}
	if c.MaxPreds > c.D || c.EventAttrs > c.D || c.RangeValues > c.Cardinality {
		return nil, fmt.Errorf("bench: W-SPARSE config out of range: %+v", c)
	}
	name, kind := "W-SPARSE", ontology.KindInt
	if c.Strings {
		name, kind = "W-SPARSE-str", ontology.KindString
	}
	if c.PrefixFrac > 0 {
		name = "Prefix"
	}
	w := &Workload{Name: name, seed: c.Seed, attrs: attrNames("s", c.D)}
	attrs := make([]ontology.Attribute, c.D)
	for i := range attrs {
		attrs[i] = ontology.Attribute{Name: w.attrs[i], Kind: kind}
	}
	o, err := ontology.New([]ontology.TypeDef{{Name: "sparse", Attributes: attrs}})
	if err != nil {
		return nil, fmt.Errorf("bench: W-SPARSE ontology: %w", err)
	}
	w.Ontology = o
	values := make([]ontology.Value, c.Cardinality)
	for j := range values {
		if c.Strings {
			values[j] = ontology.String(StringValue(j))
		} else {
			values[j] = ontology.Int(int64(j))
		}
	}
	za, zv := NewZipf(c.D, c.Alpha), NewZipf(c.Cardinality, c.Alpha)
	set := func(r *rand.Rand) []ontology.Value {
		idx := distinct(2+r.IntN(3), func() int { return zv.Draw(r) })
		s := make([]ontology.Value, len(idx))
		for i, j := range idx {
			s[i] = values[j]
		}
		return s
	}
	w.spec = func(r *rand.Rand) filter.Spec {
		k := c.MinPreds + r.IntN(c.MaxPreds-c.MinPreds+1)
		s := filter.Spec{Type: "sparse", Predicates: make([]filter.Predicate, k)}
		for i, a := range distinct(k, func() int { return za.Draw(r) }) {
			op := filter.Attr(w.attrs[a])
			if c.PrefixFrac > 0 && r.Float64() < c.PrefixFrac {
				v := StringValue(zv.Draw(r))
				segs := 1 + r.IntN(2)
				cut := strings.IndexByte(v, '.') + 1
				if segs == 2 {
					cut += strings.IndexByte(v[cut:], '.') + 1
				}
				s.Predicates[i] = op.Prefix(v[:cut])
				continue
			}
			switch u := r.Float64(); {
			case u < 0.35:
				s.Predicates[i] = op.EQ(values[zv.Draw(r)])
			case u < 0.70:
				s.Predicates[i] = op.In(set(r)...)
			case u < 0.90:
				lo := r.IntN(c.Cardinality - c.RangeValues + 1)
				s.Predicates[i] = op.Range(values[lo], values[lo+c.RangeValues-1], false, false)
			case u < 0.95:
				s.Predicates[i] = op.NE(values[zv.Draw(r)])
			default:
				s.Predicates[i] = op.NotIn(set(r)...)
			}
		}
		return s
	}
	w.event = func(r *rand.Rand) *filter.BasicEvent {
		ev := &filter.BasicEvent{Type: "sparse", Attrs: make([]ontology.Attr, c.EventAttrs)}
		for i, a := range distinct(c.EventAttrs, func() int { return za.Draw(r) }) {
			ev.Attrs[i] = ontology.Attr{Name: w.attrs[a], Value: values[zv.Draw(r)]}
		}
		return ev
	}
	return w, nil
}

// ---- type only ----

// NewTypeOnly returns the TypeOnly workload: filters with only an event
// type (TypeTree.Type with depthUniform) and no predicates; events of a
// random leaf type with no attributes.
func NewTypeOnly(t *TypeTree, depthUniform bool, seed uint64) *Workload {
	if seed == 0 {
		seed = 1
	}
	return &Workload{
		Name: "TypeOnly", Ontology: t.Ontology, seed: seed,
		spec: func(r *rand.Rand) filter.Spec { return filter.Spec{Type: t.Type(r, depthUniform)} },
		event: func(r *rand.Rand) *filter.BasicEvent {
			return &filter.BasicEvent{Type: t.Leaf(r)}
		},
	}
}

// ---- JSON payload ----

// JSONConfig configures the JSON workload: filters of MinPreds..MaxPreds
// equality predicates on distinct keys among Paths, keys and values drawn
// Zipf(1) (Cardinality int values); each event carries a value for every
// key. With Attrs false the keys are gjson paths "k{i}.v" into the event's
// JSON payload {"k0":{"v":3},"k1":{"v":0},…} (about 15 bytes per key);
// with Attrs true they are int attributes "k{i}" of the event instead, the
// typed twin of the same filters and events. Zero fields take Paths 10,
// MinPreds 3, MaxPreds 7, Cardinality 48, Seed 1.
type JSONConfig struct {
	Paths              int
	MinPreds, MaxPreds int
	Cardinality        int
	Attrs              bool
	Seed               uint64
}

// NewJSON returns the JSON workload of c, or its attribute twin.
func NewJSON(c JSONConfig) (*Workload, error) {
	if c.Paths == 0 {
		c.Paths = 10
	}
	if c.MinPreds == 0 {
		c.MinPreds = 3
	}
	if c.MaxPreds == 0 {
		c.MaxPreds = 7
	}
	if c.Cardinality == 0 {
		c.Cardinality = 48
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.MaxPreds > c.Paths {
		return nil, fmt.Errorf("bench: JSON with MaxPreds %d > Paths %d", c.MaxPreds, c.Paths)
	}
	name := "JSON"
	if c.Attrs {
		name = "JSON-attrs"
	}
	w := &Workload{Name: name, seed: c.Seed, attrs: attrNames("k", c.Paths)}
	attrs := WINTAttributes(0)
	if c.Attrs {
		for _, a := range w.attrs {
			attrs = append(attrs, ontology.Attribute{Name: a, Kind: ontology.KindInt})
		}
	}
	o, err := ontology.New([]ontology.TypeDef{{Name: "doc", Attributes: attrs}})
	if err != nil {
		return nil, fmt.Errorf("bench: JSON ontology: %w", err)
	}
	w.Ontology = o
	zk, zv := NewZipf(c.Paths, 1), NewZipf(c.Cardinality, 1)
	w.spec = func(r *rand.Rand) filter.Spec {
		k := c.MinPreds + r.IntN(c.MaxPreds-c.MinPreds+1)
		s := filter.Spec{Type: "doc", Predicates: make([]filter.Predicate, k)}
		for i, key := range distinct(k, func() int { return zk.Draw(r) }) {
			op := filter.Attr(w.attrs[key])
			if !c.Attrs {
				op = filter.JSON(w.attrs[key] + ".v")
			}
			s.Predicates[i] = op.EQ(ontology.Int(int64(zv.Draw(r))))
		}
		return s
	}
	w.event = func(r *rand.Rand) *filter.BasicEvent {
		ev := &filter.BasicEvent{Type: "doc"}
		if c.Attrs {
			ev.Attrs = make([]ontology.Attr, c.Paths)
			for i := range ev.Attrs {
				ev.Attrs[i] = ontology.Attr{Name: w.attrs[i], Value: ontology.Int(int64(zv.Draw(r)))}
			}
			return ev
		}
		b := []byte{'{'}
		for i, a := range w.attrs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, a...)
			b = append(b, `":{"v":`...)
			b = strconv.AppendInt(b, int64(zv.Draw(r)), 10)
			b = append(b, '}')
		}
		ev.ContentType, ev.Data = "application/json", append(b, '}')
		return ev
	}
	return w, nil
}

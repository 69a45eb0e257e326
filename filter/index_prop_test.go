package filter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// randWorld is a random ontology with a shared attribute vocabulary, and
// generators of filters and events over it, for checking Index against
// BruteForce.
type randWorld struct {
	r     *rand.Rand
	ont   *ontology.Ontology
	types []string
	attrs []ontology.Attribute
}

var propStrings = []string{"", "a", "ab", "abc", "b", "hall", "hall.", "hall.north", "Hall", "Pāhala", "ö", "ab.c", "c"}

func newRandWorld(t testing.TB, seed uint64) *randWorld {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := &randWorld{r: r}
	kinds := []ontology.Kind{ontology.KindInt, ontology.KindFloat, ontology.KindString, ontology.KindBool, ontology.KindTime}
	for i := 0; i < 6; i++ {
		w.attrs = append(w.attrs, ontology.Attribute{Name: fmt.Sprintf("a%d", i), Kind: kinds[i%len(kinds)]})
	}
	n := 2 + r.IntN(12)
	var defs []ontology.TypeDef
	for i := 0; i < n; i++ {
		d := ontology.TypeDef{Name: fmt.Sprintf("T%d", i)}
		if i > 0 {
			d.Parents = []string{fmt.Sprintf("T%d", r.IntN(i))}
			if i > 2 && r.IntN(4) == 0 { // multiple inheritance
				if p := fmt.Sprintf("T%d", r.IntN(i)); p != d.Parents[0] {
					d.Parents = append(d.Parents, p)
				}
			}
		} else {
			d.Attributes = w.attrs
		}
		defs = append(defs, d)
		w.types = append(w.types, d.Name)
	}
	o, err := ontology.New(defs)
	require.NoError(t, err)
	w.ont = o
	return w
}

func (w *randWorld) value(k ontology.Kind) ontology.Value {
	r := w.r
	switch k {
	case ontology.KindInt:
		switch r.IntN(8) {
		case 0:
			return ontology.Int(1<<53 + int64(r.IntN(3)))
		case 1:
			return ontology.Int(math.MinInt64 + int64(r.IntN(2)))
		}
		return ontology.Int(int64(r.IntN(7) - 3))
	case ontology.KindFloat:
		switch r.IntN(10) {
		case 0:
			return ontology.Float(math.Copysign(0, -1))
		case 1:
			return ontology.Float(1 << 53)
		case 2:
			return ontology.Float(5e-324)
		case 3:
			return ontology.Float(float64(r.IntN(7)-3) + 0.5)
		}
		return ontology.Float(float64(r.IntN(7) - 3))
	case ontology.KindString:
		return ontology.String(propStrings[r.IntN(len(propStrings))])
	case ontology.KindBool:
		return ontology.Bool(r.IntN(2) == 0)
	case ontology.KindTime:
		return ontology.TimeNanos(int64(r.IntN(5)) * 1e9)
	}
	panic("kind")
}

// literal returns a value for a predicate on kind k: mostly that kind,
// sometimes the other numeric kind.
func (w *randWorld) literal(k ontology.Kind) ontology.Value {
	if k.Numeric() && w.r.IntN(3) == 0 {
		if k == ontology.KindInt {
			k = ontology.KindFloat
		} else {
			k = ontology.KindInt
		}
	}
	return w.value(k)
}

func (w *randWorld) predicate() Predicate {
	r := w.r
	if r.IntN(12) == 0 {
		return True()
	}
	var o Operand
	var k ontology.Kind
	if r.IntN(4) == 0 {
		// JSON payload fields j0..j2: numbers, strings or bools.
		o = JSON(fmt.Sprintf("j%d", r.IntN(3)))
		k = []ontology.Kind{ontology.KindInt, ontology.KindFloat, ontology.KindString, ontology.KindBool}[r.IntN(4)]
	} else {
		a := w.attrs[r.IntN(len(w.attrs))]
		o, k = Attr(a.Name), a.Kind
	}
	ordered := k != ontology.KindBool
	ops := []Op{OpEQ, OpNE, OpIn, OpNotIn, OpExists, OpNotExists}
	if ordered {
		ops = append(ops, OpLT, OpLE, OpGT, OpGE, OpRange)
	}
	if k == ontology.KindString {
		ops = append(ops, OpPrefix, OpSuffix, OpContains, OpPrefix, OpEQ)
	}
	switch op := ops[r.IntN(len(ops))]; op {
	case OpIn, OpNotIn:
		p := Predicate{Operand: o, Op: op}
		for i := 0; i <= r.IntN(3); i++ {
			p.Set = append(p.Set, w.literal(k))
		}
		return p
	case OpRange:
		lo, hi := w.literal(k), w.literal(k)
		if c, _ := ontology.Compare(lo, hi); c > 0 {
			lo, hi = hi, lo
		}
		return rangeOK(o, lo, hi, r.IntN(2) == 0, r.IntN(2) == 0)
	case OpExists, OpNotExists:
		return Predicate{Operand: o, Op: op}
	case OpPrefix, OpSuffix, OpContains:
		return o.pred(op, w.value(ontology.KindString))
	default:
		return o.pred(op, w.literal(k))
	}
}

func (w *randWorld) filter() *Filter {
	r := w.r
	spec := Spec{Type: AnyType}
	if r.IntN(4) != 0 {
		spec.Type = w.types[r.IntN(len(w.types))]
	}
	n := r.IntN(5)
	for i := 0; i < n; i++ {
		spec.Predicates = append(spec.Predicates, w.predicate())
	}
	switch m := r.IntN(5); {
	case m == 3 && n > 0:
		spec.Mode, spec.AtLeast = ModeAtLeast, 1+r.IntN(n)
	case m == 4 && n > 0:
		spec.Mode, spec.Threshold = ModeScore, 0.5+float64(r.IntN(2*n))
		for i := range spec.Predicates {
			spec.Predicates[i].Weight = float64(1+r.IntN(4)) / 2
		}
		clampThreshold(&spec)
	}
	f, err := Build(spec)
	if err != nil {
		panic(fmt.Sprintf("random spec %+v: %v", spec, err))
	}
	return f
}

func (w *randWorld) event() *BasicEvent {
	r := w.r
	ev := &BasicEvent{Type: w.types[r.IntN(len(w.types))]}
	if r.IntN(20) == 0 {
		ev.Type = "Unknown"
	}
	for _, a := range w.attrs {
		if r.IntN(3) == 0 {
			continue
		}
		v := w.value(a.Kind)
		if r.IntN(10) == 0 { // a kind the vocabulary does not expect
			v = w.value([]ontology.Kind{ontology.KindInt, ontology.KindFloat, ontology.KindString}[r.IntN(3)])
		}
		if r.IntN(40) == 0 {
			v = ontology.Float(math.NaN())
		}
		ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a.Name, Value: v})
	}
	if r.IntN(2) == 0 {
		var parts []string
		for i := 0; i < 3; i++ {
			var s string
			switch r.IntN(7) {
			case 0:
				continue
			case 1:
				s = fmt.Sprintf("%q", propStrings[r.IntN(len(propStrings))])
			case 2:
				s = "null"
			case 3:
				s = []string{"true", "false"}[r.IntN(2)]
			case 4:
				s = []string{"0", "-0.0", "0.5", "9007199254740993", "9007199254740992", "1e0", `"0"`, "[1]", `{"x":1}`}[r.IntN(9)]
			default:
				s = fmt.Sprint(r.IntN(7) - 3)
			}
			parts = append(parts, fmt.Sprintf(`"j%d":%s`, i, s))
		}
		ev.ContentType, ev.Data = "application/json", []byte("{"+strings.Join(parts, ",")+"}")
	}
	return ev
}

type matchResult map[uint64]float64

func collect(m interface {
	Match(Event, func(uint64, float64))
}, ev Event) matchResult {
	got := matchResult{}
	m.Match(ev, func(id uint64, score float64) {
		if _, dup := got[id]; dup {
			got[id] = math.Inf(-1) // reported twice: never equal to the oracle
			return
		}
		got[id] = score
	})
	return got
}

// TestIndexMatchesOracle checks Index against BruteForce on random
// ontologies (DAGs with multiple inheritance), filters (every operator,
// mode and value kind, attributes and JSON paths) and events (mixed kinds,
// NaN, missing attributes, unknown types), with filters added and removed
// between events.
func TestIndexMatchesOracle(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for seed := 0; seed < seeds; seed++ {
		w := newRandWorld(t, uint64(seed))
		ix, bf := NewIndex(w.ont), NewBruteForce(w.ont)
		live := []uint64{}
		nextID := uint64(1)
		for step := 0; step < 60; step++ {
			switch {
			case len(live) > 0 && w.r.IntN(5) == 0:
				i := w.r.IntN(len(live))
				id := live[i]
				live = append(live[:i], live[i+1:]...)
				require.True(t, ix.Remove(id))
				require.True(t, bf.Remove(id))
			default:
				f := w.filter()
				require.NoError(t, ix.Add(nextID, f), f.String())
				require.NoError(t, bf.Add(nextID, f))
				live = append(live, nextID)
				nextID++
			}
			checkEqLists(t, ix)
			for e := 0; e < 4; e++ {
				ev := w.event()
				want, got := collect(bf, ev), collect(ix, ev)
				if !assertSameMatches(t, want, got) {
					t.Fatalf("seed %d step %d: event %+v payload %s\nwant %v\ngot  %v\nfilters:\n%s", seed, step, ev, ev.Data, want, got, dumpFilters(bf))
				}
			}
		}
	}
}

func assertSameMatches(t *testing.T, want, got matchResult) bool {
	t.Helper()
	if len(want) != len(got) {
		return false
	}
	for id, s := range want {
		g, ok := got[id]
		if !ok || g != s {
			return false
		}
	}
	return true
}

func dumpFilters(b *BruteForce) string {
	var sb strings.Builder
	for _, e := range b.fs {
		fmt.Fprintf(&sb, "  %d: %s\n", e.id, e.f)
	}
	return sb.String()
}

// TestIndexConcurrent runs Match from several goroutines while filters are
// added and removed; under -race it checks the left-right switching, and
// each Match must report a subset of filters that were present at some
// point and every filter that was present throughout.
func TestIndexConcurrent(t *testing.T) {
	w := newRandWorld(t, 99)
	ix := NewIndex(w.ont)
	stable := Spec{Type: AnyType, Predicates: []Predicate{Attr("a0").Exists()}}
	require.NoError(t, ix.Add(0, MustBuild(stable)))
	ev := &BasicEvent{Type: w.types[0], Attrs: []ontology.Attr{{Name: "a0", Value: ontology.Int(1)}}}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got := collect(ix, ev)
				if _, ok := got[0]; !ok {
					t.Error("a filter present throughout was not reported")
					return
				}
			}
		}()
	}
	for i := uint64(1); i < 2000; i++ {
		require.NoError(t, ix.Add(i, w.filter()))
		if i%3 == 0 {
			require.True(t, ix.Remove(i-1))
		}
	}
	close(stop)
	wg.Wait()
}

// rangeOK is Operand.Range for generators: equal ends are made closed, so
// that the range is not empty (Build refuses empty ranges).
func rangeOK(o Operand, lo, hi ontology.Value, loOpen, hiOpen bool) Predicate {
	if c, _ := ontology.Compare(lo, hi); c == 0 {
		loOpen, hiOpen = false, false
	}
	return o.Range(lo, hi, loOpen, hiOpen)
}

// clampThreshold lowers a score threshold to the total weight, which Build
// requires.
func clampThreshold(spec *Spec) {
	total := 0.0
	for i := range spec.Predicates {
		total += spec.Predicates[i].weight()
	}
	spec.Threshold = min(spec.Threshold, total)
}

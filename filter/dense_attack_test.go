package filter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// Attack tests for the dense engine (issue 18), written by a reviewer: they
// try to make Index differ from the oracle BruteForce, crash, leak or race.
// Run: go test -race -run Attack ./filter/

// attackOnt has a root type with int and float attributes, a subtype, an
// unrelated type that declares "i" as a string (so that AnyType filters on
// "i" meet strings), and wide types with 130 attributes for the attribute
// cap.
func attackOnt(t testing.TB) *ontology.Ontology {
	t.Helper()
	wide := make([]ontology.Attribute, 130)
	for i := range wide {
		k := ontology.KindFloat
		if i%2 == 1 {
			k = ontology.KindInt
		}
		wide[i] = ontology.Attribute{Name: fmt.Sprintf("w%d", i), Kind: k}
	}
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "Root", Attributes: []ontology.Attribute{
			{Name: "i", Kind: ontology.KindInt}, {Name: "j", Kind: ontology.KindInt},
			{Name: "f", Kind: ontology.KindFloat}, {Name: "g", Kind: ontology.KindFloat},
		}},
		{Name: "Sub", Parents: []string{"Root"}},
		{Name: "SubSub", Parents: []string{"Sub"}},
		{Name: "Other", Attributes: []ontology.Attribute{{Name: "i", Kind: ontology.KindString}}},
		{Name: "Wide", Attributes: wide},
		{Name: "WideSub", Parents: []string{"Wide"}},
	})
	require.NoError(t, err)
	return o
}

// attackEdges are bounds and values at the edges of exact comparison.
var attackEdges = []ontology.Value{
	ontology.Int(0), ontology.Float(0), ontology.Float(math.Copysign(0, -1)),
	ontology.Int(1), ontology.Int(-1), ontology.Float(0.5), ontology.Float(1), ontology.Float(-1),
	ontology.Int(1<<53 - 1), ontology.Int(1 << 53), ontology.Int(1<<53 + 1), ontology.Int(1<<53 + 2),
	ontology.Int(-1 << 53), ontology.Int(-1<<53 - 1), ontology.Int(-1<<53 - 2),
	ontology.Float(1 << 53), ontology.Float(1<<53 + 2), ontology.Float(-1 << 53), ontology.Float(-1<<53 - 2),
	ontology.Int(math.MaxInt64), ontology.Int(math.MaxInt64 - 1), ontology.Int(math.MinInt64), ontology.Int(math.MinInt64 + 1),
	ontology.Int(1 << 62), ontology.Float(0x1p63), ontology.Float(-0x1p63), ontology.Float(0x1p62),
	ontology.Float(math.Nextafter(0x1p63, 0)),
	ontology.Float(1e308), ontology.Float(-1e308), ontology.Float(math.MaxFloat64), ontology.Float(-math.MaxFloat64),
	ontology.Float(5e-324), ontology.Float(-5e-324), ontology.Float(math.SmallestNonzeroFloat64 * 3),
	ontology.Float(2.5), ontology.Int(2), ontology.Int(3), ontology.Float(3),
}

// attackNear returns v or a neighbour of it.
func attackNear(r *rand.Rand, v ontology.Value) ontology.Value {
	switch r.IntN(4) {
	case 0:
		if v.Kind() == ontology.KindInt {
			i := v.Int()
			if r.IntN(2) == 0 && i < math.MaxInt64 {
				return ontology.Int(i + 1)
			}
			if i > math.MinInt64 {
				return ontology.Int(i - 1)
			}
			return v
		}
		return ontology.Float(math.Nextafter(v.Float(), math.Inf(1)))
	case 1:
		if v.Kind() == ontology.KindFloat {
			return ontology.Float(math.Nextafter(v.Float(), math.Inf(-1)))
		}
		// an int as a float (rounded) and a float as an int
		return ontology.Float(v.Float())
	case 2:
		if f := v.Float(); v.Kind() == ontology.KindFloat && f == math.Trunc(f) && f >= -0x1p63 && f < 0x1p63 {
			return ontology.Int(int64(f))
		}
	}
	return v
}

// attackPred returns a numeric comparison or range on attribute name with
// edge bounds.
func attackPred(r *rand.Rand, name string) Predicate {
	a := Attr(name)
	near := func() ontology.Value {
		e := attackEdges[r.IntN(len(attackEdges))]
		if v := attackNear(r, e); v.IsFinite() {
			return v
		}
		return e
	}
	v := near()
	switch r.IntN(5) {
	case 0:
		return a.LT(v)
	case 1:
		return a.LE(v)
	case 2:
		return a.GT(v)
	case 3:
		return a.GE(v)
	}
	w := near()
	if c, _ := ontology.Compare(v, w); c > 0 {
		v, w = w, v
	}
	return rangeOK(a, v, w, r.IntN(2) == 0, r.IntN(2) == 0)
}

// attackSpec returns a filter of numeric predicates in any mode, with
// weights mostly integral from 1 to 15 (counting engines) and thresholds
// at the edges.
func attackSpec(r *rand.Rand, typ string, attrs []string, maxPreds int) Spec {
	spec := Spec{Type: typ}
	np := 1 + r.IntN(maxPreds)
	perm := r.Perm(len(attrs))
	for k := 0; k < np; k++ {
		name := attrs[perm[k%len(perm)]]
		if r.IntN(6) == 0 {
			name = attrs[r.IntN(len(attrs))] // a repeated attribute
		}
		spec.Predicates = append(spec.Predicates, attackPred(r, name))
	}
	switch r.IntN(3) {
	case 1:
		spec.Mode = ModeAtLeast
		spec.AtLeast = []int{1, np, 1 + r.IntN(np)}[r.IntN(3)]
	case 2:
		spec.Mode = ModeScore
		total := 0.0
		for i := range spec.Predicates {
			w := []float64{1, 2, 7, 15, 15, 3, 0.5, 16}[r.IntN(8)]
			spec.Predicates[i].Weight = w
			total += w
		}
		spec.Threshold = []float64{0.5, total, total - 0.5, 1, math.Nextafter(total, 0), float64(1 + r.IntN(max(1, int(total))))}[r.IntN(6)]
		if spec.Threshold <= 0 {
			spec.Threshold = total
		}
		clampThreshold(&spec)
	}
	return spec
}

// attackValue returns an event value: an edge value or a neighbour, or
// NaN, ±Inf, or a value of another kind.
func attackValue(r *rand.Rand) ontology.Value {
	switch r.IntN(16) {
	case 0:
		return ontology.Float(math.NaN())
	case 1:
		return ontology.Float(math.Inf(1))
	case 2:
		return ontology.Float(math.Inf(-1))
	case 3:
		return ontology.String("1")
	case 4:
		return ontology.Bool(r.IntN(2) == 0)
	case 5:
		return ontology.TimeNanos(int64(r.IntN(5)) - 2)
	}
	return attackNear(r, attackEdges[r.IntN(len(attackEdges))])
}

// attackEvent returns an event of one of types with values for some of
// attrs; with dup, sometimes a valid value repeated under one name (the
// first counts).
func attackEvent(r *rand.Rand, types, attrs []string, dup bool) *BasicEvent {
	ev := &BasicEvent{Type: types[r.IntN(len(types))]}
	for _, a := range attrs {
		if r.IntN(8) == 0 {
			continue
		}
		ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a, Value: attackValue(r)})
		if dup && r.IntN(10) == 0 {
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a, Value: attackValue(r)})
		}
	}
	r.Shuffle(len(ev.Attrs), func(i, j int) { ev.Attrs[i], ev.Attrs[j] = ev.Attrs[j], ev.Attrs[i] })
	return ev
}

// attackDiff compares the index with the oracle on ev and, on a mismatch,
// fails naming the filters that differ.
func attackDiff(t *testing.T, ix *Index, bf *BruteForce, ev Event) bool {
	t.Helper()
	want, got := collect(bf, ev), collect(ix, ev)
	if assertSameMatches(t, want, got) {
		return true
	}
	var sb strings.Builder
	ids := map[uint64]bool{}
	for id := range want {
		ids[id] = true
	}
	for id := range got {
		ids[id] = true
	}
	var sorted []uint64
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	n := 0
	for _, id := range sorted {
		w, wok := want[id]
		g, gok := got[id]
		if wok == gok && w == g {
			continue
		}
		if n++; n > 5 {
			break
		}
		f := bf.fs[bf.ids[id]].f
		fmt.Fprintf(&sb, "\n  filter %d %s: oracle %v/%v, index %v/%v", id, f, wok, w, gok, g)
	}
	t.Errorf("event %s %v: index differs from the oracle:%s", ev.EventType(), ev.(*BasicEvent).Attrs, sb.String())
	return false
}

// attackVariants sets the engine's tunables for one run of a test body.
type attackVariant struct {
	name                      string
	marks, pend, purge, reLay int
	verify, orFirst, orAll    int
	words                     int // orWordsBelow: 0 ORs word by word from the first check on
}

// The engines of these tests are small: orAll 0 makes them take the
// ordered ORs (orOrdered) that only engines of more than orAllWords
// words take by default.
var attackVariants = []attackVariant{
	{name: "defaults", marks: 16, pend: 64, purge: 64, reLay: 4, verify: 256, orFirst: 16, orAll: 64, words: 8},
	{name: "fewmarks", marks: 2, pend: 1, purge: 8, reLay: 2, verify: 256, orFirst: 16, orAll: 64, words: 8},
	{name: "stopearly", marks: 5, pend: 3, purge: 4, reLay: 4, verify: -1000, orFirst: 0, orAll: 0, words: 8},
	{name: "fulllines", marks: 7, pend: 2, purge: 8, reLay: 4, verify: 256, orFirst: 1, orAll: 0, words: 1 << 30},
	{name: "words", marks: 7, pend: 2, purge: 8, reLay: 4, verify: 256, orFirst: 1, orAll: 0, words: 0},
	{name: "ordered", marks: 16, pend: 64, purge: 64, reLay: 4, verify: 256, orFirst: 16, orAll: 0, words: 8},
}

func (v attackVariant) set(t *testing.T) {
	t.Helper()
	a, b, c, d, e, f, g, h := maxMarks, pendMax, purgeMin, relayout, verifyWords, orFullFirst, orAllWords, orWordsBelow
	t.Cleanup(func() {
		maxMarks, pendMax, purgeMin, relayout, verifyWords, orFullFirst, orAllWords, orWordsBelow = a, b, c, d, e, f, g, h
	})
	maxMarks, pendMax, purgeMin, relayout, verifyWords, orFullFirst, orAllWords, orWordsBelow = v.marks, v.pend, v.purge, v.reLay, v.verify, v.orFirst, v.orAll, v.words
}

// denseCount returns the number of filters held by dense engines.
func attackDenseFilters(ix *Index) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.denseAt.len()
}

// TestAttackDenseEdgeValues fills the groups of a type hierarchy, and the
// AnyType group, with numeric filters in every mode whose bounds are at
// the edges of exact comparison (±0, 2^53±k as ints and floats, ±2^63,
// MaxInt64, MinInt64, ±MaxFloat64, subnormals), open and closed, and
// compares the index with the oracle on events with values at and next to
// those bounds, NaN, ±Inf, and values of other kinds, with filters removed
// and added between events.
func TestAttackDenseEdgeValues(t *testing.T) {
	o := attackOnt(t)
	attrs := []string{"i", "j", "f", "g"}
	types := []string{"Root", "Sub", "SubSub", "Other", "Nope", "Wide"}
	for _, v := range attackVariants {
		t.Run(v.name, func(t *testing.T) {
			v.set(t)
			r := rand.New(rand.NewPCG(18, uint64(v.marks)))
			ix, bf := NewIndex(o), NewBruteForce(o)
			var live []uint64
			next := uint64(1)
			add := func() {
				typ := []string{"Root", "Sub", AnyType, "SubSub"}[r.IntN(4)]
				f := MustBuild(attackSpec(r, typ, attrs, 4))
				require.NoError(t, ix.Add(next, f))
				require.NoError(t, bf.Add(next, f))
				live = append(live, next)
				next++
			}
			remove := func() {
				k := r.IntN(len(live))
				require.True(t, ix.Remove(live[k]))
				require.True(t, bf.Remove(live[k]))
				live = append(live[:k], live[k+1:]...)
			}
			bad := 0
			for step := range 2500 {
				add()
				if r.IntN(3) == 0 {
					remove()
				}
				if step%5 == 0 && !attackDiff(t, ix, bf, attackEvent(r, types, attrs, false)) {
					if bad++; bad > 3 {
						t.FailNow()
					}
				}
			}
			require.Positive(t, attackDenseFilters(ix), "filters reached a dense engine")
			for range 1500 {
				if !attackDiff(t, ix, bf, attackEvent(r, types, attrs, false)) {
					if bad++; bad > 3 {
						t.FailNow()
					}
				}
			}
			for len(live) > 10 {
				remove()
				if len(live)%7 == 0 && !attackDiff(t, ix, bf, attackEvent(r, types, attrs, false)) {
					if bad++; bad > 3 {
						t.FailNow()
					}
				}
			}
			require.Equal(t, bf.Len(), ix.Len())
		})
	}
}

// TestAttackDenseEdgeCases pins single cases at the edges, each with
// denseMinGroup filler filters so that the filter under test lives in a
// dense engine.
func TestAttackDenseEdgeCases(t *testing.T) {
	o := attackOnt(t)
	ev := func(typ string, kv ...any) *BasicEvent {
		e := &BasicEvent{Type: typ}
		for i := 0; i < len(kv); i += 2 {
			e.Attrs = append(e.Attrs, ontology.Attr{Name: kv[i].(string), Value: kv[i+1].(ontology.Value)})
		}
		return e
	}
	cases := []struct {
		name string
		f    Spec
		ev   *BasicEvent
	}{
		{"int 2^53+1 above float 2^53", Spec{Type: "Root", Predicates: []Predicate{Attr("i").GT(ontology.Float(1 << 53))}}, ev("Root", "i", ontology.Int(1<<53+1))},
		{"int 2^53+1 not <= float 2^53", Spec{Type: "Root", Predicates: []Predicate{Attr("i").LE(ontology.Float(1 << 53))}}, ev("Root", "i", ontology.Int(1<<53+1))},
		{"MaxInt64 below float 2^63", Spec{Type: "Root", Predicates: []Predicate{Attr("i").LT(ontology.Float(0x1p63))}}, ev("Root", "i", ontology.Int(math.MaxInt64))},
		{"MaxInt64 not >= float 2^63", Spec{Type: "Root", Predicates: []Predicate{Attr("i").GE(ontology.Float(0x1p63))}}, ev("Root", "i", ontology.Int(math.MaxInt64))},
		{"MinInt64 >= float -2^63", Spec{Type: "Root", Predicates: []Predicate{Attr("i").GE(ontology.Float(-0x1p63))}}, ev("Root", "i", ontology.Int(math.MinInt64))},
		{"MinInt64 not > int MinInt64", Spec{Type: "Root", Predicates: []Predicate{Attr("i").GT(ontology.Int(math.MinInt64))}}, ev("Root", "i", ontology.Int(math.MinInt64))},
		{"-0 in [0,1]", Spec{Type: "Root", Predicates: []Predicate{Attr("f").Range(ontology.Int(0), ontology.Int(1), false, false)}}, ev("Root", "f", ontology.Float(math.Copysign(0, -1)))},
		{"0 not in (-0.0,1]", Spec{Type: "Root", Predicates: []Predicate{Attr("f").Range(ontology.Float(math.Copysign(0, -1)), ontology.Int(1), true, false)}}, ev("Root", "f", ontology.Int(0))},
		{"+Inf > MaxFloat64", Spec{Type: "Root", Predicates: []Predicate{Attr("f").GT(ontology.Float(math.MaxFloat64))}}, ev("Root", "f", ontology.Float(math.Inf(1)))},
		{"-Inf < -MaxFloat64", Spec{Type: "Root", Predicates: []Predicate{Attr("f").LT(ontology.Float(-math.MaxFloat64))}}, ev("Root", "f", ontology.Float(math.Inf(-1)))},
		{"NaN not < MaxFloat64", Spec{Type: "Root", Predicates: []Predicate{Attr("f").LT(ontology.Float(math.MaxFloat64))}}, ev("Root", "f", ontology.Float(math.NaN()))},
		{"time not < 5", Spec{Type: AnyType, Predicates: []Predicate{Attr("i").LT(ontology.Int(5))}}, ev("Root", "i", ontology.TimeNanos(1))},
		{"string not < 5", Spec{Type: AnyType, Predicates: []Predicate{Attr("i").LT(ontology.Int(5))}}, ev("Other", "i", ontology.String("1"))},
		{"bool not < 5", Spec{Type: AnyType, Predicates: []Predicate{Attr("i").LT(ontology.Int(5))}}, ev("Root", "i", ontology.Bool(false))},
		{"subtype event", Spec{Type: "Root", Predicates: []Predicate{Attr("i").GE(ontology.Int(3))}}, ev("SubSub", "i", ontology.Int(3))},
		{"reserved type not AnyType", Spec{Type: AnyType, Predicates: []Predicate{Attr("i").GE(ontology.Int(3))}}, ev("sion.Control", "i", ontology.Int(3))},
		{"unknown type AnyType", Spec{Type: AnyType, Predicates: []Predicate{Attr("i").GE(ontology.Int(3))}}, ev("Nope", "i", ontology.Int(3))},
		{"atleast 1 of 2, one NaN", Spec{Type: "Root", Mode: ModeAtLeast, AtLeast: 1, Predicates: []Predicate{Attr("i").GE(ontology.Int(3)), Attr("f").LT(ontology.Int(3))}}, ev("Root", "i", ontology.Int(3), "f", ontology.Float(math.NaN()))},
		{"score 15+15 >= 29.5", Spec{Type: "Root", Mode: ModeScore, Threshold: 29.5, Predicates: []Predicate{Attr("i").GE(ontology.Int(3)).WithWeight(15), Attr("f").LT(ontology.Int(3)).WithWeight(15)}}, ev("Root", "i", ontology.Int(3), "f", ontology.Float(2.999999))},
		{"score 15+15 not >= 29.5 with one", Spec{Type: "Root", Mode: ModeScore, Threshold: 29.5, Predicates: []Predicate{Attr("i").GE(ontology.Int(3)).WithWeight(15), Attr("f").LT(ontology.Int(3)).WithWeight(15)}}, ev("Root", "i", ontology.Int(3), "f", ontology.Float(3))},
		{"score threshold just under total", Spec{Type: "Root", Mode: ModeScore, Threshold: math.Nextafter(16, 0), Predicates: []Predicate{Attr("i").GE(ontology.Int(3)).WithWeight(1), Attr("f").LT(ontology.Int(3)).WithWeight(15)}}, ev("Root", "i", ontology.Int(3), "f", ontology.Float(1))},
		{"repeated attribute both hold", Spec{Type: "Root", Predicates: []Predicate{Attr("i").GE(ontology.Int(3)), Attr("i").LT(ontology.Int(4))}}, ev("Root", "i", ontology.Int(3))},
		{"repeated attribute one fails", Spec{Type: "Root", Predicates: []Predicate{Attr("i").GE(ontology.Int(3)), Attr("i").LT(ontology.Int(3))}}, ev("Root", "i", ontology.Int(3))},
		{"missing attribute", Spec{Type: "Root", Predicates: []Predicate{Attr("i").GE(ontology.Int(3)), Attr("j").LT(ontology.Int(4))}}, ev("Root", "i", ontology.Int(3))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ix, bf := NewIndex(o), NewBruteForce(o)
			f := MustBuild(c.f)
			// Fillers of the same kind and type, which never match.
			for id := uint64(100); id < 100+2*denseMinGroup; id++ {
				spec := c.f
				spec.Predicates = append([]Predicate(nil), c.f.Predicates...)
				for i := range spec.Predicates {
					spec.Predicates[i] = Attr(spec.Predicates[i].Operand.Name).Range(ontology.Int(int64(id)), ontology.Int(int64(id)+1), false, false)
					spec.Predicates[i].Weight = c.f.Predicates[i].Weight
				}
				g := MustBuild(spec)
				require.NoError(t, ix.Add(id, g))
				require.NoError(t, bf.Add(id, g))
			}
			require.NoError(t, ix.Add(1, f))
			require.NoError(t, bf.Add(1, f))
			ix.mu.Lock()
			_, dense := ix.denseAt.get(1)
			ix.mu.Unlock()
			require.True(t, dense, "the filter under test lives in a dense engine")
			attackDiff(t, ix, bf, c.ev)
		})
	}
}

// TestAttackDenseRepeatedNameInvalidFirst: an event whose first value for
// a name is the zero Value ("no value") and whose second is valid. Eval
// takes the first occurrence (missing); the index comment says "a repeated
// name: the first counts, as in Eval", but it skips the invalid one and
// takes the second.
func TestAttackDenseRepeatedNameInvalidFirst(t *testing.T) {
	o := attackOnt(t)
	for _, n := range []int{1, 2 * denseMinGroup} { // postings, then dense
		t.Run(fmt.Sprintf("filters=%d", n), func(t *testing.T) {
			ix, bf := NewIndex(o), NewBruteForce(o)
			for id := range uint64(n) {
				f := MustBuild(Spec{Type: "Root", Predicates: []Predicate{Attr("i").GE(ontology.Int(int64(id)))}})
				require.NoError(t, ix.Add(id, f))
				require.NoError(t, bf.Add(id, f))
			}
			ev := &BasicEvent{Type: "Root", Attrs: []ontology.Attr{{Name: "i"}, {Name: "i", Value: ontology.Int(5)}}}
			attackDiff(t, ix, bf, ev)
		})
	}
}

// TestAttackDenseRepeatedNames: valid values repeated under one name; the
// first counts in both.
func TestAttackDenseRepeatedNames(t *testing.T) {
	o := attackOnt(t)
	attrs := []string{"i", "j", "f", "g"}
	r := rand.New(rand.NewPCG(1, 2))
	ix, bf := NewIndex(o), NewBruteForce(o)
	for id := range uint64(400) {
		f := MustBuild(attackSpec(r, "Root", attrs, 3))
		require.NoError(t, ix.Add(id, f))
		require.NoError(t, bf.Add(id, f))
	}
	for range 500 {
		ev := attackEvent(r, []string{"Root"}, attrs, true)
		for i := range ev.Attrs {
			if !ev.Attrs[i].Value.IsValid() {
				ev.Attrs[i].Value = ontology.Int(0)
			}
		}
		if !attackDiff(t, ix, bf, ev) {
			return
		}
	}
}

// TestAttackDenseManyAttrs: filters with up to 127 predicates and more
// than 64 distinct attributes in one type. The filter that makes the
// engine may itself pass the cap (newDense does not check fits); the
// rest must go to posting lists and still match.
func TestAttackDenseManyAttrs(t *testing.T) {
	o := attackOnt(t)
	wide := make([]string, 130)
	for i := range wide {
		wide[i] = fmt.Sprintf("w%d", i)
	}
	for _, v := range attackVariants[:2] {
		for _, mode := range []Mode{ModeAll, ModeAtLeast, ModeScore} {
			t.Run(fmt.Sprintf("%s/%v", v.name, mode), func(t *testing.T) {
				v.set(t)
				r := rand.New(rand.NewPCG(uint64(mode), 127))
				ix, bf := NewIndex(o), NewBruteForce(o)
				// Loose bounds, so that events match wide filters sometimes.
				pred := func(name string) Predicate {
					lo := int64(r.IntN(4))
					switch r.IntN(3) {
					case 0:
						return Attr(name).GE(ontology.Int(lo))
					case 1:
						return Attr(name).LT(ontology.Float(float64(lo) + 6.5))
					}
					return Attr(name).Range(ontology.Int(lo), ontology.Int(lo+6), r.IntN(2) == 0, false)
				}
				build := func(np int) *Filter {
					perm := r.Perm(len(wide))
					spec := Spec{Type: []string{"Wide", "Wide", AnyType}[r.IntN(3)], Mode: mode}
					total := 0.0
					for k := range np {
						p := pred(wide[perm[k]])
						if mode == ModeScore {
							p.Weight = float64(1 + r.IntN(15))
							total += p.Weight
						}
						spec.Predicates = append(spec.Predicates, p)
					}
					switch mode {
					case ModeAtLeast:
						spec.AtLeast = max(1, np-r.IntN(4))
					case ModeScore:
						spec.Threshold = max(0.5, total-float64(r.IntN(30)))
					}
					return MustBuild(spec)
				}
				id := uint64(0)
				add := func(np int) {
					f := build(np)
					require.NoError(t, ix.Add(id, f))
					require.NoError(t, bf.Add(id, f))
					id++
				}
				for range denseMinGroup - 1 {
					add(1 + r.IntN(3))
				}
				add(127) // makes the engine: 127 distinct attributes
				for range 150 {
					add([]int{1, 3, 10, 65, 70, 127}[r.IntN(6)])
				}
				require.Positive(t, attackDenseFilters(ix))
				for range 150 {
					ev := &BasicEvent{Type: []string{"Wide", "WideSub"}[r.IntN(2)]}
					for _, a := range wide {
						if r.IntN(40) == 0 {
							continue
						}
						ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a, Value: ontology.Int(int64(r.IntN(12)))})
					}
					if !attackDiff(t, ix, bf, ev) {
						return
					}
				}
				// Empty it again: every filter removable, Len back to 0.
				for i := range id {
					require.True(t, ix.Remove(i))
				}
				require.Zero(t, ix.Len())
			})
		}
	}
}

// TestAttackDenseChurn: an engine is filled, emptied (and dropped), made
// again under the same IDs; duplicate IDs are refused wherever the first
// lives; Remove twice reports false; re-adding a removed ID with another
// filter gives the new filter's matches; Len follows.
func TestAttackDenseChurn(t *testing.T) {
	o := attackOnt(t)
	ix, bf := NewIndex(o), NewBruteForce(o)
	ev := &BasicEvent{Type: "Sub", Attrs: []ontology.Attr{{Name: "i", Value: ontology.Int(10)}, {Name: "f", Value: ontology.Float(0.5)}}}
	match := func(id uint64, lo int64) *Filter {
		return MustBuild(Spec{Type: "Root", Predicates: []Predicate{Attr("i").GE(ontology.Int(lo)), Attr("f").LT(ontology.Int(1))}})
	}
	for round := range 6 {
		n := uint64(denseMinGroup*(round+1) + round)
		for id := range n {
			f := match(id, int64(id%20)) // matches ev when id%20 <= 10
			require.NoError(t, ix.Add(id, f))
			require.NoError(t, bf.Add(id, f))
		}
		require.Equal(t, int(n), ix.Len())
		require.Equal(t, int(n), attackDenseFilters(ix), "round %d: all in the engine", round)
		require.ErrorIs(t, ix.Add(0, match(0, 0)), ErrDuplicateID)
		require.ErrorIs(t, ix.Add(n-1, MustCompile(`{type ⊑ Root; i == 3}`)), ErrDuplicateID)
		// a non-dense filter, then a dense one under its ID
		require.NoError(t, ix.Add(1<<40, MustCompile(`{type ⊑ Root; i == 10}`)))
		require.NoError(t, bf.Add(1<<40, MustCompile(`{type ⊑ Root; i == 10}`)))
		require.ErrorIs(t, ix.Add(1<<40, match(0, 0)), ErrDuplicateID)
		require.Equal(t, int(n)+1, ix.Len())
		attackDiff(t, ix, bf, ev)
		// remove every other, twice
		for id := uint64(0); id < n; id += 2 {
			require.True(t, ix.Remove(id))
			require.False(t, ix.Remove(id))
			require.True(t, bf.Remove(id))
		}
		attackDiff(t, ix, bf, ev)
		// re-add a removed ID with a filter that does not match
		require.NoError(t, ix.Add(0, match(0, 11)))
		require.NoError(t, bf.Add(0, match(0, 11)))
		attackDiff(t, ix, bf, ev)
		// empty everything
		for id := uint64(0); id < n; id++ {
			require.Equal(t, bf.Remove(id), ix.Remove(id), "id %d", id)
		}
		require.True(t, ix.Remove(1<<40))
		require.True(t, bf.Remove(1<<40))
		require.Zero(t, ix.Len())
		require.Zero(t, attackDenseFilters(ix))
		got := collect(ix, ev)
		require.Empty(t, got)
		rt, _ := o.Lookup("Root")
		for _, d := range ix.inst {
			if g := d.groups[rt.ID+1]; g != nil {
				require.Nil(t, g.dense[denseAll], "an empty engine is dropped")
				require.Zero(t, g.eligible[denseAll])
			}
		}
		ix.mu.Lock()
		require.Empty(t, ix.keys, "every key released")
		require.Empty(t, ix.attrRefs, "every attribute key released")
		ix.mu.Unlock()
	}
}

// TestAttackDenseLayoutRenumber: many thousands of filters, so that
// engines lay out anew and renumber slots many times; then every filter
// is removed by ID one at a time, checking that exactly it disappears
// (denseAt follows the renumbering).
func TestAttackDenseLayoutRenumber(t *testing.T) {
	o := attackOnt(t)
	for _, v := range []attackVariant{attackVariants[0], attackVariants[1]} {
		t.Run(v.name, func(t *testing.T) {
			v.set(t)
			ix := NewIndex(o)
			r := rand.New(rand.NewPCG(9, 9))
			// every filter matches evAll; each also matches its own probe
			// event only: i == id as the range [id, id].
			const n = 12000
			mk := func(id uint64) *Filter {
				preds := []Predicate{Attr("i").Range(ontology.Int(int64(id)), ontology.Int(int64(id)), false, false)}
				if r.IntN(2) == 0 {
					preds = append(preds, Attr("f").GE(ontology.Int(-1)))
				}
				spec := Spec{Type: []string{"Root", "Sub"}[id%2], Predicates: preds}
				if id%3 == 0 {
					spec.Mode, spec.AtLeast = ModeAtLeast, len(preds)
				}
				return MustBuild(spec)
			}
			var live []uint64
			for id := range uint64(n) {
				require.NoError(t, ix.Add(id, mk(id)))
				live = append(live, id)
				if r.IntN(2) == 0 {
					k := r.IntN(len(live))
					require.True(t, ix.Remove(live[k]))
					live = append(live[:k], live[k+1:]...)
				}
			}
			layouts := 0
			for _, g := range ix.inst[0].groups {
				if g != nil {
					for _, dn := range g.dense {
						if dn != nil {
							layouts += dn.layouts
						}
					}
				}
			}
			require.Greater(t, layouts, 4)
			probe := func(id uint64) matchResult {
				return collect(ix, &BasicEvent{Type: "Sub", Attrs: []ontology.Attr{{Name: "i", Value: ontology.Int(int64(id))}, {Name: "f", Value: ontology.Int(0)}}})
			}
			r.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
			for k, id := range live {
				if k%16 == 0 {
					require.Contains(t, probe(id), id)
				}
				require.True(t, ix.Remove(id), "id %d", id)
				require.False(t, ix.Remove(id))
				if k%16 == 0 {
					assert.Empty(t, probe(id), "after removing %d", id)
					if k+1 < len(live) {
						require.Contains(t, probe(live[k+1]), live[k+1], "the next filter is still there")
					}
				}
				require.Equal(t, len(live)-k-1, ix.Len())
			}
		})
	}
}

// TestAttackDenseCallbackWrites: Match's callback adds and removes dense
// filters (allowed by the doc), enough to lay engines out and to drop and
// recreate them, and the index still agrees with the oracle.
func TestAttackDenseCallbackWrites(t *testing.T) {
	o := attackOnt(t)
	attrs := []string{"i", "j", "f", "g"}
	for _, v := range attackVariants[:2] {
		t.Run(v.name, func(t *testing.T) {
			v.set(t)
			r := rand.New(rand.NewPCG(4, 4))
			ix, bf := NewIndex(o), NewBruteForce(o)
			var live []uint64
			next := uint64(0)
			add := func() {
				f := MustBuild(attackSpec(r, []string{"Root", "Sub", AnyType}[r.IntN(3)], attrs, 3))
				require.NoError(t, ix.Add(next, f))
				require.NoError(t, bf.Add(next, f))
				live = append(live, next)
				next++
			}
			for range 200 {
				add()
			}
			for range 150 {
				ev := attackEvent(r, []string{"Root", "Sub"}, attrs, false)
				want := collect(bf, ev)
				got := matchResult{}
				ix.Match(ev, func(id uint64, score float64) {
					got[id] = score
					for range 1 + r.IntN(30) {
						if r.IntN(2) == 0 || len(live) < 10 {
							add()
						} else {
							k := r.IntN(len(live))
							require.True(t, ix.Remove(live[k]))
							require.True(t, bf.Remove(live[k]))
							live = append(live[:k], live[k+1:]...)
						}
					}
					// and a nested Match
					collect(ix, ev)
				})
				require.True(t, assertSameMatches(t, want, got), "callback run: want %d, got %d", len(want), len(got))
				if !attackDiff(t, ix, bf, ev) {
					return
				}
			}
		})
	}
}

// TestAttackDenseConcurrent: several goroutines Match while writers add and
// remove dense filters of every mode, on three types and AnyType, with
// events of every value kind. A Match must report every stable filter
// that matches the event, and no filter that does not match it.
func TestAttackDenseConcurrent(t *testing.T) {
	o := attackOnt(t)
	attrs := []string{"i", "j", "f", "g"}
	attackVariants[1].set(t)
	r := rand.New(rand.NewPCG(7, 7))
	ix := NewIndex(o)
	var filters sync.Map // id → *Filter, stored before Add
	const stable = 300
	stableF := make([]*Filter, stable)
	for id := range uint64(stable) {
		f := MustBuild(attackSpec(r, []string{"Root", "Sub", AnyType}[r.IntN(3)], attrs, 3))
		stableF[id] = f
		filters.Store(id, f)
		require.NoError(t, ix.Add(id, f))
	}
	events := make([]*BasicEvent, 64)
	for i := range events {
		events[i] = attackEvent(r, []string{"Root", "Sub", "SubSub", "Other"}, attrs, false)
	}
	stop := stableReaders(t, o, ix, &filters, stableF, events, 3, 1)
	var live []uint64
	next := uint64(1 << 32)
	deadline := time.Now().Add(20 * time.Second)
	for n := 0; n < 8000 && time.Now().Before(deadline); n++ {
		f := MustBuild(attackSpec(r, []string{"Root", "Sub", "SubSub", AnyType}[r.IntN(4)], attrs, 4))
		filters.Store(next, f)
		require.NoError(t, ix.Add(next, f))
		live = append(live, next)
		next++
		for len(live) > 0 && r.IntN(5) < 3 {
			k := r.IntN(len(live))
			require.True(t, ix.Remove(live[k]))
			live = append(live[:k], live[k+1:]...)
		}
		if n%1000 == 999 { // empty the churned filters out: engines drop and remake
			for _, id := range live {
				require.True(t, ix.Remove(id))
			}
			live = live[:0]
		}
	}
	require.Positive(t, stop())
	require.Equal(t, stable+len(live), ix.Len())
}

// stableReaders starts readers goroutines that Match the events in turn
// until stop is called, and checks every result: each stable filter
// (IDs 0…len(stableF)-1, in ix throughout) is reported exactly when it
// matches the event, with its score, and any other filter reported was
// added (filters holds id → *Filter, stored before Add) and matches the
// event with the score reported. stop waits for the readers and returns
// how many Matches they checked.
func stableReaders(t *testing.T, o *ontology.Ontology, ix *Index, filters *sync.Map, stableF []*Filter, events []*BasicEvent, readers int, seed uint64) (stop func() int64) {
	t.Helper()
	evalIn := func(f *Filter, ev Event) (bool, float64) {
		b := NewBruteForce(o)
		if b.Add(0, f) != nil {
			return false, 0
		}
		ok, s := false, 0.0
		b.Match(ev, func(_ uint64, score float64) { ok, s = true, score })
		return ok, s
	}
	// What each stable filter gives on each event.
	type res struct {
		ok    bool
		score float64
	}
	want := make([][]res, len(events))
	for e, ev := range events {
		want[e] = make([]res, len(stableF))
		for id, f := range stableF {
			ok, s := evalIn(f, ev)
			want[e][id] = res{ok, s}
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var checks atomic.Int64
	for g := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr := rand.New(rand.NewPCG(uint64(g), seed))
			for {
				select {
				case <-done:
					return
				default:
				}
				e := rr.IntN(len(events))
				got := collect(ix, events[e])
				checks.Add(1)
				for id := range stableF {
					if w := want[e][id]; w.ok {
						if s, ok := got[uint64(id)]; !ok || s != w.score {
							t.Errorf("event %d %v: stable filter %d %s matches (score %v) but got %v/%v", e, events[e].Attrs, id, stableF[id], w.score, ok, s)
							return
						}
					}
				}
				for id, s := range got {
					f, ok := filters.Load(id)
					if !ok {
						t.Errorf("event %d: filter %d reported but never added", e, id)
						return
					}
					if ok, ws := evalIn(f.(*Filter), events[e]); !ok || ws != s {
						t.Errorf("event %d: filter %d %s reported with %v; it gives %v/%v", e, id, f, s, ok, ws)
						return
					}
				}
			}
		}()
	}
	return func() int64 {
		close(done)
		wg.Wait()
		return checks.Load()
	}
}

// attackPoolDrops reports whether sync.Pool drops items it is given, as it
// does on purpose under the race detector.
func attackPoolDrops() bool {
	made := 0
	p := sync.Pool{New: func() any { made++; return new(int) }}
	x := p.Get()
	for range 200 {
		p.Put(x)
		x = p.Get()
	}
	return made > 1
}

// TestAttackDenseAllocs: Match allocates nothing for attribute-only events
// once warm, for match-all and counting engines, large enough to have
// several chunks' worth of words and laid-out bitsets.
func TestAttackDenseAllocs(t *testing.T) {
	o := attackOnt(t)
	attrs := []string{"i", "j", "f", "g"}
	r := rand.New(rand.NewPCG(3, 3))
	ix := NewIndex(o)
	for id := range uint64(5000) {
		require.NoError(t, ix.Add(id, MustBuild(attackSpec(r, []string{"Root", "Sub", AnyType}[r.IntN(3)], attrs, 4))))
	}
	require.Positive(t, attackDenseFilters(ix))
	evs := make([]*BasicEvent, 16)
	for i := range evs {
		evs[i] = attackEvent(r, []string{"Root", "SubSub"}, attrs, false)
	}
	for _, ev := range evs {
		collect(ix, ev) // warm the scratch
	}
	if attackPoolDrops() {
		// Not a failure of the index: under -race, sync.Pool drops a
		// quarter of its Puts on purpose, so Match's pooled scratch is
		// remade. Run this test without -race.
		t.Skip("sync.Pool drops items under the race detector; run without -race")
	}
	i := 0
	n := 0
	fn := func(uint64, float64) { n++ }
	allocs := testing.AllocsPerRun(200, func() {
		ix.Match(evs[i%len(evs)], fn)
		i++
	})
	assert.Zero(t, allocs, "allocations per Match")
}

// TestAttackDenseKeyReuse: the dense filters on one attribute are all
// removed while the engine keeps them as dead slots (no layout yet), so
// the attribute's key ID is freed and reused: first by a JSON path (the
// engine's stale attribute now reads a payload value), then by another
// attribute that joins the same engine. Matches must stay exact.
func TestAttackDenseKeyReuse(t *testing.T) {
	o := attackOnt(t)
	ix, bf := NewIndex(o), NewBruteForce(o)
	add := func(id uint64, f *Filter) {
		t.Helper()
		require.NoError(t, ix.Add(id, f))
		require.NoError(t, bf.Add(id, f))
	}
	for id := range uint64(100) { // stay: keep the engine alive and without layout
		add(id, MustBuild(Spec{Type: "Root", Predicates: []Predicate{Attr("j").GE(ontology.Int(int64(id % 10)))}}))
	}
	for id := uint64(100); id < 140; id++ { // go: free the key of "i"
		add(id, MustBuild(Spec{Type: "Root", Predicates: []Predicate{Attr("i").Range(ontology.Int(0), ontology.Int(int64(id)), false, false)}}))
	}
	for id := uint64(100); id < 140; id++ {
		require.True(t, ix.Remove(id))
		require.True(t, bf.Remove(id))
	}
	// i's key goes to a JSON path, then to attribute f, in the engine.
	add(1000, MustCompile(`{type ⊑ Root; json(i) > 5}`))
	for id := uint64(2000); id < 2010; id++ {
		add(id, MustBuild(Spec{Type: "Root", Predicates: []Predicate{Attr("f").LT(ontology.Float(float64(id-2000) + 0.5)), Attr("j").GE(ontology.Int(0))}}))
	}
	for id := uint64(3000); id < 3010; id++ {
		add(id, MustBuild(Spec{Type: "Root", Predicates: []Predicate{Attr("i").GT(ontology.Int(int64(id - 3000)))}}))
	}
	r := rand.New(rand.NewPCG(5, 5))
	for range 300 {
		ev := &BasicEvent{Type: []string{"Root", "Sub"}[r.IntN(2)], ContentType: "application/json",
			Data: []byte(fmt.Sprintf(`{"i": %d, "f": %d}`, r.IntN(12), r.IntN(12)))}
		for _, a := range []string{"i", "j", "f"} {
			if r.IntN(4) > 0 {
				ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a, Value: ontology.Int(int64(r.IntN(12)))})
			}
		}
		if !attackDiff(t, ix, bf, ev) {
			return
		}
	}
}

// TestAttackDenseAttrCapOneWideFilter: the filter that makes a group's
// engine is not checked against the attribute cap (newDense has no fits
// test), so one filter on 100 distinct attributes, added as the 32nd
// eligible filter of a type, makes an engine of 100 attributes
// (denseMaxAttrs is 64). Matches stay exact (flush's uint64 touched mask
// silently drops attributes 64 on, so that filter is always verified), but
// the 31 waiting filters stay in postings and every later eligible filter
// of the type fails fits and goes to postings too: one subscriber turns
// the dense engine off for the whole type. Expected: the wide filter goes
// to postings (or an engine of its own kind never exceeds the cap), and
// the narrow filters get their engine.
func TestAttackDenseAttrCapOneWideFilter(t *testing.T) {
	o := attackOnt(t)
	ix, bf := NewIndex(o), NewBruteForce(o)
	add := func(id uint64, f *Filter) {
		t.Helper()
		require.NoError(t, ix.Add(id, f))
		require.NoError(t, bf.Add(id, f))
	}
	for id := range uint64(denseMinGroup - 1) {
		add(id, MustBuild(Spec{Type: "Wide", Predicates: []Predicate{Attr("w0").GT(ontology.Int(int64(id)))}}))
	}
	var preds []Predicate
	for i := range 100 {
		preds = append(preds, Attr(fmt.Sprintf("w%d", i)).GT(ontology.Int(1)))
	}
	add(99, MustBuild(Spec{Type: "Wide", Predicates: preds}))
	for id := uint64(100); id < 400; id++ {
		add(id, MustBuild(Spec{Type: "Wide", Predicates: []Predicate{Attr("w1").LT(ontology.Int(int64(id)))}}))
	}
	ev := &BasicEvent{Type: "Wide"}
	for i := range 100 {
		ev.Attrs = append(ev.Attrs, ontology.Attr{Name: fmt.Sprintf("w%d", i), Value: ontology.Int(2)})
	}
	attackDiff(t, ix, bf, ev)
	wt, _ := o.Lookup("Wide")
	dn := ix.inst[0].groups[wt.ID+1].dense[denseAll]
	require.NotNil(t, dn)
	assert.LessOrEqual(t, len(dn.cur.Load().attrs), denseMaxAttrs, "attributes in one engine")
	assert.GreaterOrEqual(t, attackDenseFilters(ix), 300, "narrow eligible filters in the dense engine")
}

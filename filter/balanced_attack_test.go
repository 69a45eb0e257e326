package filter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// Attack tests for the growth check of dense engines (balanced, recount,
// spread, onesLive), written by a reviewer: engines grown past relayout
// times their layout with adversarial bounds, compared with the oracle.

// balAttrs are the attributes of balOnt's type B.
var balAttrs = []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"}

func balOnt(t testing.TB) *ontology.Ontology {
	t.Helper()
	var as []ontology.Attribute
	for i, n := range balAttrs {
		k := ontology.KindInt
		if i%2 == 1 {
			k = ontology.KindFloat
		}
		as = append(as, ontology.Attribute{Name: n, Kind: k})
	}
	o, err := ontology.New([]ontology.TypeDef{{Name: "B", Attributes: as}, {Name: "C", Parents: []string{"B"}}})
	require.NoError(t, err)
	return o
}

// balGen makes the bounds of the i-th filter added.
type balGen struct {
	name string
	// bound returns a bound for attribute attr of the i-th filter.
	bound func(r *rand.Rand, i, attr int) ontology.Value
	// ops: which comparisons to use: 0 ranges and comparisons, 1 only
	// > and >=, 2 only < and <=.
	ops int
	// attrs: how many attributes filters use (1..len(balAttrs)).
	attrs int
}

func balFloat(f float64) ontology.Value { return ontology.Float(f) }

var balGens = []balGen{
	{name: "allequal", attrs: 2, bound: func(r *rand.Rand, i, a int) ontology.Value { return ontology.Int(7) }},
	{name: "allequal-ge", attrs: 1, ops: 1, bound: func(r *rand.Rand, i, a int) ontology.Value { return ontology.Int(7) }},
	{name: "zeros", attrs: 2, bound: func(r *rand.Rand, i, a int) ontology.Value {
		return []ontology.Value{balFloat(0), balFloat(math.Copysign(0, -1)), ontology.Int(0)}[r.IntN(3)]
	}},
	{name: "inf", attrs: 3, bound: func(r *rand.Rand, i, a int) ontology.Value {
		return []ontology.Value{balFloat(math.Inf(1)), balFloat(math.Inf(-1)), balFloat(math.MaxFloat64), balFloat(-math.MaxFloat64), ontology.Int(int64(r.IntN(5)))}[r.IntN(5)]
	}},
	{name: "near2p53", attrs: 2, bound: func(r *rand.Rand, i, a int) ontology.Value {
		if r.IntN(2) == 0 {
			return ontology.Int(1<<53 + int64(r.IntN(8)) - 4)
		}
		return balFloat(float64(1<<53 + 2*(r.IntN(8)-4)))
	}},
	{name: "huge", attrs: 2, bound: func(r *rand.Rand, i, a int) ontology.Value {
		return balFloat(math.Ldexp(float64(r.IntN(1000)-500), 900+r.IntN(120)))
	}},
	{name: "gt-only", attrs: 3, ops: 1, bound: func(r *rand.Rand, i, a int) ontology.Value { return ontology.Int(int64(r.IntN(1000))) }},
	{name: "lt-only", attrs: 3, ops: 2, bound: func(r *rand.Rand, i, a int) ontology.Value { return ontology.Int(int64(r.IntN(1000))) }},
	{name: "drift", attrs: 2, bound: func(r *rand.Rand, i, a int) ontology.Value {
		return ontology.Int(int64(i/8 + r.IntN(1000)))
	}},
	{name: "drift-fast", attrs: 1, bound: func(r *rand.Rand, i, a int) ontology.Value {
		return ontology.Int(int64(i*3 + r.IntN(50)))
	}},
	{name: "one-drifts", attrs: 8, bound: func(r *rand.Rand, i, a int) ontology.Value {
		if a == 5 {
			return balFloat(float64(i) + r.Float64())
		}
		return ontology.Int(int64(r.IntN(1000)))
	}},
	{name: "widening", attrs: 2, bound: func(r *rand.Rand, i, a int) ontology.Value {
		return ontology.Int(int64(r.IntN(10 + i)))
	}},
	{name: "narrowing-cluster", attrs: 2, bound: func(r *rand.Rand, i, a int) ontology.Value {
		if i > 3000 {
			return ontology.Int(500)
		}
		return ontology.Int(int64(r.IntN(1000)))
	}},
}

// balSpec returns a filter on type B (or C) from gen.
func balSpec(r *rand.Rand, gen balGen, i int, counting bool) Spec {
	spec := Spec{Type: "B"}
	if r.IntN(10) == 0 {
		spec.Type = "C"
	}
	np := 1 + r.IntN(min(3, gen.attrs))
	perm := r.Perm(gen.attrs)
	for k := range np {
		a := perm[k]
		op := Attr(balAttrs[a])
		v := gen.bound(r, i, a)
		var p Predicate
		switch gen.ops {
		case 1:
			p = []func(ontology.Value) Predicate{op.GT, op.GE}[r.IntN(2)](v)
		case 2:
			p = []func(ontology.Value) Predicate{op.LT, op.LE}[r.IntN(2)](v)
		default:
			switch r.IntN(5) {
			case 0:
				p = op.LT(v)
			case 1:
				p = op.GE(v)
			default:
				w := gen.bound(r, i, a)
				if c, _ := ontology.Compare(v, w); c > 0 {
					v, w = w, v
				}
				p = rangeOK(op, v, w, r.IntN(2) == 0, r.IntN(2) == 0)
			}
		}
		spec.Predicates = append(spec.Predicates, p)
	}
	if counting && np > 1 {
		switch r.IntN(2) {
		case 0:
			spec.Mode = ModeAtLeast
			spec.AtLeast = 1 + r.IntN(np)
		case 1:
			spec.Mode = ModeScore
			total := 0.0
			for k := range spec.Predicates {
				w := []float64{1, 2, 15, 0.5}[r.IntN(4)]
				spec.Predicates[k].Weight = w
				total += w
			}
			spec.Threshold = []float64{total, 1, total / 2}[r.IntN(3)]
			clampThreshold(&spec)
		}
	}
	return spec
}

// balEvent returns an event whose values are bounds of gen at time i, or
// neighbours, edges, or missing.
func balEvent(r *rand.Rand, gen balGen, i int) *BasicEvent {
	ev := &BasicEvent{Type: []string{"B", "C"}[r.IntN(2)]}
	for a := range gen.attrs {
		if r.IntN(10) == 0 {
			continue
		}
		var v ontology.Value
		switch r.IntN(6) {
		case 0:
			v = attackValue(r)
		case 1:
			v = gen.bound(r, r.IntN(i+1), a)
		default:
			v = attackNear(r, gen.bound(r, r.IntN(i+1), a))
		}
		ev.Attrs = append(ev.Attrs, ontology.Attr{Name: balAttrs[a], Value: v})
	}
	return ev
}

// TestAttackBalancedBounds grows dense engines through many growth checks
// with adversarial bounds (all equal, ±0, ±Inf, huge, near 2^53, one-sided
// only, drifting, one attribute of eight drifting, widening, collapsing
// onto one value), in plain and counting modes, with engines that shrink
// by Remove and grow again, and compares with the oracle after every
// burst of adds.
func TestAttackBalancedBounds(t *testing.T) {
	defer setChunkShift(10)()
	o := balOnt(t)
	for _, gen := range balGens {
		for _, counting := range []bool{false, true} {
			for vi, v := range []attackVariant{attackVariants[0], {name: "relayout2", marks: 3, pend: 64, purge: 64, reLay: 2, verify: 256, orFirst: 8, orAll: 2048}} {
				t.Run(fmt.Sprintf("%s/counting=%v/%s", gen.name, counting, v.name), func(t *testing.T) {
					v.set(t)
					r := rand.New(rand.NewPCG(uint64(vi), uint64(len(gen.name))))
					ix, bf := NewIndex(o), NewBruteForce(o)
					var live []uint64
					id := uint64(0)
					add := func(i int) {
						f, err := Build(balSpec(r, gen, i, counting))
						if err != nil {
							return
						}
						require.NoError(t, ix.Add(id, f))
						require.NoError(t, bf.Add(id, f))
						live = append(live, id)
						id++
					}
					check := func(i, n int) {
						t.Helper()
						for range n {
							if !attackDiff(t, ix, bf, balEvent(r, gen, i)) {
								t.FailNow()
							}
						}
					}
					i := 0
					for round := range 2 {
						for target := 2500 + 1000*round; len(live) < target; i++ {
							add(i)
							if len(live)%97 == 0 {
								check(i, 3)
							}
						}
						check(i, 40)
						// shrink by Remove to a tenth, from random places
						for len(live) > 250 {
							k := r.IntN(len(live))
							require.True(t, ix.Remove(live[k]))
							require.True(t, bf.Remove(live[k]))
							live[k] = live[len(live)-1]
							live = live[:len(live)-1]
							if len(live)%211 == 0 {
								check(i, 2)
							}
						}
						check(i, 20)
					}
				})
			}
		}
	}
}

// TestAttackBalancedConcurrent runs Match from several goroutines while
// the writer grows engines through growth checks (balanced counts and
// stores held and pres while readers order their ORs by them) and removes
// filters; every stable filter that matches must be reported, with its
// score, and nothing never added.
func TestAttackBalancedConcurrent(t *testing.T) {
	defer setChunkShift(10)()
	o := balOnt(t)
	for _, gen := range []balGen{balGens[8], balGens[10], balGens[6], balGens[0]} {
		t.Run(gen.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			ix := NewIndex(o)
			var filters sync.Map
			const stable = 400
			stableF := make([]*Filter, stable)
			for id := range uint64(stable) {
				var f *Filter
				for f == nil {
					f, _ = Build(balSpec(r, gen, int(id), true))
				}
				stableF[id] = f
				filters.Store(id, f)
				require.NoError(t, ix.Add(id, f))
			}
			events := make([]*BasicEvent, 64)
			for i := range events {
				events[i] = balEvent(r, gen, 20000)
			}
			stop := stableReaders(t, o, ix, &filters, stableF, events, 4, 9)
			var live []uint64
			next := uint64(1 << 32)
			deadline := time.Now().Add(8 * time.Second)
			for n := 0; n < 20000 && time.Now().Before(deadline); n++ {
				f, err := Build(balSpec(r, gen, n, r.IntN(2) == 0))
				if err != nil {
					continue
				}
				filters.Store(next, f)
				require.NoError(t, ix.Add(next, f))
				live = append(live, next)
				next++
				if r.IntN(5) == 0 && len(live) > 0 {
					k := r.IntN(len(live))
					require.True(t, ix.Remove(live[k]))
					live[k] = live[len(live)-1]
					live = live[:len(live)-1]
				}
				if n%7000 == 6999 {
					for _, id := range live[:len(live)*9/10] {
						require.True(t, ix.Remove(id))
					}
					live = append(live[:0], live[len(live)*9/10:]...)
				}
			}
			require.Positive(t, stop())
			require.Equal(t, stable+len(live), ix.Len())
		})
	}
}

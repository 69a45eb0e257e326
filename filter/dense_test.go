package filter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// TestDenseMatchesOracle fills groups with enough numeric-interval filters
// for the dense engine to take them (and to lay out cells and checkpoint
// bitsets several times), removes some, and compares every event's matches
// with the oracle: values at and between bounds, int and float mixed around
// 2^53, missing attributes, NaN and values of the wrong kind. It then
// removes most filters, so that engines purge their dead slots, adds more
// (which reuse them), and compares again.
func TestDenseMatchesOracle(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "Root", Attributes: []ontology.Attribute{
			{Name: "i0", Kind: ontology.KindInt}, {Name: "i1", Kind: ontology.KindInt},
			{Name: "f0", Kind: ontology.KindFloat}, {Name: "f1", Kind: ontology.KindFloat},
		}},
		{Name: "Sub", Parents: []string{"Root"}},
	})
	require.NoError(t, err)
	attrs := []string{"i0", "i1", "f0", "f1"}
	for _, c := range []struct{ n, marks, cells, perCell int }{{300, 64, 4096, 32}, {3000, 64, 4096, 32}, {3000, 4, 64, 8}, {5000, 3, 17, 4}, {4000, 7, 1000, 2}} {
		n := c.n
		t.Run(fmt.Sprintf("n=%d/marks=%d/cells=%d/boundsPerCell=%d", n, c.marks, c.cells, c.perCell), func(t *testing.T) {
			defer func(a, b, c, d, e, f, g int) {
				maxMarks, maxCells, boundsPerCell, purgeMin, pendMax, verifyWords, orFullFirst = a, b, c, d, e, f, g
			}(maxMarks, maxCells, boundsPerCell, purgeMin, pendMax, verifyWords, orFullFirst)
			maxMarks, maxCells, boundsPerCell, purgeMin = c.marks, c.cells, c.perCell, 8
			switch c.marks {
			case 4: // match stops ORing at once and verifies every filter left
				verifyWords, orFullFirst = -1000, 0
			case 7: // match skips full lines after the first bitset
				orFullFirst = 1
			}
			if c.perCell < 32 {
				pendMax = 1 + c.perCell
			}
			r := rand.New(rand.NewPCG(uint64(n), 7))
			num := func() ontology.Value {
				switch r.IntN(6) {
				case 0:
					return ontology.Float(float64(r.IntN(200))/2 - 0.25)
				case 1:
					return ontology.Int(1<<53 + int64(r.IntN(3)))
				case 2:
					return ontology.Float(1 << 53)
				}
				return ontology.Int(int64(r.IntN(100)))
			}
			pred := func(name string) Predicate {
				a := Attr(name)
				switch r.IntN(5) {
				case 0:
					return a.LT(num())
				case 1:
					return a.GE(num())
				case 2:
					return a.GT(num())
				case 3:
					return a.LE(num())
				}
				lo, hi := num(), num()
				if c, _ := ontology.Compare(lo, hi); c > 0 {
					lo, hi = hi, lo
				}
				return rangeOK(a, lo, hi, r.IntN(2) == 0, r.IntN(2) == 0)
			}
			ix, bf := NewIndex(o), NewBruteForce(o)
			var live []uint64
			next := uint64(1)
			add := func() {
				id := next
				next++
				spec := Spec{Type: []string{"Root", "Sub", AnyType}[r.IntN(3)]}
				np := 1 + r.IntN(4)
				perm := r.Perm(len(attrs)) // distinct attributes, as counting engines need
				for k := 0; k < np; k++ {
					name := attrs[perm[k]]
					if r.IntN(8) == 0 {
						name = attrs[r.IntN(len(attrs))] // sometimes a repeat: not for counting engines
					}
					spec.Predicates = append(spec.Predicates, pred(name))
				}
				switch r.IntN(3) {
				case 1:
					spec.Mode, spec.AtLeast = ModeAtLeast, 1+r.IntN(np)
				case 2:
					spec.Mode = ModeScore
					total := 0.0
					for i := range spec.Predicates {
						w := float64(1 + r.IntN(3))
						if r.IntN(10) == 0 {
							w = 1.5 // not integral: not for counting engines
						}
						spec.Predicates[i].Weight = w
						total += w
					}
					spec.Threshold = float64(r.IntN(int(total)+1)) + []float64{0, 0.5, 1}[r.IntN(3)]
					if spec.Threshold <= 0 {
						spec.Threshold = 0.5
					}
					clampThreshold(&spec)
				}
				f := MustBuild(spec)
				require.NoError(t, ix.Add(id, f))
				require.NoError(t, bf.Add(id, f))
				live = append(live, id)
			}
			remove := func() {
				k := r.IntN(len(live))
				require.True(t, ix.Remove(live[k]))
				require.True(t, bf.Remove(live[k]))
				live = append(live[:k], live[k+1:]...)
			}
			check := func() {
				for e := 0; e < 400; e++ {
					checkDenseEvent(t, r, ix, bf, attrs, num)
				}
			}
			for range n {
				add()
				if r.IntN(4) == 0 {
					remove()
				}
			}
			check()
			// The engine took the filters: the groups have one.
			d := ix.inst[ix.side.Load()]
			engines, marks, counting := 0, 0, 0
			for _, g := range d.groups {
				if g == nil {
					continue
				}
				for kind, dn := range g.dense {
					if dn != nil {
						require.Zero(t, g.eligible[kind], "eligible filters moved into the engine when it was made")
						engines++
						counting += kind
						for _, a := range dn.list {
							marks += len(a.lo.marks) + len(a.hi.marks)
						}
					}
				}
			}
			require.Positive(t, engines)
			require.Positive(t, counting, "a counting engine was made")
			if c.perCell < 32 {
				require.Positive(t, marks, "checkpoint bitsets were laid out")
			}

			// Remove four in five (engines purge), check, add back (freed
			// slots are reused), check.
			for len(live) > n/5 {
				remove()
				if len(live)%97 == 0 {
					checkDenseEvent(t, r, ix, bf, attrs, num)
				}
			}
			check()
			purged := 0
			for _, g := range ix.inst[ix.side.Load()].groups {
				if g == nil {
					continue
				}
				for _, dn := range g.dense {
					if dn != nil && len(dn.free) > 0 {
						purged++
					}
				}
			}
			require.Positive(t, purged, "an engine purged its dead slots")
			for range n / 2 {
				add()
			}
			check()
		})
	}
}

// checkDenseEvent compares the index with the oracle on one random event.
func checkDenseEvent(t *testing.T, r *rand.Rand, ix *Index, bf *BruteForce, attrs []string, num func() ontology.Value) {
	t.Helper()
	ev := &BasicEvent{Type: []string{"Root", "Sub", "Other"}[r.IntN(3)]}
	for _, a := range attrs {
		switch r.IntN(12) {
		case 0:
			continue
		case 1:
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a, Value: ontology.Float(math.NaN())})
		case 2:
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a, Value: ontology.String("7")})
		default:
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a, Value: num()})
		}
	}
	want, got := collect(bf, ev), collect(ix, ev)
	require.True(t, assertSameMatches(t, want, got), "event %+v: want %d matches, got %d", ev, len(want), len(got))
}

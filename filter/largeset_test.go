package filter

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// largeSet returns n members of mixed kinds in no order: even ints, the
// same as floats (3 of every 8 numbers), halves, negatives, strings,
// times, bools, with -0.0 and repeats among them.
func largeSet(n int) []ontology.Value {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC).UnixNano()
	set := make([]ontology.Value, 0, n)
	for i := range n {
		k := int64((i * 7919) % max(n, 1)) // a permutation of 0…n−1 for n prime to 7919
		var v ontology.Value
		switch i % 9 {
		case 0, 1:
			v = ontology.Int(2 * k)
		case 2:
			v = ontology.Float(float64(2 * k))
		case 3:
			v = ontology.Float(float64(2*k) + 0.5)
		case 4:
			v = ontology.Int(-2*k - 1000)
		case 5:
			v = ontology.String(fmt.Sprintf("s%07d", 2*k))
		case 6:
			v = ontology.TimeNanos(t0 + 2*k)
		case 7:
			v = ontology.Bool(k%2 == 0)
		case 8:
			v = ontology.Float(math.Copysign(0, -1))
			if i%18 == 17 {
				v = ontology.Int(2 * k) // a repeat of a member above
			}
		}
		set = append(set, v)
	}
	return set
}

// setProbes returns values to look up in set: every member (or, for a
// large set, an even sample) and its twin of the other numeric kind, its
// neighbours (between members and outside them), values below and above
// all members, and values of every kind at their edges.
func setProbes(set []ontology.Value, most int) []ontology.Value {
	ps := recordValues()
	ps = append(ps, ontology.Int(math.MinInt64), ontology.Int(math.MaxInt64), ontology.Float(-1e300), ontology.Float(1e300),
		ontology.String("s"), ontology.String("t"), ontology.TimeNanos(math.MinInt64), ontology.TimeNanos(math.MaxInt64))
	step := max(1, len(set)/most)
	for i := 0; i < len(set); i += step {
		m := set[i]
		ps = append(ps, m)
		switch m.Kind() {
		case ontology.KindInt:
			n := m.Int()
			ps = append(ps, ontology.Float(float64(n)), ontology.Int(n+1), ontology.Int(n-1), ontology.Float(float64(n)+0.25))
		case ontology.KindFloat:
			f := m.Float()
			if f == math.Trunc(f) {
				ps = append(ps, ontology.Int(int64(f)))
			}
			ps = append(ps, ontology.Float(f+0.25), ontology.Float(f-0.25), ontology.Float(math.Nextafter(f, math.Inf(1))))
		case ontology.KindString:
			ps = append(ps, ontology.String(m.Str()+"!"), ontology.String(m.Str()[:len(m.Str())-1]))
		case ontology.KindTime:
			ps = append(ps, ontology.TimeNanos(m.Int()+1), ontology.TimeNanos(m.Int()-1), ontology.Int(m.Int()))
		}
	}
	return ps
}

// TestLargeSetMembership checks set predicates of sizes around
// recSetLinear and far above it (with uint16 and uint32 offsets), of
// mixed kinds: their records carry a search order exactly when they
// have more than recSetLinear members, the record decides every probe as
// the Predicate does, and an Index holding `in` and `not in` on them
// matches as BruteForce does, before and after removing them.
func TestLargeSetMembership(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "T", Attributes: []ontology.Attribute{{Name: "x", Kind: ontology.KindString}}}})
	require.NoError(t, err)
	most := 400
	if testing.Short() {
		most = 50
	}
	for _, n := range []int{1, 2, recSetLinear - 1, recSetLinear, recSetLinear + 1, 1000, 70000} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			set := largeSet(n)
			probes := setProbes(set, most)
			ix, bf := NewIndex(o), NewBruteForce(o)
			// AnyType filters: their attribute kinds are not checked, so
			// one set can hold every kind.
			preds := []Predicate{Attr("x").In(set...), Attr("x").NotIn(set...)}
			for i, p := range preds {
				f := MustBuild(Spec{Predicates: []Predicate{p}})
				b, _ := appendRecord(nil, f, []uint32{1}, nil)
				var rp rpred
				end := readPred(b, readHead(b).body, &rp)
				require.Equal(t, len(b), end)
				require.Equal(t, n, rp.nset)
				assert.Equal(t, n > recSetLinear, rp.order != 0, "search order")
				if rp.order != 0 {
					assert.Equal(t, rp.order-rp.set > 1<<16, rp.wide, "offset width")
				}
				assert.Equal(t, n >= 70000, rp.wide, "both widths are tried")
				var back []ontology.Value
				rp.members(b, func(m ontology.Value) { back = append(back, m) })
				require.Len(t, back, n)
				for k := range set {
					require.True(t, sameValue(set[k], back[k]), "member %d: %v read back as %v", k, set[k], back[k])
				}
				for _, v := range probes {
					x := val{v: v, present: true}
					require.Equal(t, p.holds(x), rp.holds(b, x), "%s on %v", p.Op, v)
				}
				require.NoError(t, ix.Add(uint64(i), f))
				require.NoError(t, bf.Add(uint64(i), f))
			}
			check := func() {
				t.Helper()
				for _, v := range probes {
					ev := &BasicEvent{Type: "T", Attrs: []ontology.Attr{{Name: "x", Value: v}}}
					var got, want []uint64
					ix.Match(ev, func(id uint64, _ float64) { got = append(got, id) })
					bf.Match(ev, func(id uint64, _ float64) { want = append(want, id) })
					require.ElementsMatch(t, want, got, "x = %v", v)
				}
			}
			check()
			for i := range preds {
				require.True(t, ix.Remove(uint64(i)))
				require.True(t, bf.Remove(uint64(i)))
				check()
			}
		})
	}
}

// BenchmarkSetHolds times a set predicate's verification from its record
// by scan and by binary search over the search order, for a value amid
// n integer members that is not one of them: where the two cross is
// where recSetLinear belongs.
func BenchmarkSetHolds(b *testing.B) {
	for _, n := range []int{2, 4, 6, 8, 9, 12, 16, 32} {
		set := make([]ontology.Value, n)
		for i := range set {
			set[i] = ontology.Int(int64(i) * 1000)
		}
		rec, _ := appendRecord(nil, MustBuild(Spec{Predicates: []Predicate{Attr("x").NotIn(set...)}}), []uint32{1}, nil)
		var p rpred
		readPred(rec, readHead(rec).body, &p)
		if p.order == 0 {
			p.order = len(rec)
			rec = appendSetOrder(rec, set, p.set)
		}
		x := val{v: ontology.Int(int64(n/2)*1000 + 1), present: true}
		for _, how := range []string{"scan", "search"} {
			q := p
			if how == "scan" {
				q.order = 0
			}
			b.Run(fmt.Sprintf("n=%d/%s", n, how), func(b *testing.B) {
				for b.Loop() {
					if !q.holds(rec, x) {
						b.Fatal("member")
					}
				}
			})
		}
	}
}

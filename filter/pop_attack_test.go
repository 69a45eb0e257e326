package filter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// TestAttackPopularityDuplicates checks countFilter (counts from the
// *Filter, at Add) against count (from the record, at Remove) for
// filters whose sets have duplicate members, ints and floats of the same
// value, ±0 and NaN, equalities to NaN and to floats of integral value,
// and payload paths: after every Add and Remove the counts equal those
// recounted from the records.
func TestAttackPopularityDuplicates(t *testing.T) {
	o := listsOnt(t, 6)
	special := []ontology.Value{
		ontology.Int(1), ontology.Float(1), ontology.Int(1), ontology.Float(0), ontology.Float(math.Copysign(0, -1)),
		ontology.Int(0), ontology.Float(math.NaN()), ontology.Int(1 << 40), ontology.Float(1 << 40), ontology.Int(5000),
		ontology.Float(0.5), ontology.Int(-3), ontology.Float(math.Inf(1)),
	}
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 3))
			ix := NewIndex(o)
			var live []uint64
			for id := uint64(0); id < 300; id++ {
				if len(live) > 0 && r.IntN(3) == 0 {
					k := r.IntN(len(live))
					require.True(t, ix.Remove(live[k]))
					live = append(live[:k], live[k+1:]...)
				}
				s := listsSpec(r, 6, 5)
				for k := range s.Predicates {
					if r.IntN(2) == 0 {
						continue
					}
					op := Attr("x0")
					if r.IntN(3) == 0 {
						op = JSON("n")
					}
					if r.IntN(2) == 0 {
						set := make([]ontology.Value, 1+r.IntN(6))
						for m := range set {
							set[m] = special[r.IntN(len(special))]
						}
						s.Predicates[k] = op.In(set...)
						if r.IntN(3) == 0 {
							s.Predicates[k] = op.NotIn(set...)
						}
					} else {
						s.Predicates[k] = op.EQ(special[r.IntN(len(special))])
					}
					s.Predicates[k].Weight = 0
					if s.Mode == ModeScore {
						s.Predicates[k].Weight = 1
					}
				}
				if s.Mode == ModeScore {
					clampThreshold(&s)
				}
				f, err := Build(s)
				if err != nil || ix.Add(id, f) != nil {
					continue
				}
				live = append(live, id)
				recount := &Index{pop: map[int]*groupPop{}}
				for _, e := range ix.entries.all() {
					recount.count(e, 1)
				}
				require.Equal(t, popDump(recount.pop), popDump(ix.pop), "after adding %s", f)
			}
			require.Greater(t, ix.entries.len(), 30, "filters were added")
			for _, id := range live {
				require.True(t, ix.Remove(id))
			}
			require.Empty(t, popDump(ix.pop), "every count back to zero")
		})
	}
}

package ontology

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomDAG returns n types where type i's parents are drawn from types
// 0..i-1 (so the graph is acyclic), listed in a shuffled order so that IDs
// are not a topological order, each with up to maxParents parents.
func randomDAG(r *rand.Rand, n, maxParents int) []TypeDef {
	defs := make([]TypeDef, n)
	for i := range defs {
		defs[i].Name = "T" + strconv.Itoa(i)
		if i == 0 {
			continue
		}
		k := r.IntN(maxParents + 1)
		for range k {
			defs[i].Parents = append(defs[i].Parents, "T"+strconv.Itoa(r.IntN(i)))
		}
	}
	r.Shuffle(len(defs), func(i, j int) { defs[i], defs[j] = defs[j], defs[i] })
	return defs
}

// bruteClosure computes reach[a][b] = a is-a b by depth-first search.
func bruteClosure(o *Ontology) [][]bool {
	n := o.NumTypes()
	reach := make([][]bool, n)
	var visit func(from, t int)
	visit = func(from, t int) {
		if reach[from][t] {
			return
		}
		reach[from][t] = true
		for _, p := range o.Type(t).Parents {
			pt, _ := o.Lookup(p)
			visit(from, pt.ID)
		}
	}
	for a := range n {
		reach[a] = make([]bool, n)
		visit(a, a)
	}
	return reach
}

func TestIsAAgainstBruteForce(t *testing.T) {
	tests := []struct {
		name          string
		n, maxParents int
		tree          bool
	}{
		{"tree", 200, 1, true},
		{"sparse DAG", 200, 2, false},
		{"dense DAG", 120, 6, false},
		{"many roots", 60, 3, false},
	}
	for _, tc := range tests {
		for seed := uint64(1); seed <= 5; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", tc.name, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 42))
				defs := randomDAG(r, tc.n, tc.maxParents)
				if tc.tree { // exactly one parent except the roots
					for i := range defs {
						if len(defs[i].Parents) > 1 {
							defs[i].Parents = defs[i].Parents[:1]
						}
					}
				}
				o, err := New(defs)
				require.NoError(t, err)
				reach := bruteClosure(o)
				n := o.NumTypes()
				checked := 0
				for a := range n {
					var anc, desc []int
					for b := range n {
						if o.IsA(a, b) != reach[a][b] {
							require.Failf(t, "IsA", "IsA(%s, %s) = %v", o.Type(a).Name, o.Type(b).Name, !reach[a][b])
						}
						checked++
						if reach[a][b] {
							anc = append(anc, b)
						}
						if reach[b][a] {
							desc = append(desc, b)
						}
					}
					require.Equal(t, anc, o.Ancestors(a))
					require.Equal(t, desc, o.Descendants(a))
				}
				assert.Greater(t, checked, 3000)
				if tc.tree {
					assert.Zero(t, o.ExtraIntervals(), "a tree has one interval per type")
				}
			})
		}
	}
}

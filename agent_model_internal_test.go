package sion

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// modelOntology has a root type, 4 types under it and 2 under each.
func modelOntology(t testing.TB) *ontology.Ontology {
	defs := []ontology.TypeDef{{Name: "ev", Attributes: []ontology.Attribute{{Name: "x", Kind: ontology.KindInt}}}}
	for i := range 4 {
		p := fmt.Sprintf("t%d", i)
		defs = append(defs, ontology.TypeDef{Name: p, Parents: []string{"ev"}})
		for j := range 2 {
			defs = append(defs, ontology.TypeDef{Name: fmt.Sprintf("%s.%d", p, j), Parents: []string{p}})
		}
	}
	o, err := ontology.New(defs)
	require.NoError(t, err)
	return o
}

// randomModel returns a model of a random recursive tree of n switches
// with producers of the 4 mid-level types at 4 switches.
func randomModel(t testing.TB, n int, rng *rand.Rand) (*agentModel, map[string][]string) {
	md := newAgentModel(modelOntology(t))
	for i := range n {
		s := md.sw(fmt.Sprintf("s%d", i))
		s.connected = true
		if i > 0 {
			s.links[fmt.Sprintf("s%d", rng.IntN(i))] = true
		}
	}
	for k := range 4 {
		s := md.sw(fmt.Sprintf("s%d", rng.IntN(n)))
		s.ads[uint64(k+1)] = modelAd{typ: fmt.Sprintf("t%d", k)}
	}
	adj := md.adjacency()
	return md, adj
}

func randomFilter(rng *rand.Rand) *filter.Filter {
	typ := fmt.Sprintf("t%d", rng.IntN(4))
	if rng.IntN(2) == 0 {
		typ += fmt.Sprintf(".%d", rng.IntN(2))
	}
	lo := rng.IntN(100)
	return filter.MustCompile(fmt.Sprintf("{type ⊑ %s; x >= %d; x < %d}", typ, lo, lo+1+rng.IntN(50)))
}

// TestAgentModelIncremental: after each subscription, the constraints the
// incremental update keeps equal those computed from scratch, on every
// direction, for random trees and filters; and after cancels (recomputed
// on their paths) too.
func TestAgentModelIncremental(t *testing.T) {
	for seed := range 5 {
		rng := rand.New(rand.NewPCG(uint64(seed), 9))
		md, adj := randomModel(t, 40, rng)
		dirs := md.allDirs(adj)
		md.recompute(adj, dirs)
		var keys []uint64
		for k := range 60 {
			sw := fmt.Sprintf("s%d", rng.IntN(40))
			md.addSub(adj, consKey{sw, 1}, "c", uint64(k+1), randomFilter(rng))
			keys = append(keys, uint64(k+1))
		}
		check := func(when string) {
			for _, d := range dirs {
				assert.Equal(t, md.optimal(d), md.dirs[d].want, "seed %d %s: direction %v", seed, when, d)
			}
		}
		check("after subscribing")
		for _, k := range keys[:30] {
			for name, s := range md.sws {
				if sub, ok := s.subs[k]; ok {
					delete(s.subs, k)
					md.recompute(adj, md.pathsBetween(md.producersOf(adj, sub.f), []string{name}))
				}
			}
		}
		check("after cancelling")
	}
}

// TestAgentModelOptimal: on a line P — A — B — C with a producer of t0 at P
// and of t1 at C, a consumer of t0 at B: P→A and A→B pass t0 (P→A passes
// everything P makes: no constraint), B→C and the directions toward P pass
// nothing.
func TestAgentModelOptimal(t *testing.T) {
	md := newAgentModel(modelOntology(t))
	for _, l := range [][2]string{{"A", "P"}, {"B", "A"}, {"C", "B"}} {
		md.sw(l[0]).links[l[1]] = true
		md.sw(l[0]).connected, md.sw(l[1]).connected = true, true
	}
	md.sw("P").ads[1] = modelAd{typ: "t0"}
	md.sw("C").ads[1] = modelAd{typ: "t1"}
	adj := md.adjacency()
	md.addSub(adj, consKey{"B", 1}, "c", 1, filter.MustCompile("{type ⊑ t0.1}"))
	md.recompute(adj, md.allDirs(adj))
	got := map[string][]string{}
	for d, mf := range md.dirs {
		if len(mf.want) > 0 {
			got[d.from+"→"+d.to] = mf.want
		}
	}
	assert.Equal(t, map[string][]string{"P→A": {"{type ⊑ t0.1}"}, "A→B": {"{type ⊑ t0.1}"}}, got)
	// A consumer of all of t0 at A: P→A needs no constraint any more.
	md.addSub(adj, consKey{"A", 2}, "d", 2, filter.MustCompile("{type ⊑ t0}"))
	assert.Equal(t, []string{passAll}, md.dirs[dirKey{"P", "A"}].want)
	assert.Equal(t, []string{"{type ⊑ t0.1}"}, md.dirs[dirKey{"A", "B"}].want)
	assert.True(t, slices.Equal(md.optimal(dirKey{"P", "A"}), []string{passAll}))
}

// BenchmarkAgentSubscribe measures the agent's computation for one
// subscription — finding the paths from its producers and updating the
// constraints on them — in random trees of 100 and 1,000 switches that
// already hold 1,000 subscriptions: the cost the model adds to each
// contract, without the network.
func BenchmarkAgentSubscribe(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("switches=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			md, adj := randomModel(b, n, rng)
			md.recompute(adj, md.allDirs(adj))
			for k := range 1000 {
				md.addSub(adj, consKey{fmt.Sprintf("s%d", rng.IntN(n)), 1}, "c", uint64(k+1), randomFilter(rng))
			}
			fs := make([]*filter.Filter, 256)
			sws := make([]string, 256)
			for i := range fs {
				fs[i], sws[i] = randomFilter(rng), fmt.Sprintf("s%d", rng.IntN(n))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				md.addSub(adj, consKey{sws[i%256], 2}, "c", uint64(2000+i), fs[i%256])
			}
		})
	}
}

package bench

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// The statistics below are checked on a few thousand draws with
// tolerances of several standard deviations, so they hold for any seed
// and fail only when the generator's parameters are wrong.

func TestZipf(t *testing.T) {
	for _, c := range []struct {
		name  string
		n     int
		alpha float64
	}{{"values", 48, 1}, {"attributes", 400, 1}, {"uniform", 10, 0}} {
		t.Run(c.name, func(t *testing.T) {
			z := NewZipf(c.n, c.alpha)
			sum := 0.0
			for i := range c.n {
				sum += z.P(i)
			}
			assert.InDelta(t, 1, sum, 1e-9)
			h := 0.0
			for i := range c.n {
				h += 1 / math.Pow(float64(i+1), c.alpha)
			}
			assert.InDelta(t, 1/h, z.P(0), 1e-12, "P(rank 0) = 1/H(n, alpha)")
			r := rand.New(rand.NewPCG(7, 7))
			const draws = 100_000
			hits := 0
			for range draws {
				d := z.Draw(r)
				require.True(t, d >= 0 && d < c.n)
				if d == 0 {
					hits++
				}
			}
			assert.InDelta(t, z.P(0), float64(hits)/draws, 0.01)
		})
	}
}

func TestWINTStatistics(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  WINTConfig
	}{
		{"all", WINTConfig{}},
		{"score", WINTConfig{Mode: filter.ModeScore}},
		{"atleast", WINTConfig{Mode: filter.ModeAtLeast}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := NewWINT(c.cfg)
			require.NoError(t, err)
			const n = 5000
			specs := w.Specs(n)
			perAttr := map[string]int{}
			loSum := 0.0
			for _, s := range specs {
				require.Len(t, s.Predicates, 10)
				seen := map[string]bool{}
				total := 0.0
				for _, p := range s.Predicates {
					require.Equal(t, filter.OpRange, p.Op)
					require.False(t, p.LoOpen || p.HiOpen, "closed intervals")
					require.False(t, seen[p.Operand.Name], "attributes are distinct")
					seen[p.Operand.Name] = true
					perAttr[p.Operand.Name]++
					lo, hi := p.Value.Int(), p.Hi.Int()
					require.Equal(t, int64(300_000), hi-lo, "width 0.3 × 1,000,000")
					require.True(t, lo >= 0 && hi <= 1_000_000)
					loSum += float64(lo)
					total += p.Weight
					if c.cfg.Mode == filter.ModeScore {
						require.Contains(t, []float64{1, 2, 3}, p.Weight)
					} else {
						require.Zero(t, p.Weight)
					}
				}
				switch c.cfg.Mode {
				case filter.ModeScore:
					require.InDelta(t, 0.6*total, s.Threshold, 1e-9)
				case filter.ModeAtLeast:
					require.Equal(t, 8, s.AtLeast)
				}
			}
			require.Len(t, perAttr, 20)
			for a, k := range perAttr {
				// n·S/D = 2500 per attribute; binomial sd ≈ 35.
				assert.InDelta(t, 2500, k, 250, "attribute %s chosen uniformly", a)
			}
			assert.InDelta(t, 350_000, loSum/(n*10), 10_000, "lower ends uniform in [0, 700,000]")

			evs := w.Events(2000)
			sum := 0.0
			for _, ev := range evs {
				require.Len(t, ev.Attrs, 20)
				for _, a := range ev.Attrs {
					v := a.Value.Int()
					require.True(t, v >= 0 && v < 1_000_000)
					sum += float64(v)
				}
			}
			assert.InDelta(t, 500_000, sum/(2000*20), 10_000, "values uniform in [0, 1,000,000)")
		})
	}
}

func TestWSPARSEStatistics(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  WSPARSEConfig
	}{
		{"int", WSPARSEConfig{}},
		{"string", WSPARSEConfig{Strings: true}},
		{"prefix", WSPARSEConfig{Strings: true, PrefixFrac: 0.2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := NewWSPARSE(c.cfg)
			require.NoError(t, err)
			const n = 20_000
			ops := map[filter.Op]int{}
			preds, rank0, eqs := 0, 0, 0
			attrRank := map[string]int{}
			zero := ontology.Int(0)
			if c.cfg.Strings {
				zero = ontology.String(StringValue(0))
			}
			for _, s := range w.Specs(n) {
				k := len(s.Predicates)
				require.True(t, k >= 3 && k <= 7, "3–7 predicates, not %d", k)
				preds += k
				seen := map[string]bool{}
				for _, p := range s.Predicates {
					require.False(t, seen[p.Operand.Name], "attributes are distinct")
					seen[p.Operand.Name] = true
					attrRank[p.Operand.Name]++
					ops[p.Op]++
					switch p.Op {
					case filter.OpIn, filter.OpNotIn:
						require.True(t, len(p.Set) >= 2 && len(p.Set) <= 4, "sets of 2–4 values")
					case filter.OpRange:
						if c.cfg.Strings {
							require.Less(t, p.Value.Str(), p.Hi.Str())
						} else {
							require.Equal(t, int64(11), p.Hi.Int()-p.Value.Int(), "ranges cover 12 values")
						}
					case filter.OpEQ:
						eqs++
						if ontology.Equal(p.Value, zero) {
							rank0++
						}
					case filter.OpPrefix:
						v := p.Value.Str()
						require.True(t, strings.HasSuffix(v, "."))
						require.Contains(t, []int{1, 2}, strings.Count(v, "."))
					}
				}
			}
			mean := float64(preds) / n
			assert.InDelta(t, 5, mean, 0.05, "3–7 predicates uniformly")
			share := func(o filter.Op) float64 { return float64(ops[o]) / float64(preds) }
			rest := 1 - c.cfg.PrefixFrac
			assert.InDelta(t, c.cfg.PrefixFrac, share(filter.OpPrefix), 0.01)
			assert.InDelta(t, 0.35*rest, share(filter.OpEQ), 0.01)
			assert.InDelta(t, 0.35*rest, share(filter.OpIn), 0.01)
			assert.InDelta(t, 0.20*rest, share(filter.OpRange), 0.01)
			assert.InDelta(t, 0.05*rest, share(filter.OpNE), 0.005)
			assert.InDelta(t, 0.05*rest, share(filter.OpNotIn), 0.005)
			z := NewZipf(48, 1)
			assert.InDelta(t, z.P(0), float64(rank0)/float64(eqs), 0.02, "= values are Zipf(1) over 48")
			assert.Greater(t, attrRank["s0"], 5*attrRank["s20"], "attributes are Zipf(1) over 400")

			evs := w.Events(2000)
			evRank0 := 0
			for _, ev := range evs {
				require.Len(t, ev.Attrs, 15)
				seen := map[string]bool{}
				for _, a := range ev.Attrs {
					require.False(t, seen[a.Name])
					seen[a.Name] = true
				}
				if seen["s0"] {
					evRank0++
				}
			}
			assert.Greater(t, evRank0, 1800, "the most popular attribute is in nearly every event")
		})
	}
}

func TestTypeWorkloads(t *testing.T) {
	tree, err := NewTypeTree(3, 8, WINTAttributes(20))
	require.NoError(t, err)
	require.Len(t, tree.Names, 8+64+512)
	require.Equal(t, []int{0, 8, 72}, tree.Level)
	for _, du := range []bool{false, true} {
		t.Run("depth-uniform="+map[bool]string{false: "no", true: "yes"}[du], func(t *testing.T) {
			w := NewTypeOnly(tree, du, 1)
			depth := map[int]int{}
			const n = 6000
			for _, s := range w.Specs(n) {
				require.Empty(t, s.Predicates)
				_, ok := w.Ontology.Lookup(s.Type)
				require.True(t, ok, "type %q", s.Type)
				depth[strings.Count(s.Type, ".")]++
			}
			if du {
				for k := 1; k <= 3; k++ {
					assert.InDelta(t, n/3, depth[k], 300, "depth %d", k)
				}
			} else {
				assert.InDelta(t, n*512/584, depth[3], 300, "types uniform: most are leaves")
			}
			for _, ev := range w.Events(200) {
				require.Equal(t, 3, strings.Count(ev.Type, "."), "events are of leaf types")
			}
		})
	}
}

func TestJSONWorkload(t *testing.T) {
	js, err := NewJSON(JSONConfig{})
	require.NoError(t, err)
	at, err := NewJSON(JSONConfig{Attrs: true})
	require.NoError(t, err)
	const n = 2000
	jsSpecs, atSpecs := js.Specs(n), at.Specs(n)
	for i := range jsSpecs {
		require.Len(t, atSpecs[i].Predicates, len(jsSpecs[i].Predicates))
		for j, p := range jsSpecs[i].Predicates {
			q := atSpecs[i].Predicates[j]
			require.Equal(t, filter.SourceJSON, p.Operand.Source)
			require.Equal(t, filter.SourceAttr, q.Operand.Source)
			require.Equal(t, filter.OpEQ, p.Op)
			require.Equal(t, q.Operand.Name+".v", p.Operand.Name, "the twins test the same keys")
			require.True(t, ontology.Equal(p.Value, q.Value), "and the same values")
		}
	}
	jsEv, atEv := js.Events(100), at.Events(100)
	for i, ev := range jsEv {
		require.True(t, json.Valid(ev.Data), "%s", ev.Data)
		var doc map[string]struct{ V int64 }
		require.NoError(t, json.Unmarshal(ev.Data, &doc))
		require.Len(t, doc, 10)
		assert.Less(t, len(ev.Data), 200, "a small payload")
		require.Len(t, atEv[i].Attrs, 10)
		for _, a := range atEv[i].Attrs {
			require.Equal(t, a.Value.Int(), doc[a.Name].V, "the twin event carries the same values")
		}
	}
}

func TestDeterministic(t *testing.T) {
	w, err := NewWSPARSE(WSPARSEConfig{Seed: 42})
	require.NoError(t, err)
	small, err := w.Filters(100)
	require.NoError(t, err)
	large, err := w.Filters(300)
	require.NoError(t, err)
	for i := range small {
		require.Equal(t, small[i].String(), large[i].String(), "Filters(n) is a prefix of Filters(m)")
	}
	a, b := w.Events(50), w.Events(50)
	require.Equal(t, a, b)
	other, err := NewWSPARSE(WSPARSEConfig{Seed: 43})
	require.NoError(t, err)
	o, err := other.Filters(100)
	require.NoError(t, err)
	assert.NotEqual(t, small[0].String()+small[1].String(), o[0].String()+o[1].String(), "the seed matters")
}

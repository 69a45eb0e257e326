package bench

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/filter"
)

// The benchmarks below run in the order they are declared; the caches
// they share are released once the last user is done, so that at most
// one million-filter index is alive at a time. With -short they skip
// n = 1,000,000 and run the naive baseline at 10,000 filters only.

var sizes = []int{1_000, 10_000, 100_000, 1_000_000}

// sampleFor is how many events are checked against the oracle before
// timing: the oracle is slow at a million filters.
func sampleFor(n int) int {
	switch {
	case n >= 1_000_000:
		return 5
	case testing.Short():
		return 10
	}
	return 50
}

func sizeName(n int) string { return fmt.Sprintf("n=%d", n) }

// memo returns a function that makes v once.
func memo[T any](make func() (T, error)) func(testing.TB) T {
	var once sync.Once
	var v T
	var err error
	return func(tb testing.TB) T {
		tb.Helper()
		once.Do(func() { v, err = make() })
		require.NoError(tb, err)
		return v
	}
}

var (
	wintW    = memo(func() (*Workload, error) { return NewWINT(WINTConfig{}) })
	wsparseW = memo(func() (*Workload, error) { return NewWSPARSE(WSPARSEConfig{}) })
	// benchTree is the depth-6, fan-out-8 type tree (299,592 types below
	// the root) shared by TypeOnly and TypeTree; depth 5 (37,448 types)
	// with -short, because ontology.New takes seconds at depth 6.
	benchTree = memo(func() (*TypeTree, error) {
		if testing.Short() {
			return NewTypeTree(5, 8, WINTAttributes(20))
		}
		return NewTypeTree(6, 8, WINTAttributes(20))
	})
)

// benchMatch times Index.Match over b's events, after checking the index
// against the oracle.
func benchMatch(bm *testing.B, b *built) {
	checkOracle(bm, b, sampleFor(b.n))
	collectGarbage()
	count := 0
	fn := func(uint64, float64) { count++ }
	bm.ReportAllocs()
	i := 0
	cpu := startCPU()
	for bm.Loop() {
		b.index.Match(b.events[i%len(b.events)], fn)
		i++
	}
	cpu.report(bm, i)
	bm.ReportMetric(float64(count)/float64(i), "matches/event")
	bm.ReportMetric(b.indexBytes, "B/filter")
	bm.ReportMetric(float64(b.buildTime.Nanoseconds())/float64(b.n), "ns-build/filter")
	if cpuMeasured {
		bm.ReportMetric(float64(b.buildCPU.Nanoseconds())/float64(b.n), "cpu-ns-build/filter")
		bm.ReportMetric(float64(b.buildFaults)/float64(b.n), "faults-build/filter")
	}
}

func skipLarge(b *testing.B, n int) {
	if testing.Short() && n >= 1_000_000 {
		b.Skip("-short: skipping n = 1,000,000")
	}
}

func BenchmarkMatchWINT(b *testing.B) {
	w := wintW(b)
	for _, n := range sizes {
		b.Run(sizeName(n), func(b *testing.B) {
			skipLarge(b, n)
			benchMatch(b, build(b, w, n))
		})
	}
	// W-INT stays cached for IndexAdd, IndexRemove, BruteForce and NaiveExpr.
}

// addPool is the W-INT filters (another seed) that IndexAdd and
// IndexRemove insert and take out again on top of the n existing ones.
var addPool = memo(func() ([]*filter.Filter, error) {
	w, err := NewWINT(WINTConfig{Seed: 2})
	if err != nil {
		return nil, err
	}
	return w.Filters(50_000)
})

const poolBase = 1 << 40 // IDs of the pool filters

func BenchmarkIndexAdd(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(sizeName(n), func(b *testing.B) {
			skipLarge(b, n)
			benchAdd(b, build(b, wintW(b), n).index, addPool(b))
		})
	}
}

func BenchmarkIndexRemove(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(sizeName(n), func(b *testing.B) {
			skipLarge(b, n)
			benchRemove(b, build(b, wintW(b), n).index, addPool(b))
		})
	}
	release("W-INT/1000000")
}

// benchAdd times x.Add of the pool's filters on top of what x holds,
// taking them out again (untimed) whenever the pool is used up.
func benchAdd(b *testing.B, x *filter.Index, pool []*filter.Filter) {
	b.ReportAllocs()
	i, ops := 0, 0
	var cpu time.Duration
	c := startCPU()
	for b.Loop() {
		if i == len(pool) {
			b.StopTimer()
			cpu += c.elapsed()
			for j := range pool {
				x.Remove(poolBase + uint64(j))
			}
			i = 0
			c = startCPU()
			b.StartTimer()
		}
		if err := x.Add(poolBase+uint64(i), pool[i]); err != nil {
			b.Fatal(err)
		}
		i++
		ops++
	}
	reportCPU(b, cpu+c.elapsed(), ops, "cpu-ns/op")
	for j := range i {
		x.Remove(poolBase + uint64(j))
	}
}

// benchRemove times x.Remove of the pool's filters, added (untimed) on
// top of what x holds, and again whenever the pool is used up.
func benchRemove(b *testing.B, x *filter.Index, pool []*filter.Filter) {
	fill := func() {
		for j, f := range pool {
			require.NoError(b, x.Add(poolBase+uint64(j), f))
		}
	}
	fill()
	b.ReportAllocs()
	i, ops := 0, 0
	var cpu time.Duration
	c := startCPU()
	for b.Loop() {
		if i == len(pool) {
			b.StopTimer()
			cpu += c.elapsed()
			fill()
			i = 0
			c = startCPU()
			b.StartTimer()
		}
		if !x.Remove(poolBase + uint64(i)) {
			b.Fatalf("Remove(%d) found nothing", poolBase+uint64(i))
		}
		i++
		ops++
	}
	reportCPU(b, cpu+c.elapsed(), ops, "cpu-ns/op")
	for j := i; j < len(pool); j++ {
		x.Remove(poolBase + uint64(j))
	}
}

func BenchmarkBruteForceWINT(b *testing.B) {
	b.Run(sizeName(100_000), func(b *testing.B) {
		bb := build(b, wintW(b), 100_000)
		count := 0
		fn := func(uint64, float64) { count++ }
		b.ReportAllocs()
		i := 0
		cpu := startCPU()
		for b.Loop() {
			bb.oracle.Match(bb.events[i%len(bb.events)], fn)
			i++
		}
		cpu.report(b, i)
		b.ReportMetric(float64(count)/float64(i), "matches/event")
		b.ReportMetric(bb.oracleBytes, "B/filter")
	})
}

// BenchmarkNaiveExprWINT is the baseline a Go user would write: one
// expr-lang program per filter, compiled once, all run for every event,
// with the event as a map[string]any (attributes known at run time) or as
// a struct (a fixed schema: the fastest expr environment).
func BenchmarkNaiveExprWINT(b *testing.B) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	b.Run(sizeName(n), func(b *testing.B) {
		bb := build(b, wintW(b), n)
		for _, env := range []string{"struct", "map"} {
			b.Run("env="+env, func(b *testing.B) {
				nv := newNaive(b, bb, env)
				checkNaive(b, bb, nv, 5)
				count := 0
				b.ReportAllocs()
				i := 0
				cpu := startCPU()
				for b.Loop() {
					c, err := nv.match(i%len(bb.events), nil)
					if err != nil {
						b.Fatal(err)
					}
					count += c
					i++
				}
				cpu.report(b, i)
				b.ReportMetric(float64(count)/float64(i), "matches/event")
			})
		}
	})
	release("W-INT")
}

func BenchmarkMatchWSPARSE(b *testing.B) {
	w := wsparseW(b)
	for _, n := range sizes {
		b.Run(sizeName(n), func(b *testing.B) {
			skipLarge(b, n)
			benchMatch(b, build(b, w, n))
		})
	}
	// W-SPARSE stays cached for IndexAddWSPARSE and IndexRemoveWSPARSE.
}

// sparsePool is the W-SPARSE filters (another seed) that
// IndexAddWSPARSE and IndexRemoveWSPARSE insert and take out again on top
// of the n existing ones.
var sparsePool = memo(func() ([]*filter.Filter, error) {
	w, err := NewWSPARSE(WSPARSEConfig{Seed: 2})
	if err != nil {
		return nil, err
	}
	return w.Filters(50_000)
})

// BenchmarkIndexAddWSPARSE is BenchmarkIndexAdd on W-SPARSE: filters
// that live in posting lists, not in dense engines.
func BenchmarkIndexAddWSPARSE(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(sizeName(n), func(b *testing.B) {
			skipLarge(b, n)
			benchAdd(b, build(b, wsparseW(b), n).index, sparsePool(b))
		})
	}
}

// BenchmarkIndexRemoveWSPARSE is BenchmarkIndexRemove on W-SPARSE.
func BenchmarkIndexRemoveWSPARSE(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(sizeName(n), func(b *testing.B) {
			skipLarge(b, n)
			benchRemove(b, build(b, wsparseW(b), n).index, sparsePool(b))
		})
	}
	release("W-SPARSE")
}

// BenchmarkMatchTypeOnly: filters with only an event type over the
// depth-6 tree, events of random leaf types. types=uniform draws filter
// types uniformly over all types (≈ 6n/299,592 matches per event);
// types=depth-uniform draws a depth first (≈ n/42 matches per event).
func BenchmarkMatchTypeOnly(b *testing.B) {
	t := benchTree(b)
	for _, du := range []bool{false, true} {
		w := NewTypeOnly(t, du, 1)
		b.Run(sizeName(100_000)+"/types="+typesName(du), func(b *testing.B) {
			benchMatch(b, build(b, w, 100_000))
		})
		release(w.Name)
	}
}

func typesName(depthUniform bool) string {
	if depthUniform {
		return "depth-uniform"
	}
	return "uniform"
}

// BenchmarkMatchTypeTree: the W-INT filters spread over the depth-6 type
// tree; compare with BenchmarkMatchWINT/n=100000.
func BenchmarkMatchTypeTree(b *testing.B) {
	t := benchTree(b)
	for _, du := range []bool{false, true} {
		w, err := NewWINT(WINTConfig{Tree: t, DepthUniform: du})
		require.NoError(b, err)
		b.Run(sizeName(100_000)+"/types="+typesName(du), func(b *testing.B) {
			benchMatch(b, build(b, w, 100_000))
		})
		release(w.Name)
	}
}

// BenchmarkMatchPrefix: W-SPARSE with string values, 20 % prefix
// predicates, and its twin without prefix predicates.
func BenchmarkMatchPrefix(b *testing.B) {
	for _, frac := range []float64{0.2, 0} {
		w, err := NewWSPARSE(WSPARSEConfig{Strings: true, PrefixFrac: frac})
		require.NoError(b, err)
		b.Run(fmt.Sprintf("%s/prefix=%g", sizeName(100_000), frac), func(b *testing.B) {
			benchMatch(b, build(b, w, 100_000))
		})
		release(w.Name)
	}
}

// BenchmarkMatchWeighted: W-INT with ModeScore (weights 1–3, threshold
// 60 % of the total weight) and with ModeAtLeast 8 of 10.
func BenchmarkMatchWeighted(b *testing.B) {
	for _, m := range []struct {
		name string
		mode filter.Mode
	}{{"score", filter.ModeScore}, {"atleast8", filter.ModeAtLeast}} {
		w, err := NewWINT(WINTConfig{Mode: m.mode})
		require.NoError(b, err)
		w.Name += "-" + m.name
		b.Run(sizeName(100_000)+"/mode="+m.name, func(b *testing.B) {
			benchMatch(b, build(b, w, 100_000))
		})
		release(w.Name)
	}
}

// BenchmarkMatchJSON: equality predicates over 10 gjson paths into a JSON
// payload, and the same filters and events with typed attributes.
func BenchmarkMatchJSON(b *testing.B) {
	for _, attrs := range []bool{false, true} {
		w, err := NewJSON(JSONConfig{Attrs: attrs})
		require.NoError(b, err)
		src := "json"
		if attrs {
			src = "attrs"
		}
		b.Run(sizeName(100_000)+"/src="+src, func(b *testing.B) {
			benchMatch(b, build(b, w, 100_000))
		})
		release(w.Name)
	}
}

// TestWorkloadsAgainstOracle checks, at small sizes, that the index
// matches exactly what the oracle matches on every workload, before and
// after removing a third of the filters, and that the naive expr baseline
// agrees with the oracle too. It runs in seconds, without -bench.
func TestWorkloadsAgainstOracle(t *testing.T) {
	tree, err := NewTypeTree(3, 8, WINTAttributes(20))
	require.NoError(t, err)
	mk := func(w *Workload, err error) *Workload {
		t.Helper()
		require.NoError(t, err)
		return w
	}
	cases := []struct {
		name     string
		w        *Workload
		nonEmpty bool // the workload must produce matches at this size
	}{
		{"W-INT", mk(NewWINT(WINTConfig{})), false},
		{"W-INT-wide", mk(NewWINT(WINTConfig{Width: 0.8})), true},
		{"W-SPARSE", mk(NewWSPARSE(WSPARSEConfig{})), true},
		{"W-SPARSE-strings", mk(NewWSPARSE(WSPARSEConfig{Strings: true})), true},
		{"Prefix", mk(NewWSPARSE(WSPARSEConfig{Strings: true, PrefixFrac: 0.2})), true},
		{"TypeOnly", NewTypeOnly(tree, false, 1), true},
		{"TypeOnly-depth-uniform", NewTypeOnly(tree, true, 1), true},
		{"TypeTree", mk(NewWINT(WINTConfig{Tree: tree, Width: 0.8})), true},
		{"TypeTree-depth-uniform", mk(NewWINT(WINTConfig{Tree: tree, Width: 0.8, DepthUniform: true})), true},
		{"Weighted-score", mk(NewWINT(WINTConfig{Mode: filter.ModeScore})), true},
		{"Weighted-atleast8", mk(NewWINT(WINTConfig{Mode: filter.ModeAtLeast, Width: 0.5})), true},
		{"JSON", mk(NewJSON(JSONConfig{})), true},
		{"JSON-attrs", mk(NewJSON(JSONConfig{Attrs: true})), true},
	}
	const n, sample = 2000, 100
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.w.Name = "test-" + c.name
			b := build(t, c.w, n)
			t.Cleanup(func() { release(c.w.Name) })
			got := checkOracle(t, b, sample)
			t.Logf("%d matches over %d events", got, sample)
			if c.nonEmpty {
				assert.Positive(t, got, "the check is vacuous: no event matched")
			}
			for id := uint64(0); id < uint64(n); id += 3 {
				require.True(t, b.index.Remove(id))
				require.True(t, b.oracle.Remove(id))
			}
			checkOracle(t, b, sample)
		})
	}
	t.Run("NaiveExpr", func(t *testing.T) {
		w := mk(NewWINT(WINTConfig{Width: 0.8}))
		w.Name = "test-naive"
		b := build(t, w, 300)
		t.Cleanup(func() { release(w.Name) })
		for _, env := range []string{"struct", "map"} {
			checkNaive(t, b, newNaive(t, b, env), 20)
		}
	})
}

package bench

import (
	"cmp"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// numEvents is how many pre-generated events a benchmark cycles through.
const numEvents = 1000

// buildBudget caps the time one index build may take in a benchmark: a
// size whose Index.Add calls take longer is skipped, and the skip message
// gives the insert rate measured so far, so that a slow insert path shows
// up as a figure instead of an endless run.
var buildBudget = flag.Duration("sion.buildbudget", 4*time.Minute, "skip a benchmark size whose index takes longer than this to build")

// TestMain makes -short runs quick: unless -test.benchtime is given, each
// benchmark runs for 200ms instead of 1s.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		set := false
		flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.benchtime" })
		if !set {
			if err := flag.Set("test.benchtime", "200ms"); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
	}
	os.Exit(m.Run())
}

// built is one workload at one size: its events, its index and the
// oracle, with their memory per filter.
type built struct {
	w       *Workload
	n       int
	filters []*filter.Filter
	events  []*filter.BasicEvent
	index   *filter.Index
	oracle  *filter.BruteForce
	// Heap growth per filter, measured after runtime.GC: the index with
	// what it retains (the benchmark holds no *Filter while it is
	// measured), and the *Filter values plus the oracle.
	indexBytes, oracleBytes float64
	buildTime               time.Duration // all n Index.Add calls
	buildCPU                time.Duration // the process's CPU time during them (GC included)
	buildFaults             int64         // the process's minor page faults during them
}

var (
	cacheMu sync.Mutex
	cache   = map[string]*built{}
	skipped = map[string]string{} // builds over budget: the skip message
)

func heapAlloc() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// build returns w at n filters, building it once per process; release
// frees it.
func build(tb testing.TB, w *Workload, n int) *built {
	tb.Helper()
	key := fmt.Sprintf("%s/%d", w.Name, n)
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if b := cache[key]; b != nil {
		return b
	}
	if msg, ok := skipped[key]; ok {
		tb.Skip(msg)
	}
	b := &built{w: w, n: n, events: w.Events(numEvents)}
	// The index is measured holding what it keeps itself: the filters
	// are made, added and dropped before the heap is read, and made again
	// for the oracle.
	m0 := heapAlloc()
	fs, err := w.Filters(n)
	require.NoError(tb, err)
	// A collection begun while the filters were made (about 1.3 GB at
	// W-SPARSE 1M) would otherwise go on marking them, on both cores,
	// during the first second of the build: the caller's cost, not the
	// index's. Collections the build's own allocations cause still count.
	collectGarbage()
	b.index = filter.NewIndex(w.Ontology)
	cpu, faults := processCPU(), pageFaults()
	start := time.Now()
	for i, f := range fs {
		require.NoError(tb, b.index.Add(uint64(i), f))
		if _, bench := tb.(*testing.B); bench && i%1000 == 999 {
			if el := time.Since(start); el > *buildBudget {
				skipped[key] = fmt.Sprintf("%s n=%d: building the index took %v for the first %d filters (%.1f µs per Add); over -sion.buildbudget",
					w.Name, n, el.Round(time.Second), i+1, float64(el.Microseconds())/float64(i+1))
				fmt.Fprintln(os.Stderr, "SKIP:", skipped[key]) // shown without -v
				tb.Skip(skipped[key])
			}
		}
	}
	b.buildTime = time.Since(start)
	b.buildCPU, b.buildFaults = processCPU()-cpu, pageFaults()-faults
	fs = nil
	m1 := heapAlloc()
	b.filters, err = w.Filters(n)
	require.NoError(tb, err)
	b.oracle = filter.NewBruteForce(w.Ontology)
	for i, f := range b.filters {
		require.NoError(tb, b.oracle.Add(uint64(i), f))
	}
	m2 := heapAlloc()
	b.indexBytes = float64(m1-m0) / float64(n)
	b.oracleBytes = float64(m2-m1) / float64(n)
	cache[key] = b
	return b
}

// release drops the cached builds of workload name (all sizes).
func release(name string) {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	for k := range cache {
		if strings.HasPrefix(k, name+"/") {
			delete(cache, k)
		}
	}
	runtime.GC()
}

type hit struct {
	id    uint64
	score float64
}

// collect runs one Match-shaped function and returns its hits sorted by ID.
func collect(match func(filter.Event, func(uint64, float64)), ev filter.Event) []hit {
	var hs []hit
	match(ev, func(id uint64, score float64) { hs = append(hs, hit{id, score}) })
	slices.SortFunc(hs, func(a, b hit) int { return cmp.Compare(a.id, b.id) })
	return hs
}

// checkOracle compares the index with the oracle on the first sample
// events and fails on any difference in the filters matched or their
// scores. It returns the number of matches seen.
func checkOracle(tb testing.TB, b *built, sample int) int {
	tb.Helper()
	total := 0
	for i, ev := range b.events[:min(sample, len(b.events))] {
		got := collect(b.index.Match, ev)
		want := collect(b.oracle.Match, ev)
		total += len(want)
		if !sameHits(got, want) {
			tb.Fatalf("%s n=%d event %d: index matched %d filters, oracle %d (first difference: %s)",
				b.w.Name, b.n, i, len(got), len(want), firstDiff(got, want))
		}
	}
	return total
}

func sameHits(a, b []hit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].id != b[i].id || math.Abs(a[i].score-b[i].score) > 1e-9 {
			return false
		}
	}
	return true
}

func firstDiff(got, want []hit) string {
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			return fmt.Sprintf("missing id %d", want[i].id)
		case i >= len(want):
			return fmt.Sprintf("extra id %d", got[i].id)
		case got[i] != want[i]:
			return fmt.Sprintf("index %+v, oracle %+v", got[i], want[i])
		}
	}
	return "none"
}

// ---- the naive alternative: one expr-lang program per filter ----

// exprSource writes f's predicates as an expr-lang boolean expression over
// attribute variables. It covers the operators the W-INT and W-SPARSE
// workloads use.
func exprSource(f *filter.Filter) (string, error) {
	if f.Mode() != filter.ModeAll {
		return "", fmt.Errorf("mode %v", f.Mode())
	}
	var parts []string
	lit := func(v ontology.Value) string { return v.String() }
	set := func(s []ontology.Value) string {
		m := make([]string, len(s))
		for i, v := range s {
			m[i] = lit(v)
		}
		return "[" + strings.Join(m, ", ") + "]"
	}
	for _, p := range f.Predicates() {
		if p.Operand.Source != filter.SourceAttr {
			return "", fmt.Errorf("operand %v", p.Operand)
		}
		a := p.Operand.Name
		switch p.Op {
		case filter.OpEQ:
			parts = append(parts, a+" == "+lit(p.Value))
		case filter.OpNE:
			parts = append(parts, a+" != "+lit(p.Value))
		case filter.OpIn:
			parts = append(parts, a+" in "+set(p.Set))
		case filter.OpNotIn:
			parts = append(parts, a+" not in "+set(p.Set))
		case filter.OpRange:
			lo, hi := " >= ", " <= "
			if p.LoOpen {
				lo = " > "
			}
			if p.HiOpen {
				hi = " < "
			}
			parts = append(parts, a+lo+lit(p.Value), a+hi+lit(p.Hi))
		default:
			return "", fmt.Errorf("operator %v", p.Op)
		}
	}
	if len(parts) == 0 {
		return "true", nil
	}
	return strings.Join(parts, " && "), nil
}

// wintEnv is the struct environment of the naive W-INT baseline: the 20
// attributes as fields, named for expr by tag.
type wintEnv struct {
	A0  int64 `expr:"a0"`
	A1  int64 `expr:"a1"`
	A2  int64 `expr:"a2"`
	A3  int64 `expr:"a3"`
	A4  int64 `expr:"a4"`
	A5  int64 `expr:"a5"`
	A6  int64 `expr:"a6"`
	A7  int64 `expr:"a7"`
	A8  int64 `expr:"a8"`
	A9  int64 `expr:"a9"`
	A10 int64 `expr:"a10"`
	A11 int64 `expr:"a11"`
	A12 int64 `expr:"a12"`
	A13 int64 `expr:"a13"`
	A14 int64 `expr:"a14"`
	A15 int64 `expr:"a15"`
	A16 int64 `expr:"a16"`
	A17 int64 `expr:"a17"`
	A18 int64 `expr:"a18"`
	A19 int64 `expr:"a19"`
}

func newWINTEnv(ev *filter.BasicEvent) (*wintEnv, error) {
	e := &wintEnv{}
	fields := []*int64{&e.A0, &e.A1, &e.A2, &e.A3, &e.A4, &e.A5, &e.A6, &e.A7, &e.A8, &e.A9,
		&e.A10, &e.A11, &e.A12, &e.A13, &e.A14, &e.A15, &e.A16, &e.A17, &e.A18, &e.A19}
	for _, a := range ev.Attrs {
		var i int
		if _, err := fmt.Sscanf(a.Name, "a%d", &i); err != nil || i >= len(fields) {
			return nil, fmt.Errorf("attribute %q is not a W-INT attribute", a.Name)
		}
		*fields[i] = a.Value.Int()
	}
	return e, nil
}

func mapEnv(ev *filter.BasicEvent) map[string]any {
	m := make(map[string]any, len(ev.Attrs))
	for _, a := range ev.Attrs {
		switch a.Value.Kind() {
		case ontology.KindString:
			m[a.Name] = a.Value.Str()
		default:
			m[a.Name] = a.Value.Int()
		}
	}
	return m
}

// naive is the baseline a Go user would write without an index: every
// filter compiled once to an expr-lang program, all run for each event.
type naive struct {
	progs []*vm.Program
	envs  []any // per event of the built workload
}

// newNaive compiles b's filters with the environment kind "map"
// (map[string]any: the attributes of a dynamic event) or "struct"
// (wintEnv, W-INT only).
func newNaive(tb testing.TB, b *built, env string) *naive {
	tb.Helper()
	nv := &naive{progs: make([]*vm.Program, len(b.filters))}
	var example any
	switch env {
	case "struct":
		example = wintEnv{}
		for _, ev := range b.events {
			e, err := newWINTEnv(ev)
			require.NoError(tb, err)
			nv.envs = append(nv.envs, e)
		}
	case "map":
		example = mapEnv(b.events[0])
		for _, ev := range b.events {
			nv.envs = append(nv.envs, mapEnv(ev))
		}
	default:
		tb.Fatalf("unknown env %q", env)
	}
	for i, f := range b.filters {
		src, err := exprSource(f)
		require.NoError(tb, err)
		p, err := expr.Compile(src, expr.Env(example), expr.AsBool())
		require.NoError(tb, err, "compile %q", src)
		nv.progs[i] = p
	}
	return nv
}

// match runs every program on event i's environment and returns the IDs
// (positions) of the filters it matches, or only counts them when ids is
// nil.
func (nv *naive) match(i int, ids *[]uint64) (int, error) {
	env := nv.envs[i]
	n := 0
	for id, p := range nv.progs {
		out, err := expr.Run(p, env)
		if err != nil {
			return 0, err
		}
		if out.(bool) {
			n++
			if ids != nil {
				*ids = append(*ids, uint64(id))
			}
		}
	}
	return n, nil
}

// checkNaive compares the naive baseline with the oracle on the first
// sample events of b.
func checkNaive(tb testing.TB, b *built, nv *naive, sample int) {
	tb.Helper()
	for i, ev := range b.events[:min(sample, len(b.events))] {
		var got []uint64
		_, err := nv.match(i, &got)
		require.NoError(tb, err)
		var want []uint64
		for _, h := range collect(b.oracle.Match, ev) {
			want = append(want, h.id)
		}
		require.Equal(tb, want, got, "%s n=%d event %d: naive expr vs oracle", b.w.Name, b.n, i)
	}
}

package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/filter"
)

// BenchmarkIndexChurn replaces filters one by one on an index that keeps
// n of them: each op removes the oldest filter and adds it again under a
// new ID, as a subscriber population that turns over does. Unlike
// IndexAdd and IndexRemove, whose pool of 50,000 is small against n,
// a run of 2n ops or more replaces every filter twice, so the index's
// upkeep — record compaction for posting lists, new layouts for dense
// engines, both triggered once removed filters outweigh live ones — is
// in the figure. Metrics: cpu-ns/op (CPU time of a Remove and an Add,
// getrusage) and max-µs/op, the longest op in wall time (a writer's
// pause; Match is lock-free and is not held by it). Give -benchtime as
// a count (e.g. 2000000x at 1M) to include the upkeep.
func BenchmarkIndexChurn(b *testing.B) {
	for _, wl := range []struct {
		name string
		w    func(testing.TB) *Workload
	}{{"W-INT", wintW}, {"W-SPARSE", wsparseW}} {
		for _, n := range []int{100_000, 1_000_000} {
			b.Run(wl.name+"/"+sizeName(n), func(b *testing.B) {
				skipLarge(b, n)
				benchChurn(b, wl.w(b), n)
			})
		}
	}
}

func benchChurn(b *testing.B, w *Workload, n int) {
	fs, err := w.Filters(n)
	require.NoError(b, err)
	x := filter.NewIndex(w.Ontology)
	for i, f := range fs {
		require.NoError(b, x.Add(uint64(i), f))
	}
	collectGarbage()
	b.ReportAllocs()
	var worst time.Duration
	i := 0
	cpu := startCPU()
	for b.Loop() {
		t0 := time.Now()
		if !x.Remove(uint64(i)) { // the oldest: added as i, or as i-n+n
			b.Fatalf("Remove(%d) found nothing", i)
		}
		if err := x.Add(uint64(i+n), fs[i%n]); err != nil {
			b.Fatal(err)
		}
		if d := time.Since(t0); d > worst {
			worst = d
		}
		i++
	}
	reportCPU(b, cpu.elapsed(), i, "cpu-ns/op")
	b.ReportMetric(float64(worst.Microseconds()), "max-µs/op")
	require.Equal(b, n, x.Len())
}

package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/filter"
)

// BenchmarkIndexChurn replaces filters on an index that keeps n of
// them: each op removes the churnBatch oldest filters and adds them
// again under new IDs, as a subscriber population that turns over does.
// Unlike IndexAdd and IndexRemove, whose pool of 50,000 is small against
// n and stays in the cache, a run of 2n filters or more replaces every
// filter twice, the oldest (coldest) first, so the index's upkeep —
// record compaction for posting lists, new layouts for dense engines,
// both triggered once removed filters outweigh live ones — is in the
// figures. Metrics, per filter replaced: cpu-remove-ns/filter and
// cpu-add-ns/filter (process CPU time, getrusage, the garbage
// collector's included, read once per batch), and max-remove-µs and
// max-add-µs, the longest single Remove and Add in wall time (a
// writer's pause; Match is lock-free and is not held by it). Give
// -benchtime as a count of batches, e.g. 2200x at 1M to replace 2.25M
// filters.
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

// churnBatch is how many filters one op of IndexChurn replaces.
const churnBatch = 1024

func benchChurn(b *testing.B, w *Workload, n int) {
	fs, err := w.Filters(n)
	require.NoError(b, err)
	x := filter.NewIndex(w.Ontology)
	for i, f := range fs {
		require.NoError(b, x.Add(uint64(i), f))
	}
	collectGarbage()
	b.ReportAllocs()
	var removing, adding, worstRemove, worstAdd time.Duration
	next := 0 // the oldest filter's ID: added as next, or as next-n+n
	for b.Loop() {
		c := startCPU()
		for i := next; i < next+churnBatch; i++ {
			t := time.Now()
			if !x.Remove(uint64(i)) {
				b.Fatalf("Remove(%d) found nothing", i)
			}
			worstRemove = max(worstRemove, time.Since(t))
		}
		removing += c.elapsed()
		c = startCPU()
		for i := next; i < next+churnBatch; i++ {
			t := time.Now()
			if err := x.Add(uint64(i+n), fs[i%n]); err != nil {
				b.Fatal(err)
			}
			worstAdd = max(worstAdd, time.Since(t))
		}
		adding += c.elapsed()
		next += churnBatch
	}
	reportCPU(b, removing, next, "cpu-remove-ns/filter")
	reportCPU(b, adding, next, "cpu-add-ns/filter")
	b.ReportMetric(float64(worstRemove.Microseconds()), "max-remove-µs")
	b.ReportMetric(float64(worstAdd.Microseconds()), "max-add-µs")
	require.Equal(b, n, x.Len())
}

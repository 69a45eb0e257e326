package bench

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/filter"
)

// scale turns on BenchmarkMatchWINTScale: W-INT at 3 and 9 million
// filters, which take minutes and gigabytes (not in CI).
var scale = flag.Bool("sion.scale", false, "run BenchmarkMatchWINTScale (W-INT at 3M and 9M filters; minutes, gigabytes)")

// BenchmarkMatchWINTScale is MatchWINT at 3,000,000 and 9,000,000 filters
// (HEM's largest published size), opt in with -sion.scale. The filters are
// built, added and dropped one at a time, so the heap holds the index
// alone when B/filter is read; the oracle streams the same filters again
// and evaluates each with Filter.Eval on a sample of events.
func BenchmarkMatchWINTScale(b *testing.B) {
	if !*scale {
		b.Skip("opt in with -sion.scale")
	}
	w := wintW(b)
	events := w.Events(numEvents)
	for _, n := range []int{3_000_000, 9_000_000} {
		b.Run(sizeName(n), func(b *testing.B) {
			m0 := heapAlloc()
			x := filter.NewIndex(w.Ontology)
			start := time.Now()
			require.NoError(b, w.EachFilter(n, func(i int, f *filter.Filter) error { return x.Add(uint64(i), f) }))
			buildTime := time.Since(start)
			indexBytes := float64(heapAlloc()-m0) / float64(n)

			// The oracle, streamed: every filter evaluated on the sample.
			const sample = 5
			want := make([][]hit, sample)
			require.NoError(b, w.EachFilter(n, func(i int, f *filter.Filter) error {
				for k := range sample {
					if ok, score := f.Eval(events[k]); ok {
						want[k] = append(want[k], hit{uint64(i), score})
					}
				}
				return nil
			}))
			for k := range sample {
				got := collect(x.Match, events[k])
				require.True(b, sameHits(got, want[k]), "event %d: %s", k, firstDiff(got, want[k]))
			}

			collectGarbage()
			count := 0
			fn := func(uint64, float64) { count++ }
			b.ReportAllocs()
			cpu := startCPU()
			i := 0
			for b.Loop() {
				x.Match(events[i%len(events)], fn)
				i++
			}
			cpu.report(b, i)
			b.ReportMetric(float64(count)/float64(i), "matches/event")
			b.ReportMetric(indexBytes, "B/filter")
			b.ReportMetric(float64(buildTime.Nanoseconds())/float64(n), "ns-build/filter")
		})
	}
}

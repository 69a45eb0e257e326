package filter

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sion-go/sion/ontology"
)

// BenchmarkIndexInterval is a small in-package twin of bench/'s W-INT
// workload (20 int attributes, 10 closed intervals of width 0.3 per filter,
// all 20 values per event), for profiling the matcher without the bench
// module.
func BenchmarkIndexInterval(b *testing.B) {
	const d, s, domain = 20, 10, 1_000_000
	var attrs []ontology.Attribute
	for i := 0; i < d; i++ {
		attrs = append(attrs, ontology.Attribute{Name: fmt.Sprintf("a%d", i), Kind: ontology.KindInt})
	}
	o, err := ontology.New([]ontology.TypeDef{{Name: "T", Attributes: attrs}})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			ix := intervalIndexes[n]
			if ix != nil {
				r = rand.New(rand.NewPCG(3, 4))
				goto events
			}
			ix = NewIndex(o)
			for id := 0; id < n; id++ {
				spec := Spec{Type: "T"}
				for _, a := range r.Perm(d)[:s] {
					lo := r.Int64N(domain * 7 / 10)
					spec.Predicates = append(spec.Predicates, Attr(attrs[a].Name).Range(ontology.Int(lo), ontology.Int(lo+domain*3/10), false, false))
				}
				if err := ix.Add(uint64(id), MustBuild(spec)); err != nil {
					b.Fatal(err)
				}
			}
			intervalIndexes[n] = ix
		events:
			evs := make([]*BasicEvent, 256)
			for i := range evs {
				ev := &BasicEvent{Type: "T"}
				for _, a := range attrs {
					ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a.Name, Value: ontology.Int(r.Int64N(domain))})
				}
				evs[i] = ev
			}
			matches := 0
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				ix.Match(evs[i&255], func(uint64, float64) { matches++ })
				i++
			}
			b.ReportMetric(float64(matches)/float64(i), "matches/event")
		})
	}
}

var (
	benchSizes      = []int{10_000, 100_000}
	intervalIndexes = map[int]*Index{} // built once per size: b.Run calls the body more than once
)

package filter

import (
	"fmt"
	"testing"

	"github.com/sion-go/sion/ontology"
)

// BenchmarkSetMembership matches events against one filter holding
// `x not in {…}` of n integer members spread too far apart for a bitmap
// (so that verification reads the record), with a value that is not a
// member and falls amid them: the case where a scan reads every member.
// The sizes straddle recSetLinear; 10000 is about what 64 KiB of filter
// source holds.
func BenchmarkSetMembership(b *testing.B) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "T", Attributes: []ontology.Attribute{{Name: "x", Kind: ontology.KindInt}}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{4, 8, 9, 16, 32, 100, 10_000} {
		b.Run(fmt.Sprintf("notin/n=%d", n), func(b *testing.B) {
			set := make([]ontology.Value, n)
			for i := range set {
				set[i] = ontology.Int(int64(i) * 1000)
			}
			ix := NewIndex(o)
			if err := ix.Add(1, MustBuild(Spec{Type: "T", Predicates: []Predicate{Attr("x").NotIn(set...)}})); err != nil {
				b.Fatal(err)
			}
			ev := &BasicEvent{Type: "T", Attrs: []ontology.Attr{{Name: "x", Value: ontology.Int(int64(n/2)*1000 + 1)}}}
			matches := 0
			b.ReportAllocs()
			for b.Loop() {
				ix.Match(ev, func(uint64, float64) { matches++ })
			}
			if matches == 0 {
				b.Fatal("no match")
			}
		})
	}
}

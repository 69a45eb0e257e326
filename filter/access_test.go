package filter

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// TestAddedPostings: the postings Add derives from a filter's predicates
// (addedPostings) are those Remove derives from its record (postingsOf),
// in the same order, for every kind of predicate as an access predicate
// by itself or by its operand's presence: sets small and large, with
// repeated and equal members (1 and 1.0), ranges, affixes, payload and
// XPath operands.
func TestAddedPostings(t *testing.T) {
	var fs []*Filter
	for seed := range 40 {
		w := newRandWorld(t, uint64(seed))
		for range 50 {
			fs = append(fs, w.filter())
		}
	}
	var big []ontology.Value
	for i := range 40 {
		big = append(big, ontology.Int(int64(i%23)), ontology.Float(float64(i%7)))
	}
	fs = append(fs,
		MustBuild(Spec{Predicates: []Predicate{Attr("x").In(big...), Attr("y").NotIn(big...)}}),
		MustBuild(Spec{Predicates: []Predicate{Attr("x").In(ontology.Int(1), ontology.Float(1), ontology.Int(2), ontology.Int(1))}}),
		MustCompile(`{xpath(/a/b) exists; xpath(/c) == "d"; json(e) > 1}`),
	)
	for n, f := range fs {
		keys := make([]uint32, len(f.preds))
		for i := range keys {
			keys[i] = uint32(3*i + 1)
		}
		rec, at := appendRecord(nil, f, keys, nil)
		acc := len(rec)
		var codes []uint64
		for i := range f.preds {
			if f.preds[i].Op != OpTrue {
				codes = append(codes, uint64(i)<<1|uint64((n+i)%3/2)) // some by presence
			}
		}
		if len(codes) == 0 {
			continue
		}
		rec = binary.AppendUvarint(append(rec, accPreds), uint64(len(codes)))
		for _, c := range codes {
			rec = binary.AppendUvarint(rec, c)
		}
		want := postingsOf(rec, nil)
		require.Equal(t, want, accessPostings(rec, at, acc, nil))
		got := addedPostings(f, keys, rec, acc, nil)
		require.Equal(t, fmt.Sprint(want), fmt.Sprint(got), "filter %d: %v", n, f)
		require.Equal(t, len(want), len(got))
		for j := range want {
			require.True(t, samePlace(want[j], got[j]) && want[j].implied == got[j].implied && want[j].via == got[j].via && want[j].span == got[j].span && want[j].v == got[j].v,
				"filter %d posting %d: %+v, want %+v", n, j, got[j], want[j])
		}
	}
}

package filter

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// Attack tests for a group's gathered lists (scanLists), places beyond
// the three inline ones, and the add path (accessPostings, countFilter,
// headForm, enter), written by a reviewer: compared with the oracle.

func listsOnt(t testing.TB, nattrs int) *ontology.Ontology {
	t.Helper()
	var as []ontology.Attribute
	for i := range nattrs {
		k := []ontology.Kind{ontology.KindInt, ontology.KindString, ontology.KindFloat}[i%3]
		as = append(as, ontology.Attribute{Name: fmt.Sprintf("x%d", i), Kind: k})
	}
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "L", Attributes: as},
		{Name: "M", Parents: []string{"L"}},
		{Name: "N", Parents: []string{"M"}},
		{Name: "Z"},
	})
	require.NoError(t, err)
	return o
}

var listsStrs = []string{"", "a", "ab", "abc", "abcd", "b", "ba", "cba", "xabc", "abcab", "zz"}

func listsInt(r *rand.Rand) ontology.Value { return ontology.Int(int64(r.IntN(12)) - 2) }

// listsPred returns a predicate of any sparse kind on attribute i of
// nattrs, or on a JSON path.
func listsPred(r *rand.Rand, nattrs int) Predicate {
	if r.IntN(8) == 0 {
		p := JSON([]string{"a", "b.c", "n"}[r.IntN(3)])
		switch r.IntN(4) {
		case 0:
			return p.EQ(listsInt(r))
		case 1:
			return p.Prefix(listsStrs[r.IntN(len(listsStrs))])
		case 2:
			return p.Exists()
		}
		return p.In(listsInt(r), listsInt(r), ontology.String("ab"))
	}
	i := r.IntN(nattrs)
	a := Attr(fmt.Sprintf("x%d", i))
	switch i % 3 {
	case 1: // string
		s := listsStrs[r.IntN(len(listsStrs))]
		switch r.IntN(6) {
		case 0:
			return a.Prefix(s)
		case 1:
			return a.Suffix(s)
		case 2:
			return a.EQ(ontology.String(s))
		case 3:
			set := make([]ontology.Value, 1+r.IntN(12))
			for k := range set {
				set[k] = ontology.String(listsStrs[r.IntN(len(listsStrs))]) // duplicates too
			}
			if r.IntN(2) == 0 {
				return a.NotIn(set...)
			}
			return a.In(set...)
		case 4:
			return a.Exists()
		}
		return a.NE(ontology.String(s))
	default: // numeric
		switch r.IntN(8) {
		case 0:
			return a.EQ(listsInt(r))
		case 1, 2:
			set := make([]ontology.Value, 1+r.IntN(70))
			for k := range set {
				if r.IntN(3) == 0 {
					set[k] = ontology.Int(int64(r.IntN(200)) - 100)
				} else {
					set[k] = listsInt(r) // duplicates
				}
			}
			if r.IntN(3) == 0 {
				return a.NotIn(set...)
			}
			return a.In(set...)
		case 3:
			lo := int64(r.IntN(12)) - 2
			return a.Range(ontology.Int(lo), ontology.Int(lo+int64(r.IntN(40))), r.IntN(2) == 0, r.IntN(2) == 0)
		case 4:
			return a.GE(listsInt(r))
		case 5:
			return a.NotExists()
		case 6:
			return a.NE(listsInt(r))
		}
		return a.Exists()
	}
}

func listsSpec(r *rand.Rand, nattrs, maxPreds int) Spec {
	s := Spec{Type: []string{"L", "M", "N", AnyType, "Z"}[r.IntN(5)]}
	np := r.IntN(maxPreds + 1)
	for range np {
		s.Predicates = append(s.Predicates, listsPred(r, nattrs))
	}
	switch r.IntN(4) {
	case 1:
		if np > 0 {
			s.Mode = ModeAtLeast
			s.AtLeast = 1 + r.IntN(np)
		}
	case 2:
		if np > 0 {
			s.Mode = ModeScore
			total := 0.0
			for k := range s.Predicates {
				w := []float64{1, 2, 0.5, 7}[r.IntN(4)]
				s.Predicates[k].Weight = w
				total += w
			}
			s.Threshold = []float64{total, 1, total / 2}[r.IntN(3)]
			clampThreshold(&s)
		}
	}
	return s
}

func listsEvent(r *rand.Rand, nattrs int) *BasicEvent {
	ev := &BasicEvent{Type: []string{"L", "M", "N", "Z", "Unknown", "L"}[r.IntN(6)]}
	for i := range nattrs {
		if r.IntN(5) == 0 {
			continue
		}
		var v ontology.Value
		switch i % 3 {
		case 1:
			v = ontology.String(listsStrs[r.IntN(len(listsStrs))])
			if r.IntN(10) == 0 {
				v = listsInt(r)
			}
		default:
			v = listsInt(r)
			if r.IntN(8) == 0 {
				v = ontology.Float(float64(r.IntN(24))/2 - 2)
			}
			if r.IntN(20) == 0 {
				v = ontology.String("ab")
			}
		}
		ev.Attrs = append(ev.Attrs, ontology.Attr{Name: fmt.Sprintf("x%d", i), Value: v})
	}
	if r.IntN(3) > 0 {
		ev.ContentType = "application/json"
		ev.Data = fmt.Appendf(nil, `{"a": %d, "b": {"c": "%s"}, "n": %d}`, r.IntN(12)-2, listsStrs[r.IntN(len(listsStrs))], r.IntN(3))
	}
	return ev
}

// TestAttackListsManyPerGroup fills groups of a type hierarchy, AnyType
// and an unrelated type with sparse filters of up to 9 predicates (more
// postings than the inline places) on 30 attributes (strings with
// prefixes and suffixes, sets of up to 70 members with duplicates,
// ranges, payload paths), so that a group's visit gathers many lists;
// removes and re-adds filters (the same IDs, the same *Filter) so that
// lists move, full and half dead; and compares every event with the
// oracle, events of several types, of unknown type, and of other groups
// one after another (the pooled scratch).
func TestAttackListsManyPerGroup(t *testing.T) {
	const nattrs = 30
	o := listsOnt(t, nattrs)
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 77))
			ix, bf := NewIndex(o), NewBruteForce(o)
			fs := map[uint64]*Filter{}
			live := map[uint64]bool{}
			probe := NewIndex(o)
			for id := range uint64(3000) {
				f, err := Build(listsSpec(r, nattrs, 9))
				if err != nil || probe.Add(id, f) != nil {
					continue // not valid for its type
				}
				fs[id] = f
			}
			ids := make([]uint64, 0, len(fs))
			for id := range uint64(3000) {
				if fs[id] != nil {
					ids = append(ids, id)
				}
			}
			check := func(n int) {
				t.Helper()
				for range n {
					if !attackDiff(t, ix, bf, listsEvent(r, nattrs)) {
						t.FailNow()
					}
				}
			}
			for step := range 12000 {
				id := ids[r.IntN(len(ids))]
				if live[id] {
					require.True(t, ix.Remove(id))
					require.True(t, bf.Remove(id))
					delete(live, id)
				} else {
					require.NoError(t, ix.Add(id, fs[id]))
					require.NoError(t, bf.Add(id, fs[id]))
					live[id] = true
				}
				if step%50 == 0 {
					check(4)
					checkEqLists(t, ix)
				}
				if step%3000 == 2999 { // empty most out: lists emptied and made again
					for id := range live {
						if r.IntN(10) > 0 {
							require.True(t, ix.Remove(id))
							require.True(t, bf.Remove(id))
							delete(live, id)
						}
					}
					check(30)
					checkEqLists(t, ix)
				}
			}
			check(200)
		})
	}
}

// TestAttackListsSameFilterManyPostings adds one filter with many
// predicates on the same few attributes (postings beyond the inline three
// places, several in one list), and copies of it under many IDs, removes
// every other one, re-adds them, and compares with the oracle.
func TestAttackListsSameFilterManyPostings(t *testing.T) {
	o := listsOnt(t, 6)
	r := rand.New(rand.NewPCG(1, 2))
	ix, bf := NewIndex(o), NewBruteForce(o)
	var fs []*Filter
	for range 40 {
		s := Spec{Type: "L"}
		for range 4 + r.IntN(10) {
			s.Predicates = append(s.Predicates, listsPred(r, 2)) // x0 (int), x1 (string) only
		}
		if r.IntN(2) == 0 {
			s.Mode, s.AtLeast = ModeAtLeast, 1+r.IntN(len(s.Predicates))
		}
		f, err := Build(s)
		if err != nil {
			continue
		}
		fs = append(fs, f)
	}
	id := uint64(0)
	var ids []uint64
	for range 20 {
		for _, f := range fs {
			require.NoError(t, ix.Add(id, f))
			require.NoError(t, bf.Add(id, f))
			ids = append(ids, id)
			id++
		}
	}
	check := func() {
		t.Helper()
		for range 100 {
			if !attackDiff(t, ix, bf, listsEvent(r, 2)) {
				t.FailNow()
			}
		}
	}
	check()
	for round := range 4 {
		for k, i := range ids {
			if k%2 == round%2 {
				require.True(t, ix.Remove(i))
				require.True(t, bf.Remove(i))
			}
		}
		check()
		for k, i := range ids {
			if k%2 == round%2 {
				f := fs[k%len(fs)]
				require.NoError(t, ix.Add(i, f))
				require.NoError(t, bf.Add(i, f))
			}
		}
		check()
	}
}

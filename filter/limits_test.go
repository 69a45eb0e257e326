package filter

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// Limits of one filter and of a reader whose event misbehaves (found by
// helper-54's attack trial, 2026-12-03).

func limitsOnt(t testing.TB) *ontology.Ontology {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{{Name: "R", Attributes: []ontology.Attribute{
		{Name: "i", Kind: ontology.KindInt}, {Name: "s", Kind: ontology.KindString},
	}}})
	require.NoError(t, err)
	return o
}

// TestMaxPredicates: a filter of more than MaxPredicates predicates is
// refused by Build and Compile; one of exactly MaxPredicates, all posted
// on one list, is added, outlives moves of that list, and is removed
// without touching the other filters' postings. (A posting's place in
// its entry is 16 bits: 65,537 postings made Remove panic, or, after the
// list had moved, mark three other filters' postings dead.)
func TestMaxPredicates(t *testing.T) {
	_, err := Build(Spec{Type: "R", Mode: ModeAtLeast, AtLeast: 1,
		Predicates: make([]Predicate, MaxPredicates+1)})
	var be *BuildError
	require.True(t, errors.As(err, &be), "Build of %d predicates: %v", MaxPredicates+1, err)
	require.Contains(t, err.Error(), fmt.Sprintf("at most %d", MaxPredicates))
	_, err = Compile("{type ⊑ R; match atleast 1; " + strings.Repeat("i > 1; ", MaxPredicates) + "i > 1}")
	require.ErrorContains(t, err, fmt.Sprintf("at most %d", MaxPredicates))

	o := limitsOnt(t)
	ix, bf := NewIndex(o), NewBruteForce(o)
	add := func(id uint64, f *Filter) {
		require.NoError(t, ix.Add(id, f))
		require.NoError(t, bf.Add(id, f))
	}
	remove := func(id uint64) {
		require.True(t, ix.Remove(id))
		require.True(t, bf.Remove(id))
	}
	same := func(when string, v int64) {
		ev := &BasicEvent{Type: "R", Attrs: []ontology.Attr{{Name: "i", Value: ontology.Int(v)}}}
		got, want := map[uint64]float64{}, map[uint64]float64{}
		ix.Match(ev, func(id uint64, s float64) { got[id] = s })
		bf.Match(ev, func(id uint64, s float64) { want[id] = s })
		require.Equal(t, len(want), len(got), "%s, i = %d: filters matched", when, v)
		require.Equal(t, want, got, "%s, i = %d", when, v)
	}
	const before, after = 5_000, 70_000
	for k := range uint64(before) {
		add(k+1, MustCompile(fmt.Sprintf("{type ⊑ R; i != %d}", -int(k))))
	}
	big := MustCompile("{type ⊑ R; match atleast 1; " + strings.Repeat("i > 1; ", MaxPredicates-1) + "i > 1}")
	require.Len(t, big.Predicates(), MaxPredicates)
	add(1<<40, big)
	same("with the big filter", 5)
	for k := range uint64(before) {
		remove(k + 1)
	}
	for k := range uint64(after) { // the list of i moves as it grows
		add(1<<41+k, MustCompile(fmt.Sprintf("{type ⊑ R; i != %d}", -int(k))))
	}
	same("after the list moved", 5)
	same("after the list moved", 0)
	remove(1 << 40)
	same("after removing the big filter", 5)
	same("after removing the big filter", -1)
}

// panicEvent panics in the method named by where.
type panicEvent struct {
	BasicEvent
	where string
}

func (e *panicEvent) Attr(i int) (string, ontology.Value) {
	if e.where == "Attr" {
		panic("Attr")
	}
	return e.BasicEvent.Attr(i)
}

func (e *panicEvent) Payload() (string, []byte) {
	if e.where == "Payload" {
		panic("Payload")
	}
	return e.BasicEvent.Payload()
}

// TestMatchPanicLeavesWriters: an event whose methods panic (or a typed
// nil *BasicEvent) makes Match panic to its caller; a caller who
// recovers finds the index as it was, and writers, which wait for the
// readers of the copy they change, do not wait for ever.
func TestMatchPanicLeavesWriters(t *testing.T) {
	var typedNil *BasicEvent
	for _, c := range []struct {
		name string
		ev   Event
	}{
		{"Attr", &panicEvent{BasicEvent: BasicEvent{Type: "R", Attrs: []ontology.Attr{{Name: "i", Value: ontology.Int(10)}}}, where: "Attr"}},
		{"Payload", &panicEvent{BasicEvent: BasicEvent{Type: "R", ContentType: "application/json", Data: []byte(`{"a":2}`)}, where: "Payload"}},
		{"typed nil", typedNil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ix := NewIndex(limitsOnt(t))
			for id := uint64(1); id <= 60; id++ {
				require.NoError(t, ix.Add(id, MustCompile(fmt.Sprintf("{type ⊑ R; i > %d}", int(id)-50))))
				require.NoError(t, ix.Add(id+1000, MustCompile(fmt.Sprintf("{json(a) == %d}", id))))
			}
			require.Panics(t, func() { ix.Match(c.ev, func(uint64, float64) {}) })
			done := make(chan struct{})
			go func() {
				defer close(done)
				for id := uint64(2000); id < 2100; id++ {
					if err := ix.Add(id, MustCompile(fmt.Sprintf(`{type ⊑ R; json(k%d) == 1; s == "y%d"}`, id, id))); err != nil {
						panic(err)
					}
					ix.Remove(id - 1000) // the JSON filters 1001…1060, and IDs never added
				}
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Add and Remove still wait 30 s after a Match whose event panicked")
			}
			n := 0
			ix.Match(&BasicEvent{Type: "R", Attrs: []ontology.Attr{{Name: "i", Value: ontology.Int(10)}}}, func(uint64, float64) { n++ })
			require.Equal(t, 59, n, "the filters i > k for k = -49…9")
		})
	}
}

// TestPredicatesCopiesSets: changing the predicates a filter gives back,
// sets included, leaves the filter as it was.
func TestPredicatesCopiesSets(t *testing.T) {
	f := MustCompile(`{type ⊑ R; i in {1, 2, 3}}`)
	ps := f.Predicates()
	ps[0].Set[0] = ontology.Int(7)
	ps[0].Op = OpNotIn
	ev := &BasicEvent{Type: "R", Attrs: []ontology.Attr{{Name: "i", Value: ontology.Int(1)}}}
	ok, _ := f.Eval(ev)
	require.True(t, ok)
	require.Equal(t, `{type ⊑ R; i in {1, 2, 3}}`, f.String())
}

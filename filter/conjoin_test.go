package filter

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestConjoin(t *testing.T) {
	o := musicOnt(t)
	tests := []struct {
		name, a, b string
		want       []string
		exact      bool
	}{
		{"subtype wins, predicates concatenated", `{type ⊑ music; price > 1}`, `{type ⊑ BGM; tempo > 100}`,
			[]string{`{type ⊑ BGM; price > 1; tempo > 100}`}, true},
		{"AnyType is the identity", `{}`, `{type ⊑ popular}`, []string{`{type ⊑ popular}`}, true},
		{"both AnyType", `{price > 1}`, `{genre == "jazz"}`, []string{`{type ⊑ *; price > 1; genre == "jazz"}`}, true},
		{"unrelated types: their common subtypes", `{type ⊑ music}`, `{type ⊑ seasonal; season == "winter"}`,
			[]string{`{type ⊑ BGM; season == "winter"}`}, true},
		{"disjoint types", `{type ⊑ popular}`, `{type ⊑ seasonal}`, nil, true},
		{"synonyms resolved, duplicates removed", `{type ⊑ Musik; cost > 1}`, `{price > 1; bpm < 90}`,
			[]string{`{type ⊑ music; price > 1; tempo < 90}`}, true},
		{"bounds folded", `{type ⊑ music; price < -9.868649107779168e-16}`, `{type ⊑ music; price < 0}`,
			[]string{`{type ⊑ music; price < -9.868649107779168e-16}`}, true},
		{"contradiction", `{type ⊑ music; price < 0}`, `{type ⊑ BGM; price > 1}`, nil, true},
		{"namespaces merged", `{xmlns:a = "urn:a"; xpath(/a:x) exists}`, `{xmlns:b = "urn:b"; xpath(/b:y) exists}`,
			[]string{`{type ⊑ *; xmlns:a = "urn:a"; xmlns:b = "urn:b"; xpath(/a:x) exists; xpath(/b:y) exists}`}, true},
		{"namespace conflict: b alone", `{type ⊑ BGM; xmlns:a = "urn:a"; xpath(/a:x) exists}`, `{type ⊑ music; xmlns:a = "urn:other"; xpath(/a:y) exists}`,
			[]string{`{type ⊑ BGM; xmlns:a = "urn:other"; xpath(/a:y) exists}`}, false},
		{"type only and atleast: exact", `{type ⊑ popular}`, `{type ⊑ music; match atleast 1; price > 1; rank < 3}`,
			[]string{`{type ⊑ popular; match atleast 1; price > 1; rank < 3}`}, true},
		{"match all side kept", `{type ⊑ music; match atleast 1; price > 1; genre == "jazz"}`, `{type ⊑ popular; rank < 3}`,
			[]string{`{type ⊑ popular; rank < 3}`}, false},
		{"neither match all: b kept", `{type ⊑ music; match atleast 1; price > 1; genre == "jazz"}`, `{type ⊑ popular; match score >= 1; rank < 3 weight 2}`,
			[]string{`{type ⊑ popular; match score >= 1; rank < 3 weight 2}`}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, exact := Conjoin(MustCompile(tc.a), MustCompile(tc.b), o)
			assert.Equal(t, tc.want, texts(out))
			assert.Equal(t, tc.exact, exact)
		})
	}
	t.Run("a filter the ontology refuses", func(t *testing.T) {
		a, b := MustCompile(`{type ⊑ Nope}`), MustCompile(`{type ⊑ Musik; cost > 1}`)
		out, exact := Conjoin(a, b, o)
		assert.Equal(t, []string{`{type ⊑ music; price > 1}`}, texts(out), "the other side, resolved")
		assert.False(t, exact)
		out, exact = Conjoin(b, MustCompile(`{nope exists}`), o)
		assert.Equal(t, []string{`{type ⊑ music; price > 1}`}, texts(out))
		assert.False(t, exact)
		out, exact = Conjoin(a, MustCompile(`{nope exists}`), o)
		assert.Equal(t, []string{`{type ⊑ *; nope exists}`}, texts(out), "b as it is")
		assert.False(t, exact)
		assert.Panics(t, func() { Conjoin(nil, b, o) })
	})
}

// TestConjoinProperty: over random ontologies (multiple inheritance
// included), filters and events, the conjunction matches exactly the
// events both filters match when exact, and at least those otherwise.
func TestConjoinProperty(t *testing.T) {
	wanted, inexact := 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		w := newRandWorld(t, seed)
		for range 40 {
			a, b := w.filter(), w.filter()
			out, exact := Conjoin(a, b, w.ont)
			if !exact {
				inexact++
			}
			for range 40 {
				ev := w.event()
				want := matchesIn(w.ont, a, ev) && matchesIn(w.ont, b, ev)
				got := slices.ContainsFunc(out, func(g *Filter) bool { return matchesIn(w.ont, g, ev) })
				if want {
					wanted++
				}
				if want && !got || exact && got && !want {
					t.Fatalf("seed %d: a %s\nb %s\nconjoined %v (exact %v)\nevent %s %v: want %v got %v", seed, a, b, texts(out), exact, ev.Type, ev.Attrs, want, got)
				}
			}
		}
	}
	t.Logf("%d events matched both filters; %d of 1600 conjunctions inexact", wanted, inexact)
	assert.Greater(t, wanted, 1000)
}

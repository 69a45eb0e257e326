package filter

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// musicOnt is S1's example with synonyms: BGM is-a music and is-a
// seasonal; popular is-a music. "Musik" and "background music" are type
// synonyms, "cost" and "bpm" attribute synonyms; tempo is declared only by
// the subtype BGM, rank only by popular.
func musicOnt(t testing.TB) *ontology.Ontology {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "music", Synonyms: []string{"Musik"}, Attributes: []ontology.Attribute{
			{Name: "price", Kind: ontology.KindFloat, Unit: "USD", Synonyms: []string{"cost"}},
			{Name: "genre", Kind: ontology.KindString},
		}},
		{Name: "seasonal", Attributes: []ontology.Attribute{{Name: "season", Kind: ontology.KindString}}},
		{Name: "popular", Parents: []string{"music"}, Attributes: []ontology.Attribute{{Name: "rank", Kind: ontology.KindInt}}},
		{Name: "BGM", Parents: []string{"Musik", "seasonal"}, Synonyms: []string{"background music"}, Attributes: []ontology.Attribute{
			{Name: "tempo", Kind: ontology.KindInt, Synonyms: []string{"bpm"}},
			{Name: "released", Kind: ontology.KindTime},
			{Name: "loop", Kind: ontology.KindBool},
		}},
	})
	require.NoError(t, err)
	return o
}

// sizedMatcher is what Index and BruteForce share.
type sizedMatcher interface {
	matcher
	Len() int
}

func sizedMatchers(t *testing.T, o *ontology.Ontology, body func(t *testing.T, m sizedMatcher)) {
	t.Run("index", func(t *testing.T) { body(t, NewIndex(o)) })
	t.Run("bruteforce", func(t *testing.T) { body(t, NewBruteForce(o)) })
}

// TestResolveCanonical: synonyms of types and attributes are replaced by
// canonical names when a filter enters (Resolve, and so Index.Add); a
// filter already canonical comes back as itself.
func TestResolveCanonical(t *testing.T) {
	o := musicOnt(t)
	tests := []struct{ name, src, want string }{
		{"type synonym", `{type ⊑ Musik; price > 1}`, `{type ⊑ music; price > 1}`},
		{"type synonym with space", `{type ⊑ "background music"}`, `{type ⊑ BGM}`},
		{"attribute synonym", `{type ⊑ music; cost > 1}`, `{type ⊑ music; price > 1}`},
		{"both", `{type ⊑ "background music"; cost in [1, 2); bpm >= 100}`, `{type ⊑ BGM; price in [1, 2); tempo >= 100}`},
		{"attribute synonym on AnyType", `{cost exists}`, `{type ⊑ *; price exists}`},
		{"subtype attribute synonym on supertype", `{type ⊑ Musik; bpm > 100}`, `{type ⊑ music; tempo > 100}`},
		{"payload operands untouched", `{type ⊑ Musik; json(cost) > 1; xpath(/cost) exists}`, `{type ⊑ music; json(cost) > 1; xpath(/cost) exists}`},
		{"mode kept", `{type ⊑ Musik; match score >= 1.5; cost > 1 weight 2; bpm > 1}`, `{type ⊑ music; match score >= 1.5; price > 1 weight 2; tempo > 1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := MustCompile(tt.src)
			before := f.String()
			r, err := Resolve(o, f)
			require.NoError(t, err)
			assert.Equal(t, tt.want, r.String())
			assert.Equal(t, before, f.String(), "the input filter is not changed")
			again, err := Resolve(o, r)
			require.NoError(t, err)
			assert.Same(t, r, again, "a canonical filter resolves to itself")
		})
	}
	f := MustCompile(`{type ⊑ music; price > 1}`)
	r, err := Resolve(o, f)
	require.NoError(t, err)
	assert.Same(t, f, r)
}

// TestResolveSynonymsMatch: a filter written with synonyms matches the
// events of the canonical type, its subtypes and canonical attribute names.
func TestResolveSynonymsMatch(t *testing.T) {
	o := musicOnt(t)
	sizedMatchers(t, o, func(t *testing.T, m sizedMatcher) {
		subscribe(t, m,
			`{type ⊑ Musik; cost in [20, 40]}`,
			`{type ⊑ "background music"; bpm > 100}`,
			`{type ⊑ music; bpm > 100}`,
			`{cost < 20}`,
		)
		price := func(typ string, p float64) Event {
			return attrEvent(typ, ontology.Attr{Name: "price", Value: ontology.Float(p)})
		}
		tempo := func(typ string, v int64) Event {
			return attrEvent(typ, ontology.Attr{Name: "tempo", Value: ontology.Int(v)})
		}
		assert.Equal(t, ids(1), matched(t, m, price("music", 25)))
		assert.Equal(t, ids(1), matched(t, m, price("popular", 20)))
		assert.Equal(t, ids(1), matched(t, m, price("BGM", 40)))
		assert.Equal(t, ids(4), matched(t, m, price("seasonal", 10)))
		assert.Equal(t, ids(2, 3), matched(t, m, tempo("BGM", 120)))
		assert.Empty(t, matched(t, m, tempo("BGM", 100)))
		assert.Empty(t, matched(t, m, tempo("seasonal", 120)))
		assert.Empty(t, matched(t, m, attrEvent("music", ontology.Attr{Name: "cost", Value: ontology.Float(25)})),
			"event attribute names are canonical: a synonym in an event is another name")
		assert.Equal(t, 4, m.Len())
	})
}

// TestResolveRefusals: unknown types and attributes, and literals that do
// not fit the declared kind, are refused with ErrInvalid and a message
// that names what is wrong; nothing is added.
func TestResolveRefusals(t *testing.T) {
	o := musicOnt(t)
	tests := []struct {
		name, src string
		mention   []string
	}{
		{"unknown type", `{type ⊑ Jazz}`, []string{`unknown event type "Jazz"`}},
		{"type case", `{type ⊑ Music; price > 1}`, []string{`"Music"`}},
		{"unknown attribute", `{type ⊑ music; colour == "red"}`, []string{`"colour"`, `"music"`}},
		{"attribute case", `{type ⊑ music; Price > 1}`, []string{`"Price"`}},
		{"attribute of a sibling", `{type ⊑ popular; tempo > 1}`, []string{`"tempo"`, `"popular"`}},
		{"attribute of an unrelated type", `{type ⊑ seasonal; rank == 1}`, []string{`"rank"`, `"seasonal"`}},
		{"attribute of a parent of a subtype", `{type ⊑ popular; season == "x"}`, []string{`"season"`}},
		{"AnyType unknown attribute", `{colour == 1}`, []string{`"colour"`, "any event type"}},
		{"string vs float", `{type ⊑ music; price == "cheap"}`, []string{`"price"`, "float", `"cheap"`}},
		{"string vs float via synonym", `{type ⊑ music; cost < "1"}`, []string{`"price"`}},
		{"number vs string", `{type ⊑ music; genre > 1}`, []string{`"genre"`, "string"}},
		{"bool vs string", `{type ⊑ music; genre == true}`, []string{`"genre"`}},
		{"int vs bool", `{type ⊑ BGM; loop == 1}`, []string{`"loop"`, "bool"}},
		{"int vs time", `{type ⊑ BGM; released > 0}`, []string{`"released"`, "time"}},
		{"time vs int", `{type ⊑ BGM; tempo == time("2024-01-01T00:00:00Z")}`, []string{`"tempo"`}},
		{"prefix on int", `{type ⊑ popular; rank prefix "1"}`, []string{`"rank"`, "prefix"}},
		{"suffix on float", `{type ⊑ music; price suffix "0"}`, []string{`"price"`, "suffix"}},
		{"contains on time", `{type ⊑ BGM; released contains "2024"}`, []string{`"released"`}},
		{"range end", `{type ⊑ music; price in ["a", "b"]}`, []string{`"price"`}},
		{"set member", `{type ⊑ music; price in {1, 2.5, "x"}}`, []string{`"x"`}},
		{"not in member", `{type ⊑ music; genre not in {"rock", 1}}`, []string{`"genre"`}},
		{"second predicate", `{type ⊑ music; price > 1; genre == 2}`, []string{"predicate 2", `"genre"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := MustCompile(tt.src)
			_, err := Resolve(o, f)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalid)
			var be *BuildError
			assert.ErrorAs(t, err, &be)
			for _, s := range tt.mention {
				assert.Contains(t, err.Error(), s)
			}
			sizedMatchers(t, o, func(t *testing.T, m sizedMatcher) {
				err := m.Add(1, f)
				assert.ErrorIs(t, err, ErrInvalid)
				assert.Equal(t, 0, m.Len(), "a refused filter is not added")
				assert.False(t, m.Remove(1))
			})
		})
	}
}

// TestResolveAccepts: what Resolve lets through.
func TestResolveAccepts(t *testing.T) {
	o := musicOnt(t)
	for _, src := range []string{
		`{type ⊑ music; tempo > 100}`,                   // declared only by the subtype BGM
		`{type ⊑ music; rank <= 10; tempo in [60, 90)}`, // two subtypes' attributes
		`{type ⊑ BGM; season == "winter"; price < 5}`,   // inherited from both parents
		`{type ⊑ music; price == 1}`,                    // an int literal on a float attribute
		`{type ⊑ popular; rank in {1, 2.0}}`,            // a float literal on an int attribute
		`{type ⊑ popular; rank < 2.5}`,                  // not an integer: still a number
		`{type ⊑ music; genre prefix "ro"; genre exists}`,
		`{type ⊑ BGM; released >= time("2024-01-01T00:00:00Z"); loop != false}`,
		`{type ⊑ music; price not exists}`,
		`{type ⊑ music; json(colour) == 1; xpath(/colour) exists}`, // payloads have no vocabulary
		`{genre == 1}`,      // AnyType: only the name is checked
		`{rank prefix "x"}`, // AnyType: kinds are not checked
		`{type ⊑ music; true}`,
	} {
		t.Run(src, func(t *testing.T) {
			_, err := Resolve(o, MustCompile(src))
			require.NoError(t, err)
		})
	}
}

// TestSubtypeAttributeOnSupertype: an attribute that only a subtype
// declares can be tested by a filter on the supertype, and matches events
// of that subtype.
func TestSubtypeAttributeOnSupertype(t *testing.T) {
	matchers(t, musicOnt(t), func(t *testing.T, m matcher) {
		subscribe(t, m, `{type ⊑ music; tempo > 100}`, `{type ⊑ music; tempo not exists}`)
		assert.Equal(t, ids(1), matched(t, m, attrEvent("BGM", ontology.Attr{Name: "tempo", Value: ontology.Int(120)})))
		assert.Equal(t, ids(2), matched(t, m, attrEvent("popular")))
		assert.Empty(t, matched(t, m, attrEvent("seasonal", ontology.Attr{Name: "tempo", Value: ontology.Int(120)})))
	})
}

// TestIndexIDs: duplicate IDs, Remove of unknown IDs and Len, on both
// matchers.
func TestIndexIDs(t *testing.T) {
	sizedMatchers(t, musicOnt(t), func(t *testing.T, m sizedMatcher) {
		assert.Equal(t, 0, m.Len())
		assert.False(t, m.Remove(7), "an empty index")
		f := MustCompile(`{type ⊑ music; price > 1}`)
		require.NoError(t, m.Add(7, f))
		require.NoError(t, m.Add(8, f), "one filter under two IDs")
		assert.Equal(t, 2, m.Len())

		err := m.Add(7, MustCompile(`{type ⊑ seasonal}`))
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrDuplicateID))
		assert.False(t, errors.Is(err, ErrInvalid))
		assert.Contains(t, err.Error(), "7")
		assert.Equal(t, 2, m.Len())
		ev := attrEvent("music", ontology.Attr{Name: "price", Value: ontology.Float(2)})
		assert.Equal(t, ids(7, 8), matched(t, m, ev), "the duplicate did not replace the filter")
		assert.Empty(t, matched(t, m, attrEvent("seasonal")))

		err = m.Add(7, MustCompile(`{type ⊑ Jazz}`))
		assert.ErrorIs(t, err, ErrInvalid, "an invalid filter under a duplicate ID: validity is checked first")

		assert.False(t, m.Remove(9))
		assert.True(t, m.Remove(7))
		assert.False(t, m.Remove(7), "removed twice")
		assert.Equal(t, 1, m.Len())
		assert.Equal(t, ids(8), matched(t, m, ev))
		require.NoError(t, m.Add(7, MustCompile(`{type ⊑ seasonal}`)), "a removed ID can be reused")
		assert.Equal(t, ids(7), matched(t, m, attrEvent("BGM")))
		assert.Equal(t, 2, m.Len())
		assert.True(t, m.Remove(7))
		assert.True(t, m.Remove(8))
		assert.Equal(t, 0, m.Len())
		assert.Empty(t, matched(t, m, ev))
	})
}

// TestIndexKeysThroughVocab: Add finds an attribute's key through its
// cached ontology look-up only while the key lives. A key released by
// Remove and reused for another attribute is not handed out again for
// the first, and filters renamed from synonyms share the canonical key.
func TestIndexKeysThroughVocab(t *testing.T) {
	o := musicOnt(t)
	ix := NewIndex(o)
	require.NoError(t, ix.Add(1, MustCompile(`{type ⊑ popular; rank == 1}`)))
	rank := ix.attrRefs["rank"].id
	require.True(t, ix.Remove(1))
	require.NotContains(t, ix.attrRefs, "rank", "the key was released")
	require.NoError(t, ix.Add(2, MustCompile(`{type ⊑ music; genre == "x"}`)))
	require.Equal(t, rank, ix.attrRefs["genre"].id, "genre took rank's freed key")
	require.NoError(t, ix.Add(3, MustCompile(`{type ⊑ popular; rank == 1}`)))
	assert.NotEqual(t, ix.attrRefs["genre"].id, ix.attrRefs["rank"].id)
	assert.Equal(t, 1, ix.attrRefs["rank"].refs)
	assert.Equal(t, ids(3), matched(t, ix, attrEvent("popular", ontology.Attr{Name: "rank", Value: ontology.Int(1)})))
	assert.Equal(t, ids(2), matched(t, ix, attrEvent("popular", ontology.Attr{Name: "genre", Value: ontology.String("x")})))
	require.NoError(t, ix.Add(4, MustCompile(`{type ⊑ popular; rank == 1}`)))
	assert.Equal(t, 2, ix.attrRefs["rank"].refs, "the second filter found the key through the look-up")

	// Synonyms: the filter is rebuilt with canonical names.
	require.NoError(t, ix.Add(5, MustCompile(`{type ⊑ BGM; bpm == 100}`)))
	require.NoError(t, ix.Add(6, MustCompile(`{type ⊑ BGM; tempo == 100}`)))
	require.NoError(t, ix.Add(7, MustCompile(`{type ⊑ BGM; bpm == 100}`)))
	assert.NotContains(t, ix.attrRefs, "bpm")
	assert.Equal(t, 3, ix.attrRefs["tempo"].refs)
	assert.Equal(t, ids(5, 6, 7), matched(t, ix, attrEvent("BGM", ontology.Attr{Name: "tempo", Value: ontology.Int(100)})))
}

// TestIndexVocabRecent: the look-ups Add finds in vocab.recent are those
// of the name's spelling: a name in the place of another, synonyms, the
// same spelling in other strings, and names after their keys were
// released all resolve as the ontology says.
func TestIndexVocabRecent(t *testing.T) {
	o := musicOnt(t)
	popular, ok := o.Lookup("popular")
	require.True(t, ok)
	ix := NewIndex(o)
	add := func(id uint64, name string, v float64) error {
		return ix.Add(id, MustBuild(Spec{Type: "popular", Predicates: []Predicate{Attr(name).EQ(ontology.Float(v))}}))
	}
	cost := strings.Clone("cost")
	require.NoError(t, add(1, cost, 1))
	r := ix.vocab.recent[recentSlot(popular.ID, cost)]
	require.NotNil(t, r.l, "the look-up of cost is in recent")
	require.Equal(t, "price", r.l.name)

	// cost's look-up in rank's place, as when two names share one: a hit
	// must compare the names.
	rank := strings.Clone("rank")
	ix.vocab.recent[recentSlot(popular.ID, rank)] = r
	require.NoError(t, add(2, rank, 2))
	assert.Equal(t, ids(2), matched(t, ix, attrEvent("popular", ontology.Attr{Name: "rank", Value: ontology.Int(2)})))
	assert.Empty(t, matched(t, ix, attrEvent("popular", ontology.Attr{Name: "price", Value: ontology.Float(2)})))

	// Synonym and canonical name, the same spellings again (hits), and
	// at other addresses (map look-ups).
	require.NoError(t, add(3, "price", 1))
	require.NoError(t, add(4, cost, 1))
	require.NoError(t, add(5, strings.Clone("cost"), 1))
	require.NoError(t, add(6, rank, 2))
	require.NoError(t, add(7, strings.Clone("rank"), 2))
	assert.Equal(t, ids(1, 3, 4, 5), matched(t, ix, attrEvent("popular", ontology.Attr{Name: "price", Value: ontology.Float(1)})))
	assert.Equal(t, ids(2, 6, 7), matched(t, ix, attrEvent("popular", ontology.Attr{Name: "rank", Value: ontology.Int(2)})))
	assert.Equal(t, 4, ix.attrRefs["price"].refs)
	assert.Equal(t, 3, ix.attrRefs["rank"].refs)

	// A name the type lacks is refused, and not cached.
	tempo := strings.Clone("tempo")
	require.ErrorIs(t, add(8, tempo, 1), ErrInvalid)
	assert.Nil(t, ix.vocab.recent[recentSlot(popular.ID, tempo)].l)

	// Keys released and acquired again through the cached look-ups.
	for id := uint64(1); id <= 7; id++ {
		require.True(t, ix.Remove(id))
	}
	assert.Empty(t, ix.attrRefs)
	require.NoError(t, add(9, rank, 3))
	require.NoError(t, add(10, cost, 3))
	assert.Equal(t, ids(9), matched(t, ix, attrEvent("popular", ontology.Attr{Name: "rank", Value: ontology.Int(3)})))
	assert.Equal(t, ids(10), matched(t, ix, attrEvent("popular", ontology.Attr{Name: "price", Value: ontology.Float(3)})))
	assert.Equal(t, 1, ix.attrRefs["rank"].refs)
	assert.Equal(t, 1, ix.attrRefs["price"].refs)
}

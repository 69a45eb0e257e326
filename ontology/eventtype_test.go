package ontology

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func at(line int) Position { return Position{File: "t.json", Line: line, Col: 3} }

// music is the S1 example: "BGM" is-a "music" and is-a "seasonal"; popular
// is-a music.
func musicDefs() []TypeDef {
	return []TypeDef{
		{Name: "music", Synonyms: []string{"Musik"}, Attributes: []Attribute{
			{Name: "title", Kind: KindString},
			{Name: "tempo", Kind: KindFloat, Unit: "bpm", Synonyms: []string{"bpm"}},
		}},
		{Name: "seasonal", Attributes: []Attribute{{Name: "season", Kind: KindString}}},
		{Name: "popular", Parents: []string{"Musik"}, Attributes: []Attribute{{Name: "rank", Kind: KindInt}}},
		{Name: "BGM", Parents: []string{"music", "seasonal"}, Label: "background music",
			Attributes: []Attribute{{Name: "venue", Kind: KindString, Synonyms: []string{"place"}}}},
	}
}

func mustNew(t testing.TB, defs []TypeDef) *Ontology {
	t.Helper()
	o, err := New(defs)
	require.NoError(t, err)
	return o
}

func id(t *testing.T, o *Ontology, name string) int {
	t.Helper()
	et, ok := o.Lookup(name)
	require.True(t, ok, "type %q", name)
	return et.ID
}

func TestMultipleInheritance(t *testing.T) {
	o := mustNew(t, musicDefs())
	music, seasonal, popular, bgm := id(t, o, "music"), id(t, o, "seasonal"), id(t, o, "popular"), id(t, o, "BGM")
	tests := []struct {
		name       string
		sub, super int
		want       bool
	}{
		{"BGM is-a music", bgm, music, true},
		{"BGM is-a seasonal", bgm, seasonal, true},
		{"BGM is-a BGM", bgm, bgm, true},
		{"popular is-a music", popular, music, true},
		{"popular is not seasonal", popular, seasonal, false},
		{"music is not BGM", music, bgm, false},
		{"BGM is not popular", bgm, popular, false},
		{"out of range", -1, music, false},
		{"out of range super", music, 1000, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, o.IsA(tc.sub, tc.super))
		})
	}
	t.Run("ancestors and descendants", func(t *testing.T) {
		assert.Equal(t, []int{music, seasonal, bgm}, o.Ancestors(bgm))
		assert.Equal(t, []int{music, popular, bgm}, o.Descendants(music))
		assert.Equal(t, []string{"music", "seasonal"}, o.Type(bgm).Parents)
		assert.Equal(t, "background music", o.Type(bgm).Label)
		assert.Nil(t, o.Ancestors(-1))
		assert.Nil(t, o.Type(o.NumTypes()))
	})
	t.Run("parents by synonym resolve to canonical names", func(t *testing.T) {
		assert.Equal(t, []string{"music"}, o.Type(popular).Parents)
	})
	t.Run("vocabulary inheritance", func(t *testing.T) {
		var names []string
		for _, a := range o.Vocabulary(bgm) {
			names = append(names, a.Name)
		}
		assert.Equal(t, []string{"season", "tempo", "title", "venue"}, names)
		a, ok := o.Attribute(bgm, "bpm")
		require.True(t, ok)
		assert.Equal(t, Attribute{Name: "tempo", Kind: KindFloat, Unit: "bpm", Synonyms: []string{"bpm"}}, a)
		_, ok = o.Attribute(music, "season")
		assert.False(t, ok)
		_, ok = o.Attribute(popular, "venue")
		assert.False(t, ok)
		assert.Len(t, o.Type(bgm).Attributes, 1, "own attributes only")
	})
	t.Run("attribute below", func(t *testing.T) {
		a, ok := o.AttributeBelow(music, "place")
		require.True(t, ok)
		assert.Equal(t, "venue", a.Name)
		a, ok = o.AttributeBelow(music, "rank")
		require.True(t, ok)
		assert.Equal(t, KindInt, a.Kind)
		_, ok = o.AttributeBelow(seasonal, "rank")
		assert.False(t, ok)
		a, ok = o.AttributeBelow(bgm, "title")
		require.True(t, ok, "inherited counts too")
		assert.Equal(t, KindString, a.Kind)
	})
	t.Run("synonyms", func(t *testing.T) {
		et, ok := o.Lookup("Musik")
		require.True(t, ok)
		assert.Equal(t, "music", et.Name)
		_, ok = o.Lookup("MUSIC")
		assert.False(t, ok, "names are case-sensitive")
		assert.Equal(t, "venue", o.CanonicalAttribute("place"))
		assert.Equal(t, "venue", o.CanonicalAttribute("venue"))
		assert.Equal(t, "nope", o.CanonicalAttribute("nope"))
		assert.True(t, o.HasAttribute("bpm"))
		assert.False(t, o.HasAttribute("nope"))
	})
	t.Run("tree has one interval per type", func(t *testing.T) {
		assert.LessOrEqual(t, o.ExtraIntervals(), 1, "only BGM's second parent may add an interval")
		tree := mustNew(t, []TypeDef{{Name: "a"}, {Name: "b", Parents: []string{"a"}}, {Name: "c", Parents: []string{"a"}}, {Name: "d", Parents: []string{"b"}}})
		assert.Zero(t, tree.ExtraIntervals())
	})
}

func TestReserved(t *testing.T) {
	o := mustNew(t, nil)
	require.Equal(t, NumReserved, len(reservedDefs))
	require.Equal(t, NumReserved, o.NumTypes())
	ctl := id(t, o, ControlType)
	assert.Equal(t, 0, ctl)
	for _, n := range []string{AdvertisementType, DiscoveryType, DiscoveryAnswerType} {
		t.Run(n, func(t *testing.T) {
			assert.True(t, o.IsA(id(t, o, n), ctl))
		})
	}
	t.Run("user types follow and may extend reserved ones", func(t *testing.T) {
		o := mustNew(t, []TypeDef{{Name: "MyAdvertisement", Parents: []string{AdvertisementType}}})
		assert.Equal(t, NumReserved, id(t, o, "MyAdvertisement"))
		assert.True(t, o.IsA(NumReserved, ctl))
	})
	t.Run("ReservedTypes is a copy", func(t *testing.T) {
		r := ReservedTypes()
		r[1].Parents[0] = "x"
		assert.Equal(t, ControlType, reservedDefs[1].Parents[0])
	})
}

func TestLoadErrors(t *testing.T) {
	attr := func(name string, k Kind, unit string, syn ...string) Attribute {
		return Attribute{Name: name, Kind: k, Unit: unit, Synonyms: syn}
	}
	tests := []struct {
		name string
		defs []TypeDef
		err  error
		msg  string
	}{
		{"empty name", []TypeDef{{Name: "A"}, {Pos: at(4)}}, ErrEmptyName,
			`ontology: t.json:4:3: empty name: type 1 has no name`},
		{"reserved name", []TypeDef{{Name: "sion.Mine", Pos: at(2)}}, ErrReserved,
			`ontology: t.json:2:3: type "sion.Mine": reserved name: names beginning "sion." belong to sion`},
		{"reserved synonym", []TypeDef{{Name: "A", Synonyms: []string{"sion.Control"}, Pos: at(2)}}, ErrReserved,
			`ontology: t.json:2:3: type "A": reserved name: synonym "sion.Control": names beginning "sion." belong to sion`},
		{"duplicate type", []TypeDef{{Name: "A", Pos: at(1)}, {Name: "B"}, {Name: "A", Pos: at(7)}}, ErrDuplicateType,
			`ontology: t.json:7:3: type "A": duplicate type: already defined at t.json:1:3`},
		{"type name is a synonym", []TypeDef{{Name: "A", Synonyms: []string{"B"}, Pos: at(1)}, {Name: "B", Pos: at(3)}}, ErrSynonym,
			`ontology: t.json:1:3: type "A": synonym collision: synonym "B" is the name of type "B"`},
		{"synonym twice", []TypeDef{{Name: "A", Synonyms: []string{"S"}}, {Name: "B", Synonyms: []string{"S"}, Pos: at(3)}}, ErrSynonym,
			`ontology: t.json:3:3: type "B": synonym collision: synonym "S" is already a synonym of type "A"`},
		{"synonym is own name", []TypeDef{{Name: "A", Synonyms: []string{"A"}, Pos: at(1)}}, ErrSynonym,
			`ontology: t.json:1:3: type "A": synonym collision: synonym "A" is the name of type "A"`},
		{"unknown parent", []TypeDef{{Name: "A", Parents: []string{"Nope"}, Pos: at(5)}}, ErrUnknownParent,
			`ontology: t.json:5:3: type "A": unknown parent "Nope"`},
		{"empty parent", []TypeDef{{Name: "A", Parents: []string{""}, Pos: at(5)}}, ErrEmptyName,
			`ontology: t.json:5:3: type "A": empty name: empty parent name`},
		{"self cycle", []TypeDef{{Name: "A", Parents: []string{"A"}, Pos: at(2)}}, ErrCycle,
			`ontology: t.json:2:3: type "A": inheritance cycle: "A" -> "A" (each name is a parent of the one before it)`},
		{"cycle", []TypeDef{
			{Name: "Root"},
			{Name: "A", Parents: []string{"Root", "C"}, Pos: at(2)},
			{Name: "B", Parents: []string{"A"}, Pos: at(3)},
			{Name: "C", Parents: []string{"B"}, Pos: at(4)},
		}, ErrCycle,
			`ontology: t.json:2:3: type "A": inheritance cycle: "A" -> "C" -> "B" -> "A" (each name is a parent of the one before it)`},
		{"invalid kind", []TypeDef{{Name: "A", Pos: at(2), Attributes: []Attribute{attr("x", KindInvalid, "")}}}, ErrInvalidKind,
			`ontology: t.json:2:3: type "A": invalid attribute kind: attribute "x" has kind invalid`},
		{"empty attribute name", []TypeDef{{Name: "A", Pos: at(2), Attributes: []Attribute{attr("", KindInt, "")}}}, ErrEmptyName,
			`ontology: t.json:2:3: type "A": empty name: attribute with no name`},
		{"attribute twice", []TypeDef{{Name: "A", Pos: at(2), Attributes: []Attribute{attr("x", KindInt, ""), attr("x", KindInt, "")}}}, ErrVocabulary,
			`ontology: t.json:2:3: type "A": conflicting vocabulary: attribute "x" declared twice`},
		{"conflicting kinds from two parents", []TypeDef{
			{Name: "P", Attributes: []Attribute{attr("x", KindInt, "")}},
			{Name: "Q", Attributes: []Attribute{attr("x", KindFloat, "")}},
			{Name: "C", Parents: []string{"P", "Q"}, Pos: at(9)},
		}, ErrVocabulary,
			`ontology: t.json:9:3: type "C": conflicting vocabulary: attribute "x" inherited as int from "P" and as float from "Q"`},
		{"conflicting units from two parents", []TypeDef{
			{Name: "P", Attributes: []Attribute{attr("t", KindFloat, "degC")}},
			{Name: "Q", Attributes: []Attribute{attr("t", KindFloat, "degF")}},
			{Name: "C", Parents: []string{"P", "Q"}, Pos: at(9)},
		}, ErrVocabulary,
			`ontology: t.json:9:3: type "C": conflicting vocabulary: attribute "t" inherited as float [degC] from "P" and as float [degF] from "Q"`},
		{"redeclared with another kind", []TypeDef{
			{Name: "P", Attributes: []Attribute{attr("x", KindInt, "")}},
			{Name: "C", Parents: []string{"P"}, Pos: at(4), Attributes: []Attribute{attr("x", KindString, "")}},
		}, ErrVocabulary,
			`ontology: t.json:4:3: type "C": conflicting vocabulary: attribute "x" redeclared as string, inherited as int from "P"`},
		{"attribute synonym for two attributes", []TypeDef{
			{Name: "P", Attributes: []Attribute{attr("celsius", KindFloat, "degC", "temp")}},
			{Name: "Q", Pos: at(6), Attributes: []Attribute{attr("fahrenheit", KindFloat, "degF", "temp")}},
		}, ErrSynonym,
			`ontology: t.json:6:3: type "Q": synonym collision: "temp" is a synonym of attribute "fahrenheit" and of attribute "celsius" (declared by type "P")`},
		{"attribute synonym is an attribute", []TypeDef{
			{Name: "P", Attributes: []Attribute{attr("temp", KindFloat, "")}},
			{Name: "Q", Pos: at(6), Attributes: []Attribute{attr("celsius", KindFloat, "", "temp")}},
		}, ErrSynonym,
			`ontology: t.json:6:3: type "Q": synonym collision: synonym "temp" of attribute "celsius" is an attribute of type "P"`},
		{"attribute is a synonym", []TypeDef{
			{Name: "P", Pos: at(2), Attributes: []Attribute{attr("celsius", KindFloat, "", "temp")}},
			{Name: "Q", Pos: at(6), Attributes: []Attribute{attr("temp", KindFloat, "")}},
		}, ErrSynonym,
			`ontology: t.json:2:3: type "P": synonym collision: synonym "temp" of attribute "celsius" is an attribute of type "Q"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.defs)
			require.Error(t, err)
			var le *LoadError
			require.True(t, errors.As(err, &le), "%T", err)
			assert.ErrorIs(t, err, tc.err)
			assert.Equal(t, tc.msg, err.Error())
		})
	}
}

func TestSameAttributeSynonymTwiceIsFine(t *testing.T) {
	o := mustNew(t, []TypeDef{
		{Name: "P", Attributes: []Attribute{{Name: "celsius", Kind: KindFloat, Synonyms: []string{"temp"}}}},
		{Name: "Q", Attributes: []Attribute{{Name: "celsius", Kind: KindFloat, Synonyms: []string{"temp", "t"}}}},
		{Name: "C", Parents: []string{"P", "Q"}},
	})
	a, ok := o.Attribute(id(t, o, "C"), "t")
	require.True(t, ok)
	assert.Equal(t, []string{"t", "temp"}, a.Synonyms, "synonyms are ontology-wide")
	assert.Equal(t, []string{"t", "temp"}, o.Type(id(t, o, "P")).Attributes[0].Synonyms)
}

func TestPositionString(t *testing.T) {
	tests := []struct {
		name string
		p    Position
		want string
	}{
		{"full", Position{"a.json", 3, 7}, "a.json:3:7"},
		{"no col", Position{"a.json", 3, 0}, "a.json:3"},
		{"no file", Position{"", 3, 7}, "3:7"},
		{"file only", Position{"a.json", 0, 0}, "a.json"},
		{"nothing", Position{}, "-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.p.String())
		})
	}
	assert.Equal(t, `ontology: type "A": x`, (&LoadError{Type: "A", Err: errors.New("x")}).Error())
}

package filter

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// TestMatchProfile checks patronage conditions (S1 reverse matching)
// against receivers' profiles, with the semantics of any filter: a missing
// profile attribute fails every predicate but not exists.
func TestMatchProfile(t *testing.T) {
	tier := func(n int64) ontology.Attr { return ontology.Attr{Name: "tier", Value: ontology.Int(n)} }
	region := func(s string) ontology.Attr { return ontology.Attr{Name: "region", Value: ontology.String(s)} }
	tests := []struct {
		name    string
		cond    string
		profile []ontology.Attr
		want    bool
	}{
		{"tier 1", `{tier >= 2}`, []ontology.Attr{tier(1)}, false},
		{"tier 2", `{tier >= 2}`, []ontology.Attr{tier(2)}, true},
		{"tier 3", `{tier >= 2}`, []ontology.Attr{tier(3)}, true},
		{"tier missing", `{tier >= 2}`, []ontology.Attr{region("eu")}, false},
		{"empty profile", `{tier >= 2}`, nil, false},
		{"tier float", `{tier >= 2}`, []ontology.Attr{{Name: "tier", Value: ontology.Float(2.0)}}, true},
		{"tier NaN", `{tier >= 2}`, []ontology.Attr{{Name: "tier", Value: ontology.Float(math.NaN())}}, false},
		{"tier string", `{tier >= 2}`, []ontology.Attr{{Name: "tier", Value: ontology.String("3")}}, false},
		{"without braces", `tier >= 2`, []ontology.Attr{tier(2)}, true},
		{"set in", `{region in {"eu", "us"}}`, []ontology.Attr{region("eu")}, true},
		{"set in, other", `{region in {"eu", "us"}}`, []ontology.Attr{region("jp")}, false},
		{"set in, case", `{region in {"eu", "us"}}`, []ontology.Attr{region("EU")}, false},
		{"set not in", `{region not in {"eu"}}`, []ontology.Attr{region("jp")}, true},
		{"set not in, missing", `{region not in {"eu"}}`, []ontology.Attr{tier(1)}, false},
		{"string ==", `{region == "eu"}`, []ontology.Attr{region("eu")}, true},
		{"string prefix", `{region prefix "eu-"}`, []ontology.Attr{region("eu-west")}, true},
		{"string prefix, no", `{region prefix "eu-"}`, []ontology.Attr{region("eu")}, false},
		{"two conditions", `{tier >= 2; region in {"eu", "us"}}`, []ontology.Attr{tier(2), region("us")}, true},
		{"two conditions, one fails", `{tier >= 2; region in {"eu", "us"}}`, []ontology.Attr{tier(1), region("us")}, false},
		{"atleast", `{match atleast 1; tier >= 2; region == "eu"}`, []ontology.Attr{tier(1), region("eu")}, true},
		{"not exists", `{banned not exists}`, []ontology.Attr{tier(1)}, true},
		{"not exists, present", `{banned not exists}`, []ontology.Attr{{Name: "banned", Value: ontology.Bool(true)}}, false},
		{"empty condition", `{}`, nil, true},
		{"AnyType clause", `{type ⊑ *; tier >= 2}`, []ontology.Attr{tier(2)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := CompileCondition(tt.cond)
			require.NoError(t, err)
			ok, err := f.MatchProfile(tt.profile)
			require.NoError(t, err)
			assert.Equal(t, tt.want, ok)
		})
	}
}

// TestCompileConditionRefusals: a condition has no event type and reads
// only profile attributes, never a payload.
func TestCompileConditionRefusals(t *testing.T) {
	tests := []struct {
		name, cond, mention string
	}{
		{"type clause", `{type ⊑ Reading; tier >= 2}`, `"Reading"`},
		{"json operand", `{json(tier) >= 2}`, "payload"},
		{"xpath operand", `{xpath(/p/tier) >= 2}`, "payload"},
		{"xpath predicate", `{tier >= 2; xpath(/p)}`, "predicate 2"},
		{"json in atleast", `{match atleast 1; tier >= 2; json(x) exists}`, "payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileCondition(tt.cond)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tt.mention)

			// The same filter compiled as a filter is refused by MatchProfile.
			f := MustCompile(tt.cond)
			ok, err := f.MatchProfile([]ontology.Attr{{Name: "tier", Value: ontology.Int(5)}})
			assert.ErrorIs(t, err, ErrInvalid)
			assert.False(t, ok)
		})
	}
	t.Run("syntax error", func(t *testing.T) {
		_, err := CompileCondition(`{tier >= }`)
		assert.ErrorIs(t, err, ErrSyntax)
	})
	t.Run("build error", func(t *testing.T) {
		_, err := CompileCondition(`{tier in [3, 2]}`)
		assert.ErrorIs(t, err, ErrInvalid)
	})
}

// TestNilCondition: an event without a condition reaches every profile.
func TestNilCondition(t *testing.T) {
	var f *Filter
	for _, p := range [][]ontology.Attr{nil, {}, {{Name: "tier", Value: ontology.Int(0)}}} {
		ok, err := f.MatchProfile(p)
		require.NoError(t, err)
		assert.True(t, ok)
	}
}

// TestNewcomerFindings pins the fixes for what a first user hit: an
// explicit weight 0 is refused, a nil filter is an error, and Index and
// its oracle agree on an event that repeats an attribute name (the first
// value counts).
func TestNewcomerFindings(t *testing.T) {
	_, err := Compile(`{match score >= 1; x == 1 weight 0}`)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrSyntax)
	assert.Contains(t, err.Error(), "weight must be greater than 0")

	for _, src := range []string{`{x in (1, 1)}`, `{x in [1, 1)}`, `{match score >= 10; x == 1 weight 2}`, `{match score >= 1}`} {
		_, err := Compile(src)
		assert.ErrorIs(t, err, ErrInvalid, "%s can never match and is refused", src)
	}
	_, err = Compile(`{x in [1, 1]}`)
	assert.NoError(t, err, "a closed range with equal ends holds one value")

	o, err := ontology.New([]ontology.TypeDef{{Name: "music", Attributes: []ontology.Attribute{{Name: "price", Kind: ontology.KindFloat}}}})
	require.NoError(t, err)
	ix, bf := NewIndex(o), NewBruteForce(o)
	require.ErrorIs(t, ix.Add(1, nil), ErrInvalid)
	require.ErrorIs(t, bf.Add(1, nil), ErrInvalid)

	for id, src := range []string{`{type ⊑ music; price > 1}`, `{type ⊑ music; price in [0.0, 1.0]}`} {
		require.NoError(t, ix.Add(uint64(id), MustCompile(src)))
		require.NoError(t, bf.Add(uint64(id), MustCompile(src)))
	}
	ev := &BasicEvent{Type: "music", Attrs: []ontology.Attr{{Name: "price", Value: ontology.Float(0.5)}, {Name: "price", Value: ontology.Float(5)}}}
	want, got := collect(bf, ev), collect(ix, ev)
	assert.Equal(t, want, got)
	assert.Equal(t, matchResult{1: 1}, got, "the first price, 0.5, counts")
}

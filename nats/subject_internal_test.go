package nats

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

func TestEscapeToken(t *testing.T) {
	for _, c := range []struct{ name, tok string }{
		{"earthquake", "earthquake"},
		{"ice quake", "ice%20quake"},
		{"sion.Control", "sion%2EControl"},
		{"a*b", "a%2Ab"},
		{">", "%3E"},
		{"*", "%2A"},
		{"100%", "100%25"},
		{"tab\there", "tab%09here"},
		{"nul\x00", "nul%00"},
		{"é", "%C3%A9"},
		{"地震", "%E5%9C%B0%E9%9C%87"},
		{"x-y_z~", "x-y_z~"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.tok, EscapeToken(c.name))
			back, err := UnescapeToken(c.tok)
			require.NoError(t, err)
			assert.Equal(t, c.name, back)
		})
	}
	back, err := UnescapeToken("%c3%a9")
	require.NoError(t, err)
	assert.Equal(t, "é", back, "lower-case hex is accepted")
	for _, bad := range []string{"%", "%4", "%G0", "a%2"} {
		t.Run("bad "+bad, func(t *testing.T) {
			_, err := UnescapeToken(bad)
			assert.Error(t, err)
		})
	}
}

// FuzzEscapeToken: every name escapes to a legal, wildcard-free NATS token
// that unescapes back to it.
func FuzzEscapeToken(f *testing.F) {
	for _, s := range []string{"earthquake", "ice quake", "a.b", "*", ">", "%", "é", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if name == "" {
			return
		}
		tok := EscapeToken(name)
		require.NoError(t, checkLiteral("token", tok))
		assert.NotContains(t, tok, ".")
		back, err := UnescapeToken(tok)
		require.NoError(t, err)
		assert.Equal(t, name, back)
	})
}

func TestCoversAndOverlaps(t *testing.T) {
	for _, c := range []struct {
		a, b             string
		covers, overlaps bool
	}{
		{"a.b", "a.b", true, true},
		{"a.>", "a.b", true, true},
		{"a.>", "a", false, false},
		{"a.>", "a.b.>", true, true},
		{"a.b.>", "a.>", false, true},
		{"a.*", "a.b", true, true},
		{"a.*", "a.b.c", false, false},
		{"a.*", "a.>", false, true},
		{"a.*.c", "a.b.>", false, true},
		{"a.b", "a.c", false, false},
		{"a.b", "a.b.c", false, false},
		{">", "a.b", true, true},
		{"a.b", "*.b", false, true},
	} {
		t.Run(c.a+" "+c.b, func(t *testing.T) {
			assert.Equal(t, c.covers, covers(c.a, c.b), "covers")
			assert.Equal(t, c.overlaps, overlaps(c.a, c.b), "overlaps")
			assert.Equal(t, c.overlaps, overlaps(c.b, c.a), "overlaps is symmetric")
		})
	}
	assert.Equal(t, []string{"a.>", "b"}, minimal([]string{"a.b", "b", "a.>", "a.b.>", "b", "a.c"}))
}

func TestTypeOf(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "media"}, {Name: "music", Parents: []string{"media"}, Synonyms: []string{"songs"}},
		{Name: "seasonal", Parents: []string{"media"}}, {Name: "BGM", Parents: []string{"music", "seasonal"}},
		{Name: "ice quake"},
	})
	require.NoError(t, err)
	ts, err := newTypeSpace("p.x", o, 4)
	require.NoError(t, err)
	for _, c := range []struct {
		subj, typ string
		under     bool
	}{
		{"p.x.media", "media", true},
		{"p.x.media.music.BGM", "BGM", true},
		{"p.x.media.seasonal.BGM", "BGM", true},
		{"p.x.media.songs", "music", true}, // a synonym names its type
		{"p.x.ice%20quake", "ice quake", true},
		{"p.x.ice%20Quake", "", true}, // names are case-sensitive
		{"p.x.music", "", true},       // not from a root
		{"p.x.media.BGM", "", true},   // not a child
		{"p.x.sion%2EControl", "", true},
		{"p.x.media.%zz", "", true},
		{"p.y.media", "", false},
		{"p.x", "", false},
	} {
		t.Run(c.subj, func(t *testing.T) {
			ty, under, err := ts.typeOf(c.subj)
			assert.Equal(t, c.under, under)
			if c.typ == "" {
				assert.Nil(t, ty)
				if under {
					assert.Error(t, err)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.typ, ty.Name)
		})
	}
	_, err = newTypeSpace("p.x", o, 1)
	assert.ErrorContains(t, err, `"BGM" has more than 1 paths`)
}

package sion

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// TestTypesOverlap: two types overlap when some event is of both — one
// is the other, one is under the other, or a type inherits from both —
// both ways round.
func TestTypesOverlap(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "Media"},
		{Name: "Music", Parents: []string{"Media"}},
		{Name: "Talk", Parents: []string{"Media"}},
		{Name: "Seasonal"},
		{Name: "BGM", Parents: []string{"Music", "Seasonal"}},
		{Name: "XmasBGM", Parents: []string{"BGM"}},
		{Name: "Holiday", Parents: []string{"Seasonal"}},
		{Name: "Weather"},
	})
	require.NoError(t, err)
	for _, tc := range []struct {
		a, b    string
		overlap bool
	}{
		{"Music", "Music", true},
		{"Media", "Music", true},           // supertype
		{"Media", "XmasBGM", true},         // two levels down
		{"Music", "Seasonal", true},        // BGM is both
		{"Talk", "Seasonal", false},        // no type is both
		{"Music", "Talk", false},           // siblings
		{"Holiday", "Music", false},        // Seasonal's other branch
		{"XmasBGM", "Holiday", false},      // cousins under Seasonal
		{"Weather", "Media", false},        // unrelated roots
		{"sion.Discovery", "Media", false}, // a reserved type is under none of them
	} {
		t.Run(tc.a+"/"+tc.b, func(t *testing.T) {
			a, ok := o.Lookup(tc.a)
			require.True(t, ok)
			b, ok := o.Lookup(tc.b)
			require.True(t, ok)
			assert.Equal(t, tc.overlap, typesOverlap(o, a.ID, b.ID))
			assert.Equal(t, tc.overlap, typesOverlap(o, b.ID, a.ID), "the other way round")
		})
	}
}

package filter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// TestAnyTypeSkipsReserved: an AnyType filter matches user events and
// events of unknown types, but not sion's own control events (types whose
// name begins with the reserved prefix, known to the ontology or not),
// which only filters naming them or an ancestor match — in the Index and
// in BruteForce alike.
func TestAnyTypeSkipsReserved(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "Notice"}})
	require.NoError(t, err)
	filters := map[uint64]string{1: `{}`, 2: `{type ⊑ sion.Control}`, 3: `{type ⊑ sion.Discovery}`, 4: `{type ⊑ Notice}`}
	x, b := NewIndex(o), NewBruteForce(o)
	for id, src := range filters {
		require.NoError(t, x.Add(id, MustCompile(src)), src)
		require.NoError(t, b.Add(id, MustCompile(src)), src)
	}
	for typ, want := range map[string][]uint64{
		"Notice":                     {1, 4},
		"Unknown":                    {1},
		"sion.Unknown":               {}, // a reserved name this ontology lacks: AnyType leaves it out too
		"sion.":                      {},
		"sion":                       {1}, // not the prefix
		ontology.DiscoveryType:       {2, 3},
		ontology.DiscoveryAnswerType: {2},
	} {
		ev := &BasicEvent{Type: typ}
		for name, m := range map[string]interface {
			Match(Event, func(uint64, float64))
		}{"index": x, "brute force": b} {
			var got []uint64
			m.Match(ev, func(id uint64, _ float64) { got = append(got, id) })
			assert.ElementsMatch(t, want, got, "%s: %s", name, typ)
		}
	}
}

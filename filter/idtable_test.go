package filter

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIDTable runs random sets, deletes and look-ups against a Go map,
// over ID ranges that make long runs (few distinct IDs, many) and ones
// that wrap around the end of the slots.
func TestIDTable(t *testing.T) {
	cases := []struct {
		name string
		ids  uint64 // IDs drawn from 0…ids−1
		ops  int
	}{
		{"few", 10, 2_000},
		{"some", 1_000, 50_000},
		{"many", 100_000, 300_000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, c.ids))
			var tb idTable[uint64]
			want := map[uint64]uint64{}
			for k := range c.ops {
				id := r.Uint64N(c.ids) * 0x9e3779b97f4a7c15 // spread over the whole range
				switch r.IntN(3) {
				case 0:
					v := uint64(k) + 1
					tb.set(id, v)
					want[id] = v
				case 1:
					tb.delete(id)
					delete(want, id)
				}
				v, ok := tb.get(id)
				w, wok := want[id]
				require.Equal(t, wok, ok, "op %d: id %d held", k, id)
				require.Equal(t, w, v, "op %d: id %d", k, id)
				require.Equal(t, len(want), tb.len())
			}
			got := map[uint64]uint64{}
			for id, v := range tb.all() {
				got[id] = v
			}
			assert.Equal(t, want, got)
			for id, w := range want {
				v, ok := tb.get(id)
				assert.True(t, ok)
				assert.Equal(t, w, v)
			}
		})
	}
}

// TestIDTableSetWhileRanging checks that setting the value of the ID a
// loop over all is given neither grows the table nor loses IDs.
func TestIDTableSetWhileRanging(t *testing.T) {
	var tb idTable[uint64]
	for id := range uint64(6) { // 6 of 8 slots: the next new ID grows it
		tb.set(id, id+1)
	}
	n := 0
	for id, v := range tb.all() {
		tb.set(id, v+100)
		n++
	}
	assert.Equal(t, 6, n)
	assert.Len(t, tb.slots, idTableMin)
	for id := range uint64(6) {
		v, ok := tb.get(id)
		assert.True(t, ok)
		assert.Equal(t, id+101, v)
	}
}

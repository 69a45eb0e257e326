package sion

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// testIDs gives the IDs of events tests make by hand (a switch gives its
// own: Switch.ids).
var testIDs = newIDSource()

func newEventID() EventID { return testIDs.next() }

// seenModel is what seenIDs must do, written plainly: two generations of
// Go maps.
type seenModel struct{ cur, old map[EventID]struct{} }

func (m *seenModel) add(id EventID) bool {
	if _, ok := m.cur[id]; ok {
		return true
	}
	if _, ok := m.old[id]; ok {
		return true
	}
	if m.cur == nil || len(m.cur) >= seenGeneration {
		m.old, m.cur = m.cur, map[EventID]struct{}{}
	}
	m.cur[id] = struct{}{}
	return false
}

func (m *seenModel) forget(id EventID) {
	delete(m.cur, id)
	delete(m.old, id)
}

// TestSeenIDs checks seenIDs against the model over a few generations:
// IDs drawn from a small pool (so that many repeat, and removals meet
// clusters), the zero ID among them, forgets mixed in.
func TestSeenIDs(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool int // distinct IDs drawn from
		ops  int
	}{
		{name: "repeats", pool: 3000, ops: 50_000},
		{name: "generations", pool: 400_000, ops: 3*seenGeneration + 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.pool)))
			var s seenIDs
			var m seenModel
			for op := range tc.ops {
				var id EventID
				if k := rng.IntN(tc.pool); k > 0 { // 0: the zero ID
					id[0], id[7], id[15] = byte(k), byte(k>>8), byte(k>>16)
				}
				if rng.IntN(8) == 0 {
					s.forget(id)
					m.forget(id)
					continue
				}
				require.Equal(t, m.add(id), s.add(id), "op %d, id %v", op, id)
			}
			require.Equal(t, len(m.cur), s.cur.n)
			require.Equal(t, len(m.old), s.old.n)
			for id := range m.cur {
				require.True(t, s.cur.has(s.hash(id), id), "%v", id)
			}
			require.LessOrEqual(t, len(s.cur.slots), 2*seenGeneration)
		})
	}
}

func TestSeenIDsForgetFirst(t *testing.T) {
	var s seenIDs
	s.forget(EventID{1}) // before any add: no table, no seed
	require.False(t, s.add(EventID{1}))
	require.True(t, s.add(EventID{1}))
}

// BenchmarkSeenIDs adds new IDs, as a switch does for each event that
// crosses a link; model: the two Go maps seenIDs replaced.
func BenchmarkSeenIDs(b *testing.B) {
	for _, impl := range []string{"table", "model"} {
		b.Run("impl="+impl, func(b *testing.B) {
			var s seenIDs
			var m seenModel
			b.ReportAllocs()
			for b.Loop() {
				id := newEventID()
				if impl == "table" {
					s.add(id)
				} else {
					m.add(id)
				}
			}
		})
	}
}

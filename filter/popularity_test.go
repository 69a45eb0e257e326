package filter

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPopularityMatchesRecords checks that the popularity counts Add
// makes from the *Filter (countFilter) are those count makes from the
// filters' records, which Remove takes away: after every step, the index
// holds the counts of its filters in postings, recounted from their
// records.
func TestPopularityMatchesRecords(t *testing.T) {
	for seed := range 40 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			w := newRandWorld(t, uint64(seed))
			ix := NewIndex(w.ont)
			var live []uint64
			for id := uint64(1); id < 120; id++ {
				if len(live) > 0 && w.r.IntN(3) == 0 {
					i := w.r.IntN(len(live))
					require.True(t, ix.Remove(live[i]))
					live = slices.Delete(live, i, i+1)
				}
				f := w.filter()
				require.NoError(t, ix.Add(id, f), f.String())
				live = append(live, id)
				recount := &Index{pop: map[int]*groupPop{}}
				for _, e := range ix.entries.all() {
					recount.count(e, 1)
				}
				require.Equal(t, popDump(recount.pop), popDump(ix.pop), "after adding %s", f)
			}
		})
	}
}

// popDump renders pop without the zero counts and empty slots that a
// filter's removal may leave.
func popDump(pop map[int]*groupPop) map[string]int32 {
	m := map[string]int32{}
	for g, gp := range pop {
		m[fmt.Sprintf("g%d", g)] = gp.filters
		for k, st := range gp.keys {
			if st == nil {
				continue
			}
			at := fmt.Sprintf("g%d k%d ", g, k)
			m[at+"present"], m[at+"eq"] = st.present, st.eqAll
			for n, c := range st.small {
				if c != 0 {
					m[fmt.Sprintf("%s=%d", at, n)] = c
				}
			}
			for n, c := range st.ints {
				m[fmt.Sprintf("%s=%d", at, n)] = c
			}
			for v, c := range st.other {
				m[fmt.Sprintf("%s=%v", at, v)] = c
			}
		}
	}
	return m
}

package filter

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// TestEntryBlockAligned checks that entries in the store start on a
// multiple of 128 bytes, two cache lines, as entry's layout assumes.
func TestEntryBlockAligned(t *testing.T) {
	var st entryStore
	for s := range uint32(3 << entryBlockShift) {
		e := st.make(s)
		require.Zero(t, uintptr(unsafe.Pointer(e))%128, "slot %d", s)
		require.Same(t, e, st.at(s))
	}
	require.Len(t, st.blocks, 3)
}

// TestEntrySlotReuse follows the entries of removed filters: a slot is
// not reused while a list still holds its entry (a dead posting that
// its list has not dropped), and is reused, cleared, once the list has
// dropped it and a write has let readers go; removing every filter
// lets every slot be reused.
func TestEntrySlotReuse(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "R", Attributes: []ontology.Attribute{
		{Name: "a", Kind: ontology.KindInt}, {Name: "b", Kind: ontology.KindInt},
	}}})
	require.NoError(t, err)
	x := NewIndex(o)
	// One list (a == 1) of 40 filters.
	const n = 40
	for id := range uint64(n) {
		require.NoError(t, x.Add(id, MustBuild(Spec{Type: "R", Predicates: []Predicate{Attr("a").EQ(ontology.Int(1))}})))
	}
	made := x.next
	require.Equal(t, uint32(n), made)

	// Removing filter 0 leaves it dead in the list of a == 1 (39 live
	// postings there): its slot is not free, and a new filter gets a new
	// slot.
	e0 := x.ents.at(0)
	require.True(t, x.Remove(0))
	require.Equal(t, "", slotState(x, 0), "slot 0 while a list holds its entry")
	require.NoError(t, x.Add(100, MustBuild(Spec{Type: "R", Predicates: []Predicate{Attr("b").EQ(ontology.Int(-1))}})))
	require.Equal(t, made+1, x.next, "filter 100 took a new slot")
	require.Equal(t, uint64(0), e0.id, "entry 0 untouched")
	require.NotZero(t, e0.recLen, "entry 0 untouched")

	// Removing enough to move the list drops the dead postings: their
	// slots become free once a write has returned and the next writer
	// call begins, and are reused, cleared.
	for id := uint64(1); id < n/2+1; id++ {
		require.True(t, x.Remove(id))
	}
	x.free = x.ents.settle(x.free)
	require.NotEmpty(t, x.free, "the moved list let go of dead entries")
	for _, s := range x.free {
		require.Equal(t, entry{}, *x.ents.at(s), "free slot %d cleared", s)
		require.Equal(t, "free", slotState(x, s))
	}
	before := x.next
	for id := uint64(200); id < 200+uint64(len(x.free)); id++ {
		require.NoError(t, x.Add(id, MustBuild(Spec{Type: "R", Predicates: []Predicate{Attr("a").EQ(ontology.Int(2))}})))
	}
	require.Equal(t, before, x.next, "free slots reused")

	// Every filter out: every list empties, every slot is free again.
	for id := range uint64(300) {
		x.Remove(id)
	}
	require.Zero(t, x.Len())
	x.free = x.ents.settle(x.free)
	require.Len(t, x.free, int(x.next), "every slot free")
	for id := range uint64(x.next) {
		require.NoError(t, x.Add(1000+id, MustBuild(Spec{Type: "R", Predicates: []Predicate{Attr("b").EQ(ontology.Int(int64(id)))}})))
	}
	require.Equal(t, before, x.next, "no slot made")
	ev := &BasicEvent{Type: "R", Attrs: []ontology.Attr{{Name: "b", Value: ontology.Int(3)}}}
	require.Equal(t, matchResult{1003: 1}, collect(x, ev))
}

// slotState returns "free" if slot s is free, "pending" or "ready" if
// it waits to be, and "" otherwise.
func slotState(x *Index, s uint32) string {
	for _, l := range []struct {
		name  string
		slots []uint32
	}{{"free", x.free}, {"pending", x.ents.pending}, {"ready", x.ents.ready}} {
		for _, f := range l.slots {
			if f == s {
				return l.name
			}
		}
	}
	return ""
}

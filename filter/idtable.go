package filter

import (
	"iter"
	"math/bits"
	"math/rand/v2"
)

// idTable maps filter IDs to values of V, whose zero value means "no
// filter": the index's own hash table in place of a Go map, for the
// one look-up and one store that every Add and Remove make. Only the
// writer uses it (Index.mu held).
//
// It is one array of slots (an ID and its value, 16 bytes for a pointer
// or an int64), a power of two long and at most three quarters full,
// with linear probing: a look-up reads a few adjacent slots. A slot's
// home is given by the top bits of a seeded hash of the ID, so IDs a
// caller chose cannot pile up in one run, and the table doubles by
// copying its slots in order into a new array that is mapped at once
// (see populated): homes keep their order, so the copy writes the new
// array nearly in sequence. A Go map grows by splitting tables of 1,024
// slots into new ones, each on fresh pages: their page faults were 21 %
// of those of building W-SPARSE at 10⁶, and 89 % of W-INT's once the
// dense engine's blocks were mapped at once; in one process this table
// took 0.93–0.95 of the CPU of a map to build W-INT at 10⁶, 0.92–0.96
// W-SPARSE (bench/README.md). Removal shifts the slots after a removed
// one back, so there are no tombstones. Memory: 16 bytes a slot, 21–43
// per filter.
type idTable[V comparable] struct {
	slots []idSlot[V]
	n     int    // used slots
	shift uint8  // 64 − log2(len(slots))
	seed  uint64 // random per table
}

type idSlot[V comparable] struct {
	id uint64
	v  V
}

// idTableMin is the fewest slots of a table that holds a filter.
const idTableMin = 8

// home returns the slot where id's run starts.
func (t *idTable[V]) home(id uint64) int {
	z := id + t.seed // splitmix64's finalizer
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return int((z ^ z>>31) >> t.shift)
}

// find returns the slot of id, or of the empty slot where it would go.
func (t *idTable[V]) find(id uint64) int {
	var zero V
	mask := len(t.slots) - 1
	i := t.home(id)
	for t.slots[i].v != zero && t.slots[i].id != id {
		i = (i + 1) & mask
	}
	return i
}

// len returns the number of IDs in t.
func (t *idTable[V]) len() int { return t.n }

// get returns the value of id, and whether t holds it.
func (t *idTable[V]) get(id uint64) (V, bool) {
	var zero V
	if t.n == 0 {
		return zero, false
	}
	v := t.slots[t.find(id)].v
	return v, v != zero
}

// set makes v, which must not be zero, the value of id.
func (t *idTable[V]) set(id uint64, v V) {
	var zero V
	if t.n > 0 {
		if i := t.find(id); t.slots[i].v != zero {
			t.slots[i].v = v // no growth: all's loops may set
			return
		}
	}
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	t.slots[t.find(id)] = idSlot[V]{id, v}
	t.n++
}

// grow doubles t's slots (or makes its first ones).
func (t *idTable[V]) grow() {
	var zero V
	old := t.slots
	if old == nil {
		t.seed = rand.Uint64()
	}
	c := max(idTableMin, 2*len(old))
	t.slots = populated(make([]idSlot[V], c))
	t.shift = uint8(64 - bits.TrailingZeros(uint(c)))
	mask := c - 1
	for _, s := range old {
		if s.v == zero {
			continue
		}
		i := t.home(s.id)
		for t.slots[i].v != zero {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// delete takes id out of t, if t holds it.
func (t *idTable[V]) delete(id uint64) {
	var zero V
	if t.n == 0 {
		return
	}
	i := t.find(id)
	if t.slots[i].v == zero {
		return
	}
	t.n--
	// Shift back the slots of the run after i that may move to i: those
	// whose home is not cyclically in (i, j].
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.slots[j].v != zero; j = (j + 1) & mask {
		k := t.home(t.slots[j].id)
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = idSlot[V]{}
}

// all returns t's IDs and values, in no particular order. The loop's body
// may set the value of the ID it is given, but not add or delete IDs.
func (t *idTable[V]) all() iter.Seq2[uint64, V] {
	return func(yield func(uint64, V) bool) {
		var zero V
		for i := range t.slots {
			if s := t.slots[i]; s.v != zero && !yield(s.id, s.v) {
				return
			}
		}
	}
}

package sion

import (
	"hash/maphash"
	"sync"
)

// seenIDs remembers the IDs of recent events that crossed the switch's
// links, in two generations of seenGeneration IDs, so that an event
// arriving twice is dropped (DESIGN.md: a safety net, not the mechanism).
// The zero value is an empty set. It is on the path of every event that
// crosses a link, at both ends: adding a new ID costs one hash, a word of
// each generation's filter, and a share of a batch of table inserts
// (idSet).
type seenIDs struct {
	mu       sync.Mutex
	seed     maphash.Seed // mu; random (peers choose IDs), set by the first add
	cur, old idSet        // mu
}

const seenGeneration = 1 << 16

// add records id and reports whether it was there already.
func (s *seenIDs) add(id EventID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seed == (maphash.Seed{}) {
		s.seed = maphash.MakeSeed()
	}
	h := s.hash(id)
	if s.old.has(h, id) || s.cur.has(h, id) {
		return true
	}
	if s.cur.n >= seenGeneration { // a new generation: the oldest is forgotten
		s.cur.flush()
		s.old, s.cur = s.cur, s.old
		s.cur.clear()
	}
	s.cur.add(s, h, id)
	return false
}

// forget takes id out, so that it may be added again (a publish that was
// not carried after all).
func (s *seenIDs) forget(id EventID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seed == (maphash.Seed{}) {
		return // nothing was added
	}
	h := s.hash(id)
	s.cur.remove(s, h, id)
	s.old.remove(s, h, id)
}

// hash returns id's hash under the set's seed. mu must be held.
func (s *seenIDs) hash(id EventID) uint64 { return maphash.Comparable(s.seed, id) }

// idSet is one generation of seenIDs: a hash set of event IDs by open
// addressing with linear probing, in a table of a power of two slots kept
// at most half full (it doubles up to 2×seenGeneration), so that probes
// stay short. A zero slot is free; the zero ID itself is kept apart.
//
// The table (2 MB when full) is far larger than a core's cache, so that
// each probe of it costs a miss. So a filter of four bits per slot (64 KB
// when full), two of them set per ID in one word, answers most lookups of
// an ID the set does not hold — the common case: a new event — without
// reading the table; and new IDs wait in a short list, searched when the
// filter cannot tell, and enter the table pendingIDs at a time, in one
// loop whose misses the processor overlaps.
type idSet struct {
	slots  []EventID   // nil until the first flush
	filter []uint64    // 4×len(slots) bits: two bits in word h>>24 for each ID held (and some removed)
	pend   []pendingID // held, not yet in slots; at most pendingIDs
	n      int         // IDs held, in slots and pend, the zero ID included
	zero   bool        // the zero ID is held
}

// pendingID is an ID of an idSet's short list, with its hash.
type pendingID struct {
	h  uint64
	id EventID
}

// pendingIDs is how many new IDs wait before they enter the table.
const pendingIDs = 64

// filterBits returns the two filter bits of hash h, both in one word (one
// cache line to read), in a filter of words words (a power of two).
func filterBits(h uint64, words int) (w int, m uint64) {
	return int(h>>24) & (words - 1), 1<<(h>>52&63) | 1<<(h>>58)
}

// mayHold reports false when the filter proves that the ID of hash h is
// not in a slot.
func (t *idSet) mayHold(h uint64) bool {
	if t.filter == nil {
		return false
	}
	w, m := filterBits(h, len(t.filter))
	return t.filter[w]&m == m
}

// mark sets the filter bits of hash h.
func (t *idSet) mark(h uint64) {
	w, m := filterBits(h, len(t.filter))
	t.filter[w] |= m
}

// minIDSlots is the size of a generation's first table.
const minIDSlots = 256

// has reports whether the set holds id, of hash h.
func (t *idSet) has(h uint64, id EventID) bool {
	if id == (EventID{}) {
		return t.zero
	}
	if !t.mayHold(h) {
		return false
	}
	for _, p := range t.pend {
		if p.id == id {
			return true
		}
	}
	_, ok := t.find(h, id)
	return ok
}

// add records id, of hash h, which the set does not hold.
func (t *idSet) add(s *seenIDs, h uint64, id EventID) {
	t.n++
	if id == (EventID{}) {
		t.zero = true
		return
	}
	if 2*t.n > len(t.slots) {
		t.grow(s)
	}
	t.pend = append(t.pend, pendingID{h, id})
	t.mark(h)
	if len(t.pend) == pendingIDs {
		t.flush()
	}
}

// flush puts the IDs of the short list in the table, which has room for
// them.
func (t *idSet) flush() {
	mask := len(t.slots) - 1
	for _, p := range t.pend {
		i := int(p.h) & mask
		for t.slots[i] != (EventID{}) {
			i = (i + 1) & mask
		}
		t.slots[i] = p.id
	}
	clear(t.pend)
	t.pend = t.pend[:0]
}

// find returns where id is in the table (true), or the free slot where
// it would go (false, -1 while the set has no table). The zero ID is never
// in a slot, nor are the IDs of the short list.
func (t *idSet) find(h uint64, id EventID) (int, bool) {
	if id == (EventID{}) {
		return -1, t.zero
	}
	if t.slots == nil {
		return -1, false
	}
	mask := len(t.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch t.slots[i] {
		case id:
			return i, true
		case EventID{}:
			return i, false
		}
	}
}

// grow doubles the table (or makes the first), re-placing the IDs held.
func (t *idSet) grow(s *seenIDs) {
	old := t.slots
	t.slots = make([]EventID, max(minIDSlots, 2*len(old)))
	t.filter = make([]uint64, len(t.slots)/16)
	if t.pend == nil {
		t.pend = make([]pendingID, 0, pendingIDs)
	}
	for _, p := range t.pend {
		t.mark(p.h)
	}
	mask := len(t.slots) - 1
	for _, id := range old {
		if id == (EventID{}) {
			continue
		}
		h := s.hash(id)
		i := int(h) & mask
		for t.slots[i] != (EventID{}) {
			i = (i + 1) & mask
		}
		t.slots[i] = id
		t.mark(h)
	}
}

// clear empties the set, keeping its table.
func (t *idSet) clear() {
	clear(t.slots)
	clear(t.filter)
	clear(t.pend)
	t.pend = t.pend[:0]
	t.n, t.zero = 0, false
}

// remove takes id out if it is held, moving back the IDs after it that
// would no longer be found (deletion without tombstones).
func (t *idSet) remove(s *seenIDs, h uint64, id EventID) {
	if id == (EventID{}) {
		if t.zero {
			t.zero = false
			t.n--
		}
		return
	}
	for k, p := range t.pend {
		if p.id == id {
			last := len(t.pend) - 1
			t.pend[k] = t.pend[last]
			t.pend[last] = pendingID{}
			t.pend = t.pend[:last]
			t.n--
			return
		}
	}
	i, ok := t.find(h, id)
	if !ok {
		return
	}
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.slots[j] != (EventID{}); j = (j + 1) & mask {
		home := int(s.hash(t.slots[j])) & mask
		// The ID at j stays if its home lies cyclically in (i, j]: a
		// probe from there does not cross the slot emptied at i.
		if i <= j && i < home && home <= j || i > j && (i < home || home <= j) {
			continue
		}
		t.slots[i] = t.slots[j]
		i = j
	}
	t.slots[i] = EventID{}
	t.n--
}

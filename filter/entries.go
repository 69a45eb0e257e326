package filter

import "unsafe"

// entryStore holds the index's entries by slot, in blocks the index maps
// at once (populated), rather than one heap object per filter: on the
// machine of bench/README.md a first write to a page of fresh memory is a
// page fault of 12–20 µs, and entries were more than half of the faults
// of a W-SPARSE build (one 4 KB page per 32 entries), against about 1 µs
// a page mapped by populate. Only the writer uses it (Index.mu held);
// readers reach entries through the lists, never through the store.
//
// An entry lives at its slot, so a slot is reused only when its entry can
// be: once no list place holds the entry and no reader can still be
// reading it. refs counts the list places that hold an entry — alive or
// dead, since a removed posting stays in its list, marked dead, until the
// list moves (see plist) — and drops as the places go: a bare list's
// place when it is removed (its place then holds tombstone), a list's
// dead places when it moves or empties. When an entry's count reaches
// zero, its slot waits in pending for the next Index.write to return
// (every reader that started before the write has then left: see write),
// then in ready until the writer's next Add or Remove begins (the call
// that dropped it may still read the entry), and then goes to the free
// slots, cleared.
//
// Memory: 132 bytes per slot (the entry and its count), in blocks of 512
// slots (66 KB, the first made with the first filter in lists). Blocks
// are never given back: an index keeps the entries of the most slots it
// has held, and reuses them.
type entryStore struct {
	blocks  []entryBlock
	pending []uint32 // slots whose entries no list holds, that a reader may still read
	ready   []uint32 // slots whose entries neither a list nor a reader can reach
}

// entryBlock is the entries of a run of slots and their list places.
type entryBlock struct {
	ents []entry
	refs []int32 // by entry: the list places that hold it
}

// entryBlockShift sets the length of the blocks: 512 entries, 64 KB. A
// block of more than 32 KB is page-aligned; a smaller one of a type
// with pointers starts 8 bytes past a multiple of 128 (the allocator's
// header), and its entries would straddle three cache lines.
const entryBlockShift = 9

// entryBlockOf returns the block of slot s and s's place in it.
func entryBlockOf(s uint32) (int, int) {
	return int(s >> entryBlockShift), int(s & (1<<entryBlockShift - 1))
}

// at returns the entry of slot s, which must have been made (see make).
func (st *entryStore) at(s uint32) *entry {
	b, i := entryBlockOf(s)
	return &st.blocks[b].ents[i]
}

// make makes room for the entry of slot s, the slot after every slot
// made before it, and returns it, zeroed.
func (st *entryStore) make(s uint32) *entry {
	b, i := entryBlockOf(s)
	if b == len(st.blocks) {
		const n = 1 << entryBlockShift
		ents := make([]entry, n)
		populate(unsafe.Pointer(unsafe.SliceData(ents)), uintptr(n)*unsafe.Sizeof(entry{}))
		st.blocks = append(st.blocks, entryBlock{ents: ents, refs: make([]int32, n)})
	}
	return &st.blocks[b].ents[i]
}

// hold records that n list places hold the entry of slot s, which no
// place held before.
func (st *entryStore) hold(s uint32, n int) {
	b, i := entryBlockOf(s)
	st.blocks[b].refs[i] = int32(n)
}

// drop records that a list place no longer holds e, and, when no place
// holds it any more, sends its slot to pending.
func (st *entryStore) drop(e *entry) {
	b, i := entryBlockOf(e.slot)
	r := &st.blocks[b].refs[i]
	if *r--; *r == 0 {
		st.pending = append(st.pending, e.slot)
	}
}

// written moves the pending slots to ready: Index.write calls it once it
// has waited for the readers of both copies.
func (st *entryStore) written() {
	st.ready = append(st.ready, st.pending...)
	st.pending = st.pending[:0]
}

// settle clears the entries of the ready slots, so that they let go of
// their records, and returns free with the slots added. Add and Remove
// call it first: no reader, and no writer, uses those entries any more.
func (st *entryStore) settle(free []uint32) []uint32 {
	if len(st.ready) == 0 {
		return free
	}
	for _, s := range st.ready {
		*st.at(s) = entry{}
	}
	free = append(free, st.ready...)
	st.ready = st.ready[:0]
	return free
}

// pendingMax is how many slots may wait in pending before Remove makes a
// write of its own to move them on: they wait for one only when the
// filters removed were in bare lists alone (direct and always postings),
// whose removal makes no write.
const pendingMax = 1024

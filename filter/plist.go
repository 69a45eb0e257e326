package filter

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// plist is a posting list. It is shared by both copies of the index and
// updated in place, once, by the writer (Index.mu held); readers never
// wait for it, and it waits for readers only when it moves.
//
// It holds, in the list's own memory, what rejects most of the filters
// reached without reading them: heads (heads.go), read in order, each
// with its filter's entry (not its slot, so that verification reaches a
// filter in one step); the entries' items (makeItem) are read for the
// filters heads let through. Memory: 48 bytes per posting, in arrays up
// to twice as long as the postings they hold.
//
// The arrays are append-only: the writer fills places n… (one Add fills
// its postings' places in every list before it publishes any; see put)
// and then publishes their new length; a removed posting is marked dead
// in its head (headDead, set atomically; readers load kf atomically),
// and its place is not reused. The entry at a place never changes once
// published (a record compaction moves the entry's record, not the
// entry: see Index.compactRecords). When the
// arrays are full, or dead places outnumber live ones,
// the writer copies the live postings into a new plist and puts it in
// place of this one in both copies of the index (Index.write); readers
// still on the old one finish there, and once the write has returned no
// reader is on it: the writer keeps its heads array for a list that
// grows (see spares), or leaves it to the garbage collector. The writer never writes a
// published place except to mark it dead.
type plist struct {
	n     atomic.Int32
	open  atomic.Int32            // published heads that reject no event (see lhead.open), dead or alive
	heads []lhead                 // by place
	ents  []atomic.Pointer[entry] // a bare list's, by place

	// The writer's, under Index.mu.
	live, dead int32
}

func newPlist(c int) *plist {
	return &plist{heads: make([]lhead, c)}
}

// newBare returns a bare list of capacity c: the list of a group's
// direct or always postings, which nothing rejects before the entry, so
// it has no heads. Readers scan its ents in place (the group
// holds them beside the list) up to the first nil, without loading n: a
// removed posting's place holds tombstone instead of the entry.
func newBare(c int) *plist {
	return &plist{ents: make([]atomic.Pointer[entry], c)}
}

// tombstone is the entry at a removed posting's place in a bare list.
var tombstone entry

// bare reports whether l is a bare list (see newBare).
func (l *plist) bare() bool { return l.heads == nil }

// full reports whether l has no room for another posting: written
// places (published or not; see put) fill its arrays.
func (l *plist) full() bool { return int(l.written()) == max(len(l.heads), len(l.ents)) }

// written returns how many places of l the writer has filled, published
// or not (see put): the live postings and the dead ones, since a place
// is never reused and a move keeps only the live.
func (l *plist) written() int32 { return l.live + l.dead }

// at returns the entry of the posting at place i.
func (l *plist) at(i int32) *entry {
	if l.bare() {
		return l.ents[i].Load()
	}
	return l.heads[i].entry()
}

// add appends a posting of e, with its head h, to l, which must not be
// full, publishes it, and returns its place.
func (l *plist) add(e *entry, h lhead) int32 {
	i := l.put(e, h)
	l.publish()
	return i
}

// put appends a posting of e, with its head h, to l, which must not be
// full, and returns its place, without publishing it: readers of a list
// with heads see it once publish stores the new length (a bare list's
// readers see it at once: they stop at the first nil entry). The
// writer's loads and stores of the place are plain; publishing is an
// atomic store, a full fence on amd64 that waits for the place's cache
// line, so Index.enter fills every list of a filter before publishing
// any, and their misses overlap.
func (l *plist) put(e *entry, h lhead) int32 {
	i := l.written()
	if l.bare() {
		l.ents[i].Store(e)
	} else {
		h.ent = unsafe.Pointer(e)
		l.heads[i] = h
		if h.open() {
			l.open.Add(1)
		}
	}
	l.live++
	return i
}

// publish makes the places put filled visible to readers.
func (l *plist) publish() { l.n.Store(l.written()) }

// del marks the posting at place i dead. It reports whether l should
// move (its dead places outnumber the live ones, and some are live).
func (l *plist) del(i int32) bool {
	if l.bare() {
		l.ents[i].Store(&tombstone)
	} else {
		atomic.OrUint32(&l.heads[i].kf, headDead)
	}
	l.live--
	l.dead++
	return l.live > 0 && l.dead >= l.live
}

// moved returns a new list of capacity c (at least l's live postings)
// holding the live postings of l, in order. pos is the writer's places
// of every filter's postings, which it updates where they change: only
// postings after a dead place move to another place, and setting a
// place costs a cache miss (the filters' slots are scattered). The dead
// places stay behind: st, unless nil, learns that they no longer hold
// their entries.
func (l *plist) moved(c int, pos *places, sp *spares, st *entryStore) *plist {
	if l.bare() {
		nl := newBare(c)
		k := int32(0)
		for i := range int(l.written()) {
			if e := l.ents[i].Load(); e != &tombstone {
				nl.ents[k].Store(e)
				if k != int32(i) {
					pos.set(e.slot, 0, k) // a direct or always entry has one posting
				}
				k++
			}
		}
		nl.live = k
		nl.n.Store(k)
		return nl
	}
	nl := &plist{heads: sp.heads(c)}
	k := int32(0)
	for i := range int(l.written()) {
		h := &l.heads[i]
		if h.kf&headDead != 0 {
			if st != nil {
				st.drop((*entry)(h.ent))
			}
			continue
		}
		nl.heads[k] = *h
		if h.open() {
			nl.open.Add(1)
		}
		if k != int32(i) {
			e := (*entry)(h.ent) // the writer's own
			pos.set(e.slot, int(h.post), k)
		}
		k++
	}
	nl.live = k
	nl.n.Store(k)
	return nl
}

// spares holds the heads arrays of lists that moved or emptied, for
// lists that grow to their length, and cuts the short ones. Only the
// writer uses it (Index.mu held). An array is put here once no reader
// can be reading it: after the write that took its list out of both
// copies has returned (see Index.write). Only arrays of the lengths a
// full list grows to (grown: 4, 10, 22, …) up to spareClasses of them
// are kept.
//
// While an index grows, the lists that move free arrays of each length
// about as fast as other lists reach that length, so nearly every array
// is used again: building 10⁶ W-SPARSE filters, the lists' moves left
// about 90 bytes per filter to the garbage collector, which does not
// run during such a build when the caller holds more memory than the
// index, and every new array was on fresh pages (a page fault each 4
// KB, about 12 µs on the machine of bench/README.md). With spares that
// build allocates 418 bytes per filter instead of 502 and takes 0.083–
// 0.092 page faults per filter instead of 0.105–0.115: in one process,
// two indexes built in turn by chunks of 20,000, 0.89–0.93 of the CPU
// without (2026-12-03, load 4–5). Adding and removing 50,000 filters
// on that index, 20 rounds in turn: Add 0.97, Remove 0.94 (medians).
//
// Arrays shorter than populateMin bytes (lengths 4 … 94) are cut from
// blocks of 64 KB that populate maps at once, rather than allocated one
// by one on fresh pages, where they were most of the page faults left in
// that build (those of the heap's own small objects). spares keeps every
// such array it is given, since the garbage collector could not reclaim
// one alone; the others, at most spareMax of each length (at most 215
// KB in all). So an index keeps the short arrays of the most lists it
// has held, and reuses them.
type spares struct {
	free  [spareClasses][][]lhead // by class
	block []lhead                 // what is left of the block short arrays are cut from
}

const (
	spareClasses = 7 // lengths 4 … 382, arrays of up to 18,336 bytes
	spareMax     = 8
	headsBlock   = 64 << 10 / int(unsafe.Sizeof(lhead{})) // heads per block short arrays are cut from
)

// spareClass returns the class of heads arrays of length c in spares,
// or -1 when spares does not keep them.
func spareClass(c int) int {
	if (c+2)%6 != 0 {
		return -1
	}
	q := (c + 2) / 6 // a power of two for grown's lengths
	if k := bits.TrailingZeros(uint(q)); q == 1<<k && k < spareClasses {
		return k
	}
	return -1
}

// short reports whether heads arrays of length c are cut from blocks.
func short(c int) bool { return uintptr(c)*unsafe.Sizeof(lhead{}) < populateMin }

// heads returns a heads array of length c, zeroed: one of sp's, one cut
// from a block if c is a short class length, or a new one. sp may be
// nil.
func (sp *spares) heads(c int) []lhead {
	if k := spareClass(c); sp != nil && k >= 0 {
		if n := len(sp.free[k]); n > 0 {
			h := sp.free[k][n-1]
			sp.free[k][n-1] = nil
			sp.free[k] = sp.free[k][:n-1]
			return h
		}
		if short(c) {
			if len(sp.block) < c {
				sp.block = populated(make([]lhead, headsBlock))
			}
			h := sp.block[:c:c]
			sp.block = sp.block[c:]
			return h
		}
	}
	return populated(make([]lhead, c))
}

// keep clears the heads array of l, a list that moved or emptied and
// that no reader can be reading any longer, and keeps it for heads if sp
// keeps arrays of its length.
func (sp *spares) keep(l *plist) {
	h := l.heads
	if k := spareClass(len(h)); k >= 0 && (short(len(h)) || len(sp.free[k]) < spareMax) {
		clear(h)
		sp.free[k] = append(sp.free[k], h)
	}
}

// places is where the postings of each filter in posting lists are in
// their lists, by slot and posting (in postingsOf's order). Only the
// writer uses it (Index.mu held). Memory: 16 bytes per slot, holding the
// places of a filter's first placesInline postings, and for a filter
// with more a slice (24 bytes, and 4 per posting after those; kept for
// reuse when the filter goes). Slices, not a map, lead to them: a list
// that moves sets the places of the postings it shifts, and a map
// look-up each cost more than the move's copy. A filter's first places
// sit together, in one cache line: the slots of an index's filters are
// scattered, and W-SPARSE's set memberships take 2–4 postings, which
// with one place per array, and the others in a slice, cost an Add and a
// Remove three or four cache misses.
//
// The slots' places are in chunks of placesChunk slots, added as slots
// are, never copied: one slice grown by append allocated about five
// times what it kept (it grows by a quarter when large), 84 bytes per
// filter while building 10⁶ W-SPARSE filters, each byte on a page the
// build touched for the first time (see bench/README.md on page faults).
// In chunks that build allocates 502 bytes per filter instead of 574,
// takes 0.115 page faults per filter instead of 0.133, and 0.87 of the
// CPU (median of 5 alternated runs, 2026-12-03, load 4.5–5).
type places struct {
	chunks []*[placesChunk]slotPlaces // by slot / placesChunk
	rest   [][]int32                  // postings placesInline… of filters with more
	free   []uint32                   // unused indexes of rest
}

// placesChunk is how many slots' places a chunk of places holds: 16 KB.
const placesChunk = 1 << 10

// placesInline is how many postings of a filter have their place in
// its slotPlaces.
const placesInline = 3

// slotPlaces is the places of one filter: of its first postings, and,
// for a filter with more than placesInline, 1 + the index of the others'
// in places.rest; else 0. 16 bytes: it never straddles cache lines.
type slotPlaces struct {
	at   [placesInline]int32
	more uint32
}

// make makes room for the n postings of the filter in slot.
func (p *places) make(slot uint32, n int) {
	for len(p.chunks) <= int(slot/placesChunk) {
		p.chunks = append(p.chunks, (*[placesChunk]slotPlaces)(populated(make([]slotPlaces, placesChunk))))
	}
	if n > placesInline {
		var r uint32
		if k := len(p.free); k > 0 {
			r = p.free[k-1]
			p.free = p.free[:k-1]
		} else {
			r = uint32(len(p.rest))
			p.rest = append(p.rest, nil)
		}
		if m := n - placesInline; cap(p.rest[r]) >= m {
			p.rest[r] = p.rest[r][:m]
		} else {
			p.rest[r] = make([]int32, m)
		}
		p.slot(slot).more = r + 1
	}
}

// slot returns the places of the filter in slot.
func (p *places) slot(slot uint32) *slotPlaces {
	return &p.chunks[slot/placesChunk][slot%placesChunk]
}

// drop forgets the places of the filter in slot.
func (p *places) drop(slot uint32) {
	sp := p.slot(slot)
	if r := sp.more; r != 0 {
		if cap(p.rest[r-1]) > 4 {
			p.rest[r-1] = nil // keep only small slices for reuse
		}
		p.free = append(p.free, r-1)
		sp.more = 0
	}
}

// get returns the place of posting j of the filter in slot.
func (p *places) get(slot uint32, j int) int32 {
	sp := p.slot(slot)
	if j < placesInline {
		return sp.at[j]
	}
	return p.rest[sp.more-1][j-placesInline]
}

// set makes at the place of posting j of the filter in slot.
func (p *places) set(slot uint32, j int, at int32) {
	sp := p.slot(slot)
	if j < placesInline {
		sp.at[j] = at
	} else {
		p.rest[sp.more-1][j-placesInline] = at
	}
}

// grown returns the capacity for a list of live postings that needs
// room for one more.
func grown(live int32) int { return max(4, 2*int(live+1)) }

// touchLists appends to ls the list of each of e's postings ps (nil
// where it has none yet) and returns it, loading the place each list
// will give e: the lists and their next places are scattered in memory,
// and loaded in a loop whose loads do not wait for one another they
// miss the cache together, and while Add goes on with other work, rather
// than one after another as enter fills them. It returns nil when e's
// group is new. The lists it returns stay those of both copies until a
// write changes a group's lists (the write of new keys in enter does
// not). An equality list of a small integer comes from gp, the group's
// popularity counts (popStats.eqLists, which Add has just read), not
// from the copy's maps: in-process, 0.97× the CPU of a W-SPARSE Add at
// 10⁶. mu must be held. Cost: a look-up per posting.
func (x *Index) touchLists(e *entry, gp *groupPop, ps []posting, ls []*plist) []*plist {
	d := x.inst[1-x.side.Load()]
	g := d.groups[e.group]
	if g == nil {
		return nil
	}
	for _, p := range ps {
		var l *plist
		if n, ok := smallInt(p.v); p.kind == postEq && ok {
			l = gp.eqList(p, n)
		} else {
			l = d.lookup(g, p)
		}
		ls = append(ls, l)
		if l != nil && !l.bare() {
			if n := l.written(); int(n) < len(l.heads) {
				h := &l.heads[n] // 40 bytes: it may straddle two lines
				atomic.LoadUint64(&h.sig)
				atomic.LoadUint32(&h.kf)
			}
		}
	}
	return ls
}

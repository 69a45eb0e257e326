package filter

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sion-go/sion/ontology"
)

// Index is the matcher: it holds filters by caller-chosen ID and finds, for
// an event, every filter the event matches (DESIGN.md "Semantics that must
// be exact"; S1 filter table and fire).
//
// Filters are grouped by event type; an event visits the groups of its
// type and every ancestor, plus the AnyType group, so type inheritance
// costs one group per ancestor and nothing per filter. Inside a group,
// predicates are indexed, not evaluated one filter at a time: each filter
// is entered under a few access predicates chosen so that it cannot match
// unless one of them holds (one for ModeAll; n−k+1 for "at least k of n";
// enough weight for ModeScore), preferring equality and set membership
// (hash lookups), then prefix and suffix (one lookup per distinct prefix
// length), then presence of the operand. Only the filters reached that way
// are verified. Filters with no predicates fire without verification.
// Each distinct payload path (gjson path, or XPath predicate) is extracted
// once per event and only when a reached filter or posting needs it.
//
// Filters whose predicates are all numeric comparisons and ranges on
// attributes live, once a type has enough of them, in that type's dense
// engine (see dense): kept as compact records, not as *Filter values, and
// found through bitsets of the filters an event fails.
//
// Filters in posting lists are kept as records (record.go), not as
// *Filter values: the caller keeps its *Filter.
//
// Concurrency: Index is safe for concurrent use. Match never blocks on
// writers and writers never block Match. The posting lists, like the dense
// engines, are one copy updated in place: a list appends postings and
// publishes its length, clears a removed posting's live bit atomically,
// and moves to new arrays, published by an atomic pointer, when dead
// postings outnumber live ones (see plist). What leads to the lists — the
// groups, the keys, the maps from values and affixes to lists — is kept
// in two copies and readers switch between them (the left-right
// technique, Ramalhete & Correia 2015): a change there (a new key, a new
// or emptied list, a range posting) is applied twice, and waits for
// in-flight Match calls on the older copy to finish. Adding a filter whose
// lists exist waits for no reader. Add and Remove are serialised among
// themselves. Match allocates nothing in steady state for events without
// an XML payload.
type Index struct {
	ont *ontology.Ontology

	mu      sync.Mutex // serialises writers; guards everything below it
	entries idTable[*entry]
	ents    entryStore // the entries, by slot
	// denseAt locates the filters that live in dense engines (they have
	// no entry): see denseLoc.
	denseAt idTable[uint64]
	pop     map[int]*groupPop // by group: popularity of operands and values, for choosing access
	vocab   vocab             // Resolve's ontology look-ups (resolve.go)
	// lookups holds, by predicate of the filter Add is adding, the vocab
	// entry resolve found for it, or nil.
	lookups []*attrLookup
	keys    map[keyName]*keyRef // the keys of payload and XPath operands
	// attrRefs holds the keys of attributes, by name: a string map costs
	// about half what a keyName map does in an Add.
	attrRefs map[string]*keyRef
	freeKey  []uint32
	nextKey  uint32
	free     []uint32      // free slots
	next     uint32        // next unused slot
	pos      places        // where each filter's postings are in their lists
	spare    spares        // heads arrays of lists that moved, for lists that grow
	nslots   atomic.Uint32 // next, published: what readers size Match's scratch by (written under mu, read atomically)
	recs     recWriter

	inst    [2]*data
	side    atomic.Uint32 // the copy readers use
	version atomic.Uint32 // the read indicator readers arrive at
	readers [2]readIndicator

	pool sync.Pool // *scratch
}

type readIndicator struct {
	n atomic.Int64
	_ [56]byte // keep the two indicators on separate cache lines
}

// keyName identifies an operand: an attribute, a gjson path, or a boolean
// XPath source together with its namespace bindings.
type keyName struct {
	src  Source
	name string
}

type keyRef struct {
	id   uint32
	refs int
}

// keyInfo is what a copy knows about an operand key.
type keyInfo struct {
	name keyName
	x    *xpathExpr // for XPath keys: the boolean expression
	used bool
}

// entry is one filter as the index holds it: its record (record.go), not
// its *Filter, which the caller keeps, and its item: up to four of its
// predicates in compact form, which a posting list reaches for the
// filters its heads let through (see makeItem). Its postings are not
// kept: the record says which predicates it was entered under, and
// postingsOf derives them. It is shared by both copies and immutable
// once built but for rec, which the writer moves to a copy of the same
// bytes (record compaction) with an atomic store, and readers load
// atomically; slot never changes, group and kind are the writer's. It
// lives at its slot in the index's entryStore, and is made anew there
// for another filter once no list and no reader can reach it.
// Memory: 128 bytes, two cache lines (the store's blocks start on a
// multiple of 128 bytes), and the record (about 42 bytes on W-SPARSE).
type entry struct {
	// The item, first, so that a list's reader mostly reads one cache
	// line of the entry (its start and first predicate): the predicates other
	// than the one every posting of the filter implies (match all
	// filters; the same for all its postings) that have a fast form, most
	// selective first.
	nfast  uint8
	flags  uint8  // itemComplete, itemMulti; and the dense kind (see kind)
	npreds uint16 // the score of a complete item
	slot   uint32
	// fast holds the item's predicates; a direct entry, which has none,
	// keeps its score in its last one's lo, in the cache line of id (see
	// score).
	fast [4]fastPred

	id uint64
	// rec and recLen are the record (predicates, keys, mode, access),
	// whose bytes are never written once made: see record. rec moves
	// (moveRecord); recLen does not.
	rec    *byte
	recLen uint32
	group  int32 // type ID + 1; 0 for AnyType
}

// entryKind is the shift of the dense engine kind + 1 in entry.flags.
const entryKind = 6

// record returns e's record. A reader holding it keeps it reachable
// when the writer moves it: the bytes it reads stay the same.
func (e *entry) record() []byte {
	return unsafe.Slice((*byte)(atomic.LoadPointer((*unsafe.Pointer)(unsafe.Pointer(&e.rec)))), e.recLen)
}

// setRecord makes b e's record, before e is published.
func (e *entry) setRecord(b []byte) { e.rec, e.recLen = unsafe.SliceData(b), uint32(len(b)) }

// moveRecord makes b, a copy of e's record, e's record, while readers
// may be reading e.
func (e *entry) moveRecord(b []byte) {
	atomic.StorePointer((*unsafe.Pointer)(unsafe.Pointer(&e.rec)), unsafe.Pointer(unsafe.SliceData(b)))
}

// kind returns the dense engine kind e could live in, or noDense.
func (e *entry) kind() int { return int(e.flags>>entryKind) - 1 }

// score returns the score of direct entry e.
func (e *entry) score() float64 { return e.fast[len(e.fast)-1].lo }

// draft is what Add knows of a filter while it enters it in postings —
// its resolved *Filter, its predicates' keys, and what the heads of its
// postings test — and the entry does not keep.
type draft struct {
	f    *Filter
	keys []uint32
	// sig has bit k%64 set for every attribute key k the filter needs
	// present (match all filters only): an event whose attribute signature
	// lacks one of them cannot match, and the posting is skipped unread.
	sig uint64
	// vsig has one bit for each attribute equality (key and value) the
	// filter needs (match all only), in word vword of the event's value
	// signature: the word where most of its equalities fall; see
	// valueBit.
	vsig  uint64
	vword uint8
	multi bool // entered under several access predicates
	// gp is the popularity counts of the filter's group, looked up once
	// per Add: chooseAccess and headPred read them for every predicate.
	gp *groupPop
	// head and head2 are, plus one, the predicates headPred chose last,
	// and headForm and headForm2 their bitmap forms, which makeHead takes
	// rather than computing them again.
	head, head2         uint8
	headForm, headForm2 headForm
}

// data is one of the two copies readers switch between: the groups, the
// keys, and what leads to the posting lists (which both copies share).
type data struct {
	groups   []*group // by type ID + 1; 0 is AnyType
	keys     []keyInfo
	attrKeys map[string]uint32
}

type group struct {
	// dense holds, by kind, the group's filters of numeric intervals when
	// it has enough; the engine is shared by both copies (see dense).
	dense    [2]*dense
	eligible [2]int // by kind: dense-eligible filters held in postings (the writer's; readers never read it)
	direct   *plist // shared by both copies, like every list; bare (see newBare)
	always   *plist
	// directEnts and alwaysEnts are direct.ents and always.ents, which
	// readers scan from here, saving a load of the list per visit.
	directEnts, alwaysEnts []atomic.Pointer[entry]
	// hide holds, while the group's eligible filters move from postings
	// into a new dense engine, their slots: readers of a copy that has
	// the engine skip them in the lists (see newDense).
	hide  map[uint32]bool
	byKey map[uint32]*keyPostings
	attrs []*keyPostings // postings on attribute keys
	pay   []*keyPostings // postings on payload keys
}

// NewIndex returns an empty Index whose filters and events use the event
// types of o. o must not be nil.
func NewIndex(o *ontology.Ontology) *Index {
	if o == nil {
		panic("filter: NewIndex with a nil ontology")
	}
	x := &Index{ont: o, keys: map[keyName]*keyRef{}, attrRefs: map[string]*keyRef{}, pop: map[int]*groupPop{}}
	for i := range x.inst {
		x.inst[i] = &data{groups: make([]*group, o.NumTypes()+1), attrKeys: map[string]uint32{}}
	}
	x.pool.New = func() any { return new(scratch) }
	return x
}

// Ontology returns the ontology the index was made with.
func (x *Index) Ontology() *ontology.Ontology { return x.ont }

// ErrDuplicateID is returned by Index.Add for an ID already in the index.
var ErrDuplicateID = errors.New("filter: duplicate filter ID")

// Len returns the number of filters in the index.
func (x *Index) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.entries.len() + x.denseAt.len()
}

// Add puts f into the index under id. f is first passed through Resolve,
// so its type must be known to the index's ontology and its attributes must
// fit their declared kinds; those errors wrap ErrInvalid. An id already
// present returns an error wrapping ErrDuplicateID. When Add returns, every
// Match that starts afterwards sees the filter. Add may be called
// concurrently with Match and other Add and Remove calls; when it makes a
// key, a list or a range posting, it waits for Match calls in flight to
// leave the copy it updates second. Cost: O(number of predicates) map
// operations, plus, for each set predicate of m members, O(m) to copy and
// count them, O(m log m) to sort a set of more than 8 into its record's
// search order (see Match), and a map operation per distinct member when
// the index enters the filter under its members' postings.
func (x *Index) Add(id uint64, f *Filter) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	// f's lines and the entries map's, when cold, miss together, before
	// resolve reads f (see touchFilter).
	touchFilter(f)
	_, dup := x.entries.get(id)
	x.lookups = x.lookups[:0]
	if f != nil {
		x.lookups = append(x.lookups, make([]*attrLookup, len(f.preds))...)
	}
	rf, typeID, err := resolve(x.ont, f, x)
	if err != nil {
		return err
	}
	if rf != f {
		// Build renamed synonyms: the look-ups stand for f's predicates,
		// and acquireKey finds rf's keys by name.
		x.lookups = x.lookups[:0]
	}
	f = rf
	if dup {
		return fmt.Errorf("%w %d", ErrDuplicateID, id)
	}
	if _, dup := x.denseAt.get(id); dup {
		return fmt.Errorf("%w %d", ErrDuplicateID, id)
	}
	group := typeID + 1
	// The keys of f's predicates, on the stack unless f has many.
	var buf [denseMaxPreds]uint32
	var keys []uint32
	if len(f.preds) <= len(buf) {
		keys = buf[:len(f.preds)]
	} else {
		keys = make([]uint32, len(f.preds))
	}
	for i := range f.preds {
		keys[i] = x.acquireKey(f, i)
	}
	kind := denseKind(f)
	if kind != noDense {
		g := x.inst[1-x.side.Load()].groups[group]
		switch {
		case g != nil && g.dense[kind] != nil && g.dense[kind].fits(keys):
			x.addDense(g.dense[kind], id, f, group, kind, keys)
			return nil
		case g != nil && g.dense[kind] == nil && g.eligible[kind]+1 >= denseMinGroup && attrCount(keys) <= denseMaxAttrs:
			x.newDense(id, f, group, kind, keys)
			return nil
		}
	}
	var e *entry
	if x.free = x.ents.settle(x.free); len(x.free) > 0 {
		n := len(x.free)
		e = x.ents.at(x.free[n-1])
		e.slot = x.free[n-1]
		x.free = x.free[:n-1]
	} else {
		e = x.ents.make(x.next)
		e.slot = x.next
		x.next++
		x.nslots.Store(x.next)
	}
	e.id, e.group, e.flags = id, int32(group), uint8(kind+1)<<entryKind
	w := &x.recs
	var atBuf [16]int // where f's predicates start: unused (see addedPostings)
	w.buf, _ = appendRecord(w.buf[:0], f, keys, atBuf[:0])
	acc := len(w.buf) // where its access starts
	dr := &draft{f: f, keys: keys, gp: x.groupPop(group)}
	countFilter(dr.gp, f, keys)
	w.buf = x.chooseAccess(e, dr, w.buf)
	e.setRecord(w.store(w.buf))
	// The postings and their heads, on the stack unless f has many.
	var psBuf [8]posting
	var headBuf [len(psBuf)]lhead
	ps := addedPostings(f, keys, e.record(), acc, psBuf[:0])
	// The lists' misses overlap the work up to enter (see touchLists).
	var lkBuf [len(psBuf)]*plist
	looked := x.touchLists(e, dr.gp, ps, lkBuf[:0])
	x.chooseHeads(e, dr, ps)
	makeItem(e, dr, ps)
	heads := headBuf[:0]
	for j := range ps {
		if j > 0 && ps[j].head == ps[j-1].head && ps[j].head2 == ps[j-1].head2 && ps[j].implied == ps[j-1].implied {
			// The head of a posting depends on its head predicate and
			// on the predicate it implies: the postings of a set
			// membership share it.
			h := heads[j-1]
			h.post = uint16(j)
			heads = append(heads, h)
			continue
		}
		heads = append(heads, makeHead(dr, ps, j))
	}
	x.entries.set(id, e)
	x.enter(e, dr, ps, heads, looked)
	return nil
}

// denseLoc packs where a filter lives in a dense engine: the group in
// bits 32–62, the engine kind in bit 31, the engine slot in the low 31;
// bit 63 is set, so that no location is 0 (idTable's empty value).
func denseLoc(group, kind int, slot uint32) uint64 {
	return 1<<63 | uint64(group)<<32 | uint64(kind)<<31 | uint64(slot)
}

// moveDense returns the callback through which the engine of group and
// kind reports the new slots of its filters.
func (x *Index) moveDense(group, kind int) func(id uint64, slot uint32) {
	return func(id uint64, slot uint32) { x.denseAt.set(id, denseLoc(group, kind, slot)) }
}

// addDense puts f (attribute keys keys, already acquired) into engine dn
// of group and kind, telling both copies about keys they do not know.
// mu must be held.
func (x *Index) addDense(dn *dense, id uint64, f *Filter, group, kind int, keys []uint32) {
	x.useKeys(f, keys)
	x.denseAt.set(id, denseLoc(group, kind, dn.add(id, f, keys, x.moveDense(group, kind))))
}

// useKeys makes both copies know the attribute keys of f that they do not
// know yet. mu must be held.
func (x *Index) useKeys(f *Filter, keys []uint32) {
	d := x.inst[1-x.side.Load()]
	for _, k := range keys {
		if int(k) >= len(d.keys) || !d.keys[k].used {
			ks := slices.Clone(keys) // keys is on Add's stack
			x.write(func(d *data) {
				for i, k := range ks {
					d.useKey(k, keyNameOf(f, i), nil)
				}
			})
			return
		}
	}
}

// newDense makes group's dense engine of kind with f in it (attribute keys
// keys, acquired) and moves into it the group's eligible filters that wait
// in postings, unless together they would pass the engine's attribute
// cap. mu must be held.
func (x *Index) newDense(id uint64, f *Filter, group, kind int, keys []uint32) {
	dn := newDense(kind == denseCount)
	moved := x.migrants(group, kind, keys)
	mv := x.moveDense(group, kind)
	for _, o := range moved {
		of, okeys := x.filterOf(o)
		x.denseAt.set(o.id, denseLoc(group, kind, dn.add(o.id, of, okeys, mv)))
		x.entries.delete(o.id)
	}
	x.denseAt.set(id, denseLoc(group, kind, dn.add(id, f, keys, mv)))
	ks := slices.Clone(keys) // keys is on Add's stack
	x.ensureGroup(group)
	// The engine and the moved filters' hiding go in together; then the
	// filters leave the lists (which both copies share), and the hiding
	// ends.
	hide := map[uint32]bool{}
	for _, o := range moved {
		hide[o.slot] = true
	}
	x.write(func(d *data) {
		for i, k := range ks {
			d.useKey(k, keyNameOf(f, i), nil)
		}
		g := d.groups[group]
		g.dense[kind], g.hide = dn, hide
	})
	for _, o := range moved {
		x.leave(o)
		// Their keys carry over; their popularity counts become the
		// engine's (see accessFor).
		x.count(o, -1)
		x.recs.live -= int(o.recLen)
	}
	x.write(func(d *data) { d.groups[group].hide = nil })
}

// migrants returns, when a filter is about to create the dense engine of
// group and kind, the eligible filters of that group and kind that wait
// in postings: they move in with it, so that no eligible filter stays
// behind in the slower "operand present" lists. It returns nil if
// together with keys they would pass the engine's attribute cap. mu must
// be held.
func (x *Index) migrants(group, kind int, keys []uint32) []*entry {
	var moved []*entry
	attrs := map[uint32]bool{}
	for _, k := range keys {
		attrs[k] = true
	}
	for _, o := range x.entries.all() {
		if int(o.group) != group || o.kind() != kind {
			continue
		}
		for _, k := range recKeys(o.record(), nil) {
			attrs[k] = true
		}
		moved = append(moved, o)
	}
	if len(attrs) > denseMaxAttrs {
		return nil
	}
	slices.SortFunc(moved, func(a, b *entry) int { return cmp.Compare(a.slot, b.slot) })
	return moved
}

// Remove takes the filter with id out of the index and reports whether it
// was there. When Remove returns, no Match that starts afterwards reports
// it. Safe for concurrent use, like Add. Cost: O(number of postings), and
// now and then the upkeep that removals leave (see the package doc): a
// new layout of a dense engine or a compaction of the records, each
// O(live filters), once removed filters outweigh live ones, so O(1) per
// Remove over time; it holds other writers, never Match. The memory of
// a filter on posting lists is kept for a later Add (see the package
// doc on memory).
func (x *Index) Remove(id uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.free = x.ents.settle(x.free)
	if loc, ok := x.denseAt.get(id); ok {
		x.removeDense(id, loc)
		return true
	}
	e, ok := x.entries.get(id)
	if !ok {
		return false
	}
	x.entries.delete(id)
	x.count(e, -1)
	var dead []uint32
	var buf [denseMaxPreds]uint32
	for _, k := range recKeys(e.record(), buf[:0]) {
		if k, last := x.releaseKey(x.inst[0].keys[k].name); last {
			dead = append(dead, k)
		}
	}
	x.leave(e)
	if x.recs.live -= int(e.recLen); x.recs.dead() {
		x.compactRecords()
	}
	if len(dead) > 0 {
		x.write(func(d *data) {
			for _, k := range dead {
				d.forget(k)
			}
		})
	}
	if len(x.ents.pending) >= pendingMax {
		x.write(func(*data) {}) // see entryStore
	}
	return true
}

// removeDense takes the filter id at loc out of its dense engine, and the
// engine out of both copies when it is left empty. mu must be held.
func (x *Index) removeDense(id uint64, loc uint64) {
	group, kind, slot := int(loc>>32&(1<<31-1)), int(loc>>31&1), uint32(loc&(1<<31-1))
	x.denseAt.delete(id)
	dn := x.inst[0].groups[group].dense[kind]
	var buf [denseMaxPreds]uint32
	keys := dn.remove(slot, buf[:0], x.moveDense(group, kind))
	var dead []uint32
	for _, k := range keys {
		if k, last := x.releaseKey(x.inst[0].keys[k].name); last {
			dead = append(dead, k)
		}
	}
	if len(dead) == 0 && !dn.empty() {
		return
	}
	x.write(func(d *data) {
		for _, k := range dead {
			d.forget(k)
		}
		if dn.empty() {
			d.groups[group].dense[kind] = nil
		}
	})
}

// write applies op to both copies: first to the one readers do not use,
// then, after switching readers over and waiting for those still on the
// other, to that one. mu must be held.
func (x *Index) write(op func(d *data)) {
	side := x.side.Load()
	op(x.inst[1-side])
	x.side.Store(1 - side)
	vi := x.version.Load()
	for x.readers[1-vi].n.Load() != 0 {
		runtime.Gosched()
	}
	x.version.Store(1 - vi)
	for x.readers[vi].n.Load() != 0 {
		runtime.Gosched()
	}
	op(x.inst[side])
	x.ents.written() // no reader is on what went before the write
}

// ---- one copy ----

// ensureGroup makes both copies have group i, with the lists they share.
// mu must be held.
func (x *Index) ensureGroup(i int) {
	if x.inst[0].groups[i] != nil {
		return
	}
	direct, always := newBare(0), newBare(0)
	x.write(func(d *data) {
		d.groups[i] = &group{byKey: map[uint32]*keyPostings{}, direct: direct, always: always, directEnts: direct.ents, alwaysEnts: always.ents}
	})
}

// useKey makes the copy know key k, named kn (with XPath expression xe
// for XPath keys), unless it does.
func (d *data) useKey(k uint32, kn keyName, xe *xpathExpr) {
	if k == noKey {
		return
	}
	for len(d.keys) <= int(k) {
		d.keys = append(d.keys, keyInfo{})
	}
	if !d.keys[k].used {
		d.keys[k] = keyInfo{name: kn, x: xe, used: true}
		if kn.src == SourceAttr {
			d.attrKeys[kn.name] = k
		}
	}
}

// forget clears what the copy knows about a released key.
func (d *data) forget(k uint32) {
	if kn := d.keys[k].name; kn.src == SourceAttr {
		delete(d.attrKeys, kn.name)
	}
	d.keys[k] = keyInfo{}
}

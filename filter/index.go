package filter

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

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
// Concurrency: Index is safe for concurrent use. Match never blocks on
// writers and writers never block Match. The posting lists are kept in two
// copies and readers switch between them (the left-right technique,
// Ramalhete & Correia 2015): Add and Remove apply each change twice and wait
// for in-flight Match calls on the older copy to finish. Dense engines are
// one copy shared by both, updated in place with atomic words and
// published generations, so adding a filter to one waits for no reader.
// Add and Remove are serialised among themselves. Match allocates nothing
// in steady state for events without an XML payload.
type Index struct {
	ont *ontology.Ontology

	mu      sync.Mutex // serialises writers; guards everything below it
	entries map[uint64]*entry
	// denseAt locates the filters that live in dense engines (they have
	// no entry): the group in the high 32 bits, the engine kind in bit
	// 31, the engine slot in the low 31.
	denseAt map[uint64]uint64
	pop     map[popKey]int32 // popularity of operands and values, for choosing access
	// vocab caches Resolve's ontology look-ups that succeeded, by type ID
	// + 1 (0: AnyType) and attribute name as filters spell it: one map
	// access per predicate instead of two and a binary search.
	vocab []map[string]attrLookup
	keys  map[keyName]*keyRef // the keys of payload and XPath operands
	// attrRefs holds the keys of attributes, by name: a string map costs
	// about half what a keyName map does in an Add.
	attrRefs map[string]*keyRef
	freeKey  []uint32
	nextKey  uint32
	free     []uint32 // free slots
	next     uint32   // next unused slot

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

// entry is one filter as the index holds it. It is shared by both copies
// and immutable once built, except slot, which only the writer reads.
type entry struct {
	id       uint64
	f        *Filter
	preds    []Predicate // f.preds, one pointer step closer
	mode     Mode        // f's mode, K and threshold, likewise
	atLeast  int
	thresh   float64
	keyBuf   [6]uint32 // keys live here when they fit, in the entry's own memory
	slot     uint32
	group    int // type ID + 1; 0 for AnyType
	keys     []uint32
	postings []posting
	kind     int     // the dense engine kind it could live in, or noDense
	direct   bool    // no predicates that can fail: fire without verification
	score    float64 // the score of a direct entry
	weight   float64 // the sum of the predicates' weights
	multi    bool    // reachable through several postings: deduplicate
	// sig has bit k%64 set for every attribute key k the filter needs
	// present (match all filters only): an event whose attribute signature
	// lacks one of them cannot match, and the entry is skipped unread.
	sig uint64
	// vsig has one bit for each attribute equality (key and value) the
	// filter needs (match all only), in word vword of the event's value
	// signature: the word where most of its equalities fall; see
	// valueBit.
	vsig  uint64
	vword uint8
	// xkey per predicate for SourceXPath predicates
}

// data is one of the two copies readers switch between.
type data struct {
	groups   []*group // by type ID + 1; 0 is AnyType
	keys     []keyInfo
	attrKeys map[string]uint32
	slots    []*entry
	pos      [][]int32 // by slot, by posting: the entry's place in its list
}

type group struct {
	// dense holds, by kind, the group's filters of numeric intervals when
	// it has enough; the engine is shared by both copies (see dense).
	dense    [2]*dense
	eligible [2]int // by kind: dense-eligible filters held in postings
	direct   plist
	always   plist
	byKey    map[uint32]*keyPostings
	attrs    []*keyPostings // postings on attribute keys
	pay      []*keyPostings // postings on payload keys
}

// NewIndex returns an empty Index whose filters and events use the event
// types of o. o must not be nil.
func NewIndex(o *ontology.Ontology) *Index {
	if o == nil {
		panic("filter: NewIndex with a nil ontology")
	}
	x := &Index{ont: o, entries: map[uint64]*entry{}, denseAt: map[uint64]uint64{}, keys: map[keyName]*keyRef{}, attrRefs: map[string]*keyRef{}, pop: map[popKey]int32{}}
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
	return len(x.entries) + len(x.denseAt)
}

// Add puts f into the index under id. f is first passed through Resolve,
// so its type must be known to the index's ontology and its attributes must
// fit their declared kinds; those errors wrap ErrInvalid. An id already
// present returns an error wrapping ErrDuplicateID. When Add returns, every
// Match that starts afterwards sees the filter. Add may be called
// concurrently with Match and other Add and Remove calls; it waits for
// Match calls in flight to leave the copy it updates second. Cost: O(number
// of predicates) map operations, twice.
func (x *Index) Add(id uint64, f *Filter) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	f, err := resolve(x.ont, f, x.lookAttr)
	if err != nil {
		return err
	}
	if _, dup := x.entries[id]; dup {
		return fmt.Errorf("%w %d", ErrDuplicateID, id)
	}
	if _, dup := x.denseAt[id]; dup {
		return fmt.Errorf("%w %d", ErrDuplicateID, id)
	}
	group := 0
	if f.typ != AnyType {
		t, _ := x.ont.Lookup(f.typ)
		group = t.ID + 1
	}
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
	e := &entry{id: id, f: f, group: group, kind: kind}
	for i := range f.preds {
		e.weight += f.preds[i].weight()
	}
	e.preds, e.mode, e.atLeast, e.thresh = f.preds, f.mode, f.atLeast, f.threshold
	if len(keys) <= len(e.keyBuf) {
		e.keys = e.keyBuf[:len(keys)]
	} else {
		e.keys = make([]uint32, len(keys))
	}
	copy(e.keys, keys)
	if len(x.free) > 0 {
		e.slot = x.free[len(x.free)-1]
		x.free = x.free[:len(x.free)-1]
	} else {
		e.slot = x.next
		x.next++
	}
	x.count(e, 1)
	x.choosePostings(e)
	x.entries[id] = e
	x.write(func(d *data) { d.insert(e) })
	return nil
}

// lookAttr is lookAttr through the cache x.vocab. mu must be held.
func (x *Index) lookAttr(typeID int, name string) attrLookup {
	if x.vocab == nil {
		x.vocab = make([]map[string]attrLookup, x.ont.NumTypes()+1)
	}
	m := x.vocab[typeID+1]
	if l, ok := m[name]; ok {
		return l
	}
	l := lookAttr(x.ont, typeID, name)
	if l.ok {
		if m == nil {
			m = map[string]attrLookup{}
			x.vocab[typeID+1] = m
		}
		m[name] = l
	}
	return l
}

// denseLoc packs where a filter lives in a dense engine.
func denseLoc(group, kind int, slot uint32) uint64 {
	return uint64(group)<<32 | uint64(kind)<<31 | uint64(slot)
}

// moveDense returns the callback through which the engine of group and
// kind reports the new slots of its filters.
func (x *Index) moveDense(group, kind int) func(id uint64, slot uint32) {
	return func(id uint64, slot uint32) { x.denseAt[id] = denseLoc(group, kind, slot) }
}

// addDense puts f (attribute keys keys, already acquired) into engine dn
// of group and kind, telling both copies about keys they do not know.
// mu must be held.
func (x *Index) addDense(dn *dense, id uint64, f *Filter, group, kind int, keys []uint32) {
	x.useKeys(f, keys)
	x.denseAt[id] = denseLoc(group, kind, dn.add(id, f, keys, x.moveDense(group, kind)))
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
		x.denseAt[o.id] = denseLoc(group, kind, dn.add(o.id, o.f, o.keys, mv))
		delete(x.entries, o.id)
	}
	x.denseAt[id] = denseLoc(group, kind, dn.add(id, f, keys, mv))
	ks := slices.Clone(keys) // keys is on Add's stack
	x.write(func(d *data) {
		for _, o := range moved {
			d.remove(o)
		}
		for i, k := range ks {
			d.useKey(k, keyNameOf(f, i), nil)
		}
		d.group(group).dense[kind] = dn
	})
	for _, o := range moved {
		// Their keys carry over; their popularity counts become the
		// engine's (see accessFor).
		x.count(o, -1)
		x.free = append(x.free, o.slot)
	}
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
	for _, o := range x.entries {
		if o.group != group || o.kind != kind {
			continue
		}
		for _, k := range o.keys {
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
// it. Safe for concurrent use, like Add.
func (x *Index) Remove(id uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if loc, ok := x.denseAt[id]; ok {
		x.removeDense(id, loc)
		return true
	}
	e, ok := x.entries[id]
	if !ok {
		return false
	}
	delete(x.entries, id)
	x.count(e, -1)
	var dead []uint32
	for i := range e.f.preds {
		if id, last := x.releaseKey(keyNameOf(e.f, i)); last {
			dead = append(dead, id)
		}
	}
	x.write(func(d *data) {
		d.remove(e)
		for _, k := range dead {
			d.forget(k)
		}
	})
	x.free = append(x.free, e.slot)
	return true
}

// removeDense takes the filter id at loc out of its dense engine, and the
// engine out of both copies when it is left empty. mu must be held.
func (x *Index) removeDense(id uint64, loc uint64) {
	group, kind, slot := int(loc>>32), int(loc>>31&1), uint32(loc&(1<<31-1))
	delete(x.denseAt, id)
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
}

func keyNameOf(f *Filter, i int) keyName {
	p := &f.preds[i]
	switch p.Operand.Source {
	case SourceXPath:
		name := f.xexprs[i].String() // SourceXPath: set by Build
		for _, b := range f.ns {
			name += "\x00" + b.prefix + "=" + b.uri
		}
		return keyName{SourceXPath, name}
	case sourceNone:
		return keyName{sourceNone, ""}
	}
	return keyName{p.Operand.Source, p.Operand.Name}
}

const noKey = ^uint32(0)

// acquireKey returns the key ID of predicate i of f, counting a reference.
// mu must be held.
func (x *Index) acquireKey(f *Filter, i int) uint32 {
	if p := &f.preds[i]; p.Operand.Source == SourceAttr {
		if r, ok := x.attrRefs[p.Operand.Name]; ok {
			r.refs++
			return r.id
		}
	}
	kn := keyNameOf(f, i)
	if kn.src == sourceNone {
		return noKey
	}
	if r, ok := x.keys[kn]; ok {
		r.refs++
		return r.id
	}
	var id uint32
	if n := len(x.freeKey); n > 0 {
		id = x.freeKey[n-1]
		x.freeKey = x.freeKey[:n-1]
	} else {
		id = x.nextKey
		x.nextKey++
	}
	if kn.src == SourceAttr {
		x.attrRefs[kn.name] = &keyRef{id: id, refs: 1}
	} else {
		x.keys[kn] = &keyRef{id: id, refs: 1}
	}
	return id
}

// releaseKey drops a reference to a key and reports whether it was the
// last; the caller then forgets the key in both copies. mu must be held.
func (x *Index) releaseKey(kn keyName) (uint32, bool) {
	if kn.src == sourceNone {
		return 0, false
	}
	var r *keyRef
	if kn.src == SourceAttr {
		r = x.attrRefs[kn.name]
	} else {
		r = x.keys[kn]
	}
	if r.refs--; r.refs > 0 {
		return 0, false
	}
	if kn.src == SourceAttr {
		delete(x.attrRefs, kn.name)
	} else {
		delete(x.keys, kn)
	}
	x.freeKey = append(x.freeKey, r.id)
	return r.id, true
}

// ---- one copy ----

func (d *data) group(i int) *group {
	g := d.groups[i]
	if g == nil {
		g = &group{byKey: map[uint32]*keyPostings{}}
		d.groups[i] = g
	}
	return g
}

func (d *data) insert(e *entry) {
	for len(d.slots) <= int(e.slot) {
		d.slots = append(d.slots, nil)
		d.pos = append(d.pos, nil)
	}
	d.slots[e.slot] = e
	for i, k := range e.keys {
		d.useKey(k, keyNameOf(e.f, i), e.f.xexpr(i))
	}
	g := d.group(e.group)
	if e.kind != noDense {
		g.eligible[e.kind]++
	}
	pos := make([]int32, len(e.postings))
	for j, p := range e.postings {
		pos[j] = d.list(g, p, true).add(e, j)
	}
	d.pos[e.slot] = pos
}

func (d *data) remove(e *entry) {
	g := d.groups[e.group]
	d.slots[e.slot] = nil
	if e.kind != noDense {
		g.eligible[e.kind]--
	}
	pos := d.pos[e.slot]
	for j, p := range e.postings {
		if m, q, ok := d.list(g, p, false).del(pos[j]); ok {
			d.pos[m.slot][q] = pos[j]
		}
		d.dropPosting(g, p)
	}
	d.pos[e.slot] = nil
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

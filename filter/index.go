package filter

import (
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sort"
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
// Concurrency: Index is safe for concurrent use. Match never blocks on
// writers and writers never block Match: the index keeps two copies and
// switches readers between them (the left-right technique, Ramalhete &
// Correia 2015), so Add and Remove apply each change twice and wait for
// in-flight Match calls on the older copy to finish. Add and Remove are
// serialised among themselves. Match allocates nothing in steady state
// for events without an XML payload.
type Index struct {
	ont *ontology.Ontology

	mu      sync.Mutex // serialises writers; guards everything below it
	entries map[uint64]*entry
	// denseAt locates the filters that live in dense engines (they have
	// no entry): the group in the high 32 bits, the engine kind in bit
	// 31, the engine slot in the low 31.
	denseAt map[uint64]uint64
	pop     map[popKey]int32 // popularity of operands and values, for choosing access
	keys    map[keyName]*keyRef
	freeKey []uint32
	nextKey uint32
	free    []uint32 // free slots
	next    uint32   // next unused slot

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

type postingKind uint8

const (
	postDirect postingKind = iota
	postAlways
	postPresent
	postEq
	postPrefix
	postSuffix
)

type posting struct {
	kind postingKind
	key  uint32
	// implied is the predicate that holds whenever an event reaches the
	// posting (postEq, postPrefix, postSuffix), or -1.
	implied int32
	vk      ontology.ValueKey // postEq
	s       string            // postPrefix, postSuffix
}

// data is one of the two copies readers switch between.
type data struct {
	groups   []*group // by type ID + 1; 0 is AnyType
	keys     []keyInfo
	attrKeys map[string]uint32
	slots    []*entry
	pos      [][]int32 // by slot, by posting: the entry's place in its list
}

// plist is a posting list. It holds entries, not slots, so that
// verification reaches a filter in one step; and, in the list's own
// memory, what rejects most of the filters reached without reading them.
type plist struct {
	ents []*entry
	sig  []uint64 // ents[i].sig, kept in the list so that it is read in order
	vsig []uint64 // ents[i].vsig, likewise
	// any is a mask of value signature bits at least one of which an
	// event needs, from one set membership predicate (0 for none), see
	// anyMask; sw has the word of vsig in bits 0–1 and of any in bits 2–3.
	any   []uint64
	sw    []uint8
	post  []uint16 // which posting of ents[i] this is
	items []litem  // by i, likewise
}

// litem is what a posting list keeps of a match-all filter: up to four of
// its predicates in compact form, other than the one the posting implies,
// checked before the filter is read. When they are all its predicates
// (itemComplete), a filter that passes them matches, unread.
type litem struct {
	id     uint64
	slot   uint32
	npreds uint16 // the score of a complete item
	nfast  uint8
	flags  uint8
	fast   [4]fastPred
}

const (
	itemComplete = 1 << iota
	itemMulti
)

// makeItem returns the list item of posting j of e: the predicates other
// than the posting's implied one that have a fast form, most selective
// first (equality, set membership, comparisons, exclusions, presence).
func makeItem(e *entry, j int) litem {
	it := litem{id: e.id, slot: e.slot}
	if e.multi {
		it.flags |= itemMulti
	}
	if e.mode != ModeAll {
		return it
	}
	implied := e.postings[j].implied
	rest, complete := 0, true
	var cand [4][4]fastPred // by rank
	var nc [4]int
	for i := range e.preds {
		p := &e.preds[i]
		if int32(i) == implied || p.Op == OpTrue {
			continue
		}
		rest++
		fp, ok := makeFast(p, e.keys[i])
		if !ok {
			complete = false
			continue
		}
		r := 3
		switch p.Op {
		case OpEQ:
			r = 0
		case OpIn:
			r = 1
		case OpLT, OpLE, OpGT, OpGE, OpRange:
			r = 2
		}
		if nc[r] < len(cand[r]) {
			cand[r][nc[r]] = fp
			nc[r]++
		}
	}
	for r := range cand {
		for _, fp := range cand[r][:nc[r]] {
			if int(it.nfast) < len(it.fast) {
				it.fast[it.nfast] = fp
				it.nfast++
			}
		}
	}
	if complete && rest == int(it.nfast) && len(e.preds) < 1<<16 {
		it.flags |= itemComplete
		it.npreds = uint16(len(e.preds))
	}
	return it
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

type keyPostings struct {
	key        uint32
	n          int
	present    plist
	eq         map[ontology.ValueKey]*plist
	prefix     map[string]*plist
	suffix     map[string]*plist
	prefixLens []lenCount // sorted by length
	suffixLens []lenCount
}

type lenCount struct{ n, count int }

// NewIndex returns an empty Index whose filters and events use the event
// types of o. o must not be nil.
func NewIndex(o *ontology.Ontology) *Index {
	if o == nil {
		panic("filter: NewIndex with a nil ontology")
	}
	x := &Index{ont: o, entries: map[uint64]*entry{}, denseAt: map[uint64]uint64{}, keys: map[keyName]*keyRef{}, pop: map[popKey]int32{}}
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
	f, err := Resolve(x.ont, f)
	if err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
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
	kind := denseKind(f)
	if kind != noDense {
		g := x.inst[1-x.side.Load()].groups[group]
		keys := make([]uint32, len(f.preds))
		for i := range f.preds {
			keys[i] = x.acquireKey(f, i)
		}
		switch {
		case g != nil && g.dense[kind] != nil && g.dense[kind].fits(keys):
			x.addDense(g.dense[kind], id, f, group, kind, keys)
			return nil
		case g != nil && g.dense[kind] == nil && g.eligible[kind]+1 >= denseMinGroup:
			x.newDense(id, f, group, kind, keys)
			return nil
		}
		for i := range f.preds {
			x.releaseKey(keyNameOf(f, i))
		}
	}
	e := &entry{id: id, f: f, group: group, kind: kind}
	for i := range f.preds {
		e.weight += f.preds[i].weight()
	}
	e.preds, e.mode, e.atLeast, e.thresh = f.preds, f.mode, f.atLeast, f.threshold
	if len(f.preds) <= len(e.keyBuf) {
		e.keys = e.keyBuf[:len(f.preds)]
	} else {
		e.keys = make([]uint32, len(f.preds))
	}
	for i := range f.preds {
		e.keys[i] = x.acquireKey(f, i)
	}
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
			x.write(func(d *data) {
				for i, k := range keys {
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
	x.write(func(d *data) {
		for _, o := range moved {
			d.remove(o)
		}
		for i, k := range keys {
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
	keys := dn.remove(slot, nil, x.moveDense(group, kind))
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
	x.keys[kn] = &keyRef{id: id, refs: 1}
	return id
}

// releaseKey drops a reference to a key and reports whether it was the
// last; the caller then forgets the key in both copies. mu must be held.
func (x *Index) releaseKey(kn keyName) (uint32, bool) {
	if kn.src == sourceNone {
		return 0, false
	}
	r := x.keys[kn]
	if r.refs--; r.refs > 0 {
		return 0, false
	}
	delete(x.keys, kn)
	x.freeKey = append(x.freeKey, r.id)
	return r.id, true
}

// Limits of the access engine: a filter's postings (a set predicate
// posts once per value) and the longest affix entered by hash.
const (
	maxPostings  = 1 << 16
	maxAffixScan = 64
)

type candidate struct {
	pred  int
	cost  float64
	posts []posting
}

// choosePostings decides under which postings e is entered. The copy
// readers do not use is consulted for list lengths; both copies hold the
// same lists. mu must be held.
func (x *Index) choosePostings(e *entry) {
	f := e.f
	var cands []candidate
	freeN, freeW := 0, 0.0 // predicates that can hold without their operand
	for i := range f.preds {
		p := &f.preds[i]
		if p.Op == OpTrue || p.Op == OpNotExists && p.Operand.Source != SourceXPath {
			freeN++
			freeW += p.weight()
			continue
		}
		cands = append(cands, x.accessFor(e.group, e.keys[i], i, p))
	}
	if len(cands) == 0 && freeN == len(f.preds) {
		// Only true and not-exists predicates.
		if freeN == 0 || allTrue(f) {
			e.direct = true
			w := 0.0
			for i := range f.preds {
				w += f.preds[i].weight()
			}
			ok, score := f.decide(len(f.preds), w)
			if ok {
				e.score = score
				e.postings = []posting{{kind: postDirect, implied: -1}}
			} // else it can never match: no postings at all
			return
		}
	}
	var need []candidate
	switch f.mode {
	case ModeAll:
		if len(cands) > 0 {
			best := 0
			for i, c := range cands {
				if c.cost < cands[best].cost {
					best = i
				}
			}
			need = cands[best : best+1]
		}
	case ModeAtLeast:
		if r := f.atLeast - freeN; r > 0 {
			sort.SliceStable(cands, func(i, j int) bool { return cands[i].cost < cands[j].cost })
			need = cands[:len(cands)-r+1]
		}
	case ModeScore:
		if freeW < f.threshold {
			// Leave out the costliest predicates while their weight, with
			// the free weight, stays below the threshold.
			sort.SliceStable(cands, func(i, j int) bool { return cands[i].cost > cands[j].cost })
			w := freeW
			k := 0
			for k < len(cands) && w+f.preds[cands[k].pred].weight() < f.threshold {
				w += f.preds[cands[k].pred].weight()
				k++
			}
			need = cands[k:]
		}
	}
	if len(need) == 0 {
		e.postings = []posting{{kind: postAlways, implied: -1}}
		return
	}
	for _, c := range need {
		e.postings = append(e.postings, c.posts...)
	}
	if len(e.postings) > maxPostings {
		e.postings = e.postings[:0]
		for _, c := range need {
			e.postings = append(e.postings, posting{kind: postPresent, key: e.keys[c.pred], implied: -1})
		}
	}
	e.multi = len(need) > 1
	if f.mode == ModeAll {
		var vs [sigWords]uint64
		for i := range f.preds {
			p := &f.preds[i]
			if p.Operand.Source == SourceAttr && p.Op != OpNotExists && p.Op != OpTrue {
				e.sig |= 1 << (e.keys[i] & 63)
				if p.Op == OpEQ {
					vs[sigWord(e.keys[i])] |= valueBit(e.keys[i], p.Value)
				}
			}
		}
		for w := range vs {
			if bits.OnesCount64(vs[w]) > bits.OnesCount64(e.vsig) {
				e.vsig, e.vword = vs[w], uint8(w)
			}
		}
	}
}

// densePresent returns how many predicates of the filters in group g's
// dense engines test key: they count toward the key's popularity as the
// filters in postings do. mu must be held.
func (x *Index) densePresent(g int, key uint32) int32 {
	gr := x.inst[0].groups[g]
	if gr == nil {
		return 0
	}
	n := 0
	for _, dn := range gr.dense {
		if dn != nil {
			if a, ok := dn.keyAttr[key]; ok {
				n += dn.npre[a]
			}
		}
	}
	return int32(n)
}

// anyMask returns the value signature bits of the members of one set
// membership predicate on an attribute of match-all filter e, other than
// the one posting j implies, and their word: an event matches e only if
// its signature has one of them. Of several, it takes the smallest set;
// with none, it returns 0.
func anyMask(e *entry, j int) (uint64, uint8) {
	if e.mode != ModeAll {
		return 0, 0
	}
	var best uint64
	var word uint8
	for i := range e.preds {
		p := &e.preds[i]
		if p.Op != OpIn || p.Operand.Source != SourceAttr || int32(i) == e.postings[j].implied {
			continue
		}
		var m uint64
		for _, v := range p.Set {
			m |= valueBit(e.keys[i], v)
		}
		if best == 0 || bits.OnesCount64(m) < bits.OnesCount64(best) {
			best, word = m, sigWord(e.keys[i])
		}
	}
	return best, word
}

func allTrue(f *Filter) bool {
	for i := range f.preds {
		if f.preds[i].Op != OpTrue {
			return false
		}
	}
	return true
}

// popKey counts, per group and operand, the predicates of all filters
// (chosen as access or not): how many test the operand at all, how many
// test it for equality, and how many for each value. The counts
// estimate how often an event reaches a posting, and unlike list lengths
// they do not shrink when filters avoid a popular value.
type popKey struct {
	group int
	key   uint32
	kind  postingKind // postPresent, postEq (vk) or popEqAll
	vk    ontology.ValueKey
}

const popEqAll postingKind = 255

// count adds delta to the popularity counts of e's predicates. mu must be held.
func (x *Index) count(e *entry, delta int32) {
	add := func(k popKey) {
		if n := x.pop[k] + delta; n != 0 {
			x.pop[k] = n
		} else {
			delete(x.pop, k)
		}
	}
	for i := range e.f.preds {
		p := &e.f.preds[i]
		key := e.keys[i]
		if key == noKey {
			continue
		}
		add(popKey{group: e.group, key: key, kind: postPresent})
		switch {
		case p.Operand.Source == SourceXPath:
		case p.Op == OpEQ:
			add(popKey{group: e.group, key: key, kind: popEqAll})
			add(popKey{group: e.group, key: key, kind: postEq, vk: p.Value.Key()})
		case p.Op == OpIn:
			for _, m := range p.Set {
				add(popKey{group: e.group, key: key, kind: popEqAll})
				add(popKey{group: e.group, key: key, kind: postEq, vk: m.Key()})
			}
		}
	}
}

// accessFor returns the cheapest way to reach filters of group g through
// predicate i (p), with key key. The cost estimates how many filters the
// posting's list will hand to verification per event: presence of the
// operand costs the number of predicates on it; a value costs that number
// times the value's share among the equalities on the operand; an affix a
// quarter of presence.
func (x *Index) accessFor(g int, key uint32, i int, p *Predicate) candidate {
	present := float64(x.pop[popKey{group: g, key: key, kind: postPresent}] + x.densePresent(g, key))
	eqAll := float64(max(1, x.pop[popKey{group: g, key: key, kind: popEqAll}]))
	eq := func(vk ontology.ValueKey) float64 {
		return 1 + present*float64(x.pop[popKey{group: g, key: key, kind: postEq, vk: vk}])/eqAll
	}
	pres := candidate{pred: i, cost: 1 + present, posts: []posting{{kind: postPresent, key: key, implied: -1}}}
	if p.Operand.Source == SourceXPath {
		// The XPath key's value is whether the predicate holds.
		return candidate{pred: i, cost: 1 + present/2, posts: []posting{{kind: postEq, key: key, implied: int32(i), vk: ontology.Bool(true).Key()}}}
	}
	switch p.Op {
	case OpEQ:
		vk := p.Value.Key()
		return candidate{pred: i, cost: eq(vk), posts: []posting{{kind: postEq, key: key, implied: int32(i), vk: vk}}}
	case OpIn:
		c := candidate{pred: i}
		seen := map[ontology.ValueKey]bool{}
		for _, m := range p.Set {
			vk := m.Key()
			if seen[vk] {
				continue
			}
			seen[vk] = true
			c.cost += eq(vk)
			c.posts = append(c.posts, posting{kind: postEq, key: key, implied: int32(i), vk: vk})
		}
		if pres.cost < c.cost {
			return pres
		}
		return c
	case OpPrefix, OpSuffix:
		s := p.Value.Str()
		if len(s) > maxAffixScan {
			return pres
		}
		kind := postPrefix
		if p.Op == OpSuffix {
			kind = postSuffix
		}
		return candidate{pred: i, cost: 1 + present/4, posts: []posting{{kind: kind, key: key, implied: int32(i), s: s}}}
	}
	return pres
}

// An event's value signature has sigWords words; the values of attribute
// key k set bits in word sigWord(k) only, so that a set membership
// predicate's members fall in one word (see anyMask).
const sigWords = 4

func sigWord(k uint32) uint8 { return uint8(uint64(k) * 0x9e3779b97f4a7c15 >> 62) }

// valueBit returns the signature bit, within word sigWord(k), of
// "attribute key k equals v": equal values (ontology.Equal: 0, 0.0 and
// -0.0 alike) give the same bit.
func valueBit(k uint32, v ontology.Value) uint64 {
	var h uint64
	switch v.Kind() {
	case ontology.KindString:
		h = maphash.String(sigSeed, v.Str())
	case ontology.KindInt, ontology.KindTime:
		h = uint64(v.Int())
	case ontology.KindFloat:
		f := v.Float()
		if f >= -0x1p63 && f < 0x1p63 && f == math.Trunc(f) {
			h = uint64(int64(f)) // as the int of the same value
		} else {
			h = math.Float64bits(f)
		}
	case ontology.KindBool:
		if v.Bool() {
			h = 1
		}
	}
	h ^= uint64(k) * 0x9e3779b97f4a7c15
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	return 1 << (h & 63)
}

var sigSeed = maphash.MakeSeed()

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
		l := d.list(g, p, true)
		pos[j] = int32(len(l.ents))
		l.ents = append(l.ents, e)
		l.sig = append(l.sig, e.sig)
		l.vsig = append(l.vsig, e.vsig)
		am, aw := anyMask(e, j)
		l.any = append(l.any, am)
		l.sw = append(l.sw, e.vword|aw<<2)
		l.post = append(l.post, uint16(j))
		l.items = append(l.items, makeItem(e, j))
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
		l := d.list(g, p, false)
		i := pos[j]
		last := int32(len(l.ents) - 1)
		if i != last {
			m, q := l.ents[last], l.post[last]
			l.ents[i], l.post[i], l.sig[i], l.vsig[i], l.items[i] = m, q, l.sig[last], l.vsig[last], l.items[last]
			l.any[i], l.sw[i] = l.any[last], l.sw[last]
			d.pos[m.slot][q] = i
		}
		l.ents[last] = nil
		l.ents, l.post, l.sig, l.vsig, l.items = l.ents[:last], l.post[:last], l.sig[:last], l.vsig[:last], l.items[:last]
		l.any, l.sw = l.any[:last], l.sw[:last]
		d.dropPosting(g, p, last == 0)
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

// list returns the list posting p lives in, creating it when create is set.
func (d *data) list(g *group, p posting, create bool) *plist {
	switch p.kind {
	case postDirect:
		return &g.direct
	case postAlways:
		return &g.always
	}
	kp := g.byKey[p.key]
	if kp == nil {
		kp = &keyPostings{key: p.key}
		g.byKey[p.key] = kp
		if d.keys[p.key].name.src == SourceAttr {
			g.attrs = append(g.attrs, kp)
		} else {
			g.pay = append(g.pay, kp)
		}
	}
	if create {
		kp.n++
	}
	switch p.kind {
	case postPresent:
		return &kp.present
	case postEq:
		if kp.eq == nil {
			kp.eq = map[ontology.ValueKey]*plist{}
		}
		l := kp.eq[p.vk]
		if l == nil {
			l = &plist{}
			kp.eq[p.vk] = l
		}
		return l
	default:
		m, lens := &kp.prefix, &kp.prefixLens
		if p.kind == postSuffix {
			m, lens = &kp.suffix, &kp.suffixLens
		}
		if *m == nil {
			*m = map[string]*plist{}
		}
		l := (*m)[p.s]
		if l == nil {
			l = &plist{}
			(*m)[p.s] = l
			*lens = addLen(*lens, len(p.s))
		}
		return l
	}
}

// dropPosting accounts for the removal of posting p from its list: it
// deletes the list when it is now empty, and the key's postings when the
// key has none left.
func (d *data) dropPosting(g *group, p posting, empty bool) {
	if p.kind == postDirect || p.kind == postAlways {
		return
	}
	kp := g.byKey[p.key]
	if empty {
		switch p.kind {
		case postEq:
			delete(kp.eq, p.vk)
		case postPrefix:
			delete(kp.prefix, p.s)
			kp.prefixLens = dropLen(kp.prefixLens, len(p.s))
		case postSuffix:
			delete(kp.suffix, p.s)
			kp.suffixLens = dropLen(kp.suffixLens, len(p.s))
		}
	}
	if kp.n--; kp.n > 0 {
		return
	}
	delete(g.byKey, p.key)
	g.attrs = dropKP(g.attrs, kp)
	g.pay = dropKP(g.pay, kp)
}

func dropKP(s []*keyPostings, kp *keyPostings) []*keyPostings {
	for i, k := range s {
		if k == kp {
			s[i] = s[len(s)-1]
			s[len(s)-1] = nil
			return s[:len(s)-1]
		}
	}
	return s
}

func addLen(ls []lenCount, n int) []lenCount {
	i := sort.Search(len(ls), func(i int) bool { return ls[i].n >= n })
	if i < len(ls) && ls[i].n == n {
		ls[i].count++
		return ls
	}
	ls = append(ls, lenCount{})
	copy(ls[i+1:], ls[i:])
	ls[i] = lenCount{n, 1}
	return ls
}

func dropLen(ls []lenCount, n int) []lenCount {
	i := sort.Search(len(ls), func(i int) bool { return ls[i].n >= n })
	if ls[i].count--; ls[i].count == 0 {
		ls = append(ls[:i], ls[i+1:]...)
	}
	return ls
}

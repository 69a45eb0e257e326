package filter

import (
	"math"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/sion-go/sion/ontology"
)

// dense is the interval engine of one group: for filters whose predicates
// are all numeric comparisons and ranges on attributes, it finds the
// filters an event fails rather than the ones it satisfies, with bitsets
// pre-marked per attribute (after REIN, INFOCOM 2014, and HEM, DASFAA
// 2022).
//
// Per attribute, each side (lower bounds, upper bounds) has up to maxMarks
// checkpoint boundaries, laid out at the quantiles of its bounds, and a
// bitset per boundary b: on the lower side the filters whose lower bound
// is ≥ b, on the upper side those whose upper bound is ≤ b. An event value
// v fails every filter of the lower bitset of the first boundary above v
// and of the upper bitset of the last boundary below v: two ORs per
// attribute mark most of the filters the event fails, and the few left
// unmarked are verified exactly against their records. A missing or
// non-numeric value marks every filter with a predicate on the attribute.
// Marks are only ever sound — a marked filter fails — so a filter whose
// bounds are not in the bitsets yet is simply verified.
//
// A filter is kept as a record of a few bytes per predicate (see
// encode), not as a *Filter: at W-INT (ten ranges over twenty attributes)
// that is about 80 bytes, plus one bit per checkpoint bitset it could be
// in, its ID and its record's place.
//
// Slot arrays and bitsets are split into chunks (see chunkOf), so that
// a growing engine adds chunks and copies at most its short last chunk;
// records go into blocks of blockBytes.
//
// Concurrency: an engine is shared by both copies of the Index and
// updated in place, once, by the writer (Index.mu held). Readers load the
// current generation (dgen) and its slot count once per Match. The writer
// writes a new slot's record and live bit before it publishes the count,
// clears a removed filter's live bit atomically (readers load live words
// atomically) and then sets holes (until then readers skip the live
// bitset: every slot below n is live), and ORs bits into the other
// bitsets atomically, only ever
// into the word of the last slot it has published: the words before it
// were complete before the count a reader loaded, so readers load them
// plainly and only their last word atomically (see orBits). Slots are appended and
// never reused within a generation; a new chunk, block or attribute makes
// a new generation that shares the old one's chunks. When dead slots make
// up half of the engine, or its live filters have grown relayout times
// since the layout and the boundaries no longer fit their bounds (see
// balanced), it lays out a new generation with fresh boundaries and
// only the live filters (the Index then learns their new slots). Readers
// still on an older generation finish on it; the garbage collector
// reclaims it.
//
// Cost per event and attribute: two binary searches over the boundaries,
// and at most two ORs of n/64 words (n slots), fewer once the failed set
// fills up; then the verification of the filters left, on W-INT about as
// many as match. Add appends a record and, every pendMax slots, merges
// the new bounds into the bitsets a word (64 slots) at a time.
type dense struct {
	counting bool
	cur      atomic.Pointer[dgen]

	// The writer's state, under Index.mu.
	keyAttr map[uint32]uint8 // attribute key → attribute index in cur
	npre    []int            // by attribute index: live predicates on it
	keyPre  []int32          // by attribute key: npre (see Index.densePresent)
	nb      [][2]int         // by attribute index: live lower and upper bounds on it
	live    int              // live filters
	dead    int              // removed filters still occupying slots
	merged  uint32           // slots whose bounds are in the bitsets
	// acc gathers the bounds of the slots from merged on, all in one word
	// of slots, before flush ORs them into the bitsets: by attribute, a
	// row of the lower regions, the upper regions, the attribute's slots
	// and, in counting engines, the weight bits; touched marks the rows
	// in use.
	acc     []uint64
	touched uint64
	built   int    // live filters at the last layout
	unlaid  int    // predicates added since the layout on attributes it gave no boundaries
	layouts int    // how many times the engine was laid out
	recPos  int    // bytes in use in cur's last record block
	enc     []byte // record scratch
	sum     uint64 // what touch read: kept, so that its loads stay
}

// dgen is one generation of an engine: chunked arrays that the writer
// appends to, and their published length n.
type dgen struct {
	n       atomic.Uint32 // slots published
	merged  atomic.Uint32 // slots whose bounds are all in the bitsets
	maxFail atomic.Int32  // counting engines: the largest allowedFail of a slot
	holes   atomic.Bool   // a filter has been removed: live has slots below n clear
	slots   int           // capacity
	ids     [][]uint64    // by slot: the filter's ID
	off     [][]uint32    // by slot: its record's block (high bits) and place in it
	allowed [][]int16     // by slot, counting engines: allowedFail
	recs    [][]byte      // record blocks
	live    bitset        // slots holding a filter
	attrs   []*dattr      // by attribute index
}

// bitset is a chunked bitset of slots, laid out as the slot arrays (see
// chunkOf), a word for 64 slots. Its words are read and written
// atomically.
type bitset [][]uint64

func (b bitset) word(s uint32) *uint64 {
	c, i := chunkOf(s)
	return &b[c][i>>6]
}

// Slot arrays and bitsets are split into chunks of 2^chunkShift slots.
// Only an engine's last chunk may be short (a layout makes room for its
// live filters only); a growing engine lengthens it, a copy of at most
// one chunk, or adds the next one. The first chunk doubles while it is
// short (each slot's bits are copied about once).
//
// Large chunks hold 64 KB of each bitset: smaller ones made the ORs of
// match slower (8 KB chunks, 2^16 slots, for the whole engine: 0.54 ms
// per W-INT event at 10⁶ filters, against 0.40 ms for 128 KB, same
// session). Smaller chunks only below 2^chunkShift slots (2^16, 2^16,
// 2^17, 2^18, so that growth there copied less) cost W-INT at 10⁵
// filters 1.12× the CPU per event of one chunk (medians of 8
// alternated runs, 2026-12-02): an OR over two chunks, the second
// short, is slower than over one.
// Variables so that tests can span several chunks with few filters
// (setChunkShift).
var (
	chunkShift uint32 = maxChunkShift
	chunkSlots        = 1 << chunkShift
)

const maxChunkShift = 19 // chunkShift's default; tests only lower it

// chunkOf returns the chunk of slot s and s's place in it.
func chunkOf(s uint32) (c int, i uint32) {
	return int(s >> chunkShift), s & uint32(chunkSlots-1)
}

// chunkStart returns the first slot of chunk c.
func chunkStart(c int) int { return c << chunkShift }

// chunkEnd returns the smallest chunk end at or past slots.
func chunkEnd(slots int) int {
	c, _ := chunkOf(uint32(slots - 1))
	return chunkStart(c + 1)
}

const (
	blockShift = 20
	blockBytes = 1 << blockShift
	maxBlocks  = 1 << (32 - blockShift)
)

func chunkAt[T any](c [][]T, s uint32) *T {
	k, i := chunkOf(s)
	return &c[k][i]
}

// growChunks returns c, chunks of a slot array (shift 0) or of a bitset
// (shift 6: a word per 64 slots), with room for slots slots, a multiple
// of 64. Only the last chunk may be short (slots ends in it); it is
// copied into a longer one, every other chunk of c is kept and new ones
// are added. The old chunks stay with readers of older generations.
func growChunks[T any](c [][]T, slots int, shift uint32) [][]T {
	have := 0
	if len(c) > 0 {
		have = chunkStart(len(c)-1) + len(c[len(c)-1])<<shift
	}
	if have >= slots {
		return c
	}
	last, _ := chunkOf(uint32(slots - 1))
	nc := make([][]T, len(c), last+1)
	copy(nc, c)
	if k := len(nc) - 1; k >= 0 && have < chunkStart(k+1) {
		ch := populated(make([]T, (min(slots, chunkStart(k+1))-chunkStart(k))>>shift))
		copy(ch, nc[k])
		nc[k] = ch
	}
	for k := len(nc); k <= last; k++ {
		nc = append(nc, populated(make([]T, (min(slots, chunkStart(k+1))-chunkStart(k))>>shift)))
	}
	return nc
}

// dattr is what an engine keeps per attribute.
type dattr struct {
	key  uint32
	has  bitset // slots with a predicate on the attribute
	pres atomic.Int32
	// wb[b] holds the slots whose predicate on the attribute has bit b
	// set in its weight (counting engines).
	wb [weightBits]bitset
	lo dside // lower bounds: fail when above the value
	hi dside // upper bounds: fail when below the value
}

// dside is one side of an attribute: the checkpoint boundaries, strictly
// increasing, and a bitset per boundary with how many bits it had when
// they were last counted, at the layout or when balanced looked (what
// match orders the bitsets by; filters added since are not counted).
type dside struct {
	bounds []float64
	marks  []bitset
	held   []atomic.Int32
	// The writer's: the spread of the side's bounds over its regions at
	// the layout, and whether the layout's sample was too small for
	// maxMarks boundaries (see balanced).
	spread float64
	room   bool
}

// The engine's layout: maxMarks checkpoint boundaries per side, and the
// most slots a writer leaves out of the bitsets (pendMax, fewer in small
// engines); variables so that tests can exercise them with few filters.
var (
	maxMarks = 16
	// countMarks is maxMarks for counting engines: their gaps between
	// boundaries are where counts are unsure and filters must be verified
	// (see count), so they take more.
	countMarks = 64
	pendMax    = 64
	purgeMin   = 64 // the fewest dead slots that make an engine lay out anew
	// relayout: when an engine's live filters have grown this many times
	// since its layout, it looks whether its boundaries still fit their
	// bounds (see balanced), and lays out anew if not.
	relayout = 4
	// unlaidMin is the fewest predicates on attributes without boundaries
	// that make an engine lay out anew (and at least an eighth of its
	// filters).
	unlaidMin = 256
)

const (
	weightBits    = 4   // counting engines take integral weights 1…15
	countPlanes   = 11  // counters up to 2047: 127 predicates of weight 15
	denseMinGroup = 32  // eligible filters a group gathers before it gets an engine
	denseMaxAttrs = 64  // attributes one engine serves
	denseMaxPreds = 127 // predicates of one filter
)

// Dense engine kinds: noDense, or the index into group.dense.
const (
	noDense    = -1
	denseAll   = 0 // match all
	denseCount = 1 // match atleast and match score with small integral weights
)

// denseKind returns the dense engine f can live in: every predicate must
// be a comparison or range on an attribute whose bounds a float64 holds
// exactly; counting engines also need each attribute tested once and
// weights that are integers from 1 to 15.
func denseKind(f *Filter) int {
	if len(f.preds) == 0 || len(f.preds) > denseMaxPreds || !denseEligible(f) {
		return noDense
	}
	if f.mode == ModeAll {
		return denseAll
	}
	seen := map[string]bool{}
	for i := range f.preds {
		p := &f.preds[i]
		if w := p.weight(); w != math.Trunc(w) || w < 1 || w >= 1<<weightBits || seen[p.Operand.Name] {
			return noDense
		}
		seen[p.Operand.Name] = true
	}
	return denseCount
}

// denseEligible reports whether every predicate of f is a comparison or
// range on an attribute whose bounds a float64 holds exactly.
func denseEligible(f *Filter) bool {
	for i := range f.preds {
		p := &f.preds[i]
		if p.Operand.Source != SourceAttr {
			return false
		}
		switch p.Op {
		case OpLT, OpLE, OpGT, OpGE:
			if !exactFloat(p.Value) {
				return false
			}
		case OpRange:
			if !exactFloat(p.Value) || !exactFloat(p.Hi) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// exactFloat reports whether v is a number that a float64 holds exactly.
func exactFloat(v ontology.Value) bool {
	switch v.Kind() {
	case ontology.KindFloat:
		return true
	case ontology.KindInt:
		i := v.Int()
		f := float64(i)
		return f < 0x1p63 && int64(f) == i // 2^63 itself is past int64
	}
	return false
}

// bound returns predicate p's bound on side upper, whether it has one, and
// whether that end is exclusive.
func bound(p *Predicate, upper bool) (b float64, ok, open bool) {
	if upper {
		switch p.Op {
		case OpLT, OpLE:
			return p.Value.Float(), true, p.Op == OpLT
		case OpRange:
			return p.Hi.Float(), true, p.HiOpen
		}
		return 0, false, false
	}
	switch p.Op {
	case OpGT, OpGE:
		return p.Value.Float(), true, p.Op == OpGT
	case OpRange:
		return p.Value.Float(), true, p.LoOpen
	}
	return 0, false, false
}

// asFloat returns v as a float64 when a float64 holds it exactly.
func asFloat(v ontology.Value) (float64, bool) {
	if v.Kind() == ontology.KindFloat {
		return v.Float(), true
	}
	if i := v.Int(); i >= -1<<53 && i <= 1<<53 {
		return float64(i), true
	}
	return 0, false
}

// cmpBound compares bound b with the numeric value v exactly.
func cmpBound(b float64, v ontology.Value) int {
	if v.Kind() == ontology.KindFloat {
		f := v.Float()
		switch {
		case b < f:
			return -1
		case b > f:
			return 1
		}
		return 0
	}
	i := v.Int()
	if i >= -1<<53 && i <= 1<<53 {
		f := float64(i)
		switch {
		case b < f:
			return -1
		case b > f:
			return 1
		}
		return 0
	}
	c, _ := ontology.Compare(ontology.Float(b), v)
	return c
}

// allowedFail returns the failed weight up to which filter f still
// matches, or -1.
func allowedFail(f *Filter) int {
	if f.mode == ModeAtLeast {
		return len(f.preds) - f.atLeast
	}
	w := 0.0
	for i := range f.preds {
		w += f.preds[i].weight()
	}
	return int(math.Floor(w - f.threshold))
}

func newDense(counting bool) *dense {
	dn := &dense{counting: counting, keyAttr: map[uint32]uint8{}}
	dn.cur.Store(&dgen{})
	return dn
}

// attrCount returns the number of distinct keys in keys.
func attrCount(keys []uint32) int {
	n := 0
	for i, k := range keys {
		if !slices.Contains(keys[:i], k) {
			n++
		}
	}
	return n
}

// fits reports whether a filter with attribute keys keys can join the
// engine without passing its attribute cap or the size of its record
// store.
func (dn *dense) fits(keys []uint32) bool {
	extra := 0
	for i, k := range keys {
		if _, ok := dn.keyAttr[k]; !ok && !slices.Contains(keys[:i], k) {
			extra++
		}
	}
	g := dn.cur.Load()
	return len(g.attrs)+extra <= denseMaxAttrs && len(g.recs) < maxBlocks-1
}

// marks returns the most checkpoint boundaries per side of the engine.
func (dn *dense) marks() int {
	if dn.counting {
		return countMarks
	}
	return maxMarks
}

// empty reports whether the engine holds no live filter.
func (dn *dense) empty() bool { return dn.live == 0 }

// add appends filter f (ID id, attribute keys keys) and returns its slot.
// moved is called with the new slot of every filter that a new layout
// moves. Writer only.
func (dn *dense) add(id uint64, f *Filter, keys []uint32, moved func(id uint64, slot uint32)) uint32 {
	g := dn.cur.Load()
	n := g.n.Load()
	if dn.unlaid >= max(unlaidMin, dn.live/8) {
		// Bounds on attributes without boundaries mark nothing: lay out
		// before they make match verify every filter that has them.
		g = dn.layout(g, dn.live+1, moved)
		n = g.n.Load()
	} else if int(n) == g.slots {
		if dn.dead >= max(purgeMin, dn.live) || dn.live+1 >= relayout*dn.built && !dn.balanced(g) {
			g = dn.layout(g, dn.live+1, moved)
		} else {
			g = dn.grow(g, 0)
		}
		n = g.n.Load()
	}
	if n>>6 != dn.merged>>6 {
		dn.flush(g, dn.merged, false) // the accumulator holds one word of slots
		dn.merged = n
		g.merged.Store(n)
	}
	var idx [denseMaxPreds]uint8
	for i, k := range keys {
		a, ok := dn.keyAttr[k]
		if !ok {
			g = dn.addAttr(g, k)
			a = dn.keyAttr[k]
		}
		idx[i] = a
		if at := g.attrs[a]; len(at.lo.bounds)+len(at.hi.bounds) == 0 {
			dn.unlaid++
		}
	}
	// The record goes straight into the last block, which has room for
	// the longest it can be; the predicates' bounds go into acc on the
	// way (acc is the writer's: they may go in before the slot is
	// published).
	if need := dn.recMax(len(f.preds)); len(g.recs) == 0 || dn.recPos+need > len(g.recs[len(g.recs)-1]) {
		g = dn.grow(g, need)
	}
	blk := g.recs[len(g.recs)-1]
	rec := dn.encodeHead(blk[dn.recPos:dn.recPos], f)
	for i := range f.preds {
		p := &f.preds[i]
		lo, hasLo, loOpen := bound(p, false)
		hi, hasHi, hiOpen := bound(p, true)
		w := int(p.weight())
		rec = appendPred(rec, idx[i], w, dn.counting, recPred{hasLo: hasLo, hasHi: hasHi, loOpen: loOpen, hiOpen: hiOpen, lo: lo, hi: hi})
		dn.accumulate(g, idx[i], n, hasLo, lo, hasHi, hi, w)
	}
	*chunkAt(g.ids, n) = id
	*chunkAt(g.off, n) = uint32(len(g.recs)-1)<<blockShift | uint32(dn.recPos)
	dn.recPos += len(rec)
	if dn.counting {
		af := int32(max(-1, min(allowedFail(f), 1<<countPlanes-1)))
		*chunkAt(g.allowed, n) = int16(af)
		if af > g.maxFail.Load() {
			g.maxFail.Store(af)
		}
	}
	atomic.OrUint64(g.live.word(n), 1<<(n&63))
	for i, a := range idx[:len(keys)] {
		dn.npre[a]++
		k := keys[i]
		for int(k) >= len(dn.keyPre) {
			dn.keyPre = append(dn.keyPre, 0)
		}
		dn.keyPre[k]++
	}
	dn.live++
	g.n.Store(n + 1)
	if int(n+1-dn.merged) >= min(pendMax, max(1, dn.live>>12)) || (n+1)&63 == 0 {
		dn.flush(g, n, false)
		dn.merged = n + 1
		g.merged.Store(n + 1)
	}
	return n
}

// successor returns a new generation that shares everything of g; the
// caller changes what it needs and publishes it.
func successor(g *dgen) *dgen {
	ng := &dgen{slots: g.slots, ids: g.ids, off: g.off, allowed: g.allowed, recs: g.recs, live: g.live, attrs: g.attrs}
	ng.n.Store(g.n.Load())
	ng.merged.Store(g.merged.Load())
	ng.maxFail.Store(g.maxFail.Load())
	ng.holes.Store(g.holes.Load())
	return ng
}

// addAttr gives attribute key k an index in a new generation.
func (dn *dense) addAttr(g *dgen, k uint32) *dgen {
	a := &dattr{key: k}
	a.has = growChunks[uint64](nil, g.slots, 6)
	if dn.counting {
		for b := range a.wb {
			a.wb[b] = growChunks[uint64](nil, g.slots, 6)
		}
	}
	dn.keyAttr[k] = uint8(len(g.attrs))
	dn.npre = append(dn.npre, 0)
	dn.nb = append(dn.nb, [2]int{})
	ng := successor(g)
	ng.attrs = append(g.attrs[:len(g.attrs):len(g.attrs)], a)
	dn.cur.Store(ng)
	return ng
}

// grow returns a new generation with room for one more slot, or, with
// recBytes > 0, for a record of recBytes more bytes, keeping the layout.
func (dn *dense) grow(g *dgen, recBytes int) *dgen {
	ng := successor(g)
	if recBytes > 0 {
		last := len(g.recs) - 1
		switch {
		case last < 0:
			// recBytes is the most a record can take (about three W-INT
			// records): room for about 48 records of W-INT.
			ng.recs = [][]byte{make([]byte, 16*recBytes)}
		case last == 0 && dn.recPos+recBytes <= blockBytes && len(g.recs[0]) < blockBytes:
			// A short first block doubles, unless the record would not
			// fit in a whole one: then it stays, and a new block follows.
			b := populated(make([]byte, min(blockBytes, max(2*len(g.recs[0]), dn.recPos+recBytes))))
			copy(b, g.recs[0][:dn.recPos])
			ng.recs = [][]byte{b}
		default:
			ng.recs = append(g.recs[:len(g.recs):len(g.recs)], populated(make([]byte, blockBytes)))
			dn.recPos = 0
		}
		dn.cur.Store(ng)
		return ng
	}
	// The end of the last chunk (lengthened, a copy) or of the next one;
	// a short first chunk doubles (each slot's bits are copied about once,
	// and at most half of it is unused).
	slots := chunkEnd(g.slots + 1)
	if g.slots < chunkSlots {
		slots = min(chunkSlots, max(64, 2*g.slots))
	}
	dn.resize(g, ng, slots)
	dn.cur.Store(ng)
	return ng
}

// resize gives ng, a successor of g, room for slots slots, sharing g's
// chunks where they are whole.
func (dn *dense) resize(g, ng *dgen, slots int) {
	ng.slots = slots
	ng.ids = growChunks(g.ids, slots, 0)
	ng.off = growChunks(g.off, slots, 0)
	if dn.counting {
		ng.allowed = growChunks(g.allowed, slots, 0)
	}
	ng.live = growChunks(g.live, slots, 6)
	ng.attrs = make([]*dattr, len(g.attrs))
	for i, a := range g.attrs {
		na := &dattr{key: a.key, has: growChunks(a.has, slots, 6)}
		na.pres.Store(a.pres.Load())
		if dn.counting {
			for b := range a.wb {
				na.wb[b] = growChunks(a.wb[b], slots, 6)
			}
		}
		for _, s := range [2][2]*dside{{&na.lo, &a.lo}, {&na.hi, &a.hi}} {
			to, from := s[0], s[1]
			to.bounds, to.spread, to.room = from.bounds, from.spread, from.room
			to.marks = make([]bitset, len(from.marks))
			to.held = make([]atomic.Int32, len(from.marks))
			for c := range from.marks {
				to.marks[c] = growChunks(from.marks[c], slots, 6)
				to.held[c].Store(from.held[c].Load())
			}
		}
		ng.attrs[i] = na
	}
}

// remove takes the filter at slot s out. It returns the attribute keys of
// its predicates (into keys), for the Index to release. moved is called
// as for add when the engine lays out anew.
func (dn *dense) remove(s uint32, keys []uint32, moved func(id uint64, slot uint32)) []uint32 {
	g := dn.cur.Load()
	for r := dn.record(g, s); r.next(); {
		keys = append(keys, g.attrs[r.attr].key)
		dn.npre[r.attr]--
		dn.keyPre[g.attrs[r.attr].key]--
		if r.hasLo {
			dn.nb[r.attr][0]--
		}
		if r.hasHi {
			dn.nb[r.attr][1]--
		}
	}
	atomic.AndUint64(g.live.word(s), ^(1 << (s & 63)))
	g.holes.Store(true)
	dn.live--
	dn.dead++
	if dn.live > 0 && dn.dead >= max(purgeMin, dn.live) {
		dn.layout(g, dn.live, moved)
	}
	return keys
}

// merge puts the bounds of every slot of g into the bitsets, reading
// them from the records; g is not published yet (layout).
func (dn *dense) merge(g *dgen) {
	n := g.n.Load()
	dn.merged, dn.touched = 0, 0
	clear(dn.acc)
	dn.nb = make([][2]int, len(g.attrs)) // counted again below
	for s := range n {
		if s&63 == 0 && s > 0 {
			dn.flush(g, s-1, true)
		}
		if atomic.LoadUint64(g.live.word(s))&(1<<(s&63)) == 0 {
			continue
		}
		for r := dn.record(g, s); r.next(); {
			dn.accumulate(g, r.attr, s, r.hasLo, r.lo, r.hasHi, r.hi, r.weight)
		}
	}
	if n > 0 {
		dn.flush(g, n-1, true)
	}
	for _, a := range g.attrs {
		a.lo.spread, a.hi.spread = dn.recount(g, a)
	}
	dn.merged = n
	g.merged.Store(n)
}

// accRow is the length of an attribute's row in acc.
func (dn *dense) accRow() int {
	if dn.counting {
		return 2*(dn.marks()+1) + 1 + weightBits
	}
	return 2*(dn.marks()+1) + 1
}

// accumulate enters a predicate on attribute index a of slot s into acc:
// the lower and upper regions its bounds fall in, the attribute, and its
// weight's bits; and counts its bounds in nb.
func (dn *dense) accumulate(g *dgen, a uint8, s uint32, hasLo bool, lo float64, hasHi bool, hi float64, weight int) {
	row := dn.accRow()
	if need := len(g.attrs) * row; len(dn.acc) < need {
		dn.acc = append(dn.acc, make([]uint64, need-len(dn.acc))...)
	}
	regions := dn.marks() + 1
	at := g.attrs[a]
	base := int(a) * row
	bit := uint64(1) << (s & 63)
	dn.touched |= 1 << a
	dn.acc[base+2*regions] |= bit
	if hasLo {
		dn.acc[base+countLE(at.lo.bounds, lo)] |= bit
		dn.nb[a][0]++
	}
	if hasHi {
		dn.acc[base+regions+countLT(at.hi.bounds, hi)] |= bit
		dn.nb[a][1]++
	}
	if dn.counting {
		for b := range weightBits {
			if weight>>b&1 != 0 {
				dn.acc[base+2*regions+1+b] |= bit
			}
		}
	}
}

// flush ORs what acc gathered, for the word of slot w, into the bitsets:
// per attribute and side, a sweep over the regions makes them cumulative
// and ORs each boundary's word once. With fresh set, g is a layout's
// generation that no reader has yet: flush ORs plainly, and merge counts
// the bits into held and pres, the order match ORs the bitsets in,
// afterwards; Adds leave those counts as the layout made them.
func (dn *dense) flush(g *dgen, w uint32, fresh bool) {
	regions := dn.marks() + 1
	row := dn.accRow()
	if !fresh {
		dn.touch(g, w)
	}
	for ai := 0; dn.touched != 0; ai, dn.touched = ai+1, dn.touched>>1 {
		if dn.touched&1 == 0 {
			continue
		}
		a := g.attrs[ai]
		acc := dn.acc[ai*row : (ai+1)*row]
		orWord(a.has.word(w), acc[2*regions], fresh)
		// Lower side: marks[c] holds bounds ≥ bounds[c], regions c+1 on.
		var run uint64
		for c := len(a.lo.marks) - 1; c >= 0; c-- {
			run |= acc[c+1]
			if run != 0 {
				orWord(a.lo.marks[c].word(w), run, fresh)
			}
		}
		// Upper side: marks[c] holds bounds ≤ bounds[c], regions 0…c.
		run = 0
		for c := range a.hi.marks {
			run |= acc[regions+c]
			if run != 0 {
				orWord(a.hi.marks[c].word(w), run, fresh)
			}
		}
		if dn.counting {
			for b := range weightBits {
				if m := acc[2*regions+1+b]; m != 0 {
					orWord(a.wb[b].word(w), m, fresh)
				}
			}
		}
		clear(acc)
	}
}

// orWord ORs m into the bitset word at p: atomically, unless the word is
// in a generation no reader has yet (fresh).
func orWord(p *uint64, m uint64, fresh bool) {
	if fresh {
		*p |= m
		return
	}
	atomic.OrUint64(p, m)
}

// touch loads the words of slot w's word that flush may OR into, before
// it does: plain loads of lines out of cache overlap one another, where
// each atomic OR would wait for its own (between two flushes of an
// engine of 10⁶ slots, an Add's other reads push those lines out). Only
// the writer stores to the words, so these reads race with no write.
func (dn *dense) touch(g *dgen, w uint32) {
	var sum uint64
	for ai, t := 0, dn.touched; t != 0; ai, t = ai+1, t>>1 {
		if t&1 == 0 {
			continue
		}
		a := g.attrs[ai]
		sum |= *a.has.word(w)
		for _, m := range a.lo.marks {
			sum |= *m.word(w)
		}
		for _, m := range a.hi.marks {
			sum |= *m.word(w)
		}
	}
	dn.sum = sum
}

func popcount(x uint64) int { return bits.OnesCount64(x) }

package filter

import (
	"cmp"
	"math"
	"math/bits"
	"slices"

	"github.com/sion-go/sion/ontology"
)

// dense is the interval engine of one group: for filters whose predicates
// are all numeric comparisons and ranges on attributes (ModeAll), it finds
// the filters an event fails rather than the ones it satisfies, with
// bitsets pre-marked per attribute (after REIN, INFOCOM 2014, and HEM,
// DASFAA 2022).
//
// Per attribute, each side (lower bounds, upper bounds) puts its bounds
// into cells split at the quantiles of those bounds, and keeps a checkpoint
// bitset every stride cells: on the lower side the filters with a bound in
// the cells at or above the checkpoint, on the upper side those with a
// bound in the cells below it. An event value v in cell j fails every lower
// bound in the cells above j: one bitset OR covers the cells from the next
// checkpoint on, one mark per bound the few cells before it, and comparing
// v with each bound of cell j finds the rest, exactly. The upper side
// mirrors it. A filter is matched when no attribute marks it; a missing or
// non-numeric value marks every filter with a predicate on the attribute.
//
// Cells are not sorted inside, so a new bound is appended to its cell.
// Removal is lazy: a removed filter leaves the live bitset at once, its
// bounds stay behind until dead slots make up half the engine, and then
// every cell drops them and the checkpoint bitsets are rebuilt (purge);
// only then are the slots reused.
//
// Matching does not mark the bounds between the event's value and the
// nearest checkpoint one at a time: it verifies, exactly, the filters the
// checkpoint bitsets leave unmarked (see match).
//
// Cost per event and attribute: at most two ORs of m/64 words (m filter
// slots in the engine), fewer once u fills up, plus the verification of
// the filters left: on W-INT about as many as match. Memory: 2·maxMarks
// bitsets of m bits per attribute, plus 13 bytes per bound.
type dense struct {
	// counting engines hold "match atleast" and "match score" filters: they
	// add up, per filter, the weight of the predicates an event fails
	// (bit-sliced counters, 64 filters a word) instead of marking a bit.
	counting bool
	maxFail  int     // the most failed weight any filter may have and still match
	allowed  []int16 // by engine slot: allowedFail of the entry (counting engines)
	n        int     // engine slots in use, holes included
	free     []uint32
	dead     []uint32 // slots of removed filters whose bounds are still in cells
	entries  []*entry // by engine slot
	live     []uint64
	attrs    map[uint32]*dattr
	list     []*dattr
}

type dattr struct {
	key  uint32
	npre int      // live filters with a predicate on the attribute
	has  []uint64 // engine slots with a predicate on the attribute
	// wb[b] holds the filters whose predicate on the attribute has bit b
	// set in its weight (counting engines).
	wb [weightBits][]uint64
	lo dside // lower bounds: fail when above the value
	hi dside // upper bounds: fail when below the value
}

// dside is one side of an attribute: cells of bounds and checkpoint bitsets.
type dside struct {
	bounds []float64 // cell boundaries, strictly increasing
	cells  []dcell   // len(bounds)+1
	marks  [][]uint64
	stride int // cells per checkpoint
	// pend holds the bounds placed in cells since the checkpoint bitsets
	// last took them in; fail marks them one by one. They join the
	// bitsets pendMax at a time, when slots placed together share words.
	pend  []pendBound
	n     int // bounds held
	built int // n when the cells were last laid out
	upper bool
}

// dcell holds the bounds that fall into one cell, in no order, each with
// the engine slot of its filter and the predicate index (bit 7 set for an
// exclusive end). Bounds are float64s that equal the predicates' bounds
// exactly (denseEligible), so cells compare exactly without reaching the
// filters.
type dcell struct {
	bound []float64
	slots []uint32
	pred  []uint8
}

const openEnd = 0x80

type pendBound struct {
	cell int32
	slot uint32
}

// The dense engine's layout; variables so that tests can make cells and
// checkpoints small enough to be exercised by a few thousand filters.
var (
	maxMarks      = 16   // checkpoint bitsets per side
	maxCells      = 4096 // cells per side
	boundsPerCell = 32   // target bounds per cell when laying out
)

const (
	weightBits    = 4   // counting engines take integral weights 1…15
	countPlanes   = 11  // counters up to 2047: 127 predicates of weight 15
	denseMinGroup = 32  // eligible filters a group gathers before it gets an engine
	denseMaxAttrs = 64  // attributes one engine serves
	denseMaxPreds = 127 // a cell entry keeps the predicate index in 7 bits
)

// purgeMin is the fewest dead slots an engine purges, and pendMax the most
// bounds a side keeps out of its checkpoint bitsets; variables so that
// tests can exercise both with few filters.
var (
	purgeMin = 64
	pendMax  = 64
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
		c, ok := ontology.Compare(v, ontology.Float(float64(v.Int())))
		return ok && c == 0
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

// upperIndex returns the first index of sorted s whose value is > f.
func upperIndex(s []float64, f float64) int {
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s[m] <= f {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
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

func newDense(counting bool) *dense {
	return &dense{attrs: map[uint32]*dattr{}, counting: counting}
}

// allowedFail returns the failed weight up to which e still matches, or -1.
func allowedFail(e *entry) int {
	if e.mode == ModeAtLeast {
		return len(e.preds) - e.atLeast
	}
	return int(math.Floor(e.weight - e.thresh))
}

// fits reports whether e can join the engine without passing its attribute cap.
func (dn *dense) fits(e *entry) bool {
	extra := 0
	for _, k := range e.keys {
		if dn.attrs[k] == nil {
			extra++
		}
	}
	return len(dn.list)+extra <= denseMaxAttrs
}

func setBit(b []uint64, i uint32) { b[i>>6] |= 1 << (i & 63) }

// clearBit clears bit i; bitsets may be shorter than the engine when no bit
// past their end was ever set.
func clearBit(b []uint64, i uint32) {
	if w := int(i >> 6); w < len(b) {
		b[w] &^= 1 << (i & 63)
	}
}

func grow(b []uint64, words int) []uint64 {
	if len(b) < words {
		b = append(b, make([]uint64, words-len(b))...)
	}
	return b
}

func (dn *dense) insert(e *entry) {
	var s uint32
	if k := len(dn.free); k > 0 {
		s = dn.free[k-1]
		dn.free = dn.free[:k-1]
	} else {
		s = uint32(dn.n)
		dn.n++
		dn.entries = append(dn.entries, nil)
		dn.allowed = append(dn.allowed, 0)
		if w := (dn.n + 63) >> 6; w > len(dn.live) {
			dn.live = grow(dn.live, w)
			for _, a := range dn.list {
				a.grow(w)
			}
		}
	}
	e.dslot = s
	dn.entries[s] = e
	for i := range e.f.preds {
		a := dn.attr(e.keys[i])
		a.npre++
		setBit(a.has, s)
		a.lo.place(&e.f.preds[i], s, i)
		a.hi.place(&e.f.preds[i], s, i)
		if dn.counting {
			w := int(e.f.preds[i].weight())
			for b := range weightBits {
				if w>>b&1 != 0 {
					setBit(a.wb[b], s)
				}
			}
		}
	}
	if dn.counting {
		af := max(-1, min(allowedFail(e), 1<<countPlanes-1))
		dn.allowed[s] = int16(af)
		dn.maxFail = max(dn.maxFail, af)
	}
	setBit(dn.live, s)
	for _, i := range e.keys {
		a := dn.attrs[i]
		for _, sd := range []*dside{&a.lo, &a.hi} {
			if sd.n >= 2*sd.built && sd.n >= 2*boundsPerCell {
				sd.layout(dn.live)
			}
		}
	}
}

func (dn *dense) attr(k uint32) *dattr {
	a := dn.attrs[k]
	if a == nil {
		a = &dattr{key: k, lo: dside{cells: make([]dcell, 1), stride: 1}, hi: dside{cells: make([]dcell, 1), stride: 1, upper: true}}
		dn.attrs[k] = a
		dn.list = append(dn.list, a)
		a.grow(len(dn.live))
	}
	return a
}

// grow makes the attribute's bitsets words long.
func (a *dattr) grow(words int) {
	a.has = grow(a.has, words)
	for b := range a.wb {
		a.wb[b] = grow(a.wb[b], words)
	}
	for _, sd := range []*dside{&a.lo, &a.hi} {
		for i := range sd.marks {
			sd.marks[i] = grow(sd.marks[i], words)
		}
	}
}

// cellOf returns the number of cell boundaries at or below v: cells are
// ordered, so a bound in a higher cell than v is above v, exactly.
func (sd *dside) cellOf(v ontology.Value) int {
	lo, hi := 0, len(sd.bounds)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if cmpBound(sd.bounds[m], v) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (sd *dside) cellOfBound(b float64) int {
	i, _ := slices.BinarySearch(sd.bounds, b)
	if i < len(sd.bounds) && sd.bounds[i] == b {
		i++
	}
	return i
}

// place enters predicate i (p) of the filter at engine slot s, when p has a
// bound on this side, into its cell and the checkpoint bitsets.
func (sd *dside) place(p *Predicate, s uint32, i int) {
	b, ok, open := bound(p, sd.upper)
	if !ok {
		return
	}
	c := sd.cellOfBound(b)
	cl := &sd.cells[c]
	cl.bound = append(cl.bound, b)
	cl.slots = append(cl.slots, s)
	cl.pred = append(cl.pred, predTag(i, open))
	sd.n++
	if len(sd.marks) == 0 {
		return
	}
	sd.pend = append(sd.pend, pendBound{int32(c), s})
	if len(sd.pend) < pendMax {
		return
	}
	sd.flush()
}

// flush sets the pending bounds in the checkpoint bitsets. The bitsets are
// cumulative, so it walks them in the order each takes in more cells,
// gathering the pending slots of those cells into a few word masks (slots
// placed together are close), and ORs the masks into each bitset.
func (sd *dside) flush() {
	pend := sd.pend
	slices.SortFunc(pend, func(a, b pendBound) int { return cmp.Compare(a.cell, b.cell) })
	var delta []wordMask
	add := func(s uint32) {
		w := int(s >> 6)
		for i := range delta {
			if delta[i].w == w {
				delta[i].m |= 1 << (s & 63)
				return
			}
		}
		delta = append(delta, wordMask{w, 1 << (s & 63)})
	}
	nm := len(sd.marks)
	if sd.upper {
		// marks[k-1] holds the cells below k·stride.
		i := 0
		for k := 1; k <= nm; k++ {
			for ; i < len(pend) && int(pend[i].cell) < k*sd.stride; i++ {
				add(pend[i].slot)
			}
			for _, d := range delta {
				sd.marks[k-1][d.w] |= d.m
			}
		}
	} else {
		// marks[k-1] holds the cells from k·stride on.
		i := len(pend) - 1
		for k := nm; k >= 1; k-- {
			for ; i >= 0 && int(pend[i].cell) >= k*sd.stride; i-- {
				add(pend[i].slot)
			}
			for _, d := range delta {
				sd.marks[k-1][d.w] |= d.m
			}
		}
	}
	sd.pend = pend[:0]
}

type wordMask struct {
	w int
	m uint64
}

func predTag(i int, open bool) uint8 {
	if open {
		return uint8(i) | openEnd
	}
	return uint8(i)
}

func (dn *dense) remove(e *entry) {
	s := e.dslot
	for i := range e.keys {
		a := dn.attrs[e.keys[i]]
		a.npre--
		clearBit(a.has, s)
		for b := range a.wb {
			clearBit(a.wb[b], s)
		}
	}
	clearBit(dn.live, s)
	dn.entries[s] = nil
	dn.dead = append(dn.dead, s)
	for i := 0; i < len(dn.list); i++ {
		if a := dn.list[i]; a.npre == 0 {
			// Every bound left on the attribute is dead.
			delete(dn.attrs, a.key)
			dn.list = slices.Delete(dn.list, i, i+1)
			i--
		}
	}
	if live := dn.n - len(dn.free) - len(dn.dead); len(dn.dead) >= purgeMin && len(dn.dead) >= live {
		dn.purge()
	}
}

// purge drops the bounds of dead slots from every cell, rebuilds the
// checkpoint bitsets, and frees the slots, in ascending order so that both
// copies of the index assign the same slots afterwards.
func (dn *dense) purge() {
	for _, a := range dn.list {
		for _, sd := range []*dside{&a.lo, &a.hi} {
			sd.n = 0
			for ci := range sd.cells {
				c := &sd.cells[ci]
				k := 0
				for j, s := range c.slots {
					if dn.live[s>>6]&(1<<(s&63)) != 0 {
						c.bound[k], c.slots[k], c.pred[k] = c.bound[j], s, c.pred[j]
						k++
					}
				}
				c.bound, c.slots, c.pred = c.bound[:k], c.slots[:k], c.pred[:k]
				sd.n += k
			}
			sd.buildMarks(len(dn.live))
		}
	}
	slices.Sort(dn.dead)
	slices.Reverse(dn.dead) // free is popped from its end: lowest slot first
	dn.free = append(dn.dead, dn.free...)
	dn.dead = nil
}

func (dn *dense) empty() bool { return len(dn.free)+len(dn.dead) == dn.n }

// layout splits the side's live bounds (live: the engine's live bitset)
// into cells at their quantiles, refills the cells, and builds the
// checkpoint bitsets. Cost: O(n log n) for the sort, plus O(marks·words).
func (sd *dside) layout(live []uint64) {
	type item struct {
		b    float64
		s    uint32
		pred uint8
	}
	items := make([]item, 0, sd.n)
	for _, c := range sd.cells {
		for j, s := range c.slots {
			if live[s>>6]&(1<<(s&63)) != 0 {
				items = append(items, item{c.bound[j], c.slots[j], c.pred[j]})
			}
		}
	}
	slices.SortStableFunc(items, func(x, y item) int { return cmp.Compare(x.b, y.b) })
	cells := min(maxCells, max(1, len(items)/boundsPerCell))
	sd.bounds = sd.bounds[:0]
	for i := 1; i < cells; i++ {
		b := items[i*len(items)/cells].b
		if len(sd.bounds) == 0 || b > sd.bounds[len(sd.bounds)-1] {
			sd.bounds = append(sd.bounds, b)
		}
	}
	sd.cells = make([]dcell, len(sd.bounds)+1)
	c := 0
	for _, it := range items {
		for c < len(sd.bounds) && it.b >= sd.bounds[c] {
			c++
		}
		cl := &sd.cells[c]
		cl.bound = append(cl.bound, it.b)
		cl.slots = append(cl.slots, it.s)
		cl.pred = append(cl.pred, it.pred)
	}
	sd.n = len(items)
	sd.built = sd.n
	sd.buildMarks(len(live))
}

// buildMarks builds the checkpoint bitsets of words words from the cells,
// cumulatively: each is the next one plus the cells between them.
func (sd *dside) buildMarks(words int) {
	sd.pend = sd.pend[:0]
	sd.stride = max(1, (len(sd.cells)+maxMarks-1)/maxMarks)
	nm := (len(sd.cells) - 1) / sd.stride
	sd.marks = make([][]uint64, nm)
	if sd.upper {
		// marks[k-1]: bounds in cells < k·stride.
		var acc []uint64
		for k := 1; k <= nm; k++ {
			m := make([]uint64, words)
			copy(m, acc)
			for cc := (k - 1) * sd.stride; cc < k*sd.stride; cc++ {
				for _, s := range sd.cells[cc].slots {
					setBit(m, s)
				}
			}
			sd.marks[k-1], acc = m, m
		}
	} else {
		// marks[k-1]: bounds in cells ≥ k·stride.
		var acc []uint64
		for k := nm; k >= 1; k-- {
			m := make([]uint64, words)
			copy(m, acc)
			end := (k + 1) * sd.stride
			if k == nm {
				end = len(sd.cells)
			}
			for cc := k * sd.stride; cc < end; cc++ {
				for _, s := range sd.cells[cc].slots {
					setBit(m, s)
				}
			}
			sd.marks[k-1], acc = m, m
		}
	}
}

// fail returns the checkpoint bitset (nil for none) that holds filters
// whose bound on this side the value v fails, and about how many bounds it
// holds. With exact set, or when the side has no checkpoints, it also
// marks in u every other filter whose bound v fails; otherwise it leaves
// them unmarked and reports partial, and the caller verifies the filters
// it finds unmarked.
func (sd *dside) fail(u []uint64, v ontology.Value, exact bool) (mark []uint64, held int, partial bool) {
	var j int
	f, isFloat := asFloat(v)
	if isFloat {
		j = upperIndex(sd.bounds, f)
	} else {
		j = sd.cellOf(v)
	}
	var first, end int // the cells to mark one bound at a time
	if sd.upper {
		// Upper bounds below v: the cells below j.
		k := j / sd.stride
		if k >= 1 && k <= len(sd.marks) {
			mark, first = sd.marks[k-1], k*sd.stride
			held = sd.n * first / len(sd.cells)
		}
		end = j
	} else {
		// Lower bounds above v: the cells above j.
		k := j/sd.stride + 1
		first, end = j+1, len(sd.cells)
		if k <= len(sd.marks) {
			mark, end = sd.marks[k-1], k*sd.stride
			held = sd.n * (len(sd.cells) - end) / len(sd.cells)
		}
	}
	if !exact && len(sd.marks) > 0 {
		return mark, held, true
	}
	c := &sd.cells[j]
	switch {
	case !isFloat:
		for i, b := range c.bound {
			cmp := cmpBound(b, v)
			if sd.upper && cmp < 0 || !sd.upper && cmp > 0 || cmp == 0 && c.pred[i]&openEnd != 0 {
				setBit(u, c.slots[i])
			}
		}
	case sd.upper: // fails when the bound is below v, or equal and open
		// v is a float64 exactly, so plain float comparisons are exact.
		for i, b := range c.bound {
			if b < f || b == f && c.pred[i]&openEnd != 0 {
				setBit(u, c.slots[i])
			}
		}
	default: // fails when the bound is above v, or equal and open
		for i, b := range c.bound {
			if b > f || b == f && c.pred[i]&openEnd != 0 {
				setBit(u, c.slots[i])
			}
		}
	}
	for _, p := range sd.pend {
		if sd.upper && int(p.cell) < j || !sd.upper && int(p.cell) > j {
			setBit(u, p.slot)
		}
	}
	for cc := first; cc < end; cc++ {
		for _, s := range sd.cells[cc].slots {
			setBit(u, s)
		}
	}
	return mark, held, false
}

// match marks in u every engine slot the event fails, then appends the
// entries no attribute marked to s.out.
//
// Bounds between a checkpoint and the event's value are not marked one at
// a time: the filters left unmarked are verified instead, exactly, which
// for interval workloads is a handful per event. The checkpoint bitsets
// are ORed fullest first; once most of u is set, lines of u that are full
// are skipped, and when few enough filters are left unmarked that
// verifying them costs less than the ORs still to do, the rest are not
// done.
func (dn *dense) match(s *scratch, d *data) {
	if dn.counting {
		dn.count(s, d)
		return
	}
	words := len(dn.live)
	if cap(s.u) < words {
		s.u = make([]uint64, words)
	}
	u := s.u[:words]
	for w, l := range dn.live {
		u[w] = ^l // slots not in use count as failed
	}
	srcs := s.srcs[:0]
	partial := false
	for _, a := range dn.list {
		x := s.value(d, a.key)
		if !x.present || !x.v.Kind().Numeric() || x.v.IsNaN() {
			srcs = append(srcs, src{a.has, a.npre})
			continue
		}
		for _, sd := range [2]*dside{&a.lo, &a.hi} {
			m, held, p := sd.fail(u, x.v, false)
			partial = partial || p
			if m != nil {
				srcs = append(srcs, src{m, held})
			}
		}
	}
	slices.SortFunc(srcs, func(a, b src) int { return cmp.Compare(b.held, a.held) })
	for i, sr := range srcs {
		if i >= orFullFirst {
			if i%4 == 0 && alive(u)*(verifyWords+words/8) < (len(srcs)-i)*words {
				partial = true
				break
			}
			orLines(u, sr.bits)
			continue
		}
		orInto(u, sr.bits)
	}
	clear(srcs)
	s.srcs = srcs[:0]
	for w, uw := range u {
		for m := ^uw; m != 0; m &= m - 1 {
			e := dn.entries[w<<6+bits.TrailingZeros64(m)]
			if partial {
				s.verify(d, e)
			} else {
				s.out = append(s.out, hit{id: e.id, score: float64(len(e.preds))})
			}
		}
	}
}

// src is a bitset to OR into u, with about how many bits it has set.
type src struct {
	bits []uint64
	held int
}

// Verifying one filter costs about as much as ORing verifyWords + words/8
// words of a bitset: more in larger engines, whose entries are further out
// of cache (measured on W-INT at 10⁵ and 10⁶ filters). A variable so that
// tests can make match stop ORing early. orFullFirst is how many of the
// fullest bitsets are ORed before match looks for full lines of u and
// considers stopping: until then few lines are full.
var (
	verifyWords = 256
	orFullFirst = 8
)

// alive returns the number of bits of u not set.
func alive(u []uint64) int {
	n := 0
	for _, w := range u {
		n += bits.OnesCount64(^w)
	}
	return n
}

// orLines ORs src into dst a cache line (8 words) at a time, skipping the
// lines of dst that are all ones; src may be shorter.
func orLines(dst, src []uint64) {
	n := min(len(dst), len(src))
	i := 0
	for ; i+8 <= n; i += 8 {
		d := dst[i : i+8 : i+8]
		if d[0]&d[1]&d[2]&d[3]&d[4]&d[5]&d[6]&d[7] == ^uint64(0) {
			continue
		}
		s := src[i : i+8 : i+8]
		d[0] |= s[0]
		d[1] |= s[1]
		d[2] |= s[2]
		d[3] |= s[3]
		d[4] |= s[4]
		d[5] |= s[5]
		d[6] |= s[6]
		d[7] |= s[7]
	}
	for ; i < n; i++ {
		dst[i] |= src[i]
	}
}

// orInto ORs src into dst; src may be shorter (its missing words are 0).
func orInto(dst, src []uint64) {
	if len(src) > len(dst) {
		src = src[:len(dst)]
	}
	dst = dst[:len(src)]
	for i := range dst {
		dst[i] |= src[i]
	}
}

// count is match for counting engines: per attribute it gathers the
// filters the event fails into a scratch bitset, adds their predicates'
// weights into bit-sliced counters, and then checks exactly the filters
// whose failed weight is at most maxFail.
func (dn *dense) count(s *scratch, d *data) {
	words := len(dn.live)
	if cap(s.u) < words {
		s.u = make([]uint64, words)
	}
	u := s.u[:words]
	for p := range s.planes {
		if cap(s.planes[p]) < words {
			s.planes[p] = make([]uint64, words)
		}
		s.planes[p] = s.planes[p][:words]
		clear(s.planes[p])
	}
	for _, a := range dn.list {
		x := s.value(d, a.key)
		src := a.has
		if x.present && x.v.Kind().Numeric() && !x.v.IsNaN() {
			clear(u)
			if m, _, _ := a.lo.fail(u, x.v, true); m != nil {
				orInto(u, m)
			}
			if m, _, _ := a.hi.fail(u, x.v, true); m != nil {
				orInto(u, m)
			}
			src = u
		}
		for b := range weightBits {
			addMasked(&s.planes, src, a.wb[b], b)
		}
	}
	k := dn.maxFail
	for w, l := range dn.live {
		// over: counters above k, compared from the top plane down.
		var over uint64
		eq := ^uint64(0)
		for p := countPlanes - 1; p >= 0; p-- {
			pl := s.planes[p][w]
			if k>>p&1 == 0 {
				over |= eq & pl
				eq &^= pl
			} else {
				eq &= pl
			}
		}
		for m := l &^ over; m != 0; m &= m - 1 {
			b := bits.TrailingZeros64(m)
			fails := 0
			for p := range countPlanes {
				fails |= int(s.planes[p][w]>>b&1) << p
			}
			if fails > int(dn.allowed[w<<6+b]) {
				continue
			}
			e := dn.entries[w<<6+b]
			if e.mode == ModeAtLeast {
				s.out = append(s.out, hit{id: e.id, score: float64(len(e.preds) - fails)})
			} else {
				s.out = append(s.out, hit{id: e.id, score: e.weight - float64(fails)})
			}
		}
	}
}

// addMasked adds (x AND mask) shifted left by shift into the bit-sliced
// counters.
func addMasked(planes *[countPlanes][]uint64, x, mask []uint64, shift int) {
	n := min(len(x), len(mask))
	for w := 0; w < n; w++ {
		carry := x[w] & mask[w]
		for p := shift; carry != 0 && p < countPlanes; p++ {
			t := planes[p][w] & carry
			planes[p][w] ^= carry
			carry = t
		}
	}
}

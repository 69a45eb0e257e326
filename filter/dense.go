package filter

import (
	"math/bits"
	"slices"

	"github.com/sion-go/sion/ontology"
)

// dense is the interval engine of one group: for filters whose predicates
// are all numeric comparisons and ranges on attributes (ModeAll), it finds
// the filters an event fails rather than the ones it satisfies, with
// bitsets pre-marked per attribute (after REIN, INFOCOM 2014, and HEM,
// DASFAA 2022). Per attribute, the bounds of the predicates fall into
// cells; a checkpoint bitset every cellsPerMark cells holds the filters
// with a lower bound at or above it (and one the filters with an upper
// bound below it). An event value v in cell j fails every lower bound in
// the cells above j — one bitset OR for the cells past the next
// checkpoint, one mark per bound for the few cells before it — and the
// bounds in cell j are compared exactly. A filter is matched when no
// attribute marks it. Cost per event: one OR of m/64 words per attribute
// and side, plus about m·p/(2·marks) single marks, where m is the number
// of filters and p the predicates per filter on the attribute.
type dense struct {
	n       int // engine slots in use, holes included
	free    []uint32
	entries []*entry // by engine slot
	live    []uint64
	attrs   map[uint32]*dattr
	list    []*dattr
}

type dattr struct {
	key uint32
	has []uint64 // engine slots with a predicate on the attribute
	// loBounds and hiBounds are the cell boundaries of each side, chosen
	// from the quantiles of that side's bounds.
	loBounds, hiBounds []float64
	lo, hi             []dcell // by cell: the lower (upper) bounds in that cell
	loMark             [][]uint64
	hiMark             [][]uint64
	nb                 int // bounds held
	built              int // nb when the cells were last laid out
}

// dcell holds the bounds that fall into one cell, sorted by bound, each
// with the engine slot of its filter and the predicate index (bit 7 set for
// an exclusive end). Bounds are float64s that equal the predicates' bounds
// exactly (denseEligible), so cells compare exactly without reaching the
// filters.
type dcell struct {
	bound []float64
	slots []uint32
	pred  []uint8
}

const openEnd = 0x80

// search returns the first index whose bound is ≥ v (strict: > v).
func (c *dcell) search(v ontology.Value, strict bool) int {
	lo, hi := 0, len(c.bound)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		cmp, _ := ontology.Compare(ontology.Float(c.bound[m]), v)
		if cmp < 0 || strict && cmp == 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (c *dcell) add(b ontology.Value, s uint32, pred uint8) {
	i := c.search(b, true)
	c.bound = slices.Insert(c.bound, i, b.Float())
	c.slots = slices.Insert(c.slots, i, s)
	c.pred = slices.Insert(c.pred, i, pred)
}

func (c *dcell) remove(b ontology.Value, s uint32, pred uint8) {
	for i := c.search(b, false); i < len(c.slots); i++ {
		if c.slots[i] == s && c.pred[i] == pred {
			c.bound = slices.Delete(c.bound, i, i+1)
			c.slots = slices.Delete(c.slots, i, i+1)
			c.pred = slices.Delete(c.pred, i, i+1)
			return
		}
	}
	panic("filter: dense cell lost a bound")
}

// The dense engine's layout; variables so that tests can make the cells
// and checkpoints small enough to be exercised by a few thousand filters.
var (
	cellsPerMark  = 8
	maxCells      = 512
	boundsPerCell = 32
)

const (
	denseMinGroup = 32  // eligible filters a group gathers before it gets an engine
	denseMaxAttrs = 64  // attributes one engine serves
	denseMaxPreds = 127 // a cell entry keeps the predicate index in 7 bits
)

// denseEligible reports whether e's filter can live in a dense engine:
// ModeAll, every predicate a numeric comparison or range on an attribute.
func denseEligible(f *Filter) bool {
	if f.mode != ModeAll || len(f.preds) == 0 || len(f.preds) > denseMaxPreds {
		return false
	}
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

// exactFloat reports whether v is a number that a float64 holds exactly,
// so that cells can keep bounds as float64 and still compare exactly.
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

// lowerOpen and upperOpen report whether a predicate's end is exclusive.
func lowerOpen(p *Predicate) bool { return p.Op == OpGT || p.Op == OpRange && p.LoOpen }
func upperOpen(p *Predicate) bool { return p.Op == OpLT || p.Op == OpRange && p.HiOpen }

func lowerBound(p *Predicate) (ontology.Value, bool) {
	switch p.Op {
	case OpGT, OpGE, OpRange:
		return p.Value, true
	}
	return ontology.Value{}, false
}

func upperBound(p *Predicate) (ontology.Value, bool) {
	switch p.Op {
	case OpLT, OpLE:
		return p.Value, true
	case OpRange:
		return p.Hi, true
	}
	return ontology.Value{}, false
}

func newDense() *dense { return &dense{attrs: map[uint32]*dattr{}} }

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

func growBits(b []uint64, n int) []uint64 {
	w := (n + 63) >> 6
	for len(b) < w {
		b = append(b, 0)
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
		dn.live = growBits(dn.live, dn.n)
	}
	e.dslot = s
	dn.entries[s] = e
	for i := range e.f.preds {
		a := dn.attr(e.keys[i])
		setBit(a.has, s)
		dn.place(a, s, i)
	}
	setBit(dn.live, s)
	for _, a := range dn.list {
		if a.nb >= 2*a.built && a.nb >= 2*boundsPerCell {
			dn.layout(a)
		}
	}
}

func (dn *dense) attr(k uint32) *dattr {
	a := dn.attrs[k]
	if a == nil {
		a = &dattr{key: k, lo: make([]dcell, 1), hi: make([]dcell, 1)}
		dn.attrs[k] = a
		dn.list = append(dn.list, a)
	}
	for len(a.has) < len(dn.live) {
		a.has = append(a.has, 0)
		for i := range a.loMark {
			a.loMark[i] = append(a.loMark[i], 0)
		}
		for i := range a.hiMark {
			a.hiMark[i] = append(a.hiMark[i], 0)
		}
	}
	return a
}

// cellOf returns the number of cell boundaries at or below v: cells are
// ordered, so a bound in a higher cell than v is above v, exactly.
func cellOf(bounds []float64, v ontology.Value) int {
	lo, hi := 0, len(bounds)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if c, _ := ontology.Compare(v, ontology.Float(bounds[m])); c >= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// place enters predicate i of the entry at engine slot s into its cells
// and checkpoint bitsets.
func (dn *dense) place(a *dattr, s uint32, i int) {
	p := &dn.entries[s].f.preds[i]
	if v, ok := lowerBound(p); ok {
		c := cellOf(a.loBounds, v)
		a.lo[c].add(v, s, predTag(i, lowerOpen(p)))
		for k := 1; k*cellsPerMark <= c && k <= len(a.loMark); k++ {
			setBit(a.loMark[k-1], s)
		}
		a.nb++
	}
	if v, ok := upperBound(p); ok {
		c := cellOf(a.hiBounds, v)
		a.hi[c].add(v, s, predTag(i, upperOpen(p)))
		for k := len(a.hiMark); k >= 1 && k*cellsPerMark > c; k-- {
			setBit(a.hiMark[k-1], s)
		}
		a.nb++
	}
}

func predTag(i int, open bool) uint8 {
	if open {
		return uint8(i) | openEnd
	}
	return uint8(i)
}

func (dn *dense) remove(e *entry) {
	s := e.dslot
	for i := range e.f.preds {
		a := dn.attrs[e.keys[i]]
		p := &e.f.preds[i]
		if v, ok := lowerBound(p); ok {
			a.lo[cellOf(a.loBounds, v)].remove(v, s, predTag(i, lowerOpen(p)))
			a.nb--
		}
		if v, ok := upperBound(p); ok {
			a.hi[cellOf(a.hiBounds, v)].remove(v, s, predTag(i, upperOpen(p)))
			a.nb--
		}
		clearBit(a.has, s)
		for _, m := range a.loMark {
			clearBit(m, s)
		}
		for _, m := range a.hiMark {
			clearBit(m, s)
		}
	}
	clearBit(dn.live, s)
	dn.entries[s] = nil
	dn.free = append(dn.free, s)
	for i := 0; i < len(dn.list); i++ {
		if a := dn.list[i]; a.nb == 0 {
			delete(dn.attrs, a.key)
			dn.list = append(dn.list[:i], dn.list[i+1:]...)
			i--
		}
	}
}

func (dn *dense) empty() bool { return len(dn.free) == dn.n }

// layout chooses each side's cells from the quantiles of its bounds and
// rebuilds the attribute's cells and checkpoint bitsets.
func (dn *dense) layout(a *dattr) {
	type ref struct {
		s uint32
		i int
	}
	var refs []ref
	var los, his []float64
	for _, c := range a.lo {
		los = append(los, c.bound...)
		for j, sl := range c.slots {
			refs = append(refs, ref{sl, int(c.pred[j] &^ openEnd)})
		}
	}
	for _, c := range a.hi {
		his = append(his, c.bound...)
		for j, sl := range c.slots {
			if _, both := lowerBound(&dn.entries[sl].f.preds[c.pred[j]&^openEnd]); !both {
				refs = append(refs, ref{sl, int(c.pred[j] &^ openEnd)})
			}
		}
	}
	slices.SortFunc(refs, func(x, y ref) int {
		if x.s != y.s {
			return int(x.s) - int(y.s)
		}
		return x.i - y.i
	})
	a.loBounds, a.hiBounds = quantiles(los), quantiles(his)
	a.lo = make([]dcell, len(a.loBounds)+1)
	a.hi = make([]dcell, len(a.hiBounds)+1)
	w := len(dn.live)
	a.loMark = make([][]uint64, len(a.loBounds)/cellsPerMark)
	for k := range a.loMark {
		a.loMark[k] = make([]uint64, w)
	}
	a.hiMark = make([][]uint64, len(a.hiBounds)/cellsPerMark)
	for k := range a.hiMark {
		a.hiMark[k] = make([]uint64, w)
	}
	a.nb = 0
	for _, r := range refs {
		dn.place(a, r.s, r.i)
	}
	a.built = a.nb
}

// quantiles returns strictly increasing cell boundaries that split vals
// into about len(vals)/boundsPerCell cells of equal counts.
func quantiles(vals []float64) []float64 {
	slices.Sort(vals)
	cells := min(maxCells, max(1, len(vals)/boundsPerCell))
	var bounds []float64
	for i := 1; i < cells; i++ {
		b := vals[i*len(vals)/cells]
		if len(bounds) == 0 || b > bounds[len(bounds)-1] {
			bounds = append(bounds, b)
		}
	}
	return bounds
}

// match clears u and marks in it every engine slot the event fails, then
// appends the entries no attribute marked to s.out.
func (dn *dense) match(s *scratch, d *data) {
	words := len(dn.live)
	if cap(s.u) < words {
		s.u = make([]uint64, words)
	}
	u := s.u[:words]
	clear(u)
	for _, a := range dn.list {
		x := s.value(d, a.key)
		if !x.present || !x.v.Kind().Numeric() || x.v.IsNaN() {
			orInto(u, a.has)
			continue
		}
		v := x.v
		// Lower bounds above v: cells j+1 and up.
		j := cellOf(a.loBounds, v)
		k := j/cellsPerMark + 1
		end := len(a.lo)
		if k <= len(a.loMark) {
			orInto(u, a.loMark[k-1])
			end = k * cellsPerMark
		}
		for c := j + 1; c < end; c++ {
			for _, sl := range a.lo[c].slots {
				setBit(u, sl)
			}
		}
		// v's own cell, sorted: bounds above v fail, and bounds equal to v
		// fail when the end is exclusive.
		c := &a.lo[j]
		eq, gt := c.search(v, false), c.search(v, true)
		markOpen(u, c, eq, gt)
		for _, sl := range c.slots[gt:] {
			setBit(u, sl)
		}
		// Upper bounds below v: cells below j.
		j = cellOf(a.hiBounds, v)
		k = j / cellsPerMark
		start := 0
		if k >= 1 {
			orInto(u, a.hiMark[k-1])
			start = k * cellsPerMark
		}
		for c := start; c < j; c++ {
			for _, sl := range a.hi[c].slots {
				setBit(u, sl)
			}
		}
		// v's own cell: bounds below v fail, bounds equal to v fail when
		// the end is exclusive.
		c = &a.hi[j]
		eq, gt = c.search(v, false), c.search(v, true)
		for _, sl := range c.slots[:eq] {
			setBit(u, sl)
		}
		markOpen(u, c, eq, gt)
	}
	for w, l := range dn.live {
		m := l &^ u[w]
		for m != 0 {
			b := bits.TrailingZeros64(m)
			m &= m - 1
			e := dn.entries[w<<6+b]
			s.out = append(s.out, hit{id: e.id, score: float64(len(e.f.preds))})
		}
	}
}

// markOpen marks the entries [from, to) of c, whose bounds equal the event
// value, that have an exclusive end.
func markOpen(u []uint64, c *dcell, from, to int) {
	for i := from; i < to; i++ {
		if c.pred[i]&openEnd != 0 {
			setBit(u, c.slots[i])
		}
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

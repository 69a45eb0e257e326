package filter

import (
	"encoding/binary"
	"math"
	"slices"
	"sync/atomic"
)

// A dense engine keeps each filter as a record, back to back in one byte
// array:
//
//	npreds                         1 byte
//	counting engines: mode         1 byte, then atLeast (uvarint) or the threshold (8 bytes),
//	                               then the sum of the weights (uvarint)
//	per predicate:
//	  attribute index              1 byte
//	  flags                        1 byte: lower and upper bound encodings (bits 0–1, 2–3),
//	                               lower end open (4), upper end open (5)
//	  counting engines: weight     1 byte
//	  lower bound, upper bound     as their encodings say
//
// A bound is absent (encoding 0), an integer up to 2^53 in magnitude as a
// zigzag varint (1), or a float64 (2). Every bound is a float64 exactly
// (denseEligible), so decoding gives back the bound itself. A W-INT range
// [120, 300120] takes 8 bytes.
const (
	boundNone  = 0
	boundInt   = 1
	boundFloat = 2
	flagLoOpen = 1 << 4
	flagHiOpen = 1 << 5
)

// encode appends the record of f, whose predicates are on the attributes
// of indexes idx, to b.
func (dn *dense) encode(b []byte, f *Filter, idx []uint8) []byte {
	b = dn.encodeHead(b, f)
	for i := range f.preds {
		p := &f.preds[i]
		lo, hasLo, loOpen := bound(p, false)
		hi, hasHi, hiOpen := bound(p, true)
		b = appendPred(b, idx[i], int(p.weight()), dn.counting, recPred{hasLo: hasLo, hasHi: hasHi, loOpen: loOpen, hiOpen: hiOpen, lo: lo, hi: hi})
	}
	return b
}

// recMax returns the most bytes a record of npreds predicates takes.
func (dn *dense) recMax(npreds int) int {
	if dn.counting {
		return 1 + 1 + 2*binary.MaxVarintLen64 + npreds*(3+2*binary.MaxVarintLen64)
	}
	return 1 + npreds*(2+2*binary.MaxVarintLen64)
}

// encodeHead appends the head of f's record to b: the number of
// predicates and, in counting engines, the mode's fields.
func (dn *dense) encodeHead(b []byte, f *Filter) []byte {
	b = append(b, byte(len(f.preds)))
	if dn.counting {
		b = append(b, byte(f.mode))
		if f.mode == ModeAtLeast {
			b = binary.AppendUvarint(b, uint64(f.atLeast))
		} else {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f.threshold))
		}
		w := 0
		for i := range f.preds {
			w += int(f.preds[i].weight())
		}
		b = binary.AppendUvarint(b, uint64(w))
	}
	return b
}

// recPred is a predicate as a record holds it.
type recPred struct {
	hasLo, hasHi   bool
	loOpen, hiOpen bool
	lo, hi         float64
}

func appendPred(b []byte, attr uint8, weight int, counting bool, p recPred) []byte {
	var flags byte
	loEnc, hiEnc := boundEnc(p.hasLo, p.lo), boundEnc(p.hasHi, p.hi)
	flags = loEnc | hiEnc<<2
	if p.loOpen {
		flags |= flagLoOpen
	}
	if p.hiOpen {
		flags |= flagHiOpen
	}
	b = append(b, attr, flags)
	if counting {
		b = append(b, byte(weight))
	}
	b = appendBound(b, loEnc, p.lo)
	return appendBound(b, hiEnc, p.hi)
}

func boundEnc(has bool, f float64) byte {
	switch {
	case !has:
		return boundNone
	case f == math.Trunc(f) && f >= -1<<53 && f <= 1<<53:
		return boundInt
	}
	return boundFloat
}

func appendBound(b []byte, enc byte, f float64) []byte {
	switch enc {
	case boundInt:
		return binary.AppendVarint(b, int64(f))
	case boundFloat:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	return b
}

// recReader decodes one record: call next for each predicate.
type recReader struct {
	b       []byte
	left    int
	mode    Mode
	atLeast int
	thresh  float64
	total   int // counting records: the sum of the predicates' weights
	// the current predicate
	attr   uint8
	weight int
	recPred
}

// record returns a reader of slot s's record in g.
func (dn *dense) record(g *dgen, s uint32) recReader {
	off := *chunkAt(g.off, s)
	b := g.recs[off>>blockShift][off&(blockBytes-1):]
	r := recReader{b: b[1:], left: int(b[0])}
	if dn.counting {
		r.mode = Mode(r.b[0])
		r.b = r.b[1:]
		if r.mode == ModeAtLeast {
			v, k := binary.Uvarint(r.b)
			r.atLeast, r.b = int(v), r.b[k:]
		} else {
			r.thresh, r.b = math.Float64frombits(binary.LittleEndian.Uint64(r.b)), r.b[8:]
		}
		v, k := binary.Uvarint(r.b)
		r.total, r.b = int(v), r.b[k:]
		return r
	}
	r.weight = 1
	return r
}

// next decodes the next predicate; it returns false after the last.
func (r *recReader) next() bool {
	if r.left == 0 {
		return false
	}
	r.left--
	r.attr = r.b[0]
	flags := r.b[1]
	r.b = r.b[2:]
	if r.mode != ModeAll {
		r.weight = int(r.b[0])
		r.b = r.b[1:]
	}
	r.loOpen, r.hiOpen = flags&flagLoOpen != 0, flags&flagHiOpen != 0
	r.lo, r.hasLo = r.bound(flags & 3)
	r.hi, r.hasHi = r.bound(flags >> 2 & 3)
	return true
}

func (r *recReader) bound(enc byte) (float64, bool) {
	switch enc {
	case boundInt:
		// binary.Varint, with the one- to three-byte forms inline.
		var ux uint64
		switch b := r.b; {
		case b[0] < 0x80:
			ux, r.b = uint64(b[0]), b[1:]
		case b[1] < 0x80:
			ux, r.b = uint64(b[0]&0x7f)|uint64(b[1])<<7, b[2:]
		case b[2] < 0x80:
			ux, r.b = uint64(b[0]&0x7f)|uint64(b[1]&0x7f)<<7|uint64(b[2])<<14, b[3:]
		default:
			v, k := binary.Varint(b)
			r.b = b[k:]
			return float64(v), true
		}
		return float64(int64(ux>>1) ^ -int64(ux&1)), true
	case boundFloat:
		f := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
		r.b = r.b[8:]
		return f, true
	}
	return 0, false
}

// sampleBounds is how many bounds per side layout sorts to place the
// boundaries.
const sampleBounds = 4096

// layout makes a new generation from the live filters of g, with room for
// want live filters, boundaries at the quantiles of their bounds,
// attributes no live filter uses dropped, and every bound in the bitsets;
// publishes it; and calls moved with each filter's new slot.
func (dn *dense) layout(g *dgen, want int, moved func(id uint64, slot uint32)) *dgen {
	n := g.n.Load()
	// The attributes still used, renumbered.
	remap := make([]int, len(g.attrs))
	var used []*dattr
	for i, a := range g.attrs {
		remap[i] = -1
		if dn.npre[i] > 0 {
			remap[i] = len(used)
			used = append(used, &dattr{key: a.key})
		}
	}
	ng := &dgen{}
	live := make([]uint32, 0, dn.live)
	for s := range n {
		if atomic.LoadUint64(g.live.word(s))&(1<<(s&63)) != 0 {
			live = append(live, s)
		}
	}
	slots := max(64, (want+63)&^63)
	// Without dead slots or dropped attributes, the records, IDs and
	// places stay as they are, shared with g.
	keep := len(live) == int(n) && len(used) == len(g.attrs)
	from := &dgen{attrs: used}
	if keep {
		from.ids, from.off, from.allowed = g.ids, g.off, g.allowed
	}
	dn.resize(from, ng, slots)
	// Boundaries from a strided sample of the bounds.
	step := max(1, len(live)/sampleBounds)
	los, his := make([][]float64, len(ng.attrs)), make([][]float64, len(ng.attrs))
	for i := 0; i < len(live); i += step {
		for r := dn.record(g, live[i]); r.next(); {
			a := remap[r.attr]
			if r.hasLo {
				los[a] = append(los[a], r.lo)
			}
			if r.hasHi {
				his[a] = append(his[a], r.hi)
			}
		}
	}
	for i, a := range ng.attrs {
		a.lo.layout(los[i], slots, dn.marks())
		a.hi.layout(his[i], slots, dn.marks())
	}
	// Records, renumbered, into blocks.
	maxFail := g.maxFail.Load()
	if keep {
		ng.recs = g.recs
		for s := range n {
			*ng.live.word(s) |= 1 << (s & 63)
		}
	} else {
		dn.recPos = 0
		maxFail = 0
	}
	for ns, s := range live {
		if keep {
			break
		}
		r := dn.record(g, s)
		off := *chunkAt(g.off, s)
		blk := g.recs[off>>blockShift][off&(blockBytes-1):]
		head := len(blk) - len(r.b) // npreds and the mode's fields
		b := append(dn.enc[:0], blk[:head]...)
		for r.next() {
			b = appendPred(b, uint8(remap[r.attr]), r.weight, dn.counting, r.recPred)
		}
		dn.enc = b
		if len(ng.recs) == 0 || dn.recPos+len(b) > len(ng.recs[len(ng.recs)-1]) {
			size := blockBytes
			if len(ng.recs) == 0 {
				size = min(blockBytes, max(1024, (len(live)+len(live)/8)*(len(blk)-len(r.b)+1)))
			}
			ng.recs = append(ng.recs, make([]byte, size))
			dn.recPos = 0
		}
		*chunkAt(ng.ids, uint32(ns)) = *chunkAt(g.ids, s)
		*chunkAt(ng.off, uint32(ns)) = uint32(len(ng.recs)-1)<<blockShift | uint32(dn.recPos)
		dn.recPos += copy(ng.recs[len(ng.recs)-1][dn.recPos:], b)
		if dn.counting {
			af := *chunkAt(g.allowed, s)
			*chunkAt(ng.allowed, uint32(ns)) = af
			maxFail = max(maxFail, int32(af))
		}
		*ng.live.word(uint32(ns)) |= 1 << (ns & 63)
	}
	ng.n.Store(uint32(len(live)))
	ng.maxFail.Store(maxFail)
	dn.keyAttr = make(map[uint32]uint8, len(ng.attrs))
	npre := make([]int, len(ng.attrs))
	for i, a := range g.attrs {
		if j := remap[i]; j >= 0 {
			dn.keyAttr[a.key] = uint8(j)
			npre[j] = dn.npre[i]
		}
	}
	dn.npre = npre
	dn.merge(ng)
	dn.live, dn.dead, dn.built, dn.unlaid = len(live), 0, len(live), 0
	dn.layouts++
	dn.cur.Store(ng)
	if moved != nil {
		for ns := range live {
			moved(*chunkAt(ng.ids, uint32(ns)), uint32(ns))
		}
	}
	return ng
}

// layout places up to marks boundaries at the quantiles of the sample of
// bounds, and makes their (empty) bitsets of slots slots.
func (sd *dside) layout(sample []float64, slots, marks int) {
	slices.Sort(sample)
	k := min(marks, len(sample)/4)
	sd.room = k < marks
	sd.bounds = nil
	for i := range k {
		b := sample[(i+1)*len(sample)/(k+1)]
		if len(sd.bounds) == 0 || b > sd.bounds[len(sd.bounds)-1] {
			sd.bounds = append(sd.bounds, b)
		}
	}
	sd.marks = make([]bitset, len(sd.bounds))
	sd.held = make([]atomic.Int32, len(sd.bounds))
	for c := range sd.marks {
		sd.marks[c] = growChunks[uint64](nil, slots, 6)
	}
}

// spreadGrowth is how much the spread of a side's bounds may grow since
// the layout before balanced asks for a new one.
const spreadGrowth = 1.25

// countLE returns the number of boundaries ≤ b: a lower bound b is in
// the lower bitsets 0…countLE-1. Boundaries are few (maxMarks): a
// branch-free count beats a binary search.
func countLE(bounds []float64, b float64) int {
	n := 0
	for _, x := range bounds {
		if x <= b {
			n++
		}
	}
	return n
}

// countLT returns the number of boundaries < b: an upper bound b is in
// the upper bitsets countLT… .
func countLT(bounds []float64, b float64) int {
	n := 0
	for _, x := range bounds {
		if x < b {
			n++
		}
	}
	return n
}

// balanced reports whether g's boundaries still fit the bounds of its
// live filters, so that a layout now would change little: on each side
// of each attribute, the spread of the bounds over the regions between
// boundaries (see spread) has grown by less than spreadGrowth since the
// layout, and a side the layout gave fewer than the most boundaries
// for lack of bounds has not gained enough for more (a quarter of its
// live bounds, nb, is not above its boundaries; a side no filter bounds,
// as the upper side of filters that are all x > v, never has). When it
// does, the engine keeps its layout for another relayout times its
// growth: with bounds drawn alike as the engine grows (W-INT at 10⁶
// filters), the quantiles of a layout at a quarter of its size are those
// of a layout now, and a layout costs about a microsecond per live
// filter. On the
// way it counts the bitsets anew for match's order (held, pres). An
// engine never laid out is not balanced. Writer only. Cost: a pass over
// the engine's bitsets, about 1 % of a layout.
func (dn *dense) balanced(g *dgen) bool {
	if dn.layouts == 0 {
		return false
	}
	for i, a := range g.attrs {
		lo, hi := dn.recount(g, a)
		nb := dn.nb[i]
		if lo > spreadGrowth*a.lo.spread+0.05 || hi > spreadGrowth*a.hi.spread+0.05 ||
			a.lo.room && nb[0]/4 > len(a.lo.bounds) || a.hi.room && nb[1]/4 > len(a.hi.bounds) {
			return false
		}
	}
	dn.built = dn.live
	return true
}

// recount counts, for attribute a, the live filters of g in its bitset
// of slots and in each boundary's bitset, into pres and held (the order
// match ORs the bitsets in), and returns the spread of each side (see
// spread). g's live words must not change meanwhile. Writer only.
func (dn *dense) recount(g *dgen, a *dattr) (lo, hi float64) {
	t := onesLive(a.has, g.live)
	a.pres.Store(t)
	for i, sd := range [2]*dside{&a.lo, &a.hi} {
		cum := make([]int32, len(sd.marks))
		for c, m := range sd.marks {
			cum[c] = onesLive(m, g.live)
			sd.held[c].Store(cum[c])
		}
		if i == 0 {
			lo = spread(t, cum, t, 0)
		} else {
			hi = spread(t, cum, 0, t)
		}
	}
	return lo, hi
}

// spread returns how evenly t bounds fall into the regions that a side's
// boundaries make, from cum, the number of bounds in each boundary's
// bitset (decreasing on the lower side, from first before the first
// boundary to last after the last; increasing on the upper side):
// regions·Σ size²/t². It is 1 when the regions hold as many bounds each,
// and as many as the regions when one holds them all; for event values
// drawn like the bounds, it is the verification they leave relative to
// even regions. 0 for no bounds.
func spread(t int32, cum []int32, first, last int32) float64 {
	if t == 0 {
		return 0
	}
	var sq float64
	prev := first
	for _, c := range append(cum, last) {
		d := float64(c - prev)
		sq += d * d
		prev = c
	}
	return float64(len(cum)+1) * sq / (float64(t) * float64(t))
}

// onesLive returns the number of bits set in both b and live, laid out
// alike.
func onesLive(b, live bitset) int32 {
	n := 0
	for i, ch := range b {
		lc := live[i]
		for j, w := range ch[:min(len(ch), len(lc))] {
			n += popcount(w & lc[j])
		}
	}
	return int32(n)
}

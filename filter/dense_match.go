package filter

import (
	"math/bits"
	"slices"
	"sync/atomic"
	"unsafe"
)

// above returns the index of the first boundary above v (len(bounds) for
// none): every bound of its lower bitset is above v.
func (sd *dside) above(x val) int {
	if f, ok := asFloat(x.v); ok {
		return countLE(sd.bounds, f)
	}
	return sort1(len(sd.bounds), func(i int) bool { return cmpBound(sd.bounds[i], x.v) > 0 })
}

// below returns the index of the last boundary below v (-1 for none):
// every bound of its upper bitset is below v.
func (sd *dside) below(x val) int {
	if f, ok := asFloat(x.v); ok {
		return countLT(sd.bounds, f) - 1
	}
	return sort1(len(sd.bounds), func(i int) bool { return cmpBound(sd.bounds[i], x.v) >= 0 }) - 1
}

// sort1 returns the first i in [0, n) for which f holds (n for none); f
// is false then true.
func sort1(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if !f(m) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// numeric reports whether x is a value the engine's bounds compare with.
func numeric(x val) bool { return x.present && x.v.Kind().Numeric() && !x.v.IsNaN() }

// failed returns the bitset u of n slots' words, with every slot that is
// not live, or past n, set.
func (s *scratch) failed(g *dgen, n uint32) []uint64 {
	words := int(n+63) >> 6
	if cap(s.u) < words {
		s.u = halfPage(words)
	}
	u := s.u[:words]
	for c, ch := range g.live {
		dst := u[min(len(u), chunkStart(c)>>6):]
		dst = dst[:min(len(dst), len(ch))]
		for i := range dst {
			dst[i] = ^atomic.LoadUint64(&ch[i])
		}
	}
	if r := n & 63; r != 0 {
		u[words-1] |= ^uint64(0) << r
	}
	return u
}

// halfPage returns a slice of n words that starts half way into a 4 KB
// page. Engine chunks past the first start on page boundaries (they are
// 8 KB and more); a u that starts just past one makes the load of a
// chunk word look, to the CPU, like the store it just made to u (same
// address bits below 4 KB: "4K aliasing"), which stalled the ORs of
// match (W-INT at 10⁵ filters: 1.08–1.23× the time of a single chunk).
func halfPage(n int) []uint64 {
	b := make([]uint64, n+512)
	off := (2048 - int(uintptr(unsafe.Pointer(&b[0]))&4095)) & 4095 / 8
	return b[off : off+n : off+n]
}

// match marks in u every slot the event is known to fail, then verifies
// the filters left unmarked against their records and appends those that
// match to s.out.
//
// In an engine of at most orAllWords words of u, every bitset the event
// selects is ORed, in the engine's order of attributes (orEvery). In a
// larger one the bitsets are ORed fullest first, the first orFullFirst
// of them in one pass over u; then, once few slots are left unmarked,
// word by word of u, and when few enough are left that verifying them
// costs less than the ORs still to do, the rest are not done
// (orOrdered).
func (dn *dense) match(s *scratch, d *data) {
	g := dn.cur.Load()
	n := g.n.Load()
	if n == 0 {
		return
	}
	if dn.counting {
		dn.count(s, d, g, n)
		return
	}
	var u []uint64
	if words := int(n+63) >> 6; words <= orAllWords {
		u = s.failed(g, n)
		s.orEvery(d, g, u)
	} else {
		u = s.orOrdered(d, g, n)
	}
	s.verifyLeft(d, dn, g, u)
}

// orEvery ORs into u every bitset of g that the event selects: per
// attribute, its presence bitset when the event has no number for it,
// else the checkpoint bitsets of the bounds it fails on either side.
func (s *scratch) orEvery(d *data, g *dgen, u []uint64) {
	for _, a := range g.attrs {
		x := s.value(d, a.key)
		if !numeric(x) {
			orBits(u, a.has, false)
			continue
		}
		if c := a.lo.above(x); c < len(a.lo.marks) {
			orBits(u, a.lo.marks[c], false)
		}
		if c := a.hi.below(x); c >= 0 {
			orBits(u, a.hi.marks[c], false)
		}
	}
}

// orOrdered returns u, the slots of a Match that saw n slots published
// that are not live or fail a bitset orEvery would OR, ORing the bitsets
// fullest first: the first orFullFirst in one pass over u (orFirst);
// then, every fourth bitset, it stops when verifying the slots left
// unmarked costs less than the ORs still to do (see verifyCost), or, when
// fewer than one slot in orWordsBelow words is left, ORs the rest word
// by word of u (orWords); else it ORs the next bitset skipping full lines
// of u.
func (s *scratch) orOrdered(d *data, g *dgen, n uint32) []uint64 {
	words := int(n+63) >> 6
	// The bitsets to OR, and their order: most bits first. An order key
	// is the complement of the bitset's count, then its place in srcs,
	// so that a plain sort of integers makes the order.
	srcs, order := s.srcs[:0], s.order[:0]
	for _, a := range g.attrs {
		x := s.value(d, a.key)
		if !numeric(x) {
			order = append(order, orderKey(a.pres.Load(), len(srcs)))
			srcs = append(srcs, a.has)
			continue
		}
		if c := a.lo.above(x); c < len(a.lo.marks) {
			order = append(order, orderKey(a.lo.held[c].Load(), len(srcs)))
			srcs = append(srcs, a.lo.marks[c])
		}
		if c := a.hi.below(x); c >= 0 {
			order = append(order, orderKey(a.hi.held[c].Load(), len(srcs)))
			srcs = append(srcs, a.hi.marks[c])
		}
	}
	slices.Sort(order)
	first := min(max(orFullFirst, 0), len(order))
	u, left := s.orFirst(g, n, srcs, order[:first]) // left: u's unmarked slots, or -1 when not counted
	for i := first; i < len(order); i++ {
		if i%4 == 0 {
			if left < 0 {
				left = alive(u)
			}
			if left*verifyCost(words) < (len(order)-i)*words {
				break
			}
			if left*orWordsBelow < words {
				orWords(u, srcs, order[i:])
				break
			}
		}
		left = -1
		src := srcs[uint32(order[i])]
		if next := i + 1; next%4 == 0 && next < len(order) {
			left = orCount(u, src) // for the check before the next OR
			continue
		}
		orBits(u, src, true)
	}
	clear(srcs)
	s.srcs, s.order = srcs[:0], order[:0]
	return u
}

// verifyBatch is how many of the slots left unmarked verifyLeft loads
// the records of before it verifies them.
const verifyBatch = 32

// verifyLeft verifies the slots that u leaves unmarked, verifyBatch at a
// time: it first loads each slot's record place and ID, then the first
// byte of its record, and then verifies them, so that the cache misses of
// a batch overlap instead of following one another: in an engine of
// millions of slots each slot's place, record and ID is a miss of its own
// (W-INT at 10⁶ filters, about 38 filters verified per event: 0.90–0.95×
// the CPU per event of verifying them one by one; at 9·10⁶, about 196:
// 0.95×; batches of 16, 64 or 128 made no difference; in-process
// alternation, 2026-12-02). Only bytes of the record itself are touched:
// the bytes after it may be the next record, which the writer may be
// writing (touching the record's second line too gained another 0.97×,
// but raced with the writer). Cost: the verification, plus a pass over u.
func (s *scratch) verifyLeft(d *data, dn *dense, g *dgen, u []uint64) {
	var batch [verifyBatch]uint32
	k := 0
	for w, uw := range u {
		for m := ^uw; m != 0; m &= m - 1 {
			batch[k] = uint32(w<<6 + bits.TrailingZeros64(m))
			if k++; k == verifyBatch {
				s.verifySlots(d, dn, g, batch[:])
				k = 0
			}
		}
	}
	s.verifySlots(d, dn, g, batch[:k])
}

// verifySlots verifies slots (at most verifyBatch) after touching what
// their verification reads (see verifyLeft).
func (s *scratch) verifySlots(d *data, dn *dense, g *dgen, slots []uint32) {
	var offs [verifyBatch]uint32
	var sum uint64
	for i, sl := range slots {
		offs[i] = *chunkAt(g.off, sl)
		sum += *chunkAt(g.ids, sl)
	}
	for _, off := range offs[:len(slots)] {
		blk := g.recs[off>>blockShift]
		blkAt := off & (blockBytes - 1)
		sum += uint64(blk[blkAt])
	}
	s.touched += uint32(sum)
	for _, sl := range slots {
		s.verifyDense(d, dn, g, sl)
	}
}

// verifyDense evaluates the record of slot i exactly and records a hit
// when its mode is satisfied.
func (s *scratch) verifyDense(d *data, dn *dense, g *dgen, i uint32) {
	r := dn.record(g, i)
	npreds := r.left
	held, w := 0, 0
	for r.next() {
		if s.denseHolds(s.value(d, g.attrs[r.attr].key), &r.recPred) {
			held++
			w += r.weight
		} else if r.mode == ModeAll {
			return
		}
	}
	switch r.mode {
	case ModeAll:
		s.out = append(s.out, hit{id: *chunkAt(g.ids, i), score: float64(npreds)})
	case ModeAtLeast:
		if held >= r.atLeast {
			s.out = append(s.out, hit{id: *chunkAt(g.ids, i), score: float64(held)})
		}
	default:
		if float64(w) >= r.thresh {
			s.out = append(s.out, hit{id: *chunkAt(g.ids, i), score: float64(w)})
		}
	}
}

// denseHolds reports whether value x lies within the bounds of p.
func (s *scratch) denseHolds(x val, p *recPred) bool {
	if !numeric(x) {
		return false
	}
	if f, ok := asFloat(x.v); ok {
		return !(p.hasLo && (p.lo > f || p.lo == f && p.loOpen)) &&
			!(p.hasHi && (p.hi < f || p.hi == f && p.hiOpen))
	}
	if p.hasLo {
		if c := cmpBound(p.lo, x.v); c > 0 || c == 0 && p.loOpen {
			return false
		}
	}
	if p.hasHi {
		if c := cmpBound(p.hi, x.v); c < 0 || c == 0 && p.hiOpen {
			return false
		}
	}
	return true
}

// orderKey is the sort key of the bitset at place i of match's srcs
// that has about held bits set: fuller bitsets sort first.
func orderKey(held int32, i int) uint64 {
	return uint64(^uint32(held))<<32 | uint64(i)
}

// Verifying one filter costs about as much as ORing verifyWords words of
// a bitset, plus more in larger engines, whose records are further out of
// cache (see verifyCost). A variable so that tests can make match stop
// ORing early.
//
// orFullFirst is how many of the fullest bitsets match ORs into u in one
// pass (orFirst) before it looks at what is left: u is read and written
// once per eight bitsets, not once per bitset (u is 125 KB at 10⁶ slots,
// past the 48 KB first-level cache, and 1.1 MB at 9·10⁶). W-INT, in-process
// alternation, CPU per event against ORing the first 8 one by one and
// skipping full lines after them: 8 fused 0.62–0.70, 12 fused
// 0.49–0.64, 16 fused 0.42–0.47, at 10⁶ and 9·10⁶ filters; 20 fused
// 0.95–1.01 of 16, 24 to 40 1.02–1.13 (2026-12-03, load 3–4).
//
// orWordsBelow: once fewer than one slot in orWordsBelow words of u is
// left unmarked, match ORs the bitsets left word by word of u (orWords):
// each word still unmarked takes the same word of the bitsets in turn,
// fullest first, until it is full, about 4 loads per unmarked slot,
// where ORing a bitset skipping full lines reads every line of u and
// most lines of the bitset (W-INT at 9·10⁶ filters, 2,400 slots left
// after 16 bitsets, 11 bitsets to go). W-INT at 10⁶ and 9·10⁶ filters
// with the old first 8 (medians of 8–10 rounds, three runs, load 3–5):
// word by word below 1 slot in 8 words 0.72–0.84 of the line ORs, 1 in
// 4 0.65–0.84, 1 in 16 0.70–0.89, 1 in 2 0.80–0.82, 1 in 1 0.93–1.00.
//
// orAllWords is the largest u, in words, for which match ORs every
// bitset without ordering them (orEvery). With the first ORs in one pass
// and the rest word by word, ordered ORs cost W-INT 0.68 of orEvery at
// 10⁴ filters, 0.53 at 4·10⁴, 0.51 at 10⁵, 0.91–0.95 at 5,000 (78
// words) and about the same below (in-process alternation, 2026-12-03).
// Variables so that tests can run each way on small engines.
var (
	verifyWords  = 256
	orFullFirst  = 16
	orWordsBelow = 8
	orAllWords   = 64
)

// verifyCost returns what verifying one filter costs, in words ORed, in
// an engine whose u has words words: verifyWords, plus an eighth of a word
// per word up to 2048 words (131,072 slots) and a 32nd past them. Past
// that size records are out of cache and verifyLeft overlaps their
// misses, so that a verification grows dearer more slowly than an OR:
// with words/8 throughout, W-INT at 10⁶ filters ORed bitsets that cost
// more than the verifications they saved (a 32nd past 2048 words: 0.94×
// the CPU per event at 10⁶, 0.98–0.99× at 9·10⁶, unchanged below;
// stopping earlier at 10⁵ too, with a 128th or a constant 256, made it
// 1.03–1.08× slower, and a constant 256 made 9·10⁶ 1.4× slower;
// in-process alternation, 2026-12-02).
func verifyCost(words int) int {
	return verifyWords + min(words, 2048)/8 + max(0, words-2048)/32
}

// count is match for counting engines: per attribute it gathers the slots
// the event is known to fail into a scratch bitset, and adds their
// predicates' weights into bit-sliced counters. The counts may fall short
// only for filters with a bound between the event's value and the
// boundaries next to it (or not merged into the bitsets yet): count
// gathers those slots too (unsure), and verifies them against their
// records when their count allows a match; every other filter whose
// failed weight is at most what it allows matches, with the score the
// counters give.
func (dn *dense) count(s *scratch, d *data, g *dgen, n uint32) {
	merged := min(g.merged.Load(), n)
	words := int(n+63) >> 6
	if cap(s.u) < words {
		s.u = halfPage(words)
	}
	if cap(s.unsure) < words {
		s.unsure = make([]uint64, words)
	}
	u, unsure := s.u[:words], s.unsure[:words]
	clear(unsure)
	for p := range s.planes {
		if cap(s.planes[p]) < words {
			s.planes[p] = make([]uint64, words)
		}
		s.planes[p] = s.planes[p][:words]
		clear(s.planes[p])
	}
	for _, a := range g.attrs {
		x := s.value(d, a.key)
		src := a.has
		if numeric(x) {
			clear(u)
			// Lower bounds ≥ the first boundary above v fail; those from
			// the boundary below it on are unsure.
			c := a.lo.above(x)
			var lo bitset
			if c < len(a.lo.marks) {
				lo = a.lo.marks[c]
				orBits(u, lo, false)
			}
			if c > 0 {
				orDiff(unsure, a.lo.marks[c-1], lo)
			} else {
				orDiff(unsure, a.has, lo)
			}
			// Upper bounds ≤ the last boundary below v fail; those up to
			// the boundary above it are unsure.
			c = a.hi.below(x)
			var hi bitset
			if c >= 0 {
				hi = a.hi.marks[c]
				orBits(u, hi, false)
			}
			if c+1 < len(a.hi.marks) {
				orDiff(unsure, a.hi.marks[c+1], hi)
			} else {
				orDiff(unsure, a.has, hi)
			}
			src = bitset{u}
		}
		for b := range weightBits {
			for c, ch := range a.wb[b] {
				off := min(len(u), chunkStart(c)>>6)
				addMasked(&s.planes, off, flat(src, c), ch, b)
			}
		}
	}
	for i := merged; i < n; i++ {
		unsure[i>>6] |= 1 << (i & 63)
	}
	k := int(g.maxFail.Load())
	var live []uint64 // the chunk of g.live that word w is in
	c, next := 0, 0   // the next chunk and its first word
	for w := range words {
		if w == next {
			live = g.live[c]
			c++
			next += len(live)
		}
		l := atomic.LoadUint64(&live[w-(next-len(live))])
		if w == words-1 && n&63 != 0 {
			l &= 1<<(n&63) - 1
		}
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
			i := uint32(w<<6 + b)
			switch {
			case fails > int(*chunkAt(g.allowed, i)):
			case unsure[w]>>b&1 != 0:
				s.verifyDense(d, dn, g, i)
			default:
				r := dn.record(g, i)
				score := float64(r.total - fails) // match score: the weight that holds
				if r.mode == ModeAtLeast {
					score = float64(r.left - fails) // the predicates that hold
				}
				s.out = append(s.out, hit{id: *chunkAt(g.ids, i), score: score})
			}
		}
	}
}

// orDiff ORs a AND NOT b into dst, reading a and b atomically; b may be
// nil (no bits).
func orDiff(dst []uint64, a, b bitset) {
	for c, ac := range a {
		d := dst[min(len(dst), chunkStart(c)>>6):]
		d = d[:min(len(d), len(ac))]
		if b == nil {
			for i := range d {
				d[i] |= atomic.LoadUint64(&ac[i])
			}
			continue
		}
		bc := b[c][:len(d)]
		for i := range d {
			d[i] |= atomic.LoadUint64(&ac[i]) &^ atomic.LoadUint64(&bc[i])
		}
	}
}

// flat returns chunk c of x: x is either an engine bitset or a flat
// scratch bitset wrapped as one chunk.
func flat(x bitset, c int) []uint64 {
	if len(x) == 1 {
		return x[0][min(len(x[0]), chunkStart(c)>>6):]
	}
	return x[c]
}

// addMasked adds (x AND mask) shifted left by shift into the bit-sliced
// counters from word off on, reading x and mask atomically.
func addMasked(planes *[countPlanes][]uint64, off int, x, mask []uint64, shift int) {
	n := min(len(x), len(mask), len(planes[0])-off)
	for w := 0; w < n; w++ {
		carry := atomic.LoadUint64(&x[w]) & atomic.LoadUint64(&mask[w])
		for p := shift; carry != 0 && p < countPlanes; p++ {
			t := planes[p][off+w] & carry
			planes[p][off+w] ^= carry
			carry = t
		}
	}
}

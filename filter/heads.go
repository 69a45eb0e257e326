package filter

import (
	"math"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/sion-go/sion/ontology"
)

// List heads: what a posting list reads first of each filter, in order,
// to reject most of the filters it reaches without reading their items.
//
// Besides the attribute and equality signatures, a head can hold two
// small-domain predicates of the filter as bitmaps (the second in place
// of the equality signature): an =, ≠, ∈, ∉ or range
// on an integer-valued attribute whose outcome changes only inside 64
// consecutive integers. Bit i says whether the predicate holds for the
// integer base+i; outside that window it is false (=, ∈, ranges) or true
// (≠, ∉). The event's value of the attribute is turned into an integer
// position once per event (headPos), so the test is one subtraction and
// one bit test. It is a pre-test: the filter's items and predicates still
// decide exactly, so a value the bitmap cannot judge (a number that is not
// an integer) passes it.

// lhead is what a posting list reads first of each filter (48 bytes).
type lhead struct {
	sig uint64 // the filter's draft.sig
	// w2 is, with headBits in kf2, the bitmap of a second predicate, on
	// attribute key kf2&headKeyMask over the integers base2…base2+63;
	// otherwise the filter's draft.vsig.
	w2 uint64
	// ent is the filter's *entry, beside what rejects it, so that a
	// reader reaches the entries its heads let through without another
	// cache miss. The writer sets it before publishing the head and
	// never changes it (a record compaction moves the entry's record,
	// not the entry); readers load it atomically all the same (see
	// entry).
	ent unsafe.Pointer
	// mask is, with headBits in kf, the bitmap of the predicate on
	// attribute key kf&headKeyMask over the integers base…base+63;
	// otherwise the value signature bits at least one of which an event
	// needs, from one set membership predicate (0 for none, see anyMask).
	mask uint64
	// kf is the bitmap's key in bits 0–23, the words and flags above.
	// Once the head is published, the writer changes only its headDead
	// bit, atomically, and readers load it atomically.
	kf   uint32
	base int16
	post uint16 // which posting of its entry this is
	// kf2 is the second bitmap's key and flags (headBits, headOutside),
	// as kf's; base2 its base. Never written once the head is published.
	kf2   uint32
	base2 int16
}

// entry returns the entry of h's posting.
func (h *lhead) entry() *entry { return (*entry)(atomic.LoadPointer(&h.ent)) }

const (
	headKeyMask = 1<<24 - 1
	headVWord   = 24      // shift of the word of vsig (2 bits)
	headAWord   = 26      // shift of the word of the any mask (2 bits)
	headBits    = 1 << 28 // mask is a bitmap
	headOutside = 1 << 29 // the bitmap's predicate holds outside its window
	headDead    = 1 << 30 // the posting was removed (see plist)
)

// open reports whether h rejects no event: it needs no attribute, no
// attribute value, and has no bitmap or set mask.
func (h *lhead) open() bool {
	return h.sig == 0 && h.w2 == 0 && h.mask == 0 && h.kf&headBits == 0 && h.kf2&headBits == 0
}

// Event positions (scratch.ipos): an integer value, or one of these, all
// further than 64 from any window (bases are int16, integers within
// ±posLimit).
const (
	posAbsent int64 = math.MinInt64     // missing or NaN: every bitmap fails
	posFrac   int64 = math.MinInt64 + 1 // a number that is not an integer: bitmaps pass
	posOther  int64 = math.MinInt64 + 2 // another kind, or an integer far away: outside every window
	posLimit        = 1 << 40
)

// headPos returns the position of attribute value v for bitmap tests.
func headPos(v ontology.Value) int64 {
	if v.IsNaN() {
		return posAbsent
	}
	switch v.Kind() {
	case ontology.KindInt:
		if n := v.Int(); n >= -posLimit && n <= posLimit {
			return n
		}
	case ontology.KindFloat:
		n, ok := integral(v)
		if !ok {
			return posFrac
		}
		if n >= -posLimit && n <= posLimit {
			return n
		}
	}
	return posOther
}

// headHolds reports whether the bitmap mask, of base base and flags kf
// (a head's mask, base and kf, or its w2, base2 and kf2), may hold at
// position pos: false only when the predicate fails for every value at
// pos.
func headHolds(mask uint64, base int16, kf uint32, pos int64) bool {
	if d := uint64(pos - int64(base)); d < 64 {
		return mask>>d&1 != 0
	}
	return pos == posFrac || pos != posAbsent && kf&headOutside != 0
}

// smallSet returns the bitmap form of p when it has one: p is =, ≠, ∈, ∉
// with integral numeric literals, or a range with numeric ends, and the
// integers for which it differs from its value far away (false for =, ∈
// and ranges, true for ≠ and ∉) fit in 64 consecutive integers starting
// at an int16 base. Bit i is p's outcome for the integer base+i. A set
// is read twice (its least member, then the bits) rather than copied
// into a table of 64 members, whose zeroing cost about a fifth of
// smallSet's time; an Add calls it for most predicates.
func smallSet(p *Predicate) (mask uint64, base int64, outside, ok bool) {
	switch p.Op {
	case OpEQ, OpNE:
		n, ok := integral(p.Value)
		if !ok {
			return 0, 0, false, false
		}
		base, mask = n, 1
	case OpIn, OpNotIn:
		if len(p.Set) == 0 || len(p.Set) > 64 {
			return 0, 0, false, false
		}
		for i, m := range p.Set {
			n, ok := integral(m)
			if !ok {
				return 0, 0, false, false
			}
			if i == 0 || n < base {
				base = n
			}
		}
		for _, m := range p.Set {
			n, _ := integral(m)
			// base is the least member: the difference is exact as an
			// unsigned integer, where n-base could overflow int64.
			d := uint64(n) - uint64(base)
			if d >= 64 {
				return 0, 0, false, false
			}
			mask |= 1 << d
		}
	case OpRange:
		lo, ok1 := roundBound(p.Value, math.Ceil)
		hi, ok2 := roundBound(p.Hi, math.Floor)
		if !ok1 || !ok2 {
			return 0, 0, false, false
		}
		// The integers lo…hi are those of the closed range; an open end
		// that is an integer drops out.
		if p.LoOpen && ontology.Equal(ontology.Int(lo), p.Value) {
			lo++
		}
		if p.HiOpen && ontology.Equal(ontology.Int(hi), p.Hi) {
			hi--
		}
		if hi < lo { // no integer inside: an empty bitmap
			hi = lo - 1
		}
		if lo < math.MinInt16 || lo > math.MaxInt16 || hi-lo >= 64 {
			return 0, 0, false, false
		}
		if hi >= lo {
			mask = math.MaxUint64 >> (63 - (hi - lo))
		}
		return mask, lo, false, true
	default:
		return 0, 0, false, false
	}
	if base < math.MinInt16 || base > math.MaxInt16 {
		return 0, 0, false, false
	}
	if p.Op == OpNE || p.Op == OpNotIn {
		return ^mask, base, true, true
	}
	return mask, base, false, true
}

// roundBound returns the numeric range end v rounded to an integer by
// round (math.Ceil for a lower end, math.Floor for an upper one), when it
// is within ±2^52.
func roundBound(v ontology.Value, round func(float64) float64) (int64, bool) {
	switch v.Kind() {
	case ontology.KindInt:
		if n := v.Int(); n >= -1<<52 && n <= 1<<52 {
			return n, true
		}
	case ontology.KindFloat:
		if f := round(v.Float()); f >= -0x1p52 && f <= 0x1p52 {
			return int64(f), true
		}
	}
	return 0, false
}

// headPred chooses the two predicates of match-all filter e (drafted as
// dr), other than implied, that list heads test as bitmaps: of those with
// a bitmap form on an attribute, the two an event is least likely to
// satisfy, estimated from the group's popularity counts (the share of
// filters testing the attribute, times the share of the equalities on it
// that the bitmap's values take; for values no equality names, the
// bitmap's share of 64). It returns each predicate's index plus one, or
// 0 for none, the least likely first. Cost: at most
// 64 map lookups per candidate predicate. mu must be held.
func (x *Index) headPred(e *entry, dr *draft, implied int32) (uint8, uint8) {
	if dr.f.mode != ModeAll || len(dr.f.preds) >= math.MaxUint8 {
		return 0, 0
	}
	total := float64(max(1, dr.gp.filters))
	best, bestEst := 0, 2.0
	second, secondEst := 0, 2.0
	var bestForm, secondForm headForm
	for i := range dr.f.preds {
		p := &dr.f.preds[i]
		k := dr.keys[i]
		if int32(i) == implied || p.Operand.Source != SourceAttr || k > headKeyMask {
			continue
		}
		mask, base, outside, ok := smallSet(p)
		if !ok {
			continue
		}
		st := dr.gp.stat(k)
		if st == nil {
			st = &popStats{}
		}
		eqAll := st.eqAll
		in := float64(bits.OnesCount64(mask)) / 64
		if eqAll > 0 {
			// The share of the values the predicate holds for; for ≠ and ∉,
			// one minus the share of those it fails for.
			m := mask
			if outside {
				m = ^mask
			}
			n := int32(0)
			for m != 0 {
				b := bits.TrailingZeros64(m)
				m &= m - 1
				n += st.eqInt(base + int64(b))
			}
			in = float64(n) / float64(eqAll)
			if outside {
				in = 1 - in
			}
		}
		est := min(1, float64(st.present)/total) * in
		switch {
		case est < bestEst:
			second, secondEst, secondForm = best, bestEst, bestForm
			best, bestEst = i+1, est
			bestForm = headForm{mask, base, outside}
		case est < secondEst:
			second, secondEst = i+1, est
			secondForm = headForm{mask, base, outside}
		}
	}
	dr.head, dr.headForm = uint8(best), bestForm
	dr.head2, dr.headForm2 = uint8(second), secondForm
	return uint8(best), uint8(second)
}

// headForm is the bitmap form of a predicate (see smallSet).
type headForm struct {
	mask    uint64
	base    int64
	outside bool
}

// makeHead returns the head of posting ps[j] of the filter drafted as
// dr: its first bitmap, or else its set mask (anyMask); its second
// bitmap, or else its value signature.
func makeHead(dr *draft, ps []posting, j int) lhead {
	h := lhead{sig: dr.sig, w2: dr.vsig, post: uint16(j), kf: uint32(dr.vword) << headVWord}
	if dr.f.mode != ModeAll {
		return h
	}
	if hf, k, ok := headBitmap(dr, ps[j].head, dr.head, dr.headForm); ok {
		h.mask, h.base, h.kf = hf.mask, int16(hf.base), h.kf|k
	} else {
		am, aw := anyMask(dr, ps, j)
		h.mask = am
		h.kf |= uint32(aw) << headAWord
	}
	if hf, k, ok := headBitmap(dr, ps[j].head2, dr.head2, dr.headForm2); ok {
		h.w2, h.base2, h.kf2 = hf.mask, int16(hf.base), k
	}
	return h
}

// headBitmap returns the bitmap form of predicate hp-1 of the filter
// drafted as dr, and its key with headBits and headOutside, or false for
// hp 0. last and form are the predicate headPred chose last in that
// place and its form, taken rather than computed again.
func headBitmap(dr *draft, hp, last uint8, form headForm) (headForm, uint32, bool) {
	if hp == 0 {
		return headForm{}, 0, false
	}
	i := hp - 1
	hf, ok := form, true
	if hp != last {
		hf.mask, hf.base, hf.outside, ok = smallSet(&dr.f.preds[i])
	}
	if !ok {
		return headForm{}, 0, false
	}
	k := dr.keys[i] | headBits
	if hf.outside {
		k |= headOutside
	}
	return hf, k, true
}

package filter

import (
	"math"
	"slices"

	"github.com/sion-go/sion/ontology"
)

// numDomain inverts a monotone numeric conversion (pass-through, rename,
// int→float, linear) by search over the source values, taken in order as
// int64 keys: the int itself, or for floats an order-preserving key over
// the finite values (-0.0 and 0.0 share key 0).
type numDomain struct {
	c        ontology.Conversion
	isInt    bool
	dir      int // +1: Unbounded non-decreasing; -1: non-increasing
	min, max int64
}

var maxFloatKey = int64(math.Float64bits(math.MaxFloat64))

func newNumDomain(c ontology.Conversion) *numDomain {
	nd := &numDomain{c: c, isInt: c.FromKind == ontology.KindInt, dir: 1, min: math.MinInt64, max: math.MaxInt64}
	if !nd.isInt {
		nd.min, nd.max = -maxFloatKey, maxFloatKey
	}
	if c.Method == ontology.ConvertLinear && c.Scale < 0 {
		nd.dir = -1
	}
	return nd
}

func floatKey(f float64) int64 {
	k := int64(math.Float64bits(math.Abs(f)))
	if math.Signbit(f) {
		return -k
	}
	return k
}

func keyFloat(k int64) float64 {
	if k < 0 {
		return -math.Float64frombits(uint64(-k))
	}
	return math.Float64frombits(uint64(k))
}

// value is the source value with key k.
func (nd *numDomain) value(k int64) ontology.Value {
	if nd.isInt {
		return ontology.Int(k)
	}
	return ontology.Float(keyFloat(k))
}

// cmp compares the converted value of key k with v.
func (nd *numDomain) cmp(k int64, v ontology.Value) int {
	c, _ := ontology.Compare(nd.c.Unbounded(nd.value(k)), v)
	return c
}

// guess is the key near which the conversion reaches v: the inverse of a
// linear conversion computed in float64, clamped to the domain.
func (nd *numDomain) guess(v ontology.Value) int64 {
	x := v.Float()
	if nd.c.Method == ontology.ConvertLinear {
		x = (x - nd.c.Offset) / nd.c.Scale
	}
	switch {
	case math.IsNaN(x):
		return 0
	case nd.isInt && x >= 0x1p63:
		return math.MaxInt64
	case nd.isInt && x < -0x1p63:
		return math.MinInt64
	case nd.isInt:
		return int64(x)
	}
	return max(nd.min, min(nd.max, floatKey(x)))
}

// first returns the least key at which pred holds, pred being false and
// then true along the keys; ok is false when it holds nowhere. It steps
// away from guess by 1, 2, 4, … keys and then bisects: at most about 130
// calls of pred.
func (nd *numDomain) first(pred func(int64) bool, guess int64) (k int64, ok bool) {
	lo, hi := nd.min, nd.max
	g := max(lo, min(hi, guess))
	var f, t int64 // pred(f) is false, pred(t) true, f < t
	step := uint64(1)
	if pred(g) {
		t = g
		for {
			if uint64(t)-uint64(lo) < step {
				if t == lo || pred(lo) {
					return lo, true
				}
				f = lo
				break
			}
			n := int64(uint64(t) - step)
			if !pred(n) {
				f = n
				break
			}
			t = n
			if step < 1<<62 {
				step <<= 1
			}
		}
	} else {
		f = g
		for {
			if f == hi {
				return 0, false
			}
			n := hi
			if uint64(hi)-uint64(f) > step {
				n = int64(uint64(f) + step)
			}
			if pred(n) {
				t = n
				break
			}
			f = n
			if step < 1<<62 {
				step <<= 1
			}
		}
	}
	for uint64(t)-uint64(f) > 1 {
		mid := int64(uint64(f) + (uint64(t)-uint64(f))/2)
		if pred(mid) {
			t = mid
		} else {
			f = mid
		}
	}
	return t, true
}

// targetBound is one end of an interval of target values; unset means unbounded.
type targetBound struct {
	v         ontology.Value
	open, set bool
}

// keyRange is the keys lo..hi, inclusive. loOpen and hiOpen say how to
// write its ends: open as "> the key below", closed as ">= lo".
type keyRange struct {
	lo, hi         int64
	loOpen, hiOpen bool
}

// preimage returns the keys whose converted values lie between lo and hi;
// ok is false when there are none.
func (nd *numDomain) preimage(lo, hi targetBound) (r keyRange, ok bool) {
	r = keyRange{lo: nd.min, hi: nd.max}
	above := func(b targetBound) func(int64) bool { // converted value beyond lower bound b
		return func(k int64) bool {
			c := nd.cmp(k, b.v)
			return c > 0 || c == 0 && !b.open
		}
	}
	below := func(b targetBound) func(int64) bool { // converted value within upper bound b
		return func(k int64) bool {
			c := nd.cmp(k, b.v)
			return c < 0 || c == 0 && !b.open
		}
	}
	not := func(p func(int64) bool) func(int64) bool { return func(k int64) bool { return !p(k) } }
	// A prefix of the keys ends where p (true on the prefix) first fails.
	prefixEnd := func(p func(int64) bool, guess int64) bool {
		k, found := nd.first(not(p), guess)
		if !found {
			return true
		}
		if k == nd.min {
			return false
		}
		r.hi = k - 1
		return true
	}
	if nd.dir > 0 {
		if lo.set {
			k, found := nd.first(above(lo), nd.guess(lo.v))
			if !found {
				return r, false
			}
			r.lo, r.loOpen = k, lo.open
		}
		if hi.set {
			if !prefixEnd(below(hi), nd.guess(hi.v)) {
				return r, false
			}
			r.hiOpen = hi.open
		}
	} else {
		if hi.set {
			k, found := nd.first(below(hi), nd.guess(hi.v))
			if !found {
				return r, false
			}
			r.lo, r.loOpen = k, hi.open
		}
		if lo.set {
			if !prefixEnd(above(lo), nd.guess(lo.v)) {
				return r, false
			}
			r.hiOpen = lo.open
		}
	}
	return r, r.lo <= r.hi
}

// pred writes a non-empty key range as a predicate on the source attribute.
func (nd *numDomain) pred(r keyRange) Predicate {
	n := Attr(nd.c.From)
	loFree, hiFree := r.lo == nd.min, r.hi == nd.max
	lo, hi := nd.value(r.lo), nd.value(r.hi)
	if r.loOpen && !loFree {
		lo = nd.value(r.lo - 1)
	}
	if r.hiOpen && !hiFree {
		hi = nd.value(r.hi + 1)
	}
	switch {
	case r.lo == r.hi:
		return n.EQ(nd.value(r.lo))
	case loFree && hiFree:
		return n.Exists()
	case loFree && r.hiOpen:
		return n.LT(hi)
	case loFree:
		return n.LE(hi)
	case hiFree && r.loOpen:
		return n.GT(lo)
	case hiFree:
		return n.GE(lo)
	}
	return n.Range(lo, hi, r.loOpen, r.hiOpen)
}

// points returns the merged preimages of the numeric values vs, sorted.
func (nd *numDomain) points(vs ...ontology.Value) []keyRange {
	var rs []keyRange
	for _, v := range vs {
		if !v.Kind().Numeric() {
			continue
		}
		b := targetBound{v: v, set: true}
		if r, ok := nd.preimage(b, b); ok {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b keyRange) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	var out []keyRange
	for _, r := range rs {
		if m := len(out) - 1; m >= 0 && r.lo <= out[m].hi {
			out[m].hi = max(out[m].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// union holds on the keys of rs (sorted, disjoint).
func (nd *numDomain) union(rs []keyRange) dnf {
	var singles []ontology.Value
	var out dnf
	for _, r := range rs {
		if r.lo == r.hi {
			singles = append(singles, nd.value(r.lo))
		} else {
			out = append(out, []Predicate{nd.pred(r)})
		}
	}
	if len(singles) > 0 {
		out = append(dnf{{inPred(Attr(nd.c.From), singles)}}, out...)
	}
	return out
}

// complement holds on the present keys outside rs (sorted, disjoint).
func (nd *numDomain) complement(rs []keyRange) dnf {
	n := Attr(nd.c.From)
	singles := true
	var vs []ontology.Value
	for _, r := range rs {
		singles = singles && r.lo == r.hi
		vs = append(vs, nd.value(r.lo))
	}
	switch {
	case len(rs) == 0:
		return dnf{{n.Exists()}}
	case singles:
		return dnf{{notInPred(n, vs)}}
	}
	var out dnf
	next, more := nd.min, true // next: the first key not yet covered
	for _, r := range rs {
		if more && r.lo > next {
			out = append(out, []Predicate{nd.pred(keyRange{lo: next, hi: r.lo - 1, loOpen: true, hiOpen: true})})
		}
		if r.hi == nd.max {
			more = false
		} else {
			next = r.hi + 1
		}
	}
	if more {
		out = append(out, []Predicate{nd.pred(keyRange{lo: next, hi: nd.max, loOpen: true})})
	}
	return out
}

// dnf inverts p through the conversion.
func (nd *numDomain) dnf(p *Predicate) dnf {
	n := Attr(nd.c.From)
	num := p.Value.Kind().Numeric()
	side := func(lo, hi targetBound) dnf {
		if r, ok := nd.preimage(lo, hi); ok {
			return dnf{{nd.pred(r)}}
		}
		return nil
	}
	switch p.Op {
	case OpExists:
		return dnf{{n.Exists()}}
	case OpNotExists:
		return dnf{{n.NotExists()}}
	case OpEQ:
		if !num {
			return nil
		}
		return nd.union(nd.points(p.Value))
	case OpNE:
		if !num {
			return dnf{{n.Exists()}}
		}
		return nd.complement(nd.points(p.Value))
	case OpLT, OpLE:
		if !num {
			return nil
		}
		return side(targetBound{}, targetBound{v: p.Value, open: p.Op == OpLT, set: true})
	case OpGT, OpGE:
		if !num {
			return nil
		}
		return side(targetBound{v: p.Value, open: p.Op == OpGT, set: true}, targetBound{})
	case OpRange:
		if !num || !p.Hi.Kind().Numeric() {
			return nil
		}
		return side(targetBound{v: p.Value, open: p.LoOpen, set: true}, targetBound{v: p.Hi, open: p.HiOpen, set: true})
	case OpIn:
		return nd.union(nd.points(p.Set...))
	case OpNotIn:
		return nd.complement(nd.points(p.Set...))
	}
	return nil // prefix, suffix and contains never hold for numbers
}

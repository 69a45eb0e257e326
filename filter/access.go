package filter

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/sion-go/sion/ontology"
)

// Access: a filter's postings, derived from its record, which ends with
// the access predicates the index chose for it (Index.chooseAccess), so
// that the index need not keep them per filter.

// Access kinds of a record (record.go).
const (
	accNone   = iota // no postings: the filter can never match
	accDirect        // the group's direct list
	accAlways        // the group's always list
	accPreds         // access predicates
)

// postingsOf appends to ps the postings of the filter with record rec,
// in the order the index entered them, and returns it: those its access
// names (record.go), as accessFor made them. Their strings are views of
// rec. Cost: a pass over the record and, for a set, a look-up per
// member.
func postingsOf(rec []byte, ps []posting) []posting {
	h := readHead(rec)
	var buf [16]int
	at := buf[:0] // where each predicate starts
	var p rpred
	j := h.body
	for range h.npreds {
		at = append(at, j)
		j = readPred(rec, j, &p)
	}
	return accessPostings(rec, at, j, ps)
}

// accessPostings is postingsOf for the record rec whose predicates start
// at at and whose access starts at j. (Add, which has the filter, derives
// the same postings from it: see addedPostings.)
func accessPostings(rec []byte, at []int, j int, ps []posting) []posting {
	var p rpred
	switch rec[j] {
	case accNone:
		return ps
	case accDirect:
		return append(ps, posting{kind: postDirect, implied: -1})
	case accAlways:
		return append(ps, posting{kind: postAlways, implied: -1})
	}
	n, w := binary.Uvarint(rec[j+1:])
	j += 1 + w
	for range n {
		code, w := binary.Uvarint(rec[j:])
		j += w
		i := int(code >> 1)
		readPred(rec, at[i], &p)
		if code&1 != 0 {
			ps = append(ps, posting{kind: postPresent, key: p.key, implied: -1})
			continue
		}
		ps = appendAccess(ps, rec, &p, i)
	}
	return ps
}

// appendAccess appends to ps the postings through which predicate i, p,
// of record rec gives access by itself (not by presence; see accessFor),
// and returns it.
func appendAccess(ps []posting, rec []byte, p *rpred, i int) []posting {
	if p.src == SourceXPath {
		// The XPath key's value is whether the predicate holds.
		t := ontology.Bool(true)
		return append(ps, posting{kind: postEq, key: p.key, implied: int32(i), vk: t.Key(), v: t})
	}
	switch p.op {
	case OpEQ:
		return append(ps, posting{kind: postEq, key: p.key, implied: int32(i), vk: p.lo.Key(), v: p.lo})
	case OpIn:
		first := len(ps)
		var seen map[ontology.ValueKey]bool // for large sets; small ones look back
		p.members(rec, func(m ontology.Value) {
			vk := m.Key()
			if p.nset > 16 {
				if seen == nil {
					seen = map[ontology.ValueKey]bool{}
				}
				if seen[vk] {
					return
				}
				seen[vk] = true
			} else {
				for _, q := range ps[first:] {
					if q.vk == vk {
						return
					}
				}
			}
			ps = append(ps, posting{kind: postEq, key: p.key, implied: int32(i), vk: vk, v: m})
		})
		return ps
	case OpRange:
		mask, base, _, _ := smallSet(&Predicate{Op: OpRange, Value: p.lo, Hi: p.hi, LoOpen: p.loOpen, HiOpen: p.hiOpen})
		span := max(1, 64-bits.LeadingZeros64(mask))
		return append(ps, posting{kind: postRange, key: p.key, implied: -1, via: uint8(min(i+1, math.MaxUint8)), span: uint8(span), bucket: int32(base >> rangeShift)})
	case OpPrefix:
		return append(ps, posting{kind: postPrefix, key: p.key, implied: int32(i), s: p.lo.Str()})
	case OpSuffix:
		return append(ps, posting{kind: postSuffix, key: p.key, implied: int32(i), s: p.lo.Str()})
	}
	return append(ps, posting{kind: postPresent, key: p.key, implied: -1})
}

// addedPostings is accessPostings for the filter Add is adding, f (the
// keys of its predicates keys), whose record rec has its access at j: it
// derives each access predicate's postings from f's predicate
// (predAccess) rather than reading back the predicate just written to
// rec, which cost about 5 % of a W-SPARSE Add at 10⁶. It gives the same
// postings in the same order, which Remove derives again from the record
// (postingsOf); their strings are f's, not views of rec.
func addedPostings(f *Filter, keys []uint32, rec []byte, j int, ps []posting) []posting {
	switch rec[j] {
	case accNone:
		return ps
	case accDirect:
		return append(ps, posting{kind: postDirect, implied: -1})
	case accAlways:
		return append(ps, posting{kind: postAlways, implied: -1})
	}
	n, w := binary.Uvarint(rec[j+1:])
	j += 1 + w
	for range n {
		code, w := binary.Uvarint(rec[j:])
		j += w
		i := int(code >> 1)
		if code&1 != 0 {
			ps = append(ps, posting{kind: postPresent, key: keys[i], implied: -1})
			continue
		}
		ps = predAccess(ps, &f.preds[i], keys[i], i)
	}
	return ps
}

// predAccess is appendAccess for predicate i, p, of a Filter, whose key
// is key.
func predAccess(ps []posting, p *Predicate, key uint32, i int) []posting {
	if p.Operand.Source == SourceXPath {
		t := ontology.Bool(true)
		return append(ps, posting{kind: postEq, key: key, implied: int32(i), vk: t.Key(), v: t})
	}
	switch p.Op {
	case OpEQ:
		return append(ps, posting{kind: postEq, key: key, implied: int32(i), vk: p.Value.Key(), v: p.Value})
	case OpIn:
		first := len(ps)
		var seen map[ontology.ValueKey]bool // for large sets; small ones look back
	members:
		for _, m := range p.Set {
			vk := m.Key()
			if len(p.Set) > 16 {
				if seen == nil {
					seen = map[ontology.ValueKey]bool{}
				}
				if seen[vk] {
					continue
				}
				seen[vk] = true
			} else {
				for _, q := range ps[first:] {
					if q.vk == vk {
						continue members
					}
				}
			}
			ps = append(ps, posting{kind: postEq, key: key, implied: int32(i), vk: vk, v: m})
		}
		return ps
	case OpRange:
		mask, base, _, _ := smallSet(p)
		span := max(1, 64-bits.LeadingZeros64(mask))
		return append(ps, posting{kind: postRange, key: key, implied: -1, via: uint8(min(i+1, math.MaxUint8)), span: uint8(span), bucket: int32(base >> rangeShift)})
	case OpPrefix:
		return append(ps, posting{kind: postPrefix, key: key, implied: int32(i), s: p.Value.Str()})
	case OpSuffix:
		return append(ps, posting{kind: postSuffix, key: key, implied: int32(i), s: p.Value.Str()})
	}
	return append(ps, posting{kind: postPresent, key: key, implied: -1})
}

package filter

import (
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"

	"github.com/sion-go/sion/ontology"
)

// Posting lists: under which postings a filter is entered (its access
// predicates, chooseAccess; the postings they give are in access.go),
// what a list keeps of each filter (plist, lhead) and what its entry
// keeps for them (makeItem), and the lists of one copy of the index.
// Matching them is in match.go.

type postingKind uint8

const (
	postDirect postingKind = iota
	postAlways
	postPresent
	postEq
	postPrefix
	postSuffix
	postRange
)

// posting is one place a filter is entered: a list of its group. The
// index does not keep them; postingsOf derives them from the record.
type posting struct {
	kind postingKind
	// head and head2 are, plus one, the predicates the list's head tests
	// as bitmaps (see headPred), or 0.
	head, head2 uint8
	// via is, plus one, the range predicate of a postRange posting, and
	// span the number of integers its bitmap covers (see smallSet).
	via, span uint8
	key       uint32
	// implied is the predicate that holds whenever an event reaches the
	// posting (postEq, postPrefix, postSuffix), or -1.
	implied int32
	bucket  int32             // postRange: the bitmap's base >> rangeShift
	vk      ontology.ValueKey // postEq
	v       ontology.Value    // postEq: the value vk is the key of
	s       string            // postPrefix, postSuffix
}

// Flags of an entry's item.
const (
	// itemComplete: the item's predicates are all the filter's but the
	// implied one, so a filter that passes them matches, its record
	// unread.
	itemComplete = 1 << iota
	itemMulti    // reachable through several postings: deduplicate
)

// makeItem sets the item of e (drafted as dr, its postings ps): of a
// match-all filter, up to four of its predicates in compact form, other
// than the one its postings imply (they all imply the same one, or none),
// that have a fast form, most selective first (equality, set membership,
// comparisons, exclusions, presence). Posting lists check them for the
// filters their heads let through, before the filter is read.
func makeItem(e *entry, dr *draft, ps []posting) {
	if dr.multi {
		e.flags |= itemMulti
	}
	if dr.f.mode != ModeAll || len(ps) == 0 {
		return
	}
	implied := ps[0].implied
	rest, complete := 0, true
	var cand [4][4]fastPred // by rank
	var nc [4]int
	for i := range dr.f.preds {
		p := &dr.f.preds[i]
		if int32(i) == implied || p.Op == OpTrue {
			continue
		}
		rest++
		fp, ok := makeFast(p, dr.keys[i])
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
			if int(e.nfast) < len(e.fast) {
				e.fast[e.nfast] = fp
				e.nfast++
			}
		}
	}
	if complete && rest == int(e.nfast) && len(dr.f.preds) < 1<<16 {
		e.flags |= itemComplete
		e.npreds = uint16(len(dr.f.preds))
	}
}

// keyPostings is the lists of one key in one group of one copy: the
// lists themselves are shared by both copies (see plist), the maps and
// slices that lead to them are each copy's own, changed only through
// Index.write.
type keyPostings struct {
	key        uint32
	present    *plist
	eq         map[ontology.ValueKey]*plist
	prefix     map[string]*plist
	suffix     map[string]*plist
	prefixLens []lenCount // sorted by length
	suffixLens []lenCount
	// ranges holds small-domain ranges by the base of their bitmap >>
	// rangeShift, less rangeLo, and rangeSpans counts them by span
	// (sorted), so that an event visits only the buckets of ranges that
	// can hold its value. Memory: a pointer per bucket between the lowest
	// and the highest in use.
	ranges     []*plist
	rangeLo    int32
	rangeSpans []lenCount
	// eqSmall holds the lists of eq whose values are the integers
	// 0…eqSmallLen−1 (ints, and floats of integral value, as their
	// ValueKey), by value, so that the writer (lookup) and a reader with
	// an attribute's small integer (probe) find them without hashing;
	// eq holds them too. Memory: at most eqSmallLen pointers per key of a
	// group, whatever the filters.
	eqSmall []*plist
}

type lenCount struct{ n, count int }

// eqSmallLen bounds the values keyPostings.eqSmall holds.
const eqSmallLen = 64

// smallInt returns v as an integer 0…eqSmallLen−1, when it is one (see
// popInt): the values whose equality lists are in eqSmall.
func smallInt(v ontology.Value) (int, bool) {
	n, ok := popInt(v)
	return int(n), ok && n >= 0 && n < eqSmallLen
}

// Limits of the access engine: a filter's postings (a set predicate
// posts once per value) and the longest affix entered by hash.
const (
	maxPostings  = 1 << 16
	maxAffixScan = 64
	rangeShift   = 2 // a range bucket holds ranges whose bitmaps start at 4 consecutive integers
)

// candidate is a way accessFor found to reach a filter through
// predicate pred: its estimated cost, and how many postings it takes
// (by the predicate itself, or by its operand's presence).
type candidate struct {
	pred    int
	cost    float64
	posts   int
	present bool
}

// chooseAccess decides under which postings e (drafted as dr) is
// entered, from the group's popularity counts, and appends their access
// (see record.go) to rec, e's record. mu must be held.
func (x *Index) chooseAccess(e *entry, dr *draft, rec []byte) []byte {
	f := dr.f
	var buf [16]candidate // on the stack unless f has many predicates
	cands := buf[:0]
	freeN, freeW := 0, 0.0 // predicates that can hold without their operand
	dense := x.hasDense(int(e.group))
	for i := range f.preds {
		p := &f.preds[i]
		if p.Op == OpTrue || p.Op == OpNotExists && p.Operand.Source != SourceXPath {
			freeN++
			freeW += p.weight()
			continue
		}
		cands = append(cands, x.accessFor(dr.gp, int(e.group), dense, dr.keys[i], i, p))
	}
	if len(cands) == 0 && freeN == len(f.preds) {
		// Only true and not-exists predicates.
		if freeN == 0 || allTrue(f) {
			w := 0.0
			for i := range f.preds {
				w += f.preds[i].weight()
			}
			ok, score := f.decide(len(f.preds), w)
			if !ok {
				return append(rec, accNone) // it can never match
			}
			e.fast[len(e.fast)-1].lo = score // see entry.score
			return append(rec, accDirect)
		}
	}
	var need []candidate
	switch f.mode {
	case ModeAll:
		if len(cands) > 0 {
			best := 0
			for i := range cands {
				if cands[i].cost < cands[best].cost {
					best = i
				}
			}
			need = cands[best : best+1]
		}
	case ModeAtLeast:
		if r := f.atLeast - freeN; r > 0 {
			slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(a.cost, b.cost) })
			need = cands[:len(cands)-r+1]
		}
	case ModeScore:
		if freeW < f.threshold {
			// Leave out the costliest predicates while their weight, with
			// the free weight, stays below the threshold.
			slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(b.cost, a.cost) })
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
		return append(rec, accAlways)
	}
	n := 0
	for _, c := range need {
		n += c.posts
	}
	rec = binary.AppendUvarint(append(rec, accPreds), uint64(len(need)))
	for _, c := range need {
		code := uint64(c.pred) << 1
		if n > maxPostings || c.present {
			code |= 1 // by presence
		}
		rec = binary.AppendUvarint(rec, code)
	}
	dr.multi = len(need) > 1
	if f.mode == ModeAll {
		var vs [sigWords]uint64
		for i := range f.preds {
			p := &f.preds[i]
			if p.Operand.Source == SourceAttr && p.Op != OpNotExists && p.Op != OpTrue {
				dr.sig |= 1 << (dr.keys[i] & 63)
				if p.Op == OpEQ {
					vs[sigWord(dr.keys[i])] |= valueBit(dr.keys[i], p.Value)
				}
			}
		}
		for w := range vs {
			if bits.OnesCount64(vs[w]) > bits.OnesCount64(dr.vsig) {
				dr.vsig, dr.vword = vs[w], uint8(w)
			}
		}
	}
	return rec
}

// chooseHeads sets the head predicate of each of postings ps of
// match-all filter e (drafted as dr; see headPred). mu must be held.
func (x *Index) chooseHeads(e *entry, dr *draft, ps []posting) {
	if dr.f.mode != ModeAll {
		return
	}
	for j := range ps {
		p := &ps[j]
		not := p.implied // a range bucket nearly implies its range
		if p.via != 0 {
			not = int32(p.via) - 1
		}
		if j > 0 && p.implied == ps[j-1].implied && p.via == ps[j-1].via {
			p.head, p.head2 = ps[j-1].head, ps[j-1].head2
		} else {
			p.head, p.head2 = x.headPred(e, dr, not)
		}
	}
}

// hasDense reports whether group g has a dense engine. mu must be held.
func (x *Index) hasDense(g int) bool {
	gr := x.inst[0].groups[g]
	return gr != nil && (gr.dense[0] != nil || gr.dense[1] != nil)
}

// densePresent returns how many predicates of the filters in group g's
// dense engines test key: they count toward the key's popularity as the
// filters in postings do. It reads the engines' counts by key (keyPre),
// not keyAttr and npre: the cost model asks it for every predicate of
// every Add, and a map look-up each cost about 2 % of a W-SPARSE Add at
// 10⁶. mu must be held.
func (x *Index) densePresent(g int, key uint32) int32 {
	gr := x.inst[0].groups[g]
	if gr == nil {
		return 0
	}
	n := int32(0)
	for _, dn := range gr.dense {
		if dn != nil && int(key) < len(dn.keyPre) {
			n += dn.keyPre[key]
		}
	}
	return n
}

// anyMask returns the value signature bits of the members of one set
// membership predicate on an attribute of match-all filter dr, other
// than the one posting ps[j] implies, and their word: an event matches
// the filter only if its signature has one of them. Of several, it takes
// the smallest set; with none, it returns 0.
func anyMask(dr *draft, ps []posting, j int) (uint64, uint8) {
	if dr.f.mode != ModeAll {
		return 0, 0
	}
	var best uint64
	var word uint8
	for i := range dr.f.preds {
		p := &dr.f.preds[i]
		if p.Op != OpIn || p.Operand.Source != SourceAttr || int32(i) == ps[j].implied {
			continue
		}
		var m uint64
		for _, v := range p.Set {
			m |= valueBit(dr.keys[i], v)
		}
		if best == 0 || bits.OnesCount64(m) < bits.OnesCount64(best) {
			best, word = m, sigWord(dr.keys[i])
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

// accessFor returns the cheapest way to reach filters of group g through
// predicate i (p), with key key; gp is the group's popularity counts,
// and dense whether the group may have a dense engine (see hasDense).
// The cost estimates how many filters the posting's list will hand to
// verification per event: presence of the
// operand costs the number of predicates on it; a value costs that number
// times the value's share among the equalities on the operand; an affix a
// quarter of presence. The candidate names no postings: appendAccess
// derives the same ones from the record once the choice is made.
func (x *Index) accessFor(gp *groupPop, g int, dense bool, key uint32, i int, p *Predicate) candidate {
	st := gp.stat(key)
	var stPresent, stEqAll int32
	if st != nil {
		stPresent, stEqAll = st.present, st.eqAll
	}
	if dense {
		stPresent += x.densePresent(g, key)
	}
	present := float64(stPresent)
	eqAll := float64(max(1, stEqAll))
	eq := func(v ontology.Value) float64 {
		return 1 + present*float64(st.eq(v))/eqAll
	}
	pres := candidate{pred: i, cost: 1 + present, posts: 1, present: true}
	if p.Operand.Source == SourceXPath {
		// The XPath key's value is whether the predicate holds.
		return candidate{pred: i, cost: 1 + present/2, posts: 1}
	}
	switch p.Op {
	case OpEQ:
		return candidate{pred: i, cost: eq(p.Value), posts: 1}
	case OpIn:
		c := candidate{pred: i}
		var seen map[ontology.ValueKey]bool // for large sets; small ones look back
	members:
		for k, m := range p.Set {
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
				for _, q := range p.Set[:k] {
					if q.Key() == vk {
						continue members
					}
				}
			}
			c.cost += eq(m)
			c.posts++
		}
		if pres.cost < c.cost {
			return pres
		}
		return c
	case OpRange:
		mask, base, _, ok := smallSet(p)
		if !ok {
			return pres
		}
		// An event reaches the ranges whose bucket can hold its value:
		// about those whose values include it, and a bucket's width more.
		span := max(1, 64-bits.LeadingZeros64(mask))
		cost := 1 + present/2 // no equality on the key to estimate shares from
		if stEqAll > 0 {
			n := int32(0)
			for v := base; v < base+int64(span)+1<<rangeShift; v++ {
				n += st.eqInt(v)
			}
			cost = 1 + present*float64(n)/float64(eqAll)
		}
		if pres.cost <= cost {
			return pres
		}
		return candidate{pred: i, cost: cost, posts: 1}
	case OpPrefix, OpSuffix:
		if len(p.Value.Str()) > maxAffixScan {
			return pres
		}
		return candidate{pred: i, cost: 1 + present/4, posts: 1}
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

// lookup returns the list of posting p in group g of copy d, or nil.
func (d *data) lookup(g *group, p posting) *plist {
	switch p.kind {
	case postDirect:
		return g.direct
	case postAlways:
		return g.always
	}
	kp := g.byKey[p.key]
	if kp == nil {
		return nil
	}
	switch p.kind {
	case postPresent:
		return kp.present
	case postRange:
		if b := int(p.bucket - kp.rangeLo); b >= 0 && b < len(kp.ranges) {
			return kp.ranges[b]
		}
		return nil
	case postEq:
		if n, ok := smallInt(p.v); ok {
			if n < len(kp.eqSmall) {
				return kp.eqSmall[n]
			}
			return nil
		}
		return kp.eq[p.vk]
	case postPrefix:
		return kp.prefix[p.s]
	}
	return kp.suffix[p.s]
}

// attach makes l, new, the list of posting p in group g of copy d.
func (d *data) attach(g *group, p posting, l *plist) {
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
	switch p.kind {
	case postPresent:
		kp.present = l
	case postRange:
		switch {
		case len(kp.ranges) == 0:
			kp.ranges, kp.rangeLo = []*plist{nil}, p.bucket
		case p.bucket < kp.rangeLo:
			kp.ranges = append(make([]*plist, kp.rangeLo-p.bucket), kp.ranges...)
			kp.rangeLo = p.bucket
		}
		for int(p.bucket-kp.rangeLo) >= len(kp.ranges) {
			kp.ranges = append(kp.ranges, nil)
		}
		kp.ranges[p.bucket-kp.rangeLo] = l
	case postEq:
		if kp.eq == nil {
			kp.eq = map[ontology.ValueKey]*plist{}
		}
		vk := p.vk
		if p.v.Kind() == ontology.KindString {
			// Not a view of the record: its block may go.
			vk = ontology.String(strings.Clone(p.v.Str())).Key()
		}
		kp.eq[vk] = l
		if n, ok := smallInt(p.v); ok {
			for n >= len(kp.eqSmall) {
				kp.eqSmall = append(kp.eqSmall, nil)
			}
			kp.eqSmall[n] = l
		}
	default:
		m, lens := &kp.prefix, &kp.prefixLens
		if p.kind == postSuffix {
			m, lens = &kp.suffix, &kp.suffixLens
		}
		if *m == nil {
			*m = map[string]*plist{}
		}
		(*m)[strings.Clone(p.s)] = l // not a view of the record
		*lens = addLen(*lens, len(p.s))
	}
}

// swap puts l in place of the list of posting p in group g of copy d
// (see plist: a list that moved).
func (d *data) swap(g *group, p posting, l *plist) {
	switch p.kind {
	case postDirect:
		g.direct, g.directEnts = l, l.ents
		return
	case postAlways:
		g.always, g.alwaysEnts = l, l.ents
		return
	}
	kp := g.byKey[p.key]
	switch p.kind {
	case postPresent:
		kp.present = l
	case postRange:
		kp.ranges[p.bucket-kp.rangeLo] = l
	case postEq:
		kp.eq[p.vk] = l
		if n, ok := smallInt(p.v); ok {
			kp.eqSmall[n] = l
		}
	case postPrefix:
		kp.prefix[p.s] = l
	case postSuffix:
		kp.suffix[p.s] = l
	}
}

// detach takes the list of posting p, left empty, out of group g of copy
// d, and the key's postings when the key has no list left. It does
// nothing when the list is not there (detached already).
func (d *data) detach(g *group, p posting) {
	if p.kind == postDirect || p.kind == postAlways || d.lookup(g, p) == nil {
		return
	}
	kp := g.byKey[p.key]
	switch p.kind {
	case postPresent:
		kp.present = nil
	case postEq:
		delete(kp.eq, p.vk)
		if n, ok := smallInt(p.v); ok {
			kp.eqSmall[n] = nil
			for k := len(kp.eqSmall); k > 0 && kp.eqSmall[k-1] == nil; k-- {
				kp.eqSmall = kp.eqSmall[:k-1]
			}
		}
	case postRange:
		kp.ranges[p.bucket-kp.rangeLo] = nil
		kp.trimRanges()
	case postPrefix:
		delete(kp.prefix, p.s)
		kp.prefixLens = dropLen(kp.prefixLens, len(p.s))
	case postSuffix:
		delete(kp.suffix, p.s)
		kp.suffixLens = dropLen(kp.suffixLens, len(p.s))
	}
	if kp.present != nil || len(kp.eq) > 0 || len(kp.prefix) > 0 || len(kp.suffix) > 0 || len(kp.ranges) > 0 || len(kp.rangeSpans) > 0 {
		return
	}
	delete(g.byKey, p.key)
	g.attrs = dropKP(g.attrs, kp)
	g.pay = dropKP(g.pay, kp)
}

// trimRanges drops the empty buckets at either end of kp.ranges.
func (kp *keyPostings) trimRanges() {
	r := kp.ranges
	for len(r) > 0 && r[len(r)-1] == nil {
		r = r[:len(r)-1]
	}
	for len(r) > 0 && r[0] == nil {
		r = r[1:]
		kp.rangeLo++
	}
	if len(r) == 0 {
		r = nil
	}
	kp.ranges = r
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

package filter

import (
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/antchfx/xmlquery"
	"github.com/tidwall/gjson"

	"github.com/sion-go/sion/ontology"
)

// scratch is the per-call state of Match, pooled so that steady-state
// matching allocates nothing.
type scratch struct {
	epoch   uint32
	stamp   []uint32         // by key: == epoch when vals[key] is known for this event
	vals    []val            // by key
	seen    []uint32         // by slot: == epoch when the filter was verified
	present []uint32         // attribute keys present in this event
	ipos    []int64          // by key: headPos of the attribute's value, posAbsent when not in this event
	cand    []*entry         // the entries a group's list heads let through (verifyList), checked at the end of the group's visit (items)
	touched uint32           // what touching lists and entries read (scanLists, items), kept so that the reads stay
	lists   []*plist         // the lists a group's probes reach, read together at the end of its visit (scanLists)
	sig     uint64           // bit k%64 for every present attribute key k
	vsig    [sigWords]uint64 // valueBit of every present attribute, in its word
	out     []hit
	hide    map[uint32]bool       // the group's hidden slots (group.hide)
	u       []uint64              // dense engines' failed-filter bitset
	srcs    []bitset              // bitsets to OR into u
	order   []uint64              // the order to OR srcs in (see orderKey)
	planes  [countPlanes][]uint64 // counting engines' bit-sliced counters
	unsure  []uint64              // counting engines: slots whose count may be short

	ev      Event
	kind    payloadKind
	data    []byte
	xml     *xmlquery.Node
	xmlDone bool
}

type hit struct {
	id    uint64
	score float64
}

// Match calls fn once for every filter in the index that ev matches, with
// the filter's ID and score (see Mode). The type test follows the
// ontology: a filter on type T matches events of T and of every descendant
// of T; an AnyType filter matches every event, including events whose type
// the ontology does not know (those match nothing else), except events
// whose type name begins with ontology.ReservedPrefix (sion's own control
// traffic, known to the ontology or not: a later version's), which only
// filters naming them or an ancestor match. Event attribute
// names are taken as canonical (resolve synonyms before, at the edge).
//
// fn is called after the index has been read, so it may call Add and
// Remove; the order of calls is unspecified. ev and fn must not be nil
// (Match panics with a message saying so). A panic in ev's methods or in
// fn goes on to the caller and leaves the index as it was, usable by
// readers and writers. Match is safe for concurrent
// use and never waits for writers. It allocates nothing in steady state,
// except to parse an XML payload (once per event, when some filter reached
// needs it) and evaluate XPath over it, and what gjson allocates for JSON
// strings with escapes and for JSON numbers beyond float64's range or
// precision (1e400, 30-digit integers).
//
// Each filter that the postings do not settle is verified from its record
// in O(its predicates): a set predicate (∈, ∉) of m members costs a scan
// of them for m ≤ 8 and a binary search, O(log m) members read, above.
func (x *Index) Match(ev Event, fn func(id uint64, score float64)) {
	if ev == nil || fn == nil {
		panic("filter: Index.Match with a nil event or callback")
	}
	s := x.pool.Get().(*scratch)
	x.read(s, ev)
	for _, h := range s.out {
		fn(h.id, h.score)
	}
	s.out = s.out[:0]
	s.ev, s.data, s.xml = nil, nil, nil
	x.pool.Put(s)
}

// read matches ev into s.out as a reader of the current copy: the copy's
// reader count is held for the pass and given back even when ev's methods
// panic, so that a caller who recovers leaves writers able to go on (the
// panic goes on to the caller; s is dropped with it).
func (x *Index) read(s *scratch, ev Event) {
	vi := x.version.Load()
	x.readers[vi].n.Add(1)
	defer x.readers[vi].n.Add(-1)
	s.match(x, x.inst[x.side.Load()], ev)
}

func (s *scratch) match(x *Index, d *data, ev Event) {
	s.epoch++
	if s.epoch == 0 {
		clear(s.stamp)
		clear(s.seen)
		s.epoch = 1
	}
	for _, k := range s.present {
		s.ipos[k] = posAbsent // the last event's
	}
	if n := len(d.keys); len(s.stamp) < n {
		s.stamp = append(s.stamp, make([]uint32, n-len(s.stamp))...)
		s.vals = append(s.vals, make([]val, n-len(s.vals))...)
		for len(s.ipos) < n {
			s.ipos = append(s.ipos, posAbsent)
		}
	}
	if n := int(x.nslots.Load()); len(s.seen) < n {
		s.seen = append(s.seen, make([]uint32, n-len(s.seen))...)
	}
	s.ev = ev
	ct, data := ev.Payload()
	s.kind, s.data, s.xml, s.xmlDone = classify(ct, data), data, nil, false
	s.present = s.present[:0]
	s.sig, s.vsig = 0, [sigWords]uint64{}
	for i, n := 0, ev.NumAttrs(); i < n; i++ {
		name, v := ev.Attr(i)
		k, ok := d.attrKeys[name]
		if !ok || s.stamp[k] == s.epoch {
			continue // unknown, or a repeated name: the first counts, as in Eval
		}
		s.stamp[k] = s.epoch
		if !v.IsValid() {
			s.vals[k] = val{} // no value: missing, as in Eval, whatever follows
			continue
		}
		s.vals[k] = val{v: v, present: true}
		s.present = append(s.present, k)
		s.ipos[k] = headPos(v)
		s.sig |= 1 << (k & 63)
		if !v.IsNaN() {
			s.vsig[sigWord(k)] |= valueBit(k, v)
		}
	}

	name := ev.EventType()
	t, known := x.ont.Lookup(name)
	if anyTypeMatches(t, known, name) {
		s.visit(d, d.groups[0])
	}
	if known {
		for _, a := range x.ont.Ancestors(t.ID) {
			s.visit(d, d.groups[a+1])
		}
	}
}

// value returns the operand value of key k for this event, extracting a
// payload path the first time it is asked for.
func (s *scratch) value(d *data, k uint32) val {
	if s.stamp[k] == s.epoch {
		return s.vals[k]
	}
	var v val
	switch ki := &d.keys[k]; ki.name.src {
	case SourceJSON:
		if s.kind == payloadJSON {
			// A string view of the payload, not a copy: the event's payload
			// does not change during Match (Event's contract), and the
			// value is used only during this Match.
			v = jsonValue(gjson.Get(unsafe.String(unsafe.SliceData(s.data), len(s.data)), ki.name.name))
		}
	case SourceXPath:
		v = val{v: boolValue(s.xpathTrue(ki)), present: true}
	}
	s.stamp[k] = s.epoch
	s.vals[k] = v
	return v
}

func (s *scratch) xpathTrue(ki *keyInfo) bool {
	if s.kind != payloadXML {
		return false
	}
	if !s.xmlDone {
		s.xml, s.xmlDone = parseXML(s.data), true
	}
	if s.xml == nil {
		return false
	}
	return ki.x.holds(s.xml)
}

func (s *scratch) visit(d *data, g *group) {
	if g == nil {
		return
	}
	for i := range g.directEnts {
		e := g.directEnts[i].Load()
		if e == nil {
			break
		}
		if e != &tombstone {
			s.out = append(s.out, hit{id: e.id, score: e.score()})
		}
	}
	for _, dn := range g.dense {
		if dn != nil {
			dn.match(s, d)
		}
	}
	s.hide = g.hide
	for i := range g.alwaysEnts {
		e := g.alwaysEnts[i].Load()
		if e == nil {
			break
		}
		if e != &tombstone && (s.hide == nil || !s.hide[e.slot]) {
			s.verify(d, e)
		}
	}
	if len(g.attrs) <= len(s.present) {
		for _, kp := range g.attrs {
			if s.stamp[kp.key] == s.epoch && s.vals[kp.key].present {
				s.probe(d, kp, s.vals[kp.key])
			}
		}
	} else {
		for _, k := range s.present {
			if kp := g.byKey[k]; kp != nil {
				s.probe(d, kp, s.vals[k])
			}
		}
	}
	for _, kp := range g.pay {
		if v := s.value(d, kp.key); v.present {
			s.probe(d, kp, v)
		}
	}
	if len(s.lists) > 0 {
		s.scanLists(d)
	}
	if len(s.cand) > 0 {
		s.items(d)
	}
}

// scanLists reads the heads of the lists the group's probes gathered
// (verifyList), and empties s.lists. Each list is reached through a chain
// of loads (its struct, then its heads) and lists do not depend on one
// another, so it first touches every list's struct, then every list's
// first heads, so that the misses of all lists overlap instead of
// waiting one list after another: on W-SPARSE at 10⁶ filters (58 lists
// an event) that took about 30 % off Match. Touching more than the first
// line of each list gained nothing.
func (s *scratch) scanLists(d *data) {
	var t uint32
	for _, l := range s.lists {
		t += uint32(l.n.Load())
	}
	for _, l := range s.lists {
		if len(l.heads) > 0 {
			t += atomic.LoadUint32(&l.heads[0].kf)
		}
	}
	s.touched = t
	for _, l := range s.lists {
		s.verifyList(d, l)
	}
	clear(s.lists)
	s.lists = s.lists[:0]
}

// probe gathers, into s.lists, the posting lists of one key whose
// operand is present with value v that can hold filters v satisfies.
func (s *scratch) probe(d *data, kp *keyPostings, v val) {
	if kp.present != nil {
		s.lists = append(s.lists, kp.present)
	}
	if kp.eq != nil && v.v.IsValid() && !v.v.IsNaN() {
		var l *plist
		if n := s.ipos[kp.key]; n >= 0 && n < eqSmallLen {
			// An attribute's small integer (see headPos): its list, if
			// any, is in eqSmall, found without hashing.
			if n < int64(len(kp.eqSmall)) {
				l = kp.eqSmall[n]
			}
		} else {
			l = kp.eq[v.v.Key()]
		}
		if l != nil {
			s.lists = append(s.lists, l)
		}
	}
	if len(kp.rangeSpans) > 0 && v.v.Kind().Numeric() {
		s.scanRanges(d, kp, v.v)
	}
	if str := v.v.Str(); len(kp.prefixLens) > 0 && v.v.Kind() == kindString {
		for _, lc := range kp.prefixLens {
			if lc.n > len(str) {
				break
			}
			if l := kp.prefix[str[:lc.n]]; l != nil {
				s.lists = append(s.lists, l)
			}
		}
	}
	if str := v.v.Str(); len(kp.suffixLens) > 0 && v.v.Kind() == kindString {
		for _, lc := range kp.suffixLens {
			if lc.n > len(str) {
				break
			}
			if l := kp.suffix[str[len(str)-lc.n:]]; l != nil {
				s.lists = append(s.lists, l)
			}
		}
	}
}

// scanRanges gathers the lists of the small-domain ranges on kp's operand
// (numeric value v) whose bitmaps can hold v: those that start at most
// the widest span before v, by buckets of 1<<rangeShift starts.
func (s *scratch) scanRanges(d *data, kp *keyPostings, v ontology.Value) {
	span := int64(kp.rangeSpans[len(kp.rangeSpans)-1].n)
	var lo, hi int64 // the bitmap bases that can hold v
	switch pos := headPos(v); pos {
	case posAbsent, posOther:
		return // NaN, or beyond every bitmap
	case posFrac:
		f := math.Floor(v.Float())
		if !(f >= -posLimit && f <= posLimit) {
			return // ±Inf, or far away
		}
		lo, hi = int64(f)-span+1, int64(f)+1 // a base is at most one above v
	default:
		lo, hi = pos-span+1, pos
	}
	first := max(lo>>rangeShift-int64(kp.rangeLo), 0)
	last := min(hi>>rangeShift-int64(kp.rangeLo), int64(len(kp.ranges))-1)
	for b := first; b <= last; b++ {
		if l := kp.ranges[b]; l != nil {
			s.lists = append(s.lists, l)
		}
	}
}

// verifyList reads the heads of list l in order and keeps, in s.cand,
// the entries of the filters they let through, for items.
//
// The loop is bound by the heads' cache misses, and how many heads it
// has in flight depends on how few instructions each takes: the event's
// signatures and positions are loaded once, into locals, not from s for
// every head, and the signature, the test that rejects most heads, comes
// first (a removed posting is rare). On W-SPARSE at 10⁶ filters, one
// index, alternating chunks of 500 events (load 5–6, 2026-12-03): 0.906
// of the CPU per event (median of 60 chunk ratios 0.937), locals alone
// 0.918 (0.964); as separate binaries, 8 rounds, median 0.89.
func (s *scratch) verifyList(d *data, l *plist) {
	n := int(l.n.Load())
	heads := l.heads[:n]
	cand := s.cand
	if int(l.open.Load()) >= n {
		for i := range heads {
			if atomic.LoadUint32(&heads[i].kf)&headDead == 0 {
				cand = append(cand, heads[i].entry()) // no head can reject: payload predicates only, say
			}
		}
		s.cand = cand
		return
	}
	sig, ipos, vsig := s.sig, s.ipos, &s.vsig
	for i := range heads {
		h := &heads[i]
		if h.sig&^sig != 0 {
			continue // needs an attribute the event lacks
		}
		kf := atomic.LoadUint32(&h.kf)
		if kf&headDead != 0 {
			continue // removed
		}
		if kf&headBits != 0 {
			if !headHolds(h.mask, h.base, kf, ipos[kf&headKeyMask]) {
				continue // a small-domain predicate fails
			}
		} else if h.mask != 0 && h.mask&vsig[kf>>headAWord&3] == 0 {
			continue // none of a set's values
		}
		if kf2 := h.kf2; kf2&headBits != 0 {
			if !headHolds(h.w2, h.base2, kf2, ipos[kf2&headKeyMask]) {
				continue // a second small-domain predicate fails
			}
		} else if h.w2&^vsig[kf>>headVWord&3] != 0 {
			continue // needs an attribute value the event lacks
		}
		cand = append(cand, h.entry())
	}
	s.cand = cand
}

// items checks the items of the entries the group's lists let through
// (s.cand), and empties s.cand. The entries are scattered in memory and
// their loads do not depend on one another, so it first touches both
// cache lines of each (the item's start, and its last predicates with the
// ID), all lists' together, so that the misses overlap.
func (s *scratch) items(d *data) {
	if len(s.cand) > 1 {
		var t uint32
		for _, e := range s.cand {
			t += uint32(e.nfast) + uint32(e.id)
		}
		s.touched = t
	}
	for _, e := range s.cand {
		s.item(d, e)
	}
	clear(s.cand) // no entry kept alive by the pool
	s.cand = s.cand[:0]
}

// item checks the item of e, reached through a posting list, and the
// filter when its item does not hold all its predicates.
func (s *scratch) item(d *data, e *entry) {
	if !s.fastHolds(d, e) || s.hide != nil && s.hide[e.slot] {
		return
	}
	if e.flags&itemMulti != 0 {
		if int(e.slot) >= len(s.seen) {
			// Added since this Match sized seen.
			s.seen = append(s.seen, make([]uint32, int(e.slot)+1-len(s.seen))...)
		}
		if s.seen[e.slot] == s.epoch {
			return
		}
		s.seen[e.slot] = s.epoch
	}
	if e.flags&itemComplete != 0 {
		s.out = append(s.out, hit{id: e.id, score: float64(e.npreds)})
		return
	}
	s.verify(d, e)
}

// fastHolds reports whether the predicates of e's item hold. An
// attribute whose value is an integer within ±posLimit is tested by its
// position (holdsInt), without reading the value.
func (s *scratch) fastHolds(d *data, e *entry) bool {
	for j := range e.nfast {
		fp := &e.fast[j]
		if n := s.ipos[fp.key]; n > posOther {
			if !fp.holdsInt(n) {
				return false
			}
		} else if !fp.holds(s.value(d, fp.key)) {
			return false
		}
	}
	return true
}

// verify evaluates the predicates of e and records a hit when its mode is
// satisfied. It stops as soon as the mode can no longer be satisfied: at
// the first failure for match all, when too few predicates are left for
// match atleast, and when the weight left cannot reach the threshold for
// match score (with a relative margin of 1e-9, far above the rounding of
// the sum, so it never cuts a filter that Eval would match).
func (s *scratch) verify(d *data, e *entry) {
	b := e.record()
	h := readHead(b)
	n, w := 0, 0.0
	rest, restW := h.npreds, h.weight
	var p rpred
	for i, j := 0, h.body; i < h.npreds; i++ {
		j = readPred(b, j, &p)
		var ok bool
		switch p.src {
		case sourceNone:
			ok = true
		case SourceXPath:
			ok = s.value(d, p.key).v.Bool()
		default:
			ok = p.holds(b, s.value(d, p.key))
		}
		rest--
		restW -= p.weight
		if ok {
			n++
			w += p.weight
			continue
		}
		switch h.mode {
		case ModeAll:
			return
		case ModeAtLeast:
			if n+rest < h.atLeast {
				return
			}
		case ModeScore:
			if w+restW < h.threshold*(1-1e-9) {
				return
			}
		}
	}
	if ok, score := h.decide(n, w); ok {
		s.out = append(s.out, hit{id: e.id, score: score})
	}
}

// fastPred is a predicate in the compact form that posting lists keep
// in their entries (see makeItem): a numeric comparison or range with bounds that
// float64 holds exactly, exists / not exists, or membership in a set of
// integers that fit in 64 consecutive values, as a bitmap.
type fastPred struct {
	key            uint32
	op             Op
	loOpen, hiOpen bool
	lo             float64 // the literal; the lower end; for sets, the value of bit 0
	hi             uint64  // ranges: the upper end's float64 bits; sets: the bitmap
}

// makeFast returns the fast form of p when it has one: ==, !=, <, <=, >,
// >=, a range, exists or not exists on an attribute or JSON key, with
// numeric literals that a float64 holds exactly; in and not in with
// integral numeric members spanning fewer than 64 values.
func makeFast(p *Predicate, key uint32) (fastPred, bool) {
	if p.Operand.Source != SourceAttr && p.Operand.Source != SourceJSON {
		return fastPred{}, false
	}
	fp := fastPred{key: key, op: p.Op}
	switch p.Op {
	case OpExists, OpNotExists:
		return fp, true
	case OpEQ, OpNE, OpLT, OpLE, OpGT, OpGE:
		if !exactFloat(p.Value) {
			return fastPred{}, false
		}
		fp.lo = p.Value.Float()
		return fp, true
	case OpRange:
		if !exactFloat(p.Value) || !exactFloat(p.Hi) {
			return fastPred{}, false
		}
		fp.lo, fp.hi, fp.loOpen, fp.hiOpen = p.Value.Float(), math.Float64bits(p.Hi.Float()), p.LoOpen, p.HiOpen
		return fp, true
	case OpIn, OpNotIn:
		base, ok := int64(0), false
		for i, m := range p.Set {
			n, isInt := integral(m)
			if !isInt {
				return fastPred{}, false
			}
			if i == 0 || n < base {
				base = n
			}
			ok = true
		}
		if !ok || base < -1<<53 || base > 1<<53-64 {
			return fastPred{}, false
		}
		for _, m := range p.Set {
			n, _ := integral(m)
			d := uint64(n) - uint64(base) // exact: base is the least member, n-base could overflow
			if d >= 64 {
				return fastPred{}, false
			}
			fp.hi |= 1 << d
		}
		fp.lo = float64(base)
		return fp, true
	}
	return fastPred{}, false
}

// integral returns v as an int64 when v is an int, or a float whose value
// is an integer within int64 range.
func integral(v ontology.Value) (int64, bool) {
	switch v.Kind() {
	case ontology.KindInt:
		return v.Int(), true
	case ontology.KindFloat:
		if f := v.Float(); f >= -0x1p63 && f < 0x1p63 && f == math.Trunc(f) {
			return int64(f), true
		}
	}
	return 0, false
}

// holdsInt is holds for a present value equal to the integer n, within
// ±posLimit (so float64(n) is n exactly, and the comparisons with the
// literal, a float64 that is the literal exactly, are exact).
func (fp *fastPred) holdsInt(n int64) bool {
	switch fp.op {
	case OpExists:
		return true
	case OpNotExists:
		return false
	case OpIn, OpNotIn:
		d := uint64(n) - uint64(int64(fp.lo))
		return (d < 64 && fp.hi>>d&1 != 0) == (fp.op == OpIn)
	}
	f := float64(n)
	switch fp.op {
	case OpEQ:
		return f == fp.lo
	case OpNE:
		return f != fp.lo
	case OpLT:
		return f < fp.lo
	case OpLE:
		return f <= fp.lo
	case OpGT:
		return f > fp.lo
	case OpGE:
		return f >= fp.lo
	case OpRange:
		hi := math.Float64frombits(fp.hi)
		return (f > fp.lo || f == fp.lo && !fp.loOpen) && (f < hi || f == hi && !fp.hiOpen)
	}
	return false
}

// holds is Predicate.holds for the fast form; the two agree on every value.
func (fp *fastPred) holds(x val) bool {
	switch fp.op {
	case OpExists:
		return x.present
	case OpNotExists:
		return !x.present
	}
	if !x.present || x.v.IsNaN() {
		return false
	}
	if !x.v.Kind().Numeric() {
		return fp.op == OpNE || fp.op == OpNotIn // a value of another kind is never equal
	}
	if fp.op == OpIn || fp.op == OpNotIn {
		in := false
		if n, ok := integral(x.v); ok {
			if d := uint64(n) - uint64(int64(fp.lo)); d < 64 {
				in = fp.hi>>d&1 != 0
			}
		}
		return in == (fp.op == OpIn)
	}
	c := -cmpBound(fp.lo, x.v) // the value against the literal
	switch fp.op {
	case OpEQ:
		return c == 0
	case OpNE:
		return c != 0
	case OpLT:
		return c < 0
	case OpLE:
		return c <= 0
	case OpGT:
		return c > 0
	case OpGE:
		return c >= 0
	case OpRange:
		if c < 0 || c == 0 && fp.loOpen {
			return false
		}
		h := -cmpBound(math.Float64frombits(fp.hi), x.v)
		return h < 0 || h == 0 && !fp.hiOpen
	}
	return false
}

package filter

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/sion-go/sion/ontology"
)

// Records: a filter of the posting lists as the index keeps it, in place
// of its *Filter. A record is a few bytes per predicate, written once by
// the writer into a block of recBlockBytes and never changed, so readers
// read it plainly:
//
//	record    = mode:byte uvarint(npreds) [ uvarint(atLeast) ]
//	            [ threshold:f64 weightSum:f64 ] { pred } access .  (atLeast for ModeAtLeast, the floats for ModeScore)
//	pred      = op:byte flags:byte [ uvarint(key) ] [ weight:f64 ] operands .
//	flags     = source (bits 0–1) | loOpen 4 | hiOpen 8 | weighted 16 .
//	operands  = value (=, ≠, <, ≤, >, ≥, prefix, suffix, contains)
//	          | value value (ranges)
//	          | uvarint(n) uvarint(bytes) n×value [ n×offset ] (∈, ∉)
//	          | nothing .
//	value     = kind:byte ( zigzag varint (int, time) | f64 (float) | byte (bool)
//	          | uvarint(len) bytes (string) ) .
//	access    = accNone | accDirect | accAlways
//	          | accPreds uvarint(n) n×uvarint(pred << 1 | present) .
//
// A set of more than recSetLinear members is followed by its search
// order: the offsets of its members from the first one's start (uint16
// little-endian when the members take at most 1<<16 bytes, uint32
// otherwise), sorted by setOrder, a total order in which members that
// ontology.Equal makes equal are adjacent. Verification binary-searches
// it, reading O(log n) members instead of n, so a set of 10k members
// (about what 64 KiB of filter source holds) no longer costs every event
// of its type a scan. The members themselves keep the filter's order, so
// that a record reads back as the same predicate and the same postings;
// a small set, such as W-SPARSE's of 2–4, has no order and is scanned.
//
// access says under which postings the index entered the filter (see
// postingsOf): none, the group's direct or always list, or n access
// predicates by index, each through its own postings (equality, set
// members, small range, affix) or, when present is 1, its operand's
// presence. The index writes it once it has chosen (Index.chooseAccess);
// records made by appendRecord alone end before it.
//
// f64 is the little-endian float64 bits, so every float (−0.0, NaN
// payloads) comes back bit for bit; ints and times come back exactly.
// Strings are stored inline and read back, without a copy, as strings
// over the block (its bytes never change once written). Inline, not
// interned: W-SPARSE and the string workloads have short literals, and a
// refcounted table would cost every Add and Remove a map operation per
// string and every evaluation a second memory access. The key of an
// XPath predicate leads to its compiled expression (keyInfo.x); its
// record holds only the key. The key of `true` is absent.
//
// Memory: on W-SPARSE (3–7 predicates of small ints, sets of 2–4) about
// 40 bytes a filter.

// recBlockBytes is the size of a record block. A block stays reachable
// while one of its records is, so the writer counts the bytes of live
// records, and when the records written since the last compaction
// (recWriter.written) are more than twice those, and at least
// recCompactMin more, it copies the live ones into new blocks (see
// Index.compactRecords).
const recBlockBytes = 1 << 16

// recCompactMin is the fewest dead record bytes that make the writer
// compact; a variable so that tests can compact with few filters.
var recCompactMin = 4 * recBlockBytes

// recSetLinear is the most members a set predicate's record scans; a
// larger set's record carries its search order (see Records), 2 bytes a
// member (4 past 64 KiB of members). A scan costs about 7 ns a member of small ints, a search about
// 35 ns at 8 members and 60–80 at 16 (BenchmarkSetHolds): they cross
// between 4 and 8, so sets of up to 8, W-SPARSE's among them, keep the
// scan and need no order. doc.go, Index.Add and Index.Match say 8.
const recSetLinear = 8

// Flags of an encoded predicate.
const (
	recSrcMask  = 3
	recLoOpen   = 4
	recHiOpen   = 8
	recWeighted = 16
)

// recWriter appends records to blocks. Only the writer (Index.mu held)
// uses it.
type recWriter struct {
	block   []byte // the block being filled; its bytes before len are records
	buf     []byte // scratch
	live    int    // bytes of the records of the filters in the index
	written int    // bytes of the records written since the last compaction
	moves   int    // compactions so far
}

// dead reports whether removed records hold enough memory to compact.
func (w *recWriter) dead() bool {
	d := w.written - w.live
	return d > w.live && d >= recCompactMin
}

// store copies record r into a block and returns the copy.
func (w *recWriter) store(r []byte) []byte {
	n := len(r)
	w.live += n
	w.written += n
	if n > recBlockBytes/4 {
		return append([]byte(nil), r...) // too large to share a block
	}
	if len(w.block)+n > cap(w.block) {
		w.block = populated(make([]byte, 0, recBlockBytes))
	}
	at := len(w.block)
	w.block = append(w.block, r...)
	return w.block[at : at+n : at+n]
}

// compactRecords copies the records of the filters in postings into new
// blocks, so that the old blocks, mostly holding removed filters'
// records, can go. Each entry's record pointer moves to the copy with an
// atomic store (entry.moveRecord); a reader still reading the old record
// keeps its block reachable and reads the same bytes. mu must be held.
// Cost: one copy of each live record, O(live filters), once the removed
// records outweigh the live ones, so O(1) per Remove over time; it
// touches neither lists nor entries' other fields and allocates only the
// new blocks.
func (x *Index) compactRecords() {
	w := &x.recs
	w.block, w.live, w.written = nil, 0, 0
	w.moves++
	for _, e := range x.entries.all() {
		e.moveRecord(w.store(e.record()))
	}
}

// appendRecord appends the record of f to b, and to at, where in b each
// of its predicates starts.
func appendRecord(b []byte, f *Filter, keys []uint32, at []int) ([]byte, []int) {
	b = append(b, byte(f.mode))
	b = binary.AppendUvarint(b, uint64(len(f.preds)))
	switch f.mode {
	case ModeAtLeast:
		b = binary.AppendUvarint(b, uint64(f.atLeast))
	case ModeScore:
		w := 0.0
		for i := range f.preds {
			w += f.preds[i].weight()
		}
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f.threshold))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(w))
	}
	for i := range f.preds {
		p := &f.preds[i]
		at = append(at, len(b))
		flags := byte(p.Operand.Source) & recSrcMask
		if p.LoOpen {
			flags |= recLoOpen
		}
		if p.HiOpen {
			flags |= recHiOpen
		}
		if p.Weight != 0 {
			flags |= recWeighted
		}
		b = append(b, byte(p.Op), flags)
		if p.Operand.Source != sourceNone {
			b = binary.AppendUvarint(b, uint64(keys[i]))
		}
		if p.Weight != 0 {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.Weight))
		}
		if p.Operand.Source == SourceXPath {
			continue // the key's expression is the predicate
		}
		switch p.Op {
		case OpEQ, OpNE, OpLT, OpLE, OpGT, OpGE, OpPrefix, OpSuffix, OpContains:
			b = appendValue(b, p.Value)
		case OpRange:
			b = appendValue(appendValue(b, p.Value), p.Hi)
		case OpIn, OpNotIn:
			b = binary.AppendUvarint(b, uint64(len(p.Set)))
			// The members' length goes before them: a byte is kept for
			// it, enough for sets of under 128 bytes (W-SPARSE's take
			// 6–12), and the members move for a longer length.
			b = append(b, 0)
			at := len(b)
			for _, m := range p.Set {
				b = appendValue(b, m)
			}
			if n := len(b) - at; n < 0x80 {
				b[at-1] = byte(n)
			} else {
				var lb [binary.MaxVarintLen64]byte
				k := binary.PutUvarint(lb[:], uint64(n))
				b = append(b, lb[:k-1]...)
				copy(b[at-1+k:], b[at:at+n])
				copy(b[at-1:], lb[:k])
				at += k - 1
			}
			if len(p.Set) > recSetLinear {
				b = appendSetOrder(b, p.Set, at)
			}
		}
	}
	return b, at
}

// appendSetOrder appends the search order of set, whose members b holds
// from first on (see Records).
func appendSetOrder(b []byte, set []ontology.Value, first int) []byte {
	type member struct {
		v   ontology.Value
		off uint32
	}
	ms := make([]member, len(set))
	for i, j := 0, first; i < len(set); i++ {
		ms[i].off = uint32(j - first)
		ms[i].v, j = readValue(b, j)
	}
	slices.SortStableFunc(ms, func(a, b member) int { return setOrder(a.v, b.v) })
	wide := len(b)-first > 1<<16
	for _, m := range ms {
		if wide {
			b = binary.LittleEndian.AppendUint32(b, m.off)
		} else {
			b = binary.LittleEndian.AppendUint16(b, uint16(m.off))
		}
	}
	return b
}

// setOrder compares a and b in the order of a set's search order: numbers
// (ints and floats together, by ontology.Compare, then NaN), strings,
// times, bools, then invalid values. Values equal by ontology.Equal
// compare 0, and a value that is not NaN or invalid compares 0 only with
// values it equals.
func setOrder(a, b ontology.Value) int {
	ra, rb := setRank(a), setRank(b)
	if ra != rb {
		return ra - rb
	}
	c, _ := ontology.Compare(a, b) // 0 for NaNs and invalid values, which end their ranks
	return c
}

// setRank is the rank of v's kind in setOrder; NaN ranks after the
// other numbers.
func setRank(v ontology.Value) int {
	switch v.Kind() {
	case ontology.KindInt:
		return 0
	case ontology.KindFloat:
		if v.IsNaN() {
			return 1
		}
		return 0
	case ontology.KindString:
		return 2
	case ontology.KindTime:
		return 3
	case ontology.KindBool:
		return 4
	}
	return 5
}

func appendValue(b []byte, v ontology.Value) []byte {
	b = append(b, byte(v.Kind()))
	switch v.Kind() {
	case ontology.KindInt, ontology.KindTime:
		return binary.AppendVarint(b, v.Int())
	case ontology.KindFloat:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Float()))
	case ontology.KindBool:
		if v.Bool() {
			return append(b, 1)
		}
		return append(b, 0)
	case ontology.KindString:
		b = binary.AppendUvarint(b, uint64(len(v.Str())))
		return append(b, v.Str()...)
	}
	return b
}

// readValue decodes the value at b[i:] and returns it and the place after
// it. A string value is a view of b.
func readValue(b []byte, i int) (ontology.Value, int) {
	k := ontology.Kind(b[i])
	i++
	switch k {
	case ontology.KindInt, ontology.KindTime:
		n, w := binary.Varint(b[i:])
		if k == ontology.KindTime {
			return ontology.TimeNanos(n), i + w
		}
		return ontology.Int(n), i + w
	case ontology.KindFloat:
		return ontology.Float(math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))), i + 8
	case ontology.KindBool:
		return ontology.Bool(b[i] != 0), i + 1
	case ontology.KindString:
		n, w := binary.Uvarint(b[i:])
		i += w
		if n == 0 {
			return ontology.String(""), i
		}
		return ontology.String(unsafe.String(&b[i], int(n))), i + int(n)
	}
	return ontology.Value{}, i
}

// recHead is the header of a record.
type recHead struct {
	mode      Mode
	npreds    int
	atLeast   int
	threshold float64
	weight    float64 // the sum of the predicates' weights (ModeScore; npreds otherwise)
	body      int     // where the first predicate starts
}

func readHead(b []byte) recHead {
	h := recHead{mode: Mode(b[0])}
	n, w := binary.Uvarint(b[1:])
	h.npreds, h.body = int(n), 1+w
	h.weight = float64(h.npreds)
	switch h.mode {
	case ModeAtLeast:
		k, w := binary.Uvarint(b[h.body:])
		h.atLeast, h.body = int(k), h.body+w
	case ModeScore:
		h.threshold = math.Float64frombits(binary.LittleEndian.Uint64(b[h.body:]))
		h.weight = math.Float64frombits(binary.LittleEndian.Uint64(b[h.body+8:]))
		h.body += 16
	}
	return h
}

// decide applies the mode to n holding predicates with weight sum w, as
// Filter.decide does.
func (h *recHead) decide(n int, w float64) (bool, float64) {
	return decide(h.mode, h.npreds, h.atLeast, h.threshold, n, w)
}

// rpred is one predicate read from a record. Its values are views of the
// record; set members are decoded on demand (member).
type rpred struct {
	op     Op
	src    Source
	loOpen bool
	hiOpen bool
	key    uint32
	weight float64 // as Predicate.weight: 1 when unweighted
	lo, hi ontology.Value
	nset   int
	set    int  // where the first member starts in the record
	order  int  // where the set's search order starts; 0: none (see Records)
	wide   bool // the search order's offsets are uint32, not uint16
}

// readPred decodes the predicate at b[i:] into p and returns the place
// after it.
func readPred(b []byte, i int, p *rpred) int {
	p.op, p.src = Op(b[i]), Source(b[i+1]&recSrcMask)
	flags := b[i+1]
	p.loOpen, p.hiOpen = flags&recLoOpen != 0, flags&recHiOpen != 0
	i += 2
	p.key = noKey
	if p.src != sourceNone {
		k, w := binary.Uvarint(b[i:])
		p.key, i = uint32(k), i+w
	}
	p.weight = 1
	if flags&recWeighted != 0 {
		p.weight = math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))
		i += 8
	}
	p.lo, p.hi, p.nset, p.order = ontology.Value{}, ontology.Value{}, 0, 0
	if p.src == SourceXPath {
		return i
	}
	switch p.op {
	case OpEQ, OpNE, OpLT, OpLE, OpGT, OpGE, OpPrefix, OpSuffix, OpContains:
		p.lo, i = readValue(b, i)
	case OpRange:
		p.lo, i = readValue(b, i)
		p.hi, i = readValue(b, i)
	case OpIn, OpNotIn:
		n, w := binary.Uvarint(b[i:])
		i += w
		l, w := binary.Uvarint(b[i:])
		i += w
		p.nset, p.set = int(n), i
		i += int(l)
		if p.nset > recSetLinear {
			p.order, p.wide = i, l > 1<<16
			if p.wide {
				i += 4 * p.nset
			} else {
				i += 2 * p.nset
			}
		}
	}
	return i
}

// holds is Predicate.holds for a predicate read from record b; the two
// agree on every value (the record keeps every literal exactly, and the
// comparisons are the same calls).
func (p *rpred) holds(b []byte, x val) bool {
	switch p.op {
	case OpTrue:
		return true
	case OpExists:
		return x.present
	case OpNotExists:
		return !x.present
	}
	if !x.present || x.v.IsNaN() {
		return false
	}
	v := x.v
	switch p.op {
	case OpEQ:
		return ontology.Equal(v, p.lo)
	case OpNE:
		return !ontology.Equal(v, p.lo)
	case OpLT:
		c, ok := ontology.Compare(v, p.lo)
		return ok && c < 0
	case OpLE:
		c, ok := ontology.Compare(v, p.lo)
		return ok && c <= 0
	case OpGT:
		c, ok := ontology.Compare(v, p.lo)
		return ok && c > 0
	case OpGE:
		c, ok := ontology.Compare(v, p.lo)
		return ok && c >= 0
	case OpRange:
		c, ok := ontology.Compare(v, p.lo)
		if !ok || c < 0 || c == 0 && p.loOpen {
			return false
		}
		c, ok = ontology.Compare(v, p.hi)
		return ok && (c < 0 || c == 0 && !p.hiOpen)
	case OpIn, OpNotIn:
		if p.order != 0 {
			return p.search(b, v) == (p.op == OpIn)
		}
		in := false
		for i, j := 0, p.set; i < p.nset; i++ {
			var m ontology.Value
			m, j = readValue(b, j)
			if ontology.Equal(v, m) {
				in = true
				break
			}
		}
		return in == (p.op == OpIn)
	case OpPrefix:
		return v.Kind() == ontology.KindString && strings.HasPrefix(v.Str(), p.lo.Str())
	case OpSuffix:
		return v.Kind() == ontology.KindString && strings.HasSuffix(v.Str(), p.lo.Str())
	case OpContains:
		return v.Kind() == ontology.KindString && strings.Contains(v.Str(), p.lo.Str())
	}
	return false
}

// search reports whether v, not NaN, is a member of set predicate p of
// record b, which has a search order: a binary search for the first
// member not below v in setOrder, which is equal to v if any member is.
// Cost: O(log n) members read.
func (p *rpred) search(b []byte, v ontology.Value) bool {
	lo, hi := 0, p.nset // the members below lo are below v; those from hi on are not
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if m, _ := readValue(b, p.set+p.offset(b, h)); setOrder(m, v) < 0 {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo == p.nset {
		return false
	}
	m, _ := readValue(b, p.set+p.offset(b, lo))
	return ontology.Equal(v, m)
}

// offset returns the offset of the k-th member of p's search order from
// its first member.
func (p *rpred) offset(b []byte, k int) int {
	if p.wide {
		return int(binary.LittleEndian.Uint32(b[p.order+4*k:]))
	}
	return int(binary.LittleEndian.Uint16(b[p.order+2*k:]))
}

// members calls fn with each member of set predicate p of record b.
func (p *rpred) members(b []byte, fn func(ontology.Value)) {
	for i, j := 0, p.set; i < p.nset; i++ {
		var m ontology.Value
		m, j = readValue(b, j)
		fn(m)
	}
}

// predicate returns p as a Predicate on operand name (the key's name; ""
// for XPath keys, whose expression the key holds). Its strings are views
// of b.
func (p *rpred) predicate(b []byte, name string) Predicate {
	q := Predicate{Operand: Operand{Source: p.src, Name: name}, Op: p.op, Value: p.lo, Hi: p.hi, LoOpen: p.loOpen, HiOpen: p.hiOpen}
	if p.weight != 1 {
		q.Weight = p.weight
	}
	if p.nset > 0 {
		q.Set = make([]ontology.Value, 0, p.nset)
		p.members(b, func(m ontology.Value) { q.Set = append(q.Set, m) })
	}
	return q
}

// recKeys appends to buf the key of each predicate of record b that has
// one, in order, and returns it.
func recKeys(b []byte, buf []uint32) []uint32 {
	h := readHead(b)
	var p rpred
	for i, j := 0, h.body; i < h.npreds; i++ {
		j = readPred(b, j, &p)
		if p.key != noKey {
			buf = append(buf, p.key)
		}
	}
	return buf
}

// filterOf rebuilds, from its record, the filter of e with the keys of
// its predicates, for moving it into a dense engine (which reads
// attribute predicates only; XPath predicates come back without their
// expression). mu must be held.
func (x *Index) filterOf(e *entry) (*Filter, []uint32) {
	rec := e.record()
	h := readHead(rec)
	f := &Filter{mode: h.mode, atLeast: h.atLeast, threshold: h.threshold, preds: make([]Predicate, h.npreds)}
	keys := make([]uint32, h.npreds)
	var p rpred
	for i, j := 0, h.body; i < h.npreds; i++ {
		j = readPred(rec, j, &p)
		name := ""
		if p.key != noKey && p.src != SourceXPath {
			name = x.inst[0].keys[p.key].name.name
		}
		f.preds[i], keys[i] = p.predicate(rec, name), p.key
	}
	return f, keys
}

package filter

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// fuzzIndexSeeds are scripts for FuzzIndex: the first 8 bytes seed the
// random world (ontology, filter and event generators), the rest is one
// step per byte (see fuzzIndexStep). Bytes with low bits 4 add bursts of
// 40 or more numeric-range filters to one type, which the dense engine
// takes over after denseMinGroup.
var fuzzIndexSeeds = [][]byte{
	{},
	[]byte("\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01\x02\x06\x06\x05\x06"),
	[]byte("\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x03\x03\x06\x0d\x06\x07\x07"),
	[]byte("\x00\x00\x00\x00\x00\x00\x00\x03\x04\x07\x07\x07\x0f\x17\x06\x05\x07"),
	[]byte("\x80\x00\x00\x00\x00\x00\x00\x04\x04\x0c\x07\x07\x07\x05\x0d\x15\x07\x07\x06"),
	[]byte("\x81\x00\x00\x00\x00\x00\x00\x05\x84\x07\x03\x03\x07\x25\x2d\x35\x07\x04\x07\x07"),
	[]byte("\x00\x00\x00\x00\x00\x00\x00\x06\x02\x01\x00\x06\x05\x05\x05\x06\x00\x06"),
	[]byte("\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\x04\x04\x04\x07\x07\x05\x05\x05\x05\x05\x07\x07\x06"),
}

// FuzzIndex derives from its input a random ontology (a DAG with multiple
// inheritance), a sequence of filter additions and removals and events,
// and checks after every step that Index.Match reports exactly the IDs and
// scores BruteForce.Match does. Numeric-range-only bursts on one type make
// the dense interval engine take filters; when the first byte has its top
// bit set the engine's cells are made small, so that cell layouts and
// checkpoint bitsets are exercised by a few dozen filters.
//
//	go test -run=^$ -fuzz=FuzzIndex -fuzztime=3m ./filter
func FuzzIndex(f *testing.F) {
	for _, s := range fuzzIndexSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxSteps = 200
		if len(data) > 8+maxSteps {
			data = data[:8+maxSteps]
		}
		runIndexScript(t, data)
	})
}

// indexScript is the state of one FuzzIndex run.
type indexScript struct {
	t      *testing.T
	w      *randWorld
	ix     *Index
	bf     *BruteForce
	live   []uint64
	next   uint64
	burst  string // type of the last burst, AnyType included; "" for none
	bursts int
}

func runIndexScript(t *testing.T, data []byte) *indexScript {
	var seed uint64
	for i := 0; i < 8 && i < len(data); i++ {
		seed = seed<<8 | uint64(data[i])
	}
	script := data[min(8, len(data)):]
	if len(data) > 0 && data[0]&0x80 != 0 {
		defer func(b, p, q int) { maxMarks, purgeMin, pendMax = b, p, q }(maxMarks, purgeMin, pendMax)
		maxMarks, purgeMin, pendMax = 1+int(data[0]&3), 2, 1+int(data[0]>>2&3)
	}
	w := newRandWorld(t, seed)
	s := &indexScript{t: t, w: w, ix: NewIndex(w.ont), bf: NewBruteForce(w.ont), next: 1}
	for _, b := range script {
		s.step(b)
	}
	for i := 0; i < 8; i++ {
		s.check(w.event())
		s.check(s.numericEvent())
		s.check(s.xmlEvent())
	}
	return s
}

// step performs the step of script byte b: the low 3 bits choose the
// action, the high 5 bits parametrise it.
func (s *indexScript) step(b byte) {
	w, arg := s.w, int(b>>3)
	switch b & 7 {
	case 0, 1:
		s.add(w.filter())
	case 2:
		s.add(s.payloadFilter())
	case 3:
		s.add(s.rangeFilter(s.typeAt(arg)))
	case 4:
		typ := s.typeAt(arg)
		for range 40 + arg%24 {
			s.add(s.rangeFilter(typ))
		}
		s.burst = typ
		s.bursts++
	case 5:
		if len(s.live) == 0 {
			return
		}
		// Remove a run of filters, so that dense engines empty out too.
		for k := 0; k <= arg%8 && len(s.live) > 0; k++ {
			i := (arg*7 + k) % len(s.live)
			id := s.live[i]
			s.live = append(s.live[:i], s.live[i+1:]...)
			require.True(s.t, s.ix.Remove(id))
			require.True(s.t, s.bf.Remove(id))
		}
	case 6:
		s.check(w.event())
		s.check(s.xmlEvent())
	case 7:
		for range 1 + arg%4 {
			s.check(s.numericEvent())
		}
	}
}

// typeAt returns type i of the world, or AnyType past the last.
func (s *indexScript) typeAt(i int) string {
	i %= len(s.w.types) + 1
	if i == len(s.w.types) {
		return AnyType
	}
	return s.w.types[i]
}

func (s *indexScript) add(f *Filter) {
	require.NoError(s.t, s.ix.Add(s.next, f), f.String())
	require.NoError(s.t, s.bf.Add(s.next, f), f.String())
	s.live = append(s.live, s.next)
	s.next++
}

// numAttrs are the numeric attributes of a randWorld (a0 int, a1 float,
// a5 int).
var numAttrs = []string{"a0", "a1", "a5"}

// number returns a numeric literal or event value: mostly small ints and
// halves (so that events hit bounds exactly), sometimes values around 2^53
// and the ends of int64, -0.0 and subnormals.
func (s *indexScript) number() ontology.Value {
	r := s.w.r
	switch r.IntN(12) {
	case 0:
		return ontology.Int(1<<53 + int64(r.IntN(3)))
	case 1:
		return ontology.Float(1 << 53)
	case 2:
		return ontology.Int([]int64{math.MinInt64, math.MaxInt64}[r.IntN(2)])
	case 3:
		return ontology.Float([]float64{math.Copysign(0, -1), 5e-324, -0x1p63}[r.IntN(3)])
	case 4, 5:
		return ontology.Float(float64(r.IntN(11)-5) / 2)
	}
	return ontology.Int(int64(r.IntN(11) - 5))
}

// rangeFilter returns a ModeAll filter on typ whose 1 to 3 predicates are
// numeric comparisons and ranges on attributes — what the dense engine
// holds (unless a bound is an int that a float64 does not hold exactly).
func (s *indexScript) rangeFilter(typ string) *Filter {
	r := s.w.r
	spec := Spec{Type: typ}
	for range 1 + r.IntN(3) {
		a := Attr(numAttrs[r.IntN(len(numAttrs))])
		var p Predicate
		switch r.IntN(5) {
		case 0:
			p = a.LT(s.number())
		case 1:
			p = a.LE(s.number())
		case 2:
			p = a.GT(s.number())
		case 3:
			p = a.GE(s.number())
		default:
			lo, hi := s.number(), s.number()
			if c, _ := ontology.Compare(lo, hi); c > 0 {
				lo, hi = hi, lo
			}
			p = rangeOK(a, lo, hi, r.IntN(2) == 0, r.IntN(2) == 0)
		}
		spec.Predicates = append(spec.Predicates, p)
	}
	return MustBuild(spec)
}

// numericEvent returns an event of the last burst's type or one of its
// subtypes (any type when there was no burst) with numeric attributes at
// and around the filters' bounds, some missing, NaN or of the wrong kind.
func (s *indexScript) numericEvent() *BasicEvent {
	r, o := s.w.r, s.w.ont
	ev := &BasicEvent{Type: s.w.types[r.IntN(len(s.w.types))]}
	if s.burst != "" && s.burst != AnyType {
		t, _ := o.Lookup(s.burst)
		d := o.Descendants(t.ID)
		ev.Type = o.Type(d[r.IntN(len(d))]).Name
	}
	for _, a := range numAttrs {
		var v ontology.Value
		switch r.IntN(16) {
		case 0:
			continue
		case 1:
			v = ontology.Float(math.NaN())
		case 2:
			v = ontology.String("1")
		default:
			v = s.number()
		}
		ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a, Value: v})
	}
	return ev
}

// payloadFilter returns a filter of 1 to 3 predicates on XML payloads
// (XPath comparisons, string functions, exists, boolean XPaths), a JSON
// field or an attribute, in any mode.
func (s *indexScript) payloadFilter() *Filter {
	r := s.w.r
	spec := Spec{Type: s.typeAt(r.IntN(len(s.w.types) + 1))}
	n := 1 + r.IntN(3)
	for range n {
		var p Predicate
		v, str := XPath("/r/v"), XPath("/r/s")
		switch r.IntN(12) {
		case 0:
			p = v.EQ(s.number())
		case 1:
			p = v.NE(s.number())
		case 2:
			p = v.GT(s.number())
		case 3:
			lo, hi := s.number(), s.number()
			if c, _ := ontology.Compare(lo, hi); c > 0 {
				lo, hi = hi, lo
			}
			p = rangeOK(v, lo, hi, r.IntN(2) == 0, r.IntN(2) == 0)
		case 4:
			p = v.In(s.number(), s.number())
		case 5:
			p = str.pred([]Op{OpPrefix, OpSuffix, OpContains, OpEQ, OpNotIn}[r.IntN(5)], ontology.String(propStrings[r.IntN(len(propStrings))]))
			if p.Op == OpNotIn {
				p.Set, p.Value = []ontology.Value{p.Value}, ontology.Value{}
			}
		case 6:
			p = Predicate{Operand: []Operand{v, str}[r.IntN(2)], Op: []Op{OpExists, OpNotExists}[r.IntN(2)]}
		case 7:
			p = XPathTrue([]string{"count(/r/v) > 1", "/r/v = /r/s", "not(/r/s)", "sum(/r/v) >= 0"}[r.IntN(4)])
		case 8:
			p = JSON("j0").GE(s.number())
		case 9:
			p = JSON("j1").NotExists()
		case 10:
			p = True()
		default:
			p = Attr("a0").LE(s.number())
		}
		spec.Predicates = append(spec.Predicates, p)
	}
	switch r.IntN(3) {
	case 1:
		spec.Mode, spec.AtLeast = ModeAtLeast, 1+r.IntN(n)
	case 2:
		spec.Mode, spec.Threshold = ModeScore, 0.5+float64(r.IntN(2*n))/2
		for i := range spec.Predicates {
			spec.Predicates[i].Weight = float64(1+r.IntN(4)) / 2
		}
		clampThreshold(&spec)
	}
	return MustBuild(spec)
}

// xmlEvent returns an event whose payload is mostly XML with some <v>
// numbers and <s> strings, sometimes JSON, absent or malformed.
func (s *indexScript) xmlEvent() *BasicEvent {
	r := s.w.r
	ev := &BasicEvent{Type: s.w.types[r.IntN(len(s.w.types))]}
	if r.IntN(2) == 0 {
		ev.Attrs = []ontology.Attr{{Name: "a0", Value: s.number()}}
	}
	switch r.IntN(8) {
	case 0:
		return ev
	case 1:
		ev.ContentType, ev.Data = "application/json", []byte(`{"j0": 1, "r": {"v": 2}}`)
		return ev
	case 2:
		ev.ContentType, ev.Data = "application/xml", []byte(`<r><v>1</v>`)
		return ev
	}
	doc := "<r>"
	for range r.IntN(3) {
		doc += "<v>" + s.number().String() + "</v>"
	}
	if r.IntN(4) == 0 {
		doc += "<v>abc</v>"
	}
	for range r.IntN(2) {
		doc += "<s>" + propStrings[r.IntN(len(propStrings))] + "</s>"
	}
	doc += "</r>"
	ev.ContentType, ev.Data = []string{"application/xml", "text/xml; charset=utf-8", "", "application/atom+xml"}[r.IntN(4)], []byte(doc)
	return ev
}

func (s *indexScript) check(ev *BasicEvent) {
	s.t.Helper()
	want, got := collect(s.bf, ev), collect(s.ix, ev)
	if !assertSameMatches(s.t, want, got) {
		s.t.Fatalf("event %+v payload %s\nbrute force %v\nindex       %v\nfilters:\n%s", ev, ev.Data, want, got, dumpFilters(s.bf))
	}
}

// TestFuzzIndexSeedsReachDense checks that the burst seeds do what they
// are for: the dense engine holds filters when their events are matched.
func TestFuzzIndexSeedsReachDense(t *testing.T) {
	for _, seed := range fuzzIndexSeeds[3:6] {
		// Stop before the trailing removals so that the engines are still
		// there at the end.
		s := runIndexScript(t, seed[:9+2])
		require.Positive(t, s.bursts)
		d := s.ix.inst[s.ix.side.Load()]
		engines := 0
		for _, g := range d.groups {
			if g != nil && (g.dense[denseAll] != nil || g.dense[denseCount] != nil) {
				engines++
			}
		}
		require.Positive(t, engines, "seed %q", seed)
	}
}

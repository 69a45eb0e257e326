package filter

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// This file pins down the predicate semantics of DESIGN.md "Semantics that
// must be exact" and "Values at the edges" (CASES A3, A4, A6): every
// operator on every value kind, the cross-kind cases, missing operands,
// NaN, JSON and XPath payload operands, the match modes and payload
// classification. Every case is evaluated three ways — Filter.Eval, an
// Index holding the one filter, and the BruteForce oracle — and all three
// must give the expected answer (and the same score).

// semOnt is the ontology of the semantics tests: one type, Sem, with an
// attribute of each kind, a second string attribute S that differs from s
// only by case (A6), and a subtype.
func semOnt(t testing.TB) *ontology.Ontology {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "Sem", Attributes: []ontology.Attribute{
			{Name: "s", Kind: ontology.KindString},
			{Name: "S", Kind: ontology.KindString},
			{Name: "i", Kind: ontology.KindInt},
			{Name: "f", Kind: ontology.KindFloat},
			{Name: "b", Kind: ontology.KindBool},
			{Name: "t", Kind: ontology.KindTime},
			{Name: "température", Kind: ontology.KindFloat},
		}},
		{Name: "SemSub", Parents: []string{"Sem"}},
	})
	require.NoError(t, err)
	return o
}

// semCase is one check: a filter (source text), an event and the expected
// answer. Unless anyType is set the filter gets the clause "type ⊑ Sem"
// and so goes through Resolve's kind checks; anyType filters are only
// checked for attribute names, which lets a case compare an attribute
// with a literal of another kind. Events without a type are of type Sem.
type semCase struct {
	name    string
	src     string
	ev      *BasicEvent
	want    bool
	anyType bool
	score   float64 // when want is true and score != 0: the expected score
}

// kv returns the event attribute name = v.
func kv(name string, v ontology.Value) ontology.Attr { return ontology.Attr{Name: name, Value: v} }

// attrs returns an event of type Sem with the given attributes.
func attrs(a ...ontology.Attr) *BasicEvent { return &BasicEvent{Type: "Sem", Attrs: a} }

// payload returns an event of type Sem with the given payload.
func payload(contentType, data string) *BasicEvent {
	return &BasicEvent{Type: "Sem", ContentType: contentType, Data: []byte(data)}
}

func runSemCases(t *testing.T, cases []semCase) {
	t.Helper()
	o := semOnt(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := c.src
			if !c.anyType {
				src = "type ⊑ Sem; " + src
			}
			f, err := Compile(src)
			require.NoError(t, err, src)
			score := agree(t, o, f, c.ev, c.want)
			if c.want && c.score != 0 {
				assert.Equal(t, c.score, score, "score")
			}
		})
	}
}

// agree evaluates f on ev with Filter.Eval, an Index holding only f, and a
// BruteForce holding only f, asserts that each gives want and that the
// scores agree, and returns Eval's score. Filters the dense interval engine
// can hold are also checked in an Index with enough copies of f for the
// engine to take them.
func agree(t *testing.T, o *ontology.Ontology, f *Filter, ev *BasicEvent, want bool) float64 {
	t.Helper()
	if ev.Type == "" {
		ev.Type = "Sem"
	}
	ok, score := f.Eval(ev)
	assert.Equal(t, want, ok, "Eval of %s", f)

	wantIDs := matchResult{}
	if want {
		wantIDs[1] = score
	}
	ix := NewIndex(o)
	require.NoError(t, ix.Add(1, f), f.String())
	assert.Equal(t, wantIDs, collect(ix, ev), "Index.Match of %s", f)
	bf := NewBruteForce(o)
	require.NoError(t, bf.Add(1, f), f.String())
	assert.Equal(t, wantIDs, collect(bf, ev), "BruteForce.Match of %s", f)

	if denseEligible(f) {
		const copies = denseMinGroup + 8
		dx := NewIndex(o)
		all := matchResult{}
		for id := uint64(1); id <= copies; id++ {
			require.NoError(t, dx.Add(id, f))
			if want {
				all[id] = score
			}
		}
		assert.Equal(t, all, collect(dx, ev), "Index.Match of %d copies of %s (dense engine)", copies, f)
	}
	return score
}

// position is where an event value lies relative to a literal or range.
type position int

const (
	below position = iota
	atLo
	inside
	atHi
	above
)

var positionNames = [...]string{"below", "at-lo", "inside", "at-hi", "above"}

// ordered is one ordered kind for the generated tables: five event values
// v[below] < v[atLo] < v[inside] < v[atHi] < v[above], and the literal
// text of each (for filter source).
type ordered struct {
	kind string
	attr string
	v    [5]ontology.Value
	lit  [5]string
}

func orderedKinds() []ordered {
	t0 := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	ts := func(d time.Duration) ontology.Value { return ontology.Time(t0.Add(d)) }
	tl := func(d time.Duration) string { return fmt.Sprintf("time(%q)", t0.Add(d).Format(time.RFC3339Nano)) }
	return []ordered{
		{"string", "s",
			[5]ontology.Value{ontology.String("a"), ontology.String("b"), ontology.String("bb"), ontology.String("c"), ontology.String("ca")},
			[5]string{`"a"`, `"b"`, `"bb"`, `"c"`, `"ca"`}},
		{"string-utf8", "s", // bytes: "z" < "é" (C3 A9) < "éa" < "ö" (C3 B6) < "ö\u0301"
			[5]ontology.Value{ontology.String("z"), ontology.String("é"), ontology.String("éa"), ontology.String("ö"), ontology.String("ö\u0301")},
			[5]string{`"z"`, `"é"`, `"éa"`, `"ö"`, `"ö\u0301"`}},
		{"int", "i",
			[5]ontology.Value{ontology.Int(-1), ontology.Int(0), ontology.Int(1), ontology.Int(2), ontology.Int(3)},
			[5]string{"-1", "0", "1", "2", "3"}},
		{"int-extremes", "i",
			[5]ontology.Value{ontology.Int(math.MinInt64), ontology.Int(math.MinInt64 + 1), ontology.Int(0), ontology.Int(math.MaxInt64 - 1), ontology.Int(math.MaxInt64)},
			[5]string{"-9223372036854775808", "-9223372036854775807", "0", "9223372036854775806", "9223372036854775807"}},
		{"int-2^53", "i",
			[5]ontology.Value{ontology.Int(1<<53 - 1), ontology.Int(1 << 53), ontology.Int(1<<53 + 1), ontology.Int(1<<53 + 2), ontology.Int(1<<53 + 3)},
			[5]string{"9007199254740991", "9007199254740992", "9007199254740993", "9007199254740994", "9007199254740995"}},
		{"float", "f",
			[5]ontology.Value{ontology.Float(-0.5), ontology.Float(0.25), ontology.Float(0.5), ontology.Float(1.5), ontology.Float(1e300)},
			[5]string{"-0.5", "0.25", "0.5", "1.5", "1e300"}},
		{"float-subnormal", "f",
			[5]ontology.Value{ontology.Float(-5e-324), ontology.Float(math.Copysign(0, -1)), ontology.Float(5e-324), ontology.Float(1e-323), ontology.Float(1)},
			[5]string{"-5e-324", "-0.0", "5e-324", "1e-323", "1.0"}},
		// int attribute, float literals and float event values: exact
		// comparison across the kinds.
		{"int-vs-float", "i",
			[5]ontology.Value{ontology.Int(1), ontology.Float(1.5), ontology.Int(2), ontology.Float(2.5), ontology.Int(3)},
			[5]string{"1", "1.5", "2", "2.5", "3"}},
		{"float-vs-int-2^53", "f", // 2^53 as a float sits between the ints 2^53-1 and 2^53+1
			[5]ontology.Value{ontology.Int(1<<53 - 1), ontology.Float(1 << 53), ontology.Int(1<<53 + 1), ontology.Float(1<<53 + 2), ontology.Int(1<<53 + 3)},
			[5]string{"9007199254740991", "9007199254740992.0", "9007199254740993", "9007199254740994.0", "9007199254740995"}},
		{"time", "t",
			[5]ontology.Value{ts(-time.Hour), ts(0), ts(time.Nanosecond), ts(2 * time.Nanosecond), ts(24 * time.Hour)},
			[5]string{tl(-time.Hour), tl(0), tl(time.Nanosecond), tl(2 * time.Nanosecond), tl(24 * time.Hour)}},
	}
}

// TestComparisonOperators checks ==, !=, <, <=, >, >= with the literal at
// v[inside], for each ordered kind and each of the five event values.
func TestComparisonOperators(t *testing.T) {
	type opWant struct {
		op   string
		want func(p position) bool
	}
	ops := []opWant{
		{"==", func(p position) bool { return p == inside }},
		{"=", func(p position) bool { return p == inside }},
		{"!=", func(p position) bool { return p != inside }},
		{"<", func(p position) bool { return p < inside }},
		{"<=", func(p position) bool { return p <= inside }},
		{">", func(p position) bool { return p > inside }},
		{">=", func(p position) bool { return p >= inside }},
	}
	var cases []semCase
	for _, k := range orderedKinds() {
		for _, op := range ops {
			for p := below; p <= above; p++ {
				cases = append(cases, semCase{
					name: fmt.Sprintf("%s/%s/%s", k.kind, op.op, positionNames[p]),
					src:  fmt.Sprintf("%s %s %s", k.attr, op.op, k.lit[inside]),
					ev:   attrs(kv(k.attr, k.v[p])),
					want: op.want(p),
				})
			}
		}
	}
	runSemCases(t, cases)
}

// TestRanges checks x in [lo, hi], (lo, hi], [lo, hi) and (lo, hi) with
// the ends at v[atLo] and v[atHi], for each ordered kind and each of the
// five event values; and a degenerate range [v, v].
func TestRanges(t *testing.T) {
	var cases []semCase
	for _, k := range orderedKinds() {
		for _, ends := range []struct{ lo, hi string }{{"[", "]"}, {"(", "]"}, {"[", ")"}, {"(", ")"}} {
			loOpen, hiOpen := ends.lo == "(", ends.hi == ")"
			for p := below; p <= above; p++ {
				want := p == inside || p == atLo && !loOpen || p == atHi && !hiOpen
				cases = append(cases, semCase{
					name: fmt.Sprintf("%s/%slo,hi%s/%s", k.kind, ends.lo, ends.hi, positionNames[p]),
					src:  fmt.Sprintf("%s in %s%s, %s%s", k.attr, ends.lo, k.lit[atLo], k.lit[atHi], ends.hi),
					ev:   attrs(kv(k.attr, k.v[p])),
					want: want,
				})
			}
		}
		for p := below; p <= above; p++ {
			cases = append(cases, semCase{
				name: fmt.Sprintf("%s/[v,v]/%s", k.kind, positionNames[p]),
				src:  fmt.Sprintf("%s in [%s, %s]", k.attr, k.lit[inside], k.lit[inside]),
				ev:   attrs(kv(k.attr, k.v[p])),
				want: p == inside,
			})
		}
	}
	runSemCases(t, cases)
}

// TestSetOperators checks in and not in with the set {v[atLo], v[atHi]}.
func TestSetOperators(t *testing.T) {
	var cases []semCase
	for _, k := range orderedKinds() {
		for p := below; p <= above; p++ {
			member := p == atLo || p == atHi
			set := fmt.Sprintf("{%s, %s}", k.lit[atLo], k.lit[atHi])
			cases = append(cases,
				semCase{
					name: fmt.Sprintf("%s/in/%s", k.kind, positionNames[p]),
					src:  fmt.Sprintf("%s in %s", k.attr, set),
					ev:   attrs(kv(k.attr, k.v[p])),
					want: member,
				},
				semCase{
					name: fmt.Sprintf("%s/not-in/%s", k.kind, positionNames[p]),
					src:  fmt.Sprintf("%s not in %s", k.attr, set),
					ev:   attrs(kv(k.attr, k.v[p])),
					want: !member,
				})
		}
	}
	runSemCases(t, cases)
}

// TestBoolOperators checks == and != and sets on bools; ordering is
// refused at Build (see TestBoolOrderingRefused).
func TestBoolOperators(t *testing.T) {
	tr, fa := ontology.Bool(true), ontology.Bool(false)
	runSemCases(t, []semCase{
		{name: "true==true", src: "b == true", ev: attrs(kv("b", tr)), want: true},
		{name: "false==true", src: "b == true", ev: attrs(kv("b", fa)), want: false},
		{name: "false==false", src: "b == false", ev: attrs(kv("b", fa)), want: true},
		{name: "true!=false", src: "b != false", ev: attrs(kv("b", tr)), want: true},
		{name: "false!=false", src: "b != false", ev: attrs(kv("b", fa)), want: false},
		{name: "in{true}/true", src: "b in {true}", ev: attrs(kv("b", tr)), want: true},
		{name: "in{true}/false", src: "b in {true}", ev: attrs(kv("b", fa)), want: false},
		{name: "in{true,false}", src: "b in {true, false}", ev: attrs(kv("b", fa)), want: true},
		{name: "not-in{false}/true", src: "b not in {false}", ev: attrs(kv("b", tr)), want: true},
		{name: "not-in{false}/false", src: "b not in {false}", ev: attrs(kv("b", fa)), want: false},
		// A bool is not a number: true is not 1.
		{name: "true==1", src: "b == 1", ev: attrs(kv("b", tr)), want: false, anyType: true},
		{name: "true!=1", src: "b != 1", ev: attrs(kv("b", tr)), want: true, anyType: true},
		{name: "int 1==true", src: "i == true", ev: attrs(kv("i", ontology.Int(1))), want: false, anyType: true},
		{name: "true==\"true\"", src: `b == "true"`, ev: attrs(kv("b", tr)), want: false, anyType: true},
		{name: "true in {1, \"true\"}", src: `b in {1, "true"}`, ev: attrs(kv("b", tr)), want: false, anyType: true},
		{name: "true not in {1, \"true\"}", src: `b not in {1, "true"}`, ev: attrs(kv("b", tr)), want: true, anyType: true},
		// An ordering literal of another kind passes Build; a bool event value
		// never orders against it.
		{name: "true>0", src: "b > 0", ev: attrs(kv("b", tr)), want: false, anyType: true},
		{name: "true in [0, 1]", src: "b in [0, 1]", ev: attrs(kv("b", tr)), want: false, anyType: true},
	})
}

// TestBoolOrderingRefused: <, <=, >, >= and ranges are not defined on
// bools; Build refuses them with ErrInvalid.
func TestBoolOrderingRefused(t *testing.T) {
	for _, src := range []string{
		`b < true`, `b <= false`, `b > false`, `b >= true`, `b in [false, true]`, `b in (false, true)`,
	} {
		t.Run(src, func(t *testing.T) {
			_, err := Compile(src)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), "bool")
		})
	}
	_, err := Build(Spec{Predicates: []Predicate{Attr("b").Range(ontology.Int(0), ontology.Bool(true), false, false)}})
	assert.ErrorIs(t, err, ErrInvalid, "a range with one bool end")
}

// TestStringOperators checks prefix, suffix and contains, byte-wise and
// case-sensitive, on ASCII and multi-byte UTF-8 (A6).
func TestStringOperators(t *testing.T) {
	s := func(v string) *BasicEvent { return attrs(kv("s", ontology.String(v))) }
	runSemCases(t, []semCase{
		{name: "prefix/match", src: `s prefix "hall."`, ev: s("hall.north"), want: true},
		{name: "prefix/equal", src: `s prefix "hall."`, ev: s("hall."), want: true},
		{name: "prefix/shorter", src: `s prefix "hall."`, ev: s("hall"), want: false},
		{name: "prefix/case", src: `s prefix "hall."`, ev: s("Hall.north"), want: false},
		{name: "prefix/empty", src: `s prefix ""`, ev: s(""), want: true},
		{name: "prefix/empty-any", src: `s prefix ""`, ev: s("x"), want: true},
		{name: "suffix/match", src: `s suffix ".north"`, ev: s("hall.north"), want: true},
		{name: "suffix/no", src: `s suffix ".north"`, ev: s("hall.northwest"), want: false},
		{name: "suffix/case", src: `s suffix ".north"`, ev: s("hall.NORTH"), want: false},
		{name: "contains/match", src: `s contains "ll.n"`, ev: s("hall.north"), want: true},
		{name: "contains/no", src: `s contains "ll.s"`, ev: s("hall.north"), want: false},
		{name: "contains/case", src: `s contains "LL"`, ev: s("hall"), want: false},
		{name: "contains/empty", src: `s contains ""`, ev: s("x"), want: true},
		// Multi-byte UTF-8: whole code points, and, since strings are bytes,
		// part of one (ā is C4 81).
		{name: "utf8/prefix", src: `s prefix "Pā"`, ev: s("Pāhala"), want: true},
		{name: "utf8/prefix-ascii-a", src: `s prefix "Pa"`, ev: s("Pāhala"), want: false},
		{name: "utf8/prefix-partial-code-point", src: `s prefix "P\xc4"`, ev: s("Pāhala"), want: true},
		{name: "utf8/suffix", src: `s suffix "震度"`, ev: s("最大震度"), want: true},
		{name: "utf8/suffix-partial-code-point", src: `s suffix "\xba\xa6"`, ev: s("最大震度"), want: true}, // 度 is E5 BA A6
		{name: "utf8/suffix-other", src: `s suffix "震度"`, ev: s("震度5"), want: false},
		{name: "utf8/contains", src: `s contains "ö"`, ev: s("Jökull"), want: true},
		{name: "utf8/contains-decomposed", src: `s contains "ö"`, ev: s("Jo\u0308kull"), want: false}, // NFD is other bytes
		{name: "utf8/eq-decomposed", src: `s == "é"`, ev: s("e\u0301"), want: false},
		{name: "utf8/case-ö", src: `s == "ö"`, ev: s("Ö"), want: false},
		// String operators on values of other kinds are false.
		{name: "prefix/int-value", src: `s prefix "1"`, ev: attrs(kv("s", ontology.Int(12))), want: false},
		{name: "prefix/on-int-attr", src: `i prefix "1"`, ev: attrs(kv("i", ontology.Int(12))), want: false, anyType: true},
		{name: "suffix/on-float-attr", src: `f suffix "5"`, ev: attrs(kv("f", ontology.Float(2.5))), want: false, anyType: true},
		{name: "contains/on-bool", src: `b contains "t"`, ev: attrs(kv("b", ontology.Bool(true))), want: false, anyType: true},
		{name: "contains/on-time", src: `t contains "2024"`, ev: attrs(kv("t", ontology.Time(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)))), want: false, anyType: true},
	})
}

// TestCaseSensitivity is A6: attribute names and string values are
// case-sensitive.
func TestCaseSensitivity(t *testing.T) {
	runSemCases(t, []semCase{
		{name: "value", src: `s == "hall"`, ev: attrs(kv("s", ontology.String("Hall"))), want: false},
		{name: "value-in", src: `s in {"hall", "HALL"}`, ev: attrs(kv("s", ontology.String("Hall"))), want: false},
		{name: "name", src: `s == "x"`, ev: attrs(kv("S", ontology.String("x"))), want: false},
		{name: "name-not-exists", src: `s not exists`, ev: attrs(kv("S", ontology.String("x"))), want: true},
		{name: "name-upper", src: `S == "x"`, ev: attrs(kv("S", ontology.String("x"))), want: true},
		{name: "non-ascii-name", src: `température > 20`, ev: attrs(kv("température", ontology.Float(21))), want: true},
		{name: "non-ascii-name-case", src: `température not exists`, ev: attrs(kv("Température", ontology.Float(21))), want: true},
	})
}

// TestCrossKind covers DESIGN "Values at the edges": integers and floats
// compare by exact value (2^53+1 ≠ 2^53.0), 0 = 0.0 = −0.0, and values of
// other kinds never compare: "0" ≠ 0, so != and not in hold.
func TestCrossKind(t *testing.T) {
	negZero := ontology.Float(math.Copysign(0, -1))
	i := func(v int64) *BasicEvent { return attrs(kv("i", ontology.Int(v))) }
	f := func(v float64) *BasicEvent { return attrs(kv("f", ontology.Float(v))) }
	runSemCases(t, []semCase{
		{name: "2^53+1 int == 2^53 float", src: "i == 9007199254740992.0", ev: i(9007199254740993), want: false},
		{name: "2^53+1 int != 2^53 float", src: "i != 9007199254740992.0", ev: i(9007199254740993), want: true},
		{name: "2^53+1 int > 2^53 float", src: "i > 9007199254740992.0", ev: i(9007199254740993), want: true},
		{name: "2^53+1 int in {2^53 float}", src: "i in {9007199254740992.0}", ev: i(9007199254740993), want: false},
		{name: "2^53+1 int not in {2^53 float}", src: "i not in {9007199254740992.0}", ev: i(9007199254740993), want: true},
		{name: "2^53 int == 2^53 float", src: "i == 9007199254740992.0", ev: i(9007199254740992), want: true},
		{name: "2^53 float == 2^53+1 int", src: "f == 9007199254740993", ev: f(9007199254740992), want: false},
		{name: "2^53 float < 2^53+1 int", src: "f < 9007199254740993", ev: f(9007199254740992), want: true},
		{name: "2^53 float in [2^53+1, 2^53+3]", src: "f in [9007199254740993, 9007199254740995]", ev: f(9007199254740992), want: false},
		{name: "2^53 float in (2^53-1, 2^53+1)", src: "f in (9007199254740991, 9007199254740993)", ev: f(9007199254740992), want: true},
		{name: "MaxInt64 int < 2^63 float", src: "i < 9223372036854775808.0", ev: i(math.MaxInt64), want: true},
		{name: "MaxInt64 int == 2^63 float", src: "i == 9223372036854775808.0", ev: i(math.MaxInt64), want: false},
		{name: "MinInt64 int == -2^63 float", src: "i == -9223372036854775808.0", ev: i(math.MinInt64), want: true},
		{name: "1e19 float > MaxInt64", src: "f > 9223372036854775807", ev: f(1e19), want: true},
		{name: "-1e19 float < MinInt64", src: "f < -9223372036854775808", ev: f(-1e19), want: true},
		{name: "0.5 float between ints", src: "f in (0, 1)", ev: f(0.5), want: true},
		{name: "int 3 == 3.0", src: "i == 3.0", ev: i(3), want: true},
		{name: "float 3.0 event on int attr", src: "i == 3", ev: attrs(kv("i", ontology.Float(3))), want: true},
		{name: "float 3.5 event on int attr", src: "i in [3, 4]", ev: attrs(kv("i", ontology.Float(3.5))), want: true},
		{name: "int in {1, 2.0} with 2", src: "i in {1, 2.0}", ev: i(2), want: true},
		// 0 = 0.0 = −0.0.
		{name: "-0.0 == 0", src: "f == 0", ev: attrs(kv("f", negZero)), want: true},
		{name: "0 int == -0.0", src: "f == -0.0", ev: attrs(kv("f", ontology.Int(0))), want: true},
		{name: "0.0 == -0.0", src: "f == -0.0", ev: f(0), want: true},
		{name: "-0.0 != 0.0", src: "f != 0.0", ev: attrs(kv("f", negZero)), want: false},
		{name: "-0.0 < 0", src: "f < 0", ev: attrs(kv("f", negZero)), want: false},
		{name: "-0.0 <= 0", src: "f <= 0", ev: attrs(kv("f", negZero)), want: true},
		{name: "-0.0 in {0}", src: "f in {0}", ev: attrs(kv("f", negZero)), want: true},
		{name: "-0.0 not in {0.0}", src: "f not in {0.0}", ev: attrs(kv("f", negZero)), want: false},
		{name: "-0.0 in (0, 1]", src: "f in (0, 1]", ev: attrs(kv("f", negZero)), want: false},
		{name: "0 in [-0.0, 1]", src: "f in [-0.0, 1]", ev: f(0), want: true},
		{name: "0 in (-0.0, 1]", src: "f in (-0.0, 1]", ev: f(0), want: false},
		{name: "int 0 in [-1, -0.0]", src: "i in [-1, -0.0]", ev: i(0), want: true},
		// A string never equals a number.
		{name: `"0" == 0`, src: `s == 0`, ev: attrs(kv("s", ontology.String("0"))), want: false, anyType: true},
		{name: `"0" != 0`, src: `s != 0`, ev: attrs(kv("s", ontology.String("0"))), want: true, anyType: true},
		{name: `"0" in {0, 0.0}`, src: `s in {0, 0.0}`, ev: attrs(kv("s", ontology.String("0"))), want: false, anyType: true},
		{name: `"0" not in {0}`, src: `s not in {0}`, ev: attrs(kv("s", ontology.String("0"))), want: true, anyType: true},
		{name: `"0" >= 0`, src: `s >= 0`, ev: attrs(kv("s", ontology.String("0"))), want: false, anyType: true},
		{name: `0 == "0"`, src: `i == "0"`, ev: i(0), want: false, anyType: true},
		{name: `0 != "0"`, src: `i != "0"`, ev: i(0), want: true, anyType: true},
		{name: `0 < "1"`, src: `i < "1"`, ev: i(0), want: false, anyType: true},
		// A time is not its nanoseconds.
		{name: "time == int ns", src: "t == 0", ev: attrs(kv("t", ontology.TimeNanos(0))), want: false, anyType: true},
		{name: "time != int ns", src: "t != 0", ev: attrs(kv("t", ontology.TimeNanos(0))), want: true, anyType: true},
		{name: "int ns == time", src: `i == time("1970-01-01T00:00:00Z")`, ev: i(0), want: false, anyType: true},
		{name: "time offsets are one instant", src: `t == time("2024-01-02T05:04:05+02:00")`,
			ev: attrs(kv("t", ontology.Time(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)))), want: true},
	})
}

// allOps are predicates with every operator on operand x (an attribute
// name or payload operand), with the answer when x is missing.
func allOps(x string) []struct {
	src     string
	missing bool
} {
	return []struct {
		src     string
		missing bool
	}{
		{x + ` == 1`, false}, {x + ` != 1`, false}, {x + ` < 1`, false}, {x + ` <= 1`, false},
		{x + ` > 1`, false}, {x + ` >= 1`, false}, {x + ` in [0, 2]`, false}, {x + ` in (0, 2)`, false},
		{x + ` in {1, 2}`, false}, {x + ` not in {1, 2}`, false},
		{x + ` == "a"`, false}, {x + ` != "a"`, false}, {x + ` not in {"a"}`, false},
		{x + ` prefix "a"`, false}, {x + ` suffix "a"`, false}, {x + ` contains "a"`, false},
		{x + ` == true`, false}, {x + ` != true`, false},
		{x + ` exists`, false}, {x + ` not exists`, true}, {`true`, true},
	}
}

// TestMissingOperand: a missing attribute or payload field makes every
// predicate false except not exists and true. A zero ontology.Value in an
// event counts as missing.
func TestMissingOperand(t *testing.T) {
	var cases []semCase
	for _, p := range allOps("f") {
		cases = append(cases,
			semCase{name: "attr/" + p.src, src: p.src, ev: attrs(kv("i", ontology.Int(1))), want: p.missing, anyType: true},
			semCase{name: "attr-zero-value/" + p.src, src: p.src, ev: attrs(kv("f", ontology.Value{})), want: p.missing, anyType: true},
			semCase{name: "no-attrs/" + p.src, src: p.src, ev: attrs(), want: p.missing, anyType: true},
		)
	}
	for _, p := range allOps("json(x)") {
		cases = append(cases,
			semCase{name: "json-absent/" + p.src, src: p.src, ev: payload("application/json", `{"y": 1}`), want: p.missing},
			semCase{name: "json-null/" + p.src, src: p.src, ev: payload("application/json", `{"x": null}`), want: p.missing},
			semCase{name: "no-payload/" + p.src, src: p.src, ev: attrs(), want: p.missing},
			semCase{name: "xml-payload/" + p.src, src: p.src, ev: payload("application/xml", `<x>1</x>`), want: p.missing},
		)
	}
	runSemCases(t, cases)
}

// TestNaNEventValue: a NaN event value matches nothing — not even != and
// not in — but it is present, so exists holds and not exists does not.
func TestNaNEventValue(t *testing.T) {
	nan := attrs(kv("f", ontology.Float(math.NaN())))
	var cases []semCase
	for _, p := range allOps("f") {
		want := false
		switch p.src {
		case "f exists", "true":
			want = true
		}
		cases = append(cases, semCase{name: p.src, src: p.src, ev: nan, want: want, anyType: true})
	}
	for _, src := range []string{"f == 0.5", "f != 0.5", "f < 1e300", "f > -1e300", "f in [-1e300, 1e300]", "f not in {0.5}", "f in {0, 1}"} {
		cases = append(cases, semCase{name: "typed/" + src, src: src, ev: nan, want: false})
	}
	cases = append(cases, semCase{name: "typed/f exists", src: "f exists", ev: nan, want: true})
	runSemCases(t, cases)
}

// TestJSONOperands: gjson paths into a JSON payload. Numbers written as
// integers are ints (exact above 2^53), other numbers floats; null is
// missing; objects and arrays are present but equal and order with
// nothing (so, like any present value that differs, != and not in hold);
// a JSON string never equals a number (A3); escaped keys name keys with
// dots.
func TestJSONOperands(t *testing.T) {
	j := func(data string) *BasicEvent { return payload("application/json", data) }
	runSemCases(t, []semCase{
		{name: "int == int", src: `json(n) == 9007199254740993`, ev: j(`{"n": 9007199254740993}`), want: true},
		{name: "int == int, 2^53", src: `json(n) == 9007199254740993`, ev: j(`{"n": 9007199254740992}`), want: false},
		{name: "int != 2^53 float", src: `json(n) != 9007199254740992.0`, ev: j(`{"n": 9007199254740993}`), want: true},
		{name: "int > 2^53 float", src: `json(n) > 9007199254740992.0`, ev: j(`{"n": 9007199254740993}`), want: true},
		{name: "float written 2^53+1 is 2^53", src: `json(n) == 9007199254740993`, ev: j(`{"n": 9007199254740993.0}`), want: false},
		{name: "float written 2^53+1 == 2^53", src: `json(n) == 9007199254740992`, ev: j(`{"n": 9007199254740993.0}`), want: true},
		{name: "exponent is a float", src: `json(n) == 9007199254740993`, ev: j(`{"n": 9.007199254740993e15}`), want: false},
		{name: "1e0 == 1", src: `json(n) == 1`, ev: j(`{"n": 1e0}`), want: true},
		{name: "1.0 == 1", src: `json(n) == 1`, ev: j(`{"n": 1.0}`), want: true},
		{name: "-0 == 0.0", src: `json(n) == 0.0`, ev: j(`{"n": -0}`), want: true},
		{name: "-0.0 == 0", src: `json(n) == 0`, ev: j(`{"n": -0.0}`), want: true},
		{name: "-0.0 in (0, 1]", src: `json(n) in (0, 1]`, ev: j(`{"n": -0.0}`), want: false},
		{name: "MaxInt64", src: `json(n) == 9223372036854775807`, ev: j(`{"n": 9223372036854775807}`), want: true},
		{name: "MinInt64", src: `json(n) == -9223372036854775808`, ev: j(`{"n": -9223372036854775808}`), want: true},
		{name: "2^63 is a float above MaxInt64", src: `json(n) > 9223372036854775807`, ev: j(`{"n": 9223372036854775808}`), want: true},
		{name: "0.1 != 0.3-0.2", src: `json(n) == 0.1`, ev: j(`{"n": 0.1}`), want: true},
		{name: "range", src: `json(n) in [2.5, 3)`, ev: j(`{"n": 2.5}`), want: true},
		{name: "range hi open", src: `json(n) in [2.5, 3)`, ev: j(`{"n": 3}`), want: false},
		// Strings and numbers never meet.
		{name: `"0" == 0`, src: `json(n) == 0`, ev: j(`{"n": "0"}`), want: false},
		{name: `"0" != 0`, src: `json(n) != 0`, ev: j(`{"n": "0"}`), want: true},
		{name: `"0" not in {0}`, src: `json(n) not in {0}`, ev: j(`{"n": "0"}`), want: true},
		{name: `"1" > 0`, src: `json(n) > 0`, ev: j(`{"n": "1"}`), want: false},
		{name: `0 == "0"`, src: `json(n) == "0"`, ev: j(`{"n": 0}`), want: false},
		{name: `0 != "0"`, src: `json(n) != "0"`, ev: j(`{"n": 0}`), want: true},
		{name: `"2024-01-02T03:04:05Z" is not a time`, src: `json(n) == time("2024-01-02T03:04:05Z")`, ev: j(`{"n": "2024-01-02T03:04:05Z"}`), want: false},
		{name: `true == true`, src: `json(n) == true`, ev: j(`{"n": true}`), want: true},
		{name: `false != true`, src: `json(n) != true`, ev: j(`{"n": false}`), want: true},
		{name: `true == 1`, src: `json(n) == 1`, ev: j(`{"n": true}`), want: false},
		{name: `"true" == true`, src: `json(n) == true`, ev: j(`{"n": "true"}`), want: false},
		// null is missing.
		{name: "null exists", src: `json(n) exists`, ev: j(`{"n": null}`), want: false},
		{name: "null not exists", src: `json(n) not exists`, ev: j(`{"n": null}`), want: true},
		{name: "null != 0", src: `json(n) != 0`, ev: j(`{"n": null}`), want: false},
		// Objects and arrays are present and compare with nothing.
		{name: "object exists", src: `json(n) exists`, ev: j(`{"n": {"x": 1}}`), want: true},
		{name: "object not exists", src: `json(n) not exists`, ev: j(`{"n": {"x": 1}}`), want: false},
		{name: "object == 1", src: `json(n) == 1`, ev: j(`{"n": {"x": 1}}`), want: false},
		{name: "object > 0", src: `json(n) > 0`, ev: j(`{"n": {"x": 1}}`), want: false},
		{name: "object in {1}", src: `json(n) in {1}`, ev: j(`{"n": {"x": 1}}`), want: false},
		{name: "object prefix", src: `json(n) prefix "{"`, ev: j(`{"n": {"x": 1}}`), want: false},
		{name: "object != 1", src: `json(n) != 1`, ev: j(`{"n": {"x": 1}}`), want: true},
		{name: "object not in {1}", src: `json(n) not in {1}`, ev: j(`{"n": {"x": 1}}`), want: true},
		{name: "array exists", src: `json(n) exists`, ev: j(`{"n": [1, 2]}`), want: true},
		{name: "array == 1", src: `json(n) == 1`, ev: j(`{"n": [1]}`), want: false},
		{name: "array contains", src: `json(n) contains "1"`, ev: j(`{"n": [1]}`), want: false},
		{name: "empty array exists", src: `json(n) exists`, ev: j(`{"n": []}`), want: true},
		// gjson paths.
		{name: "nested", src: `json(a.b) == 1`, ev: j(`{"a": {"b": 1}}`), want: true},
		{name: "array element", src: `json(a.1) == 2`, ev: j(`{"a": [1, 2, 3]}`), want: true},
		{name: "array count", src: `json(a.#) == 3`, ev: j(`{"a": [1, 2, 3]}`), want: true},
		{name: "query", src: `json(a.#(id=="x").v) >= 2`, ev: j(`{"a": [{"id": "y", "v": 1}, {"id": "x", "v": 2}]}`), want: true},
		{name: "top-level array", src: `json(0) == "x"`, ev: j(`["x"]`), want: true},
		{name: "escaped dot", src: `json(temp\.celsius) > 30`, ev: j(`{"temp.celsius": 31, "temp": {"celsius": 12}}`), want: true},
		{name: "unescaped dot is nesting", src: `json(temp.celsius) > 30`, ev: j(`{"temp.celsius": 31, "temp": {"celsius": 12}}`), want: false},
		{name: "escaped dot, only nested", src: `json(temp\.celsius) exists`, ev: j(`{"temp": {"celsius": 35}}`), want: false},
		{name: "EscapeJSON key", src: fmt.Sprintf(`json(%s) == "#item"`, EscapeJSON("@odata.type")), ev: j(`{"@odata.type": "#item", "@odata": {"type": "nested"}}`), want: true},
		{name: "EscapeJSON wildcard key", src: fmt.Sprintf(`json(%s) == 1`, EscapeJSON("a*b?")), ev: j(`{"a*b?": 1, "axbz": 2}`), want: true},
		{name: "key case", src: `json(Temp) exists`, ev: j(`{"temp": 1}`), want: false},
		// Strings: JSON escapes decode; bytes, case-sensitive.
		{name: "string escape", src: `json(s) == "aé"`, ev: j(`{"s": "a\u00e9"}`), want: true},
		{name: "string prefix utf8", src: `json(s) prefix "Pā"`, ev: j(`{"s": "Pāhala"}`), want: true},
		{name: "string case", src: `json(s) == "hall"`, ev: j(`{"s": "Hall"}`), want: false},
		{name: "string order by bytes", src: `json(s) > "z"`, ev: j(`{"s": "é"}`), want: true},
		{name: "empty string exists", src: `json(s) exists`, ev: j(`{"s": ""}`), want: true},
		{name: "empty string == \"\"", src: `json(s) == ""`, ev: j(`{"s": ""}`), want: true},
	})
}

// TestXPathOperands: XPath expressions over an XML payload follow XPath
// 1.0 coercion — a node-set compares existentially through the string
// values of its nodes, converted to numbers for a number and for <, <=,
// >, >=; numbers are doubles. Any XPath predicate on a payload that is not
// XML is false, not exists included.
func TestXPathOperands(t *testing.T) {
	x := func(data string) *BasicEvent { return payload("application/xml", data) }
	two := x(`<r><v>1</v><v>30</v></r>`)
	runSemCases(t, []semCase{
		{name: "number >", src: `xpath(/r/v) > 20`, ev: x(`<r><v>21</v></r>`), want: true},
		{name: "number > false", src: `xpath(/r/v) > 20`, ev: x(`<r><v>19.5</v></r>`), want: false},
		{name: "number ==", src: `xpath(/r/v) == 21`, ev: x(`<r><v>21</v></r>`), want: true},
		{name: "number == float literal", src: `xpath(/r/v) == 21.0`, ev: x(`<r><v>21</v></r>`), want: true},
		{name: "number == with spaces", src: `xpath(/r/v) == 21`, ev: x(`<r><v> 21 </v></r>`), want: true},
		{name: "string == differs from number ==", src: `xpath(/r/v) == "21"`, ev: x(`<r><v>21.0</v></r>`), want: false},
		{name: "number == 21.0", src: `xpath(/r/v) == 21`, ev: x(`<r><v>21.0</v></r>`), want: true},
		{name: "string ==", src: `xpath(/r/v) == "21"`, ev: x(`<r><v>21</v></r>`), want: true},
		{name: "string < converts to numbers", src: `xpath(/r/v) < "3"`, ev: x(`<r><v>21</v></r>`), want: false},
		{name: "string > converts to numbers", src: `xpath(/r/v) > "3"`, ev: x(`<r><v>21</v></r>`), want: true},
		{name: "doubles: 2^53+1 == 2^53", src: `xpath(/r/v) == 9007199254740993`, ev: x(`<r><v>9007199254740992</v></r>`), want: true},
		{name: "not a number: = 0", src: `xpath(/r/v) == 0`, ev: x(`<r><v>abc</v></r>`), want: false},
		{name: "not a number: != 0", src: `xpath(/r/v) != 0`, ev: x(`<r><v>abc</v></r>`), want: true},
		{name: "not a number: > 0", src: `xpath(/r/v) > 0`, ev: x(`<r><v>abc</v></r>`), want: false},
		{name: "node-set == is existential", src: `xpath(/r/v) == 1`, ev: two, want: true},
		{name: "node-set != is existential", src: `xpath(/r/v) != 1`, ev: two, want: true},
		{name: "node-set < and > both", src: `xpath(/r/v) < 20`, ev: two, want: true},
		{name: "node-set > 20", src: `xpath(/r/v) > 20`, ev: two, want: true},
		// A range is (E >= lo) and (E <= hi), each existential: 30 ≥ 2 and
		// 1 ≤ 29, though no node lies in [2, 29] (see xpathSource).
		{name: "node-set range", src: `xpath(/r/v) in [2, 29]`, ev: two, want: true},
		{name: "node-set range, one node in", src: `xpath(/r/v[. >= 2 and . <= 29]) exists`, ev: two, want: false},
		{name: "node-set in", src: `xpath(/r/v) in {30, 31}`, ev: two, want: true},
		{name: "node-set not in", src: `xpath(/r/v) not in {1}`, ev: two, want: true},
		{name: "node-set not in all", src: `xpath(/r/v) not in {1, 30}`, ev: x(`<r><v>1</v></r>`), want: false},
		{name: "empty node-set ==", src: `xpath(/r/v) == 1`, ev: x(`<r/>`), want: false},
		{name: "empty node-set !=", src: `xpath(/r/v) != 1`, ev: x(`<r/>`), want: false},
		{name: "range closed", src: `xpath(/r/v) in [1, 2]`, ev: x(`<r><v>2</v></r>`), want: true},
		{name: "range open", src: `xpath(/r/v) in [1, 2)`, ev: x(`<r><v>2</v></r>`), want: false},
		{name: "range lo open", src: `xpath(/r/v) in (1, 2]`, ev: x(`<r><v>1</v></r>`), want: false},
		{name: "attribute", src: `xpath(/r/@a) == "x"`, ev: x(`<r a="x"/>`), want: true},
		{name: "quotes", src: `xpath(/r/s) == "a\"b'c"`, ev: x(`<r><s>a"b'c</s></r>`), want: true},
		{name: "starts-with", src: `xpath(/r/s) prefix "hall."`, ev: x(`<r><s>hall.north</s></r>`), want: true},
		{name: "starts-with case", src: `xpath(/r/s) prefix "hall."`, ev: x(`<r><s>Hall.north</s></r>`), want: false},
		{name: "starts-with utf8", src: `xpath(/r/s) prefix "Pā"`, ev: x(`<r><s>Pāhala</s></r>`), want: true},
		{name: "ends-with", src: `xpath(/r/s) suffix "north"`, ev: x(`<r><s>hall.north</s></r>`), want: true},
		{name: "contains", src: `xpath(/r/s) contains "l.n"`, ev: x(`<r><s>hall.north</s></r>`), want: true},
		{name: "contains no", src: `xpath(/r/s) contains "x"`, ev: x(`<r><s>hall.north</s></r>`), want: false},
		{name: "exists", src: `xpath(/r/v) exists`, ev: x(`<r><v/></r>`), want: true},
		{name: "exists no", src: `xpath(/r/v) exists`, ev: x(`<r/>`), want: false},
		{name: "not exists", src: `xpath(/r/v) not exists`, ev: x(`<r/>`), want: true},
		{name: "not exists no", src: `xpath(/r/v) not exists`, ev: x(`<r><v/></r>`), want: false},
		{name: "boolean", src: `xpath(count(/r/v) = 2)`, ev: two, want: true},
		{name: "boolean false", src: `xpath(count(/r/v) = 3)`, ev: two, want: false},
		{name: "boolean of node-set", src: `xpath(/r/v)`, ev: two, want: true},
		{name: "string function", src: `xpath(string(/r/v)) == "1"`, ev: two, want: true},
		{name: "text/xml", src: `xpath(/r/v) == 1`, ev: payload("text/xml", `<r><v>1</v></r>`), want: true},
		{name: "namespaces", src: `xmlns:s = "urn:s"; xpath(/s:r/s:v) == 1`, ev: x(`<q:r xmlns:q="urn:s"><q:v>1</q:v></q:r>`), want: true},
		{name: "namespaces other uri", src: `xmlns:s = "urn:s"; xpath(/s:r/s:v) == 1`, ev: x(`<s:r xmlns:s="urn:t"><s:v>1</s:v></s:r>`), want: false},
		// Not XML: every XPath predicate is false, not exists included.
		{name: "json payload/exists", src: `xpath(/r) exists`, ev: payload("application/json", `{"r": 1}`), want: false},
		{name: "json payload/not exists", src: `xpath(/r) not exists`, ev: payload("application/json", `{"r": 1}`), want: false},
		{name: "json payload/boolean", src: `xpath(true())`, ev: payload("application/json", `{"r": 1}`), want: false},
		{name: "json payload/!=", src: `xpath(/r) != 1`, ev: payload("application/json", `{"r": 2}`), want: false},
		{name: "no payload/not exists", src: `xpath(/r) not exists`, ev: attrs(), want: false},
		{name: "no payload/boolean not", src: `xpath(not(/r))`, ev: attrs(), want: false},
		{name: "text/plain/not exists", src: `xpath(/r) not exists`, ev: payload("text/plain", `<r/>`), want: false},
		{name: "malformed xml/not exists", src: `xpath(/r) not exists`, ev: payload("application/xml", `<r><v></r>`), want: false},
	})
}

// TestXPathBoolLiteral: in XPath 1.0, comparing a node-set with a boolean
// converts the node-set with boolean() (XPath 1.0 §3.4): a non-empty
// node-set equals true(), an empty one equals false(). The filter must
// follow that coercion (DESIGN "Values at the edges", CASES A3).
func TestXPathBoolLiteral(t *testing.T) {
	x := func(data string) *BasicEvent { return payload("application/xml", data) }
	runSemCases(t, []semCase{
		{name: "non-empty == true", src: `xpath(/r/v) == true`, ev: x(`<r><v/></r>`), want: true},
		{name: "non-empty with text == true", src: `xpath(/r/v) == true`, ev: x(`<r><v>x</v></r>`), want: true},
		{name: "empty == false", src: `xpath(/r/v) == false`, ev: x(`<r/>`), want: true},
		{name: "empty == true", src: `xpath(/r/v) == true`, ev: x(`<r/>`), want: false},
		{name: "non-empty != true", src: `xpath(/r/v) != true`, ev: x(`<r><v>x</v></r>`), want: false},
		{name: "empty in {false}", src: `xpath(/r/v) in {false}`, ev: x(`<r/>`), want: true},
	})
}

// TestMatchModes checks "match atleast k" and "match score >= x": which
// events match and that Index and BruteForce report exactly Eval's score.
func TestMatchModes(t *testing.T) {
	i, f, s := func(v int64) ontology.Attr { return kv("i", ontology.Int(v)) },
		func(v float64) ontology.Attr { return kv("f", ontology.Float(v)) },
		func(v string) ontology.Attr { return kv("s", ontology.String(v)) }
	const k2 = `match atleast 2; i == 1; f > 0; s prefix "a"`
	const w = `match score >= 2.5; i == 1 weight 2; f > 0 weight 0.5; s prefix "a"`
	tenth, fifth := 0.1, 0.2 // float64 sums, not exact constant arithmetic
	const tenths = `match score >= 0.3; i == 1 weight 0.1; f > 0 weight 0.2; s exists weight 0.7`
	runSemCases(t, []semCase{
		{name: "all/3 of 3", src: `i == 1; f > 0; s prefix "a"`, ev: attrs(i(1), f(1), s("ab")), want: true, score: 3},
		{name: "all/2 of 3", src: `i == 1; f > 0; s prefix "a"`, ev: attrs(i(1), f(1), s("b")), want: false},
		{name: "all/no predicates", src: ``, ev: attrs(), want: true},
		{name: "atleast 2/0 of 3", src: k2, ev: attrs(i(0), f(-1), s("b")), want: false},
		{name: "atleast 2/1 of 3", src: k2, ev: attrs(i(1), f(-1), s("b")), want: false},
		{name: "atleast 2/2 of 3", src: k2, ev: attrs(i(1), f(1), s("b")), want: true, score: 2},
		{name: "atleast 2/other 2 of 3", src: k2, ev: attrs(f(1), s("a")), want: true, score: 2},
		{name: "atleast 2/3 of 3", src: k2, ev: attrs(i(1), f(1), s("a")), want: true, score: 3},
		{name: "atleast 1/not exists", src: `match atleast 1; i == 5; f not exists`, ev: attrs(i(1)), want: true, score: 1},
		{name: "atleast 2/true and not exists", src: `match atleast 2; true; i == 1; f not exists`, ev: attrs(f(1)), want: false},
		{name: "atleast 2/true and not exists hold", src: `match atleast 2; true; i == 1; f not exists`, ev: attrs(), want: true, score: 2},
		{name: "score/none", src: w, ev: attrs(), want: false},
		{name: "score/2", src: w, ev: attrs(i(1)), want: false},
		{name: "score/2+0.5", src: w, ev: attrs(i(1), f(1)), want: true, score: 2.5},
		{name: "score/2+1", src: w, ev: attrs(i(1), s("a")), want: true, score: 3},
		{name: "score/0.5+1", src: w, ev: attrs(f(1), s("a")), want: false},
		{name: "score/all", src: w, ev: attrs(i(1), f(1), s("a")), want: true, score: 3.5},
		{name: "score/0.1+0.2", src: tenths, ev: attrs(i(1), f(1)), want: true, score: tenth + fifth},
		{name: "score/0.1", src: tenths, ev: attrs(i(1)), want: false},
		{name: "score/0.7", src: tenths, ev: attrs(s("")), want: true, score: 0.7},
		{name: "score/0.1+0.2+0.7", src: tenths, ev: attrs(i(1), f(1), s("")), want: true, score: tenth + fifth + 0.7},
		{name: "score/free weight reaches threshold", src: `match score >= 1; i not exists weight 1; f == 1 weight 3`, ev: attrs(), want: true, score: 1},
		{name: "score/free weight and more", src: `match score >= 1; i not exists weight 1; f == 1 weight 3`, ev: attrs(f(1)), want: true, score: 4},
		{name: "score/xpath and json", src: `match score >= 2; xpath(/r/v > 1) weight 1.5; json(n) == 1 weight 0.5; i == 1 weight 0.5`,
			ev: &BasicEvent{Attrs: []ontology.Attr{i(1)}, ContentType: "application/xml", Data: []byte(`<r><v>2</v></r>`)}, want: true, score: 2},
	})
}

// TestContentTypeClassification: the media type decides how a payload is
// read; parameters after ';' are ignored; "+json" and "+xml" suffixes
// count; "" sniffs the first non-space byte.
func TestContentTypeClassification(t *testing.T) {
	const js, xm = `{"v": 1}`, `<v>1</v>`
	var cases []semCase
	for _, c := range []struct {
		name, ct, data string
		json, xml      bool
	}{
		{"application/json", "application/json", js, true, false},
		{"charset", "application/json; charset=utf-8", js, true, false},
		{"charset no space", "application/json;charset=utf-8", js, true, false},
		{"spaces", " application/json ; charset=utf-8", js, true, false},
		{"text/json", "text/json", js, true, false},
		{"+json", "application/geo+json", js, true, false},
		{"vnd +json with params", "application/vnd.api+json; ext=bulk", js, true, false},
		{"application/xml", "application/xml", xm, false, true},
		{"text/xml", "text/xml", xm, false, true},
		{"+xml", "application/atom+xml", xm, false, true},
		{"+xml charset", "application/rss+xml; charset=utf-8", xm, false, true},
		{"sniff json object", "", js, true, false},
		{"sniff json array", "", `[{"v": 1}]`, false, false}, // JSON, but v is not at the top
		{"sniff json with spaces", "", " \t\r\n" + js, true, false},
		{"sniff xml", "", xm, false, true},
		{"sniff xml with spaces", "", "\n  " + xm, false, true},
		{"sniff other", "", "v=1", false, false},
		{"sniff only spaces", "", "  ", false, false},
		{"text/plain with json", "text/plain", js, false, false},
		{"text/plain with xml", "text/plain", xm, false, false},
		{"octet-stream", "application/octet-stream", js, false, false},
		{"json type, xml data", "application/json", xm, false, false},
		{"xml type, json data", "application/xml", js, false, false},
		{"empty data", "application/json", "", false, false},
	} {
		ev := func() *BasicEvent { return payload(c.ct, c.data) }
		cases = append(cases,
			semCase{name: c.name + "/json", src: `json(v) == 1`, ev: ev(), want: c.json},
			semCase{name: c.name + "/json not exists", src: `json(v) not exists`, ev: ev(), want: !c.json},
			semCase{name: c.name + "/xpath", src: `xpath(/v) == 1`, ev: ev(), want: c.xml},
			semCase{name: c.name + "/xpath not exists", src: `xpath(/v) not exists`, ev: ev(), want: false},
		)
	}
	runSemCases(t, cases)
	runSemCases(t, []semCase{
		{name: "sniffed json array index", src: `json(0.v) == 1`, ev: payload("", `[{"v": 1}]`), want: true},
	})
}

// TestContentTypeCaseInsensitive: media type and subtype names are
// case-insensitive (RFC 9110 §8.3.1), so "Application/JSON" is JSON.
func TestContentTypeCaseInsensitive(t *testing.T) {
	var cases []semCase
	for _, ct := range []string{"Application/JSON", "application/JSON; charset=UTF-8", "application/GEO+JSON"} {
		cases = append(cases, semCase{name: ct, src: `json(v) == 1`, ev: payload(ct, `{"v": 1}`), want: true})
	}
	for _, ct := range []string{"Text/XML", "application/Atom+XML"} {
		cases = append(cases, semCase{name: ct, src: `xpath(/v) == 1`, ev: payload(ct, `<v>1</v>`), want: true})
	}
	runSemCases(t, cases)
}

// TestTypeTest: the semantics above hold for events of a subtype and do
// not for events of an unknown type, except for AnyType filters; Eval
// ignores the type.
func TestTypeTest(t *testing.T) {
	o := semOnt(t)
	ev := func(typ string) *BasicEvent {
		return &BasicEvent{Type: typ, Attrs: []ontology.Attr{kv("i", ontology.Int(1))}}
	}
	for _, c := range []struct {
		name, src, typ string
		want           bool
	}{
		{"same type", `{type ⊑ Sem; i == 1}`, "Sem", true},
		{"subtype", `{type ⊑ Sem; i == 1}`, "SemSub", true},
		{"supertype", `{type ⊑ SemSub; i == 1}`, "Sem", false},
		{"unknown", `{type ⊑ Sem; i == 1}`, "Other", false},
		{"any, unknown", `{i == 1}`, "Other", true},
		{"type case", `{type ⊑ Sem; i == 1}`, "sem", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := MustCompile(c.src)
			e := ev(c.typ)
			ok, _ := f.Eval(e)
			assert.True(t, ok, "Eval ignores the type")
			want := matchResult{}
			if c.want {
				want[1] = 1
			}
			ix, bf := NewIndex(o), NewBruteForce(o)
			require.NoError(t, ix.Add(1, f))
			require.NoError(t, bf.Add(1, f))
			assert.Equal(t, want, collect(ix, e), "Index")
			assert.Equal(t, want, collect(bf, e), "BruteForce")
		})
	}
}

// TestSemanticsManyFilters puts every filter of the tables above into one
// Index and one BruteForce and checks that each event gets the same
// matches from both: the one-filter checks do not exercise shared
// postings.
func TestSemanticsManyFilters(t *testing.T) {
	o := semOnt(t)
	ix, bf := NewIndex(o), NewBruteForce(o)
	var events []*BasicEvent
	id := uint64(0)
	add := func(src string, ev *BasicEvent) {
		f, err := Compile(src)
		require.NoError(t, err)
		id++
		require.NoError(t, ix.Add(id, f), src)
		require.NoError(t, bf.Add(id, f), src)
		if ev.Type == "" {
			ev.Type = "Sem"
		}
		events = append(events, ev)
	}
	for _, k := range orderedKinds() {
		for p := below; p <= above; p++ {
			for _, op := range []string{"==", "!=", "<", "<=", ">", ">="} {
				add(fmt.Sprintf("{type ⊑ Sem; %s %s %s}", k.attr, op, k.lit[p]), attrs(kv(k.attr, k.v[p])))
			}
			add(fmt.Sprintf("{type ⊑ Sem; %s in (%s, %s]}", k.attr, k.lit[atLo], k.lit[atHi]), attrs(kv(k.attr, k.v[p])))
			add(fmt.Sprintf("{%s in {%s, %s}}", k.attr, k.lit[p], k.lit[atHi]), attrs(kv(k.attr, k.v[p])))
		}
	}
	for _, p := range allOps("json(x)") {
		add("{"+p.src+"}", payload("application/json", `{"x": "a"}`))
	}
	events = append(events, attrs(kv("f", ontology.Float(math.NaN()))), attrs(), payload("", `{"x": 1}`))
	for _, ev := range events {
		want, got := collect(bf, ev), collect(ix, ev)
		require.Equal(t, want, got, "event %+v %s", ev, strings.TrimSpace(string(ev.Data)))
	}
}

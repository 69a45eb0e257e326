package filter

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// headValues are event values around and inside the windows of
// headPredicates: integers, integral and fractional floats, NaN, ±Inf,
// extreme integers, other kinds, and the missing value.
func headValues() []val {
	var vs []val
	for n := int64(-80); n <= 150; n++ {
		vs = append(vs, val{v: ontology.Int(n), present: true})
		vs = append(vs, val{v: ontology.Float(float64(n)), present: true})
		vs = append(vs, val{v: ontology.Float(float64(n) + 0.5), present: true})
	}
	for _, n := range []int64{math.MinInt16 - 1, math.MinInt16, math.MinInt16 + 63, math.MinInt16 + 64, math.MaxInt16, math.MaxInt16 + 63, math.MaxInt16 + 64, 1 << 40, 1<<40 + 1, -1 << 40, -1<<40 - 1, math.MaxInt64, math.MinInt64, math.MinInt64 + 1, math.MinInt64 + 2} {
		vs = append(vs, val{v: ontology.Int(n), present: true})
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 1e300, -1e300, 0x1p63, -0x1p63, 5e-324} {
		vs = append(vs, val{v: ontology.Float(f), present: true})
	}
	vs = append(vs,
		val{},
		val{v: ontology.String("3"), present: true},
		val{v: ontology.Bool(true), present: true},
		val{v: ontology.Bool(false), present: true},
		val{v: ontology.TimeNanos(3), present: true},
		val{v: ontology.TimeNanos(0), present: true},
	)
	return vs
}

func headPredicates() []Predicate {
	a := Attr("n")
	i, f := ontology.Int, ontology.Float
	return []Predicate{
		a.EQ(i(0)), a.EQ(i(-3)), a.EQ(f(5)), a.EQ(f(math.Copysign(0, -1))), a.EQ(i(math.MinInt16)), a.EQ(i(math.MaxInt16)),
		a.NE(i(0)), a.NE(i(47)), a.NE(f(2)),
		a.In(i(0), i(3), i(47)), a.In(i(-10), i(53)), a.In(f(1), i(2), f(63)), a.In(i(7), i(7)),
		a.In(i(math.MaxInt16), i(math.MaxInt16+63)),
		a.NotIn(i(0), i(1)), a.NotIn(i(-5), i(58)), a.NotIn(f(4), i(4)),
		a.Range(i(0), i(11), false, false), a.Range(i(36), i(47), false, false),
		a.Range(i(-20), i(20), true, true), a.Range(i(0), i(63), false, false),
		a.Range(f(-2.5), f(3.5), false, false), a.Range(f(1.5), f(1.75), false, false),
		a.Range(f(2), f(3), true, false), a.Range(f(2), i(3), false, true), a.Range(i(4), i(4), false, false),
		a.Range(i(math.MinInt16), i(math.MinInt16+10), false, false),
		// no bitmap form: too wide, too far, not integral, other kinds
		a.Range(i(0), i(64), false, false), a.In(i(0), i(64)), a.EQ(i(1 << 20)), a.EQ(f(0.5)),
		a.In(i(1), f(1.5)), a.EQ(ontology.String("a")), a.GT(i(3)), a.Range(i(math.MaxInt16+1), i(math.MaxInt16+2), false, false),
		a.EQ(ontology.TimeNanos(3)), a.Exists(),
	}
}

// TestSmallSetAgreesWithHolds checks the bitmap form of each predicate
// against Predicate.holds: a bitmap never rejects a value the predicate
// holds for, and judges every integer value exactly.
func TestSmallSetAgreesWithHolds(t *testing.T) {
	vals := headValues()
	for k, p := range headPredicates() {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			mask, base, outside, ok := smallSet(&p)
			if !ok {
				return
			}
			require.GreaterOrEqual(t, base, int64(math.MinInt16))
			require.LessOrEqual(t, base, int64(math.MaxInt16))
			h := &lhead{mask: mask, base: int16(base), kf: headBits}
			if outside {
				h.kf |= headOutside
			}
			for _, x := range vals {
				pos := posAbsent
				if x.present {
					pos = headPos(x.v)
				}
				want, got := p.holds(x), headHolds(h.mask, h.base, h.kf, pos)
				if want {
					assert.True(t, got, "%+v rejected %v, which it holds for", p, x.v)
				}
				if _, isInt := integral(x.v); x.present && isInt && pos != posOther {
					assert.Equal(t, want, got, "%+v at integer %v", p, x.v)
				}
			}
		})
	}
}

func TestSmallSetForms(t *testing.T) {
	a := Attr("n")
	i, f := ontology.Int, ontology.Float
	cases := []struct {
		name    string
		p       Predicate
		ok      bool
		mask    uint64
		base    int64
		outside bool
	}{
		{"eq", a.EQ(i(5)), true, 1, 5, false},
		{"eq float integral", a.EQ(f(-2)), true, 1, -2, false},
		{"ne", a.NE(i(5)), true, ^uint64(1), 5, true},
		{"in", a.In(i(3), i(1), i(64)), true, 1 | 1<<2 | 1<<63, 1, false},
		{"in too wide", a.In(i(0), i(64)), false, 0, 0, false},
		{"not in", a.NotIn(i(0), i(2)), true, ^uint64(5), 0, true},
		{"range closed", a.Range(i(0), i(11), false, false), true, 1<<12 - 1, 0, false},
		{"range open", a.Range(i(0), i(11), true, true), true, 1<<10 - 1, 1, false},
		{"range float ends", a.Range(f(0.5), f(3.5), false, false), true, 7, 1, false},
		{"range of 64", a.Range(i(-1), i(62), false, false), true, math.MaxUint64, -1, false},
		{"range of 65", a.Range(i(-1), i(63), false, false), false, 0, 0, false},
		{"range without integers", a.Range(f(0.25), f(0.75), false, false), true, 0, 1, false},
		{"base below int16", a.EQ(i(math.MinInt16 - 1)), false, 0, 0, false},
		{"base at int16 end", a.EQ(i(math.MaxInt16)), true, 1, math.MaxInt16, false},
		{"fractional member", a.In(i(1), f(1.5)), false, 0, 0, false},
		{"string", a.EQ(ontology.String("1")), false, 0, 0, false},
		{"time", a.EQ(ontology.TimeNanos(1)), false, 0, 0, false},
		{"comparison", a.LT(i(3)), false, 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mask, base, outside, ok := smallSet(&c.p)
			require.Equal(t, c.ok, ok)
			if ok {
				assert.Equal(t, fmt.Sprintf("%064b", c.mask), fmt.Sprintf("%064b", mask))
				assert.Equal(t, c.base, base)
				assert.Equal(t, c.outside, outside)
			}
		})
	}
}

func TestHeadPos(t *testing.T) {
	cases := []struct {
		v    ontology.Value
		want int64
	}{
		{ontology.Int(0), 0},
		{ontology.Int(-7), -7},
		{ontology.Float(math.Copysign(0, -1)), 0},
		{ontology.Float(47), 47},
		{ontology.Float(2.5), posFrac},
		{ontology.Float(math.Inf(1)), posFrac},
		{ontology.Float(math.NaN()), posAbsent},
		{ontology.Int(1 << 40), 1 << 40},
		{ontology.Int(1<<40 + 1), posOther},
		{ontology.Int(math.MinInt64), posOther},
		{ontology.Float(0x1p50), posOther},
		{ontology.String("1"), posOther},
		{ontology.Bool(true), posOther},
		{ontology.TimeNanos(1), posOther},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, headPos(c.v), "%v", c.v)
	}
}

// TestIndexHeads matches events against filters whose predicates have
// bitmap forms, with the Index and with the oracle: match-all filters
// whose list heads test one or two of them, "at least" and "score" filters in the same
// lists, filters removed and added again, events with values at and beyond
// the windows' ends, fractional, NaN, of other kinds, or missing.
func TestIndexHeads(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "T", Attributes: []ontology.Attribute{
		{Name: "a", Kind: ontology.KindInt}, {Name: "b", Kind: ontology.KindInt}, {Name: "c", Kind: ontology.KindFloat},
	}}})
	require.NoError(t, err)
	preds := headPredicates()
	ix, bf := NewIndex(o), NewBruteForce(o)
	id := uint64(0)
	fs := map[uint64]*Filter{}
	add := func(spec Spec) {
		f, err := Build(spec)
		require.NoError(t, err)
		id++
		fs[id] = f
		require.NoError(t, ix.Add(id, f))
		require.NoError(t, bf.Add(id, f))
	}
	on := func(name string, p Predicate) Predicate { p.Operand = Attr(name); return p }
	for i, p := range preds {
		if p.Value.Kind() == ontology.KindString || p.Value.Kind() == ontology.KindTime {
			continue
		}
		q := preds[(i*7+3)%len(preds)]
		if q.Value.Kind() == ontology.KindString || q.Value.Kind() == ontology.KindTime {
			q = Attr("b").Exists()
		}
		// The access predicate is a's equality; b's predicate is in the head.
		for _, v := range []int64{0, 1} {
			add(Spec{Type: "T", Predicates: []Predicate{Attr("a").EQ(ontology.Int(v)), on("b", p)}})
			add(Spec{Type: "T", Predicates: []Predicate{Attr("a").EQ(ontology.Int(v)), on("b", p), on("c", q)}})
			add(Spec{Type: "T", Mode: ModeAtLeast, AtLeast: 1, Predicates: []Predicate{Attr("a").EQ(ontology.Int(v)), on("b", p)}})
			add(Spec{Type: "T", Mode: ModeScore, Threshold: 2, Predicates: []Predicate{Attr("a").EQ(ontology.Int(v)), on("b", p), on("c", q)}})
		}
		add(Spec{Type: "T", Predicates: []Predicate{on("c", p), on("b", q)}})
	}
	bitmaps, seconds := 0, 0
	typ, _ := o.Lookup("T")
	for _, kp := range ix.inst[ix.side.Load()].groups[typ.ID+1].byKey {
		ls := []*plist{kp.present}
		for _, l := range kp.eq {
			ls = append(ls, l)
		}
		for _, l := range ls {
			if l == nil {
				continue
			}
			for _, h := range l.heads[:l.n.Load()] {
				if h.kf&headBits != 0 {
					bitmaps++
				}
				if h.kf2&headBits != 0 {
					seconds++
				}
			}
		}
	}
	require.Greater(t, bitmaps, 100, "list heads with a bitmap")
	require.Greater(t, seconds, 50, "list heads with a second bitmap")
	vals := headValues()
	check := func(step string) {
		t.Helper()
		for i, x := range vals {
			ev := &BasicEvent{Type: "T", Attrs: []ontology.Attr{{Name: "a", Value: ontology.Int(int64(i % 3))}}}
			if x.present {
				ev.Attrs = append(ev.Attrs, ontology.Attr{Name: "b", Value: x.v})
			}
			y := vals[(i*31+7)%len(vals)]
			if y.present {
				ev.Attrs = append(ev.Attrs, ontology.Attr{Name: "c", Value: y.v})
			}
			want, got := collect(bf, ev), collect(ix, ev)
			require.True(t, assertSameMatches(t, want, got), "%s: event %+v", step, ev)
		}
	}
	check("added")
	for r := uint64(1); r <= id; r += 3 {
		require.True(t, ix.Remove(r))
		require.True(t, bf.Remove(r))
	}
	check("a third removed")
	for r := uint64(1); r <= id; r += 3 {
		f := fs[r]
		require.NoError(t, ix.Add(r, f))
		require.NoError(t, bf.Add(r, f))
	}
	check("added again")
}

// TestWideIntegerSets adds sets whose members span more than int64 can
// subtract (a member minus the least one overflows): the bitmap forms of
// heads (smallSet) and items (makeFast) must refuse them, not shift by a
// negative amount, and the index must match as the oracle does. A peer's
// subscription reaches Add, so a panic here would take a switch down.
func TestWideIntegerSets(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "T", Attributes: []ontology.Attribute{
		{Name: "n", Kind: ontology.KindInt}, {Name: "s", Kind: ontology.KindString}}}})
	require.NoError(t, err)
	srcs := []string{
		`{type ⊑ T; n in {-1, 9223372036854775807}}`,
		`{type ⊑ T; n not in {-1, 9223372036854775807}}`,
		`{n in {-1, 9223372036854775807}}`,
		`{type ⊑ T; n in {-32768, 9223372036854775807}}`,
		`{type ⊑ T; n in {-9223372036854775808, 9223372036854775807}}`,
		`{type ⊑ T; n in {-9007199254740992, 9223372036854775807}}`,
		`{type ⊑ T; n not in {-9007199254740992, 9223372036854775807}; s == "a"}`,
		`{type ⊑ T; n in {-9223372036854775808, 0}; s == "a"}`,
	}
	ix, bf := NewIndex(o), NewBruteForce(o)
	for i, src := range srcs {
		f := MustCompile(src)
		require.NotPanics(t, func() { require.NoError(t, ix.Add(uint64(i+1), f), src) }, src)
		require.NoError(t, bf.Add(uint64(i+1), f), src)
	}
	for _, n := range []int64{math.MinInt64, -9007199254740992, -32768, -1, 0, 1, 62, 63, 64, math.MaxInt64} {
		for _, s := range []string{"a", "b"} {
			ev := &BasicEvent{Type: "T", Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(n)}, {Name: "s", Value: ontology.String(s)}}}
			got, want := map[uint64]float64{}, map[uint64]float64{}
			ix.Match(ev, func(id uint64, score float64) { got[id] = score })
			bf.Match(ev, func(id uint64, score float64) { want[id] = score })
			assert.Equal(t, want, got, "n=%d s=%q", n, s)
		}
	}
}

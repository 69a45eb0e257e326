package filter

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// TestIndexRangeBuckets checks ranges reached through range buckets
// (postRange) against the oracle: integer and float ends, open and closed,
// negative bases, domain ends, spans from 1 to 64 on one operand,
// ranges without an integer inside, "at least" and "score" filters in the
// same buckets, events with integral, fractional, NaN, infinite and
// far-away values and values of other kinds, before and after removals
// that take away the widest spans.
func TestIndexRangeBuckets(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "T", Attributes: []ontology.Attribute{
		{Name: "n", Kind: ontology.KindInt}, {Name: "x", Kind: ontology.KindFloat}, {Name: "m", Kind: ontology.KindInt},
	}}})
	require.NoError(t, err)
	ix, bf := NewIndex(o), NewBruteForce(o)
	type added struct {
		id   uint64
		wide bool
	}
	var all []added
	id := uint64(0)
	add := func(spec Spec, wide bool) {
		f, err := Build(spec)
		require.NoError(t, err)
		id++
		require.NoError(t, ix.Add(id, f))
		require.NoError(t, bf.Add(id, f))
		all = append(all, added{id, wide})
	}
	i, fl := ontology.Int, ontology.Float
	notM := Attr("m").NE(i(99)) // keeps the filters out of the dense engine
	for lo := int64(-70); lo <= 70; lo += 7 {
		for _, w := range []int64{0, 1, 5, 11, 40, 63} {
			for k, open := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				if w == 0 && open != [2]bool{} {
					continue
				}
				wide := w >= 40
				add(Spec{Type: "T", Predicates: []Predicate{Attr("n").Range(i(lo), i(lo+w), open[0], open[1]), notM}}, wide)
				if k == 0 && w > 0 {
					add(Spec{Type: "T", Predicates: []Predicate{Attr("x").Range(fl(float64(lo)+0.5), fl(float64(lo+w)+0.25), false, false), notM}}, wide)
					add(Spec{Type: "T", Predicates: []Predicate{Attr("x").Range(i(lo), fl(float64(lo+w)), false, true), notM}}, wide)
					add(Spec{Type: "T", Mode: ModeAtLeast, AtLeast: 1, Predicates: []Predicate{Attr("n").Range(i(lo), i(lo+w), false, false), Attr("x").Range(i(lo), i(lo+w), false, false)}}, wide)
					add(Spec{Type: "T", Mode: ModeScore, Threshold: 1.5, Predicates: []Predicate{Attr("n").Range(i(lo), i(lo+w), false, false), Attr("m").EQ(i(lo)), notM}}, wide)
				}
			}
		}
		// no integer inside
		add(Spec{Type: "T", Predicates: []Predicate{Attr("x").Range(fl(float64(lo)+0.25), fl(float64(lo)+0.75), false, false), notM}}, false)
		add(Spec{Type: "T", Predicates: []Predicate{Attr("x").Range(i(lo), i(lo+1), true, true), notM}}, false)
	}
	for _, lo := range []int64{math.MinInt16, math.MaxInt16 - 5, math.MaxInt16 + 1} {
		add(Spec{Type: "T", Predicates: []Predicate{Attr("n").Range(i(lo), i(lo+5), false, false), notM}}, false)
	}
	buckets := 0
	typ, _ := o.Lookup("T")
	for _, kp := range ix.inst[ix.side.Load()].groups[typ.ID+1].byKey {
		buckets += len(kp.ranges)
	}
	require.Positive(t, buckets, "range buckets in use")

	var vals []ontology.Value
	for n := int64(-150); n <= 150; n++ {
		vals = append(vals, i(n), fl(float64(n)+0.5), fl(float64(n)+0.25), fl(float64(n)+0.75))
	}
	for _, n := range []int64{math.MinInt16 - 1, math.MinInt16, math.MinInt16 + 5, math.MaxInt16, math.MaxInt16 + 1, math.MaxInt16 + 6, math.MaxInt64, math.MinInt64} {
		vals = append(vals, i(n), fl(float64(n)+0.5))
	}
	vals = append(vals, fl(math.NaN()), fl(math.Inf(1)), fl(math.Inf(-1)), fl(1e300), ontology.String("1"), ontology.Bool(true), ontology.TimeNanos(3))
	check := func(step string) {
		t.Helper()
		for k, v := range vals {
			ev := &BasicEvent{Type: "T", Attrs: []ontology.Attr{{Name: "n", Value: v}, {Name: "x", Value: vals[(k*13+5)%len(vals)]}}}
			if k%5 != 0 {
				ev.Attrs = append(ev.Attrs, ontology.Attr{Name: "m", Value: i(int64(k%150 - 75))})
			}
			want, got := collect(bf, ev), collect(ix, ev)
			require.True(t, assertSameMatches(t, want, got), "%s: event %+v", step, ev)
		}
	}
	check("added")
	for _, a := range all {
		if a.wide {
			require.True(t, ix.Remove(a.id))
			require.True(t, bf.Remove(a.id))
		}
	}
	check("wide ranges removed")
	for k, a := range all {
		if !a.wide && k%2 == 0 {
			require.True(t, ix.Remove(a.id))
			require.True(t, bf.Remove(a.id))
		}
	}
	check("half the rest removed")
}

// TestPostingsOf checks that the postings derived from a filter's record
// (postingsOf) are those its access predicates give: an equality's
// value, a set's distinct members in order, a range's bucket, an affix,
// presence where a predicate has no access of its own, the direct and
// always lists, and several access predicates for "at least"; and that
// every one leads to the filter in its list. Which access a predicate
// gets depends on the other filters' (accessFor): here 20 others
// test a.
func TestPostingsOf(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "T", Attributes: []ontology.Attribute{
		{Name: "a", Kind: ontology.KindInt}, {Name: "b", Kind: ontology.KindInt}, {Name: "s", Kind: ontology.KindString},
	}}})
	require.NoError(t, err)
	i, str := ontology.Int, ontology.String
	type want struct {
		kind postingKind
		vk   ontology.ValueKey
		s    string
	}
	eq := func(v ontology.Value) want { return want{kind: postEq, vk: v.Key()} }
	cases := []struct {
		name  string
		preds []Predicate
		mode  Mode
		want  []want
	}{
		{"equality", []Predicate{Attr("a").EQ(i(3))}, ModeAll, []want{eq(i(3))}},
		{"string equality", []Predicate{Attr("s").EQ(str("x"))}, ModeAll, []want{eq(str("x"))}},
		{"set", []Predicate{Attr("a").In(i(4), i(1), i(4), i(2))}, ModeAll, []want{eq(i(4)), eq(i(1)), eq(i(2))}},
		{"range", []Predicate{Attr("a").Range(i(8), i(13), false, false)}, ModeAll, []want{{kind: postRange}}},
		{"prefix", []Predicate{Attr("s").Prefix("ab")}, ModeAll, []want{{kind: postPrefix, s: "ab"}}},
		{"suffix", []Predicate{Attr("s").Suffix("yz")}, ModeAll, []want{{kind: postSuffix, s: "yz"}}},
		{"exclusion", []Predicate{Attr("a").NE(i(3))}, ModeAll, []want{{kind: postPresent}}},
		{"no predicates", nil, ModeAll, []want{{kind: postDirect}}},
		{"not exists", []Predicate{Attr("a").NotExists()}, ModeAll, []want{{kind: postAlways}}},
		{"at least", []Predicate{Attr("a").EQ(i(1)), Attr("b").EQ(i(2)), Attr("s").EQ(str("z"))}, ModeAtLeast, []want{eq(i(1)), eq(i(2))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := NewIndex(o)
			// Others on a make its presence costlier than a set of it.
			for k := range 20 {
				f, err := Build(Spec{Type: "T", Predicates: []Predicate{Attr("a").EQ(i(int64(100 + k))), Attr("s").Contains("q")}})
				require.NoError(t, err)
				require.NoError(t, x.Add(uint64(100+k), f))
			}
			spec := Spec{Type: "T", Mode: c.mode, Predicates: c.preds}
			if c.mode == ModeAtLeast {
				spec.AtLeast = 2
			}
			f, err := Build(spec)
			require.NoError(t, err)
			require.NoError(t, x.Add(7, f))
			e, _ := x.entries.get(7)
			require.NotNil(t, e)
			ps := postingsOf(e.record(), nil)
			require.Len(t, ps, len(c.want))
			d := x.inst[x.side.Load()]
			for j, p := range ps {
				w := c.want[j]
				assert.Equal(t, w.kind, p.kind, "posting %d", j)
				if w.kind == postEq {
					assert.Equal(t, w.vk, p.vk, "posting %d", j)
				}
				assert.Equal(t, w.s, p.s, "posting %d", j)
				l := d.lookup(d.groups[e.group], p)
				require.NotNil(t, l, "posting %d has a list", j)
				assert.Same(t, e, l.at(x.pos.get(e.slot, j)), "posting %d leads to the filter", j)
				if p.kind == postEq {
					assert.Same(t, d.groups[e.group].byKey[p.key].eq[p.vk], l, "posting %d: readers reach the list the writer finds", j)
				}
			}
		})
	}
}

// checkEqLists checks that the writer's way to the equality lists of small
// integers (popStats.eqLists) leads, for every group and key, to the lists
// both copies hold, and to no others.
func checkEqLists(t *testing.T, ix *Index) {
	t.Helper()
	for _, d := range ix.inst {
		for gi, g := range d.groups {
			if g == nil {
				continue
			}
			gp := ix.pop[gi]
			for k, kp := range g.byKey {
				var cached []*plist
				if gp != nil {
					if st := gp.stat(k); st != nil {
						cached = st.eqLists
					}
				}
				for n := range max(len(kp.eqSmall), len(cached)) {
					var want, got *plist
					if n < len(kp.eqSmall) {
						want = kp.eqSmall[n]
					}
					if n < len(cached) {
						got = cached[n]
					}
					require.Same(t, want, got, "group %d key %d value %d", gi, k, n)
				}
			}
			if gp == nil {
				continue
			}
			for k, st := range gp.keys {
				if st != nil && g.byKey[uint32(k)] == nil {
					for n, l := range st.eqLists {
						require.Nil(t, l, "group %d key %d value %d: a list the copies do not hold", gi, k, n)
					}
				}
			}
		}
	}
}

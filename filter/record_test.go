package filter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// recordValues are literals and event values at the edges of the value
// kinds: ±0, NaN, ±Inf, 2^53 and its neighbours as ints and floats, the
// int64 ends, empty and non-UTF-8 strings, both bools, times.
func recordValues() []ontology.Value {
	t0 := time.Date(2026, 12, 2, 5, 0, 0, 1, time.UTC)
	return []ontology.Value{
		ontology.Int(0), ontology.Int(1), ontology.Int(-1), ontology.Int(47),
		ontology.Int(1 << 53), ontology.Int(1<<53 + 1), ontology.Int(-(1<<53 + 1)),
		ontology.Int(math.MaxInt64), ontology.Int(math.MinInt64),
		ontology.Float(0), ontology.Float(math.Copysign(0, -1)), ontology.Float(math.NaN()),
		ontology.Float(math.Inf(1)), ontology.Float(math.Inf(-1)), ontology.Float(1.5),
		ontology.Float(0x1p53), ontology.Float(0x1p63), ontology.Float(-0x1p63), ontology.Float(47),
		ontology.String(""), ontology.String("a"), ontology.String("ab"), ontology.String("b.a"),
		ontology.String("\xff\xfe"), ontology.String("\xff"), ontology.String("1.2.3"),
		ontology.Bool(true), ontology.Bool(false),
		ontology.Time(t0), ontology.Time(t0.Add(time.Nanosecond)), ontology.TimeNanos(0),
	}
}

// recordPreds returns predicates of every operator and value kind, on
// operand o, over the literals vs.
func recordPreds(o Operand, vs []ontology.Value) []Predicate {
	ps := []Predicate{o.Exists(), o.NotExists(), True()}
	for i, v := range vs {
		for _, op := range []Op{OpEQ, OpNE, OpLT, OpLE, OpGT, OpGE} {
			ps = append(ps, o.pred(op, v))
		}
		w := vs[(i*7+3)%len(vs)]
		for m := range 4 {
			ps = append(ps, o.Range(v, w, m&1 != 0, m&2 != 0))
		}
		set := []ontology.Value{v, w, vs[(i*5+1)%len(vs)]}
		ps = append(ps, o.In(set...), o.NotIn(set...), o.In(v), o.NotIn(v))
		if v.Kind() == ontology.KindString {
			ps = append(ps, o.Prefix(v.Str()), o.pred(OpSuffix, v), o.pred(OpContains, v))
		}
	}
	// Sets long enough for a search order, of every literal (NaN and
	// ±Inf among them), in two orders and with repeats.
	rev := slices.Clone(vs)
	slices.Reverse(rev)
	ps = append(ps, o.In(vs...), o.NotIn(vs...), o.In(append(rev, vs[:recSetLinear]...)...), o.NotIn(rev[:recSetLinear+1]...))
	for i := range ps {
		if i%5 == 1 && ps[i].Op != OpTrue {
			ps[i].Weight = float64(i%7) + 0.25
		}
	}
	return ps
}

// TestRecordHolds checks that every predicate read back from a record
// decides every value as the Predicate does, and reads back equal.
func TestRecordHolds(t *testing.T) {
	vs := recordValues()
	events := []val{{}, {present: true}} // missing; a JSON object or array
	for _, v := range vs {
		events = append(events, val{v: v, present: true})
	}
	for _, src := range []Operand{Attr("a"), JSON("b.c")} {
		preds := recordPreds(src, vs)
		keys := make([]uint32, len(preds))
		for i := range keys {
			keys[i] = uint32(i * 97)
			if preds[i].Op == OpTrue {
				keys[i] = noKey
			}
		}
		for _, mode := range []struct {
			name    string
			mode    Mode
			atLeast int
			thresh  float64
		}{
			{"all", ModeAll, 0, 0},
			{"atleast", ModeAtLeast, 3, 0},
			{"score", ModeScore, 0, 2.5},
		} {
			t.Run(src.Name+"/"+mode.name, func(t *testing.T) {
				f := Filter{mode: mode.mode, atLeast: mode.atLeast, threshold: mode.thresh, preds: preds}
				b, at := appendRecord(nil, &f, keys, nil)
				h := readHead(b)
				require.Equal(t, len(preds), h.npreds)
				assert.Equal(t, f.mode, h.mode)
				assert.Equal(t, f.atLeast, h.atLeast)
				assert.Equal(t, f.threshold, h.threshold)
				var p rpred
				j := h.body
				for i := range preds {
					q := &preds[i]
					assert.Equal(t, j, at[i], "where pred %d starts", i)
					j = readPred(b, j, &p)
					assert.Equal(t, keys[i], p.key, "pred %d", i)
					assert.Equal(t, q.weight(), p.weight, "pred %d", i)
					back := p.predicate(b, q.Operand.Name)
					if q.Weight == 1 {
						back.Weight = 1
					}
					assert.True(t, samePred(q, &back), "pred %d: %+v read back as %+v", i, q, back)
					for _, x := range events {
						assert.Equal(t, q.holds(x), p.holds(b, x), "pred %d %+v on %v (present %v)", i, q, x.v, x.present)
					}
				}
				assert.Equal(t, len(b), j, "the record ends after its last predicate")
			})
		}
	}
}

// samePred reports whether a and b are the same predicate, values bit
// for bit.
func samePred(a, b *Predicate) bool {
	if a.Operand != b.Operand || a.Op != b.Op || a.LoOpen != b.LoOpen || a.HiOpen != b.HiOpen || a.Weight != b.Weight || len(a.Set) != len(b.Set) {
		return false
	}
	for i := range a.Set {
		if !sameValue(a.Set[i], b.Set[i]) {
			return false
		}
	}
	return sameValue(a.Value, b.Value) && sameValue(a.Hi, b.Hi)
}

// sameValue reports whether a and b are the same value bit for bit.
func sameValue(a, b ontology.Value) bool {
	if a.Kind() != b.Kind() || a.Str() != b.Str() || a.Bool() != b.Bool() || a.Int() != b.Int() {
		return false
	}
	return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
}

// TestRecordBlocks checks that records share blocks, keep their bytes
// when later ones are written, and that a large one gets its own memory.
func TestRecordBlocks(t *testing.T) {
	var w recWriter
	put := func(f *Filter, keys []uint32) []byte {
		b, _ := appendRecord(nil, f, keys, nil)
		return w.store(b)
	}
	f := MustCompile(`{a == "x"; b in {1, 2, 3}; c in [0.5, 2)}`)
	keys := []uint32{1, 2, 3}
	first := put(f, keys)
	want := string(first)
	var last []byte
	for range recBlockBytes / len(first) * 3 {
		last = put(f, keys)
	}
	assert.Equal(t, want, string(first))
	assert.Equal(t, want, string(last))
	assert.Equal(t, len(last), cap(last), "a record's capacity is trimmed")
	set := make([]string, 0, recBlockBytes/8)
	for range recBlockBytes / 8 {
		set = append(set, `"abcdefghij"`)
	}
	big := MustCompile(`{a in {` + joinComma(set) + `}}`)
	r := put(big, []uint32{1})
	assert.Greater(t, len(r), recBlockBytes/4)
	rec, _ := appendRecord(nil, big, []uint32{1}, nil)
	assert.Equal(t, string(rec), string(r))
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

// TestRecordCompaction removes most of many filters, so that the records
// are copied into new blocks several times, and checks the index against
// the oracle as it goes and the writer's count of live record bytes at
// the end.
func TestRecordCompaction(t *testing.T) {
	defer func(n int) { recCompactMin = n }(recCompactMin)
	recCompactMin = 256
	o, err := ontology.New([]ontology.TypeDef{{Name: "R", Attributes: []ontology.Attribute{
		{Name: "a", Kind: ontology.KindInt}, {Name: "s", Kind: ontology.KindString},
	}}})
	require.NoError(t, err)
	ix, bf := NewIndex(o), NewBruteForce(o)
	const n = 3000
	for i := range n {
		f := MustCompile(fmt.Sprintf(`{type ⊑ R; a in {%d, %d}; s prefix "x%d"}`, i%7, i%5, i%3))
		require.NoError(t, ix.Add(uint64(i), f))
		require.NoError(t, bf.Add(uint64(i), f))
	}
	evs := []*BasicEvent{}
	for i := range 7 {
		evs = append(evs, &BasicEvent{Type: "R", Attrs: []ontology.Attr{{Name: "a", Value: ontology.Int(int64(i))}, {Name: "s", Value: ontology.String(fmt.Sprintf("x%dy", i%3))}}})
	}
	r := rand.New(rand.NewPCG(1, 2))
	for k, i := range r.Perm(n)[:n-50] {
		require.True(t, ix.Remove(uint64(i)))
		bf.Remove(uint64(i))
		if k%250 == 0 {
			for _, ev := range evs {
				require.Equal(t, collect(bf, ev), collect(ix, ev), "after %d removals", k+1)
			}
		}
	}
	for _, ev := range evs {
		require.Equal(t, collect(bf, ev), collect(ix, ev))
	}
	assert.Greater(t, ix.recs.moves, 2, "the records were compacted")
	live := 0
	for _, e := range ix.entries.all() {
		live += int(e.recLen)
	}
	assert.Equal(t, live, ix.recs.live)
	assert.LessOrEqual(t, ix.recs.written, 2*live+recCompactMin)
}

// TestRecordCompactionMoves checks that a compaction moves every live
// record to a copy of the same bytes, in place in the same entry, so
// that the blocks of the old records can go.
func TestRecordCompactionMoves(t *testing.T) {
	defer func(n int) { recCompactMin = n }(recCompactMin)
	recCompactMin = 256
	o, err := ontology.New([]ontology.TypeDef{{Name: "R", Attributes: []ontology.Attribute{
		{Name: "a", Kind: ontology.KindInt},
	}}})
	require.NoError(t, err)
	ix := NewIndex(o)
	const n = 400
	for i := range n {
		require.NoError(t, ix.Add(uint64(i), MustCompile(fmt.Sprintf(`{type ⊑ R; a in {%d, %d}}`, i, i+1))))
	}
	before := map[uint64]*entry{}
	recs := map[uint64][]byte{}
	for id, e := range ix.entries.all() {
		before[id] = e
		recs[id] = e.record()
	}
	moves := ix.recs.moves
	removed := 0
	for i := 0; ix.recs.moves == moves; i++ {
		require.Less(t, i, n, "no compaction")
		require.True(t, ix.Remove(uint64(i)))
		removed++
	}
	require.Equal(t, n-removed, ix.entries.len())
	for id, e := range ix.entries.all() {
		assert.Same(t, before[id], e, "filter %d keeps its entry", id)
		assert.Equal(t, recs[id], e.record(), "filter %d's record", id)
		assert.NotSame(t, unsafe.SliceData(recs[id]), unsafe.SliceData(e.record()), "filter %d's record moved", id)
	}
}

// TestRecordSetLengths: sets whose members take around 128 bytes, where
// their length's uvarint grows from one byte to two, and longer, read
// back as the same predicates, followed by the next one, with and
// without a search order.
func TestRecordSetLengths(t *testing.T) {
	for _, s := range []int{1, 5, 100, 110, 118, 119, 120, 121, 122, 125, 126, 127, 128, 200, 20000} {
		for _, n := range []int{1, 2, recSetLinear + 1} {
			set := make([]ontology.Value, n)
			for i := range set {
				set[i] = ontology.String(strings.Repeat("x", s/n) + strconv.Itoa(i))
			}
			f := MustBuild(Spec{Predicates: []Predicate{Attr("a").In(set...), Attr("b").NotIn(set...), Attr("c").EQ(ontology.Int(7))}})
			keys := []uint32{1, 2, 3}
			b, at := appendRecord(nil, f, keys, nil)
			h := readHead(b)
			var p rpred
			j := h.body
			for i := range f.preds {
				require.Equal(t, j, at[i], "size %d members %d: where pred %d starts", s, n, i)
				j = readPred(b, j, &p)
				back := p.predicate(b, f.preds[i].Operand.Name)
				require.True(t, samePred(&f.preds[i], &back), "size %d members %d: pred %d read back as %+v", s, n, i, back)
				if p.op == OpIn {
					for _, m := range set {
						assert.True(t, p.holds(b, val{v: m, present: true}), "size %d members %d: %v", s, n, m)
					}
				}
			}
			require.Equal(t, len(b), j)
		}
	}
}

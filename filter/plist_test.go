package filter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// TestPlistRebuild adds and removes postings of one list, moving it as
// Index.enter and Index.leave do, and checks after each step that its
// published places hold exactly the live postings, in the order they were
// added, that pos leads to them, and that dead places never outnumber
// live ones for long.
func TestPlistRebuild(t *testing.T) {
	l := newPlist(0)
	r := rand.New(rand.NewPCG(5, 6))
	var pos places
	var live []*entry // in the order added
	moves := 0
	for step := range 3000 {
		addShare := 4 // of 5: growing and shrinking phases
		if step/500%2 == 1 {
			addShare = 1
		}
		if len(live) == 0 || r.IntN(5) < addShare {
			e := &entry{id: uint64(step), slot: uint32(step)}
			pos.make(e.slot, 1)
			if l.full() {
				l = l.moved(grown(l.live), &pos, nil, nil)
				moves++
			}
			pos.set(e.slot, 0, l.add(e, lhead{post: 0}))
			live = append(live, e)
		} else {
			k := r.IntN(len(live))
			e := live[k]
			if l.del(pos.get(e.slot, 0)) {
				l = l.moved(2*int(l.live), &pos, nil, nil)
				moves++
			}
			pos.drop(e.slot)
			live = append(live[:k], live[k+1:]...)
		}
		require.Equal(t, int32(len(live)), l.live)
		var got []*entry
		for i := range int(l.n.Load()) {
			if l.heads[i].kf&headDead == 0 {
				got = append(got, l.at(int32(i)))
			}
		}
		if len(live) == 0 {
			require.Empty(t, got)
			continue
		}
		require.Equal(t, live, got, "step %d", step)
		for _, e := range live {
			require.Same(t, e, l.at(pos.get(e.slot, 0)), "step %d: pos of %d", step, e.id)
		}
		require.Less(t, int(l.dead), max(int(l.live), 1)+1, "dead places never outnumber live ones")
	}
	assert.Greater(t, moves, 20, "the list moved to new arrays")
}

// TestSparseConcurrent runs Match from several goroutines while a writer
// adds and removes filters that live in posting lists (equality, sets,
// exclusions, ranges, affixes, presence; every mode), so that lists grow,
// take tombstones, are rebuilt, are emptied and made again. Each result
// is checked against Filter.Eval: the filters that never leave are
// reported exactly; any other reported filter was added and matches,
// with its score; none is reported twice.
func TestSparseConcurrent(t *testing.T) {
	defer func(n int) { recCompactMin = n }(recCompactMin)
	recCompactMin = 1 << 10 // compact the records while matched, too
	o, err := ontology.New([]ontology.TypeDef{{Name: "R", Attributes: []ontology.Attribute{
		{Name: "a", Kind: ontology.KindInt}, {Name: "b", Kind: ontology.KindInt}, {Name: "c", Kind: ontology.KindString}, {Name: "d", Kind: ontology.KindFloat},
	}}, {Name: "S", Parents: []string{"R"}}})
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(7, 8))
	ival := func() ontology.Value { return ontology.Int(int64(r.IntN(6))) }
	pred := func() Predicate {
		switch r.IntN(9) {
		case 0, 1:
			return Attr("a").EQ(ival())
		case 2:
			return Attr("b").In(ival(), ival(), ival())
		case 3:
			return Attr("b").NotIn(ival(), ival())
		case 4:
			return Attr("a").NE(ival())
		case 5:
			lo := int64(r.IntN(6))
			return Attr("b").Range(ontology.Int(lo), ontology.Int(lo+1+int64(r.IntN(3))), r.IntN(2) == 0, false)
		case 6:
			return Attr("c").Prefix([]string{"", "x", "xy", "y"}[r.IntN(4)])
		case 7:
			return Attr("d").GE(ontology.Float(float64(r.IntN(4)) - 0.5))
		case 8:
			if r.IntN(2) == 0 {
				return Attr("d").NotExists() // a filter of only these is in its group's always list
			}
		}
		return Attr("c").Exists()
	}
	const total = 8000
	fs := make([]*Filter, total)
	for i := range fs {
		s := Spec{Type: []string{"R", "S", AnyType}[r.IntN(3)]}
		for range r.IntN(5) { // none: in its group's direct list
			s.Predicates = append(s.Predicates, pred())
		}
		switch m := r.IntN(4); {
		case len(s.Predicates) == 0:
		case m == 0:
			s.Mode, s.AtLeast = ModeAtLeast, 1+r.IntN(len(s.Predicates))
		case m == 1:
			s.Mode, s.Threshold = ModeScore, 1.5
			w := 0.0
			for j := range s.Predicates {
				s.Predicates[j].Weight = float64(1 + r.IntN(2))
				w += s.Predicates[j].Weight
			}
			s.Threshold = min(s.Threshold, w)
		}
		fs[i] = MustBuild(s)
	}
	var events []*BasicEvent
	for i := range 12 {
		ev := &BasicEvent{Type: []string{"R", "S"}[i%2], Attrs: []ontology.Attr{
			{Name: "a", Value: ival()}, {Name: "b", Value: ival()},
			{Name: "c", Value: ontology.String([]string{"xyz", "y", ""}[i%3])},
		}}
		if i%4 != 0 {
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: "d", Value: ontology.Float(float64(i%5) - 1)})
		}
		events = append(events, ev)
	}
	want := func(id uint64, ev *BasicEvent) (bool, float64) {
		// S is a subtype of R; Eval ignores the type.
		if typ := fs[id].Type(); typ != AnyType && typ != ev.Type && !(typ == "R" && ev.Type == "S") {
			return false, 0
		}
		return fs[id].Eval(ev)
	}

	ix := NewIndex(o)
	const stable = 300
	for id := range uint64(stable) {
		require.NoError(t, ix.Add(id, fs[id]))
	}
	var added atomic.Uint64
	added.Store(stable)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, ev := range events {
					got := collect(ix, ev)
					limit := added.Load()
					for id := range uint64(stable) {
						ok, score := want(id, ev)
						g, reported := got[id]
						if ok != reported || ok && g != score {
							t.Errorf("stable filter %d on %v: reported %v (score %v), want %v (score %v)", id, ev, reported, g, ok, score)
							return
						}
					}
					for id, g := range got {
						if id < stable {
							continue
						}
						if ok, score := want(id, ev); id >= limit || !ok || g != score || math.IsInf(g, -1) {
							t.Errorf("filter %d reported (score %v) on %v: not added yet (%d), not matching (%v, %v), or twice", id, g, ev, limit, ok, score)
							return
						}
					}
				}
			}
		}()
	}
	var live []uint64
	for id := uint64(stable); id < total; id++ {
		added.Store(id + 1)
		require.NoError(t, ix.Add(id, fs[id]))
		live = append(live, id)
		// Remove about as many as are added, in bursts, so that lists
		// empty out and fill up again.
		for len(live) > 0 && r.IntN(5) < 2+int(id/1000%2)*2 {
			k := r.IntN(len(live))
			require.True(t, ix.Remove(live[k]))
			live = append(live[:k], live[k+1:]...)
		}
	}
	close(stop)
	wg.Wait()
	require.Equal(t, stable+len(live), ix.Len())
	require.Positive(t, ix.recs.moves, "the records were compacted")
	for _, ev := range events {
		got := collect(ix, ev)
		for id := range uint64(total) {
			ok, score := want(id, ev)
			inIndex := id < stable || containsID(live, id)
			g, reported := got[id]
			require.Equal(t, ok && inIndex, reported, "filter %d", id)
			if reported {
				require.Equal(t, score, g, "filter %d", id)
			}
		}
	}
}

// TestSparseNewKey matches while filters that bring an attribute no copy
// knows yet join a list readers are in (a prefix list, cheaper than the
// new attribute's): a reader that reaches such a filter must know its
// attribute, both for the head's bitmap (k ∈ …) and for its predicates
// (k not exists must not hold for an event that carries k).
func TestSparseNewKey(t *testing.T) {
	var attrs []ontology.Attribute
	for i := range 68 {
		attrs = append(attrs, ontology.Attribute{Name: fmt.Sprintf("k%d", i), Kind: ontology.KindInt})
	}
	attrs = append(attrs, ontology.Attribute{Name: "c", Kind: ontology.KindString})
	o, err := ontology.New([]ontology.TypeDef{{Name: "R", Attributes: attrs}})
	require.NoError(t, err)
	ev := &BasicEvent{Type: "R", Attrs: []ontology.Attr{{Name: "c", Value: ontology.String("xy")}}}
	for i := range 68 {
		ev.Attrs = append(ev.Attrs, ontology.Attr{Name: fmt.Sprintf("k%d", i), Value: ontology.Int(1)})
	}
	build := func(ps ...Predicate) *Filter {
		f, err := Build(Spec{Type: "R", Predicates: ps})
		require.NoError(t, err)
		return f
	}
	const notExists = 1 << 20 // IDs of the filters that never match ev
	for range 300 {
		x := NewIndex(o)
		for i := range 63 { // keys 0…63 (k0…k62 and c): the new ones share their signature bits
			require.NoError(t, x.Add(uint64(i), build(Attr(fmt.Sprintf("k%d", i)).Exists())))
		}
		require.NoError(t, x.Add(63, build(Attr("c").Prefix("x"))))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var wrong atomic.Int64
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				x.Match(ev, func(id uint64, _ float64) {
					if id >= notExists {
						wrong.Add(1)
					}
				})
			}
		}()
		for i := 64; i < 66; i++ {
			k := Attr(fmt.Sprintf("k%d", i))
			require.NoError(t, x.Add(uint64(i), build(Attr("c").Prefix("x"), k.In(ontology.Int(1), ontology.Int(2)))))
			require.NoError(t, x.Add(notExists+uint64(i), build(Attr("c").Prefix("x"), Attr(fmt.Sprintf("k%d", i+2)).NotExists())))
		}
		close(stop)
		wg.Wait()
		require.Zero(t, wrong.Load(), "a filter with a not-exists predicate on an attribute the event carries was reported")
		n := 0
		x.Match(ev, func(uint64, float64) { n++ })
		assert.Equal(t, 66, n)
	}
}

func containsID(s []uint64, id uint64) bool {
	for _, x := range s {
		if x == id {
			return true
		}
	}
	return false
}

// TestEntryLayout checks what the entry's field order is for: its item's
// start and first predicate fit in the first 32 bytes, and it is 128
// bytes (so are its allocations, aligned to 128), so that they share a
// cache line; a direct entry's ID and score (its last fast predicate's
// lo) share the second, the only line a group's direct list reads.
func TestEntryLayout(t *testing.T) {
	var e entry
	assert.LessOrEqual(t, unsafe.Offsetof(e.fast)+unsafe.Sizeof(e.fast[0]), uintptr(32))
	assert.Equal(t, uintptr(128), unsafe.Sizeof(e))
	last := unsafe.Offsetof(e.fast) + uintptr(len(e.fast)-1)*unsafe.Sizeof(e.fast[0]) + unsafe.Offsetof(e.fast[0].lo)
	assert.Equal(t, last/64, unsafe.Offsetof(e.id)/64, "a direct entry's score and ID in one cache line")
}

// TestTouchFilterLines checks that the fields touchFilter loads leave no
// 64-byte line of a Predicate untouched: between two of them, wherever
// in its field a value's kind lies, there are fewer than 64 bytes.
func TestTouchFilterLines(t *testing.T) {
	var p Predicate
	vs := unsafe.Sizeof(p.Value)
	// The first and last byte each touched field can be at.
	spans := [][2]uintptr{
		{unsafe.Offsetof(p.Operand), unsafe.Offsetof(p.Operand)},
		{unsafe.Offsetof(p.Value), unsafe.Offsetof(p.Value) + vs - 1},
		{unsafe.Offsetof(p.Hi), unsafe.Offsetof(p.Hi) + vs - 1},
		{unsafe.Offsetof(p.Set) + 8, unsafe.Offsetof(p.Set) + 15}, // its length
		{unsafe.Offsetof(p.Weight), unsafe.Offsetof(p.Weight) + 7},
		{unsafe.Sizeof(p), unsafe.Sizeof(p)}, // the next predicate's operand
	}
	for i := 1; i < len(spans); i++ {
		assert.Less(t, spans[i][1]-spans[i-1][0], uintptr(64), "touched fields %d and %d", i-1, i)
	}
}

// TestPlaces sets and reads back the places of filters with 1 to 9
// postings, some inline in their slot and some in a slice of rest,
// through drops and the reuse of dropped slots and slices.
func TestPlaces(t *testing.T) {
	var p places
	r := rand.New(rand.NewPCG(7, 8))
	want := map[uint32][]int32{}
	for step := range 2000 {
		slot := uint32(r.IntN(40))
		if w, ok := want[slot]; ok {
			for j, at := range w {
				require.Equal(t, at, p.get(slot, j), "step %d slot %d posting %d", step, slot, j)
			}
			p.drop(slot)
			delete(want, slot)
			continue
		}
		n := 1 + r.IntN(9)
		p.make(slot, n)
		w := make([]int32, n)
		for j := range w {
			w[j] = r.Int32()
			p.set(slot, j, w[j])
		}
		want[slot] = w
	}
}

// TestPlistPutPublish checks that places put fills stay unpublished
// until publish, that they count toward full, and that a list moved
// before they are published keeps them: Index.enter fills every list of
// a filter before publishing any.
func TestPlistPutPublish(t *testing.T) {
	l := newPlist(4)
	var pos places
	es := make([]*entry, 4)
	for i := range es {
		es[i] = &entry{id: uint64(i), slot: uint32(i)}
		pos.make(es[i].slot, 1)
	}
	for _, e := range es[:2] {
		pos.set(e.slot, 0, l.put(e, lhead{sig: 1}))
	}
	assert.Equal(t, int32(0), l.n.Load(), "put publishes nothing")
	l.publish()
	assert.Equal(t, int32(2), l.n.Load())
	for _, e := range es[2:] {
		pos.set(e.slot, 0, l.put(e, lhead{sig: 1}))
	}
	require.True(t, l.full(), "unpublished places count toward full")
	assert.Equal(t, int32(2), l.n.Load())
	nl := l.moved(grown(l.live), &pos, nil, nil)
	assert.Equal(t, int32(2), l.n.Load(), "the old list is not published again")
	require.Equal(t, int32(4), nl.n.Load(), "the moved list holds the unpublished places")
	for i, e := range es {
		assert.Same(t, e, nl.at(int32(i)))
		assert.Same(t, e, nl.at(pos.get(e.slot, 0)))
	}
}

// TestAddSameListAcrossMove adds a filter with two postings in one list
// (two equal access predicates) when that list has room for one: its
// first posting fills the list's last place, unpublished, and its second
// moves the list. Both postings must be in the list readers reach, where
// the writer's places say, and the filter must match once, and go.
func TestAddSameListAcrossMove(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "T", Attributes: []ontology.Attribute{{Name: "a", Kind: ontology.KindInt}}}})
	require.NoError(t, err)
	x := NewIndex(o)
	one := ontology.Int(1)
	for id := range 3 { // a list of capacity grown(0) = 4, 3 used
		require.NoError(t, x.Add(uint64(id), MustBuild(Spec{Type: "T", Predicates: []Predicate{Attr("a").EQ(one)}})))
	}
	twice := MustBuild(Spec{Type: "T", Mode: ModeAtLeast, AtLeast: 1, Predicates: []Predicate{Attr("a").EQ(one), Attr("a").EQ(one)}})
	require.NoError(t, x.Add(9, twice))
	e, _ := x.entries.get(9)
	ps := postingsOf(e.record(), nil)
	require.Len(t, ps, 2)
	require.True(t, samePlace(ps[0], ps[1]), "both postings go to one list")
	for _, d := range x.inst {
		l := d.lookup(d.groups[e.group], ps[0])
		require.Equal(t, int32(5), l.n.Load(), "the moved list, published with both")
		for j := range ps {
			at := x.pos.get(e.slot, j)
			require.Less(t, at, l.n.Load())
			assert.Same(t, e, l.at(at), "posting %d", j)
			assert.Equal(t, uint16(j), l.heads[at].post, "posting %d", j)
		}
	}
	ev := &BasicEvent{Type: "T", Attrs: []ontology.Attr{{Name: "a", Value: one}}}
	var got []uint64
	x.Match(ev, func(id uint64, _ float64) { got = append(got, id) })
	assert.ElementsMatch(t, []uint64{0, 1, 2, 9}, got)
	require.True(t, x.Remove(9))
	got = got[:0]
	x.Match(ev, func(id uint64, _ float64) { got = append(got, id) })
	assert.ElementsMatch(t, []uint64{0, 1, 2}, got)
}

// TestSpares checks which heads arrays spares keeps (those of the lengths
// grown gives, up to spareClasses: every short one, at most spareMax of
// each longer length) and that the arrays it hands out are zeroed, as
// new ones are, and end where they do.
func TestSpares(t *testing.T) {
	c := 0
	for k := range spareClasses + 1 {
		c = grown(int32(c))
		if k < spareClasses {
			assert.Equal(t, k, spareClass(c), "length %d", c)
		} else {
			assert.Equal(t, -1, spareClass(c), "length %d", c)
		}
	}
	for _, c := range []int{0, 1, 3, 5, 8, 16, 20, 28, 100} {
		assert.Equal(t, -1, spareClass(c), "length %d", c)
	}
	var sp spares
	e := &entry{id: 1}
	// Short arrays (cut from blocks) are all kept; longer ones up to
	// spareMax of a length.
	for _, c := range []int{10, 190} {
		k := spareClass(c)
		ls := make([]*plist, spareMax+2)
		for i := range ls {
			ls[i] = &plist{heads: sp.heads(c)}
			for range c {
				ls[i].put(e, lhead{sig: uint64(i + 1), kf: 7})
			}
		}
		for _, l := range ls {
			sp.keep(l)
		}
		want := spareMax
		if short(c) {
			want = len(ls)
		}
		require.Len(t, sp.free[k], want, "length %d", c)
		for range want + 1 { // the last one new
			h := sp.heads(c)
			require.Len(t, h, c)
			require.Equal(t, c, cap(h), "an array cut from a block ends where it does")
			for _, x := range h {
				require.Zero(t, x)
			}
		}
		assert.Empty(t, sp.free[k])
	}
	assert.True(t, short(94))
	assert.False(t, short(190))
	sp.keep(&plist{heads: make([]lhead, 11)}) // not a length grown gives
	sp.keep(newBare(10))
	for k := range sp.free {
		assert.Empty(t, sp.free[k])
	}
	assert.Len(t, (*spares)(nil).heads(22), 22)
}

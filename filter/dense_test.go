package filter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// TestDenseMatchesOracle fills groups with enough numeric-interval filters
// for the dense engine to take them (and to lay out its checkpoint bitsets
// several times, with filters left out of the bitsets between merges),
// removes some, and compares every event's matches with the oracle: values
// at and between bounds, int and float mixed around 2^53, missing
// attributes, NaN and values of the wrong kind. It then removes most
// filters, so that engines lay out anew without their dead slots, adds
// more, and compares again.
func TestDenseMatchesOracle(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "Root", Attributes: []ontology.Attribute{
			{Name: "i0", Kind: ontology.KindInt}, {Name: "i1", Kind: ontology.KindInt},
			{Name: "f0", Kind: ontology.KindFloat}, {Name: "f1", Kind: ontology.KindFloat},
		}},
		{Name: "Sub", Parents: []string{"Root"}},
	})
	require.NoError(t, err)
	attrs := []string{"i0", "i1", "f0", "f1"}
	for _, c := range []struct{ n, marks, pend int }{{300, 16, 64}, {3000, 16, 64}, {3000, 4, 1}, {5000, 3, 5}, {4000, 7, 2}, {4500, 6, 3}} {
		n := c.n
		t.Run(fmt.Sprintf("n=%d/marks=%d/pend=%d", n, c.marks, c.pend), func(t *testing.T) {
			defer func(a, d, e, f, g, h, i int) {
				maxMarks, purgeMin, pendMax, verifyWords, orFullFirst, orAllWords, orWordsBelow = a, d, e, f, g, h, i
			}(maxMarks, purgeMin, pendMax, verifyWords, orFullFirst, orAllWords, orWordsBelow)
			maxMarks, purgeMin, pendMax = c.marks, 8, c.pend
			switch c.marks {
			case 4: // match orders the ORs, stops at once and verifies every filter left
				verifyWords, orFullFirst, orAllWords = -1000, 0, 0
			case 7: // match orders the ORs and skips full lines after the first bitset
				orFullFirst, orAllWords, orWordsBelow = 1, 0, 1<<30
			case 6: // match ORs the first two bitsets in one pass and the rest word by word
				orFullFirst, orAllWords, orWordsBelow = 2, 0, 0
			case 3: // match orders the ORs with the default rules
				orAllWords = 0
			}
			r := rand.New(rand.NewPCG(uint64(n), 7))
			num := func() ontology.Value {
				switch r.IntN(6) {
				case 0:
					return ontology.Float(float64(r.IntN(200))/2 - 0.25)
				case 1:
					return ontology.Int(1<<53 + int64(r.IntN(3)))
				case 2:
					return ontology.Float(1 << 53)
				}
				return ontology.Int(int64(r.IntN(100)))
			}
			pred := func(name string) Predicate {
				a := Attr(name)
				switch r.IntN(5) {
				case 0:
					return a.LT(num())
				case 1:
					return a.GE(num())
				case 2:
					return a.GT(num())
				case 3:
					return a.LE(num())
				}
				lo, hi := num(), num()
				if c, _ := ontology.Compare(lo, hi); c > 0 {
					lo, hi = hi, lo
				}
				return rangeOK(a, lo, hi, r.IntN(2) == 0, r.IntN(2) == 0)
			}
			ix, bf := NewIndex(o), NewBruteForce(o)
			var live []uint64
			next := uint64(1)
			add := func() {
				id := next
				next++
				spec := Spec{Type: []string{"Root", "Sub", AnyType}[r.IntN(3)]}
				np := 1 + r.IntN(4)
				perm := r.Perm(len(attrs)) // distinct attributes, as counting engines need
				for k := 0; k < np; k++ {
					name := attrs[perm[k]]
					if r.IntN(8) == 0 {
						name = attrs[r.IntN(len(attrs))] // sometimes a repeat: not for counting engines
					}
					spec.Predicates = append(spec.Predicates, pred(name))
				}
				switch r.IntN(3) {
				case 1:
					spec.Mode, spec.AtLeast = ModeAtLeast, 1+r.IntN(np)
				case 2:
					spec.Mode = ModeScore
					total := 0.0
					for i := range spec.Predicates {
						w := float64(1 + r.IntN(3))
						if r.IntN(10) == 0 {
							w = 1.5 // not integral: not for counting engines
						}
						spec.Predicates[i].Weight = w
						total += w
					}
					spec.Threshold = float64(r.IntN(int(total)+1)) + []float64{0, 0.5, 1}[r.IntN(3)]
					if spec.Threshold <= 0 {
						spec.Threshold = 0.5
					}
					clampThreshold(&spec)
				}
				f := MustBuild(spec)
				require.NoError(t, ix.Add(id, f))
				require.NoError(t, bf.Add(id, f))
				live = append(live, id)
			}
			remove := func() {
				k := r.IntN(len(live))
				require.True(t, ix.Remove(live[k]))
				require.True(t, bf.Remove(live[k]))
				live = append(live[:k], live[k+1:]...)
			}
			check := func() {
				for e := 0; e < 400; e++ {
					checkDenseEvent(t, r, ix, bf, attrs, num)
				}
			}
			for range n {
				add()
				if r.IntN(4) == 0 {
					remove()
				}
			}
			check()
			checkKeyPre(t, ix)
			// The engine took the filters: the groups have one.
			d := ix.inst[ix.side.Load()]
			engines, marks, counting := 0, 0, 0
			for _, g := range d.groups {
				if g == nil {
					continue
				}
				for kind, dn := range g.dense {
					if dn != nil {
						require.Zero(t, g.eligible[kind], "eligible filters moved into the engine when it was made")
						engines++
						counting += kind
						for _, a := range dn.cur.Load().attrs {
							marks += len(a.lo.marks) + len(a.hi.marks)
						}
					}
				}
			}
			require.Positive(t, engines)
			require.Positive(t, counting, "a counting engine was made")
			if n >= 3000 {
				require.Positive(t, marks, "checkpoint bitsets were laid out")
			}

			// Remove four in five (engines lay out anew without the dead
			// slots), check, add back, check.
			layouts := map[*dense]int{}
			for _, g := range ix.inst[ix.side.Load()].groups {
				if g != nil {
					for _, dn := range g.dense {
						if dn != nil {
							layouts[dn] = dn.layouts
						}
					}
				}
			}
			for len(live) > n/5 {
				remove()
				if len(live)%97 == 0 {
					checkDenseEvent(t, r, ix, bf, attrs, num)
				}
			}
			check()
			purged := 0
			for _, g := range ix.inst[ix.side.Load()].groups {
				if g == nil {
					continue
				}
				for _, dn := range g.dense {
					if dn != nil && dn.layouts > layouts[dn] && layouts[dn] > 0 {
						purged++
					}
				}
			}
			require.Positive(t, purged, "an engine laid out anew without its dead slots")
			checkKeyPre(t, ix)
			for range n / 2 {
				add()
			}
			check()
			checkKeyPre(t, ix)
		})
	}
}

// checkKeyPre checks that every dense engine of ix counts its live
// predicates by key (keyPre, which the cost model reads) as it does by
// attribute (npre): through adds, removes and layouts.
func checkKeyPre(t *testing.T, ix *Index) {
	t.Helper()
	for _, g := range ix.inst[ix.side.Load()].groups {
		if g == nil {
			continue
		}
		for _, dn := range g.dense {
			if dn == nil {
				continue
			}
			want := map[uint32]int32{}
			for k, a := range dn.keyAttr {
				want[k] = int32(dn.npre[a])
			}
			for k, n := range dn.keyPre {
				assert.Equal(t, want[uint32(k)], n, "key %d", k)
			}
			for k, n := range want {
				if n != 0 {
					assert.Less(t, int(k), len(dn.keyPre), "key %d", k)
				}
			}
		}
	}
}

// checkDenseEvent compares the index with the oracle on one random event.
func checkDenseEvent(t *testing.T, r *rand.Rand, ix *Index, bf *BruteForce, attrs []string, num func() ontology.Value) {
	t.Helper()
	ev := &BasicEvent{Type: []string{"Root", "Sub", "Other"}[r.IntN(3)]}
	for _, a := range attrs {
		switch r.IntN(12) {
		case 0:
			continue
		case 1:
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a, Value: ontology.Float(math.NaN())})
		case 2:
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a, Value: ontology.String("7")})
		default:
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a, Value: num()})
		}
	}
	want, got := collect(bf, ev), collect(ix, ev)
	require.True(t, assertSameMatches(t, want, got), "event %+v: want %d matches, got %d", ev, len(want), len(got))
}

// TestDenseConcurrent matches from several goroutines while one writer
// adds and removes numeric-interval filters fast enough to make the dense
// engine grow, merge and lay out anew under them (issue 18: one copy of
// the engine, updated in place). Every Match must report each stable
// filter (present throughout, and matching the event), and only filters
// that match the event and were added before the Match returned.
func TestDenseConcurrent(t *testing.T) {
	defer func(a, b int) { pendMax, purgeMin = a, b }(pendMax, purgeMin)
	pendMax, purgeMin = 3, 8
	defer setChunkShift(10)() // engines of several chunks
	o, err := ontology.New([]ontology.TypeDef{{Name: "R", Attributes: []ontology.Attribute{
		{Name: "x", Kind: ontology.KindInt}, {Name: "y", Kind: ontology.KindInt}, {Name: "z", Kind: ontology.KindFloat},
	}}, {Name: "S", Parents: []string{"R"}}})
	require.NoError(t, err)
	ix := NewIndex(o)
	ev := &BasicEvent{Type: "R", Attrs: []ontology.Attr{{Name: "x", Value: ontology.Int(50)}, {Name: "y", Value: ontology.Int(7)}, {Name: "z", Value: ontology.Float(0.5)}}}
	// evS reaches R's engine and S's, which is made (taking in the
	// filters waiting in postings) and dropped again and again.
	evS := &BasicEvent{Type: "S", Attrs: ev.Attrs}
	r := rand.New(rand.NewPCG(3, 4))
	// Filters with even IDs match ev and evS; odd ones match neither.
	filterFor := func(id uint64) *Filter {
		lo := int64(r.IntN(50))
		if id%2 == 1 {
			lo = 51 + int64(r.IntN(40))
		}
		preds := []Predicate{Attr("x").Range(ontology.Int(lo), ontology.Int(lo+50), false, false), Attr("y").LT(ontology.Int(int64(8 + r.IntN(100))))}
		if r.IntN(2) == 0 {
			preds = append(preds, Attr("z").GE(ontology.Float(-float64(r.IntN(3)))))
		}
		typ := "R"
		if id >= 1<<40 {
			typ = "S"
		}
		return MustBuild(Spec{Type: typ, Predicates: preds})
	}
	const stable = 100
	for id := uint64(0); id < stable; id++ {
		require.NoError(t, ix.Add(id, filterFor(id)))
	}
	var added, addedS atomic.Uint64
	added.Store(stable)
	addedS.Store(1 << 40)
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
				for _, e := range []*BasicEvent{ev, evS} {
					got := collect(ix, e)
					limit, limitS := added.Load(), addedS.Load()
					for id := uint64(0); id < stable; id += 2 {
						if _, ok := got[id]; !ok {
							t.Errorf("stable filter %d, which matches, was not reported", id)
							return
						}
					}
					for id := range got {
						if id%2 == 1 || id < 1<<40 && id >= limit || id >= 1<<40 && (e == ev || id >= limitS) {
							t.Errorf("filter %d reported for %s: it does not match, or was not added yet (%d, %d added)", id, e.Type, limit, limitS)
							return
						}
					}
				}
			}
		}()
	}
	var live, liveS []uint64
	nextS := uint64(1 << 40)
	for id := uint64(stable); id < stable+6000; id++ {
		if id%500 == 0 {
			// S's engine: filled past denseMinGroup, then emptied.
			for range denseMinGroup + 10 {
				addedS.Store(nextS + 1)
				require.NoError(t, ix.Add(nextS, filterFor(nextS)))
				liveS = append(liveS, nextS)
				nextS++
			}
			for _, id := range liveS {
				require.True(t, ix.Remove(id))
			}
			liveS = liveS[:0]
		}
		added.Store(id + 1)
		require.NoError(t, ix.Add(id, filterFor(id)))
		live = append(live, id)
		if r.IntN(3) > 0 && len(live) > 0 {
			k := r.IntN(len(live))
			require.True(t, ix.Remove(live[k]))
			live = append(live[:k], live[k+1:]...)
		}
	}
	close(stop)
	wg.Wait()
	require.Equal(t, stable+len(live), ix.Len())
	g := ix.inst[ix.side.Load()].groups
	laid := 0
	for _, gr := range g {
		if gr != nil && gr.dense[denseAll] != nil {
			laid += gr.dense[denseAll].layouts
		}
	}
	require.Greater(t, laid, 3, "the engine was laid out anew while matched")
}

// TestDenseRecords decodes what encode wrote: bounds of every encoding
// (small and large ints, ±2^53, floats, -0, which comes back as 0 and
// compares the same), open and closed ends, and the header of counting
// records.
func TestDenseRecords(t *testing.T) {
	bounds := []ontology.Value{ontology.Int(0), ontology.Int(-1), ontology.Int(63), ontology.Int(64), ontology.Int(-8193), ontology.Int(300120),
		ontology.Int(1 << 53), ontology.Int(-1 << 53), ontology.Float(0.25), ontology.Float(math.Copysign(0, -1)), ontology.Float(-1e300), ontology.Float(1 << 60)}
	for _, counting := range []bool{false, true} {
		dn := newDense(counting)
		g := &dgen{}
		dn.resize(g, g, 64)
		g.recs = [][]byte{make([]byte, 1<<16)}
		for i, lo := range bounds {
			hi := bounds[(i+5)%len(bounds)]
			if c, _ := ontology.Compare(lo, hi); c > 0 {
				lo, hi = hi, lo
			}
			spec := Spec{Type: "R", Predicates: []Predicate{
				rangeOK(Attr("x"), lo, hi, i%2 == 0, i%3 == 0),
				Attr("y").LT(bounds[i]),
			}}
			if counting {
				spec.Mode, spec.AtLeast = ModeAtLeast, 1
				if i%2 == 1 {
					spec.Mode, spec.AtLeast, spec.Threshold = ModeScore, 0, 2.5
					spec.Predicates[0].Weight, spec.Predicates[1].Weight = 3, 15
				}
			}
			f := MustBuild(spec)
			enc := dn.encode(nil, f, []uint8{0, 1})
			*chunkAt(g.off, uint32(i)) = uint32(dn.recPos)
			dn.recPos += copy(g.recs[0][dn.recPos:], enc)
			r := dn.record(g, uint32(i))
			require.Equal(t, 2, r.left)
			if counting {
				require.Equal(t, f.mode, r.mode)
				require.Equal(t, f.atLeast, r.atLeast)
				require.Equal(t, f.threshold, r.thresh)
				total := 0
				for j := range f.preds {
					total += int(f.preds[j].weight())
				}
				require.Equal(t, total, r.total)
			}
			for j := range f.preds {
				require.True(t, r.next())
				p := &f.preds[j]
				lo, hasLo, loOpen := bound(p, false)
				hi, hasHi, hiOpen := bound(p, true)
				require.Equal(t, uint8(j), r.attr)
				require.Equal(t, recPred{hasLo: hasLo, hasHi: hasHi, loOpen: loOpen, hiOpen: hiOpen, lo: lo, hi: hi}, r.recPred, "filter %s predicate %d", f, j)
				require.Equal(t, int(p.weight()), r.weight)
			}
			require.False(t, r.next())
			require.Equal(t, len(enc), len(g.recs[0][*chunkAt(g.off, uint32(i)):])-len(r.b), "the record is read to its end")
		}
	}
}

// setChunkShift makes chunks of 2^k slots for a test; call the function
// it returns to restore them.
func setChunkShift(k uint32) func() {
	if k > maxChunkShift {
		panic("setChunkShift: chunks longer than zeroChunk")
	}
	old := chunkShift
	set := func(k uint32) {
		chunkShift, chunkSlots = k, 1<<k
	}
	set(k)
	return func() { set(old) }
}

// TestDenseChunks fills one engine past two chunks of slots (chunkSlots
// each), so that bitsets, IDs and records span several chunks and blocks
// and match ORs them chunk by chunk; removes a third of the filters, which
// lays the engine out anew across chunks; and compares with the oracle.
func TestDenseChunks(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "R", Attributes: []ontology.Attribute{
		{Name: "x", Kind: ontology.KindInt}, {Name: "y", Kind: ontology.KindInt}, {Name: "z", Kind: ontology.KindFloat},
	}}})
	require.NoError(t, err)
	attrs := []string{"x", "y", "z"}
	r := rand.New(rand.NewPCG(5, 6))
	num := func() ontology.Value { return ontology.Int(int64(r.IntN(1000))) }
	ix, bf := NewIndex(o), NewBruteForce(o)
	defer setChunkShift(12)()
	n := uint64(2*chunkSlots + 5000)
	for id := range uint64(n) {
		lo := int64(r.IntN(900))
		spec := Spec{Type: "R", Predicates: []Predicate{
			rangeOK(Attr(attrs[r.IntN(2)]), ontology.Int(lo), ontology.Int(lo+int64(r.IntN(300))), r.IntN(2) == 0, false),
			Attr("z").LT(ontology.Float(float64(r.IntN(1000)) + 0.5)),
		}}
		f := MustBuild(spec)
		require.NoError(t, ix.Add(id, f))
		require.NoError(t, bf.Add(id, f))
	}
	rt, _ := o.Lookup("R")
	dn := ix.inst[0].groups[rt.ID+1].dense[denseAll]
	require.Greater(t, len(dn.cur.Load().live), 2, "the engine spans several chunks")
	for range 30 {
		checkDenseEvent(t, r, ix, bf, attrs, num)
	}
	layouts := dn.layouts
	for id := uint64(0); id < n; id += 3 {
		require.True(t, ix.Remove(id))
		require.True(t, bf.Remove(id))
	}
	for id := uint64(1); id < n; id += 3 {
		require.True(t, ix.Remove(id))
		require.True(t, bf.Remove(id))
	}
	require.Greater(t, dn.layouts, layouts, "the removals laid the engine out anew")
	for range 30 {
		checkDenseEvent(t, r, ix, bf, attrs, num)
	}
}

// TestExactFloat checks which ints a float64 holds exactly, at the edges.
func TestExactFloat(t *testing.T) {
	for _, c := range []struct {
		i    int64
		want bool
	}{{0, true}, {1 << 53, true}, {1<<53 + 1, false}, {1<<53 + 2, true}, {-1<<53 - 1, false}, {math.MaxInt64, false}, {math.MinInt64, true}, {1 << 62, true}, {1<<62 + 1, false}} {
		assert.Equal(t, c.want, exactFloat(ontology.Int(c.i)), "%d", c.i)
	}
	assert.True(t, exactFloat(ontology.Float(0.1)))
	assert.False(t, exactFloat(ontology.String("1")))
}

// TestDenseNewAttributes lays an engine out on one attribute, then adds
// many filters on another: their bounds must get boundaries of their own
// (a new layout) instead of leaving match to verify each of them.
func TestDenseNewAttributes(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "R", Attributes: []ontology.Attribute{
		{Name: "x", Kind: ontology.KindInt}, {Name: "y", Kind: ontology.KindInt},
	}}})
	require.NoError(t, err)
	ix, bf := NewIndex(o), NewBruteForce(o)
	r := rand.New(rand.NewPCG(8, 9))
	add := func(id uint64, attr string) {
		lo := int64(r.IntN(1000))
		f := MustBuild(Spec{Type: "R", Predicates: []Predicate{Attr(attr).Range(ontology.Int(lo), ontology.Int(lo+100), false, false)}})
		require.NoError(t, ix.Add(id, f))
		require.NoError(t, bf.Add(id, f))
	}
	for id := range uint64(2000) {
		add(id, "x") // laid out last at 1,024
	}
	rt, _ := o.Lookup("R")
	dn := ix.inst[0].groups[rt.ID+1].dense[denseAll]
	layouts := dn.layouts
	for id := uint64(2000); id < 3000; id++ {
		add(id, "y") // fewer than relayout times 1,024 in all
	}
	require.Greater(t, dn.layouts, layouts, "the filters on y laid the engine out anew")
	g := dn.cur.Load()
	y := g.attrs[dn.keyAttr[ix.attrRefs["y"].id]]
	require.NotEmpty(t, y.lo.bounds, "y has boundaries")
	require.NotEmpty(t, y.hi.marks, "y has bitsets")
	num := func() ontology.Value { return ontology.Int(int64(r.IntN(1200))) }
	for range 50 {
		checkDenseEvent(t, r, ix, bf, []string{"x", "y"}, num)
	}
}

// TestDenseLayoutWhenUnbalanced grows an engine past relayout times its
// last layout twice: with bounds drawn as before, it keeps its boundaries
// (balanced) and only counts its bitsets anew; with bounds drawn
// elsewhere, it lays out anew and places boundaries among them. Matches
// equal the oracle's throughout.
func TestDenseLayoutWhenUnbalanced(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "R", Attributes: []ontology.Attribute{
		{Name: "x", Kind: ontology.KindInt},
	}}})
	require.NoError(t, err)
	ix, bf := NewIndex(o), NewBruteForce(o)
	r := rand.New(rand.NewPCG(10, 11))
	id := uint64(0)
	add := func(from int) {
		lo := int64(from + r.IntN(1000))
		f := MustBuild(Spec{Type: "R", Predicates: []Predicate{Attr("x").Range(ontology.Int(lo), ontology.Int(lo+50), false, false)}})
		require.NoError(t, ix.Add(id, f))
		require.NoError(t, bf.Add(id, f))
		id++
	}
	check := func() {
		t.Helper()
		for range 200 {
			ev := &BasicEvent{Type: "R", Attrs: []ontology.Attr{{Name: "x", Value: ontology.Int(int64(r.IntN(7000)))}}}
			want, got := collect(bf, ev), collect(ix, ev)
			require.True(t, assertSameMatches(t, want, got), "x = %v", ev.Attrs[0].Value)
		}
	}
	for range 2000 {
		add(0)
	}
	rt, _ := o.Lookup("R")
	dn := ix.inst[0].groups[rt.ID+1].dense[denseAll]
	require.NotNil(t, dn)
	layouts, built := dn.layouts, dn.built
	require.False(t, dn.cur.Load().attrs[0].lo.room, "the last layout had bounds enough for every boundary")

	for dn.live < relayout*built+100 {
		add(0)
	}
	check()
	assert.Equal(t, layouts, dn.layouts, "bounds drawn as before: the boundaries stay")
	assert.Equal(t, dn.live-100, dn.built, "the engine looked at relayout times its layout's size")
	a := dn.cur.Load().attrs[0]
	assert.Greater(t, int(a.lo.held[0].Load()), built/2, "the bitsets were counted anew")
	assert.Less(t, a.lo.bounds[len(a.lo.bounds)-1], 1000.0)

	for built = dn.built; dn.live < relayout*built+100; {
		add(5000)
	}
	check()
	assert.Equal(t, layouts+1, dn.layouts, "bounds drawn elsewhere: a layout")
	a = dn.cur.Load().attrs[0]
	assert.Greater(t, a.lo.bounds[len(a.lo.bounds)-1], 5000.0, "boundaries among the new bounds")
}

// TestDenseLayoutOneSided: an engine whose filters bound one side only
// (x > v, a common subscription) keeps its layout as it grows with
// bounds drawn alike, like one with ranges: its empty side gains no
// bounds, so it asks for no boundaries (found by an attack test: the
// check once counted the attribute's filters for each side).
func TestDenseLayoutOneSided(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "R", Attributes: []ontology.Attribute{
		{Name: "x", Kind: ontology.KindInt},
	}}})
	require.NoError(t, err)
	ix, bf := NewIndex(o), NewBruteForce(o)
	r := rand.New(rand.NewPCG(12, 13))
	id := uint64(0)
	add := func() {
		f := MustBuild(Spec{Type: "R", Predicates: []Predicate{Attr("x").GT(ontology.Int(int64(r.IntN(1000))))}})
		require.NoError(t, ix.Add(id, f))
		require.NoError(t, bf.Add(id, f))
		id++
	}
	for range 2000 {
		add()
	}
	rt, _ := o.Lookup("R")
	dn := ix.inst[0].groups[rt.ID+1].dense[denseAll]
	require.NotNil(t, dn)
	layouts, built := dn.layouts, dn.built
	for dn.live < relayout*built+100 {
		add()
	}
	assert.Equal(t, layouts, dn.layouts, "one-sided bounds drawn as before: the boundaries stay")
	assert.Equal(t, dn.live-100, dn.built, "the engine looked at relayout times its layout's size")
	for range 200 {
		ev := &BasicEvent{Type: "R", Attrs: []ontology.Attr{{Name: "x", Value: ontology.Int(int64(r.IntN(1100)))}}}
		want, got := collect(bf, ev), collect(ix, ev)
		require.True(t, assertSameMatches(t, want, got), "x = %v", ev.Attrs[0].Value)
	}
}

// TestDenseChunkLevels checks the chunk layout for several chunk sizes:
// chunkOf and chunkStart agree slot by slot, and growChunks, from empty
// to past three chunks, copies only the short first chunk: every other
// chunk, once made, is the same memory in every later array.
func TestDenseChunkLevels(t *testing.T) {
	for _, k := range []uint32{10, 12, 19} {
		t.Run(fmt.Sprintf("shift=%d", k), func(t *testing.T) {
			defer setChunkShift(k)()
			end := 3*chunkSlots + chunkSlots/2
			c, at := 0, 0
			for s := range end {
				if s == chunkStart(c+1) {
					c, at = c+1, 0
				}
				gc, gi := chunkOf(uint32(s))
				if gc != c || gi != uint32(at) {
					require.Failf(t, "chunkOf", "slot %d: chunk %d place %d, want %d %d", s, gc, gi, c, at)
				}
				at++
			}
			assert.Equal(t, chunkSlots, chunkStart(1))
			assert.Equal(t, 2*chunkSlots, chunkStart(2))

			var ids [][]uint64
			var bits bitset
			seen := map[*uint64]int{} // first element of each chunk → its index
			for slots := 64; slots <= end; {
				ids = growChunks(ids, slots, 0)
				bits = growChunks(bits, slots, 6)
				require.Equal(t, len(ids), len(bits))
				for i, ch := range ids {
					require.Equal(t, len(ch), len(bits[i])*64, "chunk %d", i)
					if i == 0 && len(ch) < chunkSlots {
						continue
					}
					if j, ok := seen[&bits[i][0]]; ok {
						require.Equal(t, i, j)
					}
					seen[&bits[i][0]] = i
				}
				have := chunkStart(len(ids)-1) + len(ids[len(ids)-1])
				require.GreaterOrEqual(t, have, slots)
				// A slot written through chunkAt and word reads back.
				*chunkAt(ids, uint32(slots-1)) = uint64(slots)
				*bits.word(uint32(slots - 1)) |= 1 << ((slots - 1) & 63)
				require.Equal(t, uint64(slots), ids[len(ids)-1][len(ids[len(ids)-1])-(have-slots)-1])
				if slots < chunkSlots {
					slots *= 2
				} else {
					slots = chunkEnd(slots + 1)
				}
			}
			require.Len(t, seen, len(ids), "no chunk was copied once whole")

			// A layout's short last chunk is lengthened; the chunks
			// before it are kept.
			short := growChunks[uint64](nil, chunkSlots+chunkSlots/4+640, 6)
			require.Len(t, short[len(short)-1], (chunkSlots/4+640)/64)
			longer := growChunks(short, chunkEnd(chunkSlots+chunkSlots/4+641), 6)
			require.Len(t, longer, len(short))
			require.Len(t, longer[len(longer)-1], chunkSlots/64)
			for i := range len(short) - 1 {
				require.Same(t, &short[i][0], &longer[i][0], "chunk %d kept", i)
			}
		})
	}
}

// TestDenseGrowsThroughLevels fills an engine from empty through every
// chunk level — the short first chunk doubling, each small chunk, then
// large ones — while readers match concurrently (run with -race). Every
// filter matches the event or none does by its ID's parity; a Match must
// report every even filter added before it started and no odd one, nor
// one added after it returned. The small engine then compares with the
// oracle on random events.
func TestDenseGrowsThroughLevels(t *testing.T) {
	defer setChunkShift(12)()
	o, err := ontology.New([]ontology.TypeDef{{Name: "R", Attributes: []ontology.Attribute{
		{Name: "x", Kind: ontology.KindInt}, {Name: "y", Kind: ontology.KindInt}, {Name: "z", Kind: ontology.KindFloat},
	}}})
	require.NoError(t, err)
	ix, bf := NewIndex(o), NewBruteForce(o)
	ev := &BasicEvent{Type: "R", Attrs: []ontology.Attr{{Name: "x", Value: ontology.Int(50)}, {Name: "y", Value: ontology.Int(7)}, {Name: "z", Value: ontology.Float(0.5)}}}
	r := rand.New(rand.NewPCG(7, 8))
	filterFor := func(id uint64) *Filter {
		lo := int64(r.IntN(50))
		if id%2 == 1 {
			lo = 51 + int64(r.IntN(40))
		}
		return MustBuild(Spec{Type: "R", Predicates: []Predicate{
			Attr("x").Range(ontology.Int(lo), ontology.Int(lo+50), false, false),
			Attr("y").LT(ontology.Int(int64(8 + r.IntN(100)))),
			Attr("z").GE(ontology.Float(-float64(r.IntN(3)))),
		}})
	}
	var added atomic.Uint64 // filters 0…added-1 were added before a Match that loads it
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				before := added.Load()
				got := collect(ix, ev)
				after := added.Load()
				for id := uint64(0); id < before; id += 2 {
					if _, ok := got[id]; !ok {
						t.Errorf("filter %d, which matches and was added before Match, was not reported (%d added)", id, before)
						return
					}
				}
				for id := range got {
					if id%2 == 1 || id >= after+1 {
						t.Errorf("filter %d reported: it does not match, or was not added yet (%d added)", id, after)
						return
					}
				}
			}
		}()
	}
	n := uint64(2*chunkSlots + 1000)
	for id := range n {
		f := filterFor(id)
		require.NoError(t, ix.Add(id, f))
		require.NoError(t, bf.Add(id, f))
		added.Store(id + 1)
	}
	close(stop)
	wg.Wait()
	rt, _ := o.Lookup("R")
	g := ix.inst[0].groups[rt.ID+1].dense[denseAll].cur.Load()
	require.Greater(t, len(g.live), 1, "the engine passed its first chunk")
	num := func() ontology.Value { return ontology.Int(int64(r.IntN(120) - 10)) }
	for range 50 {
		e := &BasicEvent{Type: "R"}
		for _, a := range []string{"x", "y", "z"} {
			if r.IntN(8) > 0 {
				e.Attrs = append(e.Attrs, ontology.Attr{Name: a, Value: num()})
			}
		}
		require.Equal(t, collect(bf, e), collect(ix, e), "event %v", e)
	}
}

// TestOrCount: orCount leaves u as ORing src into it would, and returns
// the slots left unmarked, across chunks, with full lines skipped and a
// last word past the body.
func TestOrCount(t *testing.T) {
	defer setChunkShift(10)()
	r := rand.New(rand.NewPCG(3, 4))
	for _, slots := range []int{64, 640, 1024, 1088, 3*1024 + 576} {
		for _, density := range []int{0, 1, 3, 8} {
			words := slots / 64
			src := bitset(growChunks[uint64](nil, slots, 6))
			u, want := make([]uint64, words), make([]uint64, words)
			for w := range words {
				// density: how many random words are ORed into each;
				// some lines all ones so that they are skipped.
				for range density {
					u[w] |= r.Uint64()
				}
				if w/8%3 == 0 {
					u[w] = ^uint64(0)
				}
				*src.word(uint32(w) << 6) = r.Uint64() & r.Uint64()
				want[w] = u[w] | *src.word(uint32(w) << 6)
			}
			left := orCount(u, src)
			require.Equal(t, want, u, "slots %d density %d", slots, density)
			require.Equal(t, alive(want), left, "slots %d density %d", slots, density)
		}
	}
}

// TestOrFirstAndWords: orFirst sets u to the slots not live or past n
// ORed with its bitsets, and counts those left; orWords then ORs the
// rest as whole ORs would: across chunks, with bitsets longer than u,
// more or fewer than eight of them, a last word partly past n, and a
// generation with holes (its live bitset read) or without (not read).
func TestOrFirstAndWords(t *testing.T) {
	defer setChunkShift(10)()
	r := rand.New(rand.NewPCG(5, 6))
	for _, slots := range []int{64, 640, 1024, 1088, 3*1024 + 576} {
		for _, nsrc := range []int{1, 5, 8, 13, 16, 21} {
			for _, c := range []struct {
				n     int
				holes bool // some slots below n not live; else all are
			}{{slots, true}, {slots - 23, true}, {slots, false}, {slots - 23, false}} {
				n := c.n
				words := (n + 63) / 64
				live := bitset(growChunks[uint64](nil, slots, 6))
				srcs := make([]bitset, nsrc)
				order := make([]uint64, nsrc)
				want := make([]uint64, words)
				for w := range words {
					*live.word(uint32(w) << 6) = ^uint64(0)
					if c.holes {
						*live.word(uint32(w) << 6) = ^(r.Uint64() & r.Uint64() & r.Uint64())
					}
					want[w] = ^*live.word(uint32(w) << 6)
				}
				for k := range srcs {
					// Every third bitset has room for a chunk more.
					size := slots
					if k%3 == 2 {
						size += 1024
					}
					srcs[k] = growChunks[uint64](nil, size, 6)
					for w := range words {
						b := r.Uint64() & r.Uint64() & r.Uint64()
						*srcs[k].word(uint32(w) << 6) = b
						want[w] |= b
					}
					order[k] = orderKey(int32(r.IntN(100)), k)
				}
				if r := n % 64; r != 0 {
					want[words-1] |= ^uint64(0) << r
				}
				name := fmt.Sprintf("slots %d srcs %d n %d holes %v", slots, nsrc, n, c.holes)
				for first := range nsrc + 1 {
					var s scratch
					g := &dgen{live: live}
					g.holes.Store(c.holes)
					u, left := s.orFirst(g, uint32(n), srcs, order[:first])
					require.Equal(t, alive(u), left, "%s first %d", name, first)
					orWords(u, srcs, order[first:])
					require.Equal(t, want, u, "%s first %d", name, first)
				}
			}
		}
	}
}

// TestVerifyCost checks match's price of a verification: as before up to
// 2048 words of u (engines up to 131,072 slots, whose rule to stop ORing
// must not change), growing by a 32nd of a word per word past them.
func TestVerifyCost(t *testing.T) {
	for _, c := range []struct{ words, want int }{
		{0, verifyWords},
		{1563, verifyWords + 1563/8}, // W-INT at 10⁵ filters
		{2048, verifyWords + 256},
		{15625, verifyWords + 256 + (15625-2048)/32},   // 10⁶
		{140625, verifyWords + 256 + (140625-2048)/32}, // 9·10⁶
	} {
		t.Run(fmt.Sprint(c.words), func(t *testing.T) {
			assert.Equal(t, c.want, verifyCost(c.words))
		})
	}
}

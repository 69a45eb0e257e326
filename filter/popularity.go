package filter

import (
	"github.com/sion-go/sion/ontology"
)

// Popularity counts: how often each group's filters test each operand and
// value, which chooseAccess and headPred read to estimate how often an
// event reaches a posting. Only the writer keeps them (Index.mu held).

// groupPop is the popularity counts of one group: its filters, and by
// key ID (small, dense integers) the counts of each operand. Only the
// writer reads and writes them (Index.mu held).
type groupPop struct {
	filters int32
	keys    []*popStats
}

// popStats counts, for one group and operand, the predicates of all
// filters (chosen as access or not): how many test the operand at all,
// how many test it for equality, and how many for each value (integers,
// and floats of integral value, by their int64 — those in 0…popSmall−1
// in small —; other values by key). The counts estimate how often an
// event reaches a posting, and unlike list lengths they do not shrink
// when filters avoid a popular value.
type popStats struct {
	present int32
	eqAll   int32
	small   []int32 // by value, as long as the largest counted
	ints    map[int64]int32
	other   map[ontology.ValueKey]int32
	// eqLists holds, by small integer value (see smallInt), the group's
	// equality list of the operand, which both copies share: the writer's
	// way to them (Index.touchLists) without the copy's maps, which an Add
	// would otherwise look up for each of its postings.
	eqLists []*plist
}

// popSmall bounds the integers counted by slice rather than map.
const popSmall = 1024

// eqInt returns the count of equalities to the integer n.
func (st *popStats) eqInt(n int64) int32 {
	if uint64(n) < uint64(len(st.small)) {
		return st.small[n]
	}
	if n >= 0 && n < popSmall {
		return 0
	}
	return st.ints[n]
}

// eq returns the count of equalities to v.
func (st *popStats) eq(v ontology.Value) int32 {
	if st == nil {
		return 0
	}
	if n, ok := popInt(v); ok {
		return st.eqInt(n)
	}
	return st.other[v.Key()]
}

// addEq adds delta to the count of equalities to v.
func (st *popStats) addEq(v ontology.Value, delta int32) {
	st.eqAll += delta
	n, ok := popInt(v)
	switch {
	case ok && n >= 0 && n < popSmall:
		for int(n) >= len(st.small) {
			st.small = append(st.small, 0)
		}
		st.small[n] += delta
	case ok:
		if st.ints == nil {
			st.ints = map[int64]int32{}
		}
		if c := st.ints[n] + delta; c != 0 {
			st.ints[n] = c
		} else {
			delete(st.ints, n)
		}
	default:
		if st.other == nil {
			st.other = map[ontology.ValueKey]int32{}
		}
		k := v.Key()
		if c := st.other[k] + delta; c != 0 {
			st.other[k] = c
		} else {
			delete(st.other, k)
		}
	}
}

// popInt returns v as the int64 its ValueKey stands for, when it is an
// int or a float of integral value (ontology.Value.Key).
func popInt(v ontology.Value) (int64, bool) {
	if v.Kind() == ontology.KindInt || v.Kind() == ontology.KindFloat {
		return integral(v)
	}
	return 0, false
}

// stat returns the counts of key, or nil.
func (gp *groupPop) stat(key uint32) *popStats {
	if int(key) >= len(gp.keys) {
		return nil
	}
	return gp.keys[key]
}

// groupPop returns the popularity counts of group g, made if it has
// none. mu must be held.
func (x *Index) groupPop(g int) *groupPop {
	gp := x.pop[g]
	if gp == nil {
		gp = &groupPop{}
		x.pop[g] = gp
	}
	return gp
}

// keyStats returns the counts of key in gp, made if it has none.
func (gp *groupPop) keyStats(key uint32) *popStats {
	for int(key) >= len(gp.keys) {
		gp.keys = append(gp.keys, nil)
	}
	st := gp.keys[key]
	if st == nil {
		st = &popStats{}
		gp.keys[key] = st
	}
	return st
}

// countFilter adds one to the popularity counts of group gp for filter f
// (the keys of its predicates keys), about to be added to the group. It
// counts what count counts from the filter's record, which it reads
// faster than the record. mu must be held.
func countFilter(gp *groupPop, f *Filter, keys []uint32) {
	gp.filters++
	for i := range f.preds {
		p := &f.preds[i]
		if keys[i] == noKey {
			continue
		}
		st := gp.keyStats(keys[i])
		st.present++
		switch {
		case p.Operand.Source == SourceXPath:
		case p.Op == OpEQ:
			st.addEq(p.Value, 1)
		case p.Op == OpIn:
			for _, m := range p.Set {
				st.addEq(m, 1)
			}
		}
	}
}

// count adds delta to the popularity counts of e's predicates, read from
// its record. mu must be held.
func (x *Index) count(e *entry, delta int32) {
	gp := x.groupPop(int(e.group))
	if gp.filters += delta; gp.filters == 0 {
		delete(x.pop, int(e.group)) // every count is 0 with it
	}
	rec := e.record()
	h := readHead(rec)
	var p rpred
	for i, j := 0, h.body; i < h.npreds; i++ {
		j = readPred(rec, j, &p)
		if p.key == noKey {
			continue
		}
		st := gp.keyStats(p.key)
		if st.present += delta; st.present == 0 {
			gp.keys[p.key] = nil // every count is 0 with it
		}
		switch {
		case p.src == SourceXPath:
		case p.op == OpEQ:
			st.addEq(p.lo, delta)
		case p.op == OpIn:
			for k, b := 0, p.set; k < p.nset; k++ {
				var m ontology.Value
				m, b = readValue(rec, b)
				st.addEq(m, delta)
			}
		}
	}
}

// noteList makes l (nil: none) the list of posting p in gp's eqLists,
// if p is an equality posting of a small integer. mu must be held.
func (gp *groupPop) noteList(p posting, l *plist) {
	if gp == nil || p.kind != postEq {
		return
	}
	n, ok := smallInt(p.v)
	st := gp.stat(p.key)
	if !ok || st == nil {
		return
	}
	for n >= len(st.eqLists) {
		st.eqLists = append(st.eqLists, nil)
	}
	st.eqLists[n] = l
}

// eqList returns the list of postEq posting p of a small integer n, or
// nil (see popStats.eqLists). mu must be held.
func (gp *groupPop) eqList(p posting, n int) *plist {
	if st := gp.stat(p.key); st != nil && n < len(st.eqLists) {
		return st.eqLists[n]
	}
	return nil
}

package filter

import "sync/atomic"

// plist is a posting list. It is shared by both copies of the index and
// updated in place, once, by the writer (Index.mu held); readers never
// wait for it and it never waits for them.
//
// It holds entries, not slots, so that verification reaches a filter in
// one step; and, in the list's own memory, what rejects most of the
// filters reached without reading them: heads (heads.go), read in order,
// then items, read for the filters heads let through. Memory: 8 + 32 +
// 112 bytes per posting and a live bit, in arrays up to twice as long as
// the postings they hold.
//
// The arrays (lvec) are append-only: the writer fills place n, sets its
// live bit, and then publishes n+1; a removed posting's live bit is
// cleared atomically and its place is not reused. When dead places
// outnumber live ones, or the arrays are full, the writer copies the
// live postings into new arrays and publishes them by cur; readers still
// on the old ones finish there, and the garbage collector reclaims them.
// The writer never writes a place it has published.
type plist struct {
	cur atomic.Pointer[lvec] // nil when the list holds nothing

	// The writer's, under Index.mu.
	live, dead int32
}

// lvec is the arrays of one plist. Places below n are published and
// never change except for their live bits, which readers load
// atomically.
type lvec struct {
	n     atomic.Int32
	open  atomic.Int32 // published heads that reject no event (see lhead.open), dead or alive
	ents  []*entry
	heads []lhead
	items []litem // by place, like heads
	live  []atomic.Uint64
}

func newLvec(c int) *lvec {
	return &lvec{ents: make([]*entry, c), heads: make([]lhead, c), items: make([]litem, c), live: make([]atomic.Uint64, (c+63)/64)}
}

// alive reports whether place i holds a posting.
func (v *lvec) alive(i int) bool { return v.live[i>>6].Load()>>(i&63)&1 != 0 }

// add appends a posting of e, with its head h and item it, to l and
// returns its place. pos is the writer's places of every filter's
// postings (by slot, by posting): it is updated when the list moves.
func (l *plist) add(e *entry, h lhead, it litem, pos [][]int32) int32 {
	v := l.cur.Load()
	if v == nil || int(v.n.Load()) == len(v.ents) {
		v = l.rebuild(max(4, 2*int(l.live+1)), pos)
	}
	i := v.n.Load()
	v.ents[i], v.heads[i], v.items[i] = e, h, it
	v.live[i>>6].Or(1 << (i & 63))
	if h.open() {
		v.open.Add(1)
	}
	l.live++
	v.n.Store(i + 1)
	return i
}

// del removes the posting at place i, and moves the list to new arrays
// when its dead places outnumber the live ones (see add for pos).
func (l *plist) del(i int32, pos [][]int32) {
	v := l.cur.Load()
	v.live[i>>6].And(^(uint64(1) << (i & 63)))
	l.live--
	l.dead++
	switch {
	case l.live == 0:
		l.dead = 0
		l.cur.Store(nil)
	case l.dead >= l.live:
		l.rebuild(max(4, 2*int(l.live)), pos)
	}
}

// rebuild publishes new arrays of capacity c holding the live postings
// of l, in order, and returns them.
func (l *plist) rebuild(c int, pos [][]int32) *lvec {
	nv := newLvec(c)
	if v := l.cur.Load(); v != nil {
		n, k := int(v.n.Load()), int32(0)
		for i := range n {
			if !v.alive(i) {
				continue
			}
			nv.ents[k], nv.heads[k], nv.items[k] = v.ents[i], v.heads[i], v.items[i]
			nv.live[k>>6].Or(1 << (k & 63))
			if v.heads[i].open() {
				nv.open.Add(1)
			}
			pos[v.ents[i].slot][v.heads[i].post] = k
			k++
		}
		nv.n.Store(k)
	}
	l.dead = 0
	l.cur.Store(nv)
	return nv
}

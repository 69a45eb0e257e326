package filter

// How an entry enters and leaves the posting lists of its postings (the
// Index's writer side of plist.go).

// placed is a list that goes in place of the one of posting p in both
// copies: new, or moved.
type placed struct {
	p posting
	l *plist
}

// enter puts e (drafted as dr) into the lists of its postings ps, with
// the heads Add made for them; looked is the lists touchLists found for
// ps, or nil. Appending to a list waits for no reader;
// only new keys (first, before any list holds e), new or moved lists and
// range postings (whose spans readers consult) change the copies,
// through write. mu must be held.
func (x *Index) enter(e *entry, dr *draft, ps []posting, heads []lhead, looked []*plist) {
	x.ensureGroup(int(e.group))
	d := x.inst[1-x.side.Load()]
	for _, k := range dr.keys {
		if k != noKey && (int(k) >= len(d.keys) || !d.keys[k].used) {
			// Both copies know e's keys before a list they share holds
			// it: a reader that reaches e reads its operands by key.
			x.write(func(d *data) {
				for i, k := range dr.keys {
					d.useKey(k, keyNameOf(dr.f, i), dr.f.xexpr(i))
				}
			})
			break
		}
	}
	if looked == nil { // e's group was new
		var lkBuf [8]*plist
		looked = x.touchLists(e, dr.gp, ps, lkBuf[:0])
	}
	x.pos.make(e.slot, len(ps))
	var fresh, moved []placed // lists to attach, lists to swap in
	var oldBuf [4]*plist      // lists that moved, whose arrays go to x.spare after the write
	olds := oldBuf[:0]
	ranges := false
	var lsBuf [8]*plist // the list of each posting, to publish
	ls := lsBuf[:0]
	for j, p := range ps {
		ranges = ranges || p.kind == postRange
		l, at := findPlaced(fresh, p)
		if l == nil {
			l, at = findPlaced(moved, p)
		}
		if l == nil {
			l = looked[j]
		}
		if l == nil {
			l = &plist{heads: x.spare.heads(grown(0))}
			fresh = append(fresh, placed{p, l})
			at = &fresh[len(fresh)-1]
		}
		if l.full() {
			old := l
			olds = append(olds, old)
			l = l.moved(grown(l.live), &x.pos, &x.spare, &x.ents)
			if at == nil {
				moved = append(moved, placed{p, l})
			} else {
				at.l = l
			}
			for i := range ls {
				if ls[i] == old {
					ls[i] = l // the place e's earlier posting filled moved too
				}
			}
		}
		x.pos.set(e.slot, j, l.put(e, heads[j]))
		ls = append(ls, l)
	}
	x.ents.hold(e.slot, len(ps))
	// Published once all are filled: see plist.put.
	for _, l := range ls {
		l.publish()
	}
	// The writer's way to the new and moved lists (see touchLists).
	for _, f := range fresh {
		dr.gp.noteList(f.p, f.l)
	}
	for _, m := range moved {
		dr.gp.noteList(m.p, m.l)
	}
	if ranges || len(fresh) > 0 || len(moved) > 0 {
		x.write(func(d *data) {
			g := d.groups[e.group]
			for _, f := range fresh {
				d.attach(g, f.p, f.l)
			}
			for _, m := range moved {
				d.swap(g, m.p, m.l)
			}
			for _, p := range ps {
				if p.kind == postRange {
					kp := g.byKey[p.key]
					kp.rangeSpans = addLen(kp.rangeSpans, int(p.span))
				}
			}
		})
		// A list moved only with its successor in moved or fresh, so the
		// write above has taken it out of both copies: no reader reads it.
		for _, o := range olds {
			x.spare.keep(o)
		}
	}
	if k := e.kind(); k != noDense {
		for _, d := range x.inst {
			d.groups[e.group].eligible[k]++
		}
	}
}

// findPlaced returns the list of ls, and its place in ls, that posting p
// goes to, or nil.
func findPlaced(ls []placed, p posting) (*plist, *placed) {
	for i := range ls {
		if samePlace(ls[i].p, p) {
			return ls[i].l, &ls[i]
		}
	}
	return nil, nil
}

// samePlace reports whether postings p and q go to the same list.
func samePlace(p, q posting) bool {
	return p.kind == q.kind && p.key == q.key && p.vk == q.vk && p.s == q.s && p.bucket == q.bucket
}

// leave takes e out of its postings' lists, and the lists it leaves
// empty out of both copies; lists with more dead postings than live ones
// move. mu must be held.
func (x *Index) leave(e *entry) {
	d := x.inst[1-x.side.Load()]
	g := d.groups[e.group]
	if k := e.kind(); k != noDense {
		for _, d := range x.inst {
			d.groups[e.group].eligible[k]--
		}
	}
	var psBuf [8]posting // on the stack unless e has many postings
	ps := postingsOf(e.record(), psBuf[:0])
	var moved []placed
	var oldBuf [4]*plist // lists that moved or emptied, whose arrays go to x.spare after the write
	olds := oldBuf[:0]
	var gone []posting // lists left empty
	ranges := false
	for j, p := range ps {
		ranges = ranges || p.kind == postRange
		l, at := findPlaced(moved, p)
		if l == nil {
			l = d.lookup(g, p)
		}
		place := x.pos.get(e.slot, j)
		if l.bare() {
			x.ents.drop(e) // its place will hold tombstone
		}
		if l.del(place) {
			olds = append(olds, l)
			l = l.moved(int(l.live)*2, &x.pos, &x.spare, &x.ents) // may move the entry's other postings in l
			if at == nil {
				moved = append(moved, placed{p, l})
			} else {
				at.l = l
			}
		}
		if l.live == 0 {
			if p.kind == postDirect || p.kind == postAlways {
				moved = append(moved, placed{p, newBare(0)})
			} else {
				for i := range l.written() {
					x.ents.drop(l.at(i)) // its places, all dead, go with it
				}
				gone = append(gone, p)
				olds = append(olds, l) // its array too
			}
		}
	}
	if len(ps) == 0 {
		x.ents.pending = append(x.ents.pending, e.slot)
	}
	x.pos.drop(e.slot)
	if len(gone) == 0 && len(moved) == 0 && !ranges {
		return
	}
	gp := x.pop[int(e.group)] // nil once the group has no filters in postings
	for _, m := range moved {
		gp.noteList(m.p, m.l)
	}
	for _, p := range gone {
		gp.noteList(p, nil)
	}
	x.write(func(d *data) {
		g := d.groups[e.group]
		for _, m := range moved {
			d.swap(g, m.p, m.l)
		}
		for _, p := range ps {
			if p.kind == postRange {
				kp := g.byKey[p.key]
				kp.rangeSpans = dropLen(kp.rangeSpans, int(p.span))
			}
		}
		for _, p := range gone {
			d.detach(g, p)
		}
	})
	for _, o := range olds {
		x.spare.keep(o) // out of both copies (see enter)
	}
}

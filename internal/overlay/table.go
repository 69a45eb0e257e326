package overlay

import (
	"math/bits"
	"slices"
)

// DefaultLeaves is the leaf-set size L that NewTable uses when given zero
// or less: 8 nodes on each side of self on the ring (Pastry's usual L = 16
// for b = 4).
const DefaultLeaves = 16

// Node is a member of the overlay as a table knows it: its ID and the
// address its switch serves at. Addr is opaque to this package; the caller
// dials it (S3: the overlay's hops travel on the switches' shared links).
type Node struct {
	ID   ID
	Addr string
}

// Table is one switch's routing state in the overlay (S3, Pastry): its
// own Node (self), a routing table of Digits rows × Base columns and a
// leaf set of L nodes, L/2 on each side of self on the ring. Row l, column
// d holds a node that shares exactly l digits with self and whose digit l
// is d; the column of self's own digit is always empty. The leaf set holds
// the L/2 nearest known nodes clockwise (larger IDs, wrapping at 2^128)
// and the L/2 nearest counter-clockwise; when fewer than L/2+1 nodes are
// known the two sides hold the same nodes and the leaf set covers the
// whole ring.
//
// A Table is pure state: it sends nothing and starts no goroutine; the
// caller carries the messages of join, leave and repair (see the package
// doc). A Table is not safe for concurrent use: the caller serialises
// every call, reads included (the switch holds its lock around them).
type Table struct {
	self   Node
	selfU  u128
	half   int
	rows   [Digits][Base]Node
	filled [Digits]uint16 // bit d of filled[l]: rows[l][d] holds a node
	cells  int            // filled cells in all rows
	cw     []Node         // clockwise leaves, nearest first, at most half
	ccw    []Node         // counter-clockwise leaves, nearest first, at most half
}

// NewTable returns the table of a switch whose node is self, knowing no
// other node yet (it is then the root of every key), with a leaf set of
// leaves nodes: leaves/2 on each side. leaves <= 0 means DefaultLeaves;
// an odd count is rounded up.
func NewTable(self Node, leaves int) *Table {
	if leaves <= 0 {
		leaves = DefaultLeaves
	}
	half := (leaves + 1) / 2
	return &Table{
		self:  self,
		selfU: self.ID.u(),
		half:  half,
		cw:    make([]Node, 0, half+1),
		ccw:   make([]Node, 0, half+1),
	}
}

// Self returns the table's own node.
func (t *Table) Self() Node { return t.self }

// LeafSize returns L, the leaf set's size when full (both sides).
func (t *Table) LeafSize() int { return 2 * t.half }

// Add learns of n (a join, an announcement, a repair answer): it fills n's
// routing-table cell if that cell is empty — an occupied cell keeps its
// node, as Pastry does without proximity — and puts n in the leaf set if
// it is among the L/2 nearest known nodes on a side, pushing out that
// side's farthest. A known ID takes n's Addr. Add of self is ignored. It
// reports whether the table changed. Cost: O(L).
func (t *Table) Add(n Node) bool {
	if n.ID == t.self.ID {
		return false
	}
	changed := false
	l := SharedPrefix(t.self.ID, n.ID)
	d := n.ID.Digit(l)
	switch c := &t.rows[l][d]; {
	case t.filled[l]&(1<<d) == 0:
		*c = n
		t.filled[l] |= 1 << d
		t.cells++
		changed = true
	case c.ID == n.ID && c.Addr != n.Addr:
		c.Addr = n.Addr
		changed = true
	}
	nu := n.ID.u()
	if t.addLeaf(&t.cw, n, cwDist(t.selfU, nu), true) {
		changed = true
	}
	if t.addLeaf(&t.ccw, n, cwDist(nu, t.selfU), false) {
		changed = true
	}
	return changed
}

// Clone returns a copy of t that changes independently of it.
func (t *Table) Clone() *Table {
	c := *t
	c.cw = append(make([]Node, 0, t.half+1), t.cw...)
	c.ccw = append(make([]Node, 0, t.half+1), t.ccw...)
	return &c
}

// Wants reports whether Add(n) would take n in — fill an empty cell of the
// routing table or enter the leaf set — without changing the table, so
// that a caller can make sure of n (link to it) before it routes to it.
// A node the table holds already is not wanted. Cost: O(L).
func (t *Table) Wants(n Node) bool {
	if n.ID == t.self.ID || t.holds(n.ID) {
		return false
	}
	l := SharedPrefix(t.self.ID, n.ID)
	if t.filled[l]&(1<<n.ID.Digit(l)) == 0 {
		return true
	}
	nu := n.ID.u()
	return t.wantsLeaf(t.cw, cwDist(t.selfU, nu), true) || t.wantsLeaf(t.ccw, cwDist(nu, t.selfU), false)
}

// holds reports whether id is in the routing table or the leaf set.
func (t *Table) holds(id ID) bool {
	l := SharedPrefix(t.self.ID, id)
	if c := t.rows[l][id.Digit(l)]; t.filled[l]&(1<<id.Digit(l)) != 0 && c.ID == id {
		return true
	}
	for _, side := range [2][]Node{t.cw, t.ccw} {
		for _, n := range side {
			if n.ID == id {
				return true
			}
		}
	}
	return false
}

// wantsLeaf reports whether a node at distance d from self would enter
// side (addLeaf).
func (t *Table) wantsLeaf(side []Node, d u128, clockwise bool) bool {
	if len(side) < t.half {
		return true
	}
	return d.cmp(t.sideDist(side[len(side)-1].ID.u(), clockwise)) < 0
}

// addLeaf puts n, at distance d from self, in side if it is among the
// half nearest. clockwise tells which side it is, for the distances of
// the nodes already there.
func (t *Table) addLeaf(side *[]Node, n Node, d u128, clockwise bool) bool {
	s := *side
	for i := range s {
		if s[i].ID == n.ID {
			if s[i].Addr == n.Addr {
				return false
			}
			s[i].Addr = n.Addr
			return true
		}
		if d.cmp(t.sideDist(s[i].ID.u(), clockwise)) < 0 {
			s = slices.Insert(s, i, n)
			if len(s) > t.half {
				s = s[:t.half]
			}
			*side = s
			return true
		}
	}
	if len(s) < t.half {
		*side = append(s, n)
		return true
	}
	return false
}

func (t *Table) sideDist(x u128, clockwise bool) u128 {
	if clockwise {
		return cwDist(t.selfU, x)
	}
	return cwDist(x, t.selfU)
}

// Learn adds every node of nodes (Add) and reports whether the table
// changed. nodes is not kept.
func (t *Table) Learn(nodes []Node) bool {
	changed := false
	for _, n := range nodes {
		if t.Add(n) {
			changed = true
		}
	}
	return changed
}

// Remove forgets the node id (it left, or it died): its routing-table cell
// becomes empty and it leaves the leaf set, whose side is then one short
// until the caller repairs it (RepairContacts). It reports whether the
// table held id.
func (t *Table) Remove(id ID) bool {
	if id == t.self.ID {
		return false
	}
	changed := false
	l := SharedPrefix(t.self.ID, id)
	d := id.Digit(l)
	if t.filled[l]&(1<<d) != 0 && t.rows[l][d].ID == id {
		t.rows[l][d] = Node{}
		t.filled[l] &^= 1 << d
		t.cells--
		changed = true
	}
	for _, side := range []*[]Node{&t.cw, &t.ccw} {
		if i := slices.IndexFunc(*side, func(n Node) bool { return n.ID == id }); i >= 0 {
			*side = slices.Delete(*side, i, i+1)
			changed = true
		}
	}
	return changed
}

// wholeRing reports whether the leaf set covers the whole ring: it is
// empty, or its two sides meet (they share a node), which happens when
// the table knows fewer than L/2+1 nodes.
func (t *Table) wholeRing() bool {
	if len(t.cw) == 0 && len(t.ccw) == 0 {
		return true
	}
	if len(t.cw) == 0 || len(t.ccw) == 0 {
		return false
	}
	a := cwDist(t.selfU, t.cw[len(t.cw)-1].ID.u())
	b := cwDist(t.ccw[len(t.ccw)-1].ID.u(), t.selfU)
	return addOverflows(a, b)
}

// inLeafRange reports whether key lies on the arc from the farthest
// counter-clockwise leaf to the farthest clockwise leaf, through self.
func (t *Table) inLeafRange(key u128) bool {
	if t.wholeRing() {
		return true
	}
	if len(t.cw) > 0 && cwDist(t.selfU, key).cmp(cwDist(t.selfU, t.cw[len(t.cw)-1].ID.u())) <= 0 {
		return true
	}
	if len(t.ccw) > 0 && cwDist(key, t.selfU).cmp(cwDist(t.ccw[len(t.ccw)-1].ID.u(), t.selfU)) <= 0 {
		return true
	}
	return key == t.selfU
}

// NextHop returns the node a message for key goes to next from this
// switch, by Pastry's rule (S3 rendezvous routing):
//
//  1. key within the leaf set's range: the leaf numerically closest to
//     key (Closer), or none when self is closer than every leaf;
//  2. otherwise the routing-table entry in row l = SharedPrefix(self,
//     key), column key.Digit(l): it shares at least l+1 digits with key;
//  3. otherwise (an empty cell, rare) the known node closest to key among
//     those that share at least l digits with key and are closer to key
//     than self; failing that (only while a leaf set awaits repair), the
//     known node closest to key if it is closer than self.
//
// ok is false when self is the key's root: no known node is closer to key.
// Every hop it returns either shares more digits with key than self does
// (case 2) or is strictly closer to key (cases 1, 3): the invariant the
// package doc derives loop-freedom from. It does not allocate. Cost:
// O(L) in cases 1–2, O(state) in case 3.
func (t *Table) NextHop(key ID) (next Node, ok bool) {
	k := key.u()
	if k == t.selfU {
		return Node{}, false
	}
	if t.inLeafRange(k) {
		best, found := t.self, false
		for _, side := range [2][]Node{t.cw, t.ccw} {
			for _, n := range side {
				if closer(k, n.ID.u(), best.ID.u()) {
					best, found = n, true
				}
			}
		}
		if !found {
			return Node{}, false
		}
		return best, true
	}
	l := SharedPrefix(t.self.ID, key)
	d := key.Digit(l)
	if t.filled[l]&(1<<d) != 0 {
		return t.rows[l][d], true
	}
	// Rare case: nodes sharing >= l digits with key share >= l digits
	// with self, so they are in rows l.. or in the leaf set.
	var best, fallback Node
	bestOK, fallbackOK := false, false
	consider := func(n Node) {
		nu := n.ID.u()
		if !closer(k, nu, t.selfU) {
			return
		}
		if SharedPrefix(n.ID, key) >= l && (!bestOK || closer(k, nu, best.ID.u())) {
			best, bestOK = n, true
		}
		if !fallbackOK || closer(k, nu, fallback.ID.u()) {
			fallback, fallbackOK = n, true
		}
	}
	for r := l; r < Digits; r++ {
		for m := t.filled[r]; m != 0; m &= m - 1 {
			consider(t.rows[r][bits.TrailingZeros16(m)])
		}
	}
	for _, n := range t.cw {
		consider(n)
	}
	for _, n := range t.ccw {
		consider(n)
	}
	if bestOK {
		return best, true
	}
	// Only reachable while a leaf set has a hole: with a complete leaf
	// set, the farthest leaf toward key lies between self and key, so it
	// shares l digits with key and is closer.
	for r := 0; r < l; r++ {
		for m := t.filled[r]; m != 0; m &= m - 1 {
			consider(t.rows[r][bits.TrailingZeros16(m)])
		}
	}
	return fallback, fallbackOK
}

// Root reports whether this switch is the root of key: no node it knows
// is closer to key (NextHop's ok is false). With complete leaf sets the
// root is the live switch whose ID is closest to key, and the rendezvous
// switch of an event type (S3) is the root of HashID(type name).
func (t *Table) Root(key ID) bool {
	_, ok := t.NextHop(key)
	return !ok
}

// Leaves returns the leaf set in ring order: the counter-clockwise side
// from its farthest node to its nearest, then the clockwise side from its
// nearest to its farthest; a node on both sides (a small overlay) appears
// once. The slice is new.
func (t *Table) Leaves() []Node {
	out := make([]Node, 0, len(t.ccw)+len(t.cw))
	for i := len(t.ccw) - 1; i >= 0; i-- {
		out = append(out, t.ccw[i])
	}
	for _, n := range t.cw {
		if !slices.ContainsFunc(t.ccw, func(m Node) bool { return m.ID == n.ID }) {
			out = append(out, n)
		}
	}
	return out
}

// Row returns the nodes of routing-table row i (they share exactly i
// digits with self) in column order. The slice is new. It panics when i
// is outside [0, Digits).
func (t *Table) Row(i int) []Node {
	out := make([]Node, 0, bits.OnesCount16(t.filled[i]))
	for m := t.filled[i]; m != 0; m &= m - 1 {
		out = append(out, t.rows[i][bits.TrailingZeros16(m)])
	}
	return out
}

// Nodes returns every node the table holds, routing table and leaf set,
// each once, sorted by ID (Compare); self is not included. The slice is
// new.
func (t *Table) Nodes() []Node {
	out := make([]Node, 0, t.Len())
	for r := range Digits {
		for m := t.filled[r]; m != 0; m &= m - 1 {
			out = append(out, t.rows[r][bits.TrailingZeros16(m)])
		}
	}
	out = append(out, t.cw...)
	out = append(out, t.ccw...)
	slices.SortFunc(out, func(a, b Node) int { return a.ID.Compare(b.ID) })
	return slices.CompactFunc(out, func(a, b Node) bool { return a.ID == b.ID })
}

// Len returns the number of entries the table holds — filled routing-table
// cells plus leaf-set slots, a node held in two places counting twice —
// the switch's state size, O(log N) in an overlay of N switches (about
// 15·⌈log₁₆ N⌉ + L).
func (t *Table) Len() int { return t.cells + len(t.cw) + len(t.ccw) }

// JoinRows returns what this switch contributes to the routing table of a
// newcomer whose join message it routes (Pastry join): its rows 0 through
// SharedPrefix(self, newcomer), each of them valid for the newcomer too,
// and self. Pastry takes row i from the i-th node of the route; a node
// i hops along shares at least i digits with the newcomer (usually), so
// its row i is among these. The slice is new.
func (t *Table) JoinRows(newcomer ID) []Node {
	p := min(SharedPrefix(t.self.ID, newcomer), Digits-1)
	var out []Node
	for r := 0; r <= p; r++ {
		for m := t.filled[r]; m != 0; m &= m - 1 {
			if n := t.rows[r][bits.TrailingZeros16(m)]; n.ID != newcomer {
				out = append(out, n)
			}
		}
	}
	return append(out, t.self)
}

// LeafSetFor returns the leaf set this switch hands to another node for
// the other's leaf set — the newcomer whose root it is (join), or a
// neighbour repairing its leaf set — : its leaves and self, without the
// asker. The slice is new.
func (t *Table) LeafSetFor(asker ID) []Node {
	out := slices.DeleteFunc(t.Leaves(), func(n Node) bool { return n.ID == asker })
	return append(out, t.self)
}

// RepairContacts returns the nodes to ask for their leaf sets (LeafSetFor)
// to repair this leaf set after a Remove: for each side holding fewer than
// L/2 nodes, its farthest leaf, or, when that side is empty, the nearest
// known node in that direction. A side is also short when the overlay
// holds fewer than L/2+1 nodes, so a caller asks, Learns the answers, and
// asks again only while Learn reports a change (see the package doc). The
// slice is new; nil when both sides are full.
func (t *Table) RepairContacts() []Node {
	var out []Node
	for _, clockwise := range []bool{true, false} {
		side := t.ccw
		if clockwise {
			side = t.cw
		}
		if len(side) >= t.half {
			continue
		}
		if len(side) > 0 {
			out = append(out, side[len(side)-1])
			continue
		}
		var best Node
		var bestD u128
		found := false
		for _, n := range t.Nodes() {
			d := t.sideDist(n.ID.u(), clockwise)
			if !found || d.cmp(bestD) < 0 {
				best, bestD, found = n, d, true
			}
		}
		if found {
			out = append(out, best)
		}
	}
	if len(out) == 2 && out[0].ID == out[1].ID {
		out = out[:1]
	}
	return out
}

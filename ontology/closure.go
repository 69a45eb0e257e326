package ontology

import "slices"

// interval is a closed range [lo, hi] of post-order numbers.
type interval struct{ lo, hi int32 }

// closure is the compressed transitive closure of Agrawal, Borgida and
// Jagadish (SIGMOD 1989, "Efficient management of transitive relationships
// in large data and knowledge bases"). Types are numbered in post-order over
// a spanning tree (each type's first parent is its tree parent; roots hang
// under a virtual root), so a tree subtree is one interval of post-order
// numbers. A type's interval set is its own tree interval merged with the
// interval sets of all its children in the DAG; sub is-a super exactly when
// post[sub] lies in one of super's intervals.
//
// Memory: post (4 B) + off (4 B) + one interval (8 B) = 16 bytes per type,
// plus 8 bytes per extra interval that a non-tree edge adds. A tree has
// exactly one interval per type and IsA is two comparisons; a DAG type with
// k intervals answers in O(log k).
type closure struct {
	post []int32    // post-order number of each type
	off  []int32    // type t's intervals are ivs[off[t]:off[t+1]], sorted, disjoint
	ivs  []interval // all interval sets, back to back
}

// newClosure labels the DAG given by parents (type IDs; parents[t][0] is the
// tree parent) with topo, a topological order (parents before children).
func newClosure(parents [][]int, topo []int) *closure {
	n := len(parents)
	children := make([][]int, n) // DAG children, ascending ID
	treeKids := make([][]int, n)
	var roots []int
	for t := 0; t < n; t++ {
		if len(parents[t]) == 0 {
			roots = append(roots, t)
		}
		for i, p := range parents[t] {
			children[p] = append(children[p], t)
			if i == 0 {
				treeKids[p] = append(treeKids[p], t)
			}
		}
	}
	c := &closure{post: make([]int32, n), off: make([]int32, n+1)}
	low := make([]int32, n)
	// Iterative post-order over the spanning forest.
	type frame struct{ t, next int }
	var stack []frame
	var counter int32
	for _, r := range roots {
		stack = append(stack[:0], frame{t: r})
		low[r] = counter
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next < len(treeKids[f.t]) {
				k := treeKids[f.t][f.next]
				f.next++
				low[k] = counter
				stack = append(stack, frame{t: k})
				continue
			}
			c.post[f.t] = counter
			counter++
			stack = stack[:len(stack)-1]
		}
	}
	// Interval sets, children before parents.
	sets := make([][]interval, n)
	var buf []interval
	for i := n - 1; i >= 0; i-- {
		t := topo[i]
		buf = append(buf[:0], interval{low[t], c.post[t]})
		for _, k := range children[t] {
			buf = append(buf, sets[k]...)
		}
		sets[t] = mergeIntervals(buf)
	}
	total := 0
	for _, s := range sets {
		total += len(s)
	}
	c.ivs = make([]interval, 0, total)
	for t, s := range sets {
		c.off[t] = int32(len(c.ivs))
		c.ivs = append(c.ivs, s...)
	}
	c.off[n] = int32(len(c.ivs))
	return c
}

// mergeIntervals sorts buf and merges overlapping or adjacent intervals
// (adjacent ones cover consecutive post-order numbers, so merging keeps the
// covered set). It returns a new slice.
func mergeIntervals(buf []interval) []interval {
	slices.SortFunc(buf, func(a, b interval) int { return int(a.lo) - int(b.lo) })
	out := make([]interval, 0, 1)
	for _, iv := range buf {
		if m := len(out) - 1; m >= 0 && iv.lo <= out[m].hi+1 {
			out[m].hi = max(out[m].hi, iv.hi)
			continue
		}
		out = append(out, iv)
	}
	return slices.Clip(out)
}

// isA reports whether sub is super or a descendant of it. Both must be
// valid IDs.
func (c *closure) isA(sub, super int) bool {
	p := c.post[sub]
	lo, hi := int(c.off[super]), int(c.off[super+1])
	if hi-lo == 1 {
		iv := c.ivs[lo]
		return iv.lo <= p && p <= iv.hi
	}
	// Last interval with iv.lo <= p.
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if c.ivs[m].lo <= p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo > int(c.off[super]) && p <= c.ivs[lo-1].hi
}

// pairs returns the number of (type, ancestor-or-self) pairs: the size of
// the Ancestors and Descendants tables.
func (c *closure) pairs() int {
	n := 0
	for _, iv := range c.ivs {
		n += int(iv.hi-iv.lo) + 1
	}
	return n
}

// extraIntervals returns the number of intervals beyond one per type.
func (c *closure) extraIntervals() int { return len(c.ivs) - (len(c.off) - 1) }

// descendants returns, per type, the IDs of the type and its descendants in
// ascending order, as offsets into one shared backing slice.
func (c *closure) descendants() (off []int32, ids []int) {
	n := len(c.post)
	byPost := make([]int, n)
	for t, p := range c.post {
		byPost[p] = t
	}
	off = make([]int32, n+1)
	for t := 0; t < n; t++ {
		off[t] = int32(len(ids))
		start := len(ids)
		for _, iv := range c.ivs[c.off[t]:c.off[t+1]] {
			for p := iv.lo; p <= iv.hi; p++ {
				ids = append(ids, byPost[p])
			}
		}
		slices.Sort(ids[start:])
	}
	off[n] = int32(len(ids))
	return off, slices.Clip(ids)
}

// invert turns per-type descendant lists into per-type ancestor lists (each
// including the type itself), ascending.
func invert(n int, off []int32, ids []int) ([]int32, []int) {
	count := make([]int32, n+1)
	for _, d := range ids {
		count[d+1]++
	}
	for i := 1; i <= n; i++ {
		count[i] += count[i-1]
	}
	out := make([]int, len(ids))
	fill := slices.Clone(count[:n])
	for t := 0; t < n; t++ { // ascending t, so each ancestor list ends up sorted
		for _, d := range ids[off[t]:off[t+1]] {
			out[fill[d]] = t
			fill[d]++
		}
	}
	return count, out
}

package main

// What S1 by-filter must cost on a workload, computed from the tree alone
// — the yardstick the measured counts are checked against (the test
// asserts them equal for by-filter), and the fewest event messages any
// mode that delivers exactly can send.
//
// Control. A subscription of TTL T at switch s registers its filter over
// each link of s with TTL T−1; a switch that installs a peer's filter
// with TTL t registers it over its other links with t−1, while t ≥ 1.
// Each directed link u→v keeps one route per filter (its canonical text),
// reference-counted: it sends a Register when the route is new or when a
// subscription needs a larger TTL than the one sent (Switch.Routes), and
// v acknowledges each Register once the links beyond it have (S2
// contract). So, with the subscriptions made one after another, u→v
// sends one Register each time the largest T−1−d(s, u) over the
// subscriptions with that filter on u's side of the link grows, and each
// Register costs one Ack: the model counts these.
//
// Events. With every filter reaching every switch, an event crosses link
// u→v exactly when its producer is on u's side and a subscription it
// matches is on v's: the links of the smallest subtree that joins the
// producer's switch to its consumers' switches. No mode can send fewer
// and still deliver every match.

// s1Model is the model's figures for a workload.
type s1Model struct {
	control       uint64 // control messages of the subscription phase: Registers and their Acks
	eventMessages uint64 // event messages of the publish phase: the fewest possible
}

// model computes the S1 by-filter figures of w.
func (w *workload) model() s1Model {
	var m s1Model

	// Control: sent[e][k] is the largest TTL directed link e has
	// registered filter k with (−1: none).
	type arc struct{ u, v int }
	var arcs []arc
	for i := 1; i < w.n; i++ {
		arcs = append(arcs, arc{i, w.parent[i]}, arc{w.parent[i], i})
	}
	keys := map[string]int{}
	for _, s := range w.subs {
		if _, ok := keys[s.key]; !ok {
			keys[s.key] = len(keys)
		}
	}
	sent := make([]int, len(arcs)*len(keys))
	for i := range sent {
		sent[i] = -1
	}
	dist := map[int][]int{}
	registers := uint64(0)
	for _, s := range w.subs {
		d, ok := dist[s.at]
		if !ok {
			d = w.distances(s.at)
			dist[s.at] = d
		}
		k := keys[s.key]
		for e, a := range arcs {
			if d[a.u] >= d[a.v] { // s is on v's side
				continue
			}
			ttl := w.ttl - 1 - d[a.u]
			if ttl < 0 {
				continue
			}
			if x := &sent[e*len(keys)+k]; ttl > *x {
				*x = ttl
				registers++
			}
		}
	}
	m.control = 2 * registers

	// Events: for each event, root the tree at its producer and walk up
	// from each consumer switch that wants it until a switch already
	// joined.
	wants := make([][]int, len(w.events)) // the switches of the subscriptions that want each event
	for j, evs := range w.want {
		for _, i := range evs {
			wants[i] = append(wants[i], w.subs[j].at)
		}
	}
	up := map[int][]int{} // the parent of each switch, rooted at a producer's switch
	joined := make([]int, w.n)
	for i := range joined {
		joined[i] = -1
	}
	for i := range w.events {
		root := w.producers[w.from[i]].at
		p, ok := up[root]
		if !ok {
			p = w.rootedAt(root)
			up[root] = p
		}
		joined[root] = i
		for _, at := range wants[i] {
			for x := at; joined[x] != i; x = p[x] {
				joined[x] = i
				m.eventMessages++
			}
		}
	}
	return m
}

// rootedAt returns the parent of each switch in the tree rooted at r (−1
// for r).
func (w *workload) rootedAt(r int) []int {
	p := make([]int, w.n)
	p[r] = -1
	stack := []int{r}
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, v := range w.adj[u] {
			if v != p[u] {
				p[v] = u
				stack = append(stack, v)
			}
		}
	}
	return p
}

package sion

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/ontology"
)

// The agent's network model (S2 Fig. 2, 43): the switches of the place
// and their shared links (a tree), the advertisements of their sessions
// (producers) and their subscriptions (consumers), and a model filter
// for every network filter — one per link direction, the constraint on
// what the direction's upstream switch forwards — and for every
// consumer: its session's subscriptions, adjacent to it.
//
// The optimal constraint of a direction X→Y passes exactly the events
// that some consumer on Y's side wants and some producer on X's side
// advertises: the filters of Y's side that may match an advertisement of
// X's side, less those another of them covers (filter.Covers); when they
// cover every advertisement of X's side the constraint would discard
// nothing, and the direction gets none ("{}", every event); with no such
// filter it passes nothing. A switch the agent knows only from a
// neighbour's link — one it has not heard from, as while it starts, or
// one not among its Switches — may have any consumer and any producer:
// it counts as wanting every event and advertising every type, so that
// the agent never narrows what the switch's consumers were granted.
//
// Cost: a subscription changes only the directions on the paths from
// the switches that advertise a type its filter may match to its own
// switch, each by one pass over that direction's constraint (Covers
// against each of its filters) — O(P · D · (C + N)) for P producing
// switches, paths of D links, constraints of C filters and a place of N
// switches (finding a direction's upstream advertisements looks at each
// switch once; the trees are rooted and numbered when links change, so a
// side of a link or a path costs no walk). BenchmarkAgentSubscribe: about
// 0.1 ms per subscription on 100 switches and 0.25 ms on 1,000, with
// 1,000 subscriptions held. A cancel, an advertisement or a withdrawal
// recomputes the directions on the paths it concerns from their sides:
// O(D · (N + F·C)) for F filters — an advertisement or a withdrawal also
// those leading away from its switch that pass everything, or something:
// up to O(N · (N + F·C)); a link that comes or goes recomputes every
// direction: O(N · (N + F·C)).
type agentModel struct {
	o      *ontology.Ontology
	sws    map[string]*modelSwitch
	dirs   map[dirKey]*modelFilter
	cons   map[consKey]*modelFilter
	byID   map[uint64]*modelFilter
	nextID uint64
	// The trees rooted and numbered (index), with adj.
	parent           map[string]string
	depth, tin, tout map[string]int
	adj              map[string][]string // the neighbours of each switch; nil: to build
	// compiled caches the constraints' filters by text (compile).
	compiled map[string]*filter.Filter
}

// dirKey names a link direction: what from forwards to to.
type dirKey struct{ from, to string }

// consKey names a consumer: a session of a switch.
type consKey struct {
	sw      string
	session uint64
}

// modelSwitch is a switch in the model: its links as it reported them,
// its producers and its consumers.
type modelSwitch struct {
	name      string
	connected bool // its Model has arrived and its connection is up
	links     map[string]bool
	ads       map[uint64]modelAd
	subs      map[uint64]modelSub
}

type modelAd struct {
	session uint64
	typ     string
	attrs   []linkctl.AttrDetail
}

type modelSub struct {
	session uint64
	f       *filter.Filter
}

// modelFilter is a model filter: of a link direction (a network filter)
// or of a consumer.
type modelFilter struct {
	id       uint64
	name     string // "X→Y", or "S/session n"
	dir      dirKey
	cons     consKey
	consumer bool
	want     []string // the optimal constraint, sorted (network filters)
	deployed []string // the constraint the network filter has, as far as the agent knows
	// sent: a Deploy carrying this network filter went to its switch
	// after the switch's last report of it (Model, link up) was applied.
	// Such a Deploy and the report cross: the switch may have installed
	// it after the report, so the report does not tell what it has.
	sent bool
	// unsure: deployed may not be what the switch has (see sent); the
	// next deployment sends want even if it equals deployed.
	unsure bool
}

// passAll is the constraint of a direction where nothing would be
// discarded: no constraint.
var passAll = filter.MustCompile("{}").String()

func newAgentModel(o *ontology.Ontology) *agentModel {
	return &agentModel{o: o, compiled: map[string]*filter.Filter{}, sws: map[string]*modelSwitch{}, dirs: map[dirKey]*modelFilter{}, cons: map[consKey]*modelFilter{}, byID: map[uint64]*modelFilter{}}
}

// sw returns switch name, adding it if new.
func (md *agentModel) sw(name string) *modelSwitch {
	s := md.sws[name]
	if s == nil {
		s = &modelSwitch{name: name, links: map[string]bool{}, ads: map[uint64]modelAd{}, subs: map[uint64]modelSub{}}
		md.sws[name] = s
	}
	return s
}

// linked reports whether a and b are linked: either has reported it and
// is connected to the agent. What a switch whose connection has ended
// reported is not current — it may have died, and its links with it —
// so its links count only as far as its neighbours report them.
func (md *agentModel) linked(a, b string) bool {
	sa, sb := md.sws[a], md.sws[b]
	return sa != nil && sa.connected && sa.links[b] || sb != nil && sb.connected && sb.links[a]
}

// adjacency returns every switch's neighbours, sorted, for walks: built
// in O(N + links) after the links changed (linksChanged), else kept.
func (md *agentModel) adjacency() map[string][]string {
	if md.adj != nil {
		return md.adj
	}
	sets := map[string]map[string]bool{}
	add := func(a, b string) {
		if sets[a] == nil {
			sets[a] = map[string]bool{}
		}
		sets[a][b] = true
	}
	for name, s := range md.sws {
		if sets[name] == nil {
			sets[name] = map[string]bool{}
		}
		for p := range s.links {
			if md.linked(name, p) {
				add(name, p)
				add(p, name)
			}
		}
	}
	md.adj = map[string][]string{}
	for name, set := range sets {
		md.adj[name] = slices.Sorted(maps.Keys(set))
	}
	md.index(md.adj)
	return md.adj
}

// index roots each tree of the model at its least name and numbers its
// switches depth first (tin, tout), so that which side of a link a switch
// is on, and the path between two switches, take no walk of the tree.
func (md *agentModel) index(adj map[string][]string) {
	md.parent, md.depth, md.tin, md.tout = map[string]string{}, map[string]int{}, map[string]int{}, map[string]int{}
	clock := 0
	type frame struct {
		n    string
		next int
	}
	for _, root := range slices.Sorted(maps.Keys(adj)) {
		if _, seen := md.tin[root]; seen {
			continue
		}
		md.tin[root], md.depth[root] = clock, 0
		clock++
		stack := []frame{{n: root}}
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(adj[top.n]) {
				md.tout[top.n] = clock - 1
				stack = stack[:len(stack)-1]
				continue
			}
			c := adj[top.n][top.next]
			top.next++
			if _, seen := md.tin[c]; seen {
				continue // the parent (the model is a forest: links form trees)
			}
			md.parent[c], md.depth[c], md.tin[c] = top.n, md.depth[top.n]+1, clock
			clock++
			stack = append(stack, frame{n: c})
		}
	}
}

// under reports whether switch n is in the subtree of switch r.
func (md *agentModel) under(n, r string) bool {
	tn, ok := md.tin[n]
	return ok && md.tin[r] <= tn && tn <= md.tout[r]
}

// onSideOf reports whether switch n is on to's side of the link from–to.
func (md *agentModel) onSideOf(n, from, to string) bool {
	if md.parent[to] == from {
		return md.under(n, to)
	}
	return md.under(n, md.root(to)) && !md.under(n, from)
}

// root returns the root of n's tree.
func (md *agentModel) root(n string) string {
	for p, ok := md.parent[n]; ok; p, ok = md.parent[n] {
		n = p
	}
	return n
}

// linksChanged forgets the adjacency, after a switch's links changed.
func (md *agentModel) linksChanged() { md.adj = nil }

// path returns the directions from switch a to switch b, in order; nil
// when a == b or they are in different trees. adj must be the model's
// adjacency (its trees are indexed with it).
func (md *agentModel) path(a, b string) []dirKey {
	if a == b || md.root(a) != md.root(b) {
		return nil
	}
	var up, down []dirKey
	for x, y := a, b; x != y; {
		if md.depth[x] >= md.depth[y] {
			up = append(up, dirKey{x, md.parent[x]})
			x = md.parent[x]
		} else {
			down = append(down, dirKey{md.parent[y], y})
			y = md.parent[y]
		}
	}
	slices.Reverse(down)
	return append(up, down...)
}

// dir returns the model filter of direction d, adding it if new.
func (md *agentModel) dir(d dirKey) *modelFilter {
	mf := md.dirs[d]
	if mf == nil {
		md.nextID++
		mf = &modelFilter{id: md.nextID, name: d.from + "→" + d.to, dir: d}
		md.dirs[d] = mf
		md.byID[mf.id] = mf
	}
	return mf
}

// consumer returns the model filter of consumer c, session name of its
// switch, adding it if new. It is named "S/name", or "S/session n" when
// the session has no name or shares it with another consumer of S.
func (md *agentModel) consumer(c consKey, name string) *modelFilter {
	mf := md.cons[c]
	if mf == nil {
		md.nextID++
		label := c.sw + "/" + name
		for o := range md.cons {
			if name == "" || o.sw == c.sw && md.cons[o].name == label {
				label = fmt.Sprintf("%s/session %d", c.sw, c.session)
				break
			}
		}
		mf = &modelFilter{id: md.nextID, name: label, cons: c, consumer: true}
		md.cons[c] = mf
		md.byID[mf.id] = mf
	}
	return mf
}

// forget forgets consumer c's model filter when its session has no
// subscription left. Never while a deployment is in flight.
func (md *agentModel) forget(c consKey) {
	mf := md.cons[c]
	if mf == nil {
		return
	}
	if s := md.sws[c.sw]; s != nil {
		for _, sub := range s.subs {
			if sub.session == c.session {
				return
			}
		}
	}
	delete(md.cons, c)
	delete(md.byID, mf.id)
}

// forgetIdle forgets the model filters of switch sw's consumers whose
// sessions have no subscription left.
func (md *agentModel) forgetIdle(sw string) {
	live := map[uint64]bool{}
	if s := md.sws[sw]; s != nil {
		for _, sub := range s.subs {
			live[sub.session] = true
		}
	}
	for c, mf := range md.cons {
		if c.sw == sw && !live[c.session] {
			delete(md.cons, c)
			delete(md.byID, mf.id)
		}
	}
}

// filterOverlaps reports whether an event may be both of a type a filter
// on ft matches and of advertised type at: "*" overlaps every type that
// is not reserved; others, when they share a descendant (typesOverlap).
func filterOverlaps(o *ontology.Ontology, ft, at string) bool {
	if ft == filter.AnyType {
		return !ontology.IsReserved(at)
	}
	if at == filter.AnyType {
		return !ontology.IsReserved(ft)
	}
	f, ok1 := o.Lookup(ft)
	a, ok2 := o.Lookup(at)
	return ok1 && ok2 && typesOverlap(o, f.ID, a.ID)
}

// adFilter returns the filter on every event of advertised type t.
func (md *agentModel) adFilter(t string) *filter.Filter {
	if t == filter.AnyType {
		return anyEvent
	}
	return md.compile(typeFilter(t))
}

// anyEvent matches every event; unknownAd stands for what a switch the
// agent has not heard from may advertise: every type.
var (
	anyEvent  = filter.MustCompile("{}")
	unknownAd = modelAd{typ: filter.AnyType}
)

// compile returns the filter of canonical text, compiled once: the
// constraints are kept as texts and compared as such.
func (md *agentModel) compile(text string) *filter.Filter {
	if f, ok := md.compiled[text]; ok {
		return f
	}
	f, err := filter.Compile(text)
	if err != nil {
		return nil
	}
	if len(md.compiled) >= maxCompiled {
		clear(md.compiled)
	}
	md.compiled[text] = f
	return f
}

// maxCompiled bounds the agent's cache of compiled constraint filters.
const maxCompiled = 1 << 16

// optimal computes the optimal constraint of direction d from its sides
// (the model's adjacency and index must be current: adjacency()).
func (md *agentModel) optimal(d dirKey) []string {
	ups := md.upstreamAds(d)
	if len(ups) == 0 {
		return nil
	}
	var set []*filter.Filter
	for _, n := range slices.Sorted(maps.Keys(md.adj)) {
		if !md.onSideOf(n, d.from, d.to) {
			continue
		}
		s := md.sws[n]
		if s == nil { // not heard from: it may want anything
			set = md.insert(set, anyEvent)
			continue
		}
		for _, k := range sortedKeys(s.subs) {
			if f := s.subs[k].f; md.wanted(f, ups) {
				set = md.insert(set, f)
			}
		}
	}
	return md.finish(set, ups)
}

// wanted reports whether filter f may match an event of one of ads.
func (md *agentModel) wanted(f *filter.Filter, ads []modelAd) bool {
	for _, a := range ads {
		if filterOverlaps(md.o, f.Type(), a.typ) {
			return true
		}
	}
	return false
}

// insert adds f to constraint set unless one of it covers f, taking out
// the filters f covers.
func (md *agentModel) insert(set []*filter.Filter, f *filter.Filter) []*filter.Filter {
	for _, g := range set {
		if filter.Covers(md.o, g, f) {
			return set
		}
	}
	set = slices.DeleteFunc(set, func(g *filter.Filter) bool { return filter.Covers(md.o, f, g) })
	return append(set, f)
}

// finish returns constraint set as texts, sorted: none when it covers
// every advertisement upstream (nothing would be discarded).
func (md *agentModel) finish(set []*filter.Filter, ups []modelAd) []string {
	if len(set) == 0 {
		return nil
	}
	all := true
	for _, a := range ups {
		af := md.adFilter(a.typ)
		if !slices.ContainsFunc(set, func(g *filter.Filter) bool { return filter.Covers(md.o, g, af) }) {
			all = false
			break
		}
	}
	if all {
		return []string{passAll}
	}
	out := make([]string, len(set))
	for i, f := range set {
		out[i] = f.String()
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// upstreamAds returns the advertisements on from's side of direction d
// (unknownAd for a switch not heard from).
func (md *agentModel) upstreamAds(d dirKey) []modelAd {
	var ups []modelAd
	for n := range md.adj {
		if !md.onSideOf(n, d.to, d.from) {
			continue
		}
		s := md.sws[n]
		if s == nil {
			ups = append(ups, unknownAd)
			continue
		}
		for _, a := range s.ads {
			ups = append(ups, a)
		}
	}
	return ups
}

// unknown returns the switches of adj the agent has not heard from.
func (md *agentModel) unknown(adj map[string][]string) []string {
	var out []string
	for name := range adj {
		if md.sws[name] == nil {
			out = append(out, name)
		}
	}
	return out
}

// producersOf returns the switches with an advertisement filter f may
// match, and those not heard from, sorted.
func (md *agentModel) producersOf(adj map[string][]string, f *filter.Filter) []string {
	out := md.unknown(adj)
	for name, s := range md.sws {
		for _, a := range s.ads {
			if filterOverlaps(md.o, f.Type(), a.typ) {
				out = append(out, name)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// consumersOf returns the switches with a subscription that may match an
// event of advertised type t, and those not heard from, sorted.
func (md *agentModel) consumersOf(adj map[string][]string, t string) []string {
	out := md.unknown(adj)
	for name, s := range md.sws {
		for _, sub := range s.subs {
			if filterOverlaps(md.o, sub.f.Type(), t) {
				out = append(out, name)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// addSub enters subscription f of consumer c into the model and updates
// the constraints on the paths from its producers incrementally; it
// returns the directions whose optimal constraint changed.
func (md *agentModel) addSub(adj map[string][]string, c consKey, name string, key uint64, f *filter.Filter) []dirKey {
	md.sw(c.sw).subs[key] = modelSub{session: c.session, f: f}
	md.consumer(c, name)
	var changed []dirKey
	seen := map[dirKey]bool{}
	for _, p := range md.producersOf(adj, f) {
		for _, d := range md.path(p, c.sw) {
			if seen[d] {
				continue
			}
			seen[d] = true
			mf := md.dir(d)
			if slices.Equal(mf.want, []string{passAll}) {
				continue
			}
			set := md.compileAll(mf.want)
			set = md.insert(set, f)
			want := md.finish(set, md.upstreamAds(d))
			if !slices.Equal(want, mf.want) {
				mf.want = want
				changed = append(changed, d)
			}
		}
	}
	return changed
}

// recompute recomputes the optimal constraints of directions ds from
// their sides and returns those that changed.
func (md *agentModel) recompute(adj map[string][]string, ds []dirKey) []dirKey {
	var changed []dirKey
	seen := map[dirKey]bool{}
	for _, d := range ds {
		if seen[d] {
			continue
		}
		seen[d] = true
		mf := md.dir(d)
		if want := md.optimal(d); !slices.Equal(want, mf.want) {
			mf.want = want
			changed = append(changed, d)
		}
	}
	return changed
}

// awayFrom returns the directions that lead away from switch p (X→Y
// with Y farther from p than X) whose optimal constraint keep accepts.
func (md *agentModel) awayFrom(adj map[string][]string, p string, keep func(want []string) bool) []dirKey {
	var out []dirKey
	seen := map[string]bool{p: true}
	for q := []string{p}; len(q) > 0; q = q[1:] {
		for _, n := range adj[q[0]] {
			if !seen[n] {
				seen[n] = true
				q = append(q, n)
				if mf := md.dirs[dirKey{q[0], n}]; mf != nil && keep(mf.want) {
					out = append(out, mf.dir)
				}
			}
		}
	}
	return out
}

// pathsBetween returns the directions on the paths from each of froms
// to each of tos.
func (md *agentModel) pathsBetween(froms, tos []string) []dirKey {
	var out []dirKey
	for _, a := range froms {
		for _, b := range tos {
			out = append(out, md.path(a, b)...)
		}
	}
	return out
}

// allDirs returns every link direction of the model, sorted; and it
// forgets the model filters of directions whose link is gone.
func (md *agentModel) allDirs(adj map[string][]string) []dirKey {
	var out []dirKey
	for a, ns := range adj {
		for _, b := range ns {
			out = append(out, dirKey{a, b})
		}
	}
	for d, mf := range md.dirs {
		if !md.linked(d.from, d.to) {
			delete(md.dirs, d)
			delete(md.byID, mf.id)
		}
	}
	slices.SortFunc(out, func(x, y dirKey) int { return cmp.Or(cmp.Compare(x.from, y.from), cmp.Compare(x.to, y.to)) })
	return out
}

// downstream returns the model filters downstream of mf (S2 procedure A,
// step 61), in ID order: for a network filter X→Y, every direction on
// Y's side that leads away from X, and every consumer filter there; none
// for a consumer filter.
func (md *agentModel) downstream(adj map[string][]string, mf *modelFilter) []*modelFilter {
	if mf.consumer {
		return nil
	}
	dist := map[string]int{mf.dir.to: 0}
	order := []string{mf.dir.to}
	for i := 0; i < len(order); i++ {
		for _, n := range adj[order[i]] {
			if _, ok := dist[n]; !ok && n != mf.dir.from {
				dist[n] = dist[order[i]] + 1
				order = append(order, n)
			}
		}
	}
	var out []*modelFilter
	for _, u := range order {
		for _, v := range adj[u] {
			if dv, ok := dist[v]; ok && dv == dist[u]+1 {
				out = append(out, md.dir(dirKey{u, v}))
			}
		}
	}
	for c, cf := range md.cons {
		if _, ok := dist[c.sw]; ok {
			out = append(out, cf)
		}
	}
	slices.SortFunc(out, func(a, b *modelFilter) int { return cmp.Compare(a.id, b.id) })
	return out
}

// covers reports whether constraint old passes every event constraint
// new does (filter.Covers: sound, not complete).
func (md *agentModel) covers(old, new []string) bool {
	olds := md.compileAll(old)
	for _, f := range md.compileAll(new) {
		if !slices.ContainsFunc(olds, func(g *filter.Filter) bool { return filter.Covers(md.o, g, f) }) {
			return false
		}
	}
	return true
}

func (md *agentModel) compileAll(texts []string) []*filter.Filter {
	out := make([]*filter.Filter, 0, len(texts))
	for _, t := range texts {
		if f := md.compile(t); f != nil {
			out = append(out, f)
		}
	}
	return out
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

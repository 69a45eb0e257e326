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
// against each of its filters) — O(P · D · C) for P producing switches,
// paths of D links and constraints of C filters, plus O(N) to find the
// paths in a place of N switches. A cancel, an advertisement or a
// withdrawal recomputes the directions on the paths it concerns from
// their sides: O(D · (N + F·C)) for F filters — an advertisement or a
// withdrawal also those leading away from its switch that pass
// everything, or something: up to O(N · (N + F·C)); a link that comes or
// goes recomputes every direction: O(N · (N + F·C)).
type agentModel struct {
	o      *ontology.Ontology
	sws    map[string]*modelSwitch
	dirs   map[dirKey]*modelFilter
	cons   map[consKey]*modelFilter
	byID   map[uint64]*modelFilter
	nextID uint64
	adj    map[string][]string // the neighbours of each switch; nil: to build
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
}

// passAll is the constraint of a direction where nothing would be
// discarded: no constraint.
var passAll = filter.MustCompile("{}").String()

func newAgentModel(o *ontology.Ontology) *agentModel {
	return &agentModel{o: o, sws: map[string]*modelSwitch{}, dirs: map[dirKey]*modelFilter{}, cons: map[consKey]*modelFilter{}, byID: map[uint64]*modelFilter{}}
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
	return md.adj
}

// linksChanged forgets the adjacency, after a switch's links changed.
func (md *agentModel) linksChanged() { md.adj = nil }

// side returns the switches reachable from to without crossing the link
// to from (to's side of the link from→to), to first.
func side(adj map[string][]string, from, to string) []string {
	seen := map[string]bool{from: true, to: true}
	out := []string{to}
	for i := 0; i < len(out); i++ {
		for _, n := range adj[out[i]] {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// path returns the directions from switch a to switch b, in order; nil
// when a == b or b cannot be reached.
func path(adj map[string][]string, a, b string) []dirKey {
	prev := map[string]string{a: ""}
	q := []string{a}
	for i := 0; i < len(q) && q[i] != b; i++ {
		for _, n := range adj[q[i]] {
			if _, ok := prev[n]; !ok {
				prev[n] = q[i]
				q = append(q, n)
			}
		}
	}
	if _, ok := prev[b]; !ok || a == b {
		return nil
	}
	var out []dirKey
	for n := b; n != a; n = prev[n] {
		out = append(out, dirKey{prev[n], n})
	}
	slices.Reverse(out)
	return out
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
func adFilter(t string) *filter.Filter {
	if t == filter.AnyType {
		return anyEvent
	}
	return typeOnly(t)
}

// anyEvent matches every event; unknownAd stands for what a switch the
// agent has not heard from may advertise: every type.
var (
	anyEvent  = filter.MustCompile("{}")
	unknownAd = modelAd{typ: filter.AnyType}
)

// optimal computes the optimal constraint of direction d from its sides.
func (md *agentModel) optimal(adj map[string][]string, d dirKey) []string {
	ups := md.upstreamAds(adj, d)
	if len(ups) == 0 {
		return nil
	}
	var set []*filter.Filter
	for _, n := range side(adj, d.from, d.to) {
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
		af := adFilter(a.typ)
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
func (md *agentModel) upstreamAds(adj map[string][]string, d dirKey) []modelAd {
	var ups []modelAd
	for _, n := range side(adj, d.to, d.from) {
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
		for _, d := range path(adj, p, c.sw) {
			if seen[d] {
				continue
			}
			seen[d] = true
			mf := md.dir(d)
			if slices.Equal(mf.want, []string{passAll}) {
				continue
			}
			set := compileAll(mf.want)
			set = md.insert(set, f)
			want := md.finish(set, md.upstreamAds(adj, d))
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
		if want := md.optimal(adj, d); !slices.Equal(want, mf.want) {
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
func pathsBetween(adj map[string][]string, froms, tos []string) []dirKey {
	var out []dirKey
	for _, a := range froms {
		for _, b := range tos {
			out = append(out, path(adj, a, b)...)
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
	olds := compileAll(old)
	for _, f := range compileAll(new) {
		if !slices.ContainsFunc(olds, func(g *filter.Filter) bool { return filter.Covers(md.o, g, f) }) {
			return false
		}
	}
	return true
}

func compileAll(texts []string) []*filter.Filter {
	out := make([]*filter.Filter, 0, len(texts))
	for _, t := range texts {
		if f, err := filter.Compile(t); err == nil {
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

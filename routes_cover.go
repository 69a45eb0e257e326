package sion

import (
	"cmp"
	"slices"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
)

// Covering over a shared link (PlaceConfig.Covering; DESIGN.md "Network":
// "a filter implied by one already propagated is not propagated", beyond
// S1; issue 17 item 4). A router's table of routes holds, besides S1's
// reference counts, which registered route each covered route is counted
// under:
//
//   - a route is registered (a Register went to the peer: sent >= 0, cover
//     nil), covered (cover set, nothing sent), or neither (its register
//     did not fit the link's frames);
//   - a covering route is registered itself: covering has one level, so a
//     route that goes needs only its own covered routes re-homed;
//   - a route covers another when both keys have the same places, its TTL
//     at the peer is at least the other's largest, and filter.Covers says
//     so over the place's ontology. filter.Covers is sound (every event
//     the covered filter matches, the covering one matches), so a proxy
//     filter for the covering key at the peer — and, hop by hop, the keys
//     it propagates there within its TTL — forwards every event a proxy
//     filter for the covered key would;
//   - registered routes are indexed by places, event type and whether the
//     filter is a whole type (match all, no predicates: it covers every
//     filter on its type and below), so that a key is tested only against
//     filters on its own type, its ancestors and "*", whole types first.
//     Cost per key registered, or re-homed when its cover goes: two map
//     lookups per ancestor of its type (and "*"), and at most
//     maxCoverChecks candidates, each a TTL test and a filter.Covers call;
//     a register or release otherwise costs what it did (unindex is O(1),
//     re-homing sorts the covered routes: O(k log k) for k of them).
//
// Nothing is released in favour of a broader key that arrives later: a
// registered route stays registered until its subscriptions are gone.

// maxCoverChecks bounds the candidates examined for one key (each a TTL
// test and a filter.Covers call): past it the key is registered itself,
// which is sound and only costs a register.
const maxCoverChecks = 64

// anyTypeSlot is coverSlot.typ for filters on "*".
const anyTypeSlot = -1

// coverSlot is where a registered route waits to cover others.
type coverSlot struct {
	places string // the key's places (routeKey.places)
	typ    int    // the ID of the filter's event type in the place's ontology; anyTypeSlot for "*"
	whole  bool   // the filter is match all without predicates
}

// registerCovering is register under PlaceConfig.Covering: it counts one
// more subscription needing key at the peer with ttl, and on 0→1 counts
// the key under a registered route that covers it with at least its TTL,
// or else registers it. A covered key that needs more TTL than its cover
// was registered with leaves it (and is re-homed); a registered one is
// registered again with a larger TTL, as register does. It returns the
// acknowledgement the subscription's contract waits on: of the register
// it caused, of the last one, or its cover's last one.
func (r *router) registerCovering(key routeKey, ttl int) *linkAck {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return closedAck(r.peer)
	}
	rt := r.routes[key]
	if rt == nil {
		rt = r.newRoute(key)
		r.compileRoute(rt)
	}
	rt.refs++
	rt.ttls[ttl]++
	switch {
	case rt.cover != nil && ttl <= rt.cover.sent:
		return rt.cover.last
	case rt.cover != nil: // it needs more than its cover reaches
		r.uncover(rt)
		return r.home(rt)
	case rt.sent < 0: // new, or its register did not fit the link
		return r.home(rt)
	case ttl > rt.sent:
		return r.registerAt(rt, ttl)
	}
	return rt.last
}

// releaseCovering is release under PlaceConfig.Covering: it counts one
// subscription fewer needing key with ttl, and on 1→0 takes the key out
// — a covered one silently; a registered one after re-homing the routes
// counted under it, and then with a Release.
func (r *router) releaseCovering(key routeKey, ttl int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.unref(key, ttl)
	if rt == nil {
		return
	}
	if rt.cover != nil {
		r.uncover(rt)
		return
	}
	if rt.sent < 0 {
		return // the peer never had it
	}
	r.unindex(rt)
	// Make before break. Each route counted under rt is re-homed first:
	// put under another registered route that covers it — one the peer
	// has had all along — or registered itself, its Register queued
	// here, before rt's Release. The link is one ordered stream and the
	// peer's reader handles its messages one at a time, in order: it
	// installs a registered key's proxy filter in its index and
	// propagates it over its own links (queued there) before it reads
	// the next message, and it removes rt's proxy filter only at the
	// Release. So at the peer the covered filter's proxy is active before
	// the covering one goes, and an event that reaches the peer matches
	// one of the two whenever it matches the covered filter (the router's
	// session fires once per event, so not twice). Hop by hop it is the
	// same: the peer counted the covered key under its own route for rt's
	// key, or registered it, and the Release of rt's key there re-homes it
	// before releasing further. Its TTL is what it needs, so it reaches
	// every switch its subscriptions need.
	for _, c := range rt.coveredInOrder() {
		c.cover = nil
		r.nCover--
		r.home(c)
	}
	rt.covered = nil
	r.sendControl(&linkctl.Release{Key: rt.id})
}

// home counts rt, which is neither registered nor covered, under a
// registered route that covers it with the TTL it needs, or registers it
// with that TTL. It returns the acknowledgement rt's subscriptions wait
// on. mu must be held.
func (r *router) home(rt *route) *linkAck {
	need := rt.need()
	if c := r.coverOf(rt, need); c != nil {
		rt.cover = c
		if c.covered == nil {
			c.covered = map[*route]struct{}{}
		}
		c.covered[rt] = struct{}{}
		r.nCover++
		return c.last
	}
	a := r.registerAt(rt, need)
	if rt.sent >= 0 {
		r.index(rt)
	}
	return a
}

// uncover takes covered route rt out from under its cover. mu must be
// held.
func (r *router) uncover(rt *route) {
	delete(rt.cover.covered, rt)
	rt.cover = nil
	r.nCover--
}

// coverOf returns a registered route that covers rt with at least TTL
// need and whose register the peer has not refused, or nil: whole types
// on rt's type, its ancestors and "*" first, then the rest; at most
// maxCoverChecks candidates. mu must be held.
func (r *router) coverOf(rt *route, need int) *route {
	if rt.f == nil {
		return nil
	}
	o := r.sw.place.Ontology()
	var types []int
	if rt.slot.typ != anyTypeSlot {
		types = o.Ancestors(rt.slot.typ) // rt's type included
	}
	checks := 0
	for _, whole := range []bool{true, false} {
		for i := len(types); i >= 0; i-- { // "*" first, then from the largest type ID
			s := coverSlot{places: rt.key.places, typ: anyTypeSlot, whole: whole}
			if i < len(types) {
				s.typ = types[i]
			}
			for _, c := range r.covers[s] {
				if checks == maxCoverChecks {
					return nil
				}
				checks++
				if c.sent >= need && !c.refused() && filter.Covers(o, c.f, rt.f) {
					return c
				}
			}
		}
	}
	return nil
}

// compileRoute compiles and resolves rt's filter once, for covering, and
// finds its slot. A key that does not compile or resolve here takes no
// part in covering: it is registered as it is (and the peer says why it
// cannot take it). mu must be held.
func (r *router) compileRoute(rt *route) {
	f, err := filter.Compile(rt.key.filter)
	if err != nil {
		return
	}
	o := r.sw.place.Ontology()
	if f, err = filter.Resolve(o, f); err != nil {
		return
	}
	s := coverSlot{places: rt.key.places, typ: anyTypeSlot, whole: f.Mode() == filter.ModeAll && len(f.Predicates()) == 0}
	if t := f.Type(); t != filter.AnyType {
		et, ok := o.Lookup(t)
		if !ok {
			return
		}
		s.typ = et.ID
	}
	rt.f, rt.slot = f, s
}

// index puts registered route rt where coverOf finds it. mu must be held.
func (r *router) index(rt *route) {
	if rt.f == nil || rt.pos >= 0 {
		return
	}
	if r.covers == nil {
		r.covers = map[coverSlot][]*route{}
	}
	rt.pos = len(r.covers[rt.slot])
	r.covers[rt.slot] = append(r.covers[rt.slot], rt)
}

// unindex takes rt out of the index in O(1). mu must be held.
func (r *router) unindex(rt *route) {
	if rt.pos < 0 {
		return
	}
	b := r.covers[rt.slot]
	last := len(b) - 1
	b[rt.pos] = b[last]
	b[rt.pos].pos = rt.pos
	b[last] = nil
	if last == 0 {
		delete(r.covers, rt.slot)
	} else {
		r.covers[rt.slot] = b[:last]
	}
	rt.pos = -1
}

// need returns the largest TTL rt's subscriptions need at the peer.
func (rt *route) need() int {
	n := -1
	for ttl := range rt.ttls {
		n = max(n, ttl)
	}
	return n
}

// refused reports whether the peer has refused rt's last register (a
// route the peer has not installed covers nothing).
func (rt *route) refused() bool {
	return rt.last != nil && chanClosed(rt.last.done) && rt.last.err != nil
}

// coveredInOrder returns the routes counted under rt, oldest first.
func (rt *route) coveredInOrder() []*route {
	out := make([]*route, 0, len(rt.covered))
	for c := range rt.covered {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *route) int { return cmp.Compare(a.id, b.id) })
	return out
}

// ack returns the acknowledgement rt's subscriptions wait on: its cover's
// while it is covered. mu must be held.
func (rt *route) ack() *linkAck {
	if rt.cover != nil {
		return rt.cover.last
	}
	return rt.last
}

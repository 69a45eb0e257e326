package sion

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/overlay"
	"github.com/sion-go/sion/internal/traffic"
	"github.com/sion-go/sion/ontology"
)

// The bypass of a rendezvous switch (S3 load distribution). A rendezvous
// switch R whose load exceeds RendezvousConfig.Threshold picks its
// hottest event class (at the configured level) and, when every event of
// that class enters R over one link (u1) and leaves it over one other
// (d1), with no local session of R publishing or wanting it:
//
//  1. sends PathChange downstream over d1; each switch passes it on while
//     its request table has exactly one next hop for the class (a link,
//     no local subscription) and otherwise is the branch point B, which
//     answers BranchPoint back along the path;
//  2. sends PathChange upstream over u1 with B's ID and address; each
//     switch passes it on while its advertisement table has exactly one
//     source for the class (a link, no local publisher) and otherwise is
//     the merge point M, which links to B (a direct overlay link, made if
//     there is none), installs the class's filter on that link and, in one
//     step, sends the class's events only over it — "rewrites its next hop
//     for the class to the branch point" — then tells B (a downstream
//     PathChange naming B itself) and answers BranchPoint back to R.
//
// B, for its part, keeps the class's events from going up toward R. Each
// event reads the switch's bypass rules once (bypassTable), after its
// match and before it leaves the switch's matching (rvSwitch.matched),
// and its links follow the rules and the filters it matched together, so
// it goes either the old way or the new one: none is lost or duplicated
// while paths change; events in flight on the old path may arrive after
// later ones on the new. The merge point changes its rules and its filter
// index (the bypass link's filter) in an order that keeps the two in
// step for every event:
//
//   - rules first, then the index, when the event that matched the new
//     index must read the new rules: the bypass filter is known (and
//     ignored) before it is installed, and the class goes toward R again
//     before the filter is removed — an event reads its rules after its
//     match;
//   - the index, then Switch.matching's wait, then the rules, when the
//     event that reads the new rules must have matched the new index: the
//     class goes only over the bypass link once its filter is installed,
//     and the filter stops being ignored once it is removed — the wait
//     lets go every event that matched before, having read its rules.
//
// A bypass ends (BypassEnd, along the same switches, the merge point
// turning back) when a subscription that may want the class appears off
// the path between R and B or at R — R or the switch on the path
// acknowledges that subscription only once M has turned back, so its
// contract holds —, when the class's rate at M falls below
// RendezvousConfig.Release, when B has no subscriber of the class left, or
// when a link of the path ends. Beyond S3, a class that no subscriber
// wants at all is kept at its merge point (a bypass to nowhere) until one
// does.

// bypassTable is a switch's bypass rules, replaced whole on each change
// (an event reads one version).
type bypassTable struct {
	classes map[linkctl.ClassRef]bypassRule
	levels  map[string][2]string // per event type with rules: its level-2 and level-3 attributes
	proxies map[*Subscription]bool
}

// bypassRule is what a switch does with the events of a bypassed class:
// at a merge point send them only over link only, or, with drop, over no
// overlay link (no subscriber wants them); at a branch point never over
// link never.
type bypassRule struct {
	only, never *router
	drop        bool
}

// lookup returns the rule for e's class, if any.
func (t *bypassTable) lookup(e *Event) (bypassRule, bool) {
	lv, ok := t.levels[e.Type]
	if !ok {
		return bypassRule{}, false
	}
	for i, attr := range lv {
		if attr == "" {
			continue
		}
		v, ok := e.Value(attr)
		if !ok {
			continue
		}
		c := linkctl.ClassRef{Level: byte(i + 2), Type: e.Type, Attr: attr, Value: classValue(v)}
		if rule, ok := t.classes[c]; ok {
			return rule, true
		}
	}
	return bypassRule{}, false
}

// allows reports whether e may cross link r given the switch's bypass
// rules as e read them when it was matched (shared.bypass, matched), and
// the proxy filters hits it matched there.
func (s *rvSwitch) allows(r *router, e *Event, hits []hitSub, shared *eventFrames) bool {
	t := shared.bypass
	if t == nil {
		for _, h := range hits {
			if h.sub.f.Type() == e.Type {
				return true
			}
		}
		return false
	}
	if rule, ok := t.lookup(e); ok {
		switch {
		case rule.drop:
			return false
		case rule.only != nil:
			if r == rule.only {
				s.meterBypassed(e)
				return true
			}
			return false
		case rule.never == r:
			return false
		}
	}
	for _, h := range hits {
		if h.sub.f.Type() == e.Type && !t.proxies[h.sub] {
			return true
		}
	}
	return false
}

// meterBypassed counts e, which this merge point sends over a bypass, in
// the traffic of its classes (RendezvousConfig.Release).
func (s *rvSwitch) meterBypassed(e *Event) {
	var buf [3]traffic.Class
	s.bypassMeter.Record(s.now(), classesOf(s.rv.levels(s.sw.place.Ontology(), e.Type), e, &buf)...)
}

// classOf names a class at a level: the type and the value of the
// level's attribute.
type classOf struct {
	ref linkctl.ClassRef
	val ontology.Value
}

// bypass roles a switch keeps, by class.

// rvRole is a rendezvous switch's record of a bypass of one of its
// classes.
type rvRole struct {
	class    classOf
	seq      uint64
	down, up *router // d1 and u1
	branch   overlay.Node
	merge    overlay.Node
	active   bool      // the merge point answered
	started  time.Time // for giving up on a path change that gets no answer
}

// pathRole is a switch's part in a bypass's path between the branch
// point and the merge point, R excluded: the link toward R and the one
// away from it.
type pathRole struct {
	seq           uint64
	toward, away  *router
	downstream    bool // between R and B (else between R and M)
	branch, merge bool // it is the branch point (away: nil until the merge point links) or the merge point (away: the bypass link)
	val           ontology.Value
	proxy         *Subscription // at the merge point: the class's filter on the bypass link
	since         time.Time
	merged        overlay.Node // at the merge point: the branch point
}

// nextHopsFor returns the links of this switch whose proxy filters of
// event type t may match events of class c (the request table's next
// hops), and whether a local subscription may; except is left out.
func (s *rvSwitch) nextHopsFor(c classOf, except *router) (links []*router, local bool) {
	sw := s.sw
	o := sw.place.Ontology()
	et, _ := o.Lookup(c.ref.Type)
	t := s.bypass.Load()
	sw.mu.RLock()
	defer sw.mu.RUnlock()
	for _, sub := range sw.subs {
		if t != nil && t.proxies[sub] {
			continue
		}
		r, isRouter := sub.sess.sink.(*router)
		if isRouter {
			if r == except || sub.f.Type() != c.ref.Type || !mayMatch(sub.f, c) {
				continue
			}
			if _, ok := s.links[r]; ok && !slices.Contains(links, r) {
				links = append(links, r)
			}
			continue
		}
		if ft := sub.f.Type(); ft != filter.AnyType {
			st, ok := o.Lookup(ft)
			if !ok || et == nil || !o.IsA(et.ID, st.ID) {
				continue
			}
		}
		if mayMatch(sub.f, c) {
			local = true
		}
	}
	return links, local
}

// sourcesFor returns the links the advertisement table has entries from
// whose type is c's and whose detail allows c, and whether a local
// session advertised one; except is left out. mu must be held.
func (s *rvSwitch) sourcesFor(c classOf, except *router) (links []*router, local bool) {
	for k, e := range s.adverts {
		if k.typ != c.ref.Type || !detailAllows(e.attrs, c) {
			continue
		}
		if e.local > 0 {
			local = true
		}
		for r := range e.from {
			if r != except && !slices.Contains(links, r) {
				links = append(links, r)
			}
		}
	}
	return links, local
}

// detailAllows reports whether an advertisement's attribute detail
// allows events of class c: it names c's attribute with another value.
func detailAllows(d []linkctl.AttrDetail, c classOf) bool {
	for _, a := range d {
		if a.Name == c.ref.Attr {
			return a.Value == c.val.String()
		}
	}
	return true
}

// mayMatch reports whether f may match an event of class c: false only
// when f needs all its predicates and those on c's attribute fail for c's
// value.
func mayMatch(f *filter.Filter, c classOf) bool {
	if f.Mode() != filter.ModeAll {
		return true
	}
	var on []filter.Predicate
	for _, p := range f.Predicates() {
		if p.Operand.Source == filter.SourceAttr && p.Operand.Name == c.ref.Attr {
			on = append(on, p)
		}
	}
	if len(on) == 0 {
		return true
	}
	g, err := filter.Build(filter.Spec{Predicates: on})
	if err != nil {
		return true
	}
	ok, _ := g.Eval(&filter.BasicEvent{Type: c.ref.Type, Attrs: []ontology.Attr{{Name: c.ref.Attr, Value: c.val}}})
	return ok
}

// balance is the rendezvous switch's periodic look at its load (and the
// merge and branch points' at their bypasses): above the threshold it
// starts a bypass of its hottest class not yet bypassed.
func (s *rvSwitch) balance(now time.Time) {
	cfg := s.rv.cfg
	s.sw.routeMu.Lock()
	defer s.sw.routeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkPaths(now)
	if cfg.Threshold <= 0 || now.Before(s.calm) {
		return
	}
	load := s.meter.Load(now)
	for _, b := range s.rvRoles {
		load -= s.meter.Rate(now, traffic.Class{Level: traffic.Level(b.class.ref.Level), Type: b.class.ref.Type, Attr: b.class.ref.Attr, Value: b.class.ref.Value})
	}
	if load <= cfg.Threshold {
		return
	}
	level := traffic.LevelUpper
	if cfg.BypassLevel == 3 {
		level = traffic.LevelLowest
	}
	rates := s.meter.Rates(now, level)
	slices.SortStableFunc(rates, func(a, b traffic.Rate) int {
		return cmp.Or(cmp.Compare(b.Rate, a.Rate), cmp.Compare(a.Class.String(), b.Class.String()))
	})
	// The hottest classes, as many as it takes to bring the load under
	// the threshold, in parallel; then a window's calm, so that the next
	// look sees their effect.
	started := false
	for _, r := range rates {
		if load <= cfg.Threshold {
			break
		}
		ref := linkctl.ClassRef{Level: byte(r.Class.Level), Type: r.Class.Type, Attr: r.Class.Attr, Value: r.Class.Value}
		if _, busy := s.rvRoles[ref]; busy {
			continue
		}
		if until, ok := s.refused[ref]; ok && now.Before(until) {
			continue
		}
		val, ok := s.classVals[ref]
		if !ok || !s.isRendezvous(ref.Type) {
			continue
		}
		if s.startBypass(classOf{ref, val}, now) {
			load -= r.Rate
			started = true
		}
	}
	if started {
		s.calm = now.Add(cmp.Or(cfg.Window, DefaultTrafficWindow))
	}
}

// startBypass starts the bypass of class c when its events cross this
// rendezvous switch from one link to another only, and reports whether
// it did; a class that cannot be bypassed is not tried again for a window.
// Switch.routeMu and mu must be held.
func (s *rvSwitch) startBypass(c classOf, now time.Time) bool {
	window := cmp.Or(s.rv.cfg.Window, DefaultTrafficWindow)
	downs, localDown := s.nextHopsFor(c, nil)
	ups, localUp := s.sourcesFor(c, nil)
	if localDown || localUp || len(downs) > 1 || len(ups) != 1 || len(downs) == 1 && downs[0] == ups[0] {
		s.refused[c.ref] = now.Add(window)
		return false
	}
	s.seq++
	b := &rvRole{class: c, seq: s.seq, up: ups[0], started: now}
	s.rvRoles[c.ref] = b
	if len(downs) == 0 {
		// Nobody wants the class: the merge point keeps it (beyond S3).
		sendOrLog(b.up, &linkctl.PathChange{Class: c.ref, Direction: linkctl.Upstream, Seq: b.seq})
	} else {
		b.down = downs[0]
		sendOrLog(b.down, &linkctl.PathChange{Class: c.ref, Direction: linkctl.Downstream, Seq: b.seq})
	}
	s.sw.log.Info("sion: rendezvous switch bypasses a class", "switch", s.sw.cfg.Name, "class", classString(c.ref))
	return true
}

// checkPaths ends the bypasses whose path has changed: a merge point's
// class below RendezvousConfig.Release, a branch point that is one no
// more, a path change that got no answer within a window. mu and
// Switch.routeMu must be held.
func (s *rvSwitch) checkPaths(now time.Time) {
	window := cmp.Or(s.rv.cfg.Window, DefaultTrafficWindow)
	for ref, b := range s.rvRoles {
		if !b.active && now.Sub(b.started) > window {
			delete(s.rvRoles, ref) // no answer: try again later
		}
	}
	for ref, p := range s.paths {
		switch {
		case p.merge && s.rv.cfg.Release > 0 && now.Sub(p.since) > window &&
			s.bypassMeter.Rate(now, traffic.Class{Level: traffic.Level(ref.Level), Type: ref.Type, Attr: ref.Attr, Value: ref.Value}) < s.rv.cfg.Release:
			s.endMerge(ref, p)
			s.endOver(ref, p.seq, false, nil, p.toward, p.away)
		case p.branch && p.away != nil:
			// The bypass stays right while B has a subscriber below it;
			// with none left, the class's events have nowhere to go here.
			links, local := s.nextHopsFor(classOf{ref, p.val}, p.away)
			if len(links) == 0 && !local {
				s.dropPath(ref)
				s.endOver(ref, p.seq, false, nil, p.toward, p.away)
			}
		}
	}
}

// handlePathChange handles a path change from link r: downstream, find
// the branch point (or, naming this switch, learn that a bypass arrives
// here); upstream, find the merge point and bypass there.
func (s *rvSwitch) handlePathChange(r *router, m *linkctl.PathChange) error {
	s.sw.routeMu.Lock()
	defer s.sw.routeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	me := s.table.Self()
	val, ok := s.classValue(m.Class)
	if !ok {
		return sendOrLog(r, &linkctl.BranchPoint{Class: m.Class, Seq: m.Seq})
	}
	c := classOf{m.Class, val}
	now := s.now()
	notice := m.Direction == linkctl.Downstream && m.Branch == me.ID
	if !notice && s.nextHop(m.Class.Type) != r {
		// A path change comes from the rendezvous switch's side: the
		// next hop toward it. Any other is forged, or stale after the
		// overlay changed; taking it would let a neighbour divert or drop
		// a class.
		s.sw.refusal("link:"+r.peer, "sion: path change not from the next hop toward the rendezvous switch; ignored", "class", classString(m.Class))
		return nil
	}
	if m.Direction == linkctl.Downstream {
		if notice { // the merge point's bypass link arrives: keep the class from going up
			p := s.paths[m.Class]
			if p == nil || !p.branch || p.seq != m.Seq || p.away != nil {
				return nil
			}
			p.away = r
			s.setRule(m.Class, bypassRule{never: p.toward}, nil)
			return nil
		}
		links, local := s.nextHopsFor(c, r)
		if len(links) == 1 && !local {
			s.paths[m.Class] = &pathRole{seq: m.Seq, toward: r, away: links[0], downstream: true, val: val, since: now}
			return sendOrLog(links[0], m)
		}
		if len(links) == 0 && !local {
			return sendOrLog(r, &linkctl.BranchPoint{Class: m.Class, Seq: m.Seq})
		}
		s.paths[m.Class] = &pathRole{seq: m.Seq, toward: r, downstream: true, branch: true, val: val, since: now}
		return sendOrLog(r, &linkctl.BranchPoint{Class: m.Class, Seq: m.Seq, Node: nodeOut(me)})
	}
	links, local := s.sourcesFor(c, r)
	if len(links) == 1 && !local {
		s.paths[m.Class] = &pathRole{seq: m.Seq, toward: r, away: links[0], val: val, since: now}
		return sendOrLog(links[0], m)
	}
	if len(links) == 0 && !local {
		return sendOrLog(r, &linkctl.BranchPoint{Class: m.Class, Seq: m.Seq})
	}
	branch := overlay.Node{ID: m.Branch, Addr: m.BranchAddr}
	p := &pathRole{seq: m.Seq, toward: r, merge: true, val: val, since: now, merged: branch}
	s.paths[m.Class] = p
	if branch.ID == (overlay.ID{}) { // no subscriber: keep the class here
		s.setRule(m.Class, bypassRule{drop: true}, nil)
		return sendOrLog(r, &linkctl.BranchPoint{Class: m.Class, Seq: m.Seq, Node: nodeOut(me)})
	}
	s.wg.Go(func() { s.mergeTo(c, p, r) })
	return nil
}

// mergeTo makes this switch the merge point of class c's bypass to the
// branch point p.merged: it links to it, installs the class's filter on
// that link, sends the class only there, tells the branch point, and
// answers the rendezvous switch over back.
func (s *rvSwitch) mergeTo(c classOf, p *pathRole, back *router) {
	ctx, cancel := context.WithTimeout(context.Background(), s.sw.cfg.HandshakeTimeout)
	defer cancel()
	link, err := s.dialWait(ctx, p.merged)
	me := s.selfNode()
	fail := func() {
		s.sw.routeMu.Lock()
		s.mu.Lock()
		if s.paths[c.ref] == p {
			delete(s.paths, c.ref)
		}
		s.mu.Unlock()
		s.sw.routeMu.Unlock()
		sendOrLog(back, &linkctl.BranchPoint{Class: c.ref, Seq: p.seq})
	}
	if err != nil {
		s.sw.log.Warn("sion: bypass not made: no link to the branch point", "switch", s.sw.cfg.Name, "class", classString(c.ref), "err", err)
		fail()
		return
	}
	f, err := filter.Build(filter.Spec{Type: c.ref.Type, Predicates: []filter.Predicate{filter.Attr(c.ref.Attr).EQ(c.val)}})
	if err != nil {
		fail()
		return
	}
	proxy := newSubscription(link.sess, f, subConfig{ttl: 0}, 0, nil)
	s.mu.Lock()
	s.setRule(c.ref, bypassRule{}, proxy) // known as a bypass proxy before it is installed
	s.mu.Unlock()
	link.sess.mu.Lock()
	link.sess.subs[proxy.id] = proxy
	link.sess.mu.Unlock()
	if _, err := s.sw.install(proxy); err != nil {
		link.sess.forget(proxy)
		s.mu.Lock()
		s.dropRule(c.ref, proxy)
		s.mu.Unlock()
		fail()
		return
	}
	// Every event that matched without the filter has read its rules
	// before the class goes only over the bypass link (see the top).
	s.sw.matching.wait()
	s.sw.routeMu.Lock()
	s.mu.Lock()
	if s.paths[c.ref] != p { // the bypass ended meanwhile
		s.mu.Unlock()
		s.sw.routeMu.Unlock()
		link.sess.forget(proxy)
		proxy.cancel()
		s.mu.Lock()
		s.dropRule(c.ref, proxy)
		s.mu.Unlock()
		return
	}
	p.away, p.proxy = link, proxy
	s.setRule(c.ref, bypassRule{only: link}, nil)
	s.mu.Unlock()
	s.sw.routeMu.Unlock()
	sendOrLog(link, &linkctl.PathChange{Class: c.ref, Direction: linkctl.Downstream, Branch: p.merged.ID, Seq: p.seq})
	sendOrLog(back, &linkctl.BranchPoint{Class: c.ref, Seq: p.seq, Node: nodeOut(me)})
	s.sw.log.Info("sion: merge point bypasses the rendezvous switch", "switch", s.sw.cfg.Name, "class", classString(c.ref), "branch point", link.peer)
}

// handleBranchPoint passes a branch or merge point's answer back toward
// the rendezvous switch, which then goes on with the path change.
func (s *rvSwitch) handleBranchPoint(r *router, m *linkctl.BranchPoint) error {
	s.sw.routeMu.Lock()
	defer s.sw.routeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.rvRoles[m.Class]; b != nil && b.seq == m.Seq {
		none := m.Node.ID == (overlay.ID{})
		switch {
		case b.down != nil && r == b.down && b.branch.ID == (overlay.ID{}) && !none:
			b.branch = overlay.Node{ID: m.Node.ID, Addr: m.Node.Addr}
			sendOrLog(b.up, &linkctl.PathChange{Class: m.Class, Direction: linkctl.Upstream, Branch: m.Node.ID, BranchAddr: m.Node.Addr, Seq: m.Seq})
		case r == b.up && !none && (b.down == nil || b.branch.ID != (overlay.ID{})):
			b.merge, b.active = overlay.Node{ID: m.Node.ID, Addr: m.Node.Addr}, true
		default: // no branch or merge point: the class cannot be bypassed now
			delete(s.rvRoles, m.Class)
			s.refused[m.Class] = s.now().Add(cmp.Or(s.rv.cfg.Window, DefaultTrafficWindow))
			if r == b.up && b.branch.ID != (overlay.ID{}) {
				sendOrLog(b.down, &linkctl.BypassEnd{Class: m.Class, Seq: m.Seq})
			}
		}
		return nil
	}
	p := s.paths[m.Class]
	if p == nil || p.seq != m.Seq || p.away != r {
		return nil
	}
	if m.Node.ID == (overlay.ID{}) {
		delete(s.paths, m.Class)
	}
	return sendOrLog(p.toward, m)
}

// handleBypassEnd ends this switch's part in a bypass — the merge point
// turns back, the others forget it — and passes the end on over its other
// links of the bypass's path; an acknowledged end is acknowledged once
// they have acknowledged it (the merge point's turn is then done).
func (s *rvSwitch) handleBypassEnd(r *router, m *linkctl.BypassEnd) error {
	s.sw.routeMu.Lock()
	defer s.sw.routeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var waits []*linkAck
	if b := s.rvRoles[m.Class]; b != nil && b.seq == m.Seq && (r == b.up || r == b.down) {
		delete(s.rvRoles, m.Class)
		waits = s.endOver(m.Class, m.Seq, m.Ack != 0, r, b.up, b.down)
	} else if p := s.paths[m.Class]; p != nil && p.seq == m.Seq && (r == p.toward || r == p.away) {
		if p.merge {
			s.endMerge(m.Class, p)
		} else {
			s.dropPath(m.Class)
		}
		waits = s.endOver(m.Class, m.Seq, m.Ack != 0, r, p.toward, p.away)
	}
	if m.Ack != 0 {
		r.ackAfter(m.Ack, "", waits)
	}
	return nil
}

// endOver sends the end of the bypass of ref numbered seq over the links
// of its path but from, acknowledged when acked, and returns the
// acknowledgements. mu must be held.
func (s *rvSwitch) endOver(ref linkctl.ClassRef, seq uint64, acked bool, from *router, links ...*router) []*linkAck {
	var waits []*linkAck
	for _, l := range links {
		switch {
		case l == nil || l == from:
		case acked:
			waits = append(waits, s.endVia(l, &linkctl.BypassEnd{Class: ref, Seq: seq}))
		default:
			sendOrLog(l, &linkctl.BypassEnd{Class: ref, Seq: seq})
		}
	}
	return waits
}

// endVia sends the end of a bypass over r, acknowledged.
func (s *rvSwitch) endVia(r *router, m *linkctl.BypassEnd) *linkAck {
	return r.sendAcked(func(ack uint64) linkctl.Message {
		return &linkctl.BypassEnd{Class: m.Class, Seq: m.Seq, Ack: ack}
	})
}

// endMerge ends this merge point's bypass of class ref: the class's
// events go toward the rendezvous switch again before the bypass link's
// filter goes. The caller tells the other switches of the path. mu and
// Switch.routeMu must be held.
func (s *rvSwitch) endMerge(ref linkctl.ClassRef, p *pathRole) {
	delete(s.paths, ref)
	s.dropRule(ref, nil)
	if proxy := p.proxy; proxy != nil {
		// Cancelling takes Switch.routeMu: after the locks. The event
		// that reads the table without the rule ignores the filter;
		// forget waits for the events that matched the filter before it
		// stops being ignored (see the top).
		s.wg.Go(func() {
			proxy.sess.forget(proxy)
			proxy.cancel()
			s.mu.Lock()
			s.dropRule(ref, proxy)
			s.mu.Unlock()
		})
	}
	s.sw.log.Info("sion: bypass ended", "switch", s.sw.cfg.Name, "class", classString(ref))
}

// dropPath forgets this switch's part in the bypass of ref, and the rule
// it made. mu must be held.
func (s *rvSwitch) dropPath(ref linkctl.ClassRef) {
	delete(s.paths, ref)
	s.dropRule(ref, nil)
}

// routed ends the bypasses a new subscription sub may want events of when
// it is made at the rendezvous switch or on a bypass's path between the
// rendezvous switch and the branch point, other than through the path:
// the subscription's contract waits until the merge point has turned back
// (Switch.routeAdd). Switch.routeMu must be held.
func (s *rvSwitch) routed(sub *Subscription) []*linkAck {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rvRoles) == 0 && len(s.paths) == 0 {
		return nil
	}
	types := s.typesOf(sub.f.Type())
	from, _ := sub.sess.sink.(*router)
	var waits []*linkAck
	for ref, b := range s.rvRoles {
		if from == b.down || !slices.Contains(types, ref.Type) || !mayMatch(sub.f, b.class) {
			continue
		}
		delete(s.rvRoles, ref)
		waits = append(waits, s.endOver(ref, b.seq, true, nil, b.up)...)
		s.endOver(ref, b.seq, false, nil, b.down)
	}
	for ref, p := range s.paths {
		if !p.downstream || p.branch || from == p.away || !slices.Contains(types, ref.Type) || !mayMatch(sub.f, classOf{ref, p.val}) {
			continue
		}
		waits = append(waits, s.endOver(ref, p.seq, true, nil, p.toward)...)
		s.endOver(ref, p.seq, false, nil, p.away)
		s.dropPath(ref)
	}
	return waits
}

// bypassLinkDown ends the bypasses whose path used link r, which has
// ended. mu and Switch.routeMu must be held.
func (s *rvSwitch) bypassLinkDown(r *router) {
	for ref, b := range s.rvRoles {
		if b.up == r || b.down == r {
			delete(s.rvRoles, ref)
			s.endOver(ref, b.seq, false, r, b.up, b.down)
		}
	}
	for ref, p := range s.paths {
		if p.away != r && p.toward != r {
			continue
		}
		if p.merge {
			s.endMerge(ref, p)
		} else {
			s.dropPath(ref)
		}
		s.endOver(ref, p.seq, false, r, p.toward, p.away)
	}
}

// setRule sets the rule of class ref (unless the zero rule) and, with
// proxy, records a bypass proxy filter, in a new version of the table.
// mu must be held.
func (s *rvSwitch) setRule(ref linkctl.ClassRef, rule bypassRule, proxy *Subscription) {
	t := s.bypass.Load().clone()
	if rule != (bypassRule{}) {
		t.classes[ref] = rule
		lv := t.levels[ref.Type]
		lv[ref.Level-2] = ref.Attr
		t.levels[ref.Type] = lv
	}
	if proxy != nil {
		t.proxies[proxy] = true
	}
	s.bypass.Store(t)
}

// dropRule removes the rule of class ref, or with proxy only that bypass
// proxy filter, in a new version of the table. mu must be held.
func (s *rvSwitch) dropRule(ref linkctl.ClassRef, proxy *Subscription) {
	t := s.bypass.Load().clone()
	if proxy != nil {
		delete(t.proxies, proxy)
	} else {
		delete(t.classes, ref)
		t.levels = map[string][2]string{}
		for c := range t.classes {
			lv := t.levels[c.Type]
			lv[c.Level-2] = c.Attr
			t.levels[c.Type] = lv
		}
	}
	if len(t.classes) == 0 && len(t.proxies) == 0 {
		t = nil
	}
	s.bypass.Store(t)
}

// clone returns a copy of t to change (t may be nil).
func (t *bypassTable) clone() *bypassTable {
	out := &bypassTable{classes: map[linkctl.ClassRef]bypassRule{}, levels: map[string][2]string{}, proxies: map[*Subscription]bool{}}
	if t != nil {
		for k, v := range t.classes {
			out.classes[k] = v
		}
		for k, v := range t.levels {
			out.levels[k] = v
		}
		for k, v := range t.proxies {
			out.proxies[k] = v
		}
	}
	return out
}

// classValue returns the typed value of class ref's attribute. mu must
// be held.
func (s *rvSwitch) classValue(ref linkctl.ClassRef) (ontology.Value, bool) {
	if v, ok := s.classVals[ref]; ok {
		return v, true
	}
	o := s.sw.place.Ontology()
	et, ok := o.Lookup(ref.Type)
	if !ok || ref.Level < 2 || ref.Level > 3 {
		return ontology.Value{}, false
	}
	a, ok := o.Attribute(et.ID, ref.Attr)
	if !ok {
		return ontology.Value{}, false
	}
	if a.Kind == ontology.KindString {
		return ontology.String(ref.Value), true
	}
	return parseValue(a.Kind, ref.Value)
}

// parseValue reads a value of kind k as classValue wrote it.
func parseValue(k ontology.Kind, text string) (ontology.Value, bool) {
	switch k {
	case ontology.KindInt:
		n, err := strconv.ParseInt(text, 10, 64)
		return ontology.Int(n), err == nil
	case ontology.KindFloat:
		f, err := strconv.ParseFloat(text, 64)
		return ontology.Float(f), err == nil
	case ontology.KindBool:
		b, err := strconv.ParseBool(text)
		return ontology.Bool(b), err == nil
	case ontology.KindTime:
		q, ok := strings.CutPrefix(text, "time(")
		q, ok2 := strings.CutSuffix(q, ")")
		u, err := strconv.Unquote(q)
		if !ok || !ok2 || err != nil {
			return ontology.Value{}, false
		}
		t, err := time.Parse(time.RFC3339Nano, u)
		return ontology.Time(t), err == nil
	}
	return ontology.Value{}, false
}

// classString names a class for logs and introspection: "Type" or
// "Type/Attr=Value".
func classString(c linkctl.ClassRef) string {
	return traffic.Class{Level: traffic.Level(c.Level), Type: c.Type, Attr: c.Attr, Value: c.Value}.String()
}

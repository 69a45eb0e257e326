package sion

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/ontology"
)

// Advertisement pruning of S1 propagation (PlaceConfig.RequireAdvertisements
// under RouteByFilter or RouteByEventType; DESIGN.md "Beyond one tree"):
// each switch keeps an advertisement table — per event type and attribute
// detail (advKey, as S3's table), the local sessions and the links it came
// from — and floods it over the shared links of the place's tree, which is
// loop-free: an entry is advertised over a link while it has a source
// other than that link (Advertise on the first, Unadvertise when the last
// goes). A subscription's key is registered over a link only when an entry
// that came over that link — an advertisement behind it — overlaps the
// filter's event type (typesOverlap); the acknowledgement of an Advertise
// waits for the registers it caused, so that Session.Advertise keeps the
// S2 contract. Keys no longer needed over a link are released as soon as
// the last entry of a type behind it goes (eagerly, not at the next
// change).

// anyTypeID is the type ID of the entry a gateway makes: every type, as
// filter.AnyType names it (the events of other places enter through it,
// and their publishers advertise nothing here).
const anyTypeID = -1

// anyKey is the table's key of that entry.
var anyKey = advKey{typ: filter.AnyType}

// adSwitch is one switch's part of an S1 routing in a place that requires
// advertisements: the routing's key (by filter or by event type) and the
// advertisement table. Everything it keeps is guarded by Switch.routeMu,
// under which the switch calls keys, linkUp and linkDown; the other
// methods take it. The embedded stateless gives it what the other S1
// modes do for an overlay (nothing), routed, leave and close.
type adSwitch struct {
	stateless
	sw *Switch

	table   map[advKey]*adEntry   // routeMu; the advertisement table
	links   map[*router]*adLink   // routeMu; the shared links of the tree that are up
	sessAds map[*Session][]advKey // routeMu; the entries local sessions' advertisements made
	nextKey uint64                // routeMu; the last key given to an Advertise sent
}

// adEntry is an entry of the advertisement table.
type adEntry struct {
	typeID int                  // the type's ID in the ontology; anyTypeID for a gateway's
	attrs  []linkctl.AttrDetail // the attribute detail, as Advertise carries it
	local  int                  // advertisements of local sessions
	from   map[*router]int      // advertisements that came over links (a gateway: its own), per link
	total  int                  // local plus those of from
}

// others returns how many of e's sources are not link r: e is advertised
// over r while it is above 0.
func (e *adEntry) others(r *router) int { return e.total - e.from[r] }

// adLink is what the table keeps about one shared link.
type adLink struct {
	in     map[uint64]advKey // the peer's advertisements, by the key its Advertise gave
	out    map[advKey]adSent // the entries advertised to the peer
	behind map[int]int       // the type IDs of the entries that came over the link, each with its number of entries
	wants  map[string]bool   // filter types known to overlap an entry behind the link, or not; cleared when behind changes
}

// adSent is an entry advertised over a link: the key its Advertise gave
// and that Advertise's acknowledgement.
type adSent struct {
	key  uint64
	last *linkAck
}

// newAdvertised returns sw's part of an S1 routing whose subscriptions
// register key's key, in a place that requires advertisements.
func newAdvertised(sw *Switch, key func(*Subscription) (routeKey, int, bool)) *adSwitch {
	return &adSwitch{
		stateless: stateless{key: key},
		sw:        sw,
		table:     map[advKey]*adEntry{},
		links:     map[*router]*adLink{},
		sessAds:   map[*Session][]advKey{},
	}
}

// keys registers sub's key over r as the S1 mode does — over every link
// but the one it came from, within its TTL — except over a shared link
// of the tree behind which no advertisement overlaps the filter's type.
// A gateway is never pruned: the other place's publishers advertise
// nothing here.
func (s *adSwitch) keys(r *router, sub *Subscription, reg func(routeKey, int)) {
	if !everyOtherLink(r, sub) {
		return
	}
	k, ttl, ok := s.key(sub)
	if !ok {
		return
	}
	if l := s.links[r]; l != nil && !s.wanted(l, sub.f.Type()) {
		return
	}
	reg(k, ttl)
}

// wanted reports whether a filter on event type t may match events that
// an advertisement behind link l covers. Filters on reserved types
// (discovery, whose publishers do not advertise) and on types it cannot
// judge are always wanted. Switch.routeMu must be held.
func (s *adSwitch) wanted(l *adLink, t string) bool {
	if w, ok := l.wants[t]; ok {
		return w
	}
	o := s.sw.place.Ontology()
	w := true
	if t == filter.AnyType {
		w = len(l.behind) > 0 // no advertisement is of a reserved type
	} else if et, ok := o.Lookup(t); ok && !ontology.IsReserved(et.Name) {
		w = false
		for id := range l.behind {
			if id == anyTypeID || typesOverlap(o, et.ID, id) {
				w = true
				break
			}
		}
	}
	l.wants[t] = w
	return w
}

// typesOverlap reports whether event types a and b (IDs in o) have a
// common descendant — they are one, one is a subtype of the other, or a
// type inherits from both — so that some event is of both: an
// advertisement of one may cover events a filter on the other matches
// (Ontology.Overlap).
func typesOverlap(o *ontology.Ontology, a, b int) bool { return o.Overlap(a, b) }

// linkUp starts keeping a shared link of the tree and sends it the table
// (before the subscriptions' registers), returning the acknowledgements
// of those Advertises, which the link's Synced waits for (addRouter): the
// peer's side of the link is up only once the subscriptions behind it
// that this side's advertisements need are registered toward this side.
// A gateway becomes the source of the entry "every type", advertised over
// the tree, and its Synced waits likewise. Other links (none in an S1
// place) are not pruned.
func (s *adSwitch) linkUp(r *router) ([]routeKey, []*linkAck) {
	switch {
	case !r.end.inPlace():
		waits, _ := s.addSource(anyKey, anyTypeID, nil, r, nil)
		return nil, waits
	case !r.end.tree():
		return nil, nil
	}
	l := &adLink{in: map[uint64]advKey{}, out: map[advKey]adSent{}, behind: map[int]int{}, wants: map[string]bool{}}
	s.links[r] = l
	var waits []*linkAck
	for _, k := range s.tableKeys() {
		if e := s.table[k]; e.others(r) > 0 {
			waits = append(waits, s.sendAdvert(r, l, k, e))
		}
	}
	return nil, waits
}

// linkDown forgets link r, which has ended, and the advertisements that
// came over it, withdrawing them from the other links where they were
// its alone. What the subscriptions registered over r is gone with it
// (Switch.removeRouter).
func (s *adSwitch) linkDown(r *router) {
	if !r.end.inPlace() {
		s.removeSource(anyKey, r)
		return
	}
	l := s.links[r]
	if l == nil {
		return
	}
	delete(s.links, r)
	for _, k := range l.in {
		s.removeSource(k, r)
	}
}

// tableKeys returns the table's keys, sorted by type and detail.
// Switch.routeMu must be held.
func (s *adSwitch) tableKeys() []advKey {
	keys := make([]advKey, 0, len(s.table))
	for k := range s.table {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b advKey) int {
		return cmp.Or(cmp.Compare(a.typ, b.typ), cmp.Compare(a.detail, b.detail))
	})
	return keys
}

// addSource counts one more source of entry k (of type typeID, detail d)
// — link src, or a local session (nil) — and advertises the entry over
// every shared link that did not have it and is not src. It appends to
// waits what the advertisement's contract waits on: the acknowledgements
// of the entry's Advertises over those links, sent now or before. It
// reports whether the types behind src changed. Switch.routeMu must be
// held.
func (s *adSwitch) addSource(k advKey, typeID int, d []linkctl.AttrDetail, src *router, waits []*linkAck) ([]*linkAck, bool) {
	e := s.table[k]
	if e == nil {
		e = &adEntry{typeID: typeID, attrs: d, from: map[*router]int{}}
		s.table[k] = e
	}
	changed := false
	if src == nil {
		e.local++
	} else {
		e.from[src]++
		if l := s.links[src]; l != nil && e.from[src] == 1 {
			changed = l.addBehind(e.typeID)
		}
	}
	e.total++
	for y, l := range s.links {
		if y == src {
			continue
		}
		if sent, ok := l.out[k]; ok {
			waits = append(waits, sent.last)
			continue
		}
		waits = append(waits, s.sendAdvert(y, l, k, e))
	}
	return waits, changed
}

// removeSource counts one source fewer of entry k — link src, or a local
// session (nil) — withdrawing the entry from each link whose peer was its
// only source, and from the table when it has none left. It reports
// whether the types behind src changed. Switch.routeMu must be held.
func (s *adSwitch) removeSource(k advKey, src *router) bool {
	e := s.table[k]
	if e == nil {
		return false
	}
	changed := false
	if src == nil {
		if e.local == 0 {
			return false
		}
		e.local--
	} else {
		if e.from[src] == 0 {
			return false
		}
		if e.from[src]--; e.from[src] == 0 {
			delete(e.from, src)
			if l := s.links[src]; l != nil {
				changed = l.removeBehind(e.typeID)
			}
		}
	}
	e.total--
	for y, l := range s.links {
		if sent, ok := l.out[k]; ok && e.others(y) <= 0 {
			y.sendControl(&linkctl.Unadvertise{Key: sent.key})
			delete(l.out, k)
		}
	}
	if e.total <= 0 {
		delete(s.table, k)
	}
	return changed
}

// sendAdvert advertises entry k over link y and returns the
// acknowledgement. Switch.routeMu must be held.
func (s *adSwitch) sendAdvert(y *router, l *adLink, k advKey, e *adEntry) *linkAck {
	s.nextKey++
	key := s.nextKey
	a := y.sendAcked(func(ack uint64) linkctl.Message {
		return &linkctl.Advertise{Key: key, Ack: ack, Type: k.typ, Attrs: e.attrs}
	})
	l.out[k] = adSent{key: key, last: a}
	return a
}

// addBehind counts one more entry of type id behind the link and reports
// whether the type is new there.
func (l *adLink) addBehind(id int) bool {
	l.behind[id]++
	if l.behind[id] > 1 {
		return false
	}
	clear(l.wants)
	return true
}

// removeBehind counts one entry of type id fewer behind the link and
// reports whether the type is gone from there.
func (l *adLink) removeBehind(id int) bool {
	if l.behind[id]--; l.behind[id] > 0 {
		return false
	}
	delete(l.behind, id)
	clear(l.wants)
	return true
}

// advertise enters session sess's advertisements into the table, floods
// them over the tree and waits until every switch has them and has
// registered toward this one the subscriptions they may match.
func (s *adSwitch) advertise(ctx context.Context, sess *Session, ads []Advertisement) error {
	sw := s.sw
	o := sw.place.Ontology()
	sw.routeMu.Lock()
	if sess.isClosed() { // withdraw has run or will find nothing
		sw.routeMu.Unlock()
		return fmt.Errorf("%w: session %q", ErrClosed, sess.name)
	}
	var waits []*linkAck
	var added []advKey
	for _, ad := range ads {
		et, ok := o.Lookup(ad.Type)
		if !ok {
			continue // an unknown type (AcceptUnknownTypes): Publish refuses its events (advertised), so it is not routed
		}
		d, text := detailOf(ad.Attrs)
		k := advKey{et.Name, text}
		s.sessAds[sess] = append(s.sessAds[sess], k)
		added = append(added, k)
		waits, _ = s.addSource(k, et.ID, d, nil, waits)
	}
	sw.routeMu.Unlock()
	err := sw.awaitAdvertised(ctx, waits, "at the switches of the place")
	if err != nil {
		// Refused: withdrawn from the tables and from the session, so
		// that Publish refuses the events no subscription was registered
		// for, and a later Advertise starts afresh.
		sw.routeMu.Lock()
		for _, k := range added {
			if i := slices.Index(s.sessAds[sess], k); i >= 0 {
				s.sessAds[sess] = slices.Delete(s.sessAds[sess], i, i+1)
				s.removeSource(k, nil)
			}
		}
		sw.routeMu.Unlock()
		sess.unadvertise(ads)
	}
	return err
}

// withdraw removes session sess's advertisements from the table as it
// ends, and from the tree where they were the last of their entries.
func (s *adSwitch) withdraw(sess *Session) {
	s.sw.routeMu.Lock()
	defer s.sw.routeMu.Unlock()
	for _, k := range s.sessAds[sess] {
		s.removeSource(k, nil)
	}
	delete(s.sessAds, sess)
}

// publishing admits an event a session publishes if the session has
// advertised it.
func (s *adSwitch) publishing(sess *Session, e *Event) error {
	return advertised(s.sw.place.Ontology(), sess, e)
}

// linkControl handles a neighbour's Advertise and Unadvertise.
func (s *adSwitch) linkControl(r *router, m linkctl.Message) (bool, error) {
	switch m := m.(type) {
	case *linkctl.Advertise:
		s.handleAdvertise(r, m)
	case *linkctl.Unadvertise:
		s.handleUnadvertise(r, m)
	default:
		return false, nil
	}
	return true, nil
}

// handleAdvertise enters a neighbour's advertisement into the table —
// after checking it field by field as checkDetail does (a type "*" with
// no detail is a gateway's, behind the neighbour) and against the bound
// of entries per link; a refused one is acknowledged with the error and
// kept nowhere — floods it on, registers over r the subscriptions that
// now need r, and acknowledges it once the links it went on have, and
// the peer has acknowledged every key registered over r.
func (s *adSwitch) handleAdvertise(r *router, m *linkctl.Advertise) {
	o := s.sw.place.Ontology()
	typeID := anyTypeID
	if m.Type != filter.AnyType || len(m.Attrs) > 0 {
		if err := checkDetail(o, m.Type, m.Attrs); err != nil {
			r.sendAck(m.Ack, fmt.Sprintf("switch %q: %v", s.sw.cfg.Name, err))
			return
		}
		et, _ := o.Lookup(m.Type)
		typeID = et.ID
	}
	d, text := canonDetail(slices.Clone(m.Attrs))
	k := advKey{m.Type, text}
	s.sw.routeMu.Lock()
	l := s.links[r]
	if l == nil { // the link is ending
		s.sw.routeMu.Unlock()
		return
	}
	old, again := l.in[m.Key]
	if !again && len(l.in) >= maxAdvertsPerLink {
		s.sw.routeMu.Unlock()
		r.sendAck(m.Ack, fmt.Sprintf("switch %q: %d advertisements over one link, its bound", s.sw.cfg.Name, maxAdvertsPerLink))
		return
	}
	l.in[m.Key] = k
	waits, changed := s.addSource(k, typeID, d, r, nil)
	if again && s.removeSource(old, r) {
		changed = true
	}
	if changed {
		s.sw.rerouteOver(r)
	}
	waits = append(waits, r.pendingRoutes()...)
	s.sw.routeMu.Unlock()
	r.ackAfter(m.Ack, "", waits)
}

// handleUnadvertise removes a neighbour's advertisement from the table,
// withdraws it from the tree where it was the last of its entry, and
// releases over r the keys no longer needed there. An unknown key is
// ignored: an Advertise this switch refused is withdrawn by its sender
// all the same.
func (s *adSwitch) handleUnadvertise(r *router, m *linkctl.Unadvertise) {
	s.sw.routeMu.Lock()
	defer s.sw.routeMu.Unlock()
	l := s.links[r]
	if l == nil {
		return
	}
	k, ok := l.in[m.Key]
	if !ok {
		return
	}
	delete(l.in, m.Key)
	if s.removeSource(k, r) {
		s.sw.rerouteOver(r)
	}
}

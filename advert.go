package sion

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/ontology"
)

// ErrNotAdvertised is wrapped by Publish's error for an event whose type
// (and attribute detail) the session has not advertised, in a place
// routed by rendezvous (S3) or one with PlaceConfig.RequireAdvertisements
// (S1 places), or managed by an agent (RouteManaged, S2); see
// Session.Advertise. Test it with errors.Is.
var ErrNotAdvertised = errors.New("sion: event not advertised")

// Advertisement declares events a session will publish (S3
// advertisement): events of Type or of a subtype, carrying the attribute
// values Attrs (S3's attribute detail; nil: any).
type Advertisement struct {
	// Type names the event type, canonical or a synonym.
	Type string
	// Attrs are attribute values every advertised event carries; names
	// canonical or synonyms, each in the type's vocabulary.
	Attrs []ontology.Attr
}

// Advertise declares the events the session will publish (S3
// advertisement). In a place routed by rendezvous (RouteByRendezvous) each
// advertisement travels toward the rendezvous switch of its type and of
// each subtype, and every switch on the way enters it in its
// advertisement table, so that events of the type find their way to the
// rendezvous switch; Advertise returns once every switch on those paths
// has it (as Subscribe's contract), and from then on the session may
// publish such events — Publish refuses others with ErrNotAdvertised.
//
// In a place with PlaceConfig.RequireAdvertisements Publish refuses them
// too, whatever the routing. Under RouteByFilter and RouteByEventType
// (S1) each advertisement also floods the place's tree of shared links,
// entering every switch's advertisement table, and each switch registers
// over the link toward the publisher the subscriptions (its own and the
// proxies of its other links, within their TTL) whose filter's type
// overlaps the advertised one; Advertise returns once every switch has
// done so and the acknowledgements are back (S2 contract): an event
// published after Advertise returns reaches every subscription whose
// Subscribe returned before it was called.
//
// In a managed place (RouteManaged, S2) each advertisement is a request
// to the place's agent: Advertise returns once the agent has granted it —
// the paths from this switch to the consumers that may want its events
// are deployed — and a refused one is withdrawn (ErrNotGranted); Publish
// refuses what the session has not advertised.
//
// In other places Advertise only records the advertisements; Publish
// does not check them. Advertisements stay until the session ends, and
// are then withdrawn from every table.
//
// On a remote session (Dial) each advertisement is a request of its own,
// sent in order: Advertise stops at the first that fails; those before it
// stay advertised, and so does one that failed with ErrNotGranted. A
// remote session whose switch no longer held it when it reconnected
// advertises again what it had advertised (see ReconnectPolicy).
//
// Errors: ErrUnknownEventType for a type the ontology does not know;
// ErrInvalidEvent for an attribute outside the type's vocabulary, of the
// wrong kind, or a reserved type; ErrNotGranted when the paths are not
// installed within the place's ContractTimeout or ctx ends first (the
// advertisements stay recorded and their paths keep being installed);
// ErrClosed.
func (s *Session) Advertise(ctx context.Context, ads ...Advertisement) error {
	if s.isClosed() {
		return fmt.Errorf("%w: session %q", ErrClosed, s.name)
	}
	return s.be.advertise(ctx, s, ads)
}

// advertise is Session.Advertise on a switch: it checks ads against the
// place, keeps them on the session, and hands them to the routing.
func (sw *Switch) advertise(ctx context.Context, s *Session, ads []Advertisement) error {
	canon, err := sw.keepAdvertisements(s, ads)
	if err != nil {
		return err
	}
	return sw.routing.advertise(ctx, s, canon)
}

// keepAdvertisements checks ads against the place and keeps them on
// session s, from then on covering what s publishes; it returns them
// canonical, for the routing. It keeps none if one is refused.
func (sw *Switch) keepAdvertisements(s *Session, ads []Advertisement) ([]Advertisement, error) {
	canon := make([]Advertisement, 0, len(ads))
	for _, ad := range ads {
		e, err := sw.place.admit(&Event{Type: ad.Type, Attrs: ad.Attrs}, admitPublished)
		if err != nil {
			return nil, fmt.Errorf("sion: advertisement of %q: %w", ad.Type, err)
		}
		canon = append(canon, Advertisement{Type: e.Type, Attrs: e.Attrs})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: session %q", ErrClosed, s.name)
	}
	s.ads = append(s.ads, canon...)
	return canon, nil
}

// unadvertise takes ads (canonical, as keepAdvertisements returned them)
// off session s, one occurrence each: their Advertise was refused.
func (s *Session) unadvertise(ads []Advertisement) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ad := range ads {
		if i := slices.IndexFunc(s.ads, func(a Advertisement) bool { return a.Type == ad.Type && slices.Equal(a.Attrs, ad.Attrs) }); i >= 0 {
			s.ads = slices.Delete(s.ads, i, i+1)
		}
	}
}

// covers reports whether advertisement ad covers event e: e's type is ad's
// or a subtype, and e carries each of ad's attribute values.
func (ad *Advertisement) covers(o *ontology.Ontology, e *Event) bool {
	et, ok1 := o.Lookup(e.Type)
	at, ok2 := o.Lookup(ad.Type)
	if !ok1 || !ok2 || !o.IsA(et.ID, at.ID) {
		return false
	}
	for _, a := range ad.Attrs {
		v, ok := e.Value(a.Name)
		if !ok || v.Key() != a.Value.Key() {
			return false
		}
	}
	return true
}

// advertised returns an error wrapping ErrNotAdvertised unless one of s's
// advertisements covers e.
func advertised(o *ontology.Ontology, s *Session, e *Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.ads {
		if s.ads[i].covers(o, e) {
			return nil
		}
	}
	return fmt.Errorf("%w: session %q publishes %s, which none of its advertisements (Session.Advertise) covers", ErrNotAdvertised, s.name, e.Type)
}

// The advertisement table of rendezvous routing (S3): per event type and
// attribute detail, the sources — local sessions and links — it came
// from, and the next hop it went on to toward the type's rendezvous
// switch. A switch registers the type at each source link, so that the
// source forwards the type's events here (the advertisement path, which
// events follow toward the rendezvous switch).

// advKey names an entry of the advertisement table: an event type (exact)
// and the text of an attribute detail.
type advKey struct {
	typ, detail string
}

// advEntry is an entry of the advertisement table.
type advEntry struct {
	attrs []linkctl.AttrDetail
	local int             // advertisements of local sessions
	from  map[*router]int // advertisements that came over links, per link
	next  *router         // where it went on to; nil: nowhere (the rendezvous switch, or no link yet)
	key   uint64          // its key on next
	last  *linkAck        // the acknowledgement of the Advertise on next
}

// detailOf returns the attribute detail of attrs as the messages carry it
// (sorted by name) and as an advKey's text.
func detailOf(attrs []ontology.Attr) ([]linkctl.AttrDetail, string) {
	out := make([]linkctl.AttrDetail, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, linkctl.AttrDetail{Name: a.Name, Value: a.Value.String()})
	}
	return canonDetail(out)
}

// canonDetail sorts an attribute detail and returns its text.
func canonDetail(d []linkctl.AttrDetail) ([]linkctl.AttrDetail, string) {
	slices.SortFunc(d, func(a, b linkctl.AttrDetail) int { return cmp.Compare(a.Name, b.Name) })
	var b strings.Builder
	for _, a := range d {
		b.WriteString(a.Name)
		b.WriteByte('=')
		b.WriteString(a.Value)
		b.WriteByte('\n')
	}
	return d, b.String()
}

// typeKey returns the key a switch registers at an advertisement's source
// link: every event of type t (the overlay end passes only t's own).
func typeKey(t string) routeKey { return newRouteKey(typeFilter(t), nil) }

// advertise enters session s's advertisements into the table, for their
// types and subtypes, and waits until the paths to the rendezvous
// switches have them.
func (s *rvSwitch) advertise(ctx context.Context, sess *Session, ads []Advertisement) error {
	sw := s.sw
	var waits []*linkAck
	sw.routeMu.Lock()
	s.mu.Lock()
	for _, ad := range ads {
		d, text := detailOf(ad.Attrs)
		for _, t := range s.typesOf(ad.Type) {
			k := advKey{t, text}
			s.sessAds[sess] = append(s.sessAds[sess], k)
			waits = s.addSource(k, d, nil, waits)
		}
	}
	s.mu.Unlock()
	sw.routeMu.Unlock()
	return sw.awaitAdvertised(ctx, waits, "on the way to its rendezvous switch")
}

// awaitAdvertised waits until every one of waits — acknowledgements an
// advertisement's contract waits on — is acknowledged, the place's
// ContractTimeout passes, or ctx ends; where names the switches waited on
// in the timeout's error.
func (sw *Switch) awaitAdvertised(ctx context.Context, waits []*linkAck, where string) error {
	t := time.NewTimer(sw.place.cfg.ContractTimeout)
	defer t.Stop()
	for _, a := range waits {
		select {
		case <-a.done:
			if a.err != nil {
				return fmt.Errorf("%w: advertisement: %w", ErrNotGranted, a.err)
			}
		case <-t.C:
			return fmt.Errorf("%w: advertisement not installed %s within %v: the link to %q has not acknowledged it", ErrNotGranted, where, sw.place.cfg.ContractTimeout, a.peer)
		case <-ctx.Done():
			return fmt.Errorf("%w: advertisement: %w", ErrNotGranted, ctx.Err())
		}
	}
	return nil
}

// withdraw removes session sess's advertisements from the table as it
// ends.
func (s *rvSwitch) withdraw(sess *Session) {
	s.sw.routeMu.Lock()
	defer s.sw.routeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.sessAds[sess] {
		s.removeSource(k, nil)
	}
	delete(s.sessAds, sess)
}

// publishing admits an event a session publishes if the session has
// advertised it, and counts it when this switch is its rendezvous switch.
func (s *rvSwitch) publishing(sess *Session, e *Event) error {
	if err := advertised(s.sw.place.Ontology(), sess, e); err != nil {
		return err
	}
	s.meterEvent(e)
	return nil
}

// handleAdvertise enters a neighbour's advertisement into the table and
// acknowledges it once the path on to the rendezvous switch has it and
// the neighbour has this switch's register of the type.
func (s *rvSwitch) handleAdvertise(r *router, m *linkctl.Advertise) error {
	if err := checkDetail(s.sw.place.Ontology(), m.Type, m.Attrs); err != nil {
		r.sendAck(m.Ack, fmt.Sprintf("switch %q: %v", s.sw.cfg.Name, err))
		return nil
	}
	d, text := canonDetail(slices.Clone(m.Attrs))
	k := advKey{m.Type, text}
	s.sw.routeMu.Lock()
	s.mu.Lock()
	keys := s.inKeys[r]
	if keys == nil {
		keys = map[uint64]advKey{}
		s.inKeys[r] = keys
	}
	old, again := keys[m.Key]
	if !again && len(keys) >= maxAdvertsPerLink {
		s.mu.Unlock()
		s.sw.routeMu.Unlock()
		r.sendAck(m.Ack, fmt.Sprintf("switch %q: %d advertisements over one link, its bound", s.sw.cfg.Name, maxAdvertsPerLink))
		return nil
	}
	keys[m.Key] = k
	waits := s.addSource(k, d, r, nil)
	if again {
		s.removeSource(old, r)
	}
	s.mu.Unlock()
	s.sw.routeMu.Unlock()
	r.ackAfter(m.Ack, "", waits)
	return nil
}

// maxAdvertsPerLink bounds the advertisement-table entries one link's
// peer keeps at this switch (each a type and attribute detail; a
// publisher of every type of a large ontology with a few details stays
// far below it).
const maxAdvertsPerLink = 4096

// checkDetail checks an advertisement that came over a link as Advertise
// checks a session's, against ontology o: a known type by its canonical
// name, not reserved, whose attributes are in its vocabulary by their
// canonical names with values of their kinds (as classValue's text).
func checkDetail(o *ontology.Ontology, typ string, attrs []linkctl.AttrDetail) error {
	et, ok := o.Lookup(typ)
	if !ok || ontology.IsReserved(typ) || et.Name != typ {
		return fmt.Errorf("%w %q in an advertisement", ErrUnknownEventType, typ)
	}
	seen := make(map[string]bool, len(attrs))
	for _, a := range attrs {
		if seen[a.Name] {
			return fmt.Errorf("%w: attribute %q appears twice in an advertisement", ErrInvalidEvent, a.Name)
		}
		seen[a.Name] = true
		at, ok := o.Attribute(et.ID, a.Name)
		if !ok || at.Name != a.Name {
			return fmt.Errorf("%w: attribute %q of an advertisement is not in %s's vocabulary", ErrInvalidEvent, a.Name, typ)
		}
		if _, ok := detailValue(at.Kind, a.Value); !ok {
			return fmt.Errorf("%w: attribute %q of an advertisement: %q is not a %v", ErrInvalidEvent, a.Name, a.Value, at.Kind)
		}
	}
	return nil
}

// detailValue reads an attribute detail's value text (ontology.Value's
// String) as a value of kind k.
func detailValue(k ontology.Kind, text string) (ontology.Value, bool) {
	if k == ontology.KindString {
		u, err := strconv.Unquote(text)
		return ontology.String(u), err == nil
	}
	return parseValue(k, text)
}

// handleUnadvertise removes a neighbour's advertisement from the table.
func (s *rvSwitch) handleUnadvertise(r *router, m *linkctl.Unadvertise) error {
	s.sw.routeMu.Lock()
	defer s.sw.routeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.inKeys[r][m.Key]
	if !ok {
		return fmt.Errorf("unadvertise of key %d, which is not advertised", m.Key)
	}
	delete(s.inKeys[r], m.Key)
	s.removeSource(k, r)
	return nil
}

// dropSources removes the advertisements that came over link r, which has
// ended, and marks those that went on over it to be sent again (the
// rerouter does). Switch.routeMu must be held.
func (s *rvSwitch) dropSources(r *router) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.inKeys[r] {
		s.removeSource(k, r)
	}
	delete(s.inKeys, r)
	for _, e := range s.adverts {
		if e.next == r {
			e.next, e.last = nil, nil
		}
	}
}

// addSource counts one more source of entry k — link src, or a local
// session (nil) — registering k's type at src on its first advertisement
// there, and sends the entry on toward the rendezvous switch if it has
// not gone yet. It appends to waits what the advertisement's contract
// waits on. Switch.routeMu and mu must be held.
func (s *rvSwitch) addSource(k advKey, d []linkctl.AttrDetail, src *router, waits []*linkAck) []*linkAck {
	e := s.adverts[k]
	if e == nil {
		e = &advEntry{attrs: d, from: map[*router]int{}}
		s.adverts[k] = e
	}
	if src == nil {
		e.local++
	} else {
		e.from[src]++
		if e.from[src] == 1 {
			waits = append(waits, src.addRoute(typeKey(k.typ), 0)...)
		}
	}
	if e.next == nil {
		s.sendOn(k, e)
	}
	if e.last != nil {
		waits = append(waits, e.last)
	}
	return waits
}

// removeSource counts one source fewer of entry k, releasing k's type at
// src on its last advertisement there, and withdraws the entry from the
// path when it has no source left. Switch.routeMu and mu must be held.
func (s *rvSwitch) removeSource(k advKey, src *router) {
	e := s.adverts[k]
	if e == nil {
		return
	}
	if src == nil {
		e.local--
	} else {
		if e.from[src]--; e.from[src] <= 0 {
			delete(e.from, src)
			src.removeRoute(typeKey(k.typ), 0)
		}
	}
	if e.local > 0 || len(e.from) > 0 {
		return
	}
	if e.next != nil {
		e.next.sendControl(&linkctl.Unadvertise{Key: e.key})
	}
	delete(s.adverts, k)
}

// sendOn sends entry k on to the next hop toward its type's rendezvous
// switch, if this switch is not it and has a link there. mu must be held.
func (s *rvSwitch) sendOn(k advKey, e *advEntry) {
	next := s.nextHop(k.typ)
	if next == nil {
		return
	}
	s.nextKey++
	key := s.nextKey
	e.next, e.key = next, key
	e.last = next.sendAcked(func(ack uint64) linkctl.Message {
		return &linkctl.Advertise{Key: key, Ack: ack, Type: k.typ, Attrs: e.attrs}
	})
}

// rerouteAdverts moves the advertisements whose next hop toward their
// rendezvous switch has changed: the new next hop gets the advertisement
// before the old one has it withdrawn.
func (s *rvSwitch) rerouteAdverts() {
	s.sw.routeMu.Lock()
	defer s.sw.routeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]advKey, 0, len(s.adverts))
	for k := range s.adverts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b advKey) int {
		return cmp.Or(cmp.Compare(a.typ, b.typ), cmp.Compare(a.detail, b.detail))
	})
	for _, k := range keys {
		e := s.adverts[k]
		if s.nextHop(k.typ) == e.next {
			continue
		}
		old, oldKey := e.next, e.key
		e.next, e.last = nil, nil
		s.sendOn(k, e)
		if old != nil {
			old.sendControl(&linkctl.Unadvertise{Key: oldKey})
		}
	}
}

// sendAcked sends the control message build returns for a fresh
// acknowledgement number and returns what waits for the peer's Ack.
func (r *router) sendAcked(build func(ack uint64) linkctl.Message) *linkAck {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return closedAck(r.peer)
	}
	n, a := r.newAck()
	if err := r.sendControl(build(n)); err != nil {
		delete(r.acks, n)
		a.err = err
		close(a.done)
	}
	return a
}

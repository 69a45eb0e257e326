package sion

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
)

// gatewayTTL is the TTL a gateway registers filters with in the other
// place: the receiving switch lowers it to its place's TTL.
const gatewayTTL = 65535

// maxInterestPlaces bounds how many places interest may come through: no
// event crosses more than DefaultTTL gateways (Control.PlaceTTL).
const maxInterestPlaces = DefaultTTL + 1

// gatewayRouters returns the routers of the switch's gateways.
func (sw *Switch) gatewayRouters() []*router {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	var out []*router
	for _, r := range sw.routers {
		if gatewayOf(r) != nil {
			out = append(out, r)
		}
	}
	return out
}

// gatewayOf returns the gateway end of r, or nil when r is not a
// gateway's.
func gatewayOf(r *router) *gatewayEnd {
	ge, _ := r.end.(*gatewayEnd)
	return ge
}

// gatewayEnd is what makes a router one end of a gateway. in: events
// enter this switch's place through it (this end registers the place's
// interest at the other end); out: events leave through it (this end
// installs the other place's interest). The requesting end (g set)
// converts both ways; the other end passes filters and events verbatim.
type gatewayEnd struct {
	name      string
	peerPlace string
	g         *Gateway // the requesting end's handle; nil at the other end
	in, out   bool
	cnt       *[2]gwCounters // by GatewayDirection: Import = into this place; the Gateway's, or the switch's for the name and place (acceptedCounters)

	routeMu sync.Mutex            // taken under the switch's routeMu, before the router's mu
	routes  map[routeKey]*gwRoute // routeMu; this place's keys → the keys registered at the peer

	proxyMu sync.Mutex          // never taken under the switch's routeMu
	proxies map[uint64]*gwProxy // proxyMu; the peer's keys → subscriptions installed here
}

// gwRoute is one key of this place's interest and the keys it became at
// the peer.
type gwRoute struct {
	refs int
	keys []routeKey
}

// gwProxy is one key of the other place's interest and the subscriptions
// it became here.
type gwProxy struct {
	text   string
	places []string
	subs   []*Subscription
}

func (e *gatewayEnd) requested() bool { return e.g != nil }

// conv returns the conversion of direction d, or nil at the other end.
func (e *gatewayEnd) conv(d GatewayDirection) *gwConv {
	if e.g == nil {
		return nil
	}
	return e.g.conv[d].Load()
}

func (e *gatewayEnd) fill(r *router, info *GatewayInfo) {
	r.mu.Lock()
	info.State, info.Since = r.upSince()
	info.Routes = len(r.routes)
	r.mu.Unlock()
	r.sess.mu.Lock()
	for _, sub := range r.sess.subs {
		if !sub.installed.Load() {
			continue // events cannot match it yet (see LinkInfo.Proxies)
		}
		info.Proxies++
		info.Filters = append(info.Filters, sub.f.String())
	}
	r.sess.mu.Unlock()
	slices.Sort(info.Filters)
}

// interestPath returns the places the interest of key came through, this
// place last, and whether it may cross to the peer's place.
func (e *gatewayEnd) interestPath(here string, places []string) ([]string, bool) {
	if places == nil {
		places = []string{here}
	}
	return places, !slices.Contains(places, e.peerPlace) && len(places) < maxInterestPlaces
}

// deriveKeys returns the keys this place's interest text becomes at the
// peer.
func (e *gatewayEnd) deriveKeys(r *router, text string, path []string) []routeKey {
	texts := []string{text}
	if c := e.conv(Import); c != nil {
		var err error
		if texts, err = c.derive(text); err != nil {
			r.sw.log.Warn("sion: gateway cannot convert a filter; the events it selects do not cross", "switch", r.sw.cfg.Name, "gateway", e.name, "filter", text, "err", err)
			return nil
		}
	}
	keys := make([]routeKey, len(texts))
	for i, t := range texts {
		keys[i] = newRouteKey(t, path)
	}
	return keys
}

// addRoute registers at the peer the filters this place's interest key
// becomes there.
func (e *gatewayEnd) addRoute(r *router, key routeKey, _ int) []*linkAck {
	if !e.in {
		return nil
	}
	path, ok := e.interestPath(r.sw.place.Name(), key.placeList())
	if !ok || isDiscoveryKey(key.filter) {
		return nil
	}
	e.routeMu.Lock()
	defer e.routeMu.Unlock()
	if e.routes == nil {
		e.routes = map[routeKey]*gwRoute{}
	}
	rt := e.routes[key]
	if rt == nil {
		rt = &gwRoute{keys: e.deriveKeys(r, key.filter, path)}
		e.routes[key] = rt
	}
	rt.refs++
	out := make([]*linkAck, 0, len(rt.keys))
	for _, k := range rt.keys {
		out = append(out, r.register(k, gatewayTTL))
	}
	return out
}

// removeRoute undoes one addRoute.
func (e *gatewayEnd) removeRoute(r *router, key routeKey, _ int) {
	e.routeMu.Lock()
	defer e.routeMu.Unlock()
	rt := e.routes[key]
	if rt == nil {
		return
	}
	for _, k := range rt.keys {
		r.release(k, gatewayTTL)
	}
	if rt.refs--; rt.refs == 0 {
		delete(e.routes, key)
	}
}

// rederiveRoutes converts this place's interest again after the Import
// conversion changed: new keys are registered before old ones are
// released. It returns the new registers' acknowledgements.
func (e *gatewayEnd) rederiveRoutes(r *router) []*linkAck {
	r.sw.routeMu.Lock()
	defer r.sw.routeMu.Unlock()
	e.routeMu.Lock()
	defer e.routeMu.Unlock()
	var waits []*linkAck
	for key, rt := range e.routes {
		path, _ := e.interestPath(r.sw.place.Name(), key.placeList())
		keys := e.deriveKeys(r, key.filter, path)
		for _, k := range keys {
			if !slices.Contains(rt.keys, k) {
				for range rt.refs {
					waits = append(waits, r.register(k, gatewayTTL))
				}
			}
		}
		for _, k := range rt.keys {
			if !slices.Contains(keys, k) {
				for range rt.refs {
					r.release(k, gatewayTTL)
				}
			}
		}
		rt.keys = keys
	}
	return waits
}

// deriveProxies returns the filters the other place's interest text
// becomes here.
func (e *gatewayEnd) deriveProxies(r *router, text string) ([]*filter.Filter, error) {
	if c := e.conv(Export); c != nil {
		texts, err := c.derive(text)
		if err != nil {
			return nil, err
		}
		out := make([]*filter.Filter, 0, len(texts))
		for _, t := range texts {
			f, err := filter.Compile(t)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
		return out, nil
	}
	f, err := filter.Compile(text)
	if err != nil {
		return nil, err
	}
	return []*filter.Filter{f}, nil
}

// installProxies installs the subscriptions for the other place's
// interest text with places; it returns them and the acknowledgements of
// their propagation in this place.
func (e *gatewayEnd) installProxies(r *router, text string, places []string) ([]*Subscription, []*linkAck, error) {
	fs, err := e.deriveProxies(r, text)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	here := append(slices.Clone(places), r.sw.place.Name())
	var subs []*Subscription
	var waits []*linkAck
	for _, f := range fs {
		sub := newSubscription(r.sess, f, subConfig{ttl: r.sw.place.cfg.TTL}, 0, here)
		r.sess.mu.Lock()
		r.sess.subs[sub.id] = sub
		r.sess.mu.Unlock()
		if hook := r.sw.installing.Load(); hook != nil {
			(*hook)(r, sub)
		}
		w, err := r.sw.install(sub)
		if err != nil {
			r.sess.forget(sub)
			for _, s := range subs {
				r.sess.forget(s)
				s.cancel()
			}
			return nil, nil, err
		}
		subs = append(subs, sub)
		waits = append(waits, w...)
	}
	return subs, waits, nil
}

// install handles the peer's register: the other place's interest,
// installed here as proxy subscriptions (converted at the requesting
// end), acknowledged once this place has them (S2).
func (e *gatewayEnd) install(r *router, m *linkctl.Register) error {
	key, text, n, places := m.Key, m.Filter, m.Ack, m.Places
	var subs []*Subscription
	var waits []*linkAck
	var err error
	if e.out && !slices.Contains(places, r.sw.place.Name()) && len(places) < maxInterestPlaces {
		subs, waits, err = e.installProxies(r, text, places)
	}
	e.proxyMu.Lock()
	if e.proxies == nil {
		e.proxies = map[uint64]*gwProxy{}
	}
	old := e.proxies[key]
	e.proxies[key] = &gwProxy{text: text, places: places, subs: subs}
	e.proxyMu.Unlock()
	if old != nil {
		cancelAll(r, old.subs)
	}
	msg := ""
	if err != nil {
		msg = fmt.Sprintf("gateway %q at switch %q: %v", e.name, r.sw.cfg.Name, err)
	}
	r.ackAfter(n, msg, waits)
	return nil
}

// release handles the peer's release of key.
func (e *gatewayEnd) release(r *router, key uint64) error {
	e.proxyMu.Lock()
	p, ok := e.proxies[key]
	delete(e.proxies, key)
	e.proxyMu.Unlock()
	if !ok {
		return fmt.Errorf("release of key %d, which is not registered", key)
	}
	cancelAll(r, p.subs)
	return nil
}

func cancelAll(r *router, subs []*Subscription) {
	for _, s := range subs {
		r.sess.forget(s)
		s.cancel()
	}
}

// rederiveProxies converts the other place's interest again after the
// Export conversion changed: the new subscriptions go in before the old
// come out. It returns their acknowledgements.
func (e *gatewayEnd) rederiveProxies(r *router) []*linkAck {
	e.proxyMu.Lock()
	defer e.proxyMu.Unlock()
	var waits []*linkAck
	for _, p := range e.proxies {
		if !e.out || slices.Contains(p.places, r.sw.place.Name()) {
			continue
		}
		subs, w, err := e.installProxies(r, p.text, p.places)
		if err != nil {
			r.sw.log.Warn("sion: gateway cannot convert a filter; the events it selects do not cross", "switch", r.sw.cfg.Name, "gateway", e.name, "filter", p.text, "err", err)
		}
		cancelAll(r, p.subs)
		p.subs = subs
		waits = append(waits, w...)
	}
	return waits
}

// forward sends event e, which this end's proxies fired for, into the
// other place: checked against the firewall and converted at the
// requesting end, with PlaceTTL lowered and PlaceHops raised.
func (e *gatewayEnd) forward(r *router, ev *Event, _ []hitSub, _ *eventFrames) {
	cnt := &e.cnt[Export]
	switch {
	case !e.out:
		return
	case ev.Control.PlaceTTL <= 0 || len(ev.Control.Path) >= wire.MaxPath:
		cnt.expired.Add(1)
		return
	case slices.Contains(ev.Control.Path, e.peerPlace):
		cnt.looped.Add(1)
		return
	case ontology.IsRouted(ev.Type):
		return // discovery stays in its place: a search joins places instead (S1)
	}
	w := toWireEvent(ev)
	converted := false
	if c := e.conv(Export); c != nil {
		typ, attrs, err, ok := c.convert(ev, cnt)
		if err != nil {
			r.sw.log.Warn("sion: gateway cannot convert an event", "switch", r.sw.cfg.Name, "gateway", e.name, "event", ev, "err", err)
		}
		if !ok {
			return
		}
		converted = c.mapping != nil
		w.Type, w.Attrs = typ, attrs
	}
	w.PlaceTTL--
	w.PlaceHops++
	f, err := wire.EncodeLimits(nil, &wire.Forward{Event: w}, r.lim)
	if err != nil {
		cnt.refused.Add(1)
		r.sw.log.Warn("sion: event does not fit the gateway's frames", "switch", r.sw.cfg.Name, "gateway", e.name, "event", ev.ID, "err", err)
		return
	}
	if !r.sendData(f) {
		cnt.dropped.Add(1)
		return
	}
	cnt.forwarded.Add(1)
	if converted {
		cnt.converted.Add(1)
	}
}

// receive publishes an event from the other place in this one: checked
// against the firewall and converted at the requesting end, admitted as
// Publish would, with this place's TTL and this place appended to its
// path. An event that has been in this place, or entered it already, is
// dropped.
func (e *gatewayEnd) receive(ctx context.Context, r *router, w *wire.Event) {
	cnt := &e.cnt[Import]
	sw := r.sw
	here := sw.place.Name()
	switch {
	case !e.in:
		cnt.refused.Add(1)
		return
	case slices.Contains(w.Path, here):
		cnt.looped.Add(1)
		return
	case w.PlaceTTL < 0 || w.PlaceHops < 0 || len(w.Path) >= wire.MaxPath:
		cnt.expired.Add(1)
		return
	}
	in, err := fromWireEvent(w)
	if err == nil && in.ID.IsZero() {
		err = fmt.Errorf("%w: event without an ID", ErrInvalidEvent)
	}
	if err != nil {
		cnt.refused.Add(1)
		sw.log.Warn("sion: event from gateway refused", "switch", sw.cfg.Name, "gateway", e.name, "err", err)
		return
	}
	converted := false
	if c := e.conv(Import); c != nil {
		typ, attrs, err, ok := c.convert(in, cnt)
		if err != nil {
			sw.log.Warn("sion: gateway cannot convert an event", "switch", sw.cfg.Name, "gateway", e.name, "event", in, "err", err)
		}
		if !ok {
			return
		}
		converted = c.mapping != nil
		in.Type, in.Attrs = typ, attrs
	}
	ev, err := sw.place.admit(in, admitConverted)
	if err != nil {
		cnt.refused.Add(1)
		sw.log.Warn("sion: event from gateway refused", "switch", sw.cfg.Name, "gateway", e.name, "event", in.ID, "err", err)
		return
	}
	ev.ID = in.ID
	ev.Control = Control{
		TTL: sw.place.cfg.TTL, PlaceTTL: int(w.PlaceTTL), PlaceHops: int(w.PlaceHops),
		Origin: w.Origin, Place: w.Place, Path: append(slices.Clip(w.Path), here),
	}
	if sw.seen.add(ev.ID) {
		cnt.duplicates.Add(1)
		r.duplicates.Add(1)
		return
	}
	cnt.forwarded.Add(1)
	if converted {
		cnt.converted.Add(1)
	}
	if err := sw.deliver(ctx, ctx.Done(), r.sess, ev); err != nil && ctx.Err() == nil {
		sw.log.Warn("sion: event from gateway not delivered everywhere", "switch", sw.cfg.Name, "gateway", e.name, "event", ev.ID, "err", err)
	}
}

func (*gatewayEnd) inPlace() bool { return false }

func (*gatewayEnd) tree() bool { return false }

func (e *gatewayEnd) via() string { return e.name }

// marker passes a marker on into the other place while it may still
// cross gateways (Switch.Flush: places and gateways may form cycles).
func (*gatewayEnd) marker(r *router, ttl, gateways int) *linkAck {
	if gateways <= 0 {
		return nil
	}
	return r.marker(ttl, gateways-1)
}

// control handles the other end's Leave: the federation ends and is not
// re-established. A gateway carries no other control of its own (probes
// stay in their place).
func (e *gatewayEnd) control(r *router, m linkctl.Message) (bool, error) {
	if _, ok := m.(*linkctl.Leave); !ok {
		return false, nil
	}
	if e.g != nil {
		e.g.mu.Lock()
		e.g.released = true
		e.g.mu.Unlock()
	}
	r.close()
	return true, nil
}

// isDiscoveryKey reports whether a route key's filter text selects
// discovery events, which stay in their place (gateways do not carry
// them).
func isDiscoveryKey(text string) bool {
	f, err := filter.Parse(text)
	return err == nil && ontology.IsRouted(f.Type)
}

package sion

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/wire"
)

// The switch's side of routing over shared links (S1 event paths, S2
// contracts); router.go holds one link's end.

// routeKeyOf returns the key sub propagates under the place's routing
// mode — the proxy filter's text — and the TTL it needs the key to have
// at the peer; false when it does not propagate (TTL spent, or the mode
// floods).
func (sw *Switch) routeKeyOf(sub *Subscription) (string, int, bool) {
	if sub.ttl < 1 {
		return "", 0, false
	}
	switch sw.place.cfg.Routing {
	case RouteByFilter:
		return routeKey(sub.f.String(), sub.places), sub.ttl - 1, true
	case RouteByEventType:
		return routeKey(typeFilter(sub.f.Type()), sub.places), sub.ttl - 1, true
	}
	return "", 0, false
}

// routeKey returns the key of a proxy filter's text with the places its
// interest came through (nil: this place alone): interest from other
// places is kept apart, so that gateways can tell where it has been.
func routeKey(text string, places []string) string {
	if len(places) == 0 {
		return text
	}
	return text + "\x00" + strings.Join(places, "\n")
}

// splitRouteKey returns the filter text and places of a key.
func splitRouteKey(key string) (string, []string) {
	text, places, ok := strings.Cut(key, "\x00")
	if !ok {
		return key, nil
	}
	return text, strings.Split(places, "\n")
}

// typeFilter returns the text of the filter on event type t alone.
func typeFilter(t string) string {
	return filter.MustCompile("{type ⊑ " + t + "}").String()
}

// floodKey is what a router registers at its peer when the place routes
// unconditionally: every event, no further.
var floodKey = filter.MustCompile("{}").String()

// install puts sub's filter into the index and propagates it over the
// switch's links; it returns the routes whose acknowledgements make the
// subscription contract (S2).
func (sw *Switch) install(sub *Subscription) ([]*linkAck, error) {
	if t := sub.f.Type(); t != filter.AnyType {
		if _, ok := sw.place.Ontology().Lookup(t); !ok {
			return nil, fmt.Errorf("%w %q in filter %s", ErrUnknownEventType, t, sub.f)
		}
	}
	sw.mu.Lock()
	if sw.closed && !sub.sess.sink.installsWhileClosing() {
		sw.mu.Unlock()
		return nil, fmt.Errorf("%w: switch %q", ErrClosed, sw.cfg.Name)
	}
	sw.subs[sub.id] = sub
	sw.mu.Unlock()
	if err := sw.index.Add(sub.id, sub.f); err != nil {
		sw.mu.Lock()
		delete(sw.subs, sub.id)
		sw.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	sw.mu.RLock()
	still := sw.subs[sub.id] == sub
	sw.mu.RUnlock()
	if !still { // unregistered while it was being added: take it out again
		sw.index.Remove(sub.id)
		return nil, fmt.Errorf("%w: subscription %d was cancelled while it was made", ErrClosed, sub.id)
	}
	return sw.routeAdd(sub), nil
}

// routeAdd propagates sub over every link but its own.
func (sw *Switch) routeAdd(sub *Subscription) []*linkAck {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	sw.mu.RLock()
	live := sw.subs[sub.id] == sub
	sw.mu.RUnlock()
	if !live {
		return nil
	}
	k, ttl, ok := sw.routeKeyOf(sub)
	if !ok {
		return nil
	}
	sw.routed[sub.id] = sub
	var out []*linkAck
	for _, r := range sw.routers {
		if r.sess != sub.sess {
			out = append(out, r.addRoute(k, ttl)...)
		}
	}
	return out
}

// routeRemove withdraws what routeAdd propagated for sub.
func (sw *Switch) routeRemove(sub *Subscription) {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	if _, ok := sw.routed[sub.id]; !ok {
		return
	}
	delete(sw.routed, sub.id)
	k, ttl, _ := sw.routeKeyOf(sub)
	for _, r := range sw.routers {
		if r.sess != sub.sess {
			r.removeRoute(k, ttl)
		}
	}
}

// addRouter puts r into the switch's table and queues, in order, its
// initial registers — the filters of every subscription the switch has
// propagated, so that whatever was subscribed or cancelled while the link
// was down is right — and a Synced. It returns the initial routes.
func (sw *Switch) addRouter(r *router) []*linkAck {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	sw.routers = append(sw.routers, r)
	var out []*linkAck
	if sw.place.cfg.Routing == RouteUnconditional {
		out = append(out, r.addRoute(floodKey, 0)...)
	} else {
		subs := make([]*Subscription, 0, len(sw.routed))
		for _, sub := range sw.routed {
			subs = append(subs, sub)
		}
		slices.SortFunc(subs, func(a, b *Subscription) int { return cmp.Compare(a.id, b.id) })
		for _, sub := range subs {
			if sub.sess == r.sess {
				continue
			}
			k, ttl, _ := sw.routeKeyOf(sub)
			out = append(out, r.addRoute(k, ttl)...)
		}
	}
	r.sendControl(typeLinkSynced)
	return out
}

// removeRouter takes r out of the switch's table; its counters go into
// the totals of ended links once it has shut down (endRouter).
func (sw *Switch) removeRouter(r *router) {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	sw.routers = slices.DeleteFunc(sw.routers, func(x *router) bool { return x == r })
	sw.ending = append(sw.ending, r)
}

// endRouter moves a shut-down router's final counters into the totals.
func (sw *Switch) endRouter(r *router) {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	sw.ending = slices.DeleteFunc(sw.ending, func(x *router) bool { return x == r })
	if r.gw == nil { // a gateway's counters are its own (Gateways)
		sw.ended.add(r)
	}
}

// sendMarkers sends a marker on every link but except's, and over
// gateways while it may still cross some (gateways: how many more), and
// returns where their acknowledgements arrive. Places joined by gateways
// may form cycles, so a marker crosses a bounded number of gateways.
func (sw *Switch) sendMarkers(except *router, ttl, gateways int) []*linkAck {
	sw.routeMu.Lock()
	routers := slices.Clone(sw.routers)
	sw.routeMu.Unlock()
	var out []*linkAck
	for _, r := range routers {
		switch {
		case r == except:
		case r.gw == nil:
			out = append(out, r.marker(ttl, gateways))
		case gateways > 0:
			out = append(out, r.marker(ttl, gateways-1))
		}
	}
	return out
}

// Flush returns once every event this switch forwarded over its shared
// links before the call has been handed to the subscriptions of every
// switch it reached (within the place's TTL) in this place and in the
// places one gateway away: a marker follows the events along every link
// and gateway, and each switch acknowledges it after passing it on and
// hearing back (S2 markers); it crosses one gateway at most, since places
// and gateways may form cycles. Links that end meanwhile count as done.
// It returns ctx's error if ctx ends first. Cost: two control events per
// link in the place. Safe for concurrent use.
func (sw *Switch) Flush(ctx context.Context) error {
	if sw.isClosed() {
		return fmt.Errorf("%w: switch %q", ErrClosed, sw.cfg.Name)
	}
	for _, a := range sw.sendMarkers(nil, sw.place.cfg.TTL, 1) {
		select {
		case <-a.done:
			if a.err != nil {
				return a.err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// awaitContract waits until every route of a new subscription is
// acknowledged (S2 subscription contract), the place's ContractTimeout
// passes, or ctx ends.
func (sw *Switch) awaitContract(ctx context.Context, sub *Subscription, routes []*linkAck) error {
	t := time.NewTimer(sw.place.cfg.ContractTimeout)
	defer t.Stop()
	for _, rt := range routes {
		select {
		case <-rt.done:
			if rt.err != nil {
				return fmt.Errorf("%w: filter %s: %w", ErrNotGranted, sub.f, rt.err)
			}
		case <-t.C:
			return fmt.Errorf("%w: filter %s is not active everywhere within %v: the link to %q has not acknowledged it", ErrNotGranted, sub.f, sw.place.cfg.ContractTimeout, rt.peer)
		case <-ctx.Done():
			return fmt.Errorf("%w: filter %s: %w", ErrNotGranted, sub.f, ctx.Err())
		}
	}
	if sw.isClosed() { // its links ended because the switch closes
		return fmt.Errorf("%w: switch %q closed while the subscription was made", ErrClosed, sw.cfg.Name)
	}
	return nil
}

func (sw *Switch) isClosed() bool {
	sw.mu.RLock()
	defer sw.mu.RUnlock()
	return sw.closed
}

// readmit validates an event that arrived over a shared link as Publish
// would, keeping its ID and control information (TTL at most the place's).
func (sw *Switch) readmit(w *wire.Event) (*Event, error) {
	in, err := fromWireEvent(w)
	if err != nil {
		return nil, err
	}
	if in.ID.IsZero() {
		return nil, fmt.Errorf("%w: event without an ID", ErrInvalidEvent)
	}
	c := in.Control
	if c.TTL < 0 || c.Hops < 0 || c.PlaceTTL < 0 || c.PlaceHops < 0 {
		return nil, fmt.Errorf("%w: negative TTL or hop count in %+v", ErrInvalidEvent, c)
	}
	e, err := sw.place.admit(in, false, true) // its payload was parsed where it was published
	if err != nil {
		return nil, err
	}
	e.ID = in.ID
	c.TTL = min(c.TTL, sw.place.cfg.TTL)
	e.Control = c
	return e, nil
}

// seenIDs remembers the IDs of recent events that crossed the switch's
// links, in two generations of seenGeneration IDs, so that an event
// arriving twice is dropped (DESIGN.md: a safety net, not the mechanism).
type seenIDs struct {
	mu       sync.Mutex
	cur, old map[EventID]struct{}
}

const seenGeneration = 1 << 16

// add records id and reports whether it was there already.
func (s *seenIDs) add(id EventID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[id]; ok {
		return true
	}
	if _, ok := s.old[id]; ok {
		return true
	}
	if s.cur == nil || len(s.cur) >= seenGeneration {
		s.old, s.cur = s.cur, make(map[EventID]struct{}, 1024)
	}
	s.cur[id] = struct{}{}
	return false
}

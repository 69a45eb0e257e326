package sion

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/transport"
)

// Routing is how the switches of an event place propagate interest — the
// keys a subscription registers at the peers of its switch — over their
// links (the routing seam, DESIGN.md "Seams"; S1 routing modes, S3
// rendezvous routing). A place has one (PlaceConfig.Routing); the shared
// code of the switch and its routers never asks which.
//
// Events need no routing of their own: a key a router registers at its
// peer becomes a proxy filter there (S1 event path), and an event
// crosses a link when a proxy filter of the link matches it in the
// switch's filter.Index, as it reaches any session.
//
// A Routing value is shared by every switch of its place and safe for
// concurrent use. Its methods are unexported: a new routing is written in
// this package, in a file of its own (routing_*.go). Its one method,
// attach, gives each switch its own part (switchRouting), which holds what
// the switch keeps for the routing — nothing for the S1 modes, or an
// advertisement table when their place requires advertisements
// (routing_advertised.go); the overlay, advertisement table and traffic
// meter for S3's.
type Routing interface {
	// String names the routing ("by-filter", "by-event-type",
	// "unconditional", "rendezvous").
	String() string
	// attach returns sw's part of the routing; NewSwitch calls it once.
	attach(sw *Switch) switchRouting
}

// switchRouting is one switch's part of its place's routing. The switch
// calls keys and linkKeys under Switch.routeMu; leave from Switch.Leave
// and close from Switch.Close, once, with no lock held.
//
//   - keys(r, sub, reg) calls reg for each key sub registers at r's
//     peer, with the TTL the peer propagates it with: none, one, or —
//     toward several rendezvous switches that share a next hop — several.
//     Subscriptions whose keys are equal share one registration per link,
//     reference-counted (register on 0→1, release on 1→0). The S1 modes
//     register the subscription's key over every link but the one it came
//     from (everyOtherLink); S3's over the link toward the rendezvous
//     switch of each of its event types.
//   - linkUp(r) is told that link r comes up, before the subscriptions'
//     keys are registered over it, and returns the keys the link
//     registers at its peer whatever the subscriptions (flooding
//     registers "every event") and what the Synced that ends this side's
//     initial exchange waits for (the acknowledgements of the
//     advertisements it sent over r, in an S1 place that requires them);
//     linkDown(r) that it has ended.
//
// What a switch registered for a subscription is recorded (routedSub), so
// that its cancellation releases exactly that, and a routing whose answer
// changes (an overlay that learns a closer switch) calls Switch.reroute.
type switchRouting interface {
	keys(r *router, sub *Subscription, reg func(k routeKey, ttl int))
	linkUp(r *router) (keys []routeKey, waits []*linkAck)
	linkDown(r *router)
	// join makes the switch a member of the routing's overlay (Switch.Join)
	// and acceptOverlay serves a neighbour's overlay link request; a
	// routing without an overlay refuses both.
	join(ctx context.Context, tr transport.Transport, addr string) error
	acceptOverlay(ctx context.Context, conn transport.Conn, sess *Session, req *linkctl.OverlayLink)
	// advertise propagates session s's advertisements (Session.Advertise,
	// already checked) and withdraw withdraws them all as s ends;
	// publishing admits event e that s publishes, or says why not.
	advertise(ctx context.Context, s *Session, ads []Advertisement) error
	withdraw(s *Session)
	publishing(s *Session, e *Event) error
	// routed is told that sub has been propagated (Switch.routeAdd) and
	// returns what else its contract waits on (S3: the end of a bypass
	// that would keep events from it).
	routed(sub *Subscription) []*linkAck
	// unrouted is told that sub has ended (Switch.routeRemove).
	unrouted(sub *Subscription)
	// matched is told that an event has been matched, before the switch
	// lets it leave its matching (Switch.matching), and records in shared
	// the routing state its links are chosen by (S3: the bypass rules), one
	// version per event. Reading it there lets a change order itself
	// against the filter index with matching.wait (bypass.go).
	matched(shared *eventFrames)
	// linkControl handles a control message of the routing's own that
	// arrived over shared link r (sharedEnd.control): an Advertise or
	// Unadvertise in a place whose S1 routing keeps an advertisement
	// table (PlaceConfig.RequireAdvertisements), a Bleeder in a managed
	// place (S2). It reports false for one it does not carry, which ends
	// the link (ErrProtocol), as does an error. Called from r's reader.
	linkControl(r *router, m linkctl.Message) (bool, error)
	// acceptAgent serves an agent's request to manage the switch (S2);
	// a routing that is not managed refuses it.
	acceptAgent(ctx context.Context, conn transport.Conn, sess *Session, req *linkctl.Manage)
	// leave leaves whatever structure the routing keeps beyond the
	// place's tree (S3: the overlay), telling the neighbours; ctx bounds
	// it.
	leave(ctx context.Context) error
	// close ends the routing's goroutines and waits for them.
	close()
}

// stateless adapts an S1 routing, which keeps nothing per switch, to
// switchRouting. checkAds makes Publish refuse what the publishing
// session has not advertised (PlaceConfig.RequireAdvertisements under
// RouteUnconditional, which has nothing to prune).
type stateless struct {
	key      func(sub *Subscription) (routeKey, int, bool)
	perLink  []routeKey
	checkAds bool
}

func (s stateless) keys(r *router, sub *Subscription, reg func(routeKey, int)) {
	if !everyOtherLink(r, sub) {
		return
	}
	if k, ttl, ok := s.key(sub); ok {
		reg(k, ttl)
	}
}

func (s stateless) linkUp(*router) ([]routeKey, []*linkAck) { return s.perLink, nil }
func (stateless) linkDown(*router)                          {}
func (stateless) leave(context.Context) error               { return nil }
func (stateless) close()                                    {}

// advertise accepts the advertisements: Session.Advertise keeps them on
// the session (for S2's agent); the S1 modes route by interest alone.
func (stateless) advertise(context.Context, *Session, []Advertisement) error { return nil }
func (stateless) withdraw(*Session)                                          {}
func (stateless) routed(*Subscription) []*linkAck                            { return nil }
func (stateless) unrouted(*Subscription)                                     {}
func (stateless) matched(*eventFrames)                                       {}

// linkControl refuses what a routing carries over shared links of its own
// (advertisements, bleeders): these routings carry none.
func (stateless) linkControl(*router, linkctl.Message) (bool, error) { return false, nil }

func (stateless) acceptAgent(ctx context.Context, conn transport.Conn, sess *Session, _ *linkctl.Manage) {
	refuseAgent(ctx, conn, sess)
}

// refuseAgent refuses an agent's request to manage a switch whose place
// is not managed.
func refuseAgent(ctx context.Context, conn transport.Conn, sess *Session) {
	sess.sw.refuseRequest(ctx, conn, "sion: agent refused", codeLinkRefused, fmt.Errorf("%w: place %q is not managed (RouteManaged); it has no agent", ErrLinkRefused, sess.sw.place.Name()))
}

// publishing admits every event, or, with checkAds, those the session has
// advertised.
func (s stateless) publishing(sess *Session, e *Event) error {
	if !s.checkAds {
		return nil
	}
	return advertised(sess.sw.place.Ontology(), sess, e)
}

func (stateless) join(context.Context, transport.Transport, string) error {
	return fmt.Errorf("%w: Join is for places routed by rendezvous (RouteByRendezvous); link the switches of this place with Link", ErrInvalidConfig)
}

func (stateless) acceptOverlay(ctx context.Context, conn transport.Conn, sess *Session, _ *linkctl.OverlayLink) {
	sess.sw.refuseRequest(ctx, conn, "sion: overlay link refused", codeLinkRefused, fmt.Errorf("%w: place %q is not routed by rendezvous; it has no overlay", ErrLinkRefused, sess.sw.place.Name()))
}

// The S1 routing modes (PlaceConfig.Routing) are RouteByFilter (the
// default), RouteByEventType and RouteUnconditional, each in a file of its
// own. Each router registers at its peer by its own switch's place's
// routing, so switches whose places say different modes still deliver
// exactly; use one per place to get what it promises.

// RoutingMode is the former name of Routing.
//
// Deprecated: use Routing; the modes are its values RouteByFilter,
// RouteByEventType and RouteUnconditional.
type RoutingMode = Routing

// everyOtherLink is the S1 modes' choice of links: a key goes
// over every link of the switch but the one whose proxy subscription sub
// is (interest never goes back where it came from).
func everyOtherLink(r *router, sub *Subscription) bool { return r.sess != sub.sess }

// routeKey is a key a router registers at its peer: a proxy filter's
// canonical text and, for interest that came from other places through
// gateways, those places, this one last — kept apart from this place's
// own interest in the same filter, so that gateways can tell where
// interest has been. It is comparable (a map key).
type routeKey struct {
	filter string
	places string // the places joined by "\n" (names have no newline: checkName); "" for this place's own
}

// newRouteKey returns the key of a proxy filter's text with the places
// its interest came through (nil: this place alone).
func newRouteKey(text string, places []string) routeKey {
	return routeKey{filter: text, places: strings.Join(places, "\n")}
}

// placeList returns the places of the key, nil for this place's own.
func (k routeKey) placeList() []string {
	if k.places == "" {
		return nil
	}
	return strings.Split(k.places, "\n")
}

// The switch's side of routing over its links (S1 event paths, S2
// contracts); router.go holds one link's end.

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
	if sub.unregistered.Load() { // unregistered while it was being added: take it out again
		sw.index.Remove(sub.id)
		sw.mu.Lock()
		if sw.subs[sub.id] == sub {
			delete(sw.subs, sub.id)
		}
		sw.mu.Unlock()
		return nil, fmt.Errorf("%w: subscription %d was cancelled while it was made", ErrClosed, sub.id)
	}
	routes := sw.routeAdd(sub)
	sub.installed.Store(true)
	return routes, nil
}

// routedSub is a subscription the switch propagated and what it
// registered for it, link by link (routeMu).
type routedSub struct {
	sub  *Subscription
	regs []routeReg
}

// routeReg is one key registered over one link for a subscription.
type routeReg struct {
	r   *router
	k   routeKey
	ttl int
}

// routeAdd propagates sub over the switch's links as the routing says.
func (sw *Switch) routeAdd(sub *Subscription) []*linkAck {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	if sub.unregistered.Load() { // set before unregister's routeRemove, which waits for routeMu
		return nil
	}
	rs := &routedSub{sub: sub}
	var out []*linkAck
	for _, r := range sw.routers {
		out = sw.registerOver(r, rs, out)
	}
	sw.routed[sub.id] = rs
	return append(out, sw.routing.routed(sub)...)
}

// registerOver registers over r what the routing says rs's subscription
// needs there, records it, and appends the acknowledgements to out.
// routeMu must be held.
func (sw *Switch) registerOver(r *router, rs *routedSub, out []*linkAck) []*linkAck {
	sw.routing.keys(r, rs.sub, func(k routeKey, ttl int) {
		out = append(out, r.addRoute(k, ttl)...)
		rs.regs = append(rs.regs, routeReg{r: r, k: k, ttl: ttl})
	})
	return out
}

// routeRemove withdraws what routeAdd (and reroute) registered for sub.
func (sw *Switch) routeRemove(sub *Subscription) {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	rs, ok := sw.routed[sub.id]
	if !ok {
		return
	}
	delete(sw.routed, sub.id)
	sw.routing.unrouted(sub)
	for _, g := range rs.regs {
		g.r.removeRoute(g.k, g.ttl)
	}
}

// reroute asks the routing again what every propagated subscription
// registers over every link and makes it so: what is new is registered
// before what is gone is released, so interest the subscription had
// before is kept through the change. A registration that moves to
// another link (a next hop toward a rendezvous switch that changed) is
// released over the old one only once the new registers are
// acknowledged, or after the place's ContractTimeout (releaseAfter):
// the release and the register travel different paths, and the release
// must not arrive first. A routing whose answers changed (an overlay
// that learned or lost a switch, S3) calls it.
func (sw *Switch) reroute() {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	var acks []*linkAck
	var moved []routeReg
	for _, rs := range sw.routedInOrder() {
		old := rs.regs
		rs.regs = nil
		n := len(acks)
		for _, r := range sw.routers {
			acks = sw.registerOver(r, rs, acks)
		}
		m := len(moved)
		for _, g := range old {
			if slices.Contains(rs.regs, g) {
				g.r.removeRoute(g.k, g.ttl) // registered again over the same link: counted twice
			} else {
				moved = append(moved, g)
			}
		}
		if len(moved) == m {
			acks = acks[:n] // nothing of rs waits for them
		}
	}
	if len(moved) > 0 {
		sw.releaseAfter(acks, moved)
	}
}

// releaseAfter releases regs once every ack is done (acknowledged, or its
// link ended), after the place's ContractTimeout at the latest, in one
// goroutine per reroute that Close waits for; a reg whose link has ended
// meanwhile is skipped (removeRouter forgot it). When the switch closes
// first, nothing is released: its links end.
func (sw *Switch) releaseAfter(acks []*linkAck, regs []routeReg) {
	sw.releases.Go(func() {
		timeout := time.NewTimer(sw.place.cfg.ContractTimeout)
		defer timeout.Stop()
	wait:
		for _, a := range acks {
			select {
			case <-a.done:
			case <-timeout.C:
				break wait
			case <-sw.stopping:
				return
			}
		}
		sw.routeMu.Lock()
		defer sw.routeMu.Unlock()
		for _, g := range regs {
			if slices.Contains(sw.routers, g.r) {
				g.r.removeRoute(g.k, g.ttl)
			}
		}
	})
}

// rerouteOver is reroute for link r alone: it asks the routing again
// what every propagated subscription registers over r and makes it so,
// new before gone. A routing whose answers for r changed calls it (S1
// pruning: an advertisement appeared behind r, or the last one of a type
// went). routeMu must be held.
func (sw *Switch) rerouteOver(r *router) {
	for _, rs := range sw.routedInOrder() {
		var old []routeReg
		n := 0
		for _, g := range rs.regs {
			if g.r == r {
				old = append(old, g)
			} else {
				rs.regs[n] = g
				n++
			}
		}
		rs.regs = rs.regs[:n]
		sw.registerOver(r, rs, nil)
		for _, g := range old {
			r.removeRoute(g.k, g.ttl)
		}
	}
}

// routedInOrder returns the propagated subscriptions in the order they
// were made. routeMu must be held.
func (sw *Switch) routedInOrder() []*routedSub {
	subs := make([]*routedSub, 0, len(sw.routed))
	for _, rs := range sw.routed {
		subs = append(subs, rs)
	}
	slices.SortFunc(subs, func(a, b *routedSub) int { return cmp.Compare(a.sub.id, b.sub.id) })
	return subs
}

// addRouter puts r into the switch's table and queues, in order, its
// initial registers — the link's own keys, and the keys of every
// subscription the switch has propagated, so that whatever was subscribed
// or cancelled while the link was down is right — and a Synced. It
// returns the initial routes. When the routing sends more as the link
// comes up (the advertisement table, in an S1 place that requires
// advertisements), it returns their acknowledgements as before too, and
// leaves the Synced to the caller, to send once they are all back: the
// peer, whose link is up when the Synced arrives, then knows that this
// side has done everything the peer's coming up needs of it (the
// subscriptions behind the peer that this side's advertisements need are
// registered toward it).
func (sw *Switch) addRouter(r *router) (initial, before []*linkAck) {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	sw.routers = append(sw.routers, r)
	if r.end.inPlace() {
		key := sw.totalsKey(r.peer)
		r.totals = &key
	}
	keys, before := sw.routing.linkUp(r)
	initial = slices.Clone(before)
	for _, k := range keys {
		initial = append(initial, r.addRoute(k, 0)...)
	}
	for _, rs := range sw.routedInOrder() {
		initial = sw.registerOver(r, rs, initial)
	}
	if len(before) == 0 {
		r.sendControl(&linkctl.Synced{})
	}
	return initial, before
}

// removeRouter takes r out of the switch's table and forgets what the
// propagated subscriptions registered over it; its counters go into the
// totals of ended links once it has shut down (endRouter).
func (sw *Switch) removeRouter(r *router) {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	sw.routers = slices.DeleteFunc(sw.routers, func(x *router) bool { return x == r })
	sw.ending = append(sw.ending, r)
	sw.routing.linkDown(r)
	for _, rs := range sw.routed {
		rs.regs = slices.DeleteFunc(rs.regs, func(g routeReg) bool { return g.r == r })
	}
}

// endRouter moves a shut-down router's final counters into the totals.
func (sw *Switch) endRouter(r *router) {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	sw.ending = slices.DeleteFunc(sw.ending, func(x *router) bool { return x == r })
	if r.end.inPlace() { // a gateway's counters are its own (Gateways)
		sw.ended.add(r)
		sw.endedBy[sw.routerTotalsKey(r)].add(r)
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
		if r == except {
			continue
		}
		if a := r.end.marker(r, ttl, gateways); a != nil {
			out = append(out, a)
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
// It returns ctx's error if ctx ends first. Cost: two control messages per
// link in the place. In a place routed by rendezvous (S3) a marker crosses
// one overlay link only, since the overlay has cycles: Flush then covers
// the switch's overlay neighbours. Safe for concurrent use.
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

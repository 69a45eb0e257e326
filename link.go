package sion

import (
	"context"
	"fmt"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
)

// sharedEnd is a router's end of a shared link between two switches of
// one place (S1 SI-R): interest registers verbatim at the peer, the
// peer's registers install as proxy filters here, events cross with their
// TTL lowered and hops raised, and the link belongs to the place's tree
// (probes and Leave travel over it).
type sharedEnd struct {
	proxies map[uint64]*Subscription // reader only; the peer's keys installed here (nil: could not be)
}

func newSharedEnd() *sharedEnd { return &sharedEnd{proxies: map[uint64]*Subscription{}} }

func (*sharedEnd) inPlace() bool { return true }

func (*sharedEnd) tree() bool { return true }

func (*sharedEnd) via() string { return "" }

// addRoute registers key at the peer as it is, or, when the place says
// Covering, counts it under a key registered already that covers it
// (routes_cover.go).
func (*sharedEnd) addRoute(r *router, key routeKey, ttl int) []*linkAck {
	if r.sw.place.cfg.Covering {
		return []*linkAck{r.registerCovering(key, ttl)}
	}
	return []*linkAck{r.register(key, ttl)}
}

// removeRoute releases key at the peer, re-homing first what it covers
// when the place says Covering.
func (*sharedEnd) removeRoute(r *router, key routeKey, ttl int) {
	if r.sw.place.cfg.Covering {
		r.releaseCovering(key, ttl)
		return
	}
	r.release(key, ttl)
}

// install registers the peer's proxy filter on this switch, propagates it
// further, and acknowledges it once every link it went on has (S2).
func (se *sharedEnd) install(r *router, m *linkctl.Register) error {
	ack := func(err error) {
		msg := ""
		if err != nil {
			msg = fmt.Sprintf("switch %q: %v", r.sw.cfg.Name, err)
		}
		r.sendAck(m.Ack, msg)
	}
	// A register of a key already installed raises its TTL: the new
	// proxy goes in before the old one comes out, so nothing is missed.
	old, again := se.proxies[m.Key]
	f, err := filter.Compile(m.Filter)
	if err != nil {
		if !again {
			se.proxies[m.Key] = nil
		}
		ack(fmt.Errorf("%w: %w", ErrInvalidFilter, err))
		return nil
	}
	sub := newSubscription(r.sess, f, subConfig{ttl: m.TTL}, 0, m.Places)
	r.sess.mu.Lock()
	r.sess.subs[sub.id] = sub
	r.sess.mu.Unlock()
	if hook := r.sw.installing.Load(); hook != nil {
		(*hook)(r, sub)
	}
	waits, err := r.sw.install(sub)
	if err != nil {
		r.sess.forget(sub)
		if !again {
			se.proxies[m.Key] = nil
		}
		ack(err) // the subscriber's contract fails with this error
		return nil
	}
	se.proxies[m.Key] = sub
	if old != nil {
		r.sess.forget(old)
		old.cancel()
	}
	r.ackAfter(m.Ack, "", waits)
	return nil
}

// release removes the peer's proxy filter key.
func (se *sharedEnd) release(r *router, key uint64) error {
	sub, ok := se.proxies[key]
	if !ok {
		return fmt.Errorf("release of key %d, which is not registered", key)
	}
	delete(se.proxies, key)
	if sub != nil { // nil: it could not be installed here
		r.sess.forget(sub)
		sub.cancel()
	}
	return nil
}

// forward sends event e to the peer: one Forward frame with TTL lowered
// and Hops raised, encoded once per event for all shared links of the
// switch (eventFrames).
func (*sharedEnd) forward(r *router, e *Event, _ []hitSub, shared *eventFrames) {
	if e.Control.TTL <= 0 {
		r.expired.Add(1)
		return
	}
	f, err := shared.forwardFrame(r.sw, e)
	if err == nil && len(f) > r.lim.MaxFrameBytes {
		err = fmt.Errorf("%w: frame of %d bytes over the link's limit of %d", wire.ErrTooLarge, len(f), r.lim.MaxFrameBytes)
	}
	if err != nil {
		r.unfit()
		r.sw.log.Warn("sion: event not forwarded", "switch", r.sw.cfg.Name, "peer", r.peer, "event", e.ID, "err", err)
		return
	}
	r.sendData(f)
}

// receive delivers a data event from the peer on this switch: to local
// subscriptions and to the other links whose proxy filters match, never
// back to the peer. An event seen before is dropped.
func (*sharedEnd) receive(ctx context.Context, r *router, w *wire.Event) {
	r.receiveEvent(ctx, w, "shared link", nil)
}

// receiveEvent readmits a data event that came over a link of this
// place (a shared or an overlay link, what names it in logs), drops it if
// seen before, tells admitted (if set), and delivers it on this switch,
// never back to the peer.
func (r *router) receiveEvent(ctx context.Context, w *wire.Event, what string, admitted func(*Event)) {
	e, err := r.sw.readmit(w)
	if err != nil {
		r.refused.Add(1)
		r.sw.log.Warn("sion: event from "+what+" refused", "switch", r.sw.cfg.Name, "peer", r.peer, "err", err)
		return
	}
	if r.sw.seen.add(e.ID) {
		r.duplicates.Add(1)
		return
	}
	if admitted != nil {
		admitted(e)
	}
	if err := r.sw.deliver(ctx, ctx.Done(), r.sess, e); err != nil && ctx.Err() == nil {
		r.sw.log.Warn("sion: event from "+what+" not delivered everywhere", "switch", r.sw.cfg.Name, "peer", r.peer, "event", e.ID, "err", err)
	}
}

// control handles the control of the place's tree (S1): n-hop probes and
// their replies (membership.go), the peer's Leave — from the parent,
// re-link to m.Parent ("" makes this switch a root); from a child it
// means nothing, the link just ends — and hands the rest to the routing
// (switchRouting.linkControl): advertisements where the place keeps a
// table of them (PlaceConfig.RequireAdvertisements), bleeders in a
// managed place (S2); other routings refuse them.
func (*sharedEnd) control(r *router, m linkctl.Message) (bool, error) {
	switch m := m.(type) {
	case *linkctl.Probe:
		return true, r.handleProbe(m)
	case *linkctl.ProbeReply:
		r.handleProbeReply(m)
	case *linkctl.Leave:
		if r.parent {
			r.sw.parentLeaves(m.Parent)
		}
	default:
		return r.sw.routing.linkControl(r, m)
	}
	return true, nil
}

// marker passes a marker on over the link, with the gateways it may still
// cross.
func (*sharedEnd) marker(r *router, ttl, gateways int) *linkAck { return r.marker(ttl, gateways) }

// forwardFrame returns e's Forward frame for the next switch, TTL lowered
// and Hops raised, encoded on the first call for all the switch's shared
// links; that call also records e's ID as seen.
func (l *eventFrames) forwardFrame(sw *Switch, e *Event) ([]byte, error) {
	if !l.fwdDone {
		l.fwdDone = true
		if !l.seen {
			sw.seen.add(e.ID)
		}
		w := toWireEvent(e)
		w.TTL--
		w.Hops++
		l.fwd, l.fwdErr = wire.EncodeForward(nil, &w, wire.Limits{MaxFrameBytes: 1<<31 - 1, MaxDataBytes: 1<<31 - 1})
	}
	return l.fwd, l.fwdErr
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
	id := in.ID
	e, err := sw.place.admit(in, admitForwarded) // in place: e is in
	if err != nil {
		return nil, err
	}
	e.ID = id
	c.TTL = min(c.TTL, sw.place.cfg.TTL)
	e.Control = c
	return e, nil
}

// childLink is a link another switch requested to this one.
type childLink struct {
	id   int64
	r    *router
	addr string // where the child serves link requests, "" if nowhere
}

// alive reports whether the link still answers: a second request from
// its switch is then refused (tree rule); a link that has ended or stays
// silent for probeTimeout is stale — its switch restarted — and the new
// request replaces it.
func (c *childLink) alive(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	a := c.r.marker(0, 0)
	select {
	case <-a.done:
		return a.ok
	case <-ctx.Done():
		return false
	}
}

package sion

import (
	"context"
	"errors"
	"slices"
)

// sink is where a session's matches go (DESIGN.md "Seams"). Switch.deliver
// matches an event, groups the subscriptions it matched by session, and
// hands each session's share to that session's sink through Switch.fire,
// which never asks which kind of sink it holds. The kinds today:
//
//   - localSink: the session's own subscription queues and look-in spool
//     (a local session, and the entity's side of a remote one);
//   - *remoteEnd: the switch's side of a remote session, whose events go
//     into its stream to the entity (remote_switch.go, remote_stream.go);
//   - *router: one end of a shared link or gateway, whose events cross the
//     link (router.go).
//
// A new kind of receiver — S4's proxy, S3's bypass path — is a new
// implementation in a file of its own, not a branch in Switch.fire or
// Session. A session's sink is set when the session is made (newSession),
// except a router's: newRouter sets it before the router is started, so
// before the session has subscriptions. (A link accepted on a connection
// Serve took comes as a remote session's first request: its router
// replaces the remote end the handshake made, which never served it and
// holds nothing.)
//
// patron and fire are called by Switch.fire, on the goroutine that
// delivers the event — the publisher's (Session.Publish) or the reader of
// the link it arrived on — with no lock of the switch or the session held;
// several of them may call the same sink at once, for different events.
// queues is called while a subscription is made (newSubscription) and
// ending by Session.shut, with no lock held; installsWhileClosing while a
// subscription is installed (Switch.install), with Switch.mu held. patron,
// fire, queues and installsWhileClosing must not take Switch.mu or
// Session.mu; ending may (a remote end takes Switch.mu to forget the session).
type sink interface {
	// patron reports whether e may reach session s (S1 patronage): for a
	// sink that hands e to s's entity, whether s's profile satisfies e's
	// condition; for one that passes e on (a router), always — the
	// condition is for the entities beyond it. Switch.fire counts a fire
	// (Stats.Fires) only when it does, before fire.
	patron(s *Session, e *Event) bool
	// fire hands e to session s, whose subscriptions hits matched (one or
	// more, in ID order, with their scores). shared encodes e's frames once
	// for all sinks of the event. fire counts what it hands over and drops
	// (Subscription.placed and drop, the link's counters). It waits only
	// where a local subscription chose Block, until ctx ends or stop (the
	// publishing session's done) closes; it returns an error for an event
	// some of s's subscriptions did not get that the publisher must hear
	// of: that wait ending, or an event too large for a remote session's
	// frames.
	fire(ctx context.Context, stop <-chan struct{}, s *Session, e *Event, hits []hitSub, shared *eventFrames) error
	// queues reports whether the session's subscriptions have queues of
	// their own (Subscription.C, Next, handlers): a local session's do;
	// those whose events go on elsewhere (a remote session's stream, a
	// link) do not.
	queues() bool
	// installsWhileClosing reports whether the session's subscriptions
	// may still be installed once its switch has begun to close (Drain,
	// Close): a router's proxy filters may, since its link works until it
	// ends; an entity's are refused with ErrClosed.
	installsWhileClosing() bool
	// ending is called once, when the session begins to end (its first
	// Close, or a failure), before its subscriptions end: a remote
	// session's switch side ends its connection, its requests and its
	// stream here.
	ending()
	// kind is what the session is (SessionInfo.Kind), taking no lock
	// (Switch.SessionCounts); describe fills in si's Peer and Away
	// (Switch.Sessions).
	describe(si *SessionInfo)
	kind() SessionKind
}

// patronOf reports whether s's profile satisfies e's patronage condition
// (S1), for sinks that deliver to the session's entity.
func patronOf(s *Session, e *Event) bool {
	if e.Condition == nil {
		return true
	}
	ok, _ := e.Condition.MatchProfile(*s.profile.Load())
	return ok
}

// newDelivery returns the Delivery of e for the subscriptions hits
// matched: what every one of them receives.
func newDelivery(e *Event, hits []hitSub) Delivery {
	d := Delivery{Event: e, Matched: make([]Match, len(hits))}
	for i, h := range hits {
		d.Matched[i] = Match{Subscription: h.sub.publicID(), Score: h.score}
	}
	return d
}

// groupHits returns hits with each member (see Subscription.group)
// replaced by its group, each subscription once with its best score, in ID
// order. It returns hits itself, allocating nothing, when none is a
// member.
func groupHits(hits []hitSub) []hitSub {
	if !slices.ContainsFunc(hits, func(h hitSub) bool { return h.sub.group != nil }) {
		return hits
	}
	out := make([]hitSub, 0, len(hits))
	for _, h := range hits {
		g := h.sub.owner()
		if i := slices.IndexFunc(out, func(o hitSub) bool { return o.sub == g }); i >= 0 {
			out[i].score = max(out[i].score, h.score)
			continue
		}
		out = append(out, hitSub{sub: g, id: g.id, score: h.score})
	}
	slices.SortFunc(out, func(a, b hitSub) int { return compareUint64(a.id, b.id) })
	return out
}

// localSink delivers a session's events into its subscriptions' queues
// (under their overflow policies) and its look-in spool: one spool entry
// for all the look-in and spilled subscriptions an event matched. It holds
// nothing: the queues and the spool are the session's.
type localSink struct{}

var _ sink = localSink{}

func (localSink) patron(s *Session, e *Event) bool { return patronOf(s, e) }

func (localSink) fire(ctx context.Context, stop <-chan struct{}, s *Session, e *Event, hits []hitSub, _ *eventFrames) error {
	hits = groupHits(hits)
	d := newDelivery(e, hits)
	var spool []*Subscription // look-in, and spilled: one spool entry for all
	var errs []error
	for _, h := range hits {
		if h.sub.cfg.lookIn {
			h.sub.match()
			h.sub.placed()
			spool = append(spool, h.sub)
			continue
		}
		spill, err := h.sub.enqueue(ctx, stop, d)
		if err != nil {
			errs = append(errs, err)
		}
		if spill {
			spool = append(spool, h.sub)
		}
	}
	if len(spool) > 0 {
		s.spool.put(d, spool...)
	}
	return errors.Join(errs...)
}

func (localSink) queues() bool               { return true }
func (localSink) installsWhileClosing() bool { return false }
func (localSink) ending()                    {}

// The router as a sink: what fires for its session crosses the link.

var _ sink = (*router)(nil)

// patron lets every event through: its condition is for the entities
// beyond the link.
func (r *router) patron(*Session, *Event) bool { return true }

// fire forwards e over the link (forward), once for all the proxy
// filters it matched.
func (r *router) fire(_ context.Context, _ <-chan struct{}, _ *Session, e *Event, hits []hitSub, shared *eventFrames) error {
	r.end.forward(r, e, hits, shared)
	return nil
}

// queues is false: a proxy filter's events go over the link.
func (r *router) queues() bool { return false }

// installsWhileClosing is true: the peer's proxy filters are installed
// until the link ends.
func (r *router) installsWhileClosing() bool { return true }

// ending does nothing: the router's session ends because the router
// shuts down (shutdown closes it), not the other way round.
func (r *router) ending() {}

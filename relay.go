package sion

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Relay carries what the sessions of a switch publish and subscribe to
// elsewhere (S4: a proxy carries its applications' publishes and
// subscriptions to its site's switches and to other sites'
// representative proxies; package site builds it). The switch it is
// given to (SwitchConfig.Relay) is the relay's front: entities open
// sessions on it — Switch.Open, or Dial to an address it serves, with
// the place's admission — exactly as on any switch, and do not see that
// the events they receive were matched somewhere else. A front:
//
//   - matches nothing its sessions publish: Publish admits the event (the
//     place's checks; an ID, the caller's if set; control information)
//     and hands it to Relay.Publish, whose error is Publish's. A second
//     Publish of a caller-set ID the relay has taken (its Publish
//     returned nil) is dropped (Stats.Duplicates) and returns nil; after
//     an error, the same ID may be published again.
//   - installs each subscription in its filter index as any switch does,
//     then tells Relay.Subscribe before the subscription's Subscribe
//     returns: the relay returns once it has the subscription's events
//     coming (its own contract), or an error, which refuses the
//     subscription (wrapped in ErrNotGranted) and takes it out again.
//     Relay.Unsubscribe is told, once, when a subscription the relay took
//     ends (cancelled, or its session closed).
//   - delivers what the relay brings back (RelayPort.Deliver) to its
//     subscriptions whose filters match, as a switch delivers an event
//     that arrives over a link: the event keeps its ID and control
//     information, and one whose ID the front has seen is dropped.
//   - takes no shared links, gateways or overlay links: Link, Federate,
//     Absorb and Join on it are refused with ErrInvalidConfig, and link
//     requests that reach it with ErrLinkRefused. Its sessions' events
//     are matched elsewhere, so a link to it would carry none of them.
//
// NewSwitch calls Attach once, before the switch has a session. Publish,
// Subscribe and Unsubscribe are called on the goroutines of the calls they
// serve (a local session's, or the reader of a remote session's
// connection), concurrently, with no lock of the switch held; they may
// block (Publish until ctx ends, for a publisher's back-pressure) but
// must not call back into the session or subscription they are given.
type Relay interface {
	// Attach gives the relay the front's port, through which it delivers
	// the events it brings back.
	Attach(p *RelayPort)
	// Publish carries ev, published by session s on the front and
	// admitted, elsewhere. ev is the front's copy: the relay may keep it
	// and must not modify it.
	Publish(ctx context.Context, s *Session, ev *Event) error
	// Subscribe brings the events that sub's filter matches back to the
	// front (RelayPort.Deliver) from then on. sub belongs to session s;
	// sub.ID is unique on the front.
	Subscribe(ctx context.Context, s *Session, sub *Subscription) error
	// Unsubscribe stops what Subscribe started for sub.
	Unsubscribe(s *Session, sub *Subscription)
}

// RelayPort is a relay's way into its front (Relay.Attach). It is safe
// for concurrent use.
type RelayPort struct {
	sw *Switch
}

// Deliver hands ev — an event the relay brought back from elsewhere,
// typically a Delivery's Event — to the front's subscriptions whose
// filters match, as an event arriving over a link is delivered: the front
// admits a copy (its ontology's names and kinds), which keeps ev's ID and
// control information, and fires each matching session once (S1) and each
// matching subscription once. An event whose ID the front has seen (among
// the last 65,536–131,072) is dropped and counted in Stats.Duplicates, so
// a relay that brings one event back on two paths delivers it once. ev is
// not modified or kept.
//
// It returns an error wrapping ErrInvalidEvent for an event without an ID
// or one the front's place refuses (wrapping ErrUnknownEventType too for
// a type its ontology does not know, unless it accepts unknown types),
// ErrClosed once the front is closed, or the error of a Block
// subscription's wait, which ctx bounds.
func (p *RelayPort) Deliver(ctx context.Context, ev *Event) error {
	return p.DeliverExcept(ctx, ev, nil)
}

// DeliverExcept is Deliver, except that the subscriptions of the sessions
// for which skip reports true do not receive ev (skip nil: every session
// may). The front records ev's ID all the same, so a later copy is dropped
// for every subscription. A relay that brings events back from several
// places uses it to keep those of one place from the sessions meant only
// for another's (package site: a representative proxy hands an event of
// another site to its applications, never to the sessions of other
// sites' proxies). skip is called with the front's lock held, for each
// session with a matching subscription: it must not call into sion.
func (p *RelayPort) DeliverExcept(ctx context.Context, ev *Event, skip func(*Session) bool) error {
	sw := p.sw
	switch {
	case ev == nil:
		return fmt.Errorf("%w: relay delivered a nil event", ErrInvalidEvent)
	case ev.ID == (EventID{}):
		return fmt.Errorf("%w: relay delivered an event of type %q without an ID", ErrInvalidEvent, ev.Type)
	}
	select {
	case <-sw.stopping:
		return fmt.Errorf("%w: switch %q", ErrClosed, sw.cfg.Name)
	default:
	}
	e, err := sw.place.admit(ev, admitRelayed)
	if err != nil {
		return fmt.Errorf("%w: relay delivered event %s: %w", ErrInvalidEvent, ev.ID, err)
	}
	e.ID = ev.ID
	e.Control = ev.Control
	e.Control.Path = slices.Clone(ev.Control.Path)
	if sw.seen.add(e.ID) {
		sw.duplicates.Add(1)
		return nil
	}
	return sw.deliverExcept(ctx, nil, nil, skip, e)
}

// admitRelayed: an event a relay brought back (RelayPort.Deliver), which
// a switch elsewhere admitted. Its payload was parsed there; its
// attributes are checked and made canonical here, as this place's
// ontology says; reserved types are refused.
var admitRelayed = admitRule{}

// front is what a switch does with the events its entities publish and
// the subscriptions they make: match them here (localFront), or carry
// them elsewhere (relayFront, SwitchConfig.Relay).
type front interface {
	// publish delivers e, admitted, which session s published; stop is
	// s's done (it ends a Block wait).
	publish(ctx context.Context, stop <-chan struct{}, s *Session, e *Event) error
	// subscribed is told that sub is installed, before its Subscribe
	// returns; an error refuses it. unsubscribed is told when it has been
	// taken out, perhaps more than once.
	subscribed(ctx context.Context, sub *Subscription) error
	unsubscribed(sub *Subscription)
	// linking says why the switch takes no links, or nil when it does.
	linking() error
}

// localFront matches what the switch's entities publish on the switch.
type localFront struct{ sw *Switch }

// publish gives e its ID, unless its publisher set one — a caller-set ID
// the switch has seen drops e as a duplicate — and its Origin, and
// delivers it.
func (f localFront) publish(ctx context.Context, stop <-chan struct{}, _ *Session, e *Event) error {
	sw := f.sw
	if e.ID != (EventID{}) && (sw.ids.gave(e.ID) || sw.seen.add(e.ID)) {
		sw.duplicates.Add(1)
		return nil
	}
	return sw.enter(ctx, stop, e)
}

func (localFront) subscribed(context.Context, *Subscription) error { return nil }
func (localFront) unsubscribed(*Subscription)                      {}
func (localFront) linking() error                                  { return nil }

// relayFront hands what the switch's entities publish to a relay, and
// tells it their subscriptions.
type relayFront struct {
	sw    *Switch
	relay Relay

	// published remembers the caller-set IDs passed on, apart from the
	// switch's seen IDs, which record what the relay brings back: an
	// event published here comes back through Deliver.
	published seenIDs

	mu   sync.Mutex
	told map[uint64]relayState // mu; subscriptions given to the relay, by ID
}

// relayState is where a subscription stands with the relay.
type relayState int

const (
	relayTelling   relayState = iota // Subscribe is running
	relayCancelled                   // ended while Subscribe was running
	relayTold                        // Subscribe returned nil
)

func newRelayFront(sw *Switch, relay Relay) *relayFront {
	f := &relayFront{sw: sw, relay: relay, told: map[uint64]relayState{}}
	relay.Attach(&RelayPort{sw: sw})
	return f
}

func (f *relayFront) publish(ctx context.Context, _ <-chan struct{}, s *Session, e *Event) error {
	if e.ID == (EventID{}) {
		e.ID = f.sw.ids.next()
	} else if f.sw.ids.gave(e.ID) || f.published.add(e.ID) {
		f.sw.duplicates.Add(1)
		return nil
	}
	e.Control.Origin = f.sw.cfg.Name
	err := f.relay.Publish(ctx, s, e)
	if err != nil {
		f.published.forget(e.ID) // not carried: a retry with the same ID is not a duplicate
	}
	return err
}

func (f *relayFront) subscribed(ctx context.Context, sub *Subscription) error {
	f.mu.Lock()
	f.told[sub.id] = relayTelling
	f.mu.Unlock()
	err := f.relay.Subscribe(ctx, sub.sess, sub)
	f.mu.Lock()
	st := f.told[sub.id]
	switch {
	case err != nil:
		delete(f.told, sub.id)
	case st == relayCancelled:
		delete(f.told, sub.id)
	default:
		f.told[sub.id] = relayTold
	}
	f.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: the relay did not take filter %s: %w", ErrNotGranted, sub.f, err)
	}
	if st == relayCancelled { // ended meanwhile: undo what the relay started
		f.relay.Unsubscribe(sub.sess, sub)
	}
	return nil
}

func (f *relayFront) unsubscribed(sub *Subscription) {
	f.mu.Lock()
	st, ok := f.told[sub.id]
	switch {
	case ok && st == relayTelling:
		f.told[sub.id] = relayCancelled // subscribed undoes it when the relay returns
	case ok && st == relayTold:
		delete(f.told, sub.id)
	}
	f.mu.Unlock()
	if ok && st == relayTold {
		f.relay.Unsubscribe(sub.sess, sub)
	}
}

func (f *relayFront) linking() error {
	return fmt.Errorf("switch %q is a relay's front (SwitchConfig.Relay): its sessions' events are matched elsewhere, and it takes no links", f.sw.cfg.Name)
}

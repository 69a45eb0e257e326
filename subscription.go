package sion

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sion-go/sion/filter"
)

// Overflow is what a subscription does with a matching event when its
// queue is full (DESIGN.md "Delivery"). Whatever the policy, one slow
// subscription never delays another.
type Overflow int

const (
	// DropNewest drops the new event for this subscription only; the
	// default. Once it has dropped one, it drops every new event until
	// the consumer has emptied the queue, so that what the consumer
	// receives is a gap-free prefix, then a gap, then the next episode.
	DropNewest Overflow = iota
	// DropOldest drops the oldest queued event to make room.
	DropOldest
	// Spill puts the event into the session's look-in spool instead (see
	// Session.Pull); the spool's own limit then applies.
	Spill
	// Block makes the publisher wait for room, until its context ends;
	// then the event is dropped for this subscription and Publish returns
	// an error wrapping the context's error. An explicit opt-in. For an
	// event that arrived over a shared link the wait holds up that link
	// (nothing behind the event crosses it) until there is room or the
	// link ends; the peer's queue for the link then fills and drops
	// (counted in LinkInfo.Dropped).
	Block
)

// String returns the policy's name.
func (o Overflow) String() string {
	switch o {
	case DropNewest:
		return "drop-newest"
	case DropOldest:
		return "drop-oldest"
	case Spill:
		return "spill"
	case Block:
		return "block"
	}
	return fmt.Sprintf("Overflow(%d)", int(o))
}

// DefaultQueue is the default queue length of a subscription, in events,
// and MaxQueue the longest WithQueue accepts. A queue is allocated when the
// subscription is made: about 48 bytes per event of its length.
const (
	DefaultQueue = 256
	MaxQueue     = 1 << 20
)

// Delivery is one event as a session receives it: the session fired once
// for the event (S1), and Matched lists the session's subscriptions whose
// filters matched, with their scores (see filter.Mode). Every one of those
// subscriptions receives the same Delivery, once. Event and Matched are
// shared: read them, never modify them.
type Delivery struct {
	Event   *Event
	Matched []Match
}

// Match is one subscription a delivered event matched, with its filter's
// score.
type Match struct {
	Subscription uint64
	Score        float64
}

// Score returns the score of subscription id's filter for this event, and
// whether id is among those matched.
func (d Delivery) Score(id uint64) (float64, bool) {
	for _, m := range d.Matched {
		if m.Subscription == id {
			return m.Score, true
		}
	}
	return 0, false
}

// SubscribeOption configures one subscription; see Session.Subscribe.
type SubscribeOption func(*subConfig) error

type subConfig struct {
	queue    int
	overflow Overflow
	handler  func(Delivery)
	lookIn   bool
	onSlow   func(SubscriptionStats)
	ttl      int // -1: the place's
}

// WithQueue sets the subscription's queue length in events (default
// DefaultQueue); n must be at least 1.
func WithQueue(n int) SubscribeOption {
	return func(c *subConfig) error {
		if n < 1 || n > MaxQueue {
			return fmt.Errorf("%w: queue length %d, want 1 to %d", ErrInvalidConfig, n, MaxQueue)
		}
		c.queue = n
		return nil
	}
}

// WithOverflow sets what a full queue does (default DropNewest).
func WithOverflow(o Overflow) SubscribeOption {
	return func(c *subConfig) error {
		if o < DropNewest || o > Block {
			return fmt.Errorf("%w: overflow policy %v", ErrInvalidConfig, o)
		}
		c.overflow = o
		return nil
	}
}

// WithHandler delivers the subscription's events to fn, called from one
// goroutine the subscription owns, in order, one call at a time. fn must
// not call Close or Drain of its own session or switch (they wait for fn
// to return); it may call Cancel and Publish, but a Publish that reaches a
// full WithOverflow(Block) subscription of the same session waits for fn
// itself, until the publish context ends. A panic in fn is not recovered:
// like a panic in any goroutine, it ends the program.
func WithHandler(fn func(Delivery)) SubscribeOption {
	return func(c *subConfig) error {
		if fn == nil {
			return fmt.Errorf("%w: nil handler", ErrInvalidConfig)
		}
		c.handler = fn
		return nil
	}
}

// WithLookIn makes the subscription a look-in subscription (S1): its
// events are not queued for it but spooled in its session, once per event
// for all look-in subscriptions of the session, and the entity takes them
// with Session.Pull.
func WithLookIn() SubscribeOption {
	return func(c *subConfig) error {
		c.lookIn = true
		return nil
	}
}

// WithTTL limits how far the subscription's filter spreads over shared
// links (S1 event-path propagation): to the switches at most n links away
// from its own; 0 keeps it on its own switch. The default is the place's
// TTL. n must be 0 to 65535. It bounds where events are fetched from for
// this filter, not what the subscription may receive: an event that
// reaches its switch for another subscription's sake (a wider TTL, a
// transit) is delivered to every subscription there that matches it.
func WithTTL(n int) SubscribeOption {
	return func(c *subConfig) error {
		if n < 0 || n > 65535 {
			return fmt.Errorf("%w: TTL %d, want 0 to 65535", ErrInvalidConfig, n)
		}
		c.ttl = n
		return nil
	}
}

// WithSlowConsumer calls fn whenever the subscription becomes a slow
// consumer: its queue overflowed (a drop, a spill or a blocked publish)
// after it had room. fn runs on the publishing goroutine and must return
// quickly. Every slow episode is also logged at level Warn.
func WithSlowConsumer(fn func(SubscriptionStats)) SubscribeOption {
	return func(c *subConfig) error {
		c.onSlow = fn
		return nil
	}
}

// SubscriptionStats counts what happened to a subscription's events.
type SubscriptionStats struct {
	ID uint64
	// Matched counts the events its filters matched (and the patronage
	// condition allowed), once per event.
	Matched uint64
	// Delivered counts the events placed in its queue (or passed to its
	// handler, or spooled for a look-in subscription); one evicted later
	// (DropOldest, a look-in spool's eviction) stays counted here and is
	// counted in Dropped too. Like every counter of sion's, it never
	// decreases.
	Delivered uint64
	// Dropped counts the events lost for it: a full queue under
	// DropNewest or Block, evictions under DropOldest, spool evictions.
	Dropped uint64
	// Spilled counts the events the Spill policy put in the spool.
	Spilled uint64
	// Queued is the number of events waiting in its queue now.
	Queued int
	// Slow reports whether it is a slow consumer now: it overflowed and
	// has not since had its queue emptied (DropNewest) or less than half
	// full (other policies).
	Slow bool
}

// Subscription is one or more filters registered by a session, OR-ed,
// with its own bounded queue (S1 filter; DESIGN.md "Delivery"). Its events
// arrive on C, through Next, to its handler (WithHandler), or in the
// session's spool (WithLookIn); an event that several of its filters
// match arrives once, with the best of their scores. A Subscription is
// safe for concurrent use.
type Subscription struct {
	id   uint64
	sess *Session
	f    *filter.Filter
	cfg  subConfig

	ch       chan Delivery // the queue; nil for look-in
	mu       sync.RWMutex  // enqueue holds it for reading, cancel for writing
	closed   bool          // mu
	done     chan struct{} // closed by cancel, before it takes mu
	doneOnce sync.Once
	handled  chan struct{} // closed when the handler goroutine returns; nil without a handler

	matched, delivered, dropped, spilled atomic.Uint64
	slow                                 atomic.Bool
	unregistered                         atomic.Bool           // set once by Switch.unregister, before it takes the filter out
	installed                            atomic.Bool           // set once by Switch.install, once the filter is in the index and propagated
	cause                                atomic.Pointer[error] // why it ended, when it did not end by Cancel; set before done closes

	// ttl is how many shared links the filter spreads over (S1 TTL of
	// event-path propagation); -1 until register sets the place's.
	ttl int
	// places is, for a proxy subscription that stands for interest from
	// other places (a gateway derived it), the places that interest came
	// through, this one last; nil for interest of this place alone.
	// Gateways never carry interest into a place on it.
	places []string

	// public is the ID the subscription's owner knows it by: id, or on a
	// switch the ID a remote session's entity gave it (see Dial).
	public uint64

	// group is, for a member, the subscription it belongs to; nil
	// otherwise. A subscription made with several filters
	// (Session.SubscribeFilters) registers its first filter itself and
	// each further one as a member: an ordinary registration everywhere
	// it goes (index, routing, contracts, the wire of a remote session),
	// with no queue and no handler. The sink that hands an event to the
	// session's queues (localSink, and a remote session's entity side)
	// maps each member to its group, so the group receives the event
	// once, however many of its filters matched.
	group *Subscription
	// members are a group's members, in filter order; set before it is
	// registered, then read-only.
	members []*Subscription
}

// newSubscription returns a subscription of session s with filter f and
// cfg (cfg.ttl: -1 for the place's), not yet registered anywhere. remote
// is the ID a remote session's entity gave it (0 for others), places the
// places a gateway's proxy stands for interest from (see places). It has
// a queue of cfg.queue events when its session's sink keeps queues and it
// is not look-in.
func newSubscription(s *Session, f *filter.Filter, cfg subConfig, remote uint64, places []string) *Subscription {
	sub := &Subscription{id: s.be.nextSubID(), sess: s, f: f, cfg: cfg, done: make(chan struct{}), ttl: cfg.ttl, places: places, public: remote}
	if remote == 0 {
		sub.public = sub.id
	}
	if !cfg.lookIn && s.sink.queues() {
		sub.ch = make(chan Delivery, cfg.queue)
	}
	return sub
}

// newMember returns a member of group with filter f (see group): it
// shares the group's options, but not its queue or handler.
func newMember(group *Subscription, f *filter.Filter) *Subscription {
	cfg := group.cfg
	cfg.handler, cfg.onSlow = nil, nil
	s := group.sess
	m := &Subscription{id: s.be.nextSubID(), sess: s, f: f, cfg: cfg, done: make(chan struct{}), ttl: group.ttl, group: group}
	m.public = m.id
	return m
}

// owner returns the subscription that receives sub's matches: its group,
// or sub itself.
func (sub *Subscription) owner() *Subscription {
	if sub.group != nil {
		return sub.group
	}
	return sub
}

// registrations returns sub and its members: what is registered for it.
func (sub *Subscription) registrations() []*Subscription {
	return append([]*Subscription{sub}, sub.members...)
}

// publicID returns the ID the subscription's owner knows it by.
func (sub *Subscription) publicID() uint64 { return sub.public }

// ID returns the subscription's ID, unique within its switch; it is the
// ID in Delivery.Matched.
func (sub *Subscription) ID() uint64 { return sub.id }

// Filter returns the subscription's filter as given to Subscribe; for a
// subscription with several filters (SubscribeFilters), the first.
func (sub *Subscription) Filter() *filter.Filter { return sub.f }

// Filters returns the subscription's filters as given to Subscribe or
// SubscribeFilters, in order: one or more. The slice is new; the
// filters are shared (a Filter is immutable).
func (sub *Subscription) Filters() []*filter.Filter {
	fs := make([]*filter.Filter, 0, 1+len(sub.members))
	fs = append(fs, sub.f)
	for _, m := range sub.members {
		fs = append(fs, m.f)
	}
	return fs
}

// C returns the channel the subscription's events arrive on: its queue. It
// is nil for subscriptions with a handler or look-in, and closed when the
// subscription is cancelled. Each event arrives once.
func (sub *Subscription) C() <-chan Delivery {
	if sub.cfg.handler != nil || sub.cfg.lookIn {
		return nil
	}
	return sub.ch
}

// Next returns the next event of the subscription's queue, waiting until
// one arrives, ctx ends (its error is returned) or the subscription ends
// (events still queued are returned first). When it ends, Next returns an
// error wrapping ErrClosed and, if the subscription did not end by Cancel
// or its session's Close, the cause — for a remote session whose
// connection failed for good, the transport's error (errors.Is works on
// it, e.g. with transport/tcp's ErrPeerDead). It returns ErrNoQueue for a
// subscription with a handler, and for a look-in subscription (use
// Session.Pull).
func (sub *Subscription) Next(ctx context.Context) (Delivery, error) {
	if sub.cfg.handler != nil || sub.cfg.lookIn {
		return Delivery{}, fmt.Errorf("%w: subscription %d", ErrNoQueue, sub.id)
	}
	select {
	case d, ok := <-sub.ch:
		if !ok {
			return Delivery{}, sub.endErr()
		}
		return d, nil
	case <-ctx.Done():
		return Delivery{}, ctx.Err()
	}
}

// Err returns nil while the subscription is active, and once it has
// ended, what Next returns then: an error wrapping ErrClosed and, unless
// it ended by Cancel or its session's Close, the cause.
func (sub *Subscription) Err() error {
	select {
	case <-sub.done:
		return sub.endErr()
	default:
		return nil
	}
}

func (sub *Subscription) endErr() error {
	if cause := sub.cause.Load(); cause != nil {
		return fmt.Errorf("%w: subscription %d ended: %w", ErrClosed, sub.id, *cause)
	}
	return fmt.Errorf("%w: subscription %d cancelled", ErrClosed, sub.id)
}

// Cancel removes the subscription from its switch: no event published
// after Cancel returns reaches it, and its channel is closed (events
// already queued stay readable from C and Next). A handler gets no call
// that starts after Cancel returns. Cancel is idempotent and may be called
// from the subscription's own handler. On a switch with shared links it
// first stops local delivery and then releases the filter's propagated
// keys, link by link away from the subscriber (S1 reference counts: a
// key other subscriptions still need stays); it does not wait for the
// peers.
func (sub *Subscription) Cancel() error {
	sub.sess.forget(sub)
	sub.cancel()
	return nil
}

// cancel stops the subscription's queue; the caller has taken it out of
// the index.
func (sub *Subscription) cancel() { sub.end(nil) }

// end stops the subscription's queue, and its members, for cause (nil: by
// Cancel or its session's Close); the caller has taken its registrations
// out of the index.
func (sub *Subscription) end(cause error) {
	for _, m := range sub.members {
		m.end(cause)
	}
	if cause != nil && !chanClosed(sub.done) {
		sub.cause.CompareAndSwap(nil, &cause) // before done closes, so that Err sees it
	}
	// Wake a publisher blocked in enqueue (it holds mu for reading) first.
	sub.doneOnce.Do(func() { close(sub.done) })
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.closed {
		return
	}
	sub.closed = true
	if sub.ch != nil {
		close(sub.ch)
	}
}

// closeQueue closes the queue without cancelling: a handler still takes
// what is queued. The caller has taken the subscription out of the index.
func (sub *Subscription) closeQueue() {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if !sub.closed {
		sub.closed = true
		close(sub.ch)
	}
}

// placed counts an event handed over to the subscription, on it and its
// switch.
func (sub *Subscription) placed() {
	sub.delivered.Add(1)
	sub.sess.be.countDeliveries(1)
}

// drop counts n events lost for the subscription, and why, on it and its
// switch.
func (sub *Subscription) drop(n uint64, why dropReason) {
	sub.dropped.Add(n)
	sub.sess.be.countDrops(n, why)
}

// match counts an event its filters matched, on it and its switch.
func (sub *Subscription) match() {
	sub.matched.Add(1)
	sub.sess.be.countMatches(1)
}

// Stats returns the subscription's counters.
func (sub *Subscription) Stats() SubscriptionStats {
	st := SubscriptionStats{
		ID:        sub.id,
		Matched:   sub.matched.Load(),
		Delivered: sub.delivered.Load(),
		Dropped:   sub.dropped.Load(),
		Spilled:   sub.spilled.Load(),
		Slow:      sub.slow.Load(),
	}
	if sub.ch != nil {
		st.Queued = len(sub.ch)
	}
	return st
}

// runHandler is the goroutine of a subscription with a handler.
func (sub *Subscription) runHandler() {
	defer close(sub.handled)
	for d := range sub.ch {
		select {
		case <-sub.done:
			return
		default:
		}
		sub.cfg.handler(d)
	}
}

// enqueue offers d to the subscription's queue under its overflow policy.
// It reports spill when the Spill policy wants d in the session's spool
// (the caller puts it there, once for all such subscriptions), and
// returns an error only when a Block policy's wait ended with ctx. The
// slow-consumer report runs after mu is released, so that its callback may
// cancel the subscription.
func (sub *Subscription) enqueue(ctx context.Context, stop <-chan struct{}, d Delivery) (spill bool, err error) {
	sub.match()
	sub.mu.RLock()
	slow, spill, err := sub.offer(ctx, stop, d)
	sub.mu.RUnlock()
	if slow {
		sub.reportSlow()
	}
	return spill, err
}

// offer is enqueue's part under mu; slow reports that the subscription has
// just become a slow consumer.
func (sub *Subscription) offer(ctx context.Context, stop <-chan struct{}, d Delivery) (slow, spill bool, err error) {
	if sub.closed {
		return false, false, nil
	}
	if sub.cfg.overflow == DropNewest && sub.slow.Load() {
		if len(sub.ch) > 0 {
			sub.drop(1, dropQueueFull) // the episode goes on: keep the prefix gap-free
			return false, false, nil
		}
		sub.slow.Store(false)
	}
	select {
	case sub.ch <- d:
		sub.placed()
		if sub.slow.Load() && len(sub.ch) < cap(sub.ch)/2 {
			sub.slow.Store(false)
		}
		return false, false, nil
	default:
	}
	slow = !sub.slow.Swap(true)
	switch sub.cfg.overflow {
	case DropOldest:
		for {
			select {
			case <-sub.ch:
				sub.drop(1, dropEvicted)
			default:
			}
			select {
			case sub.ch <- d:
				sub.placed()
				return slow, false, nil
			default:
			}
		}
	case Spill:
		sub.spilled.Add(1)
		sub.sess.be.countSpills(1)
		return slow, true, nil
	case Block:
		if slow {
			sub.mu.RUnlock() // report before waiting; nothing below needs mu until the wait
			sub.reportSlow()
			sub.mu.RLock()
			slow = false
			if sub.closed {
				return false, false, nil
			}
		}
		select {
		case sub.ch <- d:
			sub.placed()
			return false, false, nil
		case <-sub.done:
			sub.drop(1, dropQueueFull)
			return false, false, nil
		case <-stop:
			sub.drop(1, dropQueueFull)
			return false, false, fmt.Errorf("%w: the publishing session closed while subscription %d was full", ErrClosed, sub.id)
		case <-ctx.Done():
			sub.drop(1, dropQueueFull)
			return false, false, fmt.Errorf("sion: subscription %d stayed full until the publisher's context ended: %w", sub.id, ctx.Err())
		}
	}
	sub.drop(1, dropQueueFull)
	return slow, false, nil
}

// reportSlow logs that the subscription became a slow consumer and calls
// its WithSlowConsumer callback. mu must not be held.
func (sub *Subscription) reportSlow() {
	sub.sess.be.logger().Warn("sion: slow consumer", "switch", sub.sess.be.name(), "session", sub.sess.name, "subscription", sub.id,
		"policy", sub.cfg.overflow.String(), "queue", cap(sub.ch))
	if sub.cfg.onSlow != nil {
		sub.cfg.onSlow(sub.Stats())
	}
}

// chanClosed reports whether ch is closed.
func chanClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

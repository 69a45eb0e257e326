package sion

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// SessionConfig configures a session; the zero value of every field means
// its default.
type SessionConfig struct {
	// Name identifies the session's entity in logs, stats and admission.
	Name string
	// Profile is the entity's attributes, against which events' patronage
	// conditions are evaluated (S1 patronage). See Session.SetProfile.
	Profile []ontology.Attr
	// SpoolSize caps the look-in spool in events; 0 means 1024. When it
	// is full, the oldest spooled event is dropped.
	SpoolSize int
	// SpoolRetention drops spooled events older than this; 0 keeps them
	// until pulled or pushed out by SpoolSize.
	SpoolRetention time.Duration
}

// Session connects an entity to a switch (S1 session): it publishes
// events, registers filters as subscriptions, has a profile for patronage
// matching and a look-in spool. All filters of a session are OR-ed: the
// session fires at most once per event, and each of its subscriptions
// that matched receives that event once. A Session is safe for concurrent
// use; events published from one goroutine reach each subscription in the
// order they were published.
type Session struct {
	sw      *Switch
	id      uint64
	name    string
	profile atomic.Pointer[[]ontology.Attr]
	spool   *spool

	mu     sync.Mutex
	subs   map[uint64]*Subscription // mu
	closed bool                     // mu
	done   chan struct{}            // closed by Close
	wg     sync.WaitGroup           // handler goroutines
}

// Name returns the session's name.
func (s *Session) Name() string { return s.name }

// Switch returns the session's switch.
func (s *Session) Switch() *Switch { return s.sw }

// Publish validates ev against the place (see EventPlace), gives it an ID
// and control information, and delivers it to every matching subscription
// of the switch, before it returns. It copies ev; the caller may reuse it.
// Errors wrap ErrUnknownEventType or ErrInvalidEvent (naming the
// attribute), or ErrClosed; nothing is delivered then. With a Block
// subscription full until ctx ends, the event still reaches every other
// subscription and Publish returns an error wrapping ctx's error. Cost:
// one Index.Match plus one queue operation per subscription matched.
func (s *Session) Publish(ctx context.Context, ev *Event) error {
	if s.isClosed() {
		return fmt.Errorf("%w: session %q", ErrClosed, s.name)
	}
	e, err := s.sw.place.admit(ev)
	if err != nil {
		return err
	}
	e.ID = newEventID()
	e.Control.Origin = s.sw.cfg.Name
	return s.sw.deliver(ctx, e)
}

// Subscribe compiles src (filter syntax, see filter.Compile) and
// subscribes with it; see SubscribeFilter.
func (s *Session) Subscribe(ctx context.Context, src string, opts ...SubscribeOption) (*Subscription, error) {
	f, err := filter.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	return s.SubscribeFilter(ctx, f, opts...)
}

// SubscribeFilter registers f for the session. When it returns, every
// event published afterwards on the switch that f matches reaches the
// subscription. Errors: ErrUnknownEventType for a type the place's
// ontology does not know; ErrInvalidFilter (wrapping filter.ErrInvalid)
// for an attribute outside the type's vocabulary or of the wrong kind;
// ErrInvalidConfig for a bad option; ErrClosed.
func (s *Session) SubscribeFilter(ctx context.Context, f *filter.Filter, opts ...SubscribeOption) (*Subscription, error) {
	if f == nil {
		return nil, fmt.Errorf("%w: nil filter", ErrInvalidFilter)
	}
	cfg := subConfig{queue: DefaultQueue}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.lookIn && (cfg.handler != nil || cfg.overflow != DropNewest) {
		return nil, fmt.Errorf("%w: a look-in subscription has no handler and no overflow policy (the spool's limit applies)", ErrInvalidConfig)
	}
	if t := f.Type(); t != filter.AnyType {
		if _, ok := s.sw.place.Ontology().Lookup(t); !ok {
			return nil, fmt.Errorf("%w %q in filter %s", ErrUnknownEventType, t, f)
		}
	}
	sub := &Subscription{id: s.sw.nextSub.Add(1), sess: s, f: f, cfg: cfg, done: make(chan struct{})}
	if !cfg.lookIn {
		sub.ch = make(chan Delivery, cfg.queue)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: session %q", ErrClosed, s.name)
	}
	s.subs[sub.id] = sub
	if cfg.handler != nil {
		sub.handled = make(chan struct{})
		s.wg.Go(sub.runHandler)
	}
	s.mu.Unlock()
	if err := s.sw.register(sub); err != nil {
		s.forget(sub)
		sub.cancel()
		return nil, err
	}
	return sub, nil
}

// Unsubscribe cancels sub; see Subscription.Cancel.
func (s *Session) Unsubscribe(sub *Subscription) error { return sub.Cancel() }

// SetProfile replaces the session's profile (attribute names canonical or
// synonyms). Events published after it returns are matched against the
// new profile. It refuses NaN and ±Inf with ErrInvalidEvent.
func (s *Session) SetProfile(profile []ontology.Attr) error {
	p, err := s.sw.canonicalProfile(profile)
	if err != nil {
		return err
	}
	s.profile.Store(&p)
	return nil
}

// Profile returns the session's profile.
func (s *Session) Profile() []ontology.Attr { return slices.Clone(*s.profile.Load()) }

// Pull returns up to max events from the session's look-in spool (S1
// look-in), oldest first, waiting until at least one is there, ctx ends
// (its error is returned) or the session closes (ErrClosed, after the
// spool is empty). max ≤ 0 means all there are.
func (s *Session) Pull(ctx context.Context, max int) ([]Delivery, error) {
	return s.spool.pull(ctx, max, s.done)
}

// SessionStats is a snapshot of a session's counters.
type SessionStats struct {
	Name          string
	Subscriptions []SubscriptionStats
	// Spooled is the number of events in the look-in spool now;
	// SpoolDropped counts the events the spool dropped (full or expired).
	Spooled      int
	SpoolDropped uint64
}

// Stats returns the session's counters.
func (s *Session) Stats() SessionStats {
	st := SessionStats{Name: s.name}
	s.mu.Lock()
	for _, sub := range s.subs {
		st.Subscriptions = append(st.Subscriptions, sub.Stats())
	}
	s.mu.Unlock()
	slices.SortFunc(st.Subscriptions, func(a, b SubscriptionStats) int { return compareUint64(a.ID, b.ID) })
	st.Spooled, st.SpoolDropped = s.spool.stats()
	return st
}

// Drain stops the session's subscriptions from receiving new events, waits
// until their handlers have returned for every event queued and their
// channels are empty (read by the application), or ctx ends (its error is
// returned), and closes the session. It ends with Close, so pull what the
// look-in spool holds before. It must not be called from a handler of the
// session.
func (s *Session) Drain(ctx context.Context) error {
	s.mu.Lock()
	subs := make([]*Subscription, 0, len(s.subs))
	for _, sub := range s.subs {
		subs = append(subs, sub)
	}
	s.mu.Unlock()
	for _, sub := range subs {
		s.sw.unregister(sub)
		if sub.handled != nil {
			sub.closeQueue() // the handler takes what is queued, then returns
		}
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for _, sub := range subs {
		if sub.handled != nil {
			select {
			case <-sub.handled:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		for len(sub.ch) > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
	}
	return s.Close()
}

// Close cancels the session's subscriptions, waits for their handlers to
// return, wakes pending Pull calls (ErrClosed) and removes the session
// from its switch. It is idempotent; it must not be called from one of the
// session's handlers.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	subs := s.subs
	s.subs = map[uint64]*Subscription{}
	close(s.done)
	s.mu.Unlock()
	for _, sub := range subs {
		s.sw.unregister(sub)
		sub.cancel()
	}
	s.sw.dropSession(s)
	s.wg.Wait()
	return nil
}

func (s *Session) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// forget takes sub out of the session and the switch.
func (s *Session) forget(sub *Subscription) {
	s.mu.Lock()
	delete(s.subs, sub.id)
	s.mu.Unlock()
	s.sw.unregister(sub)
}

func compareUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// spool is a session's look-in spool: a bounded FIFO of deliveries with a
// retention limit.
type spool struct {
	max       int
	retention time.Duration
	notify    chan struct{} // has a token when items may be waiting

	mu      sync.Mutex
	items   []spooled // mu; oldest first
	dropped uint64    // mu
}

type spooled struct {
	d    Delivery
	at   time.Time
	subs []*Subscription // whose drop an eviction is
}

func newSpool(max int, retention time.Duration) *spool {
	if max <= 0 {
		max = 1024
	}
	return &spool{max: max, retention: retention, notify: make(chan struct{}, 1)}
}

// put appends d for subs, dropping the oldest entry when the spool is full.
func (sp *spool) put(d Delivery, subs ...*Subscription) {
	now := time.Now()
	sp.mu.Lock()
	sp.expire(now)
	if len(sp.items) >= sp.max {
		sp.evict(1)
	}
	sp.items = append(sp.items, spooled{d: d, at: now, subs: subs})
	sp.mu.Unlock()
	select {
	case sp.notify <- struct{}{}:
	default:
	}
}

// expire drops entries older than the retention. mu must be held.
func (sp *spool) expire(now time.Time) {
	if sp.retention <= 0 {
		return
	}
	n := 0
	for n < len(sp.items) && now.Sub(sp.items[n].at) > sp.retention {
		n++
	}
	sp.evict(n)
}

// evict drops the n oldest entries. mu must be held.
func (sp *spool) evict(n int) {
	for _, it := range sp.items[:n] {
		sp.dropped++
		for _, sub := range it.subs {
			sub.dropped.Add(1)
			if sub.cfg.lookIn {
				sub.delivered.Add(^uint64(0))
			}
		}
	}
	clear(sp.items[:n])
	sp.items = sp.items[n:]
}

func (sp *spool) pull(ctx context.Context, max int, done <-chan struct{}) ([]Delivery, error) {
	for {
		sp.mu.Lock()
		sp.expire(time.Now())
		if n := len(sp.items); n > 0 {
			if max <= 0 || max > n {
				max = n
			}
			out := make([]Delivery, max)
			for i := range out {
				out[i] = sp.items[i].d
			}
			clear(sp.items[:max])
			sp.items = sp.items[max:]
			if len(sp.items) > 0 {
				select {
				case sp.notify <- struct{}{}:
				default:
				}
			}
			sp.mu.Unlock()
			return out, nil
		}
		sp.mu.Unlock()
		select {
		case <-sp.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-done:
			sp.mu.Lock()
			empty := len(sp.items) == 0
			sp.mu.Unlock()
			if empty {
				return nil, fmt.Errorf("%w: session closed", ErrClosed)
			}
		}
	}
}

func (sp *spool) stats() (int, uint64) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.items), sp.dropped
}

package sion

import (
	"context"
	"fmt"
	"log/slog"
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
	// Logger receives a remote session's log records (see Dial); nil
	// discards them. A local session logs to its switch's logger. Its
	// handler may be called while the session holds locks, so it must not
	// call back into sion.
	Logger *slog.Logger
	// SharedKey is the place's shared key, for a remote session (Dial) to
	// a place that has one (PlaceConfig.SharedKey); when set, Dial also
	// refuses a switch that cannot prove it knows the key. Not used by
	// Switch.Open.
	SharedKey []byte
	// Reconnect says how a remote session (Dial) returns after its
	// connection fails; the zero value reconnects with the defaults. Not
	// used by Switch.Open.
	Reconnect ReconnectPolicy
}

// Session connects an entity to a switch (S1 session): it publishes
// events, registers filters as subscriptions, has a profile for patronage
// matching and a look-in spool. All filters of a session are OR-ed: the
// session fires at most once per event, and each of its subscriptions
// that matched receives that event once. A Session is safe for concurrent
// use; events published from one goroutine reach each subscription in the
// order they were published.
type Session struct {
	sw      *Switch // the switch of a session on a switch; nil on the entity's side of a remote one
	be      backend // the switch, or the client of a remote session
	sink    sink    // where the session's matches go
	id      uint64
	name    string
	profile atomic.Pointer[[]ontology.Attr]
	spool   *spool

	mu     sync.Mutex
	subs   map[uint64]*Subscription // mu
	ads    []Advertisement          // mu; Advertise's, canonical
	closed bool                     // mu
	err    error                    // mu; why it ended, set before done closes
	done   chan struct{}            // closed when the session ends
	wg     sync.WaitGroup           // handler goroutines
}

// Name returns the session's name.
func (s *Session) Name() string { return s.name }

// Switch returns the session's switch, or nil for a remote session (see
// Dial).
func (s *Session) Switch() *Switch { return s.sw }

// newSession returns a session named name on backend be — its switch sw,
// or the entity's side of a remote session (sw nil, id 0) — with profile
// (kept) and look-in spool sp. Its matches go to the sink sinkFor returns
// for it, or, with sinkFor nil, to its own queues and spool (localSink).
// The caller puts it into its switch's table (Switch.addSession).
func newSession(be backend, sw *Switch, id uint64, name string, profile []ontology.Attr, sp *spool, sinkFor func(*Session) sink) *Session {
	s := &Session{sw: sw, be: be, sink: localSink{}, id: id, name: name, spool: sp, subs: map[uint64]*Subscription{}, done: make(chan struct{})}
	s.profile.Store(&profile)
	if sinkFor != nil {
		s.sink = sinkFor(s)
	}
	return s
}

// backend is what a session stands on: its switch (local), or the client
// side of a link to a switch (remote, see Dial).
type backend interface {
	publish(ctx context.Context, s *Session, ev *Event) error
	nextSubID() uint64
	register(ctx context.Context, sub *Subscription) error
	unregister(subs ...*Subscription)
	setProfile(ctx context.Context, s *Session, p []ontology.Attr) error
	advertise(ctx context.Context, s *Session, ads []Advertisement) error
	pull(ctx context.Context, s *Session, max int) ([]Delivery, error)
	sync(ctx context.Context) error
	// sessionClosing is called when s begins to end (cause nil: Close),
	// after its sink's end, and on every later Close (cause nil): the
	// entity's side of a remote session, on Close, says goodbye and ends
	// its goroutines (idempotent); a switch does nothing.
	sessionClosing(s *Session, cause error)
	// sessionClosed is called once s has ended: its subscriptions ended
	// and their handlers returned. A switch takes s out of its table (only
	// now: Switch.Close waits for the sessions it still lists).
	sessionClosed(s *Session)
	// countDeliveries, countDrops, countMatches and countSpills count n
	// events handed over to, lost for (and why), matched by, or spilled
	// by a subscription of a session on the backend, on top of the
	// subscription's own counters: a switch's Stats.Deliveries, Dropped
	// and Drops, Matched and Spilled; nothing on the entity's side.
	countDeliveries(n uint64)
	countDrops(n uint64, why dropReason)
	countMatches(n uint64)
	countSpills(n uint64)
	logger() *slog.Logger
	name() string
}

// Publish validates ev against the place (see EventPlace), gives it an ID
// (unless it has one, see Event.ID) and control information, and delivers
// it to every matching subscription of the switch, before it returns (on
// a relay's front, SwitchConfig.Relay: hands it to the relay). It copies ev; the caller may reuse it.
// Errors wrap ErrUnknownEventType or ErrInvalidEvent (naming the
// attribute), or ErrClosed; nothing is delivered then. With a Block
// subscription full until ctx ends, the event still reaches every other
// subscription and Publish returns an error wrapping ctx's error. Cost:
// one Index.Match plus one queue operation per subscription matched.
func (s *Session) Publish(ctx context.Context, ev *Event) error {
	if s.isClosed() {
		return fmt.Errorf("%w: session %q", ErrClosed, s.name)
	}
	return s.be.publish(ctx, s, ev)
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
// subscription — and, on a switch with shared links, every event
// published afterwards on any switch within the filter's TTL (WithTTL;
// S2 subscription contract: each switch has acknowledged the filter).
// The contract covers the switches reachable when it is made: a link
// that is down does not delay it, and when the link comes back both
// sides re-send their filters (see Switch.Link).
// Errors: ErrUnknownEventType for a type the place's ontology does not
// know; ErrInvalidFilter (wrapping filter.ErrInvalid) for an attribute
// outside the type's vocabulary or of the wrong kind; ErrInvalidConfig
// for a bad option; ErrNotGranted when the contract is not granted within
// the place's ContractTimeout or ctx ends first (nothing is left
// installed); ErrClosed.
func (s *Session) SubscribeFilter(ctx context.Context, f *filter.Filter, opts ...SubscribeOption) (*Subscription, error) {
	return s.SubscribeFilters(ctx, []*filter.Filter{f}, opts...)
}

// SubscribeFilters registers one subscription with the filters fs, OR-ed
// (S1: a subscription is one or more filters): an event any of them
// matches reaches the subscription once, and Delivery.Matched lists the
// subscription once, with the best score among its filters that matched.
// Each filter is registered, propagated and granted as SubscribeFilter's
// is, concurrently; SubscribeFilters returns when every one of them is
// granted, and on any error nothing is left installed. Options apply to
// the subscription as a whole: one queue, one handler, one TTL for every
// filter. In Switch.Stats each filter counts as a subscription and a
// filter of the index. fs is not kept (the filters are: they are
// immutable). Errors: as SubscribeFilter's, the first one met; and
// ErrInvalidFilter for an empty fs or a nil filter, naming its position.
func (s *Session) SubscribeFilters(ctx context.Context, fs []*filter.Filter, opts ...SubscribeOption) (*Subscription, error) {
	if len(fs) == 0 {
		return nil, fmt.Errorf("%w: no filters", ErrInvalidFilter)
	}
	for i, f := range fs {
		if f == nil {
			return nil, fmt.Errorf("%w: filter %d of %d is nil", ErrInvalidFilter, i+1, len(fs))
		}
	}
	cfg := subConfig{queue: DefaultQueue, ttl: -1}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.lookIn && (cfg.handler != nil || cfg.overflow != DropNewest) {
		return nil, fmt.Errorf("%w: a look-in subscription has no handler and no overflow policy (the spool's limit applies)", ErrInvalidConfig)
	}
	sub := newSubscription(s, fs[0], cfg, 0, nil)
	for _, f := range fs[1:] {
		sub.members = append(sub.members, newMember(sub, f))
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
	err := s.register(ctx, sub)
	if err == nil {
		s.mu.Lock()
		if s.subs[sub.id] != sub { // Close ran meanwhile and may have missed the registration
			err = fmt.Errorf("%w: session %q", ErrClosed, s.name)
		}
		s.mu.Unlock()
	}
	if err != nil {
		s.forget(sub)
		sub.cancel()
		return nil, err
	}
	return sub, nil
}

// register registers sub's filters with the backend: its own, and its
// members' concurrently. It returns the first error; the caller then
// unregisters them all.
func (s *Session) register(ctx context.Context, sub *Subscription) error {
	if len(sub.members) == 0 {
		return s.be.register(ctx, sub)
	}
	regs := sub.registrations()
	errs := make([]error, len(regs))
	var wg sync.WaitGroup
	for i, r := range regs {
		wg.Go(func() { errs[i] = s.be.register(ctx, r) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Sync returns once every event published on the switch before Sync was
// called that matches the session's subscriptions has been handed to them
// (their queues, handlers or spool). For a local session that is already
// true when Publish returns, and Sync returns at once; for a remote one
// (see Dial) it is a round trip that follows the switch's deliveries. It
// returns ctx's error or ErrClosed.
func (s *Session) Sync(ctx context.Context) error {
	if s.isClosed() {
		return fmt.Errorf("%w: session %q", ErrClosed, s.name)
	}
	return s.be.sync(ctx)
}

// Unsubscribe cancels sub, one of the session's subscriptions; see
// Subscription.Cancel. A subscription of another session is refused with
// ErrInvalidConfig.
func (s *Session) Unsubscribe(sub *Subscription) error {
	if sub == nil || sub.sess != s {
		return fmt.Errorf("%w: not a subscription of session %q", ErrInvalidConfig, s.name)
	}
	return sub.Cancel()
}

// SetProfile replaces the session's profile (attribute names canonical or
// synonyms, resolved here). Events published after it returns are matched
// against the new profile. It refuses a value that is missing, NaN or
// ±Inf, and a name given twice (synonyms count as one), with an error
// wrapping ErrInvalidConfig.
func (s *Session) SetProfile(profile []ontology.Attr) error {
	return s.be.setProfile(context.Background(), s, profile)
}

// Profile returns the session's profile.
func (s *Session) Profile() []ontology.Attr { return slices.Clone(*s.profile.Load()) }

// Pull returns up to max events from the session's look-in spool (S1
// look-in), oldest first, waiting until at least one is there, ctx ends
// (its error is returned) or the session closes (ErrClosed, after the
// spool is empty). max ≤ 0 means all there are.
func (s *Session) Pull(ctx context.Context, max int) ([]Delivery, error) {
	return s.be.pull(ctx, s, max)
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
	if err := s.be.sync(ctx); err != nil { // deliveries in flight reach the queues
		return err
	}
	s.be.unregister(registrations(subs)...)
	for _, sub := range subs {
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
// from its switch; a remote session says goodbye to its switch, which
// forgets it at once. It is idempotent; it must not be called from one of
// the session's handlers.
func (s *Session) Close() error {
	s.shut(nil)
	return nil
}

// Done returns a channel that is closed when the session ends: by Close,
// its switch's Close, or — for a remote session — when its connection
// failed and it could not reconnect (see ReconnectPolicy). Err then says
// why.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns nil while the session is open; once Done is closed, an
// error wrapping ErrClosed and, when the session ended other than by
// Close, the cause (for a remote session, the last connection's error or
// the switch's refusal, e.g. ErrNotAdmitted).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// shut ends the session for cause (nil: Close).
func (s *Session) shut(cause error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.be.sessionClosing(s, cause) // a remote session that ended by itself: its goroutines end now
		s.wg.Wait()
		return
	}
	s.closed = true
	if cause != nil {
		s.err = fmt.Errorf("%w: session %q ended: %w", ErrClosed, s.name, cause)
	} else {
		s.err = fmt.Errorf("%w: session %q", ErrClosed, s.name)
	}
	close(s.done)
	s.mu.Unlock()
	s.sink.ending()               // the switch's side of a remote session: its stream and requests end first
	s.be.sessionClosing(s, cause) // a remote session: goodbye, and no more deliveries
	s.mu.Lock()
	subs := s.subs
	s.subs = map[uint64]*Subscription{}
	s.mu.Unlock()
	all := make([]*Subscription, 0, len(subs))
	for _, sub := range subs {
		all = append(all, sub)
	}
	s.be.unregister(registrations(all)...)
	for _, sub := range all {
		sub.end(cause)
	}
	s.wg.Wait()
	s.be.sessionClosed(s) // only now: Switch.Close waits for sessions it still lists
}

// numInstalled returns the number of the session's subscriptions whose
// filters Switch.install has put into the index and propagated: a
// router's proxy filters that events match, without those a peer's
// register is still installing.
func (s *Session) numInstalled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sub := range s.subs {
		if sub.installed.Load() {
			n++
		}
	}
	return n
}

func (s *Session) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// forget takes sub out of the session, and its filters out of the switch.
func (s *Session) forget(sub *Subscription) {
	s.mu.Lock()
	delete(s.subs, sub.id)
	s.mu.Unlock()
	s.be.unregister(sub.registrations()...)
}

// registrations returns the registrations of subs (see
// Subscription.registrations).
func registrations(subs []*Subscription) []*Subscription {
	out := make([]*Subscription, 0, len(subs))
	for _, sub := range subs {
		out = append(out, sub)
		out = append(out, sub.members...)
	}
	return out
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
			sub.drop(1, dropSpool)
		}
	}
	clear(sp.items[:n])
	sp.items = sp.items[n:]
}

// unshift puts ds, taken from the spool, back at its front, oldest first
// (a Pull whose reply could not hold them all); they count for no
// subscription's drop if evicted now.
func (sp *spool) unshift(ds []Delivery) {
	now := time.Now()
	sp.mu.Lock()
	back := make([]spooled, len(ds), len(ds)+len(sp.items))
	for i, d := range ds {
		back[i] = spooled{d: d, at: now}
	}
	sp.items = append(back, sp.items...)
	sp.mu.Unlock()
	select {
	case sp.notify <- struct{}{}:
	default:
	}
}

// lose counts ds, taken from the spool, as dropped by it.
func (sp *spool) lose(ds []Delivery) {
	sp.mu.Lock()
	sp.dropped += uint64(len(ds))
	sp.mu.Unlock()
}

func (sp *spool) pull(ctx context.Context, max int, done <-chan struct{}) ([]Delivery, error) {
	for {
		if out := sp.take(max); len(out) > 0 {
			return out, nil
		}
		select {
		case <-sp.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-done:
			if out := sp.take(max); len(out) > 0 {
				return out, nil
			}
			return nil, fmt.Errorf("%w: session closed", ErrClosed)
		}
	}
}

// take returns up to limit entries (all for limit ≤ 0) without waiting.
func (sp *spool) take(limit int) []Delivery {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.expire(time.Now())
	n := len(sp.items)
	if limit > 0 && limit < n {
		n = limit
	}
	if n == 0 {
		return nil
	}
	out := make([]Delivery, n)
	for i := range out {
		out[i] = sp.items[i].d
	}
	clear(sp.items[:n])
	sp.items = sp.items[n:]
	if len(sp.items) > 0 { // another Pull waiting may take the rest
		select {
		case sp.notify <- struct{}{}:
		default:
		}
	}
	return out
}

func (sp *spool) stats() (int, uint64) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.items), sp.dropped
}

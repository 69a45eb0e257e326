package sion

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/guard"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
)

// SwitchConfig configures a Switch.
type SwitchConfig struct {
	// Name identifies the switch in logs, stats and events' control
	// information (Control.Origin); required, at most MaxNameBytes of
	// UTF-8 text without NUL or newline, and
	// unique in its place (probes and Leave find switches by name).
	Name string
	// Place is the event place the switch belongs to; required.
	Place *EventPlace
	// Logger receives the switch's log records (slow consumers, refused
	// sessions); nil discards them. Its handler may be called while the
	// switch holds locks, so it must not call back into sion.
	Logger *slog.Logger
	// Transport is what the switch dials with when another switch asks it
	// to request a shared link (Switch.Absorb); nil means it cannot be
	// absorbed.
	Transport transport.Transport
	// HandshakeTimeout bounds the whole handshake of a connection Serve
	// accepted, to the Welcome: the transport's (TLS, preambles; counted
	// from the connection's arrival when the transport tells it,
	// transport.Arrival, as transport/tcp does), the Hello, the shared-key
	// challenge, the admission hook. Whatever the peer sends meanwhile
	// (transport heartbeats included) does not extend it. 0 means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds the connections in their handshake at once,
	// over all of the switch's Serve calls; a connection that arrives
	// when the table is full evicts (closes) the oldest handshake of the
	// source address that holds the most. 0 means DefaultMaxHandshakes.
	MaxHandshakes int
	// MaxRetention caps how long the switch keeps a remote session whose
	// connection failed (ReconnectPolicy.Retention); 0 means
	// DefaultMaxRetention.
	MaxRetention time.Duration
	// MaxRetentionBytes caps the bytes of deliveries the switch holds for
	// one remote session, unconfirmed or waiting for its entity to return
	// (ReconnectPolicy.RetentionBytes); 0 means DefaultMaxRetentionBytes.
	MaxRetentionBytes int
	// MaxRetentionTotalBytes caps those bytes over all of the switch's
	// remote sessions together: past it, a delivery to a remote session is
	// dropped (counted, and reported to the session) as if its own bound
	// were reached. 0 means DefaultMaxRetentionTotalBytes.
	MaxRetentionTotalBytes int
	// MaxSpoolSize caps the look-in spool a remote session may ask for
	// (SessionConfig.SpoolSize, in events); 0 means DefaultMaxSpoolSize.
	MaxSpoolSize int
	// MaxSessionFilters caps the filters a remote session holds at once,
	// those being registered included; each filter of a subscription of
	// several (SubscribeFilters) counts. A Subscribe beyond it fails with
	// an error wrapping ErrNotGranted that names the cap, so that one
	// admitted entity cannot fill the switch's filter index. 0 means
	// DefaultMaxSessionFilters. Local sessions are the application's own
	// and are not capped.
	MaxSessionFilters int
	// Relay, when set, makes the switch a relay's front: what its sessions
	// publish is carried elsewhere by the relay, which brings back the
	// events their subscriptions match (S4 proxy; see Relay). nil: the
	// switch matches what is published on it, as usual.
	Relay Relay
}

// Switch is a semantic information switch (S1 SI-SW): sessions attach to
// it, it holds their filters in one filter.Index, and for every event
// published it fires each session whose filters match — once per session —
// and hands the event to each matching subscription's queue. A Switch is
// safe for concurrent use.
type Switch struct {
	cfg   SwitchConfig
	place *EventPlace
	log   *slog.Logger
	index *filter.Index
	// matching brackets each delivery from its Match to its lookup of
	// subs, so that unregister forgets a subscription only once no
	// delivery that matched it is still to look it up.
	matching matching

	nextSub     atomic.Uint64
	nextSession atomic.Uint64

	mu       sync.RWMutex
	sessions map[uint64]*Session      // mu
	subs     map[uint64]*Subscription // mu; the subscriptions in the index, and those unregister is taking out
	closed   bool                     // mu
	serving  []context.CancelFunc     // mu; of Serve calls
	conns    sync.WaitGroup           // connections Serve accepted
	servers  sync.WaitGroup           // Serve calls
	parent   *SharedLink              // mu; the link this switch requested (S1 tree rule: at most one)
	children map[string]*childLink    // mu; links other switches requested, by their name
	linkers  sync.WaitGroup           // supervisors of parent links and gateways
	releases sync.WaitGroup           // routes a reroute releases once their replacements are acknowledged (releaseAfter)
	gateways map[string]*Gateway      // mu; the gateways this switch requested, by name
	addrs    []string                 // mu; the addresses Serve listens on
	left     bool                     // mu; Leave ran and no Link since: suspended

	// routeMu orders the propagation of filters over shared links: a
	// subscription's routeAdd/routeRemove and a new router's initial
	// registers. Lock order: routeMu, then mu, then a router's mu.
	routeMu sync.Mutex
	routing switchRouting                 // this switch's part of the place's routing (Routing.attach)
	front   front                         // what the switch does with its entities' publishes and subscriptions
	routed  map[uint64]*routedSub         // routeMu; subscriptions propagated, and what they registered
	routers []*router                     // routeMu; shared links connected
	ended   LinkTotals                    // routeMu; counters of the links that have ended
	endedBy map[string]*LinkTotals        // routeMu; the same, by peer (LinkTotals)
	gwCnt   map[gatewayKey]*[2]gwCounters // mu; of the gateways other places requested, by name and place, over the switch's life
	ending  []*router                     // routeMu; out of routers, still shutting down
	seen    seenIDs                       // events that crossed a link, came back from a relay, or were published with a caller-set ID
	ids     *idSource                     // the IDs this switch gives the events it admits

	// installing, set by tests only, is called as a peer's register over
	// a shared or overlay link or a gateway is being installed, between
	// its proxy's entry into the router's session and Switch.install: a
	// test stops it there to see what the switch reports meanwhile.
	installing atomic.Pointer[func(r *router, sub *Subscription)]

	probeMu sync.Mutex
	probes  map[uint64]chan probeReply // probeMu; Probe calls waiting for replies

	eventsIn, fires, deliveries, refused, duplicates atomic.Uint64
	agentSent, agentReceived                         atomic.Uint64 // messages on the agent's connection (S2)

	handshakes  *guard.Handshakes     // connections in their handshake
	refusals    *guard.Every          // refusals logged, per source
	refusalsAll *guard.Window         // refusals logged, all sources
	stopping    chan struct{}         // closed when Close begins
	remotes     map[string]*remoteEnd // mu; remote sessions by token
	tombs       map[string]tombstone  // mu; remote sessions that ended while away, by token
	tombOrder   []string              // mu; the tokens of tombs, oldest first

	dropped     atomic.Uint64                 // events lost for subscriptions, over the switch's life
	drops       [numDropReasons]atomic.Uint64 // dropped, by reason
	published   atomic.Uint64                 // events its sessions published, admitted
	matched     atomic.Uint64                 // subscriptions' matches (SubscriptionStats.Matched, summed)
	spilled     atomic.Uint64                 // events the Spill policy put in spools
	matchTime   durations                     // Index.Match's durations
	disconnects atomic.Uint64                 // remote sessions' connections that ended with the session kept
	held        atomic.Int64                  // bytes of deliveries held by remote sessions' streams

	pool sync.Pool // *publishScratch
}

// NewSwitch returns a switch for cfg. A missing Name or Place, or a
// negative bound, returns an error wrapping ErrInvalidConfig.
func NewSwitch(cfg SwitchConfig) (*Switch, error) {
	if err := checkName("SwitchConfig.Name", cfg.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	switch {
	case cfg.Place == nil:
		return nil, fmt.Errorf("%w: SwitchConfig.Place is nil", ErrInvalidConfig)
	case cfg.HandshakeTimeout < 0 || cfg.MaxRetention < 0:
		return nil, fmt.Errorf("%w: SwitchConfig.HandshakeTimeout %v and MaxRetention %v must not be negative", ErrInvalidConfig, cfg.HandshakeTimeout, cfg.MaxRetention)
	case cfg.MaxHandshakes < 0 || cfg.MaxRetentionBytes < 0 || cfg.MaxRetentionTotalBytes < 0 || cfg.MaxSpoolSize < 0 || cfg.MaxSessionFilters < 0:
		return nil, fmt.Errorf("%w: SwitchConfig.MaxHandshakes %d, MaxRetentionBytes %d, MaxRetentionTotalBytes %d, MaxSpoolSize %d and MaxSessionFilters %d must not be negative",
			ErrInvalidConfig, cfg.MaxHandshakes, cfg.MaxRetentionBytes, cfg.MaxRetentionTotalBytes, cfg.MaxSpoolSize, cfg.MaxSessionFilters)
	}
	cfg.HandshakeTimeout = cmp.Or(cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	cfg.MaxHandshakes = cmp.Or(cfg.MaxHandshakes, DefaultMaxHandshakes)
	cfg.MaxRetention = cmp.Or(cfg.MaxRetention, DefaultMaxRetention)
	cfg.MaxRetentionBytes = cmp.Or(cfg.MaxRetentionBytes, DefaultMaxRetentionBytes)
	cfg.MaxRetentionTotalBytes = cmp.Or(cfg.MaxRetentionTotalBytes, DefaultMaxRetentionTotalBytes)
	cfg.MaxSpoolSize = cmp.Or(cfg.MaxSpoolSize, DefaultMaxSpoolSize)
	cfg.MaxSessionFilters = cmp.Or(cfg.MaxSessionFilters, DefaultMaxSessionFilters)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sw := &Switch{
		ids:      newIDSource(),
		cfg:      cfg,
		place:    cfg.Place,
		log:      log,
		index:    filter.NewIndex(cfg.Place.Ontology()),
		sessions: map[uint64]*Session{},
		subs:     map[uint64]*Subscription{},
		children: map[string]*childLink{},
		routed:   map[uint64]*routedSub{},
		probes:   map[uint64]chan probeReply{},

		handshakes:  guard.NewHandshakes(cfg.MaxHandshakes),
		refusals:    guard.NewEvery(refusalLogInterval, refusalLogSources),
		refusalsAll: guard.NewWindow(maxLogRecords, refusalLogInterval),
		stopping:    make(chan struct{}),
		remotes:     map[string]*remoteEnd{},
		tombs:       map[string]tombstone{},
	}
	sw.pool.New = func() any { return new(publishScratch) }
	sw.routing = cfg.Place.cfg.Routing.attach(sw)
	sw.front = localFront{sw}
	if cfg.Relay != nil {
		sw.front = newRelayFront(sw, cfg.Relay)
	}
	return sw, nil
}

// Name returns the switch's name.
func (sw *Switch) Name() string { return sw.cfg.Name }

// Place returns the switch's event place.
func (sw *Switch) Place() *EventPlace { return sw.place }

// Open opens a session for an entity, after the place's admission hook
// (if any) approves it. Errors wrap ErrNotAdmitted (with the hook's
// error), ErrInvalidConfig (a bad profile) or ErrClosed.
func (sw *Switch) Open(ctx context.Context, cfg SessionConfig) (*Session, error) {
	if err := sw.admitSession(ctx, cfg, nil); err != nil {
		return nil, err
	}
	return sw.openSession(cfg, nil)
}

// admitSession asks the place's admission hook whether the session cfg
// describes may open (or resume); conn is a remote session's connection
// (nil for a local one), whose address and TLS state the hook sees.
func (sw *Switch) admitSession(ctx context.Context, cfg SessionConfig, conn transport.Conn) error {
	admit := sw.place.cfg.Admit
	if admit == nil {
		return nil
	}
	req := AdmissionRequest{Place: sw.place.Name(), Switch: sw.cfg.Name, Session: cfg.Name}
	if conn != nil {
		req.Remote, req.TLS = conn.RemoteAddr(), tlsState(conn)
	}
	if err := admit(ctx, req); err != nil {
		source := ""
		if conn != nil {
			source = guard.Source(conn.RemoteAddr())
		}
		sw.refusal(source, "sion: session refused", "place", req.Place, "session", cfg.Name, "err", err) // before the count: who sees the count sees the record
		sw.refused.Add(1)
		return fmt.Errorf("%w: session %q in place %q: %w", ErrNotAdmitted, cfg.Name, req.Place, err)
	}
	return nil
}

// openSession opens a session that has been admitted, for cfg; its
// matches go to the sink sinkFor returns for it (nil: its own queues and
// spool; see newSession).
func (sw *Switch) openSession(cfg SessionConfig, sinkFor func(*Session) sink) (*Session, error) {
	if cfg.SpoolSize < 0 || cfg.SpoolRetention < 0 {
		return nil, fmt.Errorf("%w: SessionConfig.SpoolSize %d and SpoolRetention %v must not be negative", ErrInvalidConfig, cfg.SpoolSize, cfg.SpoolRetention)
	}
	profile, err := sw.canonicalProfile(cfg.Profile)
	if err != nil {
		return nil, err
	}
	s := newSession(sw, sw, sw.nextSession.Add(1), cfg.Name, profile, newSpool(cfg.SpoolSize, cfg.SpoolRetention), sinkFor)
	if err := sw.addSession(s); err != nil {
		return nil, err
	}
	return s, nil
}

// addSession puts s into the switch's table of sessions; it refuses
// (ErrClosed) once the switch has begun to close.
func (sw *Switch) addSession(s *Session) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.closed {
		return fmt.Errorf("%w: switch %q", ErrClosed, sw.cfg.Name)
	}
	sw.sessions[s.id] = s
	return nil
}

// canonicalProfile checks a profile and returns a copy with canonical
// attribute names.
func (sw *Switch) canonicalProfile(p []ontology.Attr) ([]ontology.Attr, error) {
	out := make([]ontology.Attr, len(p))
	seen := map[string]bool{}
	for i, a := range p {
		if v := a.Value; !v.IsValid() || v.IsNaN() || v.Kind() == ontology.KindFloat && math.IsInf(v.Float(), 0) {
			return nil, fmt.Errorf("%w: profile attribute %q has no usable value (%v)", ErrInvalidConfig, a.Name, a.Value)
		}
		name := sw.place.Ontology().CanonicalAttribute(a.Name)
		if seen[name] {
			return nil, fmt.Errorf("%w: profile attribute %q appears twice (names and synonyms count as one)", ErrInvalidConfig, name)
		}
		seen[name] = true
		out[i] = ontology.Attr{Name: name, Value: a.Value}
	}
	return out, nil
}

// register puts sub's filter into the index — sub is reachable by Match
// from then on — and propagates it over the switch's shared links; it
// returns once every switch within the filter's TTL has it active (S2
// subscription contract), or refuses it and takes it out again.
func (sw *Switch) register(ctx context.Context, sub *Subscription) error {
	if sub.ttl < 0 {
		sub.ttl = sw.place.cfg.TTL
	}
	routes, err := sw.install(sub)
	if err != nil {
		return err
	}
	if len(routes) > 0 {
		if err := sw.awaitContract(ctx, sub, routes); err != nil {
			sw.unregister(sub)
			return err
		}
	}
	if err := sw.front.subscribed(ctx, sub); err != nil {
		sw.unregister(sub)
		return err
	}
	return nil
}

// unregister takes subs' filters out of the index — no Match that starts
// afterwards reaches them — and, once every delivery that matched one of
// them before has found it (matching.wait), forgets them and releases what
// they propagated over shared links. A delivery in flight thus still
// reaches a subscription being unregistered: a proxy filter replaced make
// before break (a TTL raised, a cover released, a managed constraint
// changed) passes every event the index matched before its replacement
// was in.
//
// It first waits for the Matches in progress (matching.wait) and only
// then takes the filters out: a Match is not one snapshot of the index —
// it visits the groups of the event's types one after the other, and Add
// and Remove change a group in place without waiting for it — so a Match
// that began before the replacement's Add and reads the replacement's
// group before that Add and the old filter's group after the Remove would
// see neither (S2: an event lost while a constraint widens from a filter
// on a type to {type ⊑ *}). A Match that begins after the first wait
// began after the replacement's Add returned, and finds it. It waits for
// the Matches in progress, twice, not for the deliveries they make.
// Idempotent.
func (sw *Switch) unregister(subs ...*Subscription) {
	var gone []*Subscription
	for _, sub := range subs {
		if sub.unregistered.Swap(true) { // first: a register in progress checks it after its Add
			continue
		}
		gone = append(gone, sub)
	}
	if len(gone) == 0 {
		return
	}
	sw.matching.wait() // the Matches that may have missed a replacement end first
	for _, sub := range gone {
		sw.index.Remove(sub.id)
	}
	sw.matching.wait()
	sw.mu.Lock()
	for _, sub := range gone {
		if sw.subs[sub.id] == sub {
			delete(sw.subs, sub.id)
		}
	}
	sw.mu.Unlock()
	for _, sub := range gone {
		sw.routeRemove(sub)
		sw.front.unsubscribed(sub)
	}
}

// The rest of the backend of local sessions.

func (sw *Switch) publish(ctx context.Context, s *Session, ev *Event) error {
	e, err := sw.place.admit(ev, admitPublished)
	if err != nil {
		return err
	}
	if err := sw.routing.publishing(s, e); err != nil {
		return err
	}
	sw.published.Add(1)
	return sw.front.publish(ctx, s.done, s, e)
}

// inject is how an event enters the network at this switch — a session's
// Publish (admitPublished) or the switch's own routed control
// (admitControl: Entity's discovery): it admits ev into the place by rule,
// gives the copy its ID and Origin, and delivers it. stop ends a Block
// wait (the publishing session's done; nil for none).
func (sw *Switch) inject(ctx context.Context, stop <-chan struct{}, ev *Event, rule admitRule) error {
	e, err := sw.place.admit(ev, rule)
	if err != nil {
		return err
	}
	return sw.enter(ctx, stop, e)
}

// enter gives an admitted event its ID — unless it has its publisher's
// (Event.ID; localFront.publish dropped it if seen) — and its Origin, and
// delivers it.
func (sw *Switch) enter(ctx context.Context, stop <-chan struct{}, e *Event) error {
	if e.ID.IsZero() {
		e.ID = sw.ids.next()
	}
	e.Control.Origin = sw.cfg.Name
	return sw.deliver(ctx, stop, nil, e)
}

func (sw *Switch) nextSubID() uint64 { return sw.nextSub.Add(1) }

func (sw *Switch) setProfile(_ context.Context, s *Session, profile []ontology.Attr) error {
	p, err := sw.canonicalProfile(profile)
	if err != nil {
		return err
	}
	s.profile.Store(&p)
	return nil
}

func (sw *Switch) pull(ctx context.Context, s *Session, max int) ([]Delivery, error) {
	return s.spool.pull(ctx, max, s.done)
}

func (sw *Switch) sync(context.Context) error { return nil } // Publish delivers before it returns

func (sw *Switch) sessionClosing(*Session, error) {}

func (sw *Switch) sessionClosed(s *Session) {
	sw.routing.withdraw(s)
	sw.mu.Lock()
	delete(sw.sessions, s.id)
	sw.mu.Unlock()
}

func (sw *Switch) countDeliveries(n uint64) { sw.deliveries.Add(n) }

func (sw *Switch) countDrops(n uint64, why dropReason) {
	sw.dropped.Add(n)
	sw.drops[why].Add(n)
}

func (sw *Switch) countMatches(n uint64) { sw.matched.Add(n) }

func (sw *Switch) countSpills(n uint64) { sw.spilled.Add(n) }

func (sw *Switch) logger() *slog.Logger { return sw.log }

func (sw *Switch) name() string { return sw.cfg.Name }

// eventFrames holds the encodings of one event that the sinks it fires
// share, each made once, when the first sink needs it: the Deliver frame
// for remote sessions (deliverFrame, remote_switch.go) and the Forward
// frame for shared links (forwardFrame, link.go).
type eventFrames struct {
	sd  *wire.SharedDeliver
	err error

	fwd     []byte // the Forward frame for shared links
	fwdErr  error
	fwdDone bool
	seen    bool // the event's ID is recorded as seen already

	// bypass is the switch's S3 bypass rules as the event read them, once
	// for all its links, between its match and its leaving the switch's
	// matching (switchRouting.matched, bypass.go).
	bypass *bypassTable
}

type publishScratch struct {
	hits []hitSub
	// shared is the event's frames, encoded once for all sinks; here,
	// not on deliver's stack, because a sink (an interface) may keep
	// the pointer as far as the compiler can tell.
	shared eventFrames
}

type hitSub struct {
	sub   *Subscription
	id    uint64
	score float64
}

// deliver matches e and hands it to every matching subscription, grouped
// by session: a session fires once (S1), after its profile passes e's
// patronage condition.
// stop closes when the publishing session does: it ends a Block wait.
// from is the router session of the link e arrived on (nil for an event
// published here): it does not fire, so e never goes back.
func (sw *Switch) deliver(ctx context.Context, stop <-chan struct{}, from *Session, e *Event) error {
	return sw.deliverExcept(ctx, stop, from, nil, e)
}

// deliverExcept is deliver, leaving out the sessions for which skip (when
// not nil) reports true.
func (sw *Switch) deliverExcept(ctx context.Context, stop <-chan struct{}, from *Session, skip func(*Session) bool, e *Event) error {
	timed := sw.eventsIn.Add(1)%matchSampling == 0
	ps := sw.pool.Get().(*publishScratch)
	defer func() {
		clear(ps.hits)
		ps.hits = ps.hits[:0]
		ps.shared = eventFrames{}
		sw.pool.Put(ps)
	}()
	g := sw.matching.enter()
	if h := sw.matching.testEntered; h != nil {
		h(e)
	}
	var start time.Time
	if timed {
		start = time.Now()
	}
	sw.index.Match(e, func(id uint64, score float64) {
		ps.hits = append(ps.hits, hitSub{id: id, score: score})
	})
	if timed {
		sw.matchTime.observe(time.Since(start))
	}
	if len(ps.hits) == 0 {
		sw.matching.leave(g)
		return nil
	}
	sw.mu.RLock()
	n := 0
	for _, h := range ps.hits {
		if sub := sw.subs[h.id]; sub != nil && sub.sess != from {
			h.sub = sub
			ps.hits[n] = h
			n++
		}
	}
	sw.mu.RUnlock()
	shared := &ps.shared
	*shared = eventFrames{seen: from != nil} // an event from a link was recorded when it arrived
	sw.routing.matched(shared)               // before leave: a change waits for it (matching.wait)
	sw.matching.leave(g)
	if skip != nil { // the caller's code: after leave, so that it may unregister
		n = len(slices.DeleteFunc(ps.hits[:n], func(h hitSub) bool { return skip(h.sub.sess) }))
	}
	hits := ps.hits[:n]
	slices.SortFunc(hits, func(a, b hitSub) int {
		if c := cmp.Compare(a.sub.sess.id, b.sub.sess.id); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	var errs []error
	for len(hits) > 0 {
		s := hits[0].sub.sess
		k := 1
		for k < len(hits) && hits[k].sub.sess == s {
			k++
		}
		if err := sw.fire(ctx, stop, s, e, hits[:k], shared); err != nil {
			errs = append(errs, err)
		}
		hits = hits[k:]
	}
	return errors.Join(errs...)
}

// matching counts the deliveries between their Match and their lookup
// of Switch.subs and of the routing's state (switchRouting.matched), in
// two generations, as the filter index counts its readers (left-right):
// a delivery adds itself to the current generation (enter), and wait
// flips the generation and waits for the old one to empty, twice, so
// that it returns once every delivery that entered before it was called
// has left. A delivery costs three atomic
// operations; wait costs the Matches in progress (at 1M filters, about
// a millisecond), and never waits for a delivery that enters meanwhile.
type matching struct {
	gen atomic.Uint32
	_   [60]byte
	n   [2]struct {
		atomic.Int64
		_ [56]byte // each on its own cache line: every delivery writes one
	}
	mu sync.Mutex // one wait at a time: wait's flips must not interleave

	// Tests only, set before the switch is used: testEntered runs in a
	// delivery between enter and its Match; testWait when wait begins.
	testEntered func(*Event)
	testWait    func()
}

// enter counts a delivery that is about to Match; leave(g) with what it
// returns once it has looked up its hits.
func (m *matching) enter() uint32 {
	g := m.gen.Load() & 1
	m.n[g].Add(1)
	return g
}

func (m *matching) leave(g uint32) { m.n[g].Add(-1) }

// wait returns once every delivery that entered before the call has left.
// A delivery that counts itself in a generation after wait saw it empty
// starts its Match after wait was called, so after the caller's
// Index.Remove. It must not be called between enter and leave.
func (m *matching) wait() {
	if m.testWait != nil {
		m.testWait()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for range 2 {
		g := m.gen.Load() & 1
		m.gen.Store(g ^ 1)
		for m.n[g].Load() != 0 {
			runtime.Gosched()
		}
	}
}

// fire delivers e to session s, whose subscriptions hits matched, through
// the session's sink: a fire, counted, when the sink's patronage check
// lets e through.
func (sw *Switch) fire(ctx context.Context, stop <-chan struct{}, s *Session, e *Event, hits []hitSub, shared *eventFrames) error {
	if !s.sink.patron(s, e) {
		return nil
	}
	sw.fires.Add(1)
	return s.sink.fire(ctx, stop, s, e, hits, shared)
}

// Drain refuses new sessions and subscriptions (ErrClosed), drains every
// session (see Session.Drain) and closes the switch; it returns ctx's
// error if ctx ends first, leaving the sessions not yet drained open.
func (sw *Switch) Drain(ctx context.Context) error {
	sw.mu.Lock()
	sw.closed = true
	sw.mu.Unlock()
	for _, s := range sw.sessionList() {
		if err := s.Drain(ctx); err != nil {
			return err
		}
	}
	return sw.Close()
}

// Close ends the switch's shared links and the gateways it requested, none
// of which is re-established once Close has begun (the other places are
// not told that a federation ends: gateways they requested to this switch
// are re-established when a switch serves at its address again), stops
// every Serve call (their listeners are closed when it returns), closes
// every session (remote ones with their connections), waits for their
// goroutines to return and refuses new sessions with ErrClosed. A
// connected remote session is told first, at the end of its stream, and
// given up to a second to confirm what it received: it then reconnects (to
// a switch that starts again at the address, say) knowing it lost nothing;
// what it does not confirm in time, and what sessions whose entities are
// away hold, is counted as dropped here (Stats.Dropped), and those
// entities cannot know it. Close is idempotent.
func (sw *Switch) Close() error {
	sw.mu.Lock()
	if !chanClosed(sw.stopping) {
		close(sw.stopping)
	}
	sw.closed = true
	serving := sw.serving
	sw.serving = nil
	parent := sw.parent
	gateways := make([]*Gateway, 0, len(sw.gateways))
	for _, g := range sw.gateways {
		gateways = append(gateways, g)
	}
	sw.mu.Unlock()
	if parent != nil {
		parent.Close()
	}
	for _, g := range gateways {
		g.q.cancel() // not Close: the other place keeps its consent for when this switch returns
	}
	sw.routing.close()
	sw.linkers.Wait()
	sw.releases.Wait() // they return at stopping
	sw.goodbye()
	for _, stop := range serving {
		stop()
	}
	sw.servers.Wait()
	sw.conns.Wait()
	for _, s := range sw.sessionList() {
		s.Close()
	}
	return nil
}

func (sw *Switch) sessionList() []*Session {
	sw.mu.RLock()
	defer sw.mu.RUnlock()
	out := make([]*Session, 0, len(sw.sessions))
	for _, s := range sw.sessions {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Session) int { return cmp.Compare(a.id, b.id) })
	return out
}

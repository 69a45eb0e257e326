package sion

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/guard"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/udp"
)

// Defaults of EntityConfig.
const (
	// DefaultBasePlace is the name of the base event place (S1: the
	// entry point every entity joins first).
	DefaultBasePlace = "base"
	// DefaultDiscoveryPort is the UDP port probes are broadcast to.
	DefaultDiscoveryPort = 47474
	// DefaultProbeWait is how long one probe round collects answers.
	DefaultProbeWait = 250 * time.Millisecond
	// DefaultProbeRounds is how many rounds without any answer an entity
	// probes before it tries its seeds, then founds a base place alone.
	DefaultProbeRounds = 3
	// DefaultCheckInterval is how often an Active entity checks its base
	// link, and a lone one probes again to join others.
	DefaultCheckInterval = 2 * time.Second
)

// EntityConfig configures an Entity. Name, Ontology (or Place) and
// Transport are required; the zero value of every other field means its
// default.
type EntityConfig struct {
	// Name is the entity's name: its unicast identifier in every place
	// (S1 advertisement: "name:" + Name), and the name of each of its
	// switches. Required; unique in the network; at most MaxNameBytes
	// bytes of UTF-8 without NUL or newline.
	Name string
	// Nickname and Group are further properties a search can ask for
	// (identifiers "nickname:" and "group:"); optional.
	Nickname, Group string
	// Attributes are the entity's multicast identifiers ("attr:key=value"):
	// a search for an attribute reaches every entity that has it. Keys
	// must not contain "="; keys and values no NUL or newline.
	Attributes map[string]string
	// Ontology is the event types of every place the entity joins, used
	// when Place is nil.
	Ontology *ontology.Ontology
	// Place returns the configuration of a place the entity joins (the
	// base place, or one a search reaches): an entity can only join a
	// place whose ontology it knows. nil means PlaceConfig{Name: name,
	// Ontology: Ontology, SharedKey: SharedKey}. It may return an error to
	// refuse a place; a search then passes it by.
	Place func(name string) (PlaceConfig, error)
	// SharedKey is the shared key of the places made when Place is nil.
	SharedKey []byte
	// BasePlace names the base event place, the one discovery joins;
	// default DefaultBasePlace. Probes name it: only entities that belong
	// to it answer, so a network can have several entry places.
	BasePlace string
	// Transport carries the entity's shared links (tcp in practice);
	// required.
	Transport transport.Transport
	// ListenHost is the host each of the entity's switches listens on,
	// each on a fresh port; default "0.0.0.0" (every interface). Peers
	// are never given an unspecified address: see AdvertiseHost.
	ListenHost string
	// AdvertiseHost, when set, is the only host given to peers (probe
	// answers, search answers, link requests). When empty, a peer is given
	// ListenHost if it is a concrete address, else the local address of
	// the interface that faces that peer — so a loopback address only to
	// a peer on this host, never 0.0.0.0 (on a multi-homed host each
	// peer gets the address it can reach).
	AdvertiseHost string
	// DiscoveryPort is the UDP port probes are broadcast to and answered
	// from; default DefaultDiscoveryPort. Every entity of a network uses
	// the same one; entities on one host share it.
	DiscoveryPort uint16
	// NoBroadcast disables the probes: the entity links to a seed, or
	// founds a base place. It still answers probes.
	NoBroadcast bool
	// Seeds are well-known base entities (addresses on Transport of
	// switches of the base place) tried, in order, when no probe is
	// answered (S1: "a well-known base entity can be used").
	Seeds []string
	// ProbeWait, ProbeRounds and CheckInterval tune discovery; 0 means
	// DefaultProbeWait, DefaultProbeRounds and DefaultCheckInterval; a
	// negative value is refused. An Active entity notices the loss of its
	// base link at its next checks: it is Suspended at most two
	// CheckIntervals after the link went down.
	ProbeWait     time.Duration
	ProbeRounds   int
	CheckInterval time.Duration
	// AdvertiseTTL bounds, in hops, how far the entity's advertisement
	// filters spread in each place; 0 means the place's TTL.
	AdvertiseTTL int
	// Link configures the shared links the entity requests.
	Link LinkConfig
	// OnStateChange, when set, is called with each change of the entity's
	// state, in order, one at a time, just before the change shows in
	// State and WaitState (so a WaitState that returns has seen its call
	// return). It must not block for long, wait for the entity's state,
	// nor call Close.
	OnStateChange func(from, to State)
	// Logger receives the entity's and its switches' log records; nil
	// discards them. Its handler may be called while sion holds locks, so
	// it must not call back into sion.
	Logger *slog.Logger
}

// Entity is an S1 entity: a process's member of a sion network, holding
// one switch (with its listener and advertisement session) per event
// place it belongs to, and through them its shared links; gateways can be
// added with its switches' Federate. It goes through the S1 life cycle:
// NewEntity makes it Suspended (NonExistent before), discovery makes it
// Active, losing its base link makes it Suspended again until discovery
// succeeds anew, and Close makes it NonExistent.
//
// Discovery (S1): a Suspended entity broadcasts a probe naming its base
// place to DiscoveryPort on every interface; Active entities that belong
// to that place (as their base place or any other) answer with the
// address their switch there can be reached at from the prober;
// it links its base switch to the first that answered (or to a seed when
// nobody answers; or, when nobody answers and no seed is reachable, it
// founds the base place alone). Entities that start together and hear
// only each other's Suspended answers elect the one with the lowest ID (a
// random 64-bit number each entity draws at NewEntity) to found. A root
// (an Active entity with no requested base link) probes the other roots
// every CheckInterval and links to one with a lower ID, so base places
// founded apart merge into one tree; a lone root also tries its seeds.
// Probes and answers are JSON datagrams (version 1). A probe is padded
// with trailing spaces to udp.DefaultMaxDatagramBytes (1,200 bytes), and
// an entity never answers with more bytes than the probe had: a shorter
// probe, such as an unpadded one, whose answer would be longer is not
// answered (EntityStats.ShortProbes). Nor does it answer one source
// address more than ProbeAnswerBurst times at once and
// ProbeAnswersPerSecond after that (EntityStats.ThrottledProbes); sources
// on its own host (loopback) are not limited. A probe's source address
// can be forged, so these two rules keep the discovery port from
// reflecting traffic at another host, and from amplifying it. Anything
// else on the port is counted in EntityStats.BadDatagrams and ignored.
// Each kind of log record about a datagram (junk, a refused probe, an
// answer with an unusable address) is written at most once per source
// address every 10 seconds, with the number suppressed since the last
// one as "suppressed"; the counters count every datagram.
//
// Advertisement (S1): in each place, the entity subscribes one filter on
// DiscoveryType events whose AddressAttr is one of its identifiers
// ("name:", "nickname:", "group:", "attr:key=value", "place:" for each
// place it belongs to), with AdvertiseTTL; it spreads over shared links
// like any filter, so a discovery event addressed to a name reaches that
// entity (unicast) and one addressed to an attribute reaches every entity
// that has it (multicast), within the TTL. See Search.
//
// An Entity is safe for concurrent use.
type Entity struct {
	cfg EntityConfig
	id  uint64 // random: tells the entity's own broadcasts from others'
	log *slog.Logger

	// cancel ends the context NewEntity gives the entity's goroutines
	// (Close); stop is that context's Done, for the work started outside
	// them (see closing).
	cancel context.CancelFunc
	stop   <-chan struct{}
	wg     sync.WaitGroup

	mu       sync.Mutex                 // guards the fields below; no other lock is taken while it is held
	state    State                      // mu
	changed  chan struct{}              // mu; closed and replaced at each state change
	places   map[string]*member         // mu
	searches map[string]chan EntityInfo // mu; by search ID
	closed   bool                       // mu

	// stateMu serializes setState, so that OnStateChange calls come one
	// at a time, in order: it is taken before mu and held while
	// OnStateChange runs.
	stateMu sync.Mutex

	probeConn, answerConn *udp.Conn
	answers               chan probeAnswer // readProbeAnswers → probeRound
	answerLimit           *answerLimit     // answerProbes only
	logLimit              *guard.Every     // logDatagram, per source
	logAll                *guard.Window    // logDatagram, all sources
	stats                 entityCounters
}

// member is the entity's part of one place.
type member struct {
	place *EventPlace
	sw    *Switch
	l     transport.Listener
	sess  *Session
	adv   *Subscription // advMu; the advertisement filter
	link  *SharedLink   // mu; the link the entity requested, if any
	via   string        // mu; the entity it was joined through
	serve chan struct{} // closed when Serve returns
	ids   []string      // advMu; the identifiers adv carries
	advMu sync.Mutex    // serializes advertise; taken before Entity.mu and the session's and switch's locks
	mu    sync.Mutex    // link, via; no other lock is taken while it is held
}

// entityCounters are the messages discovery and search sent and received.
type entityCounters struct {
	probesSent, probesReceived, probeAnswersSent, probeAnswersReceived atomic.Uint64
	badDatagrams, ownProbes, shortProbes, throttledProbes              atomic.Uint64
	discoverySent, discoveryReceived, answersSent, answersReceived     atomic.Uint64
}

// EntityStats counts an entity's discovery and search messages (see
// Entity.Stats): UDP datagrams of the probe protocol, and discovery
// events (DiscoveryType, DiscoveryAnswerType) it published and received.
// The shared-link frames those events took are in its switches' Stats.
type EntityStats struct {
	State                                                              State
	ProbesSent, ProbesReceived, ProbeAnswersSent, ProbeAnswersReceived uint64
	// BadDatagrams counts datagrams on the discovery port that were not
	// a probe or answer of this protocol (ignored, logged at Debug), and
	// answers with an unusable address (logged at Warn); OwnProbes the
	// entity's own probes it received back (ignored: an entity never
	// answers or links to itself).
	BadDatagrams, OwnProbes uint64
	// ShortProbes counts probes not answered because the answer would
	// have had more bytes than the probe (an unpadded probe, or a forged
	// one meant to amplify traffic); ThrottledProbes those not answered
	// because their source address had had ProbeAnswerBurst answers and
	// was over ProbeAnswersPerSecond. Both are in ProbesReceived too.
	ShortProbes, ThrottledProbes                                   uint64
	DiscoverySent, DiscoveryReceived, AnswersSent, AnswersReceived uint64
}

// NewEntity makes an entity (NonExistent → Suspended): its base switch,
// serving on a fresh port of ListenHost, and its discovery, which runs in
// the background until Close. Use WaitState (or OnStateChange) to learn
// when it is Active. Errors wrap ErrInvalidConfig (a missing or bad
// field, naming it), or are the listener's errors.
func NewEntity(cfg EntityConfig) (*Entity, error) {
	if err := checkEntityConfig(&cfg); err != nil {
		return nil, err
	}
	e := &Entity{cfg: cfg, log: cfg.Logger, places: map[string]*member{}, searches: map[string]chan EntityInfo{}, answers: make(chan probeAnswer, 256), state: NonExistent, changed: make(chan struct{}),
		answerLimit: newAnswerLimit(ProbeAnswersPerSecond, ProbeAnswerBurst, maxDiscoverySources),
		logLimit:    guard.NewEvery(discoveryLogInterval, maxDiscoverySources),
		logAll:      guard.NewWindow(maxLogRecords, discoveryLogInterval)}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	var b [8]byte
	rand.Read(b[:])
	e.id = binary.BigEndian.Uint64(b[:]) | 1 // never 0
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.stop = cancel, ctx.Done()
	var err error
	e.answerConn, err = udp.Listen(fmt.Sprintf("0.0.0.0:%d", cfg.DiscoveryPort), udp.Config{Shared: true}) // a socket bound to one address hears no broadcasts
	if err != nil {
		cancel()
		return nil, fmt.Errorf("sion: entity %q: discovery port: %w", cfg.Name, err)
	}
	e.probeConn, err = udp.Listen("0.0.0.0:0", udp.Config{})
	if err != nil {
		e.answerConn.Close()
		cancel()
		return nil, fmt.Errorf("sion: entity %q: probe socket: %w", cfg.Name, err)
	}
	if _, err := e.join(cfg.BasePlace); err != nil {
		e.probeConn.Close()
		e.answerConn.Close()
		cancel()
		return nil, err
	}
	e.setState(Suspended)
	e.wg.Add(3)
	go e.answerProbes(ctx)
	go e.readProbeAnswers(ctx)
	go e.run(ctx)
	return e, nil
}

func checkEntityConfig(cfg *EntityConfig) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: entity: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if err := checkName("entity name", cfg.Name); err != nil {
		return bad("%v", err)
	}
	for what, s := range map[string]string{"Nickname": cfg.Nickname, "Group": cfg.Group} {
		if strings.ContainsAny(s, "\x00\n") || len(s) > MaxNameBytes {
			return bad("%s %.40q: at most %d bytes, no NUL or newline", what, s, MaxNameBytes)
		}
	}
	for k, v := range cfg.Attributes {
		if k == "" || strings.ContainsAny(k, "=\x00\n") || strings.ContainsAny(v, "\x00\n") || len(k)+len(v) > MaxNameBytes {
			return bad("attribute %.40q=%.40q: a non-empty key without '=', no NUL or newline, at most %d bytes", k, v, MaxNameBytes)
		}
	}
	if cfg.Transport == nil {
		return bad("Transport is required (the shared links' transport)")
	}
	if cfg.Place == nil && cfg.Ontology == nil {
		return bad("Ontology (or Place) is required")
	}
	if cfg.BasePlace == "" {
		cfg.BasePlace = DefaultBasePlace
	}
	if err := checkPlaceName(cfg.BasePlace); err != nil {
		return bad("BasePlace: %v", err)
	}
	if cfg.ListenHost == "" {
		cfg.ListenHost = "0.0.0.0"
	}
	if cfg.AdvertiseHost != "" {
		if ip, err := netip.ParseAddr(cfg.AdvertiseHost); err != nil || ip.IsUnspecified() {
			return bad("AdvertiseHost %q is not a concrete IP address", cfg.AdvertiseHost)
		}
	}
	if cfg.DiscoveryPort == 0 {
		cfg.DiscoveryPort = DefaultDiscoveryPort
	}
	if cfg.ProbeWait < 0 || cfg.ProbeRounds < 0 || cfg.CheckInterval < 0 {
		return bad("negative ProbeWait %v, ProbeRounds %d or CheckInterval %v", cfg.ProbeWait, cfg.ProbeRounds, cfg.CheckInterval)
	}
	if cfg.ProbeWait == 0 {
		cfg.ProbeWait = DefaultProbeWait
	}
	if cfg.ProbeRounds == 0 {
		cfg.ProbeRounds = DefaultProbeRounds
	}
	if cfg.CheckInterval == 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	if cfg.AdvertiseTTL < 0 {
		return bad("AdvertiseTTL %d is negative", cfg.AdvertiseTTL)
	}
	cfg.Attributes = maps.Clone(cfg.Attributes)
	cfg.Seeds = slices.Clone(cfg.Seeds)
	return nil
}

// Name returns the entity's name.
func (e *Entity) Name() string { return e.cfg.Name }

// State returns the entity's life-cycle state now (S1).
func (e *Entity) State() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state
}

// WaitState waits until the entity is in state s and returns nil, or
// returns ctx's error, or an error wrapping ErrClosed when the entity
// closes first (unless s is NonExistent).
func (e *Entity) WaitState(ctx context.Context, s State) error {
	for {
		e.mu.Lock()
		st, ch := e.state, e.changed
		e.mu.Unlock()
		switch {
		case st == s:
			return nil
		case st == NonExistent:
			return fmt.Errorf("%w: entity %q", ErrClosed, e.cfg.Name)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("sion: entity %q waiting to be %v (it is %v): %w", e.cfg.Name, s, st, ctx.Err())
		}
	}
}

func (e *Entity) setState(s State) {
	e.stateMu.Lock() // the only writer of e.state: changes happen one at a time, in order
	defer e.stateMu.Unlock()
	e.mu.Lock()
	from := e.state
	e.mu.Unlock()
	if from == s || (from == NonExistent && s != Suspended) {
		return
	}
	e.log.Info("sion: entity state", "entity", e.cfg.Name, "from", from, "to", s)
	if e.cfg.OnStateChange != nil {
		e.cfg.OnStateChange(from, s) // before the change shows: whoever WaitState releases sees it reported
	}
	e.mu.Lock()
	e.state = s
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

// Switch returns the entity's switch in place, or nil when it does not
// belong to it.
func (e *Entity) Switch(place string) *Switch {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m := e.places[place]; m != nil {
		return m.sw
	}
	return nil
}

// Places returns the names of the places the entity belongs to, sorted.
func (e *Entity) Places() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Sorted(maps.Keys(e.places))
}

// Addr returns the address the entity's switch in place listens on, or ""
// when it does not belong to it. Peers get a concrete form of it.
func (e *Entity) Addr(place string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m := e.places[place]; m != nil {
		return m.l.Addr().String()
	}
	return ""
}

// Stats returns the entity's discovery and search counters.
func (e *Entity) Stats() EntityStats {
	c := &e.stats
	return EntityStats{
		State:      e.State(),
		ProbesSent: c.probesSent.Load(), ProbesReceived: c.probesReceived.Load(),
		ProbeAnswersSent: c.probeAnswersSent.Load(), ProbeAnswersReceived: c.probeAnswersReceived.Load(),
		BadDatagrams: c.badDatagrams.Load(), OwnProbes: c.ownProbes.Load(),
		ShortProbes: c.shortProbes.Load(), ThrottledProbes: c.throttledProbes.Load(),
		DiscoverySent: c.discoverySent.Load(), DiscoveryReceived: c.discoveryReceived.Load(),
		AnswersSent: c.answersSent.Load(), AnswersReceived: c.answersReceived.Load(),
	}
}

// Close makes the entity NonExistent: it stops discovery, closes its
// switches (their links and gateways end, peers are told) and waits for
// all of its goroutines. Idempotent; returns nil.
func (e *Entity) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		e.wg.Wait()
		return nil
	}
	e.closed = true
	ms := slices.Collect(maps.Values(e.places))
	e.places = map[string]*member{} // Places, Switch and Addr tell nothing after Close
	e.mu.Unlock()
	e.cancel()
	e.probeConn.Close()
	e.answerConn.Close()
	for _, m := range ms {
		m.sw.Close()
		<-m.serve
	}
	e.wg.Wait()
	e.setState(NonExistent)
	return nil
}

// closing returns a context that ends when the entity closes, and its
// cancel, to call once the work is done: for work that runs outside the
// entity's own goroutines — on a caller's (Join, Search) or a
// subscription's handler — and must last, and end, with the entity (its
// switches' Serve, its advertisement filters, answers to searches).
func (e *Entity) closing() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	select {
	case <-e.stop:
		cancel()
	default:
		go func() {
			select {
			case <-e.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

// join makes the entity's switch in place (listening, advertising), or
// returns the one it has.
func (e *Entity) join(place string) (*member, error) {
	e.mu.Lock()
	if m := e.places[place]; m != nil {
		e.mu.Unlock()
		return m, nil
	}
	if e.closed {
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: entity %q", ErrClosed, e.cfg.Name)
	}
	e.mu.Unlock()
	pc := PlaceConfig{Name: place, Ontology: e.cfg.Ontology, SharedKey: e.cfg.SharedKey}
	if e.cfg.Place != nil {
		var err error
		if pc, err = e.cfg.Place(place); err != nil {
			return nil, fmt.Errorf("sion: entity %q cannot join place %q: %w", e.cfg.Name, place, err)
		}
		if pc.Name != place {
			return nil, fmt.Errorf("%w: entity %q: EntityConfig.Place(%q) returned place %q", ErrInvalidConfig, e.cfg.Name, place, pc.Name)
		}
	}
	p, err := NewEventPlace(pc)
	if err != nil {
		return nil, fmt.Errorf("sion: entity %q: place %q: %w", e.cfg.Name, place, err)
	}
	sw, err := NewSwitch(SwitchConfig{Name: e.cfg.Name, Place: p, Logger: e.cfg.Logger, Transport: e.cfg.Transport})
	if err != nil {
		return nil, err
	}
	l, err := e.cfg.Transport.Listen(net.JoinHostPort(e.cfg.ListenHost, "0"))
	if err != nil {
		sw.Close()
		return nil, fmt.Errorf("sion: entity %q: listen for place %q: %w", e.cfg.Name, place, err)
	}
	m := &member{place: p, sw: sw, l: l, serve: make(chan struct{})}
	serveCtx, stopServe := e.closing()
	go func() {
		defer close(m.serve)
		defer stopServe()
		sw.Serve(serveCtx, l)
	}()
	ctx, cancel := e.closing()
	defer cancel()
	m.sess, err = sw.Open(ctx, SessionConfig{Name: e.cfg.Name + "/advertisement"})
	if err == nil {
		e.mu.Lock()
		if e.closed {
			err = fmt.Errorf("%w: entity %q", ErrClosed, e.cfg.Name)
		} else {
			e.places[place] = m
		}
		e.mu.Unlock()
	}
	if err != nil {
		sw.Close()
		<-m.serve
		return nil, err
	}
	if err := e.subscribeAnswers(ctx, m); err != nil {
		return m, err
	}
	if err := e.advertiseAll(); err != nil {
		return m, err
	}
	return m, nil
}

// subscribeAnswers subscribes the answers to the entity's searches in m's
// place: DiscoveryAnswerType events addressed to its name, with the
// place's TTL — as far as its discovery events go, however short its
// AdvertiseTTL.
func (e *Entity) subscribeAnswers(ctx context.Context, m *member) error {
	f, err := filter.Build(filter.Spec{Type: ontology.DiscoveryAnswerType, Predicates: []filter.Predicate{
		{Operand: filter.Attr(ontology.AddressAttr), Op: filter.OpEQ, Value: ontology.String("name:" + e.cfg.Name)}}})
	if err == nil {
		_, err = m.sess.SubscribeFilter(ctx, f, WithHandler(func(d Delivery) { e.discovered(m, d.Event) }), WithQueue(256))
	}
	if err != nil {
		return fmt.Errorf("sion: entity %q: subscribe answers in place %q: %w", e.cfg.Name, m.place.Name(), err)
	}
	return nil
}

// identifiers returns the entity's advertised identifiers (S1 entity
// properties), sorted.
func (e *Entity) identifiers() []string {
	ids := []string{"name:" + e.cfg.Name}
	if e.cfg.Nickname != "" {
		ids = append(ids, "nickname:"+e.cfg.Nickname)
	}
	if e.cfg.Group != "" {
		ids = append(ids, "group:"+e.cfg.Group)
	}
	for k, v := range e.cfg.Attributes {
		ids = append(ids, "attr:"+k+"="+v)
	}
	for _, p := range e.Places() {
		ids = append(ids, "place:"+p)
	}
	sort.Strings(ids)
	return ids
}

// advertiseAll (re)subscribes the advertisement filter in every place the
// entity belongs to, once its identifiers changed (a place joined).
func (e *Entity) advertiseAll() error {
	e.mu.Lock()
	ms := slices.Collect(maps.Values(e.places))
	e.mu.Unlock()
	var errs []error
	for _, m := range ms {
		errs = append(errs, e.advertise(m))
	}
	return errors.Join(errs...)
}

// advertise subscribes m's advertisement filter for the entity's
// identifiers now, the new one before the old one goes, so the entity is
// reachable throughout.
func (e *Entity) advertise(m *member) error {
	m.advMu.Lock()
	defer m.advMu.Unlock()
	ids := e.identifiers()
	if slices.Equal(ids, m.ids) {
		return nil
	}
	set := make([]ontology.Value, len(ids))
	for i, id := range ids {
		set[i] = ontology.String(id)
	}
	f, err := filter.Build(filter.Spec{Type: ontology.DiscoveryType, Predicates: []filter.Predicate{{Operand: filter.Attr(ontology.AddressAttr), Op: filter.OpIn, Set: set}}})
	if err != nil {
		return fmt.Errorf("sion: entity %q: advertisement filter: %w", e.cfg.Name, err)
	}
	opts := []SubscribeOption{WithHandler(func(d Delivery) { e.discovered(m, d.Event) }), WithQueue(256)}
	if e.cfg.AdvertiseTTL > 0 {
		opts = append(opts, WithTTL(e.cfg.AdvertiseTTL))
	}
	ctx, cancel := e.closing()
	defer cancel()
	sub, err := m.sess.SubscribeFilter(ctx, f, opts...)
	if err != nil {
		return fmt.Errorf("sion: entity %q: advertise in place %q: %w", e.cfg.Name, m.place.Name(), err)
	}
	if m.adv != nil {
		m.sess.Unsubscribe(m.adv)
	}
	m.adv, m.ids = sub, ids
	return nil
}

// Join makes the entity a member of place: it makes its switch there
// (serving, advertising) and, when addr is not "", links it to the switch
// at addr (another entity's, in that place). With addr "" the entity is
// the place's first member, which others join. Joining a place it belongs
// to already (with a link, or addr "") does nothing. Errors: those of
// EntityConfig.Place, NewEventPlace, the listener and Switch.Link;
// ErrClosed after Close. Safe for concurrent use.
func (e *Entity) Join(ctx context.Context, place, addr string) error {
	if err := checkPlaceName(place); err != nil {
		return fmt.Errorf("%w: Join: %v", ErrInvalidConfig, err)
	}
	member := e.member(place) != nil
	m, err := e.join(place)
	if err != nil || addr == "" || m.requested() != nil {
		return err
	}
	if err := e.linkTo(ctx, m, addr, addr); err != nil {
		if !member {
			e.leave(place) // a failed Join leaves no isolated member behind
		}
		return err
	}
	return nil
}

// checkPlaceName refuses a place name an entity cannot join: checkName's
// rules, no blank name, and not beginning with ontology.ReservedPrefix.
func checkPlaceName(place string) error {
	if err := checkName("place name", place); err != nil {
		return err
	}
	if strings.TrimSpace(place) == "" || ontology.IsReserved(place) {
		return fmt.Errorf("place name %q is blank or begins with %q (reserved)", place, ontology.ReservedPrefix)
	}
	return nil
}

package nats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// Defaults of GatewayConfig's zero fields.
const (
	// DefaultPrefix is the first token of every subject.
	DefaultPrefix = "sion"
	// DefaultWatchInterval is how often the interest is re-read.
	DefaultWatchInterval = 50 * time.Millisecond
	// DefaultOutQueue is the out subscription's queue length, in events.
	DefaultOutQueue = 1 << 14
	// DefaultMaxTypePaths bounds the paths from a root per event type.
	DefaultMaxTypePaths = 64
	// DefaultFlushTimeout bounds the wait for the NATS server to confirm
	// new subscriptions when the context has no deadline.
	DefaultFlushTimeout = 5 * time.Second
)

// GatewayConfig configures a Gateway. Conn is required; the zero value of
// every other field means its default.
type GatewayConfig struct {
	// Conn is the NATS connection the Gateway publishes and subscribes
	// on. The caller owns it: Close does not close it. Made with
	// natsgo.NoEcho(), it spares the Gateway its own messages.
	Conn *natsgo.Conn
	// Name names the gateway on the caller's switch (Switch.Gateways),
	// and the subject place and its switch (events that came in from NATS
	// have it in Control.Path); default "nats:" followed by the base
	// subject "<prefix>.<place>". At most sion.MaxNameBytes.
	Name string
	// Prefix is the first token or tokens of every subject (a NATS
	// subject without wildcards); default DefaultPrefix, "sion".
	Prefix string
	// Place is the place token of the subjects, escaped as one token
	// (EscapeToken); default the caller's switch's place's name.
	Place string
	// Ontology is the subject place's ontology; nil means the caller's
	// place's. With another ontology, Out and In need Mappings.
	Ontology *ontology.Ontology
	// Out and In configure the two directions, as for any gateway
	// (sion.DirectionConfig: Mapping and Firewall filters): Out from the
	// caller's place to NATS (the federation's Export), In from NATS
	// (Import). nil turns a direction off; both nil means both on,
	// unconverted and without firewall.
	Out, In *sion.DirectionConfig
	// OutFilters are the filters, over the subject place's ontology, of
	// the events sent out to NATS; nil means {type ⊑ *}. They are the
	// subject place's interest that crosses to the caller's place.
	OutFilters []string
	// Subjects are the NATS subjects (wildcards allowed) whose messages
	// come in, as far as the interest needs them; nil means
	// "<prefix>.<place>.>". An empty non-nil list means the keys of Types
	// only.
	Subjects []string
	// Types maps a NATS subject (no wildcards) to the event type of its
	// messages without CloudEvents headers; its keys are subscribed as
	// Subjects are. A key inside "<prefix>.<place>." overrides the type
	// path there.
	Types map[string]string
	// CloudEvents configures the Codec (see the cloudevents module);
	// its Ontology, when nil, is the subject place's, and must be that
	// one otherwise.
	CloudEvents cloudevents.Config
	// WatchInterval is how often the Gateway re-reads the interest that
	// decides its NATS subscriptions; default DefaultWatchInterval.
	WatchInterval time.Duration
	// OutQueue is the queue length, in events, of the out subscription;
	// default DefaultOutQueue. A full queue drops the newest events
	// (Stats.OutDropped).
	OutQueue int
	// MaxTypePaths bounds the number of paths from a root an event type
	// may have; default DefaultMaxTypePaths.
	MaxTypePaths int
	// Logger receives the Gateway's and the subject switch's log
	// records; nil discards them.
	Logger *slog.Logger
}

// Reason says why a NATS message was refused (Stats.InRefused).
type Reason string

// The reasons a message is refused.
const (
	// ReasonNoType is a message without CloudEvents headers on a subject
	// that names no event type (outside the type space and not in
	// GatewayConfig.Types, or not a type path).
	ReasonNoType Reason = "no-type"
	// ReasonUnknownType is a CloudEvent whose type the Codec does not know
	// (sion.ErrUnknownEventType).
	ReasonUnknownType Reason = "unknown-type"
	// ReasonBadCloudEvent is CloudEvents headers or a structured event
	// that do not decode into an event (sion.ErrInvalidEvent).
	ReasonBadCloudEvent Reason = "bad-cloudevent"
	// ReasonRefused is an event the subject switch refused at Publish
	// (an attribute or payload its place does not accept).
	ReasonRefused Reason = "refused"
)

// Stats counts what a Gateway did, since NewGateway.
type Stats struct {
	// OutEvents counts the events published to NATS, OutMessages the
	// NATS messages that took (one per path of the event's type),
	// OutStructured the events sent in structured mode. OutFailed counts
	// the events not published (the Codec refused them, or NATS did), and
	// OutDropped those the out subscription's full queue dropped.
	OutEvents, OutMessages, OutStructured, OutFailed, OutDropped uint64
	// InReceived counts the NATS messages received, InPublished those
	// published into the subject switch as events (InDuplicates of them
	// were dropped there as events seen before: echoes and copies),
	// InRefused those refused, by reason. InDropped counts the messages
	// lost on the way in without a fault of theirs: the NATS client's
	// pending limits on a subscription (a slow consumer, natsgo's
	// Subscription.Dropped) and the gateway's queue toward the caller's
	// place when a burst outruns it (sion.GatewayCounters.Dropped of the
	// subject switch's end: 65,536 events or 64 MiB wait; the first drop
	// of an episode is logged at Warn).
	InReceived, InPublished, InDuplicates, InDropped uint64
	InRefused                                        map[Reason]uint64
	// Subjects are the NATS subjects subscribed now, sorted.
	Subjects []string
}

// Gateway is a NATS subject space federated with an event place (S1
// S/x-GW; see the package section "The S/x-GW"). It is
// safe for concurrent use.
type Gateway struct {
	cfg   GatewayConfig
	log   *slog.Logger
	nc    *natsgo.Conn
	ts    *typeSpace
	codec *cloudevents.Codec
	in    []string // configured subjects (Subjects and Types' keys)
	types map[string]*ontology.EventType

	sw   *sion.Switch  // the subject switch
	sess *sion.Session // its session: publishes what comes in, subscribes what goes out
	out  *sion.Subscription
	fed  *sion.Gateway
	bg   sync.WaitGroup // Serve and the watcher
	// life ends at Close (stop): it ends the watcher and unblocks the
	// handlers' Publish calls. It is the Gateway's own context, never a
	// caller's.
	life context.Context
	stop context.CancelFunc

	outEvents, outMessages, outStructured, outFailed atomic.Uint64
	inReceived, inPublished                          atomic.Uint64
	inRetiredDrops                                   atomic.Uint64 // the NATS client's drops on subscriptions retired

	mu       sync.Mutex
	closed   bool              // mu
	refused  map[Reason]uint64 // mu
	handlers sync.WaitGroup    // NATS handlers running; Add under mu while !closed

	// smu guards the subscriptions; it is held while they change and
	// the server confirms (a flush), so Stats reports subjects the
	// server has. Lock order: smu before mu.
	smu      sync.Mutex
	subs     map[string]*natsgo.Subscription // smu; by subject
	lastSeen []string                        // smu; the filters the subscriptions were made for
}

// NewGateway makes a Gateway that federates sw's place with the NATS
// subject space of cfg (see the package section "The S/x-GW"), and
// returns once the federation is up: events published afterwards in
// sw's place that the Out firewall lets through reach NATS. Incoming
// subscriptions follow the interest within GatewayConfig.WatchInterval.
//
// Errors wrap sion.ErrInvalidConfig for a bad cfg (no Conn, a subject or
// prefix that is not a NATS subject, an unknown type in Types, an
// ontology with a type of more than MaxTypePaths paths, a Codec
// configuration it refuses), or are Switch.Federate's. ctx bounds the
// federation's handshake.
func NewGateway(ctx context.Context, sw *sion.Switch, cfg GatewayConfig) (*Gateway, error) {
	switch {
	case sw == nil:
		return nil, fmt.Errorf("%w: nats: NewGateway with a nil switch", sion.ErrInvalidConfig)
	case cfg.Conn == nil:
		return nil, fmt.Errorf("%w: nats: GatewayConfig.Conn is nil", sion.ErrInvalidConfig)
	case cfg.WatchInterval < 0 || cfg.OutQueue < 0 || cfg.MaxTypePaths < 0:
		return nil, fmt.Errorf("%w: nats: GatewayConfig.WatchInterval, OutQueue and MaxTypePaths must not be negative", sion.ErrInvalidConfig)
	}
	bad := func(err error) error { return fmt.Errorf("%w: nats: %v", sion.ErrInvalidConfig, err) }
	cfg.Prefix = cmp.Or(cfg.Prefix, DefaultPrefix)
	if err := checkLiteral("GatewayConfig.Prefix", cfg.Prefix); err != nil {
		return nil, bad(err)
	}
	cfg.Place = cmp.Or(cfg.Place, sw.Place().Name())
	base := cfg.Prefix + "." + EscapeToken(cfg.Place)
	cfg.Name = cmp.Or(cfg.Name, "nats:"+base)
	cfg.WatchInterval = cmp.Or(cfg.WatchInterval, DefaultWatchInterval)
	cfg.OutQueue = cmp.Or(cfg.OutQueue, DefaultOutQueue)
	cfg.MaxTypePaths = cmp.Or(cfg.MaxTypePaths, DefaultMaxTypePaths)
	if cfg.Out == nil && cfg.In == nil {
		cfg.Out, cfg.In = &sion.DirectionConfig{}, &sion.DirectionConfig{}
	}
	if cfg.Ontology == nil {
		cfg.Ontology = sw.Place().Ontology()
	}
	if cfg.OutFilters == nil {
		cfg.OutFilters = []string{"{type ⊑ *}"}
	}
	if cfg.Subjects == nil {
		cfg.Subjects = []string{base + ".>"}
	}
	g := &Gateway{cfg: cfg, nc: cfg.Conn, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		subs: map[string]*natsgo.Subscription{}, refused: map[Reason]uint64{}, types: map[string]*ontology.EventType{}}
	o := cfg.Ontology
	var err error
	if g.ts, err = newTypeSpace(base, o, cfg.MaxTypePaths); err != nil {
		return nil, bad(err)
	}
	for _, s := range cfg.Subjects {
		if err := checkPattern("GatewayConfig.Subjects", s); err != nil {
			return nil, bad(err)
		}
		g.in = append(g.in, s)
	}
	for _, s := range slices.Sorted(maps.Keys(cfg.Types)) {
		if err := checkLiteral("GatewayConfig.Types key", s); err != nil {
			return nil, bad(err)
		}
		t, ok := o.Lookup(cfg.Types[s])
		if !ok || t.ID < ontology.NumReserved {
			return nil, bad(fmt.Errorf("GatewayConfig.Types[%q]: no event type %q in the subject place's ontology", s, cfg.Types[s]))
		}
		g.types[s] = t
		g.in = append(g.in, s)
	}
	ce := cfg.CloudEvents
	if ce.Ontology == nil {
		ce.Ontology = o
	} else if ce.Ontology != o {
		return nil, bad(errors.New("GatewayConfig.CloudEvents.Ontology is not the subject place's ontology"))
	}
	if g.codec, err = cloudevents.NewCodec(ce); err != nil {
		return nil, err
	}
	outFilters := make([]*filter.Filter, len(cfg.OutFilters))
	for i, src := range cfg.OutFilters {
		if outFilters[i], err = filter.Compile(src); err != nil {
			return nil, fmt.Errorf("%w: nats: GatewayConfig.OutFilters[%d]: %w", sion.ErrInvalidFilter, i, err)
		}
	}

	// The subject place and its switch, serving on an in-process network.
	// Only the caller's switch reaches the in-process network; the place
	// still approves no other federation.
	from := sw.Place().Name()
	approve := func(_ context.Context, req sion.FederationRequest) error {
		if req.Gateway != cfg.Name || req.Place != from {
			return fmt.Errorf("nats: the subject place federates with place %q only", from)
		}
		return nil
	}
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: cfg.Name, Ontology: o, Federation: approve})
	if err != nil {
		return nil, err
	}
	if g.sw, err = sion.NewSwitch(sion.SwitchConfig{Name: cfg.Name, Place: place, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	life, stop := context.WithCancel(context.Background())
	g.life, g.stop = life, stop
	fail := func(err error) (*Gateway, error) {
		g.Close()
		return nil, err
	}
	network, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		return fail(err)
	}
	l, err := network.Listen("subjects")
	if err != nil {
		return fail(err)
	}
	g.bg.Go(func() { // until the subject switch closes (Close, after the unfederate)
		if err := g.sw.Serve(context.Background(), l); err != nil {
			g.log.Error("nats: the subject switch stopped serving", "gateway", cfg.Name, "err", err)
		}
	})
	if g.sess, err = g.sw.Open(ctx, sion.SessionConfig{Name: "nats"}); err != nil {
		return fail(err)
	}
	if cfg.Out != nil {
		if g.out, err = g.sess.SubscribeFilters(ctx, outFilters, sion.WithQueue(cfg.OutQueue), sion.WithHandler(g.send)); err != nil {
			return fail(err)
		}
	}
	if g.fed, err = sw.Federate(ctx, network, l.Addr().String(), sion.GatewayConfig{Name: cfg.Name, Export: cfg.Out, Import: cfg.In}); err != nil {
		return fail(err)
	}
	if cfg.In != nil {
		if err := g.sync(ctx); err != nil {
			return fail(err)
		}
		g.bg.Go(func() { g.watch(life) })
	}
	return g, nil
}

// Federation returns the gateway between the caller's place and the
// subject place (SetMapping, SetFirewall, Info).
func (g *Gateway) Federation() *sion.Gateway { return g.fed }

// Base returns the base subject, "<prefix>.<place>".
func (g *Gateway) Base() string { return g.ts.base }

// Subjects returns the subjects an event of the subject place's type
// typ is published on, one per path from a root of the ontology, or nil
// for a type the ontology does not have.
func (g *Gateway) Subjects(typ string) []string {
	t, ok := g.ts.o.Lookup(typ)
	if !ok || t.ID < ontology.NumReserved {
		return nil
	}
	return g.ts.subjects(t.ID)
}

// Stats returns the Gateway's counters and the subjects it is subscribed
// to now.
func (g *Gateway) Stats() Stats {
	st := Stats{
		OutEvents: g.outEvents.Load(), OutMessages: g.outMessages.Load(), OutStructured: g.outStructured.Load(), OutFailed: g.outFailed.Load(),
		InReceived: g.inReceived.Load(), InPublished: g.inPublished.Load(), InDuplicates: g.sw.Stats().Duplicates,
	}
	if g.out != nil {
		st.OutDropped = g.out.Stats().Dropped
	}
	g.mu.Lock()
	st.InRefused = maps.Clone(g.refused)
	g.mu.Unlock()
	for _, gi := range g.sw.Gateways() {
		st.InDropped += gi.Export.Dropped
	}
	st.InDropped += g.inRetiredDrops.Load()
	g.smu.Lock()
	st.Subjects = slices.Sorted(maps.Keys(g.subs))
	for _, sub := range g.subs {
		if n, err := sub.Dropped(); err == nil {
			st.InDropped += uint64(n)
		}
	}
	g.smu.Unlock()
	return st
}

// Close ends the Gateway: it unsubscribes on NATS and waits for the
// message handlers running, ends the federation (unfederate), and closes
// the subject switch, waiting for every goroutine the Gateway started. It
// does not close the NATS connection. It is idempotent and returns nil.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	g.smu.Lock()
	subs := g.subs
	g.subs = map[string]*natsgo.Subscription{}
	g.smu.Unlock()
	if g.stop != nil {
		g.stop() // ends the watcher and the Publish calls of handlers
	}
	for _, s := range subs {
		if err := s.Unsubscribe(); err != nil && !errors.Is(err, natsgo.ErrConnectionClosed) && !errors.Is(err, natsgo.ErrBadSubscription) {
			g.log.Warn("nats: unsubscribe", "gateway", g.cfg.Name, "subject", s.Subject, "err", err)
		}
	}
	g.handlers.Wait()
	if g.fed != nil {
		g.fed.Close()
	}
	if g.sess != nil {
		g.sess.Close()
	}
	if g.sw != nil {
		g.sw.Close()
	}
	g.bg.Wait()
	return nil
}

// watch re-reads the interest every WatchInterval until life ends.
func (g *Gateway) watch(life context.Context) {
	t := time.NewTicker(g.cfg.WatchInterval)
	defer t.Stop()
	last := "" // the last error logged: a failure is logged once, not every tick
	for {
		select {
		case <-life.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(life, DefaultFlushTimeout)
			err := g.sync(ctx)
			cancel()
			switch {
			case err == nil:
				last = ""
			case life.Err() == nil && err.Error() != last:
				last = err.Error()
				g.log.Warn("nats: the subscriptions do not follow the interest", "gateway", g.cfg.Name, "err", err)
			}
		}
	}
}

// Sync makes the Gateway's NATS subscriptions follow the interest now,
// instead of at the next WatchInterval, and returns once the NATS server
// has them. Called after a Subscribe in the caller's place returned, it
// restores S2's contract for events published on NATS: Subscribe returns
// once the gateway's filters in the subject place are installed, and Sync
// subscribes to what they need, so a message published on NATS after
// Sync returned to the Gateway's NATS server reaches the subscriber. In
// a NATS cluster the other servers learn of a new subscription a moment
// later (interest propagates along the cluster's routes), so a message
// published on another server just after Sync returned may still miss
// it; wait for the interest there (server.Server's
// SubscriptionInterest, say) where that matters. Errors: the Gateway is closed
// (sion.ErrClosed), a NATS subscribe or flush failed, or ctx's. Safe for
// concurrent use.
func (g *Gateway) Sync(ctx context.Context) error {
	if g.cfg.In == nil {
		return nil
	}
	return g.sync(ctx)
}

// sync subscribes on NATS to the subjects the interest needs now and
// unsubscribes from the others, then flushes so that the server has them.
func (g *Gateway) sync(ctx context.Context) error {
	g.smu.Lock()
	defer g.smu.Unlock()
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: nats: gateway %q", sion.ErrClosed, g.cfg.Name)
	}
	var filters []string
	for _, info := range g.sw.Gateways() {
		if info.Name == g.cfg.Name {
			filters = info.Filters
		}
	}
	if g.lastSeen != nil && slices.Equal(filters, g.lastSeen) {
		return nil
	}
	want := g.wantedSubjects(filters)
	changed := false
	var err error
	// The new subjects first, the old ones after the server has the new:
	// a message on a subject both cover is not lost in between (it may
	// come in twice, see the package section).
	for _, subj := range want {
		if g.subs[subj] != nil {
			continue
		}
		s, serr := g.nc.Subscribe(subj, g.receive)
		if serr != nil {
			err = fmt.Errorf("nats: gateway %q: subscribe %q: %w", g.cfg.Name, subj, serr)
			break
		}
		g.subs[subj] = s
		changed = true
	}
	if changed {
		if _, ok := ctx.Deadline(); !ok { // nats.go's flush needs a deadline
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, DefaultFlushTimeout)
			defer cancel()
		}
		if ferr := g.nc.FlushWithContext(ctx); ferr != nil && err == nil {
			err = fmt.Errorf("nats: gateway %q: flush after subscribing: %w", g.cfg.Name, ferr)
		}
	}
	if err == nil {
		for subj, s := range g.subs {
			if !slices.Contains(want, subj) {
				g.retire(subj, s)
				delete(g.subs, subj)
			}
		}
	}
	if err != nil {
		g.lastSeen = nil // the next sync tries again
		return err
	}
	g.lastSeen = slices.Clone(filters)
	if g.lastSeen == nil {
		g.lastSeen = []string{}
	}
	return nil
}

// retire ends the subscription s on subj: it keeps the count of the
// messages the NATS client dropped there (Stats.InDropped) and drains it,
// so that the messages it holds still come in. smu must be held.
func (g *Gateway) retire(subj string, s *natsgo.Subscription) {
	if n, err := s.Dropped(); err == nil {
		g.inRetiredDrops.Add(uint64(n))
	}
	if err := s.Drain(); err != nil {
		g.log.Warn("nats: unsubscribe", "gateway", g.cfg.Name, "subject", subj, "err", err)
	}
}

// wantedSubjects returns the subjects to subscribe to for the filters of
// the caller's place's interest (see the package section).
func (g *Gateway) wantedSubjects(filters []string) []string {
	if len(filters) == 0 {
		return nil
	}
	var need []string
	anyType := false
	var types []int
	for _, src := range filters {
		f, err := filter.Compile(src)
		if err != nil {
			g.log.Warn("nats: a gateway filter does not compile; subscribing to the whole space", "gateway", g.cfg.Name, "filter", src, "err", err)
			anyType = true
			need = append(need, g.ts.base+".>")
			continue
		}
		if f.Type() == filter.AnyType {
			anyType = true
		} else if t, ok := g.ts.o.Lookup(f.Type()); ok {
			types = append(types, t.ID)
		}
		ws, err := g.ts.wanted(f.Type())
		if err != nil {
			g.log.Warn("nats: a gateway filter names an unknown type", "gateway", g.cfg.Name, "filter", src, "err", err)
			continue
		}
		need = append(need, ws...)
	}
	var out []string
	space := g.ts.base + ".>"
	for _, s := range g.in {
		if t := g.types[s]; t != nil {
			if anyType || slices.ContainsFunc(types, func(id int) bool { return g.ts.o.IsA(t.ID, id) }) {
				out = append(out, s)
			}
			continue
		}
		if !covers(space, s) {
			out = append(out, s) // outside the type space: while there is interest
			continue
		}
		for _, n := range need {
			switch {
			case covers(s, n):
				out = append(out, n)
			case overlaps(s, n):
				out = append(out, s)
			}
		}
	}
	return minimal(out)
}

// refuse counts a refused message and logs it (Debug).
func (g *Gateway) refuse(m *natsgo.Msg, r Reason, err error) {
	g.mu.Lock()
	g.refused[r]++
	g.mu.Unlock()
	g.log.Debug("nats: message refused", "gateway", g.cfg.Name, "subject", m.Subject, "reason", string(r), "err", err)
}

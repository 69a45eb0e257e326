package site

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/transport"
)

// DefaultRequestTimeout bounds a proxy's wait for the site manager's
// answer, and for a dial (ProxyConfig.RequestTimeout).
const DefaultRequestTimeout = 5 * time.Second

// DefaultQueue is the queue of each subscription a proxy holds at a
// switch or another proxy (ProxyConfig.Queue).
const DefaultQueue = 1024

// proxySessionPrefix starts the name of a session that a proxy opens on
// another proxy's front: "site-proxy/SITE/NAME". A representative proxy
// tells by it the subscriptions of other sites' proxies, which it fans
// out to its own site's switches only.
const proxySessionPrefix = "site-proxy/"

// ProxyConfig configures a Proxy. The zero value of every field not
// marked required means its default.
type ProxyConfig struct {
	// Name identifies the proxy: its session's name at the site manager
	// and at switches; required, unique among the proxies.
	Name string
	// Site is the ID of the proxy's site; required.
	Site string
	// Addr is the address at which the proxy serves (Serve): where
	// applications dial it, and where the other proxies reach it when it
	// is its site's representative proxy; required.
	Addr string
	// Transport is what the proxy dials the site manager, switches and
	// other proxies with; required.
	Transport transport.Transport
	// Manager is the site manager's address; required. ManagerKey is the
	// shared key of its place (ManagerConfig.SharedKey), if it has one.
	Manager    string
	ManagerKey []byte
	// Switches are the addresses of the site's switches, if the proxy
	// knows them; the site manager's list (SiteConfig.Switches) wins.
	Switches []string
	// SwitchKey is the shared key of the switches' place, if it has one.
	SwitchKey []byte
	// Place configures the proxy's front, the place its applications'
	// sessions are in: Ontology is required and must be the switches'
	// (the proxy expands a filter's type to its subtypes with it); Name
	// defaults to "site-proxy"; SharedKey and Admit admit applications —
	// and other proxies, which dial with SharedKey. Routing is ignored.
	Place sion.PlaceConfig
	// Refresh is how often the proxy registers again with the site
	// manager; DefaultRefresh by default.
	Refresh time.Duration
	// RequestTimeout bounds each request to the site manager and each
	// dial; DefaultRequestTimeout by default.
	RequestTimeout time.Duration
	// Queue is the queue of each subscription the proxy holds at a
	// switch or another proxy; DefaultQueue by default. Events that
	// overflow it are counted in ProxyStats.Dropped.
	Queue int
	// MaxHeld bounds the events the proxy holds while the subscriptions
	// that need their types are being placed (ProxyStats.Held; see the
	// package doc, "Publishing"); DefaultMaxHeld by default. An event
	// beyond it is published at once and counted in ProxyStats.Unsettled.
	MaxHeld int
	// Direct sends a subscription to every switch of every remote site
	// that publishes its type, not once to the site's representative
	// proxy — S4's Fig. 9, the traffic representative proxies remove; for
	// comparison only.
	Direct bool
	// Logger receives the proxy's log records; nil discards them.
	Logger *slog.Logger
}

// Proxy is S4's proxy: applications dial it (sion.Dial to Addr, or Open
// in the same process) exactly as they would a switch, and it finds for
// them which switches of which sites serve their event types by asking
// the site manager. Its front is a sion switch whose relay (sion.Relay)
// is the proxy:
//
//   - Publish: the proxy asks the site manager where its site publishes
//     (cached; the first publish of an event type registers it there).
//     A site with one switch: the proxy publishes at it. Several: it hands
//     the event to the site's representative proxy, which spreads the
//     publishes over the switches (S4 Fig. 15, 17, 20). A site with none
//     publishes at the fallback site (ManagerConfig.Fallback). The events
//     of a type new at the site are held while the subscriptions that
//     need it are being placed (the package doc, "Publishing").
//   - Subscribe: the proxy asks the site manager which sites publish the
//     filter's event type or one of its subtypes; it subscribes at its
//     own site's switches directly, and once per remote site at that
//     site's representative proxy (S4 Fig. 18, 21), which fans the
//     subscription out to the switches of its site that carry the type
//     and sends their events back. Identical filters are placed once,
//     reference-counted.
//
// One proxy of each site is its representative proxy, as the site
// manager says: the first to ask, or the operator's choice. It keeps the
// broker management information (switch → event types it has spread
// there, S4 Fig. 13), and spreads publishes so that the counts per
// switch differ by at most one.
//
// Events keep their ID from the front where they were published to every
// front that delivers them, and a front drops an ID it has seen, so an
// event reaches each subscription once even while subscriptions move
// between representative proxies.
//
// A proxy names its sessions on other proxies' fronts
// "site-proxy/SITE/NAME": a representative proxy takes the subscriptions
// of sessions so named, of another site, for that site's proxy's — it
// places them at its own site's switches only and never hands them events
// from other sites — and spreads the publishes of those of its own site
// itself. An application should not name its sessions so: it would only
// limit what it receives. An event brought from another site is
// delivered to the front's applications only, never to the sessions of
// other sites' proxies, so it neither returns to its site nor goes on to
// a third.
//
// Cost: a subscription at a proxy is one subscription at each switch of
// its site and one at each other site that publishes its type (its
// representative proxy, which holds one at each of its switches that carry
// the type): identical filters share them. Each held subscription has a
// queue of ProxyConfig.Queue deliveries and a goroutine at the proxy. Bound
// what an application may subscribe to with the front's Admit where that
// matters.
//
// A Subscribe on the front returns once the subscription is placed where
// the site manager's answer says (granted at each switch and
// representative proxy). While the site manager is away — or does not
// answer within ProxyConfig.RequestTimeout — the proxy works on its
// cached answers (a type it has never asked about is placed at its own
// site's switches only, and at the other sites once the manager answers,
// after Subscribe has returned); it registers again when the manager is
// back. A Proxy is safe for concurrent use.
type Proxy struct {
	cfg  ProxyConfig
	log  *slog.Logger
	sw   *sion.Switch
	port *sion.RelayPort
	pool *pool
	mgr  *managerLink

	mu         sync.Mutex
	subs       map[uint64]*frontSub // mu; the front's subscriptions the proxy took, by ID
	dir        directory            // mu
	published  map[string]struct{}  // mu; event types published here
	subscribed map[string]int       // mu; event types the subscriptions need, with how many do
	rep        representative       // mu; this proxy's part as its site's representative
	holds      holds                // mu; events held until their types' placement settles
	closed     bool                 // mu

	// changes are the last changes the site manager announced in its
	// epoch, oldest first (at most maxChangeLog), kept to lay over an
	// answer made before them; forgot is the last one no longer kept.
	changes []change // mu
	forgot  int64    // mu
	regSeq  int64    // mu; the last registration's number (request.Seq)

	counts counters
	young  atomic.Bool // the manager's last answer said it is young: subscriptions are only added to

	stop    chan struct{}
	changed chan struct{} // the directory changed: replace subscriptions (1-buffered)
	failed  chan struct{} // a placement failed: replace subscriptions after Refresh (1-buffered)
	wg      sync.WaitGroup
}

// frontSub is one subscription of the front, as the proxy placed it.
type frontSub struct {
	id     uint64
	f      *filter.Filter
	types  []string // the filter's type and its subtypes; "*" for any
	remote string   // the site of the proxy whose subscription this is, "" for an application's
	at     map[string]bool
	fresh  bool // its destinations are not known yet (the manager did not answer)
}

// directory is what the proxy knows from the site manager.
type directory struct {
	own     siteEntry
	publish *siteEntry             // where publishes go; nil until asked
	sites   map[string][]siteEntry // sites publishing each type asked about
	isRep   bool
}

// NewProxy returns a proxy for cfg; it serves once Serve is called, and
// reaches the site manager in the background. Close it when done. A bad
// config returns an error wrapping sion.ErrInvalidConfig.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	switch {
	case cfg.Name == "" || cfg.Site == "" || cfg.Addr == "" || cfg.Manager == "":
		return nil, fmt.Errorf("%w: site: ProxyConfig needs Name, Site, Addr and Manager (got %q, %q, %q, %q)", sion.ErrInvalidConfig, cfg.Name, cfg.Site, cfg.Addr, cfg.Manager)
	case cfg.Transport == nil:
		return nil, fmt.Errorf("%w: site: ProxyConfig.Transport is nil", sion.ErrInvalidConfig)
	case cfg.Place.Ontology == nil:
		return nil, fmt.Errorf("%w: site: ProxyConfig.Place.Ontology is nil (the switches' ontology)", sion.ErrInvalidConfig)
	case cfg.Refresh < 0 || cfg.RequestTimeout < 0 || cfg.Queue < 0 || cfg.MaxHeld < 0:
		return nil, fmt.Errorf("%w: site: ProxyConfig.Refresh %v, RequestTimeout %v, Queue %d and MaxHeld %d must not be negative", sion.ErrInvalidConfig, cfg.Refresh, cfg.RequestTimeout, cfg.Queue, cfg.MaxHeld)
	case strings.Contains(cfg.Site, "/"):
		return nil, fmt.Errorf("%w: site: site ID %q contains '/'", sion.ErrInvalidConfig, cfg.Site)
	}
	for _, what := range []struct{ name, v string }{{"Name", cfg.Name}, {"Site", cfg.Site}, {"Addr", cfg.Addr}, {"Manager", cfg.Manager}} {
		if err := checkName(what.name, what.v); err != nil {
			return nil, fmt.Errorf("%w: %w", sion.ErrInvalidConfig, err)
		}
	}
	cfg.Refresh = cmp.Or(cfg.Refresh, DefaultRefresh)
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, DefaultRequestTimeout)
	cfg.Queue = cmp.Or(cfg.Queue, DefaultQueue)
	cfg.MaxHeld = cmp.Or(cfg.MaxHeld, DefaultMaxHeld)
	cfg.Place.Name = cmp.Or(cfg.Place.Name, "site-proxy")
	cfg.Place.Routing = nil
	cfg.Switches = slices.Clone(cfg.Switches)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p := &Proxy{
		cfg: cfg, log: log,
		subs: map[uint64]*frontSub{}, published: map[string]struct{}{}, subscribed: map[string]int{},
		dir:     directory{own: siteEntry{ID: cfg.Site, Switches: cfg.Switches}, sites: map[string][]siteEntry{}},
		rep:     newRepresentative(),
		holds:   newHolds(),
		stop:    make(chan struct{}),
		changed: make(chan struct{}, 1),
		failed:  make(chan struct{}, 1),
	}
	p.pool = newPool(p)
	place, err := sion.NewEventPlace(cfg.Place)
	if err != nil {
		return nil, err
	}
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: cfg.Name, Place: place, Logger: log, Relay: p})
	if err != nil {
		return nil, err
	}
	p.sw = sw
	p.mgr = newManagerLink(p)
	p.wg.Go(p.mgr.run)
	p.wg.Go(p.replaceLoop)
	return p, nil
}

// Serve accepts sessions on l — applications', and other proxies' — until
// ctx ends or the proxy closes; see sion.Switch.Serve.
func (p *Proxy) Serve(ctx context.Context, l transport.Listener) error { return p.sw.Serve(ctx, l) }

// Open opens a session on the proxy's front in this process (as
// sion.Switch.Open).
func (p *Proxy) Open(ctx context.Context, cfg sion.SessionConfig) (*sion.Session, error) {
	return p.sw.Open(ctx, cfg)
}

// Name returns the proxy's name.
func (p *Proxy) Name() string { return p.cfg.Name }

// Close ends the proxy's front and its sessions everywhere, and waits
// for its goroutines; idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.stop)
	}
	p.mu.Unlock()
	err := p.sw.Close()
	p.mgr.close()
	p.pool.close()
	p.wg.Wait()
	return err
}

// context returns a context that ends after d or when the proxy closes.
func (p *Proxy) context(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// Attach keeps the front's port (sion.Relay).
func (p *Proxy) Attach(port *sion.RelayPort) { p.port = port }

// bringBack returns the handler of a subscription placed at addr: it
// delivers the events on the front.
func (p *Proxy) bringBack(addr string) func(sion.Delivery) {
	remote := !p.isLocal(addr)
	var skip func(*sion.Session) bool
	if remote {
		// An event of another site goes to applications only: the
		// sessions of other sites' proxies here take this site's events,
		// so it never goes back to its site nor on to a third (B25).
		skip = p.otherSiteProxy
	}
	return func(d sion.Delivery) {
		if remote {
			p.counts.interSiteEvents.Add(1)
		}
		// Background: only a Block subscription on the front waits, and
		// the front's Close ends that wait.
		err := p.port.DeliverExcept(context.Background(), d.Event, skip)
		if err != nil && !errors.Is(err, sion.ErrClosed) {
			p.log.Warn("site: event not delivered on the front", "proxy", p.cfg.Name, "from", addr, "event", d.Event.ID, "err", err)
		}
	}
}

// otherSiteProxy reports whether s, a session on the front, is another
// site's proxy's.
func (p *Proxy) otherSiteProxy(s *sion.Session) bool {
	site := sessionSite(s.Name())
	return site != "" && site != p.cfg.Site
}

// isLocal reports whether addr is a switch of the proxy's own site.
func (p *Proxy) isLocal(addr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.dir.own.Switches, addr)
}

// Publish carries ev, published on the front, to its site's switch, its
// site's representative proxy, or — as the representative — spreads it
// over the site's switches (sion.Relay).
func (p *Proxy) Publish(ctx context.Context, s *sion.Session, ev *sion.Event) error {
	p.counts.published.Add(1)
	from := sessionSite(s.Name())
	at, err := p.publishSite(ctx, ev.Type)
	if err != nil {
		return err
	}
	held, drained := p.hold(ev, from)
	if held {
		return nil
	}
	if drained != nil {
		// The events held of its type go first.
		select {
		case <-drained:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return p.forward(ctx, from, at, ev)
}

// forward carries ev, handed over from site from ("" for an
// application's), to where the proxy's publishes go (at).
func (p *Proxy) forward(ctx context.Context, from string, at siteEntry, ev *sion.Event) error {
	switch {
	case len(at.Switches) == 1:
		p.counts.direct.Add(1)
		return p.pool.publish(ctx, at.Switches[0], false, ev)
	case at.ID == p.cfg.Site && (p.isRepresentative() || from == p.cfg.Site):
		// The representative spreads; so does a proxy that a proxy of its
		// site took for the representative (the role has just moved).
		return p.spread(ctx, at, ev)
	case at.Representative != "" && at.Representative != p.cfg.Addr:
		err := p.pool.publish(ctx, at.Representative, true, ev)
		if err == nil {
			p.counts.toRepresentative.Add(1)
			return nil
		}
		p.log.Warn("site: representative proxy unreachable; spreading the publish here", "proxy", p.cfg.Name, "representative", at.Representative, "err", err)
		p.mgr.unreachable(at.Representative)
		if err := p.spread(ctx, at, ev); err != nil {
			return err
		}
		// Spread here, the other sites' subscriptions the representative
		// places are not carried to the switch it went to: it may miss
		// them.
		p.counts.unsettled.Add(1)
		return nil
	default:
		return p.spread(ctx, at, ev)
	}
}

// publishSite returns where publishes of event type t go, asking the
// site manager when t is new here (which registers it at the site).
func (p *Proxy) publishSite(ctx context.Context, t string) (siteEntry, error) {
	p.mu.Lock()
	_, known := p.published[t]
	at := p.dir.publish
	p.mu.Unlock()
	if !known || at == nil {
		a, err := p.mgr.request(ctx, kindPublish, []string{t})
		switch {
		case err == nil && a.Error != "":
			return siteEntry{}, fmt.Errorf("site: the site manager refused a publish of %q: %w", t, &answerError{a.Error, a.NoSwitch})
		case err == nil:
			// apply has taken a.Publish, with the changes received since
			// the answer was made laid over it.
			p.mu.Lock()
			p.published[t] = struct{}{}
			at = p.dir.publish
			p.mu.Unlock()
		default:
			// The manager is away: the cached answer, or the site's
			// switches as configured. t is registered with the next
			// request that reaches it; until then its events may miss
			// subscribers (hold counts them).
			p.mu.Lock()
			if _, ok := p.published[t]; !ok {
				p.holds.unregistered[t] = true
			}
			p.published[t] = struct{}{}
			if at == nil && len(p.dir.own.Switches) > 0 {
				e := p.dir.own
				at = &e
			}
			p.mu.Unlock()
			if at == nil {
				return siteEntry{}, fmt.Errorf("%w: proxy %q has no answer from the site manager and knows no switch of site %q: %w", ErrNoSwitch, p.cfg.Name, p.cfg.Site, err)
			}
		}
	}
	if at == nil {
		return siteEntry{}, fmt.Errorf("%w: site %q", ErrNoSwitch, p.cfg.Site)
	}
	return *at, nil
}

// sessionSite returns the site of the proxy whose session on the front
// is named name, "" for an application's session.
func sessionSite(name string) string {
	rest, ok := strings.CutPrefix(name, proxySessionPrefix)
	if !ok {
		return ""
	}
	site, _, ok := strings.Cut(rest, "/")
	if !ok {
		return ""
	}
	return site
}

// Subscribe places sub at the switches and representative proxies that
// serve its event types (sion.Relay).
func (p *Proxy) Subscribe(ctx context.Context, s *sion.Session, sub *sion.Subscription) error {
	fs := &frontSub{id: sub.ID(), f: sub.Filter(), types: p.expand(sub.Filter().Type()), at: map[string]bool{}}
	if site := sessionSite(s.Name()); site != "" && site != p.cfg.Site {
		fs.remote = site
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("%w: proxy %q", sion.ErrClosed, p.cfg.Name)
	}
	p.subs[fs.id] = fs
	var newly []string // types no subscription needed before: the manager must hear of them
	if fs.remote == "" {
		for _, t := range fs.types {
			if p.subscribed[t]++; p.subscribed[t] == 1 {
				newly = append(newly, t)
			}
		}
	}
	p.mu.Unlock()
	if fs.remote != "" {
		p.counts.fannedOut.Add(1)
		return p.placeRemote(ctx, fs)
	}
	dests, known := p.destinations(ctx, fs, newly)
	p.mu.Lock()
	fs.fresh = !known
	p.mu.Unlock()
	return p.moveTo(ctx, fs, dests)
}

// Unsubscribe releases everything sub placed (sion.Relay).
func (p *Proxy) Unsubscribe(_ *sion.Session, sub *sion.Subscription) {
	p.mu.Lock()
	fs := p.subs[sub.ID()]
	delete(p.subs, sub.ID())
	if fs != nil && fs.remote == "" {
		for _, t := range fs.types {
			if p.subscribed[t]--; p.subscribed[t] <= 0 {
				delete(p.subscribed, t)
			}
		}
	}
	var at []string
	if fs != nil {
		at = slices.Collect(maps.Keys(fs.at))
		clear(fs.at)
	}
	p.mu.Unlock()
	for _, addr := range at {
		p.pool.release(addr, sub.Filter())
	}
}

// expand returns event type t and its subtypes, by name; "*" stays.
func (p *Proxy) expand(t string) []string {
	if t == filter.AnyType {
		return []string{t}
	}
	o := p.cfg.Place.Ontology
	et, ok := o.Lookup(t)
	if !ok {
		return []string{t}
	}
	var out []string
	for _, id := range o.Descendants(et.ID) {
		out = append(out, o.Type(id).Name)
	}
	return out
}

// isRepresentative reports whether the proxy is its site's
// representative proxy, as the site manager last said.
func (p *Proxy) isRepresentative() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dir.isRep
}

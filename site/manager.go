package site

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
)

// Defaults of ManagerConfig and ProxyConfig.
const (
	// DefaultRefresh is how often a proxy registers again with the site
	// manager (ProxyConfig.Refresh).
	DefaultRefresh = time.Second
	// DefaultTimeout is how long the site manager waits to hear from a
	// proxy before it marks it unreachable and, if it was its site's
	// representative proxy, gives its place to another proxy of the site
	// (ManagerConfig.Timeout).
	DefaultTimeout = 3 * time.Second
	// DefaultSettleTimeout bounds how long the answer to a publish of an
	// event type new at its site waits for the proxies whose
	// subscriptions need that type to place them there
	// (ManagerConfig.SettleTimeout).
	DefaultSettleTimeout = 2 * time.Second
	// DefaultHoldTimeout bounds how long the proxies of a site hold the
	// events of a type new there for the proxies whose subscriptions
	// need it and have not placed them yet (ManagerConfig.HoldTimeout).
	DefaultHoldTimeout = 10 * time.Second
	// DefaultManagerPlace names the site manager's event place.
	DefaultManagerPlace = "sites"
)

// Defaults of the bounds of the site manager's state (ManagerConfig):
// at a bound it forgets what is least current — an unreachable proxy, a
// site no operator set up with no reachable proxy — and refuses new
// entries when nothing can go (the error is in the request's answer).
const (
	DefaultMaxSites        = 4096
	DefaultMaxProxies      = 65536
	DefaultMaxTypesPerSite = 65536
	DefaultMaxTypes        = 262144
)

// Registration is what a proxy tells the site manager of itself
// (ManagerConfig.Authorize).
type Registration struct {
	Proxy, Site, Addr string
	Switches          []string
}

// ErrNoSwitch is returned for a publish when neither the publishing site
// nor the fallback site (ManagerConfig.Fallback) has a switch.
var ErrNoSwitch = errors.New("site: no switch to publish at")

// SiteConfig is what an operator tells the site manager about one site
// (S4 site management information, set by the administrator).
type SiteConfig struct {
	// ID identifies the site; required.
	ID string
	// Switches are the addresses of the site's switches (S4's brokers).
	// When empty, the switches the site's proxies were configured with
	// are used (ProxyConfig.Switches).
	Switches []string
	// Representative is the address of the site's representative proxy;
	// "" lets the first proxy of the site that asks become it (S4's
	// self-registration). Either way, a representative proxy the manager
	// stops hearing from is replaced by another reachable proxy of the
	// site, or, when there is none, by the next proxy of the site that
	// asks.
	Representative string
}

// ManagerConfig configures a Manager. The zero value of every field but
// those marked required means its default.
type ManagerConfig struct {
	// Name is the name of the manager's switch; "site-manager" by default.
	Name string
	// Place names the manager's event place; DefaultManagerPlace by
	// default.
	Place string
	// SharedKey, when set, admits only proxies that know it (see
	// sion.PlaceConfig.SharedKey; ProxyConfig.ManagerKey); Admit is asked
	// too, with each proxy's name as AdmissionRequest.Session.
	SharedKey []byte
	Admit     func(ctx context.Context, req sion.AdmissionRequest) error
	// Sites are the sites the operator knows of; proxies add others as
	// they register.
	Sites []SiteConfig
	// Fallback is the site whose switches take the publishes of a site
	// that has none (S4: a site without a broker publishes at the
	// cloud's); "" means such a publish is refused with ErrNoSwitch.
	Fallback string
	// Timeout: a proxy not heard from for this long is unreachable (its
	// site's directory entry says so), and if it was its site's
	// representative proxy another reachable proxy of the site takes its
	// place (the one with the lowest name; with none, the next proxy of
	// the site that asks). DefaultTimeout by default; it should be
	// several times the proxies' ProxyConfig.Refresh.
	Timeout time.Duration
	// SettleTimeout bounds how long a publish of an event type new at its
	// site waits for the proxies whose subscriptions need that type to
	// place them there (to acknowledge the change that announced it).
	// Once it has passed, the publish is answered, and the proxies of the
	// site hold the type's events (ProxyStats.Held) until those proxies
	// have acknowledged, so that even the first event of the type reaches
	// them; a proxy that let it pass is not waited for again (its events
	// are held all the same) until it acknowledges a change.
	// DefaultSettleTimeout by default.
	SettleTimeout time.Duration
	// HoldTimeout bounds, from a type's first publish at a site, how long
	// its events are held there for proxies whose subscriptions need it
	// and have not acknowledged placing them: then they are published,
	// and counted in the holding proxies' ProxyStats.Unsettled (they may
	// have missed those proxies' subscribers). DefaultHoldTimeout by
	// default; a value below SettleTimeout means SettleTimeout. It is
	// checked every Timeout/3, so the hold may last that much longer.
	HoldTimeout time.Duration
	// MaxSites, MaxProxies and MaxTypesPerSite bound the manager's
	// state: the sites it keeps, the proxies (reachable or not), and the
	// event types per site. At MaxSites a site the operator did not set
	// up and no reachable proxy serves is forgotten (with its proxies) to
	// make room; at MaxProxies the proxy unreachable for longest. When
	// nothing can go, the request is refused (its answer says why). 0
	// means DefaultMaxSites, DefaultMaxProxies, DefaultMaxTypesPerSite.
	MaxSites, MaxProxies, MaxTypesPerSite int
	// MaxTypes bounds the event types the manager keeps over all sites
	// (a type published at two sites counts twice); DefaultMaxTypes by
	// default.
	MaxTypes int
	// Authorize, when set, is asked before the manager takes a proxy's
	// registration as new or changed — its name (the session's), site,
	// address and the switches it reports — and a non-nil error refuses
	// the request (the proxy's answer carries it). Without it the manager
	// trusts every session its place admits (SharedKey, Admit): any of
	// them may register a proxy of any site, report that site's switches
	// and become its representative proxy. Bind names to sites here (or
	// in Admit, with mutual TLS) where proxies are not all trusted alike.
	Authorize func(ctx context.Context, reg Registration) error
	// Logger receives the manager's log records; nil discards them.
	Logger *slog.Logger
}

// Manager is S4's site management unit: a directory of sites that
// answers the delivery-destination requests of proxies (S4 Fig. 5, 14).
// It holds, per site, its ID, the address of its representative proxy,
// the addresses of its switches, its proxies and what their
// subscriptions need, and the event types published at its switches
// (S4 site management information, Fig. 12).
//
// It serves over sion's own session transport: it is a switch (its
// front, see sion.Relay) in an event place of its own, whose proxies hold
// remote sessions there (Serve; admission by SharedKey and Admit). Its
// state lives in memory and is rebuilt from the proxies after a restart:
// every request carries the proxy's whole registration (site, address,
// switches, representative or not, the representative proxy of its site
// it knows, types published and subscribed), and proxies register again
// every ProxyConfig.Refresh and at once when their session to the
// manager is opened anew; operator settings come from ManagerConfig.Sites
// again. For ManagerConfig.Timeout after its start, a site's
// representative proxy is the one its proxies knew, so that the role and
// the subscriptions placed there do not move. A Manager is safe for
// concurrent use.
type Manager struct {
	cfg   ManagerConfig
	log   *slog.Logger
	epoch uint64
	place *sion.EventPlace
	sw    *sion.Switch
	port  *sion.RelayPort

	mu       sync.Mutex
	started  time.Time
	sites    map[string]*siteState
	proxies  map[string]*proxyState // by name (its session's)
	change   int64                  // the last change announced
	types    int                    // event types kept, over all sites
	settling map[int64]*settle      // changes that brought types some proxy needs, not acknowledged by all yet
	closed   bool

	requests chan *served // taken by serve, one batch under mu at a time
	stop     chan struct{}
	wg       sync.WaitGroup
}

// served is one request of a proxy, queued for the goroutine that serves
// them (Manager.serve); done closes once it is served, err then being the
// error of delivering its answer.
type served struct {
	s          *sion.Session
	name, kind string
	n          int64
	r          request
	err        error
	done       chan struct{}
}

// maxBatch bounds the requests served under one hold of mu.
const maxBatch = 256

type siteState struct {
	id             string
	switches       []string // the operator's, or else the proxies'
	operator       bool     // switches set by the operator
	configured     bool     // the operator set the site up (ManagerConfig.Sites, SetSite): never forgotten
	representative string   // address
	selfRegistered bool     // the representative became it by asking first
	types          map[string]struct{}
}

type proxyState struct {
	sess             *sion.Session // the session it registered through
	name, site, addr string
	switches         []string // as it reported them
	lastSeen         time.Time
	reachable        bool
	// lagging: it let SettleTimeout pass without acknowledging a change;
	// answers wait for it again once it acknowledges one (the events it
	// needs are held for it all the same).
	lagging    bool
	published  []string
	subscribed map[string]struct{}
	seq        int64 // the registration kept: its request.Seq, on sess
}

// NewManager returns a site manager for cfg; it serves once Serve is
// called. A bad config returns an error wrapping sion.ErrInvalidConfig.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	cfg.Name = cmp.Or(cfg.Name, "site-manager")
	cfg.Place = cmp.Or(cfg.Place, DefaultManagerPlace)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.SettleTimeout = cmp.Or(cfg.SettleTimeout, DefaultSettleTimeout)
	cfg.HoldTimeout = cmp.Or(cfg.HoldTimeout, DefaultHoldTimeout)
	cfg.MaxSites = cmp.Or(cfg.MaxSites, DefaultMaxSites)
	cfg.MaxProxies = cmp.Or(cfg.MaxProxies, DefaultMaxProxies)
	cfg.MaxTypesPerSite = cmp.Or(cfg.MaxTypesPerSite, DefaultMaxTypesPerSite)
	cfg.MaxTypes = cmp.Or(cfg.MaxTypes, DefaultMaxTypes)
	if cfg.MaxSites < 0 || cfg.MaxProxies < 0 || cfg.MaxTypesPerSite < 0 || cfg.MaxTypes < 0 {
		return nil, fmt.Errorf("%w: site: ManagerConfig bounds must not be negative", sion.ErrInvalidConfig)
	}
	if cfg.Timeout < 0 || cfg.SettleTimeout < 0 || cfg.HoldTimeout < 0 {
		return nil, fmt.Errorf("%w: site: ManagerConfig.Timeout %v, SettleTimeout %v and HoldTimeout %v must not be negative", sion.ErrInvalidConfig, cfg.Timeout, cfg.SettleTimeout, cfg.HoldTimeout)
	}
	cfg.HoldTimeout = max(cfg.HoldTimeout, cfg.SettleTimeout)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var e [8]byte
	rand.Read(e[:])
	m := &Manager{
		cfg: cfg, log: log, epoch: binary.BigEndian.Uint64(e[:]) | 1,
		started: time.Now(), sites: map[string]*siteState{}, proxies: map[string]*proxyState{}, settling: map[int64]*settle{},
		requests: make(chan *served, maxBatch), stop: make(chan struct{}),
	}
	for _, sc := range cfg.Sites {
		if err := m.setSite(sc); err != nil {
			return nil, err
		}
	}
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: cfg.Place, Ontology: controlOntology(), SharedKey: cfg.SharedKey, Admit: cfg.Admit})
	if err != nil {
		return nil, err
	}
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: cfg.Name, Place: place, Logger: log, Relay: m})
	if err != nil {
		return nil, err
	}
	m.place, m.sw = place, sw
	m.wg.Go(m.reap)
	m.wg.Go(m.serve)
	return m, nil
}

// Serve accepts proxies' sessions on l until ctx ends or the manager
// closes; see sion.Switch.Serve.
func (m *Manager) Serve(ctx context.Context, l transport.Listener) error { return m.sw.Serve(ctx, l) }

// Close ends the manager's sessions and goroutines and waits for them;
// idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.stop)
	}
	m.mu.Unlock()
	err := m.sw.Close()
	m.wg.Wait()
	return err
}

// SetSite sets what the operator says of a site (its switches, its
// representative proxy), adding the site if it is new, and announces the
// change to the proxies.
func (m *Manager) SetSite(sc SiteConfig) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.setSite(sc); err != nil {
		return err
	}
	m.announceLocked(m.sites[sc.ID], nil, true)
	return nil
}

// setSite applies sc; mu must be held (or m not yet shared).
func (m *Manager) setSite(sc SiteConfig) error {
	if err := checkName("site ID", sc.ID); err != nil {
		return fmt.Errorf("%w: %w", sion.ErrInvalidConfig, err)
	}
	for _, a := range sc.Switches {
		if err := checkName("switch address", a); err != nil {
			return fmt.Errorf("%w: site %q: %w", sion.ErrInvalidConfig, sc.ID, err)
		}
	}
	st, err := m.siteLocked(sc.ID)
	if err != nil {
		return fmt.Errorf("%w: %w", sion.ErrInvalidConfig, err)
	}
	st.configured = true
	if len(sc.Switches) > 0 {
		st.switches, st.operator = slices.Clone(sc.Switches), true
	}
	if sc.Representative != "" {
		st.representative = sc.Representative
	}
	return nil
}

// siteLocked returns site id's state, adding it; mu must be held.
func (m *Manager) siteLocked(id string) (*siteState, error) {
	if st := m.sites[id]; st != nil {
		return st, nil
	}
	if len(m.sites) >= m.cfg.MaxSites && !m.forgetSiteLocked() {
		return nil, fmt.Errorf("site: %d sites, at most %d, each set up or served: site %q not added", len(m.sites), m.cfg.MaxSites, id)
	}
	st := &siteState{id: id, types: map[string]struct{}{}}
	m.sites[id] = st
	return st, nil
}

// SiteInfo is one site as the site manager holds it (S4 site management
// information, Fig. 12).
type SiteInfo struct {
	ID string
	// Representative is the address of its representative proxy, "" when
	// none: none has asked yet, or the last one became unreachable.
	Representative string
	// Switches are the addresses of its switches (S4's brokers).
	Switches []string
	// Types are the event types published at its switches, sorted.
	Types []string
	// Proxies are its proxies, sorted by name.
	Proxies []ProxyInfo
}

// ProxyInfo is one proxy as the site manager knows it.
type ProxyInfo struct {
	Name, Addr string
	// Reachable is false once the manager has not heard from the proxy
	// for ManagerConfig.Timeout; LastSeen is when it last did.
	Reachable bool
	LastSeen  time.Time
	// Subscribed are the event types its subscriptions need (its site's
	// subscribers, S4), sorted; "*" stands for every type.
	Subscribed []string
}

// Sites returns the site management information, sorted by site ID.
func (m *Manager) Sites() []SiteInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	proxies := map[string][]ProxyInfo{}
	for _, p := range m.proxies {
		proxies[p.site] = append(proxies[p.site], ProxyInfo{Name: p.name, Addr: p.addr, Reachable: p.reachable, LastSeen: p.lastSeen, Subscribed: slices.Sorted(maps.Keys(p.subscribed))})
	}
	var out []SiteInfo
	for _, st := range m.sites {
		si := SiteInfo{ID: st.id, Representative: st.representative, Switches: slices.Clone(st.switches), Types: slices.Sorted(maps.Keys(st.types)), Proxies: proxies[st.id]}
		slices.SortFunc(si.Proxies, func(a, b ProxyInfo) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, si)
	}
	slices.SortFunc(out, func(a, b SiteInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// The relay side: the manager is its switch's relay. Publish serves
// proxies' requests; subscriptions need nothing fetched.

// Attach keeps the port the manager answers through (sion.Relay).
func (m *Manager) Attach(p *sion.RelayPort) { m.port = p }

// Subscribe accepts a proxy's subscription to answers and changes
// (sion.Relay); they are delivered through the port.
func (m *Manager) Subscribe(context.Context, *sion.Session, *sion.Subscription) error { return nil }

// Unsubscribe is told of a subscription's end (sion.Relay). A proxy
// cancels its subscriptions only as its session ends: the manager takes
// that proxy as unreachable at once, without waiting for Timeout (a
// representative proxy closed is replaced at once).
func (m *Manager) Unsubscribe(s *sion.Session, _ *sion.Subscription) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.proxies[s.Name()] // a proxy's name is its session's
	if p == nil || p.sess != s || !p.reachable {
		return
	}
	m.goneLocked(p)
	if st := m.sites[p.site]; st != nil && st.representative == p.addr {
		st.representative, st.selfRegistered = m.electLocked(st.id), true
		m.log.Info("site: representative proxy gone; replaced", "site", st.id, "by", st.representative)
		m.announceLocked(st, nil, true)
	}
}

// Publish serves one request of the proxy whose session is s
// (sion.Relay), and returns once it is served. A malformed request is
// refused with an error, which is the proxy's Publish error. The
// requests of all sessions are served by one goroutine of the manager, in
// batches under one hold of its lock: taken by each session's reader
// instead, the lock convoyed on a loaded machine (a proxy's registration
// waited seconds for it, long enough to be taken for unreachable). It
// does not wait for a change to settle: such an answer is delivered by a
// goroutine of the manager. ctx ends the wait for the request's turn,
// with ctx's error (the request may still be served); ErrClosed once the
// manager closes.
func (m *Manager) Publish(ctx context.Context, s *sion.Session, ev *sion.Event) error {
	if ev.Type != RequestType {
		return fmt.Errorf("%w: site: the site manager takes %s events, not %q", sion.ErrInvalidEvent, RequestType, ev.Type)
	}
	name, kind, n := s.Name(), attrString(ev, "kind"), attrInt(ev, "req")
	var r request
	if err := json.Unmarshal(ev.Data, &r); err != nil {
		return fmt.Errorf("%w: site: request %d of proxy %q: %v", sion.ErrInvalidEvent, n, name, err)
	}
	if err := r.check(); err != nil {
		return fmt.Errorf("%w: request %d of proxy %q: %w", sion.ErrInvalidEvent, n, name, err)
	}
	switch kind {
	case kindRegister, kindPublish, kindSubscribe, kindAck:
	default:
		return fmt.Errorf("%w: site: request %d of proxy %q is of kind %q", sion.ErrInvalidEvent, n, name, kind)
	}
	q := &served{s: s, name: name, kind: kind, n: n, r: r, done: make(chan struct{})}
	closed := fmt.Errorf("%w: site manager %q", sion.ErrClosed, m.cfg.Name)
	select {
	case m.requests <- q:
	case <-m.stop:
		return closed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-q.done:
		return q.err
	case <-m.stop:
		return closed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serve serves the queued requests until the manager closes: each batch
// (what is queued, up to maxBatch) under one hold of mu, then their
// answers.
func (m *Manager) serve() {
	ctx, cancel := context.WithCancel(context.Background()) // for Authorize; ends with serve
	defer cancel()
	type result struct {
		a    answer
		wait *settle
	}
	batch := make([]*served, 0, maxBatch)
	results := make([]result, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case <-m.stop:
			return
		case q := <-m.requests:
			batch = append(batch, q)
		}
	more:
		for len(batch) < maxBatch {
			select {
			case q := <-m.requests:
				batch = append(batch, q)
			default:
				break more
			}
		}
		results = results[:0]
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return
		}
		for _, q := range batch {
			a, wait, err := m.serveLocked(ctx, q.s, q.name, q.kind, &q.r)
			if err != nil {
				a = answer{Epoch: m.epoch, Young: m.young(), Error: err.Error(), NoSwitch: errors.Is(err, ErrNoSwitch)}
			}
			results = append(results, result{a, wait})
		}
		m.mu.Unlock()
		for i, q := range batch {
			switch res := results[i]; {
			case q.kind == kindAck: // acknowledgements are not answered
			case res.wait == nil:
				actx, acancel := context.WithTimeout(ctx, m.cfg.SettleTimeout)
				q.err = m.answer(actx, q.name, q.n, res.a) // to a remote session: never waits
				acancel()
			default:
				m.wg.Go(func() { m.answerSettled(q.name, q.n, res.a, res.wait) })
			}
			close(q.done)
		}
	}
}

// answer delivers answer a to request n of proxy name.
func (m *Manager) answer(ctx context.Context, name string, n int64, a answer) error {
	ev, err := event(AnswerType, a, ontology.Attr{Name: "proxy", Value: ontology.String(name)}, ontology.Attr{Name: "req", Value: ontology.Int(n)})
	if err != nil {
		return err
	}
	return m.port.Deliver(ctx, ev)
}

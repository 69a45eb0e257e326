package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/site"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
)

// siteSpec describes one site: its ID, its switches' and its proxies'
// addresses. The first proxy is its representative proxy: made first
// and waited for (S4's self-registration), or named by the operator
// (operatorRep).
type siteSpec struct {
	id       string
	switches []string
	proxies  []string
}

// systemConfig configures a system.
type systemConfig struct {
	// direct: proxies send a subscription to every switch of a remote
	// site, not to its representative proxy (S4 Fig. 9).
	direct bool
	// fallback is the site whose switches take the publishes of a site
	// that has none.
	fallback string
	// operatorRep: the operator names each site's first proxy as its
	// representative (SiteConfig.Representative); otherwise each site's
	// first proxy is made, and registered, before the others.
	operatorRep bool
	// queue is the queue of each subscription a proxy holds at a switch
	// or another proxy (0: site.DefaultQueue).
	queue int
	// logger receives the site manager's and the proxies' log records;
	// nil discards them.
	logger *slog.Logger
}

// system is a site manager, the sites' switches and their proxies, all in
// one process over transport/mem. Applications open sessions on the
// proxies (Proxy.Open), as they would on a switch.
type system struct {
	net      *mem.Network
	ont      *ontology.Ontology
	place    *sion.EventPlace // the switches' place
	manager  *site.Manager
	switches map[string]*sion.Switch
	proxies  map[string]*site.Proxy
	sites    []siteSpec

	cancel  context.CancelFunc
	serving sync.WaitGroup
}

// startSystem builds the system of sites on ontology o. Close it when
// done, also after an error.
func startSystem(ctx context.Context, o *ontology.Ontology, sites []siteSpec, cfg systemConfig) (*system, error) {
	network, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &system{net: network, ont: o, switches: map[string]*sion.Switch{}, proxies: map[string]*site.Proxy{}, sites: sites, cancel: cancel}
	mcfg := site.ManagerConfig{Fallback: cfg.fallback, Logger: cfg.logger}
	for _, sp := range sites {
		sc := site.SiteConfig{ID: sp.id, Switches: sp.switches}
		if cfg.operatorRep && len(sp.proxies) > 0 {
			sc.Representative = sp.proxies[0]
		}
		mcfg.Sites = append(mcfg.Sites, sc)
	}
	if s.manager, err = site.NewManager(mcfg); err != nil {
		return s, err
	}
	if err := s.serve(sctx, "site-manager", s.manager.Serve); err != nil {
		return s, err
	}
	if s.place, err = sion.NewEventPlace(sion.PlaceConfig{Name: "edge", Ontology: o}); err != nil {
		return s, err
	}
	for _, sp := range sites {
		for _, addr := range sp.switches {
			sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "switch " + addr, Place: s.place})
			if err != nil {
				return s, err
			}
			s.switches[addr] = sw
			if err := s.serve(sctx, addr, sw.Serve); err != nil {
				return s, err
			}
		}
	}
	start := func(sp siteSpec, addr string) error {
		p, err := site.NewProxy(site.ProxyConfig{
			Name: "proxy " + addr, Site: sp.id, Addr: addr, Transport: network, Manager: "site-manager",
			Switches: sp.switches, Place: sion.PlaceConfig{Ontology: o}, Direct: cfg.direct,
			Queue: cfg.queue, Logger: cfg.logger,
		})
		if err != nil {
			return err
		}
		s.proxies[addr] = p
		return s.serve(sctx, addr, p.Serve)
	}
	if !cfg.operatorRep {
		// Each site's first proxy asks the site manager first, and so
		// becomes its representative proxy.
		for _, sp := range sites {
			if len(sp.proxies) == 0 {
				continue
			}
			if err := start(sp, sp.proxies[0]); err != nil {
				return s, err
			}
			if err := s.waitRegistered(ctx, sp.proxies[0]); err != nil {
				return s, err
			}
		}
	}
	for _, sp := range sites {
		for i, addr := range sp.proxies {
			if i == 0 && !cfg.operatorRep {
				continue
			}
			if err := start(sp, addr); err != nil {
				return s, err
			}
		}
	}
	// The system is up when the site manager has heard from every proxy:
	// a proxy that has not reached it yet has no answer to work on, and
	// would publish at its own site's switches only, before anyone's
	// subscriptions are there (site.Proxy: "while the site manager is
	// away").
	err = poll(ctx, 30*time.Second, func() bool {
		n := 0
		for _, si := range s.manager.Sites() {
			for _, pi := range si.Proxies {
				if pi.Reachable {
					n++
				}
			}
		}
		return n == len(s.proxies)
	}, "not every proxy registered with the site manager")
	return s, err
}

// serve serves at addr until the system closes.
func (s *system) serve(ctx context.Context, addr string, serve func(context.Context, transport.Listener) error) error {
	l, err := s.net.Listen(addr)
	if err != nil {
		return err
	}
	s.serving.Go(func() { serve(ctx, l) })
	return nil
}

// waitRegistered waits until the site manager knows the proxy at addr
// as its site's representative proxy.
func (s *system) waitRegistered(ctx context.Context, addr string) error {
	return poll(ctx, 10*time.Second, func() bool {
		for _, si := range s.manager.Sites() {
			if si.Representative != addr {
				continue
			}
			for _, pi := range si.Proxies {
				if pi.Addr == addr && pi.Reachable {
					return true
				}
			}
		}
		return false
	}, "proxy "+addr+" did not register as its site's representative proxy")
}

// open opens a session named name on the proxy at addr.
func (s *system) open(ctx context.Context, addr, name string) (*sion.Session, error) {
	p := s.proxies[addr]
	if p == nil {
		return nil, fmt.Errorf("no proxy at %s", addr)
	}
	return p.Open(ctx, sion.SessionConfig{Name: name})
}

// interSiteSubscribes sums the proxies' inter-site subscribe messages.
func (s *system) interSiteSubscribes() uint64 {
	var n uint64
	for _, p := range s.proxies {
		n += p.Stats().InterSiteSubscribes
	}
	return n
}

// eventsIn returns how many events the switch at addr has taken in: the
// publishes it received.
func (s *system) eventsIn(addr string) uint64 { return s.switches[addr].Stats().EventsIn }

// close ends the proxies (their applications' sessions with them), the
// switches and the site manager, and waits for them.
func (s *system) close() {
	var wg sync.WaitGroup
	for _, p := range s.proxies {
		wg.Go(func() { p.Close() })
	}
	wg.Wait()
	for _, sw := range s.switches {
		wg.Go(func() { sw.Close() })
	}
	wg.Wait()
	if s.manager != nil {
		s.manager.Close()
	}
	s.cancel()
	s.serving.Wait()
}

// poll calls done until it reports true, every few milliseconds, for at
// most limit; it returns an error saying what when it never does.
func poll(ctx context.Context, limit time.Duration, done func() bool, what string) error {
	deadline := time.Now().Add(limit)
	for !done() {
		if time.Now().After(deadline) {
			return errors.New(what + " within " + limit.String())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// inbox counts what one subscription received, by a key of each event
// (its sensor and sequence number, its payload): each key once is a
// delivery, any more a duplicate. The key is the event's content, not its
// ID: a switch gives every event published at it an ID of its own.
type inbox struct {
	key func(*sion.Event) string

	mu  sync.Mutex
	got map[string]int
	n   int // receipts, duplicates included
}

func newInbox(key func(*sion.Event) string) *inbox {
	return &inbox{key: key, got: map[string]int{}}
}

// handler is the subscription's handler.
func (in *inbox) handler(d sion.Delivery) {
	k := in.key(d.Event)
	in.mu.Lock()
	in.got[k]++
	in.n++
	in.mu.Unlock()
}

// counts returns the distinct events received and the receipts.
func (in *inbox) counts() (distinct, receipts int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.got), in.n
}

// check compares what the inbox received with want, the keys it should
// have: the ones it got (once or more), the duplicates (receipts beyond
// the first), and the events it got that it should not have.
func (in *inbox) check(want map[string]bool) (delivered, duplicates, unexpected int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for k, n := range in.got {
		if !want[k] {
			unexpected += n
			continue
		}
		delivered++
		duplicates += n - 1
	}
	return delivered, duplicates, unexpected
}

// settle waits until every inbox holds the number of distinct events
// wanted of it, or nothing has arrived for idle, or limit has passed;
// then until the receipts have stopped changing for a few polls, so that
// a late duplicate is seen.
func settle(ctx context.Context, inboxes []*inbox, want []int, idle, limit time.Duration) error {
	total := func() (all bool, receipts int) {
		all = true
		for i, in := range inboxes {
			d, r := in.counts()
			all = all && d >= want[i]
			receipts += r
		}
		return all, receipts
	}
	deadline := time.Now().Add(limit)
	last, lastChange := -1, time.Now()
	for {
		all, r := total()
		if r != last {
			last, lastChange = r, time.Now()
		}
		if all || time.Since(lastChange) > idle || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	for stable := 0; stable < 3; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if _, r := total(); r == last {
			stable++
		} else {
			last, stable = r, 0
		}
	}
	return nil
}

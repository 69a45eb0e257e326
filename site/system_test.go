package site_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/site"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ont is the ontology of the tests: the source's topics as event types,
// under one root, with a subtype to check inheritance.
const ont = `{"types": [
  {"name": "Topic", "attributes": [{"name": "n", "kind": "int"}, {"name": "src", "kind": "string"}]},
  {"name": "TopicA", "parents": ["Topic"]},
  {"name": "TopicB", "parents": ["Topic"]},
  {"name": "TopicC", "parents": ["Topic"]},
  {"name": "TopicB2", "parents": ["TopicB"]}
]}`

func loadOntology(t testing.TB) *ontology.Ontology {
	t.Helper()
	o, err := ontology.LoadJSON(strings.NewReader(ont), "test.json")
	require.NoError(t, err)
	return o
}

// siteSpec describes one site of a system: its switches' and proxies'
// addresses (the first proxy is made first, so it becomes the
// representative).
type siteSpec struct {
	id       string
	switches []string
	proxies  []string
}

// system is a site manager, the sites' switches and their proxies, all in
// one process over transport/mem.
type system struct {
	t        testing.TB
	net      *mem.Network
	ont      *ontology.Ontology
	manager  *site.Manager
	switches map[string]*sion.Switch
	proxies  map[string]*site.Proxy
	sites    []siteSpec
	direct   bool
	cancel   context.CancelFunc
	serving  sync.WaitGroup
	ctx      context.Context
}

type systemOption func(*system, *site.ManagerConfig)

// direct: proxies send subscriptions to every remote switch (S4 Fig. 9).
func direct(s *system, _ *site.ManagerConfig) { s.direct = true }

func fallback(id string) systemOption {
	return func(_ *system, c *site.ManagerConfig) { c.Fallback = id }
}

func newSystem(t testing.TB, sites []siteSpec, opts ...systemOption) *system {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	network, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	s := &system{t: t, net: network, ont: loadOntology(t), switches: map[string]*sion.Switch{}, proxies: map[string]*site.Proxy{}, sites: sites, cancel: cancel, ctx: ctx}
	mcfg := site.ManagerConfig{}
	for _, o := range opts {
		o(s, &mcfg)
	}
	for _, sp := range sites {
		mcfg.Sites = append(mcfg.Sites, site.SiteConfig{ID: sp.id, Switches: sp.switches})
	}
	m, err := site.NewManager(mcfg)
	require.NoError(t, err)
	s.manager = m
	s.serve("manager", m.Serve)
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "edge", Ontology: s.ont})
	require.NoError(t, err)
	for _, sp := range sites {
		for _, addr := range sp.switches {
			sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "switch-" + addr, Place: place})
			require.NoError(t, err)
			s.switches[addr] = sw
			s.serve(addr, sw.Serve)
		}
	}
	for _, sp := range sites {
		for _, addr := range sp.proxies {
			s.startProxy(sp, addr)
		}
	}
	t.Cleanup(s.close)
	return s
}

// startProxy makes the proxy at addr of site sp and waits until the
// manager knows it (so that the first proxy of a site is its
// representative).
func (s *system) startProxy(sp siteSpec, addr string) *site.Proxy {
	s.t.Helper()
	p, err := site.NewProxy(site.ProxyConfig{
		Name: "proxy-" + addr, Site: sp.id, Addr: addr, Transport: s.net, Manager: "manager",
		Place: sion.PlaceConfig{Ontology: s.ont}, Direct: s.direct,
	})
	require.NoError(s.t, err)
	s.proxies[addr] = p
	s.serve(addr, p.Serve)
	require.Eventually(s.t, func() bool {
		for _, si := range s.manager.Sites() {
			for _, pi := range si.Proxies {
				if pi.Addr == addr && pi.Reachable {
					return true
				}
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond, "proxy %s not registered", addr)
	return p
}

func (s *system) serve(addr string, serve func(context.Context, transport.Listener) error) {
	s.t.Helper()
	l, err := s.net.Listen(addr)
	require.NoError(s.t, err)
	s.serving.Go(func() { serve(s.ctx, l) })
}

func (s *system) close() {
	for _, p := range s.proxies {
		p.Close()
	}
	for _, sw := range s.switches {
		sw.Close()
	}
	s.manager.Close()
	s.cancel()
	s.serving.Wait()
}

// session opens a session on the proxy at addr.
func (s *system) session(addr, name string) *sion.Session {
	s.t.Helper()
	sess, err := s.proxies[addr].Open(context.Background(), sion.SessionConfig{Name: name})
	require.NoError(s.t, err)
	s.t.Cleanup(func() { sess.Close() })
	return sess
}

// publishes returns how many events the switch at addr has taken in.
func (s *system) publishes(addr string) uint64 { return s.switches[addr].Stats().EventsIn }

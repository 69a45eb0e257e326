package sion_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/tcp"
)

// freeUDPPort returns a UDP port free on loopback now.
func freeUDPPort(t testing.TB) uint16 {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

// entityNet makes entities that discover each other on one loopback
// discovery port, in a base place of the test's own.
type entityNet struct {
	t    *testing.T
	port uint16
	base string
	o    *ontology.Ontology
	tr   *tcp.Transport
}

func newEntityNet(t *testing.T) *entityNet {
	tr, err := tcp.New(tcp.Config{})
	require.NoError(t, err)
	return &entityNet{t: t, port: freeUDPPort(t), base: fmt.Sprintf("base-%s-%d", t.Name(), time.Now().UnixNano()), o: ont1(t), tr: tr}
}

// entity starts an entity named name, closed at cleanup; mod adjusts its
// configuration.
func (n *entityNet) entity(name string, mod func(*sion.EntityConfig)) *sion.Entity {
	n.t.Helper()
	cfg := sion.EntityConfig{
		Name: name, Ontology: n.o, Transport: n.tr, BasePlace: n.base,
		ListenHost: "127.0.0.1", DiscoveryPort: n.port,
		ProbeWait: 100 * time.Millisecond, CheckInterval: 200 * time.Millisecond,
		Link: sion.LinkConfig{ProbeHops: -1},
	}
	if mod != nil {
		mod(&cfg)
	}
	e, err := sion.NewEntity(cfg)
	require.NoError(n.t, err)
	n.t.Cleanup(func() { require.NoError(n.t, e.Close()) })
	return e
}

func waitActive(t *testing.T, es ...*sion.Entity) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, e := range es {
		require.NoError(t, e.WaitState(ctx, sion.Active), e.Name())
	}
}

// parentOf returns the peer of the base link e requested, or "".
func parentOf(e *sion.Entity, place string) string {
	for _, l := range e.Switch(place).Links() {
		if l.Parent {
			return l.Peer
		}
	}
	return ""
}

// stateLog records an entity's state changes.
type stateLog struct {
	mu  sync.Mutex
	got []string
}

func (l *stateLog) record(from, to sion.State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, from.String()+"→"+to.String())
}

func (l *stateLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// TestEntityLifecycle follows two entities through the S1 life cycle:
// NonExistent → Suspended → Active, back to Suspended when the base link
// is lost, Active again by discovery, NonExistent at Close.
func TestEntityLifecycle(t *testing.T) {
	n := newEntityNet(t)
	var logA, logB stateLog
	a := n.entity("a", func(c *sion.EntityConfig) { c.OnStateChange = logA.record })
	waitActive(t, a)
	assert.Equal(t, []string{"non-existent→suspended", "suspended→active"}, logA.list(), "a founds its base place after silent probe rounds")

	b := n.entity("b", func(c *sion.EntityConfig) { c.OnStateChange = logB.record })
	waitActive(t, b)
	assert.Equal(t, "a", parentOf(b, n.base), "b links to the Active entity that answered")
	assert.Equal(t, []string{"non-existent→suspended", "suspended→active"}, logB.list())

	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "Close is idempotent")
	assert.Equal(t, sion.NonExistent, a.State())
	assert.Equal(t, []string{"non-existent→suspended", "suspended→active", "active→non-existent"}, logA.list())
	require.Eventually(t, func() bool { return slices.Contains(logB.list(), "active→suspended") }, 10*time.Second, 20*time.Millisecond, "b loses its base link")
	waitActive(t, b)
	assert.Equal(t, []string{"non-existent→suspended", "suspended→active", "active→suspended", "suspended→active"}, logB.list(), "b rediscovers: nobody answers, it founds")
	require.NoError(t, b.Close())
	assert.Equal(t, "active→non-existent", logB.list()[len(logB.list())-1])
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	assert.ErrorIs(t, b.WaitState(ctx, sion.Active), sion.ErrClosed)
}

// TestDiscoveryEntities starts 2, 5 and 10 entities at once on one
// discovery port: they elect one founder, the others link to Active
// entities that answered, the base place is one tree (n-1 links, none to
// itself), and an event published at any entity reaches a subscriber on
// every other exactly once.
func TestDiscoveryEntities(t *testing.T) {
	for _, size := range []int{2, 5, 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			n := newEntityNet(t)
			start := time.Now()
			es := make([]*sion.Entity, size)
			var wg sync.WaitGroup
			for i := range es {
				wg.Go(func() { es[i] = n.entity(fmt.Sprintf("e%d", i), nil) })
			}
			wg.Wait()
			waitActive(t, es...)
			active := time.Since(start)
			links := func() int {
				links := 0
				for _, e := range es {
					p := parentOf(e, n.base)
					assert.NotEqual(t, e.Name(), p, "never linked to itself")
					if p != "" {
						links++
					}
				}
				return links
			}
			// Entities that founded apart (each heard only higher IDs)
			// merge: the root with the higher ID links to the lower.
			require.Eventually(t, func() bool { return links() == size-1 }, 10*time.Second, 10*time.Millisecond, "one root; every other entity requested one base link")
			tree := time.Since(start)
			var total sion.EntityStats
			for _, e := range es {
				s := e.Stats()
				total.ProbesSent += s.ProbesSent
				total.ProbeAnswersSent += s.ProbeAnswersSent
			}
			t.Logf("%d entities: all Active in %v, one tree in %v; %d probes, %d answers", size, active.Round(time.Millisecond), tree.Round(time.Millisecond), total.ProbesSent, total.ProbeAnswersSent)

			ctx := context.Background()
			got := make([]*collect, size)
			for i, e := range es {
				s, err := e.Switch(n.base).Open(ctx, sion.SessionConfig{Name: "app"})
				require.NoError(t, err)
				got[i] = collector(t, s, `{type ⊑ Notice}`)
			}
			for i, e := range es {
				require.NoError(t, e.Switch(n.base).Flush(ctx), i)
			}
			pub, err := es[size-1].Switch(n.base).Open(ctx, sion.SessionConfig{Name: "pub"})
			require.NoError(t, err)
			require.NoError(t, pub.Publish(ctx, &sion.Event{Type: "Notice", Attrs: kv("seq", 1)}))
			for i := range es {
				require.Eventually(t, func() bool { return got[i].len() == 1 }, 5*time.Second, 10*time.Millisecond, "entity %d", i)
			}
			time.Sleep(100 * time.Millisecond)
			for i := range es {
				assert.Equal(t, 1, got[i].len(), "exactly once at entity %d", i)
			}
		})
	}
}

// TestDiscoverySeed: nobody answers the probes (the entity is alone on
// its discovery port), so it links to its configured well-known seed; an
// unreachable seed is passed by, and with none left the entity founds.
func TestDiscoverySeed(t *testing.T) {
	n := newEntityNet(t)
	a := n.entity("a", nil)
	waitActive(t, a)
	other := freeUDPPort(t)
	dead := "127.0.0.1:1"
	b := n.entity("b", func(c *sion.EntityConfig) {
		c.DiscoveryPort = other
		c.Seeds = []string{dead, a.Addr(n.base)}
	})
	waitActive(t, b)
	assert.Equal(t, "a", parentOf(b, n.base))
	assert.NotZero(t, b.Stats().ProbesSent, "b probed first")
	assert.Zero(t, b.Stats().ProbeAnswersReceived)

	c := n.entity("c", func(c *sion.EntityConfig) { c.NoBroadcast, c.Seeds = true, []string{dead} })
	waitActive(t, c)
	assert.Equal(t, "", parentOf(c, n.base), "no seed reachable: c founds its own base place")
	assert.Zero(t, c.Stats().ProbesSent)
}

// s1Net builds the S1 example of JP3974158B2 (FIG. 23): a chain of
// entities in the base place Y — e1 — e3 — e12, whose advertisements
// spread two hops; e3 and e12 belong to place alpha, e12 to beta too.
// From Y, e12 is three hops away in the base place: hidden.
func s1Net(t *testing.T) (n *entityNet, y, e1, e3, e12 *sion.Entity) {
	n = newEntityNet(t)
	ctx := context.Background()
	mk := func(name, topic string, seeds ...string) *sion.Entity {
		e := n.entity(name, func(c *sion.EntityConfig) {
			c.NoBroadcast, c.Seeds, c.AdvertiseTTL = true, seeds, 2
			c.Attributes = map[string]string{"topic": topic}
		})
		waitActive(t, e)
		return e
	}
	e12 = mk("e12", "weather")
	e3 = mk("e3", "weather", e12.Addr(n.base))
	e1 = mk("e1", "traffic", e3.Addr(n.base))
	y = mk("Y", "none", e1.Addr(n.base))
	require.NoError(t, e3.Join(ctx, "alpha", ""))
	require.NoError(t, e12.Join(ctx, "alpha", e3.Addr("alpha")))
	require.NoError(t, e12.Join(ctx, "beta", ""))
	for _, e := range []*sion.Entity{e12, e3, e1, y} {
		for _, p := range e.Places() {
			require.NoError(t, e.Switch(p).Flush(ctx))
		}
	}
	return n, y, e1, e3, e12
}

// TestSearchS1Example: entity Y finds entity 3 in the base place, joins
// place alpha through it, and there finds entity 12 of place beta, which
// no discovery from the base place reaches.
func TestSearchS1Example(t *testing.T) {
	_, y, e1, e3, e12 := s1Net(t)
	ctx := context.Background()
	// S1: both the advertisements and the discovery events spread two
	// hops (TTL 2).
	opts := sion.SearchOptions{Wait: 300 * time.Millisecond, TTL: 2}

	direct, err := y.Search(ctx, sion.Need{Place: "beta"}, sion.SearchOptions{Wait: 300 * time.Millisecond, Hops: 1, TTL: 2})
	require.NoError(t, err)
	assert.False(t, direct.Met, "beta's only member is hidden from Y in the base place")
	assert.Zero(t, direct.Answers)
	assert.Zero(t, e12.Stats().DiscoveryReceived, "the discovery event never reached e12: its advertisement does not reach Y's switch")

	res, err := y.Search(ctx, sion.Need{Attributes: map[string]string{"topic": "weather"}, Place: "beta"}, opts)
	require.NoError(t, err)
	require.True(t, res.Met, "%+v", res)
	assert.Equal(t, "e12", res.Found.Name)
	assert.Equal(t, "beta", res.Place)
	require.Len(t, res.Path, 2, res.String())
	assert.Equal(t, sion.SearchHop{From: n0(y), Place: "alpha", Through: "e3", Addr: e3.Addr("alpha")}, res.Path[0])
	assert.Equal(t, sion.SearchHop{From: "alpha", Place: "beta", Through: "e12", Addr: e12.Addr("beta")}, res.Path[1])
	assert.Equal(t, 2, res.Rounds)
	assert.ElementsMatch(t, []string{"alpha", "beta", n0(y)}, y.Places())
	assert.Zero(t, e1.Stats().AnswersSent, "e1 (topic traffic) does not meet the need")
	assert.Equal(t, uint64(1), e12.Stats().DiscoveryReceived, "only the search in alpha reached e12")
	t.Logf("search: %s in %v, %d rounds, %d answers", res, res.Elapsed.Round(time.Millisecond), res.Rounds, res.Answers)

	// Y is now a member of beta: an event published there reaches it.
	ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := y.Switch("beta").Open(ctx2, sion.SessionConfig{Name: "app"})
	require.NoError(t, err)
	got := collector(t, s, `{type ⊑ Notice}`)
	pub, err := e12.Switch("beta").Open(ctx2, sion.SessionConfig{Name: "pub"})
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx2, &sion.Event{Type: "Notice", Attrs: kv("seq", 7)}))
	require.Eventually(t, func() bool { return got.len() == 1 }, 5*time.Second, 10*time.Millisecond)
}

func n0(e *sion.Entity) string {
	for _, p := range e.Places() {
		if p != "alpha" && p != "beta" {
			return p
		}
	}
	return ""
}

// TestSearchUnicastMulticast: a discovery event addressed to an entity's
// name reaches that entity only (unicast); one addressed to an attribute
// reaches every entity that has it and no other (multicast) — the routers
// route it by the advertised filters, so the others never receive it.
func TestSearchUnicastMulticast(t *testing.T) {
	n := newEntityNet(t)
	hub := n.entity("hub", func(c *sion.EntityConfig) { c.NoBroadcast = true })
	waitActive(t, hub)
	roles := []string{"sensor", "sensor", "actuator", "sensor"}
	var es []*sion.Entity
	for i, r := range roles {
		e := n.entity(fmt.Sprintf("n%d", i), func(c *sion.EntityConfig) {
			c.NoBroadcast, c.Seeds = true, []string{hub.Addr(n.base)}
			c.Attributes = map[string]string{"role": r}
		})
		waitActive(t, e)
		es = append(es, e)
	}
	ctx := context.Background()
	for _, e := range append(es, hub) {
		require.NoError(t, e.Switch(n.base).Flush(ctx))
	}
	// A subscriber to every event type sees none of the discovery
	// traffic: AnyType does not match sion's reserved types.
	app, err := es[0].Switch(n.base).Open(ctx, sion.SessionConfig{Name: "app"})
	require.NoError(t, err)
	everything := collector(t, app, `{}`)
	opts := sion.SearchOptions{Wait: 300 * time.Millisecond}
	res, err := hub.Search(ctx, sion.Need{Name: "n2"}, opts)
	require.NoError(t, err)
	require.True(t, res.Met)
	assert.Equal(t, "n2", res.Found.Name)
	assert.Equal(t, 1, res.Answers)
	for i, e := range es {
		want := uint64(0)
		if i == 2 {
			want = 1
		}
		assert.Equal(t, want, e.Stats().DiscoveryReceived, "unicast: n%d", i)
	}

	res, err = hub.Search(ctx, sion.Need{Attributes: map[string]string{"role": "sensor"}}, opts)
	require.NoError(t, err)
	require.True(t, res.Met)
	assert.Equal(t, 3, res.Answers, "every sensor answers")
	for i, e := range es {
		s := e.Stats()
		assert.Equal(t, uint64(1), s.DiscoveryReceived, "n%d: sensors get the multicast, the actuator only its unicast", i)
		assert.Equal(t, uint64(1), s.AnswersSent, "n%d", i)
	}
	assert.Zero(t, everything.len(), "no discovery event reached a {type ⊑ *} subscriber")
}

// TestEntityBadInput: bad configurations are refused naming the field; a
// stray datagram on the discovery port is counted and ignored; an empty
// need is refused.
func TestEntityBadInput(t *testing.T) {
	n := newEntityNet(t)
	o := n.o
	for name, cfg := range map[string]sion.EntityConfig{
		"no name":       {Ontology: o, Transport: n.tr},
		"no transport":  {Name: "x", Ontology: o},
		"no ontology":   {Name: "x", Transport: n.tr},
		"bad attr":      {Name: "x", Ontology: o, Transport: n.tr, Attributes: map[string]string{"a=b": "c"}},
		"bad host":      {Name: "x", Ontology: o, Transport: n.tr, AdvertiseHost: "0.0.0.0"},
		"newline":       {Name: "x\ny", Ontology: o, Transport: n.tr},
		"negative":      {Name: "x", Ontology: o, Transport: n.tr, ProbeWait: -time.Second},
		"reserved base": {Name: "x", Ontology: o, Transport: n.tr, BasePlace: "sion.base"},
	} {
		_, err := sion.NewEntity(cfg)
		assert.ErrorIs(t, err, sion.ErrInvalidConfig, name)
	}
	a := n.entity("a", nil)
	waitActive(t, a)
	c, err := net.Dial("udp4", fmt.Sprintf("127.0.0.1:%d", n.port))
	require.NoError(t, err)
	for _, junk := range []string{"hello", `{"v":1,"kind":"probe"}`, `{"v":9,"kind":"probe","id":"5"}`} {
		_, err = c.Write([]byte(junk))
		require.NoError(t, err)
	}
	c.Close()
	require.Eventually(t, func() bool { return a.Stats().BadDatagrams == 3 }, 5*time.Second, 10*time.Millisecond)
	b := n.entity("b", nil)
	waitActive(t, b)
	assert.Equal(t, "a", parentOf(b, n.base), "a still answers probes")
	_, err = a.Search(context.Background(), sion.Need{}, sion.SearchOptions{})
	assert.ErrorIs(t, err, sion.ErrInvalidConfig)

	ctx := context.Background()
	for _, p := range []string{"", " ", "sion.x", "a\nb"} {
		assert.ErrorIs(t, a.Join(ctx, p, ""), sion.ErrInvalidConfig, "place %q", p)
	}
	require.Error(t, a.Join(ctx, "zeta", "127.0.0.1:1"))
	assert.NotContains(t, a.Places(), "zeta", "a failed Join leaves no isolated member behind")
	assert.Nil(t, a.Switch("zeta"))
	require.NoError(t, a.Close())
	assert.Empty(t, a.Places())
	assert.Nil(t, a.Switch(n.base))
	assert.ErrorIs(t, a.Join(ctx, "zeta", ""), sion.ErrClosed)
}

// TestEntityHoldsSeveralNetworkEntities: one entity holds switches in two
// places, the routers of its shared links, and a gateway between its own
// places (S1: network entities live in an entity); an event crosses from
// one of its places to the other and on to a linked entity.
func TestEntityHoldsSeveralNetworkEntities(t *testing.T) {
	n := newEntityNet(t)
	consent := func(name string) (sion.PlaceConfig, error) {
		return sion.PlaceConfig{Name: name, Ontology: n.o, Federation: func(context.Context, sion.FederationRequest) error { return nil }}, nil
	}
	a := n.entity("a", func(c *sion.EntityConfig) { c.NoBroadcast, c.Place = true, consent })
	waitActive(t, a)
	b := n.entity("b", func(c *sion.EntityConfig) { c.NoBroadcast, c.Seeds, c.Place = true, []string{a.Addr(n.base)}, consent })
	waitActive(t, b)
	ctx := context.Background()
	require.NoError(t, a.Join(ctx, "lab", ""))
	g, err := a.Switch("lab").Federate(ctx, n.tr, a.Addr(n.base), sion.GatewayConfig{Name: "lab-to-base", Export: &sion.DirectionConfig{}})
	require.NoError(t, err)
	defer g.Close()

	s, err := b.Switch(n.base).Open(ctx, sion.SessionConfig{Name: "app"})
	require.NoError(t, err)
	got := collector(t, s, `{type ⊑ Notice}`)
	require.NoError(t, b.Switch(n.base).Flush(ctx))
	require.NoError(t, a.Switch("lab").Flush(ctx))
	pub, err := a.Switch("lab").Open(ctx, sion.SessionConfig{Name: "pub"})
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, &sion.Event{Type: "Notice", Attrs: kv("seq", 3)}))
	require.Eventually(t, func() bool { return got.len() == 1 }, 5*time.Second, 10*time.Millisecond)
	ev := got.events()[0]
	assert.Equal(t, []string{"lab", n.base}, ev.Control.Path, "crossed a's gateway, then a's shared link to b")
	assert.Len(t, a.Switch("lab").Gateways(), 1)
	assert.Equal(t, "a", parentOf(b, n.base))
}

package watermill_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
	"github.com/sion-go/sion/transport/tcp"
)

// network is a sion place for one test: where a publisher's and a
// subscriber's sessions open.
type network struct {
	o            *ontology.Ontology
	pubSw, subSw *sion.Switch // nil for remote sessions
	tr           transport.Transport
	addr         string // the switch remote sessions dial
	remote       bool
}

// variant is one way to place the two sessions.
type variant struct {
	name string
	make func(t *testing.T, o *ontology.Ontology) *network
}

// variants are the placements every test body runs over: one switch with
// local sessions; two switches joined by a shared link, the publisher on
// one and the subscriber on the other; remote sessions (sion.Dial) to one
// switch. The last two over transport/mem and over TCP on 127.0.0.1.
var variants = []variant{
	{"local", func(t *testing.T, o *ontology.Ontology) *network {
		sw := newSwitch(t, o, "sw")
		return &network{o: o, pubSw: sw, subSw: sw}
	}},
	{"mem-link", func(t *testing.T, o *ontology.Ontology) *network { return linked(t, o, newMem(t), "") }},
	{"mem-remote", func(t *testing.T, o *ontology.Ontology) *network { return remote(t, o, newMem(t), "") }},
	{"tcp-link", func(t *testing.T, o *ontology.Ontology) *network { return linked(t, o, newTCP(t), "127.0.0.1:0") }},
	{"tcp-remote", func(t *testing.T, o *ontology.Ontology) *network { return remote(t, o, newTCP(t), "127.0.0.1:0") }},
}

// linked returns two switches joined by a shared link over tr, the
// first serving on listen.
func linked(t *testing.T, o *ontology.Ontology, tr transport.Transport, listen string) *network {
	place := newPlace(t, o)
	a := switchOf(t, place, "a")
	b := switchOf(t, place, "b")
	addr := serve(t, a, tr, listen)
	link, err := b.Link(context.Background(), tr, addr, sion.LinkConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, link.Close()) })
	return &network{o: o, pubSw: a, subSw: b}
}

// remote returns one switch serving on listen over tr, whose sessions
// are remote.
func remote(t *testing.T, o *ontology.Ontology, tr transport.Transport, listen string) *network {
	sw := switchOf(t, newPlace(t, o), "sw")
	return &network{o: o, tr: tr, addr: serve(t, sw, tr, listen), remote: true}
}

// publisherSession opens a session on the publisher's side.
func (n *network) publisherSession(t *testing.T, name string) *sion.Session {
	return n.open(t, n.pubSw, name)
}

// subscriberSession opens a session on the subscriber's side.
func (n *network) subscriberSession(t *testing.T, name string) *sion.Session {
	return n.open(t, n.subSw, name)
}

func (n *network) open(t *testing.T, sw *sion.Switch, name string) *sion.Session {
	t.Helper()
	ctx := context.Background()
	var s *sion.Session
	var err error
	if n.remote {
		s, err = sion.Dial(ctx, n.tr, n.addr, sion.SessionConfig{Name: name})
	} else {
		s, err = sw.Open(ctx, sion.SessionConfig{Name: name})
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func newPlace(t *testing.T, o *ontology.Ontology) *sion.EventPlace {
	t.Helper()
	p, err := sion.NewEventPlace(sion.PlaceConfig{Name: "test", Ontology: o})
	require.NoError(t, err)
	return p
}

func switchOf(t *testing.T, p *sion.EventPlace, name string) *sion.Switch {
	t.Helper()
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: name, Place: p})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sw.Close()) })
	return sw
}

func newSwitch(t *testing.T, o *ontology.Ontology, name string) *sion.Switch {
	t.Helper()
	return switchOf(t, newPlace(t, o), name)
}

func newTCP(t *testing.T) *tcp.Transport {
	t.Helper()
	tr, err := tcp.New(tcp.Config{})
	require.NoError(t, err)
	return tr
}

func newMem(t *testing.T) *mem.Network {
	t.Helper()
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	return tr
}

// serve makes sw serve on listen over tr (a fresh address: "" on mem,
// "127.0.0.1:0" on TCP) until the test ends, and returns the address.
func serve(t *testing.T, sw *sion.Switch, tr transport.Transport, listen string) string {
	t.Helper()
	l, err := tr.Listen(listen)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- sw.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-served)
	})
	return l.Addr().String()
}

func loadOntology(t *testing.T, src string) *ontology.Ontology {
	t.Helper()
	o, err := ontology.LoadJSON(strings.NewReader(src), "test.json")
	require.NoError(t, err)
	return o
}

package metrics_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/metrics"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
)

// testOntology has a Reading type (with an int attribute n) and an
// Alarm type.
func testOntology(t testing.TB) *ontology.Ontology {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "Event"},
		{Name: "Reading", Parents: []string{"Event"}, Attributes: []ontology.Attribute{{Name: "n", Kind: ontology.KindInt}}},
		{Name: "Alarm", Parents: []string{"Event"}},
	})
	require.NoError(t, err)
	return o
}

// newPlace returns a place that approves federation requests.
func newPlace(t testing.TB, name string, o *ontology.Ontology) *sion.EventPlace {
	t.Helper()
	p, err := sion.NewEventPlace(sion.PlaceConfig{Name: name, Ontology: o,
		Federation: func(context.Context, sion.FederationRequest) error { return nil }})
	require.NoError(t, err)
	return p
}

// serve starts a switch named name in p serving on addr over tr; it is
// closed at cleanup and its Serve returns.
func serve(t testing.TB, tr transport.Transport, p *sion.EventPlace, name, addr string) *sion.Switch {
	t.Helper()
	sw, _ := serveAt(t, tr, p, name, addr)
	return sw
}

// serveAt is serve, returning the address the switch listens on too.
func serveAt(t testing.TB, tr transport.Transport, p *sion.EventPlace, name, addr string) (*sion.Switch, string) {
	t.Helper()
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: name, Place: p})
	require.NoError(t, err)
	l, err := tr.Listen(addr)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- sw.Serve(context.Background(), l) }()
	require.Eventually(t, func() bool { return sw.State() == sion.Active }, 10*time.Second, time.Millisecond)
	t.Cleanup(func() {
		require.NoError(t, sw.Close())
		require.NoError(t, <-served)
	})
	return sw, l.Addr().String()
}

// linkUp links child to the switch serving at addr and waits until both
// ends are up; no probes, so that control counts are exact.
func linkUp(t testing.TB, tr transport.Transport, child, parent *sion.Switch, addr string) *sion.SharedLink {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sl, err := child.Link(ctx, tr, addr, sion.LinkConfig{RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond, ProbeHops: -1})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return linkState(parent, child.Name()) == sion.LinkUp }, 10*time.Second, time.Millisecond)
	return sl
}

// linkState is the state of sw's link to peer (LinkClosed when it has
// none).
func linkState(sw *sion.Switch, peer string) sion.LinkState {
	for _, l := range sw.Links() {
		if l.Peer == peer {
			return l.State
		}
	}
	return sion.LinkClosed
}

// memNet returns a mem network.
func memNet(t testing.TB) *mem.Network {
	t.Helper()
	n, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	return n
}

// cutter is a transport whose dialled connections can all be closed at
// once (cut), to make links and gateways fail and re-form.
type cutter struct {
	transport.Transport
	mu    sync.Mutex
	conns []transport.Conn
}

func (c *cutter) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	conn, err := c.Transport.Dial(ctx, addr)
	if err == nil {
		c.mu.Lock()
		c.conns = append(c.conns, conn)
		c.mu.Unlock()
	}
	return conn, err
}

// cut closes every connection dialled since the last cut and returns
// how many it closed.
func (c *cutter) cut() int {
	c.mu.Lock()
	conns := c.conns
	c.conns = nil
	c.mu.Unlock()
	for _, conn := range conns {
		_ = conn.Close()
	}
	return len(conns)
}

func open(t testing.TB, sw *sion.Switch, name string) *sion.Session {
	t.Helper()
	s, err := sw.Open(context.Background(), sion.SessionConfig{Name: name})
	require.NoError(t, err)
	return s
}

func subscribe(t testing.TB, s *sion.Session, src string, opts ...sion.SubscribeOption) *sion.Subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := s.Subscribe(ctx, src, opts...)
	require.NoError(t, err, src)
	return sub
}

// publish publishes n Readings (n = 0…n-1) or, with typ, n events of typ.
func publish(t testing.TB, s *sion.Session, typ string, n int) {
	t.Helper()
	for i := range n {
		ev := &sion.Event{Type: typ}
		if typ == "Reading" {
			ev.Attrs = []ontology.Attr{{Name: "n", Value: ontology.Int(int64(i))}}
		}
		require.NoError(t, s.Publish(context.Background(), ev))
	}
}

// scrape gathers c through a pedantic registry (which checks c's
// descriptors against what it collects) and returns every sample by
// series, "name{label=value,…}" with labels sorted; a histogram gives
// name_count, name_sum and name_bucket{…,le=…}.
func scrape(t testing.TB, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			sort.Strings(ls)
			key := func(suffix string, extra ...string) string {
				l := append(append([]string(nil), ls...), extra...)
				sort.Strings(l)
				return mf.GetName() + suffix + "{" + strings.Join(l, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key("")] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key("")] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				h := m.GetHistogram()
				out[key("_count")] = float64(h.GetSampleCount())
				out[key("_sum")] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					out[key("_bucket", fmt.Sprintf("le=%g", b.GetUpperBound()))] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

// dump formats samples for a failure message.
func dump(s map[string]float64) string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %g\n", k, s[k])
	}
	return b.String()
}

// collectorOf returns a Collector of sws.
func collectorOf(t testing.TB, sws ...*sion.Switch) *metrics.Collector {
	t.Helper()
	c, err := metrics.NewCollector(sws...)
	require.NoError(t, err)
	return c
}

// sentTo waits until sw counts n events sent to peer over its links
// (LinkTotals). The sender counts an event once its transport has taken
// it, which may be a moment after the peer delivered it: a test that
// saw the delivery waits for the count before it reads the counters.
func sentTo(t testing.TB, sw *sion.Switch, peer string, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return sw.LinkTotals()[peer].EventsSent == n }, 10*time.Second, time.Millisecond,
		"%s's events sent to %s", sw.Name(), peer)
}

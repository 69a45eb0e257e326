package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/tcp"
)

// Publish → deliver across a line of switches linked over loopback TCP,
// against what a Go user would pick instead: NATS (an embedded
// nats-server with nats.go clients), whose subscriber receives every
// event of its subject and applies the same filter by hand.
//
// sion: hops+1 switches sw0…swH in one process, each serving a TCP
// listener on 127.0.0.1; swi links to swi-1 (routing by filter, no
// probes). The publisher is a session on sw0 and the subscriber
// {type ⊑ Reading; n >= 0} (it matches every event) a session on swH,
// both local (sessions=local) or both remote sessions over TCP
// (sessions=tcp, sion.Dial). Every switch also has netOthers
// subscriptions {type ⊑ Reading; zone == "zK"} that no event matches, so
// the filters propagate over every link and each switch matches each
// event against them.
//
// NATS: one server, or a cluster of two (routes on 127.0.0.1; the
// publisher on the first server, the subscriber on the second). The
// publisher sends JSON {type, n, t, value, zone, data} on subject
// "readings.hall"; the subscriber subscribes to "readings.>" and decodes
// the JSON and evaluates type == "Reading" && n >= 0 itself. The
// non-matching subscribers become subscriptions to "readings.zK" (the
// server's subject match does that filtering).
//
// Events: Reading{n = i mod 100, t = publish time (UnixNano), value,
// zone = "hall"} with a 60-byte JSON payload. Two loads:
//   - burst: an op publishes netBatch events back to back, then waits
//     until the subscriber has all of them; events/s is the throughput,
//     and the latencies include the queueing inside the burst.
//   - single: an op publishes one event and waits for it; the latencies
//     are those of an idle system.
//
// Latency is from just before Publish to the subscriber's handler (one
// process, one clock). allocs/op and B/op count the whole process: the
// switches or the NATS servers, and both clients.

const (
	netBatch  = 1000 // events per op, load=burst
	netOthers = 4    // non-matching subscriptions per switch
	netWarmup = 200  // events before the clock starts
)

var netOnt = sync.OnceValues(func() (*ontology.Ontology, error) {
	return ontology.New([]ontology.TypeDef{{Name: "Reading", Attributes: []ontology.Attribute{
		{Name: "n", Kind: ontology.KindInt}, {Name: "t", Kind: ontology.KindInt},
		{Name: "value", Kind: ontology.KindFloat}, {Name: "zone", Kind: ontology.KindString},
	}}})
})

// netPayload is every event's payload, for sion and NATS alike.
var netPayload = []byte(`{"sensor":"s-0017","unit":"celsius","fw":"1.4.2","battery":87}`)

// arrivals counts the events the subscriber accepted and records their
// latencies; a waiter blocks in await until a count is reached.
type arrivals struct {
	got, want atomic.Int64
	notify    chan struct{}
	recording atomic.Bool
	lat       latencies
	stuck     *time.Timer
}

func newArrivals() *arrivals {
	a := &arrivals{notify: make(chan struct{}, 1), stuck: time.NewTimer(time.Hour)}
	a.stuck.Stop()
	return a
}

// arrived records one accepted event published at sent (UnixNano).
func (a *arrivals) arrived(sent int64) {
	if a.recording.Load() {
		a.lat.record(time.Duration(time.Now().UnixNano() - sent))
	}
	if a.got.Add(1) >= a.want.Load() {
		select {
		case a.notify <- struct{}{}:
		default:
		}
	}
}

// expect announces that n events will have arrived once those published
// so far are in; call it before publishing them.
func (a *arrivals) expect(n int64) { a.want.Store(n) }

// await waits until the count announced by expect is reached; it fails
// tb if that takes more than 30 s (events were lost).
func (a *arrivals) await(tb testing.TB) {
	want := a.want.Load()
	a.stuck.Reset(30 * time.Second)
	defer a.stuck.Stop()
	for a.got.Load() < want {
		select {
		case <-a.notify:
		case <-a.stuck.C:
			tb.Fatalf("only %d of %d events arrived within 30 s", a.got.Load(), want)
		}
	}
}

// netRig is one system under test: publish sends event i with the
// current time; the subscriber reports to the arrivals it was made with.
type netRig struct {
	publish func(i int) error
	// check runs after the benchmark: nothing dropped on the way.
	check func(tb testing.TB)
}

// newSionRig starts hops+1 switches in a line over TCP (see the top of
// this file); they close at cleanup.
func newSionRig(tb testing.TB, hops int, remote bool, a *arrivals) netRig {
	tb.Helper()
	ctx := context.Background()
	ont, err := netOnt()
	require.NoError(tb, err)
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "net", Ontology: ont})
	require.NoError(tb, err)
	tr, err := tcp.New(tcp.Config{})
	require.NoError(tb, err)
	sws := make([]*sion.Switch, hops+1)
	addrs := make([]string, hops+1)
	for i := range sws {
		sw, err := sion.NewSwitch(sion.SwitchConfig{Name: fmt.Sprint("sw", i), Place: place})
		require.NoError(tb, err)
		l, err := tr.Listen("127.0.0.1:0")
		require.NoError(tb, err)
		served := make(chan error, 1)
		go func() { served <- sw.Serve(ctx, l) }()
		// Cleanups run last-in first-out: the far end of the line closes
		// first, so no child outlives its parent and re-links.
		tb.Cleanup(func() {
			require.NoError(tb, sw.Close())
			require.NoError(tb, <-served)
		})
		sws[i], addrs[i] = sw, l.Addr().String()
	}
	for i := 1; i <= hops; i++ {
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := sws[i].Link(lctx, tr, addrs[i-1], sion.LinkConfig{ProbeHops: -1})
		cancel()
		require.NoError(tb, err, "link sw%d to sw%d", i, i-1)
	}
	open := func(i int, name string) *sion.Session {
		var s *sion.Session
		var err error
		if remote {
			s, err = sion.Dial(ctx, tr, addrs[i], sion.SessionConfig{Name: name})
		} else {
			s, err = sws[i].Open(ctx, sion.SessionConfig{Name: name})
		}
		require.NoError(tb, err)
		tb.Cleanup(func() { s.Close() })
		return s
	}
	for i, sw := range sws {
		others, err := sw.Open(ctx, sion.SessionConfig{Name: "others"})
		require.NoError(tb, err)
		for k := range netOthers {
			_, err := others.Subscribe(ctx, fmt.Sprintf(`{type ⊑ Reading; zone == "z%d"}`, i*netOthers+k))
			require.NoError(tb, err)
		}
	}
	sub := open(hops, "sub")
	_, err = sub.Subscribe(ctx, `{type ⊑ Reading; n >= 0}`,
		sion.WithQueue(4*netBatch), overflow(remote), sion.WithHandler(func(d sion.Delivery) {
			t, _ := d.Event.Value("t")
			a.arrived(t.Int())
		}))
	require.NoError(tb, err)
	pub := open(0, "pub")
	ev := &sion.Event{Type: "Reading", ContentType: "application/json", Data: netPayload, Attrs: []ontology.Attr{
		{Name: "n"}, {Name: "t"}, {Name: "value"}, {Name: "zone", Value: ontology.String("hall")},
	}}
	return netRig{
		publish: func(i int) error {
			ev.Attrs[0].Value = ontology.Int(int64(i % 100))
			ev.Attrs[2].Value = ontology.Float(20 + float64(i%50)/10)
			ev.Attrs[1].Value = ontology.Int(time.Now().UnixNano())
			return pub.Publish(ctx, ev) // Publish copies ev
		},
		check: func(tb testing.TB) {
			for _, sw := range sws {
				for _, l := range sw.Links() {
					require.Zero(tb, l.Dropped, "%s: events dropped on the link to %s", sw.Name(), l.Peer)
				}
			}
		},
	}
}

// natsMsg is the NATS side's event: the attributes and the payload as
// one JSON object.
type natsMsg struct {
	Type  string          `json:"type"`
	N     int64           `json:"n"`
	T     int64           `json:"t"`
	Value float64         `json:"value"`
	Zone  string          `json:"zone"`
	Data  json.RawMessage `json:"data"`
}

// startNATS starts an embedded server on 127.0.0.1 with a random port;
// with cluster, it also listens for routes and joins the cluster at
// routes (nil: none). It shuts down at cleanup.
func startNATS(tb testing.TB, name string, cluster bool, routes []*url.URL) *server.Server {
	tb.Helper()
	opts := &server.Options{
		ServerName: name, Host: "127.0.0.1", Port: server.RANDOM_PORT,
		NoLog: true, NoSigs: true,
	}
	if cluster {
		opts.Cluster = server.ClusterOpts{Name: "bench", Host: "127.0.0.1", Port: server.RANDOM_PORT,
			Compression: server.CompressionOpts{Mode: server.CompressionOff}}
		opts.Routes = routes
	}
	s, err := server.NewServer(opts)
	require.NoError(tb, err)
	go s.Start()
	tb.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	require.True(tb, s.ReadyForConnections(10*time.Second), "nats server %s did not start", name)
	return s
}

// newNATSRig starts 1 or 2 NATS servers and the clients (see the top of
// this file); they close at cleanup.
func newNATSRig(tb testing.TB, servers int, a *arrivals) netRig {
	tb.Helper()
	first := startNATS(tb, "n0", servers == 2, nil)
	last := first
	if servers == 2 {
		ca := first.ClusterAddr()
		last = startNATS(tb, "n1", true, []*url.URL{{Scheme: "nats-route", Host: ca.String()}})
		require.Eventually(tb, func() bool { return first.NumRoutes() > 0 && last.NumRoutes() > 0 },
			10*time.Second, time.Millisecond, "the NATS route did not come up")
	}
	connect := func(s *server.Server) *nats.Conn {
		nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect())
		require.NoError(tb, err)
		tb.Cleanup(nc.Close)
		return nc
	}
	others := connect(last)
	for k := range netOthers * 2 {
		_, err := others.Subscribe(fmt.Sprintf("readings.z%d", k), func(*nats.Msg) {})
		require.NoError(tb, err)
	}
	subc := connect(last)
	_, err := subc.Subscribe("readings.>", func(m *nats.Msg) {
		// The filter by hand: decode, compare.
		var e natsMsg
		if err := json.Unmarshal(m.Data, &e); err == nil && e.Type == "Reading" && e.N >= 0 {
			a.arrived(e.T)
		}
	})
	require.NoError(tb, err)
	require.NoError(tb, subc.Flush())
	require.NoError(tb, others.Flush())
	pub := connect(first)
	// The subscription must have reached the publisher's server: send
	// probes until one arrives (they are not counted).
	if servers == 2 {
		probe, err := subc.SubscribeSync("probe")
		require.NoError(tb, err)
		require.Eventually(tb, func() bool {
			if pub.Publish("probe", nil) != nil || pub.Flush() != nil {
				return false
			}
			_, err := probe.NextMsg(10 * time.Millisecond)
			return err == nil
		}, 10*time.Second, time.Millisecond, "interest did not propagate over the NATS route")
		require.NoError(tb, probe.Unsubscribe())
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	msg := natsMsg{Type: "Reading", Zone: "hall", Data: netPayload}
	return netRig{
		publish: func(i int) error {
			msg.N = int64(i % 100)
			msg.Value = 20 + float64(i%50)/10
			msg.T = time.Now().UnixNano()
			buf.Reset()
			if err := enc.Encode(&msg); err != nil {
				return err
			}
			return pub.Publish("readings.hall", buf.Bytes()) // Publish copies the bytes
		},
		check: func(tb testing.TB) {
			for _, nc := range []*nats.Conn{pub, subc, others} {
				require.NoError(tb, nc.LastError())
			}
		},
	}
}

// netSystems are the systems BenchmarkNetworkHops compares, by name.
var netSystems = []struct {
	name string
	rig  func(tb testing.TB, a *arrivals) netRig
}{
	{"sion/sessions=local/hops=1", func(tb testing.TB, a *arrivals) netRig { return newSionRig(tb, 1, false, a) }},
	{"sion/sessions=local/hops=2", func(tb testing.TB, a *arrivals) netRig { return newSionRig(tb, 2, false, a) }},
	{"sion/sessions=local/hops=4", func(tb testing.TB, a *arrivals) netRig { return newSionRig(tb, 4, false, a) }},
	{"sion/sessions=tcp/hops=0", func(tb testing.TB, a *arrivals) netRig { return newSionRig(tb, 0, true, a) }},
	{"sion/sessions=tcp/hops=1", func(tb testing.TB, a *arrivals) netRig { return newSionRig(tb, 1, true, a) }},
	{"nats/servers=1", func(tb testing.TB, a *arrivals) netRig { return newNATSRig(tb, 1, a) }},
	{"nats/servers=2", func(tb testing.TB, a *arrivals) netRig { return newNATSRig(tb, 2, a) }},
}

func BenchmarkNetworkHops(b *testing.B) {
	for _, load := range []struct {
		name  string
		batch int
	}{{"burst", netBatch}, {"single", 1}} {
		for _, sys := range netSystems {
			b.Run("load="+load.name+"/"+sys.name, func(b *testing.B) {
				a := newArrivals()
				rig := sys.rig(b, a)
				i := 0
				send := func(n int) {
					a.expect(int64(i + n))
					for range n {
						if err := rig.publish(i); err != nil {
							b.Fatal(err)
						}
						i++
					}
					a.await(b)
				}
				for range netWarmup / load.batch {
					send(load.batch)
				}
				if load.batch > netWarmup {
					send(netWarmup)
				}
				a.recording.Store(true)
				b.ReportAllocs()
				start, from, cpu := time.Now(), i, startCPU()
				for b.Loop() {
					send(load.batch)
				}
				el := time.Since(start).Seconds()
				cpu.report(b, i-from)
				b.ReportMetric(float64(i-from)/el, "events/s")
				b.ReportMetric(a.lat.quantile(0.50), "p50-µs")
				b.ReportMetric(a.lat.quantile(0.99), "p99-µs")
				require.Equal(b, int64(i), a.got.Load(), "every event arrived once")
				rig.check(b)
			})
		}
	}
}

// TestNetworkRigs runs each system of BenchmarkNetworkHops with a few
// events: every event arrives once, nothing is dropped, and nothing is
// left running afterwards.
func TestNetworkRigs(t *testing.T) {
	for _, sys := range netSystems {
		t.Run(sys.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			t.Run("run", func(t *testing.T) {
				a := newArrivals()
				rig := sys.rig(t, a)
				a.recording.Store(true)
				a.expect(50)
				for i := range 50 {
					require.NoError(t, rig.publish(i))
				}
				a.await(t)
				require.Equal(t, int64(50), a.got.Load())
				require.Equal(t, int64(50), a.lat.n.Load())
				rig.check(t)
			})
		})
	}
}

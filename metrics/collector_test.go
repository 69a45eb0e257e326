package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// TestCollectorLinked publishes on one switch of two linked, over mem
// and over loopback TCP, to a subscriber on the other and checks the
// exact counts on both.
func TestCollectorLinked(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   func(t *testing.T) transport.Transport
		addr func(name string) string
	}{
		{"mem", func(t *testing.T) transport.Transport { return memNet(t) }, func(name string) string { return name }},
		{"tcp", func(t *testing.T) transport.Transport {
			tr, err := tcp.New(tcp.Config{})
			require.NoError(t, err)
			return tr
		}, func(string) string { return "127.0.0.1:0" }},
	} {
		t.Run(tc.name, func(t *testing.T) { testCollectorLinked(t, tc.tr(t), tc.addr) })
	}
}

func testCollectorLinked(t *testing.T, tr transport.Transport, addr func(string) string) {
	p := newPlace(t, "plant", testOntology(t))
	a, aAddr := serveAt(t, tr, p, "a", addr("a"))
	b := serve(t, tr, p, "b", addr("b"))
	linkUp(t, tr, b, a, aAddr)
	sub := subscribe(t, open(t, b, "reader"), "{type ⊑ Reading}", sion.WithQueue(100))
	pub := open(t, a, "writer")
	const n = 5
	publish(t, pub, "Reading", n)
	publish(t, pub, "Alarm", 2) // matches nothing
	require.Eventually(t, func() bool { return sub.Stats().Delivered == n }, 10*time.Second, time.Millisecond)

	c := collectorOf(t, a, b)
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	assert.Empty(t, problems)
	s := scrape(t, c)
	for series, want := range map[string]float64{
		"sion_events_in_total{place=plant,switch=a}":                                    n + 2,
		"sion_events_in_total{place=plant,switch=b}":                                    n,
		"sion_session_fires_total{place=plant,switch=a}":                                n, // b's link session
		"sion_session_fires_total{place=plant,switch=b}":                                n, // the reader
		"sion_events_delivered_total{place=plant,switch=b}":                             n,
		"sion_link_events_sent_total{peer=b,place=plant,switch=a}":                      n,
		"sion_link_events_received_total{peer=a,place=plant,switch=b}":                  n,
		"sion_link_events_sent_total{peer=a,place=plant,switch=b}":                      0,
		"sion_link_up{peer=a,place=plant,switch=b}":                                     1,
		"sion_link_up{peer=b,place=plant,switch=a}":                                     1,
		"sion_link_routes{peer=a,place=plant,switch=b}":                                 1,
		"sion_link_proxies{peer=b,place=plant,switch=a}":                                1,
		"sion_sessions{kind=local,place=plant,switch=a}":                                1,
		"sion_sessions{kind=link,place=plant,switch=a}":                                 1,
		"sion_sessions{kind=remote,place=plant,switch=a}":                               0,
		"sion_subscriptions{place=plant,switch=b}":                                      1,
		"sion_filters{place=plant,switch=b}":                                            1,
		"sion_link_events_dropped_total{peer=b,place=plant,reason=queue_full,switch=a}": 0,
	} {
		assert.Equal(t, want, s[series], "%s in\n%s", series, dump(s))
	}
	// Frames still in flight arrive: what one end sent, the other
	// received, both ways. Control messages too, but for the parent's
	// LinkAccept: the core counts it in the parent's ControlSent (not in
	// its FramesSent: it is the handshake's), and the child, which takes
	// it in its handshake, does not count it received.
	require.Eventually(t, func() bool {
		s := scrape(t, c)
		accept := s["sion_link_control_sent_total{peer=b,place=plant,switch=a}"] - s["sion_link_control_received_total{peer=a,place=plant,switch=b}"]
		if s["sion_link_control_sent_total{peer=a,place=plant,switch=b}"] != s["sion_link_control_received_total{peer=b,place=plant,switch=a}"] ||
			accept != 0 && accept != 1 {
			return false
		}
		return s["sion_link_frames_sent_total{peer=a,place=plant,switch=b}"] == s["sion_link_frames_received_total{peer=b,place=plant,switch=a}"] &&
			s["sion_link_frames_sent_total{peer=b,place=plant,switch=a}"] == s["sion_link_frames_received_total{peer=a,place=plant,switch=b}"] &&
			s["sion_link_sent_bytes_total{peer=b,place=plant,switch=a}"] == s["sion_link_received_bytes_total{peer=a,place=plant,switch=b}"] &&
			s["sion_link_sent_bytes_total{peer=a,place=plant,switch=b}"] == s["sion_link_received_bytes_total{peer=b,place=plant,switch=a}"]
	}, 10*time.Second, time.Millisecond)
	s = scrape(t, c)
	assert.GreaterOrEqual(t, s["sion_link_frames_sent_total{peer=b,place=plant,switch=a}"], float64(n), "n events and some control")
	assert.Greater(t, s["sion_link_sent_bytes_total{peer=b,place=plant,switch=a}"], s["sion_link_frames_sent_total{peer=b,place=plant,switch=a}"])
}

// TestCollectorGateway federates two places over mem, sends events
// across, cuts the gateway's connection so that it re-forms, and checks
// that both ends' counters are exact across it.
func TestCollectorGateway(t *testing.T) {
	tr := &cutter{Transport: memNet(t)}
	o := testOntology(t)
	west := serve(t, tr, newPlace(t, "west", o), "w", "w")
	east := serve(t, tr, newPlace(t, "east", o), "e", "e")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := west.Federate(ctx, tr, "e", sion.GatewayConfig{Name: "w-e",
		Export:   &sion.DirectionConfig{Firewall: []string{"{type ⊑ Reading; n < 100}"}},
		RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, g.Close()) })
	sub := subscribe(t, open(t, east, "reader"), "{type ⊑ Reading}", sion.WithQueue(1000))
	require.Eventually(t, func() bool { return gateway(west, "w-e").Proxies > 0 }, 10*time.Second, time.Millisecond)

	c := collectorOf(t, west, east)
	pub := open(t, west, "writer")
	const n = 4
	publish(t, pub, "Reading", n)
	require.Eventually(t, func() bool { return sub.Stats().Delivered == n }, 10*time.Second, time.Millisecond)
	s := scrape(t, c)
	for series, want := range map[string]float64{
		"sion_gateway_events_forwarded_total{direction=export,gateway=w-e,place=west,switch=w}": n,
		"sion_gateway_events_forwarded_total{direction=import,gateway=w-e,place=east,switch=e}": n,
		"sion_gateway_events_converted_total{direction=export,gateway=w-e,place=west,switch=w}": 0,
		"sion_gateway_events_forwarded_total{direction=import,gateway=w-e,place=west,switch=w}": 0,
		"sion_gateway_up{gateway=w-e,place=west,switch=w}":                                      1,
		"sion_gateway_up{gateway=w-e,place=east,switch=e}":                                      1,
		"sion_sessions{kind=gateway,place=west,switch=w}":                                       1,
		"sion_sessions{kind=gateway,place=east,switch=e}":                                       1,
		"sion_events_delivered_total{place=east,switch=e}":                                      n,
	} {
		assert.Equal(t, want, s[series], "%s in\n%s", series, dump(s))
	}

	// Cut: the gateway re-forms; both ends count over its life.
	before := gateway(east, "w-e").Since
	tr.cut()
	require.Eventually(t, func() bool {
		gi := gateway(east, "w-e")
		return gi.State == sion.LinkUp && !gi.Since.Equal(before) && gateway(west, "w-e").State == sion.LinkUp
	}, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return gateway(west, "w-e").Proxies > 0 }, 10*time.Second, time.Millisecond)
	publish(t, pub, "Reading", 1)
	require.Eventually(t, func() bool { return sub.Stats().Delivered == n+1 }, 10*time.Second, time.Millisecond)
	s = scrape(t, c)
	assert.Equal(t, float64(n+1), s["sion_gateway_events_forwarded_total{direction=export,gateway=w-e,place=west,switch=w}"], dump(s))
	assert.Equal(t, float64(n+1), s["sion_gateway_events_forwarded_total{direction=import,gateway=w-e,place=east,switch=e}"], dump(s))
}

// gateway returns sw's gateway named name (zero when it has none).
func gateway(sw *sion.Switch, name string) sion.GatewayInfo {
	for _, gi := range sw.Gateways() {
		if gi.Name == name {
			return gi
		}
	}
	return sion.GatewayInfo{}
}

// TestCollectorLinkReforms cuts a shared link so that it re-forms and
// checks that its counters carry on from where they were.
func TestCollectorLinkReforms(t *testing.T) {
	tr := &cutter{Transport: memNet(t)}
	p := newPlace(t, "plant", testOntology(t))
	a := serve(t, tr, p, "a", "a")
	b := serve(t, tr, p, "b", "b")
	linkUp(t, tr, b, a, "a")
	sub := subscribe(t, open(t, b, "reader"), "{type ⊑ Reading}", sion.WithQueue(100))
	pub := open(t, a, "writer")
	c := collectorOf(t, a, b)
	const sent = "sion_link_events_sent_total{peer=b,place=plant,switch=a}"
	const received = "sion_link_events_received_total{peer=a,place=plant,switch=b}"

	publish(t, pub, "Reading", 3)
	require.Eventually(t, func() bool { return sub.Stats().Delivered == 3 }, 10*time.Second, time.Millisecond)
	sentTo(t, a, "b", 3)
	s := scrape(t, c)
	require.Equal(t, float64(3), s[sent], dump(s))
	require.Equal(t, float64(3), s[received], dump(s))

	before := b.Links()[0].Since
	tr.cut()
	require.Eventually(t, func() bool {
		l := b.Links()
		return len(l) == 1 && l[0].State == sion.LinkUp && l[0].Since.After(before) && // a later establishment
			linkState(a, "b") == sion.LinkUp && proxies(a, "b") > 0
	}, 10*time.Second, time.Millisecond)
	publish(t, pub, "Reading", 2)
	require.Eventually(t, func() bool { return sub.Stats().Delivered == 5 }, 10*time.Second, time.Millisecond)
	sentTo(t, a, "b", 5)
	s = scrape(t, c)
	assert.Equal(t, float64(5), s[sent], dump(s))
	assert.Equal(t, float64(5), s[received], dump(s))
}

// proxies is LinkInfo.Proxies of sw's link to peer.
func proxies(sw *sion.Switch, peer string) int {
	for _, l := range sw.Links() {
		if l.Peer == peer {
			return l.Proxies
		}
	}
	return 0
}

// TestCollectorDropsAndMatchTime checks drops by reason, spills and the
// match-time histogram on one switch.
func TestCollectorDropsAndMatchTime(t *testing.T) {
	a := serve(t, memNet(t), newPlace(t, "plant", testOntology(t)), "a", "a")
	s := open(t, a, "s")
	subscribe(t, s, "{type ⊑ Reading}", sion.WithQueue(1))                                     // keeps 1, drops the newest
	subscribe(t, s, "{type ⊑ Reading}", sion.WithQueue(1), sion.WithOverflow(sion.DropOldest)) // keeps the last
	subscribe(t, s, "{type ⊑ Reading}", sion.WithQueue(1), sion.WithOverflow(sion.Spill))      // spills into the spool
	const n = 16
	publish(t, s, "Reading", n)

	c := collectorOf(t, a)
	got := scrape(t, c)
	for series, want := range map[string]float64{
		"sion_events_published_total{place=plant,switch=a}":                 n,
		"sion_events_matched_total{place=plant,switch=a}":                   3 * n,
		"sion_events_dropped_total{place=plant,reason=queue_full,switch=a}": n - 1,
		"sion_events_dropped_total{place=plant,reason=evicted,switch=a}":    n - 1,
		"sion_events_dropped_total{place=plant,reason=spool,switch=a}":      0,
		"sion_events_dropped_total{place=plant,reason=stream,switch=a}":     0,
		"sion_events_spilled_total{place=plant,switch=a}":                   n - 1,
		"sion_match_duration_seconds_count{place=plant,switch=a}":           n / 8, // one in 8 is timed
	} {
		assert.Equal(t, want, got[series], "%s in\n%s", series, dump(got))
	}
	h := a.MatchTime()
	assert.Equal(t, h.Sum.Seconds(), got["sion_match_duration_seconds_sum{place=plant,switch=a}"])
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		assert.Equal(t, float64(cum), got[fmt.Sprintf("sion_match_duration_seconds_bucket{le=%g,place=plant,switch=a}", b.Seconds())], b)
	}
}

// TestCollectorAddRemove checks that a removed switch's series go, and
// that a switch of the same name added later continues its counters.
func TestCollectorAddRemove(t *testing.T) {
	tr := memNet(t)
	p := newPlace(t, "plant", testOntology(t))
	first := serve(t, tr, p, "a", "a1")
	publish(t, open(t, first, "w"), "Alarm", 3)
	c := collectorOf(t)
	assert.Empty(t, scrape(t, c))
	require.NoError(t, c.Add(first, first, nil))
	const in = "sion_events_in_total{place=plant,switch=a}"
	assert.Equal(t, float64(3), scrape(t, c)[in])

	c.Remove(first)
	assert.Empty(t, scrape(t, c))
	second := serve(t, tr, p, "a", "a2") // another switch, the same name
	publish(t, open(t, second, "w"), "Alarm", 2)
	require.NoError(t, c.Add(second))
	assert.Equal(t, float64(5), scrape(t, c)[in], "3 from the first, 2 from the second")
}

// TestCollectorConcurrent scrapes through both sides while events flow
// (for the race detector) and checks that no counter ever goes down.
func TestCollectorConcurrent(t *testing.T) {
	tr := memNet(t)
	p := newPlace(t, "plant", testOntology(t))
	a := serve(t, tr, p, "a", "a")
	b := serve(t, tr, p, "b", "b")
	linkUp(t, tr, b, a, "a")
	subscribe(t, open(t, b, "reader"), "{type ⊑ Reading}", sion.WithQueue(10))
	c := collectorOf(t, a, b)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	_, err := c.RegisterOTel(mp.Meter("test"))
	require.NoError(t, err)

	w := open(t, a, "writer")
	done := make(chan struct{})
	go func() { // no require off the test's goroutine
		defer close(done)
		for range 500 {
			assert.NoError(t, w.Publish(context.Background(), &sion.Event{Type: "Reading"}))
		}
	}()
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 20 {
			var rm metricdata.ResourceMetrics
			assert.NoError(t, reader.Collect(context.Background(), &rm))
		}
	})
	last := map[string]float64{}
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		default:
		}
		for k, v := range scrape(t, c) {
			if strings.HasSuffix(strings.SplitN(k, "{", 2)[0], "_total") {
				assert.GreaterOrEqual(t, v, last[k], k)
				last[k] = v
			}
		}
	}
	wg.Wait()
}

// TestCollectorRemote counts a remote session (Dial) by kind and its
// publishes.
func TestCollectorRemote(t *testing.T) {
	tr := memNet(t)
	a := serve(t, tr, newPlace(t, "plant", testOntology(t)), "a", "a")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := sion.Dial(ctx, tr, "a", sion.SessionConfig{Name: "far"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	sub := subscribe(t, open(t, a, "near"), "{type ⊑ Alarm}")
	publish(t, r, "Alarm", 2)
	require.Eventually(t, func() bool { return sub.Stats().Delivered == 2 }, 10*time.Second, time.Millisecond)

	s := scrape(t, collectorOf(t, a))
	for series, want := range map[string]float64{
		"sion_sessions{kind=remote,place=plant,switch=a}":   1,
		"sion_sessions{kind=local,place=plant,switch=a}":    1,
		"sion_events_published_total{place=plant,switch=a}": 2,
		"sion_events_delivered_total{place=plant,switch=a}": 2,
		"sion_sessions_away{place=plant,switch=a}":          0,
	} {
		assert.Equal(t, want, s[series], "%s in\n%s", series, dump(s))
	}
}

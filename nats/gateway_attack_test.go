package nats_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/nats"
)

// TestInStructuredNumbersAsTheHandler: a structured CloudEvent whose
// extension is a JSON number with a fraction is refused, as
// cloudevents.Handler refuses it, rather than read as the SDK reads it
// (mag 5.7 as 5, which then matched {mag < 5.5}); a batch is refused too.
// One with the number as a string comes in exact.
func TestInStructuredNumbersAsTheHandler(t *testing.T) {
	srv := natsServer(t)
	sw := newSwitch(t, "hq", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: connectTo(t, srv)})
	sub := receiver(t, sw, "{type ⊑ Alarm}")
	subscribed(t, g, "sion.hq.Alarm", "sion.hq.Alarm.>")
	plain := connectTo(t, srv)
	structured := natsgo.Header{"Content-Type": {"application/cloudevents+json"}}
	for _, body := range []string{
		`{"specversion": "1.0", "id": "f-1", "source": "/plain", "type": "Flood", "level": 2.7}`,
		`{"specversion": "1.0", "id": "f-2", "source": "/plain", "type": "Flood", "level": 1e1}`,
		`{"specversion": "1.0", "id": "f-3", "source": "/plain", "type": "Flood", "level": 8589934592}`,
	} {
		require.NoError(t, plain.PublishMsg(&natsgo.Msg{Subject: "sion.hq.Alarm.Flood", Header: structured, Data: []byte(body)}))
	}
	require.NoError(t, plain.PublishMsg(&natsgo.Msg{Subject: "sion.hq.Alarm.Flood",
		Header: natsgo.Header{"Content-Type": {"application/cloudevents-batch+json"}},
		Data:   []byte(`[{"specversion": "1.0", "id": "b-1", "source": "/plain", "type": "Flood"}]`)}))
	require.NoError(t, plain.PublishMsg(&natsgo.Msg{Subject: "sion.hq.Alarm.Flood", Header: structured,
		Data: []byte(`{"specversion": "1.0", "id": "f-4", "source": "/plain", "type": "Flood", "level": "7"}`)}))

	got := receive(t, sub, 1)
	v, _ := got[0].Value("level")
	assert.Equal(t, int64(7), v.Int(), "the only event that came in")
	// The handler counts after Publish returned, so after the delivery.
	require.Eventually(t, func() bool {
		st := g.Stats()
		return st.InRefused[nats.ReasonBadCloudEvent] == 4 && st.InPublished == 1
	}, wait, time.Millisecond)
}

// TestInBurstIsCounted: a burst of raw messages that outruns the
// caller's place — here a subscriber that blocks its switch until the
// burst is over — loses what the gateway's queue cannot hold, and every
// message is accounted for: delivered, or counted in Stats.InDropped.
// Before, the losses were counted only on the Gateway's private subject
// switch, and InPublished said they had come in.
func TestInBurstIsCounted(t *testing.T) {
	const burst = 80_000 // more than the 65,536 events a gateway's queue holds
	srv := natsServer(t)
	sw := newSwitch(t, "hq", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: connectTo(t, srv)})
	s, err := sw.Open(context.Background(), sion.SessionConfig{Name: "slow"})
	require.NoError(t, err)
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open) // a failing test does not leave the handler blocked
	var delivered atomic.Int64
	_, err = s.Subscribe(context.Background(), "{type ⊑ Flood}", sion.WithQueue(1), sion.WithOverflow(sion.Block),
		sion.WithHandler(func(sion.Delivery) {
			<-release
			delivered.Add(1)
		}))
	require.NoError(t, err)
	subscribed(t, g, "sion.hq.Alarm.Flood", "sion.hq.Alarm.Flood.>")
	plain := connectTo(t, srv)
	for range burst {
		require.NoError(t, plain.Publish("sion.hq.Alarm.Flood", []byte("x")))
	}
	require.NoError(t, plain.Flush())
	require.Eventually(t, func() bool { return g.Stats().InReceived == burst }, 4*wait, time.Millisecond)
	open()
	settled := assert.Eventually(t, func() bool {
		return uint64(delivered.Load())+g.Stats().InDropped == burst
	}, 4*wait, time.Millisecond)
	require.True(t, settled, "delivered %d, dropped %d of %d", delivered.Load(), g.Stats().InDropped, burst)
	assert.Positive(t, g.Stats().InDropped, "the burst outran the queue")
}

// TestInterestChangeLosesNothing: raw messages stream on a subject a
// subscriber wants while the interest widens ({type ⊑ Alarm} joins, so
// the Gateway moves to the covering subjects) and narrows again. Not one
// message is missed: the Gateway subscribes to the new subjects before
// it drains the old ones. (It unsubscribed first, and lost 1–200 in 4
// runs of 6.) Raw messages may come in twice meanwhile (package doc).
func TestInterestChangeLosesNothing(t *testing.T) {
	srv := natsServer(t)
	sw := newSwitch(t, "hq", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: connectTo(t, srv)})
	s, err := sw.Open(context.Background(), sion.SessionConfig{Name: "flood"})
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[int]bool{}
	_, err = s.Subscribe(context.Background(), "{type ⊑ Flood}", sion.WithQueue(1<<16), sion.WithHandler(func(d sion.Delivery) {
		n, _ := strconv.Atoi(string(d.Event.Data))
		mu.Lock()
		seen[n] = true
		mu.Unlock()
	}))
	require.NoError(t, err)
	subscribed(t, g, "sion.hq.Alarm.Flood", "sion.hq.Alarm.Flood.>")

	plain := connectTo(t, srv)
	sent := 0
	// publish sends n messages, then waits until the Gateway has received
	// as many as were sent (no NATS client falls behind: a slow consumer
	// would drop, which is counted, but not what this test is about).
	publish := func(n int) {
		for range n {
			require.NoError(t, plain.Publish("sion.hq.Alarm.Flood", []byte(strconv.Itoa(sent))))
			sent++
		}
		require.NoError(t, plain.Flush())
		require.Eventually(t, func() bool { return g.Stats().InReceived >= uint64(sent) }, wait, 100*time.Microsecond,
			"the Gateway did not receive every message sent: some were lost on the way in")
	}
	// Widen and narrow the interest three times while messages flow;
	// each change happens between two messages of the stream.
	for range 3 {
		wider, err := sw.Open(context.Background(), sion.SessionConfig{Name: "alarms"})
		require.NoError(t, err)
		changed := make(chan struct{})
		go func() {
			defer close(changed)
			if _, err := wider.Subscribe(context.Background(), "{type ⊑ Alarm}"); err == nil {
				assert.NoError(t, g.Sync(context.Background()))
			}
		}()
		for done := false; !done; {
			publish(50)
			select {
			case <-changed:
				done = true
			default:
			}
		}
		publish(500)
		require.NoError(t, wider.Close())
		require.NoError(t, g.Sync(context.Background()))
		publish(500)
	}
	require.NoError(t, plain.Flush())
	missing := func() []int {
		mu.Lock()
		defer mu.Unlock()
		var out []int
		for i := range sent {
			if !seen[i] {
				out = append(out, i)
			}
		}
		return out
	}
	settled := assert.Eventually(t, func() bool { return len(missing()) == 0 }, 4*wait, time.Millisecond)
	m := missing()
	require.True(t, settled, "%d of %d messages missing, from %v", len(m), sent, m[:min(5, len(m))])
	assert.Zero(t, g.Stats().InDropped)
}

// TestInRepeatedHeadersRefused: a message that repeats a CloudEvents
// attribute header (ce-*, the trace context's ce-traceparent and
// ce-tracestate among them), its Content-Type, or a raw message's
// traceparent, is refused and counted, naming nothing as the winner —
// before, the first value was taken silently, so what a subscriber and
// a tracing system downstream saw depended on header order. Several
// plain tracestate headers on a raw message still join into one list,
// as W3C Trace Context asks.
func TestInRepeatedHeadersRefused(t *testing.T) {
	srv := natsServer(t)
	sw := newSwitch(t, "hq", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: connectTo(t, srv)})
	sub := receiver(t, sw, "{type ⊑ Alarm}")
	subscribed(t, g, "sion.hq.Alarm", "sion.hq.Alarm.>")
	plain := connectTo(t, srv)
	send := func(h natsgo.Header, data string) {
		require.NoError(t, plain.PublishMsg(&natsgo.Msg{Subject: "sion.hq.Alarm.Flood", Header: h, Data: []byte(data)}))
	}
	twice := func(h natsgo.Header, name string, second string) natsgo.Header {
		h[name] = append(h[name], second)
		return h
	}
	const other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tests := []struct {
		name   string
		header natsgo.Header
		reason nats.Reason
	}{
		{"ce-traceparent twice", twice(ceHeader("Flood", "r-1", map[string]string{"traceparent": traceParent}), "ce-traceparent", other), nats.ReasonBadCloudEvent},
		{"ce-tracestate twice", twice(ceHeader("Flood", "r-2", map[string]string{"traceparent": traceParent, "tracestate": "rojo=1"}), "ce-tracestate", "congo=2"), nats.ReasonBadCloudEvent},
		{"ce-type twice", twice(ceHeader("Flood", "r-3", nil), "ce-type", "Quake"), nats.ReasonBadCloudEvent},
		{"ce-id twice", twice(ceHeader("Flood", "r-4", nil), "ce-id", "r-4b"), nats.ReasonBadCloudEvent},
		{"ce-specversion twice", twice(ceHeader("Flood", "r-5", nil), "ce-specversion", "1.0"), nats.ReasonBadCloudEvent},
		{"an extension twice", twice(ceHeader("Flood", "r-6", map[string]string{"level": "2"}), "ce-level", "9"), nats.ReasonBadCloudEvent},
		{"Content-Type twice, binary", twice(twice(ceHeader("Flood", "r-7", nil), "Content-Type", "text/plain"), "Content-Type", "application/json"), nats.ReasonBadCloudEvent},
		{"Content-Type twice, raw", natsgo.Header{"Content-Type": {"text/plain", "application/cloudevents+json"}}, nats.ReasonRefused},
		{"traceparent twice, raw", natsgo.Header{"traceparent": {traceParent, other}}, nats.ReasonRefused},
	}
	want := map[nats.Reason]uint64{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			send(tc.header, tc.name)
			want[tc.reason]++
			bad, refused := want[nats.ReasonBadCloudEvent], want[nats.ReasonRefused]
			require.Eventually(t, func() bool {
				st := g.Stats()
				return st.InRefused[nats.ReasonBadCloudEvent] == bad && st.InRefused[nats.ReasonRefused] == refused
			}, wait, time.Millisecond, "refused as %s", tc.reason)
		})
	}
	t.Run("tracestate twice, raw: one list", func(t *testing.T) {
		send(natsgo.Header{"traceparent": {traceParent}, "tracestate": {"rojo=1", "congo=2"}}, "joined")
		got := receive(t, sub, 1)[0]
		assert.Equal(t, "joined", string(got.Data), "nothing refused came through")
		assert.Equal(t, "rojo=1,congo=2", got.TraceState)
	})
}

package nats_test

import (
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/nats"
)

const (
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceState  = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
)

// TestTraceContextThroughNATS: an event's W3C trace context leaves one
// place as ce-traceparent and ce-tracestate headers (binary mode; in
// structured mode when a header cannot carry it) and enters another
// place behind another gateway untouched.
func TestTraceContextThroughNATS(t *testing.T) {
	srv := natsServer(t)
	o := alarms(t)
	east := newSwitch(t, "east", o)
	west := newSwitch(t, "west", o)
	newGateway(t, east, nats.GatewayConfig{Conn: connectTo(t, srv), Place: "shared", Out: &sion.DirectionConfig{}})
	gw := newGateway(t, west, nats.GatewayConfig{Conn: connectTo(t, srv), Place: "shared", In: &sion.DirectionConfig{}})
	sub := receiver(t, west, "{type ⊑ Flood}")
	subscribed(t, gw, "sion.shared.Alarm.Flood", "sion.shared.Alarm.Flood.>")
	copies := subscribe(t, connectTo(t, srv), "sion.shared.>")
	publish := publisher(t, east)

	tests := []struct {
		name, parent, state string
		structured          bool
	}{
		{"traceparent and tracestate", traceParent, traceState, false},
		{"traceparent alone", traceParent, "", false},
		{"none", "", "", false},
		{"tracestate with optional white space: structured mode", traceParent, " rojo=1 ,\tcongo=2", true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			publish(&sion.Event{Type: "Flood", Data: []byte(tc.name), TraceParent: tc.parent, TraceState: tc.state})
			got := receive(t, sub, 1)[0]
			assert.Equal(t, tc.name, string(got.Data))
			assert.Equal(t, tc.parent, got.TraceParent)
			assert.Equal(t, tc.state, got.TraceState)
			require.Eventually(t, func() bool { return copies.len() == i+1 }, wait, time.Millisecond)
			m := copies.all()[i]
			if tc.structured {
				assert.Equal(t, "application/cloudevents+json", m.Header.Get("content-type"))
				assert.Contains(t, string(m.Data), `"traceparent":"`+tc.parent+`"`)
				return
			}
			assert.Equal(t, tc.parent, m.Header.Get("ce-traceparent"))
			assert.Equal(t, tc.state, m.Header.Get("ce-tracestate"))
			_, has := m.Header["ce-traceparent"]
			assert.Equal(t, tc.parent != "", has, "no trace context, no header")
		})
	}
}

// TestTraceContextFromPlainPublishers: a raw message may carry its trace
// context in plain traceparent and tracestate headers (any case; several
// tracestate values join into one list); a bad one, or two traceparent
// headers, is refused (ReasonRefused); a binary CloudEvent carries it in
// ce-traceparent and ce-tracestate.
func TestTraceContextFromPlainPublishers(t *testing.T) {
	srv := natsServer(t)
	sw := newSwitch(t, "hq", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: connectTo(t, srv), In: &sion.DirectionConfig{}})
	sub := receiver(t, sw, "{type ⊑ Flood}")
	subscribed(t, g, "sion.hq.Alarm.Flood", "sion.hq.Alarm.Flood.>")
	pub := connectTo(t, srv)
	send := func(h natsgo.Header, data string) {
		require.NoError(t, pub.PublishMsg(&natsgo.Msg{Subject: "sion.hq.Alarm.Flood", Header: h, Data: []byte(data)}))
	}

	tests := []struct {
		name          string
		header        natsgo.Header
		parent, state string // as delivered
		refused       bool
	}{
		{"raw", natsgo.Header{"traceparent": {traceParent}, "tracestate": {traceState}}, traceParent, traceState, false},
		{"raw, header names in any case", natsgo.Header{"Traceparent": {traceParent}, "TraceState": {traceState}}, traceParent, traceState, false},
		{"raw, two tracestate values", natsgo.Header{"traceparent": {traceParent}, "tracestate": {"rojo=00f067aa0ba902b7", "congo=t61rcWkgMzE"}}, traceParent, traceState, false},
		{"raw, none", nil, "", "", false},
		{"binary CloudEvent", ceHeader("Flood", "f-1", map[string]string{"traceparent": traceParent, "tracestate": traceState}), traceParent, traceState, false},
		{"raw, upper-case traceparent", natsgo.Header{"traceparent": {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}}, "", "", true},
		{"raw, two traceparent headers", natsgo.Header{"traceparent": {traceParent, traceParent}}, "", "", true},
		{"raw, tracestate alone", natsgo.Header{"tracestate": {traceState}}, "", "", true},
		{"binary CloudEvent, all-zero trace-id", ceHeader("Flood", "f-2", map[string]string{"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}), "", "", true},
	}
	refused := uint64(0)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			send(tc.header, tc.name)
			if tc.refused {
				refused++
				require.Eventually(t, func() bool { return g.Stats().InRefused[nats.ReasonRefused] == refused }, wait, time.Millisecond)
				return
			}
			got := receive(t, sub, 1)[0]
			assert.Equal(t, tc.name, string(got.Data))
			assert.Equal(t, tc.parent, got.TraceParent)
			assert.Equal(t, tc.state, got.TraceState)
		})
	}
	send(nil, "marker")
	nothingMore(t, sub, "marker")
}

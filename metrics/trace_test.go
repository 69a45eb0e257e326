package metrics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/metrics"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/tcp"
)

const (
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceState  = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
)

// traceSpanContext is the span context traceParent and traceState
// describe.
func traceSpanContext(t *testing.T, remote bool) trace.SpanContext {
	t.Helper()
	tid, err := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	require.NoError(t, err)
	sid, err := trace.SpanIDFromHex("00f067aa0ba902b7")
	require.NoError(t, err)
	ts, err := trace.ParseTraceState(traceState)
	require.NoError(t, err)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: remote})
}

func TestEventCarrier(t *testing.T) {
	ev := &sion.Event{Type: "Reading"}
	c := metrics.EventCarrier{Event: ev}
	assert.Empty(t, c.Keys())
	tests := []struct {
		key, value string
		wantKeys   []string
	}{
		{"traceparent", traceParent, []string{"traceparent"}},
		{"tracestate", traceState, []string{"traceparent", "tracestate"}},
		{"baggage", "k=v", []string{"traceparent", "tracestate"}}, // no place in an event: dropped
		{"Traceparent", "other", []string{"traceparent", "tracestate"}},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			c.Set(tc.key, tc.value)
			assert.Equal(t, tc.wantKeys, c.Keys())
		})
	}
	assert.Equal(t, traceParent, ev.TraceParent)
	assert.Equal(t, traceState, ev.TraceState)
	assert.Equal(t, traceParent, c.Get("traceparent"))
	assert.Equal(t, traceState, c.Get("tracestate"))
	assert.Empty(t, c.Get("baggage"))
}

// TestInjectExtract: Inject writes ctx's span context as the event's
// traceparent and tracestate, Extract reads it back as a remote span
// context; a context without a span clears the event's; an event without
// a valid one leaves ctx as it is.
func TestInjectExtract(t *testing.T) {
	ctx := trace.ContextWithSpanContext(context.Background(), traceSpanContext(t, false))
	ev := &sion.Event{Type: "Reading", TraceParent: "stale", TraceState: "stale=1"}
	metrics.Inject(ctx, ev)
	assert.Equal(t, traceParent, ev.TraceParent)
	assert.Equal(t, traceState, ev.TraceState)

	got := trace.SpanContextFromContext(metrics.Extract(context.Background(), ev))
	assert.True(t, got.Equal(traceSpanContext(t, true)), "got %v", got)

	metrics.Inject(context.Background(), ev)
	assert.Empty(t, ev.TraceParent, "no span in ctx: no trace context")
	assert.Empty(t, ev.TraceState)

	for _, bad := range []string{"", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "garbage"} {
		ctx := metrics.Extract(context.Background(), &sion.Event{TraceParent: bad})
		assert.False(t, trace.SpanContextFromContext(ctx).IsValid(), "%q", bad)
	}

	// Another propagator: a composite with Baggage writes only what the
	// event holds.
	ev = &sion.Event{Type: "Reading"}
	metrics.Inject(ctx, ev, metrics.WithPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})))
	assert.Equal(t, traceParent, ev.TraceParent)
}

// TestTracerAcrossSharedLink: a producer span started at Publish on one
// switch and a consumer span started at delivery on another, across a
// shared link over TCP, are one trace: the consumer span's parent is the
// producer span. Both carry the messaging attributes.
func TestTracerAcrossSharedLink(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // registered first, runs last
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	tr := metrics.NewTracer(tp)

	pubSw, subSw := traceLinkedSwitches(t)
	ctx := context.Background()
	sub, err := subSw.Open(ctx, sion.SessionConfig{Name: "sub"})
	require.NoError(t, err)
	t.Cleanup(func() { sub.Close() })
	handled := make(chan struct{}, 1)
	_, err = sub.Subscribe(ctx, "{type ⊑ Reading}", sion.WithHandler(func(d sion.Delivery) {
		_, span := tr.StartDeliver(context.Background(), d)
		span.End()
		handled <- struct{}{}
	}))
	require.NoError(t, err)
	pub, err := pubSw.Open(ctx, sion.SessionConfig{Name: "pub"})
	require.NoError(t, err)
	t.Cleanup(func() { pub.Close() })

	ev := &sion.Event{Type: "Reading", Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(1)}}, ContentType: "application/json", Data: []byte(`{"a":1}`)}
	pctx, span := tr.StartPublish(ctx, ev)
	tr.EndPublish(span, pub.Publish(pctx, ev))
	select {
	case <-handled:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "no delivery")
	}

	// The consumer span may end before the producer span does (the
	// delivery can run its handler before Publish returns), and a
	// recorder lists spans in the order they ended: find each by kind.
	spans := rec.Ended()
	require.Len(t, spans, 2)
	byKind := map[trace.SpanKind]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byKind[s.SpanKind()] = s
	}
	producer, consumer := byKind[trace.SpanKindProducer], byKind[trace.SpanKindConsumer]
	require.NotNil(t, producer, "a producer span among %v", spans)
	require.NotNil(t, consumer, "a consumer span among %v", spans)
	assert.Equal(t, "send Reading", producer.Name())
	assert.Equal(t, trace.SpanKindProducer, producer.SpanKind())
	assert.Equal(t, "process Reading", consumer.Name())
	assert.Equal(t, trace.SpanKindConsumer, consumer.SpanKind())
	assert.Equal(t, producer.SpanContext().TraceID(), consumer.SpanContext().TraceID(), "one trace")
	assert.Equal(t, producer.SpanContext().SpanID(), consumer.Parent().SpanID(), "the consumer span is the producer span's child")
	assert.True(t, consumer.Parent().IsRemote())
	attrs := func(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			m[kv.Key] = kv.Value
		}
		return m
	}
	pa, ca := attrs(producer), attrs(consumer)
	assert.Equal(t, "sion", pa["messaging.system"].AsString())
	assert.Equal(t, "send", pa["messaging.operation.type"].AsString())
	assert.Equal(t, "Reading", pa["messaging.destination.name"].AsString())
	assert.Equal(t, int64(7), pa["messaging.message.body.size"].AsInt64())
	assert.Equal(t, "sion", ca["messaging.system"].AsString())
	assert.Equal(t, "process", ca["messaging.operation.type"].AsString())
	assert.Len(t, ca["messaging.message.id"].AsString(), 32)
	assert.Equal(t, "trace", ca["sion.place"].AsString())
}

// TestEndPublishRecordsError: a refused Publish marks the producer span
// as an error.
func TestEndPublishRecordsError(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	tr := metrics.NewTracer(tp)
	ev := &sion.Event{Type: "Reading"}
	_, span := tr.StartPublish(context.Background(), ev)
	tr.EndPublish(span, errors.New("sion: invalid event: no"))
	require.Len(t, rec.Ended(), 1)
	assert.Equal(t, codes.Error, rec.Ended()[0].Status().Code)

	// A nil TracerProvider: spans record nothing, the event stays clean.
	ev = &sion.Event{Type: "Reading"}
	_, span = metrics.NewTracer(nil).StartPublish(context.Background(), ev)
	span.End()
	assert.Empty(t, ev.TraceParent)
}

// traceLinkedSwitches returns two switches of one place, "trace", the
// second linked to the first over TCP on 127.0.0.1.
func traceLinkedSwitches(t *testing.T) (*sion.Switch, *sion.Switch) {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{{Name: "Reading", Attributes: []ontology.Attribute{{Name: "n", Kind: ontology.KindInt}}}})
	require.NoError(t, err)
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "trace", Ontology: o})
	require.NoError(t, err)
	var sws [2]*sion.Switch
	for i, name := range []string{"a", "b"} {
		sws[i], err = sion.NewSwitch(sion.SwitchConfig{Name: name, Place: place})
		require.NoError(t, err)
		sw := sws[i]
		t.Cleanup(func() { require.NoError(t, sw.Close()) })
	}
	tr, err := tcp.New(tcp.Config{})
	require.NoError(t, err)
	l, err := tr.Listen("127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- sws[0].Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-served)
	})
	link, err := sws[1].Link(context.Background(), tr, l.Addr().String(), sion.LinkConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, link.Close()) })
	return sws[0], sws[1]
}

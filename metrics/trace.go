package metrics

// This file is the OpenTelemetry tracing side of the module: an event's
// W3C Trace Context (sion.Event.TraceParent and TraceState) as an
// OpenTelemetry TextMapCarrier, Inject and Extract over it, and a Tracer
// that starts a producer span at Publish and a consumer span at delivery.
// Not S1–S4: "Around the library" in DESIGN.md. sion itself carries the
// two fields untouched across links, gateways, remote sessions, look-in
// and the adapters; only this package interprets them.

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sion-go/sion"
)

// The W3C Trace Context keys an EventCarrier holds
// (https://www.w3.org/TR/trace-context/, Level 1).
const (
	// TraceParentKey is the key of sion.Event.TraceParent.
	TraceParentKey = "traceparent"
	// TraceStateKey is the key of sion.Event.TraceState.
	TraceStateKey = "tracestate"
)

// EventCarrier is an event's W3C trace context as an OpenTelemetry
// propagation.TextMapCarrier: the key "traceparent" is
// Event.TraceParent, "tracestate" Event.TraceState. Keys are matched as
// they are (OpenTelemetry's propagators use these lower-case names).
// Other keys — "baggage", say — have no place in a sion event: Set drops
// them and Get returns "". Set modifies the event, so use it on an event
// you are about to publish, never on a delivered one (which every
// subscription shares). An EventCarrier is as safe for concurrent use as
// its event: reading from several goroutines is; Set is not.
type EventCarrier struct {
	*sion.Event
}

var _ propagation.TextMapCarrier = EventCarrier{}

// Get returns the value of key: TraceParent for "traceparent",
// TraceState for "tracestate", "" for any other key.
func (c EventCarrier) Get(key string) string {
	switch key {
	case TraceParentKey:
		return c.TraceParent
	case TraceStateKey:
		return c.TraceState
	}
	return ""
}

// Set sets TraceParent for "traceparent" and TraceState for
// "tracestate"; it ignores any other key.
func (c EventCarrier) Set(key, value string) {
	switch key {
	case TraceParentKey:
		c.TraceParent = value
	case TraceStateKey:
		c.TraceState = value
	}
}

// Keys returns the keys whose fields are not empty, "traceparent" before
// "tracestate".
func (c EventCarrier) Keys() []string {
	keys := make([]string, 0, 2)
	if c.TraceParent != "" {
		keys = append(keys, TraceParentKey)
	}
	if c.TraceState != "" {
		keys = append(keys, TraceStateKey)
	}
	return keys
}

// TraceOption configures Inject, Extract and NewTracer.
type TraceOption func(*traceConfig)

type traceConfig struct {
	prop propagation.TextMapPropagator
}

// WithPropagator makes Inject, Extract and a Tracer use p instead of
// propagation.TraceContext{}. A sion event holds only traceparent and
// tracestate, so a propagator that writes other keys (Baggage) loses
// them; pass otel.GetTextMapPropagator() to use the global one.
func WithPropagator(p propagation.TextMapPropagator) TraceOption {
	return func(c *traceConfig) {
		if p != nil {
			c.prop = p
		}
	}
}

func newTraceConfig(opts []TraceOption) traceConfig {
	c := traceConfig{prop: propagation.TraceContext{}}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Inject sets ev's trace context to the span context of ctx, through
// propagation.TraceContext{} (or WithPropagator's): ev.TraceParent and
// ev.TraceState are cleared first, so an event whose ctx has no valid
// span context leaves without any. Call it on the event before
// Session.Publish; Publish copies the event, so ev may be reused after.
// The global propagator is not the default because OpenTelemetry's
// global is a no-op until it is set.
func Inject(ctx context.Context, ev *sion.Event, opts ...TraceOption) {
	c := newTraceConfig(opts)
	ev.TraceParent, ev.TraceState = "", ""
	c.prop.Inject(ctx, EventCarrier{ev})
}

// Extract returns ctx with the remote span context ev carries, through
// propagation.TraceContext{} (or WithPropagator's): the parent for a span
// that processes a delivered event. An event without a valid trace
// context gives ctx unchanged. It does not modify ev, so it is safe on a
// delivered event shared by several subscriptions.
func Extract(ctx context.Context, ev *sion.Event, opts ...TraceOption) context.Context {
	c := newTraceConfig(opts)
	return c.prop.Extract(ctx, EventCarrier{ev})
}

// Semantic-convention attributes of the spans a Tracer starts
// (OpenTelemetry messaging conventions).
const (
	attrSystem      = attribute.Key("messaging.system")
	attrOperation   = attribute.Key("messaging.operation.type")
	attrOpName      = attribute.Key("messaging.operation.name")
	attrDestination = attribute.Key("messaging.destination.name")
	attrMessageID   = attribute.Key("messaging.message.id")
	attrBodySize    = attribute.Key("messaging.message.body.size")
	attrPlace       = attribute.Key("sion.place")
)

// MessagingSystem is the value of the messaging.system attribute of a
// Tracer's spans.
const MessagingSystem = "sion"

// Tracer starts OpenTelemetry spans for sion's publish → deliver path: a
// producer span around Publish whose context the event carries (Inject),
// and a consumer span for each delivery whose parent is that context
// (Extract), so the delivery joins the publisher's trace across shared
// links, gateways and remote sessions. Spans follow the messaging
// semantic conventions: names "send <event type>" and "process <event
// type>", messaging.system "sion", messaging.operation.type "send" or
// "process", messaging.destination.name the event type,
// messaging.message.id the event ID (known at delivery), and
// messaging.message.body.size. A Tracer is safe for concurrent use.
type Tracer struct {
	tracer trace.Tracer
	cfg    traceConfig
}

// TracerName is the instrumentation scope name a Tracer asks its
// TracerProvider for.
const TracerName = "github.com/sion-go/sion/metrics"

// NewTracer returns a Tracer whose spans come from tp — pass
// otel.GetTracerProvider() for the global one; nil gives spans that
// record nothing (noop.NewTracerProvider) — and whose propagator is
// propagation.TraceContext{} unless WithPropagator says otherwise.
func NewTracer(tp trace.TracerProvider, opts ...TraceOption) *Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &Tracer{tracer: tp.Tracer(TracerName), cfg: newTraceConfig(opts)}
}

// StartPublish starts a producer span, a child of ctx's span if any,
// named "send <ev.Type>", and injects its context into ev (replacing ev's
// trace context). Publish ev with the returned context and End the span
// when Publish returns, recording its error:
//
//	ctx, span := tr.StartPublish(ctx, ev)
//	err := s.Publish(ctx, ev)
//	tr.EndPublish(span, err)
func (t *Tracer) StartPublish(ctx context.Context, ev *sion.Event) (context.Context, trace.Span) {
	ctx, span := t.tracer.Start(ctx, "send "+ev.Type, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attrSystem.String(MessagingSystem), attrOperation.String("send"), attrOpName.String("publish"),
			attrDestination.String(ev.Type), attrBodySize.Int(len(ev.Data)),
		))
	ev.TraceParent, ev.TraceState = "", ""
	t.cfg.prop.Inject(ctx, EventCarrier{ev})
	return ctx, span
}

// EndPublish records err (nil: none) on a span StartPublish started and
// ends it.
func (t *Tracer) EndPublish(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// StartDeliver starts a consumer span named "process <event type>" for
// d, whose parent is the span context d.Event carries (Extract) or, when
// it carries none, ctx's span. End the span when the delivery has been
// handled. It does not modify d.Event.
func (t *Tracer) StartDeliver(ctx context.Context, d sion.Delivery) (context.Context, trace.Span) {
	ev := d.Event
	ctx = t.cfg.prop.Extract(ctx, EventCarrier{ev})
	return t.tracer.Start(ctx, "process "+ev.Type, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attrSystem.String(MessagingSystem), attrOperation.String("process"), attrOpName.String("deliver"),
			attrDestination.String(ev.Type), attrMessageID.String(ev.ID.String()),
			attrBodySize.Int(len(ev.Data)), attrPlace.String(ev.Control.Place),
		))
}

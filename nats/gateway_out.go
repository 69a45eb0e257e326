package nats

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	natsgo "github.com/nats-io/nats.go"

	"github.com/sion-go/sion"
)

// The CloudEvents NATS protocol binding's names: binary mode carries each
// context attribute in a header "ce-<name>" and datacontenttype in
// content-type; structured mode sends the JSON event with content-type
// application/cloudevents+json.
const (
	headerPrefix    = "ce-"
	contentType     = "content-type"
	structuredMedia = "application/cloudevents+json"
	batchMedia      = "application/cloudevents-batch+json" // refused: one event per message
)

// The W3C Trace Context headers of a raw message (a CloudEvent carries
// its trace context as ce-traceparent and ce-tracestate, the Distributed
// Tracing extension).
const (
	traceParentHeader = "traceparent"
	traceStateHeader  = "tracestate"
)

// send publishes one event of the subject place to NATS, once per path of
// its type (the out subscription's handler). Events published on the
// subject switch itself — those that came in from NATS — are not sent.
func (g *Gateway) send(d sion.Delivery) {
	ev := d.Event
	if ev.Control.PlaceHops == 0 {
		return // it came from NATS (or another session on the subject switch)
	}
	t, ok := g.ts.o.Lookup(ev.Type)
	if !ok {
		g.outFailed.Add(1)
		return
	}
	subjects := g.ts.subjects(t.ID)
	msg, structured, err := g.encode(ev)
	if err != nil || len(subjects) == 0 {
		g.outFailed.Add(1)
		g.log.Warn("nats: event not sent", "gateway", g.cfg.Name, "event", ev.ID, "type", ev.Type, "err", err)
		return
	}
	for _, subj := range subjects {
		msg.Subject = subj
		if err := g.nc.PublishMsg(msg); err != nil {
			g.outFailed.Add(1)
			g.log.Warn("nats: publish", "gateway", g.cfg.Name, "event", ev.ID, "subject", subj, "err", err)
			return
		}
		g.outMessages.Add(1)
	}
	g.outEvents.Add(1)
	if structured {
		g.outStructured.Add(1)
	}
}

// encode returns ev as a NATS message without its subject: a CloudEvent
// in binary mode, or in structured mode when a header cannot carry one of
// its values unchanged (structured then reports true).
func (g *Gateway) encode(ev *sion.Event) (*natsgo.Msg, bool, error) {
	ce, err := g.codec.ToCloudEvent(ev)
	if err != nil {
		return nil, false, err
	}
	if h, ok := binaryHeader(ce); ok {
		return &natsgo.Msg{Header: h, Data: ce.Data()}, false, nil
	}
	data, err := json.Marshal(ce)
	if err != nil {
		return nil, false, fmt.Errorf("nats: structured CloudEvent: %w", err)
	}
	return &natsgo.Msg{Header: natsgo.Header{contentType: {structuredMedia}}, Data: data}, true, nil
}

// binaryHeader returns the headers of ce in binary mode, or false when a
// value would not arrive unchanged.
func binaryHeader(ce event.Event) (natsgo.Header, bool) {
	h := natsgo.Header{}
	ok := true
	set := func(name, v string) {
		if !headerSafe(v) {
			ok = false
		}
		h[name] = []string{v}
	}
	set(headerPrefix+"specversion", ce.SpecVersion())
	set(headerPrefix+"id", ce.ID())
	set(headerPrefix+"source", ce.Source())
	set(headerPrefix+"type", ce.Type())
	if s := ce.Subject(); s != "" {
		set(headerPrefix+"subject", s)
	}
	if t := ce.Time(); !t.IsZero() {
		set(headerPrefix+"time", types.FormatTime(t))
	}
	if s := ce.DataSchema(); s != "" {
		set(headerPrefix+"dataschema", s)
	}
	if ct := ce.DataContentType(); ct != "" {
		set(contentType, ct)
	}
	for name, v := range ce.Extensions() {
		s, err := types.Format(v)
		if err != nil {
			return nil, false
		}
		set(headerPrefix+name, s)
	}
	return h, ok
}

// headerSafe reports whether a NATS header carries v unchanged: nats.go
// trims white space around a value and turns CR and LF into spaces, and
// other control characters are not text.
func headerSafe(v string) bool {
	if v != strings.TrimSpace(v) {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

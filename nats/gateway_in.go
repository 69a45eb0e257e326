package nats

import (
	"errors"
	"fmt"
	"maps"
	"mime"
	"slices"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	natsgo "github.com/nats-io/nats.go"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
)

// receive is the handler of every NATS subscription: it decodes the
// message and publishes the event into the subject switch.
func (g *Gateway) receive(m *natsgo.Msg) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.handlers.Add(1)
	g.mu.Unlock()
	defer g.handlers.Done()
	g.inReceived.Add(1)
	ev, r, err := g.decode(m)
	if err != nil {
		g.refuse(m, r, err)
		return
	}
	if err := g.sess.Publish(g.life, &ev); err != nil {
		if g.life.Err() == nil {
			g.refuse(m, ReasonRefused, err)
		}
		return
	}
	g.inPublished.Add(1)
}

// decode returns the event a NATS message carries (see the package
// section "The S/x-GW": binary or structured CloudEvent, or raw).
func (g *Gateway) decode(m *natsgo.Msg) (sion.Event, Reason, error) {
	var ct string
	var spec, typed bool
	var parents, states []string // raw messages' W3C trace context
	for k, vs := range m.Header {
		switch {
		case len(vs) == 0:
		case strings.EqualFold(k, contentType):
			if typed || len(vs) > 1 {
				// It chooses the mode and the payload's media type:
				// which one the publisher meant is anybody's guess.
				r := ReasonRefused
				if hasCloudEventsHeader(m.Header) {
					r = ReasonBadCloudEvent
				}
				return sion.Event{}, r, fmt.Errorf("%w: nats: message on %q has %d Content-Type headers; one says what the payload is", sion.ErrInvalidEvent, m.Subject, contentTypeCount(m.Header))
			}
			ct, typed = vs[0], true
		case strings.EqualFold(k, headerPrefix+"specversion"):
			spec = true
		case strings.EqualFold(k, traceParentHeader):
			parents = append(parents, vs...)
		case strings.EqualFold(k, traceStateHeader):
			states = append(states, vs...)
		}
	}
	if spec {
		ce, err := binaryEvent(m)
		if err != nil {
			return sion.Event{}, ReasonBadCloudEvent, err
		}
		return g.fromCloudEvent(ce)
	}
	switch media, _, err := mime.ParseMediaType(ct); {
	case err != nil:
	case media == structuredMedia:
		// As cloudevents.Handler reads it: an extension that is a JSON
		// number the SDK would change (5.7 read as 5) is refused.
		ev, err := g.codec.FromStructured(m.Data)
		return ev, reasonOf(err), err
	case media == batchMedia:
		return sion.Event{}, ReasonBadCloudEvent, fmt.Errorf("nats: %s on %q: batch mode is not supported; publish one CloudEvent per message", batchMedia, m.Subject)
	}
	t := g.types[m.Subject]
	if t == nil {
		var under bool
		var err error
		t, under, err = g.ts.typeOf(m.Subject)
		switch {
		case err != nil:
			return sion.Event{}, ReasonNoType, err
		case !under:
			return sion.Event{}, ReasonNoType, fmt.Errorf("nats: subject %q names no event type: it is outside %s.> and not in GatewayConfig.Types", m.Subject, g.ts.base)
		}
	}
	ev := sion.Event{Type: t.Name, ContentType: ct}
	if len(m.Data) > 0 {
		ev.Data = m.Data
	}
	if len(parents) > 1 {
		return sion.Event{}, ReasonRefused, fmt.Errorf("%w: nats: raw message on %q has %d traceparent headers; W3C Trace Context allows one", sion.ErrInvalidEvent, m.Subject, len(parents))
	}
	if len(parents) == 1 {
		ev.TraceParent = parents[0]
	}
	// Several tracestate values combine into one list, in order (RFC 7230
	// section 3.2.2, as W3C Trace Context asks); Publish checks the result.
	ev.TraceState = strings.Join(states, ",")
	return ev, "", nil
}

func (g *Gateway) fromCloudEvent(ce event.Event) (sion.Event, Reason, error) {
	ev, err := g.codec.FromCloudEvent(ce)
	return ev, reasonOf(err), err
}

// reasonOf is the Reason a message is refused for when the Codec
// returned err: "" for nil.
func reasonOf(err error) Reason {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, sion.ErrUnknownEventType):
		return ReasonUnknownType
	default:
		return ReasonBadCloudEvent
	}
}

// binaryEvent reads a binary-mode CloudEvent from m's headers (names in
// any case) and data. A header of the event — ce-* or Content-Type —
// that appears more than once, as two values of one name or under two
// spellings of it, is refused naming it: a CloudEvent has one value per
// attribute, and taking the first or the last would let the order of
// headers decide what the event is (ce-traceparent: which trace).
func binaryEvent(m *natsgo.Msg) (event.Event, error) {
	var ce event.Event
	attrs := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(m.Header)) { // the same error every time
		vs := m.Header[k]
		if len(vs) == 0 {
			continue
		}
		name := contentType
		if !strings.EqualFold(k, contentType) {
			if !hasPrefixFold(k, headerPrefix) {
				continue // a header of the message, not of the event
			}
			name = strings.ToLower(k[len(headerPrefix):])
		}
		if _, dup := attrs[name]; dup || len(vs) > 1 {
			return ce, fmt.Errorf("%w: nats: CloudEvents header %q appears more than once; a CloudEvent has one value per attribute", sion.ErrInvalidEvent, k)
		}
		attrs[name] = vs[0]
	}
	switch v := attrs["specversion"]; v {
	case event.CloudEventsVersionV1, event.CloudEventsVersionV03:
		ce = event.New(v)
	default:
		return ce, fmt.Errorf("%w: nats: ce-specversion %q: want %s or %s", sion.ErrInvalidEvent, v, event.CloudEventsVersionV1, event.CloudEventsVersionV03)
	}
	for name, v := range attrs {
		switch name {
		case "specversion":
		case "id":
			ce.SetID(v)
		case "source":
			ce.SetSource(v)
		case "type":
			ce.SetType(v)
		case "subject":
			ce.SetSubject(v)
		case "dataschema":
			ce.SetDataSchema(v)
		case contentType:
			ce.SetDataContentType(v)
		case "time":
			t, err := types.ParseTime(v)
			if err == nil && !ontology.TimeInRange(t) {
				// 0001-01-01T00:00:00Z would read as no time at all.
				err = errors.New("outside 1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z, the times sion holds")
			}
			if err != nil {
				return ce, fmt.Errorf("%w: nats: ce-time %q: %v", sion.ErrInvalidEvent, v, err)
			}
			ce.SetTime(t)
		default:
			ce.SetExtension(name, v)
		}
	}
	if len(m.Data) > 0 {
		ce.DataEncoded = m.Data
	}
	return ce, nil
}

// hasCloudEventsHeader reports whether h has a ce-* header, in any case.
func hasCloudEventsHeader(h natsgo.Header) bool {
	for k := range h {
		if hasPrefixFold(k, headerPrefix) {
			return true
		}
	}
	return false
}

// contentTypeCount is the number of Content-Type values in h, names in
// any case.
func contentTypeCount(h natsgo.Header) int {
	n := 0
	for k, vs := range h {
		if strings.EqualFold(k, contentType) {
			n += len(vs)
		}
	}
	return n
}

// hasPrefixFold reports whether s begins with prefix, ASCII case
// insensitively.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

package cloudevents

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/sion-go/sion"
)

// DefaultMaxBodyBytes is the largest request body a Handler reads when
// its MaxBodyBytes is 0: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// Handler is an http.Handler that publishes the CloudEvent of each POST
// request into a sion session (S1: the HTTP producer is one more entity
// publishing through a session). It reads binary mode (ce-* headers, the
// body as data) and structured mode (Content-Type
// application/cloudevents+json); batch mode is refused.
//
// Responses: 204 No Content once Publish returned nil — the event was
// delivered, or was a duplicate by ID (see sion.Event.ID: a retried
// CloudEvent keeps its source and id, so it is delivered once — while the
// switch remembers the ID: among the last 65,536–131,072 IDs it saw, so a
// retry that comes after that many other events is delivered again); 400 Bad
// Request with a text body naming what was wrong (not a CloudEvent, a
// type or extension the Codec refuses, an event Publish refuses, a
// Content-Type or, in binary mode, a ce-* header sent more than once —
// ce-traceparent and ce-tracestate among them: it is refused, naming the
// header, rather than resolved by taking one of its values); 405 for
// a method other than POST; 413 for a body over MaxBodyBytes; 415 for
// batch mode; 503 when the session is closed or the request's context
// ended; 500 for anything else. A Handler is safe for concurrent use; set
// its fields before serving.
type Handler struct {
	// Codec converts each CloudEvent; required.
	Codec *Codec
	// Session publishes each event; required.
	Session *sion.Session
	// MaxBodyBytes caps the request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// ServeHTTP reads one CloudEvent from r and publishes it (see Handler).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "cloudevents: only POST carries a CloudEvent", http.StatusMethodNotAllowed)
		return
	}
	limit := h.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			http.Error(w, fmt.Sprintf("cloudevents: the body is over %d bytes", limit), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "cloudevents: reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	// The media type as the SDK reads it (format.Lookup): up to the first
	// ';', trimmed, lower-cased — not mime.ParseMediaType, which gives ""
	// for parameters it cannot parse while the SDK still reads the type.
	if vs := r.Header.Values("Content-Type"); len(vs) > 1 {
		http.Error(w, repeatedHeader("content-type", len(vs)), http.StatusBadRequest)
		return
	}
	media, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	media = strings.ToLower(strings.TrimSpace(media))
	switch media {
	case "application/cloudevents-batch+json":
		http.Error(w, "cloudevents: batch mode is not supported; send one event per request", http.StatusUnsupportedMediaType)
		return
	case "application/cloudevents+json":
		ev, err := h.Codec.FromStructured(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.publish(w, r, &ev)
		return
	}
	if name, n := repeatedCEHeader(r.Header); n > 1 {
		http.Error(w, repeatedHeader(name, n), http.StatusBadRequest)
		return
	}
	r = r.Clone(r.Context()) // its own headers, decoded (HTTP binding 3.1.3.2)
	r.Body = io.NopCloser(bytes.NewReader(body))
	ceHeaders(r.Header, percentDecode)
	ce, err := cehttp.NewEventFromHTTPRequest(r)
	if err != nil {
		http.Error(w, "cloudevents: not a CloudEvent: "+strings.TrimSpace(err.Error()), http.StatusBadRequest)
		return
	}
	if v := r.Header.Get("Ce-Time"); v != "" && ce.Time().IsZero() {
		// The SDK reads 0001-01-01T00:00:00Z as no time at all.
		http.Error(w, fmt.Sprintf("cloudevents: ce-time %q is outside 1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z, the times sion holds", v), http.StatusBadRequest)
		return
	}
	ev, err := h.Codec.FromCloudEvent(*ce)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.publish(w, r, &ev)
}

// repeatedCEHeader returns the first, by name, of h's ce-* headers that
// has more than one value, lower-cased, and its number of values; n is 0
// when there is none. (net/http joins the lines of one name in any case
// into one key of h.)
func repeatedCEHeader(h http.Header) (name string, n int) {
	for _, k := range slices.Sorted(maps.Keys(h)) {
		if vs := h[k]; len(vs) > 1 && len(k) > 3 && strings.EqualFold(k[:3], "ce-") {
			return strings.ToLower(k), len(vs)
		}
	}
	return "", 0
}

// repeatedHeader is the text of a 400 for a header sent n times.
func repeatedHeader(name string, n int) string {
	return fmt.Sprintf("cloudevents: header %q appears more than once (%d times); a CloudEvent has one value per attribute, send it once", name, n)
}

// publish publishes ev and answers r: 204 once Publish returned nil.
func (h *Handler) publish(w http.ResponseWriter, r *http.Request, ev *sion.Event) {
	switch err := h.Session.Publish(r.Context(), ev); {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, sion.ErrInvalidEvent), errors.Is(err, sion.ErrUnknownEventType):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, sion.ErrClosed), r.Context().Err() != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// FromStructured decodes body, one CloudEvent in the structured JSON
// format (application/cloudevents+json), and returns it as a sion event,
// as FromCloudEvent does. Like Handler it refuses an extension that is a
// JSON number with a fraction, an exponent or beyond 32 bits, which the
// SDK's reader would change silently (see the package documentation).
// Errors: body is not such an event, or has such a number (wrapping
// sion.ErrInvalidEvent); and FromCloudEvent's. It is what a transport
// other than HTTP uses for structured mode (the nats module's Gateway).
//
// A payload whose datacontenttype is JSON — a "+json" type too
// (application/geo+json) — may be written inline as its JSON value (the
// JSON event format, 3.1); its bytes are the payload, as written. (The
// SDK's reader takes the value of a "+json" type for a string and
// refuses an object.)
func (c *Codec) FromStructured(body []byte) (sion.Event, error) {
	if err := checkStructured(body); err != nil {
		return sion.Event{}, fmt.Errorf("%w: %w", sion.ErrInvalidEvent, err)
	}
	body, inlined := inlineJSONData(body)
	var ce event.Event
	if err := json.Unmarshal(body, &ce); err != nil {
		return sion.Event{}, fmt.Errorf("%w: cloudevents: not a CloudEvent (structured mode): %s", sion.ErrInvalidEvent, strings.TrimSpace(err.Error()))
	}
	if inlined != nil {
		ce.DataEncoded = inlined
	}
	return c.FromCloudEvent(ce)
}

// inlineJSONData takes out of a structured event's body a "data" member
// that is a JSON value other than a string whose datacontenttype is
// JSON, and returns the body without it and the value's bytes; otherwise
// body as it is and nil. The SDK then reads the rest, which it reads
// right.
func inlineJSONData(body []byte) ([]byte, []byte) {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return body, nil // the SDK says what is wrong
	}
	data := bytes.TrimSpace(members["data"])
	if len(data) == 0 || data[0] == '"' || bytes.Equal(data, []byte("null")) {
		return body, nil
	}
	var ct string
	if json.Unmarshal(members["datacontenttype"], &ct) != nil {
		return body, nil
	}
	media, _, _ := strings.Cut(ct, ";")
	media = strings.ToLower(strings.TrimSpace(media))
	if media != "application/json" && media != "text/json" && !strings.HasSuffix(media, "+json") {
		return body, nil
	}
	delete(members, "data")
	rest, err := json.Marshal(members)
	if err != nil {
		return body, nil
	}
	return rest, data
}

// checkStructured refuses a structured-mode event that the SDK would
// change: an extension that is a JSON number with a fraction or an
// exponent, or beyond 32 bits (see the package documentation: the SDK
// cuts the first silently), and the time 0001-01-01T00:00:00Z (the SDK
// reads it as no time). Other context attributes and data are left to
// the SDK.
func checkStructured(body []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		return nil // not an object: the SDK says what is wrong
	}
	for name, raw := range members {
		if name == "time" {
			// The SDK reads 0001-01-01T00:00:00Z as no time at all.
			var v string
			if json.Unmarshal(raw, &v) == nil {
				if t, err := time.Parse(time.RFC3339Nano, v); err == nil && t.IsZero() {
					return fmt.Errorf("cloudevents: time %q is outside 1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z, the times sion holds", v)
				}
			}
			continue
		}
		if contextNames[name] || name == "data_base64" || len(raw) == 0 {
			continue
		}
		if c := raw[0]; c != '-' && (c < '0' || c > '9') {
			continue
		}
		if n, err := strconv.ParseInt(string(raw), 10, 64); err != nil || n < math.MinInt32 || n > math.MaxInt32 {
			return fmt.Errorf("cloudevents: extension %q is the JSON number %s, which CloudEvents reads as a 32-bit integer: send it as a string (%q)", name, raw, string(raw))
		}
	}
	return nil
}

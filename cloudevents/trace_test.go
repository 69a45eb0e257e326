package cloudevents_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/ontology"
)

const (
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceState  = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
)

// TestTraceContextRoundTrip: an event's W3C trace context goes out as
// the Distributed Tracing extension (ce-traceparent, ce-tracestate in
// binary mode; traceparent, tracestate members in structured mode),
// comes back in through a Handler over HTTP into a switch untouched, and
// is never an attribute; an event without one has neither extension.
func TestTraceContextRoundTrip(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	rig := newHandlerRig(t, c, `{type ⊑ reading}`, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tests := []struct {
		name          string
		parent, state string
	}{
		{"traceparent and tracestate", traceParent, traceState},
		{"traceparent alone", traceParent, ""},
		{"none", "", ""},
	}
	n := 0
	for _, mode := range []string{"binary", "structured"} {
		for _, tc := range tests {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				n++
				ev := &sion.Event{ID: someID(byte(n)), Type: "reading", Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(int64(n))}},
					TraceParent: tc.parent, TraceState: tc.state}
				ce, err := c.ToCloudEvent(ev)
				require.NoError(t, err)
				assert.Equal(t, tc.parent, ext(ce, extensions.TraceParentExtension))
				assert.Equal(t, tc.state, ext(ce, extensions.TraceStateExtension))

				var req *http.Request
				if mode == "binary" {
					req, err = cehttp.NewHTTPRequestFromEvent(ctx, rig.srv.URL, ce)
					require.NoError(t, err)
					assert.Equal(t, tc.parent, req.Header.Get("ce-traceparent"))
					assert.Equal(t, tc.state, req.Header.Get("ce-tracestate"))
				} else {
					b, err := json.Marshal(ce)
					require.NoError(t, err)
					var members map[string]any
					require.NoError(t, json.Unmarshal(b, &members))
					if tc.parent != "" {
						assert.Equal(t, tc.parent, members["traceparent"])
					} else {
						assert.NotContains(t, members, "traceparent")
					}
					req = structured(t, rig.srv.URL, b)
				}
				status, body := rig.post(t, req)
				require.Equal(t, http.StatusNoContent, status, body)
				d, err := rig.sub.Next(ctx)
				require.NoError(t, err)
				assert.Equal(t, ev.ID, d.Event.ID)
				assert.Equal(t, tc.parent, d.Event.TraceParent)
				assert.Equal(t, tc.state, d.Event.TraceState)
				assert.Equal(t, ev.Attrs, d.Event.Attrs, "the trace context is no attribute")
			})
		}
	}
}

// TestTraceContextRefused: a trace context extension that is not a
// String is refused on the way in; a bad one is refused by Publish
// (through the Handler, 400 naming it); no attribute may take the
// extensions' names.
func TestTraceContextRefused(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	ce := event.New()
	ce.SetID("a")
	ce.SetSource("/s")
	ce.SetType(prefix + "reading")
	ce.SetExtension("traceparent", 7)
	_, err := c.FromCloudEvent(ce)
	require.ErrorIs(t, err, sion.ErrInvalidEvent)
	assert.Contains(t, err.Error(), `extension "traceparent" (W3C trace context) is not a String`)

	rig := newHandlerRig(t, c, `{type ⊑ reading}`, 0)
	status, body := rig.post(t, structured(t, rig.srv.URL, []byte(`{"specversion": "1.0", "id": "a", "source": "/s", "type": "org.example.sion.reading", "traceparent": "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}`)))
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "traceparent")
	assert.Contains(t, body, "upper-case")

	_, err = cloudevents.NewCodec(cloudevents.Config{Ontology: readingsOntology(t), Extensions: map[string]string{"label": "tracestate"}})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "Distributed Tracing extension")
}

// ext returns ce's extension name as a string, "" when it has none.
func ext(ce event.Event, name string) string {
	v, ok := ce.Extensions()[name]
	if !ok {
		return ""
	}
	s, _ := v.(string)
	return s
}

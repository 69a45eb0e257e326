package cloudevents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
)

// handlerRig is a Handler on a loopback HTTP server, publishing into a
// switch of the ontology o, and a subscriber of every hazard there.
type handlerRig struct {
	srv  *httptest.Server
	sw   *sion.Switch
	pub  *sion.Session
	sub  *sion.Subscription
	code *cloudevents.Codec
}

func newHandlerRig(t *testing.T, c *cloudevents.Codec, filter string, maxBody int64) *handlerRig {
	t.Helper()
	sw, pub, sub := switchWith(t, c, "edge", filter)
	srv := httptest.NewServer(&cloudevents.Handler{Codec: c, Session: pub, MaxBodyBytes: maxBody})
	t.Cleanup(srv.Close)
	return &handlerRig{srv: srv, sw: sw, pub: pub, sub: sub, code: c}
}

// post sends req's body to the rig and returns the status and body.
func (r *handlerRig) post(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := r.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func structured(t *testing.T, url string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/cloudevents+json; charset=utf-8")
	return req
}

// TestHandlerUSGSWeek posts every event of the USGS week to the handler
// in binary mode, then again in structured mode: the subscriber receives
// each once, equal to what was sent, and the second round is 2,389
// duplicates by ID (a retried CloudEvent is delivered once).
func TestHandlerUSGSWeek(t *testing.T) {
	o, week, _, _ := publishedWeek(t)
	c, err := cloudevents.NewCodec(cloudevents.Config{Ontology: o, TypePrefix: "gov.usgs.", TimeAttribute: "time", SubjectAttribute: "place"})
	require.NoError(t, err)
	rig := newHandlerRig(t, c, `{type ⊑ hazard}`, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, ev := range week {
		ce, err := c.ToCloudEvent(ev)
		require.NoError(t, err)
		req, err := cehttp.NewHTTPRequestFromEvent(ctx, rig.srv.URL, ce)
		require.NoError(t, err)
		status, body := rig.post(t, req)
		require.Equal(t, http.StatusNoContent, status, body)
	}
	for i, ev := range week {
		d, err := rig.sub.Next(ctx)
		require.NoError(t, err)
		ev := *ev
		ev.Control = sion.Control{} // the receiving switch sets its own
		got := *d.Event
		got.Control = sion.Control{}
		require.Equal(t, ev, got, "event %d", i)
	}
	for _, ev := range week {
		ce, err := c.ToCloudEvent(ev)
		require.NoError(t, err)
		b, err := json.Marshal(ce)
		require.NoError(t, err)
		status, body := rig.post(t, structured(t, rig.srv.URL, b))
		require.Equal(t, http.StatusNoContent, status, body)
	}
	assert.Equal(t, uint64(usgsWeekEvents), rig.sw.Stats().Duplicates)
	assert.Equal(t, uint64(usgsWeekEvents), rig.sw.Stats().Deliveries)
}

// TestHandlerRefuses: each bad request gets its status and a body that
// names what was wrong, and nothing is published.
func TestHandlerRefuses(t *testing.T) {
	c := newCodec(t, cloudevents.Config{TypePrefix: "org.example."})
	rig := newHandlerRig(t, c, `{type ⊑ *}`, 512)
	good := `{"specversion":"1.0","id":"r1","source":"/test","type":"org.example.reading"`
	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		says   string
	}{
		{"GET", func() *http.Request {
			req, _ := http.NewRequest(http.MethodGet, rig.srv.URL, nil)
			return req
		}, http.StatusMethodNotAllowed, "only POST"},
		{"over the body limit", func() *http.Request {
			return structured(t, rig.srv.URL, []byte(good+`,"s":"`+strings.Repeat("x", 600)+`"}`))
		}, http.StatusRequestEntityTooLarge, "over 512 bytes"},
		{"batch mode", func() *http.Request {
			req := structured(t, rig.srv.URL, []byte("["+good+"}]"))
			req.Header.Set("Content-Type", "application/cloudevents-batch+json")
			return req
		}, http.StatusUnsupportedMediaType, "batch mode"},
		{"not a CloudEvent", func() *http.Request {
			return structured(t, rig.srv.URL, []byte(`{"hello": "world"}`))
		}, http.StatusBadRequest, "not a CloudEvent"},
		{"unknown type", func() *http.Request {
			return structured(t, rig.srv.URL, []byte(`{"specversion":"1.0","id":"r1","source":"/test","type":"org.example.parade"}`))
		}, http.StatusBadRequest, `"parade"`},
		{"type without the prefix", func() *http.Request {
			return structured(t, rig.srv.URL, []byte(`{"specversion":"1.0","id":"r1","source":"/test","type":"reading"}`))
		}, http.StatusBadRequest, `prefix "org.example."`},
		{"a fraction the SDK would cut", func() *http.Request {
			return structured(t, rig.srv.URL, []byte(good+`,"x":5.7}`))
		}, http.StatusBadRequest, `extension "x" is the JSON number 5.7`},
		{"a number beyond 32 bits", func() *http.Request {
			return structured(t, rig.srv.URL, []byte(good+`,"n":3000000000}`))
		}, http.StatusBadRequest, `extension "n" is the JSON number 3000000000`},
		{"an extension of the wrong kind", func() *http.Request {
			return structured(t, rig.srv.URL, []byte(good+`,"ok":"yes"}`))
		}, http.StatusBadRequest, `"ok"`},
		{"an attribute outside the vocabulary", func() *http.Request {
			return structured(t, rig.srv.URL, []byte(good+`,"colour":"red"}`))
		}, http.StatusBadRequest, `"colour"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := rig.post(t, tc.req())
			assert.Equal(t, tc.status, status, body)
			assert.Contains(t, body, tc.says)
		})
	}
	assert.Equal(t, uint64(0), rig.sw.Stats().Deliveries, "nothing refused was published")
	t.Run("a whole number stays an Integer", func(t *testing.T) {
		status, body := rig.post(t, structured(t, rig.srv.URL, []byte(good+`,"n":-7}`)))
		require.Equal(t, http.StatusNoContent, status, body)
		d, err := rig.sub.Next(context.Background())
		require.NoError(t, err)
		v, _ := d.Event.Value("n")
		assert.Equal(t, int64(-7), v.Int())
	})
	assert.Equal(t, uint64(1), rig.sw.Stats().Deliveries)
	t.Run("closed session", func(t *testing.T) {
		require.NoError(t, rig.pub.Close())
		status, body := rig.post(t, structured(t, rig.srv.URL, []byte(good+`}`)))
		assert.Equal(t, http.StatusServiceUnavailable, status, body)
	})
}

// TestFromStructured: the structured JSON format read as Handler reads
// it — a JSON number the SDK would change is refused, naming the
// extension; a string of the kind comes in exact; what is not an event,
// and an unknown type, are refused with the sentinels FromCloudEvent uses.
func TestFromStructured(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	ev, err := c.FromStructured([]byte(`{"specversion": "1.0", "id": "a", "source": "/s", "type": "org.example.sion.reading", "x": "5.7", "n": 3}`))
	require.NoError(t, err)
	x, _ := ev.Value("x")
	n, _ := ev.Value("n")
	assert.Equal(t, 5.7, x.Float())
	assert.Equal(t, int64(3), n.Int())
	for _, body := range []string{
		`{"specversion": "1.0", "id": "a", "source": "/s", "type": "org.example.sion.reading", "x": 5.7}`,
		`{"specversion": "1.0", "id": "a", "source": "/s", "type": "org.example.sion.reading", "n": 8589934592}`,
		`{"specversion": "1.0", "id": "a", "source": "/s", "type": "org.example.sion.reading", "n": 1e3}`,
	} {
		_, err := c.FromStructured([]byte(body))
		require.ErrorIs(t, err, sion.ErrInvalidEvent, body)
		assert.Contains(t, err.Error(), "is the JSON number", body)
	}
	_, err = c.FromStructured([]byte(`[1, 2]`))
	assert.ErrorIs(t, err, sion.ErrInvalidEvent)
	_, err = c.FromStructured([]byte(`{"specversion": "1.0", "id": "a", "source": "/s", "type": "org.example.sion.nothing"}`))
	assert.ErrorIs(t, err, sion.ErrUnknownEventType)
}

// TestZeroTimeRefused: the time 0001-01-01T00:00:00Z, which the SDK
// reads as no time at all, is refused in both modes rather than dropped.
func TestZeroTimeRefused(t *testing.T) {
	c := newCodec(t, cloudevents.Config{TimeAttribute: "at"})
	_, err := c.FromStructured([]byte(`{"specversion": "1.0", "id": "a", "source": "/s", "type": "org.example.sion.reading", "time": "0001-01-01T00:00:00Z"}`))
	require.ErrorIs(t, err, sion.ErrInvalidEvent)
	assert.Contains(t, err.Error(), "outside 1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z, the times sion holds")

	_, s, sub := switchWith(t, c, "zero-time", `{type ⊑ *}`)
	h := &cloudevents.Handler{Codec: c, Session: s}
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x"))
	for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "a", "Ce-Source": "/s", "Ce-Type": prefix + "reading", "Ce-Time": "0001-01-01T00:00:00Z", "Content-Type": "text/plain"} {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "outside 1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z, the times sion holds")
	assert.Zero(t, sub.Stats().Delivered)
}

// TestHandlerRefusesRepeatedHeaders: in binary mode a CloudEvents
// attribute header (ce-*: the trace context's ce-traceparent and
// ce-tracestate, the required attributes, an extension) or Content-Type
// sent more than once is refused with 400 naming the header, not
// resolved by taking one of the values; nothing is published. One
// header of each still comes in.
func TestHandlerRefusesRepeatedHeaders(t *testing.T) {
	c := newCodec(t, cloudevents.Config{TypePrefix: "org.example."})
	rig := newHandlerRig(t, c, `{type ⊑ *}`, 0)
	const other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	binary := func(extra http.Header) *http.Request {
		req, err := http.NewRequest(http.MethodPost, rig.srv.URL, strings.NewReader(`{"n": 1}`))
		require.NoError(t, err)
		req.Header = http.Header{
			"Ce-Specversion": {"1.0"}, "Ce-Id": {"r1"}, "Ce-Source": {"/test"}, "Ce-Type": {"org.example.reading"},
			"Ce-Traceparent": {traceParent}, "Ce-Tracestate": {"rojo=1"}, "Content-Type": {"application/json"},
		}
		for k, vs := range extra {
			req.Header[k] = append(req.Header[k], vs...)
		}
		return req
	}
	cases := []struct {
		name   string
		extra  http.Header
		header string // as the error names it
	}{
		{"ce-traceparent", http.Header{"Ce-Traceparent": {other}}, "ce-traceparent"},
		{"ce-traceparent, the same value", http.Header{"Ce-Traceparent": {traceParent}}, "ce-traceparent"},
		{"ce-tracestate", http.Header{"Ce-Tracestate": {"congo=2"}}, "ce-tracestate"},
		{"ce-id", http.Header{"Ce-Id": {"r2"}}, "ce-id"},
		{"ce-type", http.Header{"Ce-Type": {"org.example.reading"}}, "ce-type"},
		{"ce-specversion", http.Header{"Ce-Specversion": {"1.0"}}, "ce-specversion"},
		{"an extension", http.Header{"Ce-N": {"1", "2"}}, "ce-n"},
		{"Content-Type", http.Header{"Content-Type": {"text/plain"}}, "content-type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := rig.post(t, binary(tc.extra))
			assert.Equal(t, http.StatusBadRequest, status, body)
			assert.Contains(t, body, `header "`+tc.header+`" appears more than once`)
		})
	}
	assert.Equal(t, uint64(0), rig.sw.Stats().Deliveries, "nothing refused was published")

	t.Run("each header once", func(t *testing.T) {
		status, body := rig.post(t, binary(nil))
		require.Equal(t, http.StatusNoContent, status, body)
		d, err := rig.sub.Next(context.Background())
		require.NoError(t, err)
		assert.Equal(t, traceParent, d.Event.TraceParent)
		assert.Equal(t, "rojo=1", d.Event.TraceState)
	})
}

package cloudevents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/ontology"
)

// TestHandlerContentTypeParamsCannotSlipAFractionPast: a Content-Type
// that mime.ParseMediaType refuses (a duplicate parameter) is still
// structured JSON to the SDK, which only cuts at ';'; the check for JSON
// numbers the SDK would change must not be skipped, else "x": 5.7 arrives
// as 5.
func TestHandlerContentTypeParamsCannotSlipAFractionPast(t *testing.T) {
	c := newCodec(t, cloudevents.Config{TypePrefix: "org.example."})
	rig := newHandlerRig(t, c, `{type ⊑ *}`, 0)
	good := `{"specversion":"1.0","id":"r1","source":"/test","type":"org.example.reading"`
	req := structured(t, rig.srv.URL, []byte(good+`,"x":5.7}`))
	req.Header.Set("Content-Type", "application/cloudevents+json; charset=utf-8; charset=utf-8")
	status, body := rig.post(t, req)
	if status == http.StatusNoContent {
		d, err := rig.sub.Next(context.Background())
		require.NoError(t, err)
		v, _ := d.Event.Value("x")
		t.Errorf("published; x arrived as %v", v)
	}
	assert.Equal(t, http.StatusBadRequest, status, body)
}

// TestHandlerBatchWithOddParamsIsStill415: batch mode with a Content-Type
// whose parameters mime cannot parse is still batch mode.
func TestHandlerBatchWithOddParamsIsStill415(t *testing.T) {
	c := newCodec(t, cloudevents.Config{TypePrefix: "org.example."})
	rig := newHandlerRig(t, c, `{type ⊑ *}`, 0)
	good := `{"specversion":"1.0","id":"r1","source":"/test","type":"org.example.reading"}`
	req := structured(t, rig.srv.URL, []byte("["+good+"]"))
	req.Header.Set("Content-Type", "application/cloudevents-batch+json; a=1; a=2")
	status, body := rig.post(t, req)
	assert.Equal(t, http.StatusUnsupportedMediaType, status, body)
}

// TestSenderRetryAfterHugeIsNotARefusal: a 503 whose Retry-After is a
// number of seconds that overflows time.Duration must be retried (after
// at most MaxBackoff), not dropped as if the endpoint refused the event.
func TestSenderRetryAfterHugeIsNotARefusal(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	e := newEndpoint(t, 503)
	e.retry = "10000000000"
	pub, sub := sourceSwitch(t, c)
	var mu sync.Mutex
	var drops []error
	s, err := cloudevents.NewSender(cloudevents.SenderConfig{Codec: c, Target: e.srv.URL, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Dropped: func(ev *sion.Event, err error) { mu.Lock(); drops = append(drops, err); mu.Unlock() }})
	require.NoError(t, err)
	stop := runSender(t, s, sub)
	require.NoError(t, pub.Publish(context.Background(), reading(1, 1)))
	require.Eventually(t, func() bool { st := s.Stats(); return st.Sent+st.Dropped == 1 }, 10*time.Second, time.Millisecond)
	assert.ErrorIs(t, stop(), context.Canceled)
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, drops)
	assert.Equal(t, cloudevents.SenderStats{Sent: 1, Retries: 1}, s.Stats())
	assert.Equal(t, []string{someID(1).String()}, e.got())
}

// TestSenderRedirectToGETIsNotSent: an endpoint that answers the POST
// with 302 or 303 makes Go's client follow with a GET, without the event;
// the GET's 2xx must not count the event as sent.
func TestSenderRedirectToGETIsNotSent(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	var mu sync.Mutex
	var posts int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			mu.Lock()
			posts++
			mu.Unlock()
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusOK) // a GET carries no event
	}))
	t.Cleanup(srv.Close)
	pub, sub := sourceSwitch(t, c)
	var dropped sync.WaitGroup
	dropped.Add(1)
	s, err := cloudevents.NewSender(cloudevents.SenderConfig{Codec: c, Target: srv.URL, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 1,
		Dropped: func(ev *sion.Event, err error) { dropped.Done() }})
	require.NoError(t, err)
	stop := runSender(t, s, sub)
	require.NoError(t, pub.Publish(context.Background(), reading(1, 1)))
	require.Eventually(t, func() bool { st := s.Stats(); return st.Sent+st.Dropped == 1 }, 10*time.Second, time.Millisecond)
	assert.ErrorIs(t, stop(), context.Canceled)
	assert.Equal(t, uint64(0), s.Stats().Sent, "a redirect to GET delivered nothing")
}

// TestCompileFiltersHostileSizeIsBounded: a Subscriptions API filter
// from the network can be megabytes. Deep nesting ([[[[... or
// {"not":{"not":...) made every path below a level a copy of the path
// above it (quadratic memory: 100,000 '[' were killed for memory), and
// an all of n exact tests copied the growing conjunction n times
// (quadratic time: 8,000 tests, 190 kB, took 4.7 s; 1 MB minutes). Each
// must be refused quickly, naming the limit.
func TestCompileFiltersHostileSizeIsBounded(t *testing.T) {
	c := newCodec(t, cloudevents.Config{TypePrefix: "org.example."})
	var wide strings.Builder
	wide.WriteString(`[{"all":[`)
	for i := range 40000 {
		if i > 0 {
			wide.WriteString(",")
		}
		fmt.Fprintf(&wide, `{"exact":{"s":"v%d"}}`, i)
	}
	wide.WriteString(`]}]`)
	for name, src := range map[string]string{
		"deep arrays":  strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20),
		"deep not":     strings.Repeat(`{"not":`, 150000) + `{"exact":{"s":"x"}}` + strings.Repeat("}", 150000),
		"wide all":     wide.String(),
		"deep objects": strings.Repeat(`{"a":`, 200000) + `1` + strings.Repeat("}", 200000),
	} {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := c.CompileFilters([]byte(src))
			runtime.ReadMemStats(&after)
			// Bounded work without a clock (the machines are shared): what
			// it allocates grows with the input, not with its square.
			alloc := after.TotalAlloc - before.TotalAlloc
			assert.Less(t, alloc, 64*uint64(len(src)), "%d bytes of input, %d bytes allocated", len(src), alloc)
			require.ErrorIs(t, err, cloudevents.ErrFilterUnsupported)
			assert.Contains(t, err.Error(), "MaxFilter")
		})
	}
	// Go values nest as deep as JSON text.
	var deep any = map[string]any{"exact": map[string]any{"s": "x"}}
	for range 100000 {
		deep = map[string]any{"not": deep}
	}
	_, err := c.CompileFilters([]any{deep})
	require.ErrorIs(t, err, cloudevents.ErrFilterUnsupported)
	// At the limits it compiles.
	var ok strings.Builder
	ok.WriteString(`[{"all":[`)
	for i := range cloudevents.MaxFilterTests {
		if i > 0 {
			ok.WriteString(",")
		}
		fmt.Fprintf(&ok, `{"exact":{"s":"v%d"}}`, i)
	}
	ok.WriteString(`]}]`)
	fs, err := c.CompileFilters([]byte(ok.String()))
	require.NoError(t, err)
	assert.Len(t, fs, 1)
}

// TestSenderBinaryModeNeverChangesOrStallsOnHeaderValues: in binary mode
// a string travels in an HTTP header, which loses leading and trailing
// whitespace (" lead" arrived as "lead", silently) and cannot hold a
// control character (net/http refused "line\nbreak" before sending, an
// error the Sender retried forever with the default MaxAttempts, so every
// later event waited behind it; then such events were dropped). With the
// values percent-encoded as the HTTP binding asks, and decoded by the
// Handler, every one arrives unchanged, in order.
func TestSenderBinaryModeNeverChangesOrStallsOnHeaderValues(t *testing.T) {
	c := newCodec(t, cloudevents.Config{TypePrefix: "org.example.", SubjectAttribute: "label"})
	rig := newHandlerRig(t, c, `{type ⊑ *}`, 0)
	pub, sub := sourceSwitch(t, c)
	var drops atomic.Int64
	s, err := cloudevents.NewSender(cloudevents.SenderConfig{Codec: c, Target: rig.srv.URL, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Dropped: func(*sion.Event, error) { drops.Add(1) }})
	require.NoError(t, err)
	stop := runSender(t, s, sub)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	values := []ontology.Attr{
		{Name: "s", Value: ontology.String(" lead")},
		{Name: "s", Value: ontology.String("trail ")},
		{Name: "s", Value: ontology.String("line\nbreak")},
		{Name: "label", Value: ontology.String("x\x00y")},
		{Name: "s", Value: ontology.String("in\tside, \"50%25\" off €")},
	}
	for i, a := range values {
		ev := reading(byte(i+1), 1)
		ev.Attrs = append(ev.Attrs, a)
		require.NoError(t, pub.Publish(ctx, ev))
	}
	for i, a := range values {
		d, err := rig.sub.Next(ctx)
		require.NoError(t, err, "event %d", i)
		v, _ := d.Event.Value(a.Name)
		assert.Equal(t, a.Value.Str(), v.Str(), "event %d", i)
	}
	require.Eventually(t, func() bool { return s.Stats().Sent == uint64(len(values)) }, 10*time.Second, time.Millisecond)
	assert.ErrorIs(t, stop(), context.Canceled)
	assert.Zero(t, drops.Load())
}

// TestHandlerBinaryModePercentDecodes: the HTTP binding (1.0.2, section
// 3.1.3.2) has a producer percent-encode space, '"', '%' and non-ASCII
// in string header values, and a receiver percent-decode them once. The
// SDK does neither, and the Handler kept "50%25%20off" as those 11
// bytes: a spec-following producer's "50% off" arrived changed, silently.
// A '%' that starts no escape (an SDK producer's raw "100% sure") stays.
func TestHandlerBinaryModePercentDecodes(t *testing.T) {
	c := newCodec(t, cloudevents.Config{TypePrefix: "org.example."})
	rig := newHandlerRig(t, c, `{type ⊑ *}`, 0)
	req, err := http.NewRequest(http.MethodPost, rig.srv.URL, nil)
	require.NoError(t, err)
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "p1", "ce-source": "/test", "ce-type": "org.example.reading", "ce-s": "50%25%20off%20%E2%82%AC"} {
		req.Header.Set(k, v)
	}
	status, body := rig.post(t, req)
	require.Equal(t, http.StatusNoContent, status, body)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := rig.sub.Next(ctx)
	require.NoError(t, err)
	v, _ := d.Event.Value("s")
	assert.Equal(t, "50% off €", v.Str())

	req, err = http.NewRequest(http.MethodPost, rig.srv.URL, nil)
	require.NoError(t, err)
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "p2", "ce-source": "/test", "ce-type": "org.example.reading", "ce-s": "100% sure"} {
		req.Header.Set(k, v)
	}
	status, body = rig.post(t, req)
	require.Equal(t, http.StatusNoContent, status, body)
	d, err = rig.sub.Next(ctx)
	require.NoError(t, err)
	v, _ = d.Event.Value("s")
	assert.Equal(t, "100% sure", v.Str())
}

// TestStructuredPlusJSONPayloadIsJSON: the JSON event format has a
// payload whose datacontenttype is JSON — "+json" media types included
// (application/geo+json, application/problem+json) — written as the JSON
// value itself. The Codec took "+json" for inline JSON, but the SDK's
// MarshalJSON inlines only application/json and text/json and wrote the
// payload as a JSON string ("data":"{\"a\":1}"), which a receiver
// following the spec reads as a string, not the object. It must be the
// JSON value or data_base64, and read back the same bytes.
func TestStructuredPlusJSONPayloadIsJSON(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	for _, ct := range []string{"application/geo+json", "application/problem+json; charset=utf-8", "application/json", "text/json"} {
		ev := reading(1, 1)
		ev.ContentType, ev.Data = ct, []byte(`{"a":1}`)
		ce, err := c.ToCloudEvent(ev)
		require.NoError(t, err)
		b, err := ce.MarshalJSON()
		require.NoError(t, err)
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(b, &m))
		if d, ok := m["data"]; ok {
			assert.Equal(t, byte('{'), d[0], "%s: data is %s", ct, d)
		} else {
			assert.Contains(t, m, "data_base64", ct)
		}
		var back event.Event
		require.NoError(t, json.Unmarshal(b, &back))
		got, err := c.FromCloudEvent(back)
		require.NoError(t, err)
		assert.Equal(t, ev.Data, got.Data, ct)
	}
}

// TestHandlerStructuredPlusJSONInline: a foreign producer's structured
// event with datacontenttype application/geo+json and its payload inline
// as a JSON object is valid (JSON event format 3.1). The SDK reads the
// data of a media type it does not list as JSON as a string, and the
// Handler answered 400 "not a CloudEvent"; now the object's bytes are
// the payload.
func TestHandlerStructuredPlusJSONInline(t *testing.T) {
	c := newCodec(t, cloudevents.Config{TypePrefix: "org.example."})
	rig := newHandlerRig(t, c, `{type ⊑ *}`, 0)
	status, body := rig.post(t, structured(t, rig.srv.URL, []byte(`{"specversion":"1.0","id":"g1","source":"/test","type":"org.example.reading","datacontenttype":"application/geo+json","data":{"a":1}}`)))
	require.Equal(t, http.StatusNoContent, status, body)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := rig.sub.Next(ctx)
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":1}`, string(d.Event.Data))
}

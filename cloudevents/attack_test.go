package cloudevents_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
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

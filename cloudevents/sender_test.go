package cloudevents_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/ontology"
)

// runSender starts s.Run on sub on a goroutine the test owns, and returns
// a stop that cancels it and returns Run's error.
func runSender(t *testing.T, s *cloudevents.Sender, sub *sion.Subscription) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, sub) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// sourceSwitch returns a switch of c's ontology, a session publishing on
// it and a subscription of every event there, for a Sender to read.
func sourceSwitch(t *testing.T, c *cloudevents.Codec) (*sion.Session, *sion.Subscription) {
	t.Helper()
	_, pub, sub := switchWith(t, c, "source", `{type ⊑ *}`)
	return pub, sub
}

// switchWith returns a switch named name of c's ontology, a session
// publishing on it, and a subscription with filter there (a queue of
// twice the USGS week).
func switchWith(t *testing.T, c *cloudevents.Codec, name, filter string) (*sion.Switch, *sion.Session, *sion.Subscription) {
	t.Helper()
	ctx := context.Background()
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: name, Ontology: c.Ontology()})
	require.NoError(t, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: name, Place: place})
	require.NoError(t, err)
	t.Cleanup(func() { sw.Close() })
	watcher, err := sw.Open(ctx, sion.SessionConfig{Name: "watcher"})
	require.NoError(t, err)
	sub, err := watcher.Subscribe(ctx, filter, sion.WithQueue(2*usgsWeekEvents))
	require.NoError(t, err)
	pub, err := sw.Open(ctx, sion.SessionConfig{Name: "publisher"})
	require.NoError(t, err)
	return sw, pub, sub
}

// TestSenderBridgesUSGSWeek: a Sender on one switch and a Handler on
// another carry every event of the USGS week across HTTP, in order, each
// once, with its ID, in binary and in structured mode.
func TestSenderBridgesUSGSWeek(t *testing.T) {
	o, week, _, _ := publishedWeek(t)
	c, err := cloudevents.NewCodec(cloudevents.Config{Ontology: o, TypePrefix: "gov.usgs.", TimeAttribute: "time"})
	require.NoError(t, err)
	for _, structured := range []bool{false, true} {
		t.Run(map[bool]string{false: "binary", true: "structured"}[structured], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rig := newHandlerRig(t, c, `{type ⊑ hazard}`, 0)
			pub, sub := sourceSwitch(t, c)
			s, err := cloudevents.NewSender(cloudevents.SenderConfig{Codec: c, Target: rig.srv.URL, Structured: structured})
			require.NoError(t, err)
			stop := runSender(t, s, sub)
			for _, ev := range week {
				require.NoError(t, pub.Publish(ctx, ev))
			}
			for i, ev := range week {
				d, err := rig.sub.Next(ctx)
				require.NoError(t, err)
				require.Equal(t, ev.ID, d.Event.ID, "event %d", i)
				require.Equal(t, ev.Attrs, d.Event.Attrs, "event %d", i)
				require.Equal(t, ev.Data, d.Event.Data, "event %d", i)
			}
			// The last answer may reach the Sender after the Handler
			// delivered the event.
			require.Eventually(t, func() bool { return s.Stats().Sent == usgsWeekEvents }, 10*time.Second, time.Millisecond)
			assert.ErrorIs(t, stop(), context.Canceled)
			assert.Equal(t, cloudevents.SenderStats{Sent: usgsWeekEvents}, s.Stats())
			assert.Equal(t, uint64(0), rig.sw.Stats().Duplicates)
		})
	}
}

// endpoint is a test HTTP endpoint that answers each request with the
// next status of its script (204 once the script is spent) and records
// the ce-id of the requests it accepted.
type endpoint struct {
	mu       sync.Mutex
	script   []int
	retry    string // Retry-After of 429 and 503 answers
	accepted []string
	srv      *httptest.Server
}

func newEndpoint(t *testing.T, script ...int) *endpoint {
	e := &endpoint{script: script}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		code := http.StatusNoContent
		if len(e.script) > 0 {
			code, e.script = e.script[0], e.script[1:]
		}
		if code == http.StatusNoContent {
			e.accepted = append(e.accepted, r.Header.Get("ce-id"))
		} else if e.retry != "" {
			w.Header().Set("Retry-After", e.retry)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) got() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.accepted...)
}

func reading(id byte, n int64) *sion.Event {
	return &sion.Event{ID: someID(id), Type: "reading", Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(n)}}}
}

// TestSenderRetries: network-level failures and 5xx, 408 and 429 answers
// are retried with backoff until the endpoint accepts; events arrive in
// order, none is dropped.
func TestSenderRetries(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	e := newEndpoint(t, 503, 500, 429, 408, 502)
	pub, sub := sourceSwitch(t, c)
	s, err := cloudevents.NewSender(cloudevents.SenderConfig{Codec: c, Target: e.srv.URL, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Dropped: func(ev *sion.Event, err error) { t.Errorf("dropped %s: %v", ev.ID, err) }})
	require.NoError(t, err)
	stop := runSender(t, s, sub)
	ctx := context.Background()
	for i := range byte(3) {
		require.NoError(t, pub.Publish(ctx, reading(i+1, int64(i))))
	}
	require.Eventually(t, func() bool { return s.Stats().Sent == 3 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{someID(1).String(), someID(2).String(), someID(3).String()}, e.got())
	assert.ErrorIs(t, stop(), context.Canceled)
	assert.Equal(t, cloudevents.SenderStats{Sent: 3, Retries: 5}, s.Stats())
}

// TestSenderDrops: an event the endpoint refuses (4xx) is dropped at
// once, and one that fails MaxAttempts times is dropped then; each is
// counted and passed to Dropped with the reason, and the events after
// it are sent.
func TestSenderDrops(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	e := newEndpoint(t, 204, 400, 503, 503, 204)
	pub, sub := sourceSwitch(t, c)
	var mu sync.Mutex
	var dropped []string
	var reasons []error
	s, err := cloudevents.NewSender(cloudevents.SenderConfig{Codec: c, Target: e.srv.URL, MaxAttempts: 2,
		MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		Dropped: func(ev *sion.Event, err error) {
			mu.Lock()
			defer mu.Unlock()
			dropped, reasons = append(dropped, ev.ID.String()), append(reasons, err)
		}})
	require.NoError(t, err)
	stop := runSender(t, s, sub)
	ctx := context.Background()
	for i := range byte(4) {
		require.NoError(t, pub.Publish(ctx, reading(i+1, int64(i))))
	}
	require.Eventually(t, func() bool { return s.Stats().Sent == 2 }, 10*time.Second, time.Millisecond)
	assert.ErrorIs(t, stop(), context.Canceled)
	assert.Equal(t, []string{someID(1).String(), someID(4).String()}, e.got())
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{someID(2).String(), someID(3).String()}, dropped)
	assert.ErrorContains(t, reasons[0], "400 Bad Request")
	assert.ErrorContains(t, reasons[1], "gave up after 2 attempts")
	assert.ErrorContains(t, reasons[1], "503 Service Unavailable")
	assert.Equal(t, cloudevents.SenderStats{Sent: 2, Retries: 1, Dropped: 2}, s.Stats())
}

// TestSenderStopsWhileWaiting: Run returns ctx's error at once while it
// waits out a long Retry-After; the event it was retrying is not dropped
// but kept, and the next Run sends it first.
func TestSenderStopsWhileWaiting(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	e := newEndpoint(t, 503)
	e.retry = "3600"
	pub, sub := sourceSwitch(t, c)
	s, err := cloudevents.NewSender(cloudevents.SenderConfig{Codec: c, Target: e.srv.URL, MaxBackoff: time.Hour})
	require.NoError(t, err)
	stop := runSender(t, s, sub)
	require.NoError(t, pub.Publish(context.Background(), reading(1, 1)))
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.script) == 0
	}, 10*time.Second, time.Millisecond, "the first attempt was made")
	start := time.Now()
	assert.ErrorIs(t, stop(), context.Canceled)
	assert.Less(t, time.Since(start), time.Minute, "Run did not wait out the hour")
	assert.Equal(t, cloudevents.SenderStats{}, s.Stats())

	runSender(t, s, sub) // the endpoint accepts now
	require.Eventually(t, func() bool { return s.Stats().Sent == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{someID(1).String()}, e.got())
}

// TestSenderEndsWithSubscription: Run returns an error wrapping
// sion.ErrClosed when its subscription ends.
func TestSenderEndsWithSubscription(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	e := newEndpoint(t)
	_, sub := sourceSwitch(t, c)
	s, err := cloudevents.NewSender(cloudevents.SenderConfig{Codec: c, Target: e.srv.URL})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background(), sub) }()
	require.NoError(t, sub.Cancel())
	assert.ErrorIs(t, <-done, sion.ErrClosed)
}

func TestNewSenderRefuses(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	for name, cfg := range map[string]cloudevents.SenderConfig{
		"Codec":       {Target: "http://127.0.0.1:1/"},
		"Target":      {Codec: c, Target: "/relative"},
		"ftp":         {Codec: c, Target: "ftp://127.0.0.1/"},
		"MaxAttempts": {Codec: c, Target: "http://127.0.0.1:1/", MaxAttempts: -1},
		"backoff":     {Codec: c, Target: "http://127.0.0.1:1/", MinBackoff: time.Second, MaxBackoff: time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := cloudevents.NewSender(cfg)
			require.Error(t, err)
			assert.True(t, errors.Is(err, sion.ErrInvalidConfig), err)
		})
	}
}

package manage

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
)

// TestMaxConcurrent sends many concurrent requests for routes and
// sessions to a real HTTP server and counts, through the handler's
// hooks, the snapshots taken at once: never more than MaxConcurrent.
// Those beyond it wait for a slot (MaxWait) or, when they may not wait,
// are answered 503 with Retry-After and a JSON error.
func TestMaxConcurrent(t *testing.T) {
	cases := []struct {
		name     string
		cfg      Config
		requests int
		waits    bool // the requests beyond MaxConcurrent wait for a slot
	}{
		{"wait for a slot", Config{MaxConcurrent: 2, MaxWait: time.Minute}, 12, true},
		{"refused at once", Config{MaxConcurrent: 3, MaxWait: -1}, 12, false},
		{"the default", Config{MaxWait: time.Minute}, 16, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := New(testSwitch(t), tc.cfg)
			limit := h.cfg.MaxConcurrent
			var inside, most, waiting atomic.Int64
			release := make(chan struct{})
			h.snapshotHook = func() {
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
				inside.Add(-1)
			}
			h.waitHook = func() { waiting.Add(1) }
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			free := sync.OnceFunc(func() { close(release) })
			t.Cleanup(free) // before srv.Close, should the test fail early

			type answer struct {
				status     int
				retryAfter string
				body       map[string]any
			}
			answers := make(chan answer, tc.requests)
			var wg sync.WaitGroup
			for i := range tc.requests {
				path := []string{"/api/routes", "/api/sessions?subs=1"}[i%2]
				wg.Go(func() {
					resp, err := srv.Client().Get(srv.URL + path)
					if !assert.NoError(t, err) {
						answers <- answer{}
						return
					}
					defer resp.Body.Close()
					var body map[string]any
					assert.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
					answers <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), body}
				})
			}
			refused := 0
			if tc.waits {
				// every request is either taking its snapshot or waiting
				require.Eventually(t, func() bool {
					return inside.Load() == int64(limit) && waiting.Load() == int64(tc.requests-limit)
				}, 20*time.Second, time.Millisecond)
			} else {
				require.Eventually(t, func() bool { return inside.Load() == int64(limit) }, 20*time.Second, time.Millisecond)
				for range tc.requests - limit {
					a := <-answers
					assert.Equal(t, http.StatusServiceUnavailable, a.status)
					assert.Equal(t, "1", a.retryAfter)
					assert.Contains(t, a.body["error"], "manage: busy")
					refused++
				}
			}
			free()
			wg.Wait()
			close(answers)
			for a := range answers {
				assert.Equal(t, http.StatusOK, a.status, "%v", a.body)
			}
			assert.Equal(t, int64(limit), most.Load(), "snapshots at once")
			if !tc.waits {
				assert.Equal(t, tc.requests-limit, refused)
			}
		})
	}
}

// testSwitch returns a switch that is not serving, closed at cleanup.
func testSwitch(t *testing.T) *sion.Switch {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{{Name: "Event"}})
	require.NoError(t, err)
	p, err := sion.NewEventPlace(sion.PlaceConfig{Name: "plant", Ontology: o})
	require.NoError(t, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "x", Place: p})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sw.Close()) })
	s, err := sw.Open(context.Background(), sion.SessionConfig{Name: "e"})
	require.NoError(t, err)
	_, err = s.Subscribe(context.Background(), "{type ⊑ Event}")
	require.NoError(t, err)
	return sw
}

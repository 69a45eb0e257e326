package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/metrics"
	"github.com/sion-go/sion/transport/tcp"
)

// TestCaseB34SeriesDoNotOutliveSessions (../shared/CASES-2.md B34, A18):
// 500 remote sessions come and go, each with a name and a source port of
// its own, while 50 others are cut and reconnect 5 times. The scrape has
// no more sion series than before — no label is a session, a peer
// address, an event ID or an attribute value — it stays small, and the
// published-events counter rose by exactly 500.
func TestCaseB34SeriesDoNotOutliveSessions(t *testing.T) {
	tr, err := tcp.New(tcp.Config{})
	require.NoError(t, err)
	sw, addr := serveAt(t, tr, newPlace(t, "plant", testOntology(t)), "a", "127.0.0.1:0")
	c := collectorOf(t, sw)
	sionSeries := func(s map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range s {
			if strings.HasPrefix(k, "sion_") {
				out[k] = v
			}
		}
		return out
	}
	baseline := sionSeries(scrape(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cut := &cutter{Transport: tr}
	var stay []*sion.Session
	for i := range 50 {
		s, err := sion.Dial(ctx, cut, addr, sion.SessionConfig{Name: fmt.Sprintf("b34-stay-%d", i),
			Reconnect: sion.ReconnectPolicy{MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		subscribe(t, s, "{type ⊑ Alarm}")
		stay = append(stay, s)
	}
	var ids sync.Map // event IDs seen, which no label may name
	for round := range 5 {
		for i := range 100 {
			s, err := sion.Dial(ctx, tr, addr, sion.SessionConfig{Name: fmt.Sprintf("b34-%d-%d", round, i)})
			require.NoError(t, err)
			sub := subscribe(t, s, "{type ⊑ Alarm}")
			require.NoError(t, s.Publish(ctx, &sion.Event{Type: "Alarm"}))
			d, err := sub.Next(ctx)
			require.NoError(t, err)
			ids.Store(d.Event.ID.String(), true)
			require.NoError(t, s.Close())
		}
		// The 50 reconnect. Right after the cut the switch may not have
		// noticed it yet (Away 0, Sessions 50 hold already), so wait for
		// the 50 disconnects too: else the next cut could find a session
		// that has not dialled again and miss it. The switch counts a
		// disconnect whether it noticed the connection end before the
		// entity came back or only when the entity took the session over
		// on its new connection.
		require.Equal(t, 50, cut.cut(), "round %d: each of the 50 has one connection", round)
		want := uint64(50 * (round + 1))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			st := sw.Stats()
			assert.Equal(c, want, st.Disconnects, "round %d: disconnects", round)
			assert.Zero(c, st.Away, "round %d: away", round)
			assert.Equal(c, 50, st.Sessions, "round %d: sessions", round)
		}, 20*time.Second, 5*time.Millisecond)
	}
	for _, s := range stay {
		require.NoError(t, s.Sync(ctx), "%s is back", s.Name())
	}
	require.Equal(t, uint64(5*50), sw.Stats().Disconnects, "each of the 50 was cut 5 times, and counted once each time")

	after := sionSeries(scrape(t, c))
	assert.LessOrEqual(t, len(after), len(baseline), "no series for the 550 sessions or their connections:\n%s", dump(after))
	for k := range after {
		assert.NotContains(t, k, "b34-", "a label names a session")
		assert.NotContains(t, k, "127.0.0.1", "a label names a peer address")
		ids.Range(func(id, _ any) bool {
			assert.NotContains(t, k, id.(string), "a label names an event ID")
			return true
		})
	}
	assert.Equal(t, float64(500), after[`sion_events_published_total{place=plant,switch=a}`]-baseline[`sion_events_published_total{place=plant,switch=a}`])
	assert.Equal(t, float64(50), after[`sion_sessions{kind=remote,place=plant,switch=a}`])

	rec := httptest.NewRecorder()
	metrics.HandlerFor(c).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Less(t, rec.Body.Len(), 1<<20, "the /metrics response is under 1 MiB")
}

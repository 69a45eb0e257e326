package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/metrics"
)

// TestHandler scrapes a switch through Handler in the text format.
func TestHandler(t *testing.T) {
	tr := memNet(t)
	a := serve(t, tr, newPlace(t, "plant", testOntology(t)), "a", "a")
	publish(t, open(t, a, "writer"), "Alarm", 3)

	rec := httptest.NewRecorder()
	metrics.Handler(a).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Header().Get("Content-Type"), "text/plain")
	body := rec.Body.String()
	for _, line := range []string{
		"# TYPE sion_events_in_total counter",
		`sion_events_in_total{place="plant",switch="a"} 3`,
		`sion_sessions{kind="local",place="plant",switch="a"} 1`,
		"# TYPE go_goroutines gauge",
	} {
		assert.Contains(t, body, line+"\n")
	}
}

package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/metrics"
)

// TestOTel reads the same linked pair as TestCollectorLinked through an
// OpenTelemetry ManualReader.
func TestOTel(t *testing.T) {
	tr := memNet(t)
	p := newPlace(t, "plant", testOntology(t))
	a := serve(t, tr, p, "a", "a")
	b := serve(t, tr, p, "b", "b")
	linkUp(t, tr, b, a, "a")
	sub := subscribe(t, open(t, b, "reader"), "{type ⊑ Reading}", sion.WithQueue(100))
	const n = 5
	publish(t, open(t, a, "writer"), "Reading", n)
	require.Eventually(t, func() bool { return sub.Stats().Delivered == n }, 10*time.Second, time.Millisecond)
	sentTo(t, a, "b", n)

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	reg, err := metrics.RegisterOTel(mp.Meter("github.com/sion-go/sion/metrics"), a, b)
	require.NoError(t, err)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	got := otelPoints(t, rm)
	for _, tc := range []struct {
		name  string
		attrs []attribute.KeyValue
		want  int64
	}{
		{"sion.events.in", swAttrs("a"), n},
		{"sion.events.in", swAttrs("b"), n},
		{"sion.events.delivered", swAttrs("b"), n},
		{"sion.events.published", swAttrs("a"), n},
		{"sion.events.matched", swAttrs("b"), n},
		{"sion.events.dropped", swAttrs("b", attribute.String("sion.reason", "queue_full")), 0},
		{"sion.match.duration.count", swAttrs("a"), int64(a.MatchTime().Count)},
		{"sion.link.events.sent", swAttrs("a", attribute.String("sion.peer", "b")), n},
		{"sion.link.events.received", swAttrs("b", attribute.String("sion.peer", "a")), n},
		{"sion.link.events.dropped", swAttrs("a", attribute.String("sion.peer", "b"), attribute.String("sion.reason", "queue_full")), 0},
		{"sion.link.up", swAttrs("a", attribute.String("sion.peer", "b")), 1},
		{"sion.sessions", swAttrs("b", attribute.String("sion.session.kind", "local")), 1},
		{"sion.sessions", swAttrs("b", attribute.String("sion.session.kind", "link")), 1},
		{"sion.subscriptions", swAttrs("b"), 1},
	} {
		set := attribute.NewSet(tc.attrs...)
		key := tc.name + " " + set.Encoded(attribute.DefaultEncoder())
		assert.Equal(t, tc.want, got[key], key)
	}
	for name, unit := range map[string]string{"sion.events.in": "{event}", "sion.retained.bytes": "By", "sion.link.up": "1", "sion.match.duration.sum": "s"} {
		assert.Equal(t, unit, otelUnit(rm, name), name)
	}

	require.NoError(t, reg.Unregister())
	rm = metricdata.ResourceMetrics{}
	require.NoError(t, reader.Collect(context.Background(), &rm))
	assert.Empty(t, otelPoints(t, rm), "nothing after Unregister")
}

func swAttrs(sw string, more ...attribute.KeyValue) []attribute.KeyValue {
	return append([]attribute.KeyValue{attribute.String("sion.switch", sw), attribute.String("sion.place", "plant")}, more...)
}

// otelPoints returns every int64 data point of rm by "name attributes";
// it checks that counters are cumulative and monotonic.
func otelPoints(t *testing.T, rm metricdata.ResourceMetrics) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var dps []metricdata.DataPoint[int64]
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				assert.Equal(t, metricdata.CumulativeTemporality, d.Temporality, m.Name)
				dps = d.DataPoints
			case metricdata.Gauge[int64]:
				dps = d.DataPoints
			}
			for _, dp := range dps {
				out[m.Name+" "+dp.Attributes.Encoded(attribute.DefaultEncoder())] = dp.Value
			}
		}
	}
	return out
}

// otelUnit returns the unit of metric name in rm.
func otelUnit(rm metricdata.ResourceMetrics, name string) string {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m.Unit
			}
		}
	}
	return ""
}

// TestProducer reads the match-time histogram through a reader's
// Producer.
func TestProducer(t *testing.T) {
	a := serve(t, memNet(t), newPlace(t, "plant", testOntology(t)), "a", "a")
	s := open(t, a, "s")
	subscribe(t, s, "{type ⊑ Reading}")
	publish(t, s, "Reading", 24)

	c := collectorOf(t, a)
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(c.Producer()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))

	h := a.MatchTime()
	require.Equal(t, uint64(3), h.Count, "24 events, one in 8 timed")
	var found bool
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "sion.match.duration" {
				continue
			}
			found = true
			assert.Equal(t, "s", m.Unit)
			d, ok := m.Data.(metricdata.Histogram[float64])
			require.True(t, ok, "%T", m.Data)
			assert.Equal(t, metricdata.CumulativeTemporality, d.Temporality)
			require.Len(t, d.DataPoints, 1)
			dp := d.DataPoints[0]
			v, _ := dp.Attributes.Value("sion.switch")
			assert.Equal(t, "a", v.AsString())
			assert.Equal(t, h.Count, dp.Count)
			assert.Equal(t, h.Counts, dp.BucketCounts)
			assert.Equal(t, h.Sum.Seconds(), dp.Sum)
			require.Len(t, dp.Bounds, len(h.Bounds))
			assert.Equal(t, 250e-9, dp.Bounds[0])
			assert.Equal(t, 0.01, dp.Bounds[len(dp.Bounds)-1])
		}
	}
	assert.True(t, found, "no sion.match.duration")
}

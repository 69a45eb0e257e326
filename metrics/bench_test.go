package metrics_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sion-go/sion/metrics"
)

// BenchmarkCollect measures a scrape of one switch with 10 shared links
// (each child subscribed, so that the hub holds a proxy filter per link)
// and 1,000 local sessions of one subscription each: Collect alone, a
// registry's Gather (Collect and the metric families built), and an
// OpenTelemetry collection through a ManualReader.
func BenchmarkCollect(b *testing.B) {
	tr := memNet(b)
	p := newPlace(b, "plant", testOntology(b))
	hub := serve(b, tr, p, "hub", "hub")
	for i := range 10 {
		child := serve(b, tr, p, fmt.Sprintf("c%d", i), fmt.Sprintf("c%d", i))
		linkUp(b, tr, child, hub, "hub")
		subscribe(b, open(b, child, "reader"), "{type ⊑ Reading}")
	}
	for i := range 1000 {
		subscribe(b, open(b, hub, fmt.Sprintf("s%d", i)), fmt.Sprintf("{type ⊑ Reading; n = %d}", i))
	}
	publish(b, open(b, hub, "writer"), "Reading", 100)

	b.Run("Collect", func(b *testing.B) {
		c := collectorOf(b, hub)
		ch := make(chan prometheus.Metric, 1024)
		b.ReportAllocs()
		for b.Loop() {
			c.Collect(ch)
			for len(ch) > 0 {
				<-ch
			}
		}
	})
	b.Run("Gather", func(b *testing.B) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectorOf(b, hub))
		b.ReportAllocs()
		for b.Loop() {
			_, err := reg.Gather()
			require.NoError(b, err)
		}
	})
	b.Run("OTel", func(b *testing.B) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { require.NoError(b, mp.Shutdown(context.Background())) }()
		_, err := metrics.RegisterOTel(mp.Meter("bench"), hub)
		require.NoError(b, err)
		var rm metricdata.ResourceMetrics
		b.ReportAllocs()
		for b.Loop() {
			require.NoError(b, reader.Collect(context.Background(), &rm))
		}
	})
	b.Run("Sessions", func(b *testing.B) { // what the kind label costs
		b.ReportAllocs()
		for b.Loop() {
			_ = hub.Sessions()
		}
	})
	b.Run("Stats", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = hub.Stats()
		}
	})
}

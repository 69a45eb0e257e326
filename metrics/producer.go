package metrics

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sion-go/sion"
)

// scope is the instrumentation scope of what Producer produces.
var scope = instrumentation.Scope{Name: "github.com/sion-go/sion/metrics"}

// Producer returns an OpenTelemetry SDK producer of c's match-time
// histograms, for the SDK users who want the buckets that the API's
// asynchronous instruments cannot carry (see RegisterOTel): give it to a
// reader, as in
//
//	reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithProducer(c.Producer()))
//
// Each collection then gets one histogram, sion.match.duration (unit s,
// cumulative), with a data point per switch (attributes sion.switch and
// sion.place) that is Switch.MatchTime as read then: the core's bucket
// bounds in seconds, its counts and sum; StartTime is when c first
// produced that switch's point. Safe for concurrent use, serialised with
// Collect and the RegisterOTel callback.
func (c *Collector) Producer() sdkmetric.Producer { return producer{c} }

type producer struct{ c *Collector }

// Produce returns the match-time histograms of c's switches.
func (p producer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	st := &p.c.st
	st.mu.Lock()
	defer st.mu.Unlock()
	st.prune()
	now := time.Now()
	var dps []metricdata.HistogramDataPoint[float64]
	for _, sw := range st.sws {
		h := sw.MatchTime()
		start, ok := st.started[sw]
		if !ok {
			if st.started == nil {
				st.started = map[*sion.Switch]time.Time{}
			}
			start = now
			st.started[sw] = start
		}
		dp := metricdata.HistogramDataPoint[float64]{
			Attributes: attribute.NewSet(attribute.String(otelKeys[lSwitch], sw.Name()), attribute.String(otelKeys[lPlace], sw.Place().Name())),
			StartTime:  start, Time: now,
			Count: h.Count, Sum: h.Sum.Seconds(),
			Bounds: make([]float64, len(h.Bounds)), BucketCounts: h.Counts,
		}
		for i, b := range h.Bounds {
			dp.Bounds[i] = b.Seconds()
		}
		dps = append(dps, dp)
	}
	if len(dps) == 0 {
		return nil, nil
	}
	return []metricdata.ScopeMetrics{{Scope: scope, Metrics: []metricdata.Metrics{{
		Name: fMatchDuration.otel, Description: fMatchDuration.help, Unit: fMatchDuration.unit,
		Data: metricdata.Histogram[float64]{DataPoints: dps, Temporality: metricdata.CumulativeTemporality},
	}}}}, nil
}

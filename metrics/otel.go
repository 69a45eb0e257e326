package metrics

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sion-go/sion"
)

// RegisterOTel registers the metrics of sws with meter, as
// NewCollector(sws...) and its RegisterOTel(meter) do; the error is
// either's.
func RegisterOTel(meter metric.Meter, sws ...*sion.Switch) (metric.Registration, error) {
	c, err := NewCollector(sws...)
	if err != nil {
		return nil, err
	}
	return c.RegisterOTel(meter)
}

// RegisterOTel creates one asynchronous instrument per metric family on
// meter (see the package doc for the names, units and attributes) and
// registers one callback that reads c's switches when the meter's
// reader collects: counters as Int64ObservableCounter (cumulative and
// monotonic: the values the Prometheus side exports), counts of things
// present as Int64ObservableUpDownCounter, up states as
// Int64ObservableGauge, and the match-time histogram as two counters,
// sion.match.duration.count and sion.match.duration.sum (see the
// package doc for why). Unregister the returned Registration to stop.
// Errors: those of creating the instruments and of registering the
// callback, joined. The callback and Collect are serialised; both may
// run at any time.
func (c *Collector) RegisterOTel(meter metric.Meter) (metric.Registration, error) {
	insts := make([]metric.Observable, len(families))
	var (
		errs       []error
		hCount     metric.Int64ObservableCounter
		hSum       metric.Float64ObservableCounter
		registered []metric.Observable
	)
	for i, f := range families {
		var (
			inst metric.Observable
			err  error
		)
		switch f.typ {
		case counter:
			inst, err = meter.Int64ObservableCounter(f.otel, metric.WithUnit(f.unit), metric.WithDescription(f.help))
		case upDown:
			inst, err = meter.Int64ObservableUpDownCounter(f.otel, metric.WithUnit(f.unit), metric.WithDescription(f.help))
		case gauge:
			inst, err = meter.Int64ObservableGauge(f.otel, metric.WithUnit(f.unit), metric.WithDescription(f.help))
		case histogram:
			var err2 error
			hCount, err = meter.Int64ObservableCounter(f.otel+".count", metric.WithUnit("{event}"),
				metric.WithDescription("Events whose match was timed, one in 8 (Switch.MatchTime: Count)."))
			hSum, err2 = meter.Float64ObservableCounter(f.otel+".sum", metric.WithUnit(f.unit),
				metric.WithDescription("Total time of the timed matches (Switch.MatchTime: Sum)."))
			errs = append(errs, err2)
			registered = append(registered, hCount, hSum)
		}
		errs = append(errs, err)
		if inst != nil {
			insts[i] = inst
			registered = append(registered, inst)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		c.st.mu.Lock()
		defer c.st.mu.Unlock()
		var kvs [maxLabels]attribute.KeyValue
		attrs := func(f *family, lv []string) metric.ObserveOption {
			for i, l := range lv {
				kvs[i] = attribute.String(otelKeys[f.labels[i]], l)
			}
			return metric.WithAttributeSet(attribute.NewSet(kvs[:len(lv)]...))
		}
		c.st.walk(func(f *family, lv []string, v float64) {
			o.ObserveInt64(insts[f.index].(metric.Int64Observable), int64(v), attrs(f, lv))
		}, func(f *family, lv []string, h sion.Histogram) {
			a := attrs(f, lv)
			o.ObserveInt64(hCount, int64(h.Count), a)
			o.ObserveFloat64(hSum, h.Sum.Seconds(), a)
		})
		return nil
	}, registered...)
}

// otelKeys are the OpenTelemetry attribute keys of the labels.
var otelKeys = map[string]string{
	lSwitch:    "sion.switch",
	lPlace:     "sion.place",
	lPeer:      "sion.peer",
	lGateway:   "sion.gateway",
	lDirection: "sion.direction",
	lReason:    "sion.reason",
	lKind:      "sion.session.kind",
}

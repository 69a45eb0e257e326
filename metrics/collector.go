package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sion-go/sion"
)

// Collector exports the counters of a set of switches as Prometheus
// metrics (it implements prometheus.Collector) and, through
// RegisterOTel, as OpenTelemetry metrics. Every value is read from the
// switches' snapshots (Switch.Stats, Sessions, Links, Gateways) when a
// scrape or an OpenTelemetry collection asks for it: the Collector runs
// no goroutine and holds no reference to a switch beyond its list.
//
// Counters never decrease over the Collector's life: the core's count
// over their switch's life, and the Collector carries a switch's last
// values over to another of the same name and place that replaces it
// (see the package doc). It remembers one pair of numbers per counter
// series it has seen, for its life.
//
// The switches a Collector holds must have distinct names within a
// place, or their series collide (the registry then reports an error at
// gather time). A Collector is safe for concurrent use; scrapes are
// serialised.
type Collector struct {
	st state
}

// NewCollector returns a Collector of sws (nil entries and repeats are
// left out).
func NewCollector(sws ...*sion.Switch) *Collector {
	c := &Collector{}
	c.st.add(sws...)
	return c
}

// Add adds switches to c; those c holds already and nil are left out.
func (c *Collector) Add(sws ...*sion.Switch) { c.st.add(sws...) }

// Remove removes sw from c: its series are no longer exported. c keeps
// what it remembers of its counters, so that a switch of the same name
// and place added later continues them.
func (c *Collector) Remove(sw *sion.Switch) { c.st.remove(sw) }

// Describe sends the descriptor of every metric family (see the package
// doc), whether or not a switch has a series in it.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range families {
		ch <- f.desc
	}
}

// Collect reads the switches' snapshots and sends one constant metric
// per series. Its cost grows with the switches' sessions (counted by
// kind: Switch.SessionCounts), links and gateways, not with their
// subscriptions.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	c.st.walk(func(f *family, lv []string, v float64) {
		t := prometheus.GaugeValue
		if f.typ == counter {
			t = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(f.desc, t, v, lv...)
	}, func(f *family, lv []string, h sion.Histogram) {
		ch <- prometheus.MustNewConstHistogram(f.desc, h.Count, h.Sum.Seconds(), cumulative(h), lv...)
	})
}

// cumulative returns h's buckets as Prometheus takes them: by upper bound
// in seconds, cumulative (the +Inf bucket is h.Count).
func cumulative(h sion.Histogram) map[float64]uint64 {
	out := make(map[float64]uint64, len(h.Bounds))
	var sum uint64
	for i, b := range h.Bounds {
		sum += h.Counts[i]
		out[b.Seconds()] = sum
	}
	return out
}

var _ prometheus.Collector = (*Collector)(nil)

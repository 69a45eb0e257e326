package metrics

import (
	"errors"
	"fmt"
	"strings"

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
// (see the package doc). A closed switch is left out of every scrape
// from then on, as if removed. What the Collector remembers is one pair
// of numbers per counter series that still exists, and those of
// switches removed or closed (see the package doc, Monotonicity).
//
// The switches a Collector holds have distinct names within a place:
// NewCollector and Add refuse a switch of the name and place of another
// (their series would be one). A registry takes one Collector (see
// Register): put every switch in it. A Collector is safe for concurrent
// use; scrapes are serialised.
type Collector struct {
	st state
}

// NewCollector returns a Collector of sws (nil entries and repeats are
// left out). It returns an error naming the switch when two of sws have
// the same name and place.
func NewCollector(sws ...*sion.Switch) (*Collector, error) {
	c := &Collector{}
	if err := c.st.add(sws...); err != nil {
		return nil, err
	}
	return c, nil
}

// Add adds switches to c; those c holds already and nil are left out.
// It adds none and returns an error naming the switch when one has the
// name and place of a switch c holds (a closed one excepted: Add may
// replace it) or of another of sws.
func (c *Collector) Add(sws ...*sion.Switch) error { return c.st.add(sws...) }

// Remove removes sw from c: its series are no longer exported. c reads
// its counters a last time and keeps what it remembers of them, so that
// a switch of the same name and place added later continues them.
func (c *Collector) Remove(sw *sion.Switch) { c.st.remove(sw) }

// Register registers c with r (prometheus.DefaultRegisterer when nil).
// A registry takes one Collector — every Collector describes the same
// metric families — so when r holds one already Register returns an
// error that names its switches and says to Add c's to it, where
// prometheus.Registerer.Register would only say "duplicate metrics
// collector registration attempted". Other errors are r's.
func (c *Collector) Register(r prometheus.Registerer) error {
	if r == nil {
		r = prometheus.DefaultRegisterer
	}
	err := r.Register(c)
	are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
	if !ok {
		return err
	}
	other, _ := are.ExistingCollector.(*Collector)
	if other == nil || other == c {
		return err
	}
	return fmt.Errorf("metrics: the registry has a Collector already, of %s; a second one would export the same families (and the same series for a switch of the same name and place): Add %s to the first instead", other.names(), c.names())
}

// names lists c's switches as `switch "a" of place "p", …`.
func (c *Collector) names() string {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	if len(c.st.sws) == 0 {
		return "no switch"
	}
	var out []string
	for _, sw := range c.st.sws {
		out = append(out, fmt.Sprintf("switch %q of place %q", sw.Name(), sw.Place().Name()))
	}
	return strings.Join(out, ", ")
}

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

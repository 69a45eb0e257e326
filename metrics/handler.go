package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sion-go/sion"
)

// Handler returns an http.Handler that serves the metrics of sws in the
// Prometheus text and protobuf formats, for a command's /metrics: a
// Collector of sws in a registry of its own, with the Go runtime's and
// the process's collectors (go_… and process_… metrics). A scrape that
// fails answers 500 with the error. Safe for concurrent use. It panics,
// as prometheus.MustRegister does, with NewCollector's error when two of
// sws have the same name and place; use NewCollector and HandlerFor to
// get the error instead.
func Handler(sws ...*sion.Switch) http.Handler {
	c, err := NewCollector(sws...)
	if err != nil {
		panic(err)
	}
	return HandlerFor(c)
}

// HandlerFor is Handler for a Collector the caller holds (to Add and
// Remove switches while it serves).
func HandlerFor(c *Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// Package metrics exports the counters of sion switches as Prometheus
// metrics and as OpenTelemetry metrics.
package metrics

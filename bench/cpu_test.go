package bench

import (
	"runtime"
	"testing"
	"time"
)

// cpuClock measures the CPU time the whole process spends — user and
// system, every goroutine, the garbage collector included — from
// startCPU on, so that a figure on a shared machine does not count the
// time the process waited for a core. It reads getrusage(RUSAGE_SELF),
// where the platform has it (cpu_unix_test.go), whose resolution is the kernel's accounting (microseconds, often
// coarser per thread), fine over the hundreds of milliseconds of a
// benchmark.
type cpuClock struct{ start time.Duration }

// startCPU starts a cpuClock; call it right before the timed loop.
func startCPU() cpuClock { return cpuClock{start: processCPU()} }

// elapsed returns the CPU time spent since startCPU.
func (c cpuClock) elapsed() time.Duration { return processCPU() - c.start }

// report adds the metric "cpu-ns/event": the CPU time since startCPU
// divided by events (nothing when events is 0). Call it right after the
// timed loop. On two cores a pipeline can spend up to twice its wall
// time; compare it with ns/op (per event) or 1/events-per-second.
func (c cpuClock) report(b *testing.B, events int) { reportCPU(b, c.elapsed(), events, "cpu-ns/event") }

// reportCPU adds the metric unit: CPU time d divided by n (nothing when
// n is 0, or where this platform gives no process CPU time: see
// cpuMeasured).
func reportCPU(b *testing.B, d time.Duration, n int, unit string) {
	if cpuMeasured && n > 0 {
		b.ReportMetric(float64(d.Nanoseconds())/float64(n), unit)
	}
}

// collectGarbage runs a full collection before a timed loop whose code
// allocates nothing (Match), so that the collector does not mark the
// harness's garbage — the filters, the oracle — during the loop: the
// process's CPU time counts the collector's, so that a cycle running
// into the loop would be charged to Match (W-SPARSE at 10⁶ filters, 2,000
// events: 58 µs once with the collector on, 43 with GOGC=off).
func collectGarbage() { runtime.GC() }

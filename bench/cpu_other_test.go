//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package bench

import "time"

// cpuMeasured is false: without getrusage the benchmarks report wall time
// only (no cpu-ns metrics rather than zeros).
const cpuMeasured = false

// processCPU returns 0: this platform's process CPU time is not read.
func processCPU() time.Duration { return 0 }

// pageFaults returns 0: this platform's page faults are not read.
func pageFaults() int64 { return 0 }

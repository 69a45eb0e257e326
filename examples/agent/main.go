// Command agent shows S2's agent at work and measures what routing
// interest costs in a place of many switches: first S2's Fig. 1 in a
// managed place (sion.RouteManaged), step by step — the deployment's set A
// and set B with each filter's bag, send flag and confirm flag, the grant,
// the constraints deployed (fig1.go); then S1's whole-filter propagation
// against the modes that shrink it — advertisement pruning, covering,
// both, and the agent — on one workload of real data.
//
//	go run ./examples/agent [-switches 100] [-subs 200] [-events 0] [-producers 4] [-seed 1] [-modes by-filter,managed] [-fig1=false]
//
// The workload (workload.go): a random tree of -switches switches over
// transport/mem in one process; -producers producer sessions, each
// publishing a few seismic networks' share of the USGS week
// (examples/internal/usgs; -events samples that many of its 2,389
// features, 0 takes all) after advertising its event types; consumer
// sessions at random switches with -subs subscriptions in all, 2 to 4
// each, whose filters take their values from the week (magnitude ranges,
// regions, depths, types).
//
// For each mode of modes.go it builds the place anew, runs the workload
// (sim.go) and prints
//
//	mode NAME: control messages per subscription: C  event messages per event: E  deliveries: D exact
//
// — the control messages the subscriptions cost, the event messages the
// publishing cost, and whether every subscription received exactly the
// events filter.BruteForce says it matches, once each — then a line of
// detail per mode, and at the end each mode's ratios to by-filter. Before
// the table it prints the workload and what S1 by-filter must cost on it
// (model.go). It exits with status 1 if any mode is not exact.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"
)

// options are the command's flags.
type options struct {
	workload workloadConfig
	modes    string // the modes to run, comma-separated; "" all
	fig1     bool   // run the Fig. 1 walk-through
}

func main() {
	var o options
	flag.IntVar(&o.workload.switches, "switches", 100, "switches in the place's tree")
	flag.IntVar(&o.workload.subs, "subs", 200, "subscriptions, over consumers of 2 to 4 each")
	flag.IntVar(&o.workload.events, "events", 0, "events published, sampled from the USGS week in its order; 0: all 2,389")
	flag.IntVar(&o.workload.producers, "producers", 4, "producers, each at a switch of its own")
	flag.Uint64Var(&o.workload.seed, "seed", 1, "seed of the workload's random choices")
	flag.StringVar(&o.modes, "modes", "", "the modes to run, comma-separated (by-filter first for the ratios); empty: all")
	flag.BoolVar(&o.fig1, "fig1", true, "walk through S2's Fig. 1 first")
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()

	// The parts of the program, in order; each prints its lines and
	// reports whether its checks held: S2's Fig. 1 step by step
	// (fig1.go), then the table.
	parts := []func(context.Context, options) (bool, error){comparison}
	if o.fig1 {
		parts = append([]func(context.Context, options) (bool, error){fig1}, parts...)
	}
	ok := true
	for _, part := range parts {
		held, err := part(ctx, o)
		if err != nil {
			log.Fatalf("agent: %v", err)
		}
		ok = ok && held
	}
	if !ok {
		os.Exit(1)
	}
}

// comparison runs the workload in every mode and prints the table; it
// reports whether every mode was exact.
func comparison(ctx context.Context, o options) (bool, error) {
	start := time.Now()
	w, err := newWorkload(o.workload)
	if err != nil {
		return false, err
	}
	for _, l := range workloadLines(w, o.workload.seed) {
		fmt.Println(l)
	}
	var results []modeResult
	for _, m := range modes {
		if o.modes != "" && !slices.Contains(strings.Split(o.modes, ","), m.name) {
			continue
		}
		r, err := runMode(ctx, w, m)
		if err != nil {
			return false, fmt.Errorf("mode %s: %w", m.name, err)
		}
		results = append(results, r)
		for _, l := range modeLines(r) {
			fmt.Println(l)
		}
	}
	if len(results) == 0 {
		return false, fmt.Errorf("no mode named in -modes %q", o.modes)
	}
	for _, l := range ratioLines(results) {
		fmt.Println(l)
	}
	fmt.Printf("%d modes in %v\n", len(results), time.Since(start).Round(100*time.Millisecond))
	return !slices.ContainsFunc(results, func(r modeResult) bool { return !r.exact() }), nil
}

// workloadLines describe w and what S1 by-filter must cost on it.
func workloadLines(w *workload, seed uint64) []string {
	var types []string
	for _, p := range w.producers {
		for _, t := range p.types {
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
	}
	keys := map[string]bool{}
	for _, s := range w.subs {
		keys[s.key] = true
	}
	m := w.model()
	return []string{
		fmt.Sprintf("workload: %d switches (random recursive tree, seed %d: depth %d, diameter %d; TTL %d), %d producers publishing %d events of %d types, %d consumers with %d subscriptions (%d distinct filters), %d deliveries wanted",
			w.n, seed, w.depth, w.diameter, w.ttl, len(w.producers), len(w.events), len(types), len(w.consumers), len(w.subs), len(keys), w.wanted),
		fmt.Sprintf("S1 by-filter model: control messages per subscription: %.1f  event messages per event: %.2f (the fewest possible)",
			float64(m.control)/float64(len(w.subs)), float64(m.eventMessages)/float64(len(w.events))),
	}
}

// modeLines are the lines of one mode: its row, then its detail.
func modeLines(r modeResult) []string {
	verdict := "exact"
	if !r.exact() {
		verdict = fmt.Sprintf("NOT exact (%d wanted; %d missing, %d unexpected, %d duplicates, %d dropped)", r.wanted, r.missing, r.unexpected, r.duplicates, r.dropped)
	}
	return []string{
		fmt.Sprintf("mode %s: control messages per subscription: %.1f  event messages per event: %.2f  deliveries: %d %s",
			r.mode, r.controlPerSub(), r.eventsPerEvent(), r.deliveries, verdict),
		fmt.Sprintf("mode %s detail: %d control messages advertising, %d subscribing, %d while publishing; %d event messages; %v",
			r.mode, r.adControl, r.subControl, r.publishControl, r.eventMessages, r.elapsed.Round(100*time.Millisecond)),
	}
}

// ratioLines are each mode's ratios to by-filter (results[0]), and for a
// mode with the goal whether it holds.
func ratioLines(results []modeResult) []string {
	var lines []string
	base := results[0]
	for _, r := range results {
		c := r.controlPerSub() / base.controlPerSub()
		e := r.eventsPerEvent() / base.eventsPerEvent()
		l := fmt.Sprintf("ratio to %s: mode %s: control messages per subscription %.2f  event messages per event %.2f", base.mode, r.mode, c, e)
		if r.goal {
			if c <= 0.5 && e <= 1 {
				l += "  (goal met: control <= 0.5, events <= 1)"
			} else {
				l += "  (goal missed: control <= 0.5, events <= 1)"
			}
		}
		lines = append(lines, l)
	}
	return lines
}

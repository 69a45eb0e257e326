// Command rendezvous runs sion's rendezvous routing (S3) twice: on the
// source's own figures, then on a simulated place of many switches
// publishing real air-quality readings.
//
//	go run ./examples/rendezvous [-n 1000] [-subs 60] [-seed 1]
//
// First, S3's Fig. 2 network (seven switches, two publishers, two XPath
// subscribers) with Fig. 13's traffic: it prints the rendezvous switch's
// load before the bypass, after bypassing the hottest level-2 class
// (Place = YokohamaStation) and, in a second run, after bypassing the
// hottest level-3 class (GlobalPosition ID 0001) — 245, 85 and 145 events
// per second, as in the source.
//
// Then n switches in one process over transport/mem, joined into one
// overlay, carry the Beijing readings of examples/internal/beijing (12
// stations, one event type per pollutant, Zipf-skewed rates and interest;
// see sim.go): it prints the overlay's route lengths and state per switch,
// the control messages a subscription costs against S1's whole-filter
// propagation on a tree of as many switches, the hottest rendezvous
// switch's load against the mean before and after the bypasses, and what
// was delivered; then it kills a tenth of the switches, the busiest
// rendezvous switch among them, in the middle of the stream, and prints
// what is delivered once the overlay has repaired.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 1000, "switches in the simulated place")
	subs := flag.Int("subs", 60, "subscriptions in the simulated place")
	seed := flag.Uint64("seed", 1, "seed of the simulation's random choices")
	figures := flag.Bool("figures", true, "run the source's figures first")
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()
	if *figures {
		figs(ctx)
	}
	start := time.Now()
	simulation(ctx, *n, *subs, *seed, start)
}

// figs runs the source's figures and prints one line for each.
func figs(ctx context.Context) {
	l2, err := runFig2(ctx, 2)
	if err != nil {
		log.Fatalf("rendezvous: Fig. 2, level 2: %v", err)
	}
	l3, err := runFig2(ctx, 3)
	if err != nil {
		log.Fatalf("rendezvous: Fig. 2, level 3: %v", err)
	}
	fmt.Printf("rendezvous load before bypass: %g\n", l2.before)
	fmt.Printf("after bypassing level-2 class %s: %g\n", strings.TrimPrefix(l2.class, figType+"/"), l2.after)
	fmt.Printf("after bypassing level-3 class %s: %g\n", strings.TrimPrefix(l3.class, figType+"/"), l3.after)
}

// simulation runs the simulation and prints its summary.
func simulation(ctx context.Context, n, subs int, seed uint64, start time.Time) {
	r, err := simulate(ctx, simConfig{n: n, subs: subs, seed: seed, hourEvery: 10 * time.Millisecond, stream: 600, kill: 0.1})
	if err != nil {
		log.Fatalf("rendezvous: simulation: %v", err)
	}
	fmt.Printf("simulation: %d switches, %d subscriptions, 12 stations publishing 6 pollutants (%v)\n", r.n, r.subs, time.Since(start).Round(time.Second))
	fmt.Printf("overlay hops to a rendezvous switch: mean %.2f, max %d (bound %d)\n", r.hopsMean, r.hopsMax, r.hopsBound)
	fmt.Printf("overlay state per switch: mean %.1f nodes, max %d; links mean %.1f\n", r.stateMean, r.stateMax, r.linksMean)
	fmt.Printf("control messages per subscription: rendezvous %.1f, S1 by-filter %.1f\n", r.ctlRendezvous, r.ctlS1)
	fmt.Printf("hottest rendezvous switch load / mean: before bypass %.2f, after %.2f (%d classes bypassed)\n", r.hotBefore, r.hotAfter, len(r.bypassed))
	fmt.Printf("delivered %d of %d events\n", r.delivered, r.expected)
	fmt.Printf("killed %d switches including rendezvous switch %s: subscriptions moved to %s; delivered %d of %d events published after repair\n",
		r.killed, r.oldRV, r.newRV, r.deliveredAfter, r.expAft)
}

// Command sites runs S4's edge sites (package site) twice: on the
// source's own figures, then on a simulated system of many sites
// publishing a real week of earthquakes.
//
//	go run ./examples/sites [-sites 50] [-switches 4] [-proxies 5] [-cloud-proxies 2] [-figures=false] [-v]
//
// First, the system of S4 Figs. 4, 9, 20 and 21 (fig.go): a cloud site
// B0 with process B, a site B1 with two switches and a representative
// proxy, a site B2 without a switch. It prints how many inter-site
// subscribe messages process B's subscription to topic B costs, with the
// representative proxy and without (1 and 2), how 1,000 publishes of
// topic A at site B1 split over its two switches (500 500), and whether
// the subscribers received every event exactly once.
//
// Then (sim.go) many edge sites — by default 50 sites × 4 switches × 5
// proxies — and a cloud site, in one process over transport/mem, publish
// the USGS week of examples/internal/usgs, dealt to the sites by the
// seismic network that recorded each quake, to subscribers in the cloud
// and at a few edge sites; once with representative proxies and once
// without. It prints the inter-site subscribe messages of both runs, the
// publish spread, and how many of the events an oracle says each
// subscriber matched it received, with duplicates.
//
// The publish spread is what S4 promises: the proxy that spreads a site's
// publishes (its representative) spreads them so that its counts per
// switch differ by at most one. "publish spread per site" is, at each
// site, max − min of each spreading proxy's own counts per switch
// (site.ProxyStats.Spread), the worst. The next line, "switches' intake
// per site", is max − min of what the switches took in (their EventsIn).
// The two agree when one proxy spread each site and no attempt failed
// over. On a loaded machine they need not: a proxy whose forward to its
// representative fails, or whose representative the site manager
// replaced after not hearing from it for its Timeout, spreads on its own
// counts, each even, their sum not; and a spread attempt not answered
// within a quarter of RequestTimeout goes on to the next switch though the
// first mostly took the event too (each subscriber still receives it
// once). That line says at how many sites more than one proxy spread,
// and how many attempts failed over.
//
// Every subscriber subscribes before the first publish, so it must
// receive every event it matches, the first of each type at each site
// too. On a loaded machine the proxies may place the subscriptions only
// after a type's first publish, and the events are held meanwhile. "events
// held until their subscriptions were placed" counts them
// (site.ProxyStats.Held). "unsettled" counts those that may have missed a
// subscriber all the same (ProxyStats.Unsettled: the site manager stopped
// waiting, or a hold was full).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"
)

func main() {
	sites := flag.Int("sites", 50, "edge sites in the simulation")
	switches := flag.Int("switches", 4, "switches per edge site")
	proxies := flag.Int("proxies", 5, "proxies per edge site")
	cloudProxies := flag.Int("cloud-proxies", 2, "proxies of the cloud site")
	figs := flag.Bool("figures", true, "run the source's figures first")
	verbose := flag.Bool("v", false, "log the site manager's and the proxies' warnings to stderr")
	flag.Parse()
	log.SetFlags(0)
	if *sites < 1 || *switches < 1 || *proxies < 1 || *cloudProxies < 1 {
		log.Fatal("sites: -sites, -switches, -proxies and -cloud-proxies must be at least 1")
	}
	ctx := context.Background()
	var sys systemConfig
	if *verbose {
		sys.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if *figs {
		lines, err := figures(ctx, sys)
		if err != nil {
			log.Fatalf("sites: %v", err)
		}
		for _, l := range lines {
			fmt.Println(l)
		}
	}
	start := time.Now()
	lines, _, _, err := simulation(ctx, simConfig{sites: *sites, switches: *switches, proxies: *proxies, cloudProxies: *cloudProxies, system: sys})
	if err != nil {
		log.Fatalf("sites: %v", err)
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	fmt.Printf("simulation took %v (two runs)\n", time.Since(start).Round(100*time.Millisecond))
}

package sion

import "github.com/sion-go/sion/filter"

// RouteUnconditional floods every event over every link (S1
// unconditional routing).
var RouteUnconditional Routing = flood{}

// flood is S1's unconditional routing: subscriptions register nothing at
// peers; instead every link registers the filter on every event, with TTL
// 0, when it comes up, so each event crosses every link within its own TTL
// (RouteUnconditional). With nothing to prune, a place that requires
// advertisements only has Publish check them.
type flood struct{}

func (flood) String() string { return "unconditional" }

func (flood) attach(sw *Switch) switchRouting {
	return stateless{
		key:      func(*Subscription) (routeKey, int, bool) { return routeKey{}, 0, false },
		perLink:  []routeKey{floodKey},
		checkAds: sw.place.cfg.RequireAdvertisements,
	}
}

// floodKey is what a link registers at its peer when the place routes
// unconditionally: every event, no further.
var floodKey = newRouteKey(filter.MustCompile("{}").String(), nil)

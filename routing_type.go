package sion

import (
	"strconv"

	"github.com/sion-go/sion/filter"
)

// RouteByEventType propagates only the event types of filters (S1
// "vocabulary concept"). With PlaceConfig.RequireAdvertisements a type
// goes only toward links behind which an advertisement overlaps it.
var RouteByEventType Routing = byEventType{}

// byEventType is S1's routing by event type ("vocabulary concept"): each
// subscription registers only its filter's event type at the peers within
// its TTL, so subscriptions to one type share one key per link and a link
// carries every event of the types some filter behind it names
// (RouteByEventType).
type byEventType struct{}

func (byEventType) String() string { return "by-event-type" }

func (byEventType) key(sub *Subscription) (routeKey, int, bool) {
	if sub.ttl < 1 {
		return routeKey{}, 0, false
	}
	return newRouteKey(typeFilter(sub.f.Type()), sub.places), sub.ttl - 1, true
}

// attach gives sw nothing of its own, or, in a place that requires
// advertisements, the advertisement table that prunes propagation
// (routing_advertised.go).
func (b byEventType) attach(sw *Switch) switchRouting {
	if sw.place.cfg.RequireAdvertisements {
		return newAdvertised(sw, b.key)
	}
	return stateless{key: b.key}
}

// typeFilter returns the text of the filter on event type t alone; t
// is quoted, since type names may hold spaces ("ice quake").
func typeFilter(t string) string { return typeOnly(t).String() }

// typeOnly returns the filter on event type t alone.
func typeOnly(t string) *filter.Filter {
	return filter.MustCompile("{type ⊑ " + strconv.Quote(t) + "}")
}

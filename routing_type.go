package sion

import "github.com/sion-go/sion/filter"

// RouteByEventType propagates only the event types of filters (S1
// "vocabulary concept").
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

func (b byEventType) attach(*Switch) switchRouting { return stateless{key: b.key} }

// typeFilter returns the text of the filter on event type t alone.
func typeFilter(t string) string {
	return filter.MustCompile("{type ⊑ " + t + "}").String()
}

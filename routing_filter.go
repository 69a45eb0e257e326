package sion

// RouteByFilter propagates whole filters (S1 "vocabulary"): a link
// carries only the events some filter behind it matches. The default
// routing of a place. With PlaceConfig.RequireAdvertisements a filter
// goes only toward links behind which an advertisement overlaps its type.
var RouteByFilter Routing = byFilter{}

// byFilter is S1's routing by whole filter ("vocabulary"): each
// subscription registers its own filter at the peers within its TTL, so a
// link carries only the events some filter behind it matches. The
// default routing of a place (RouteByFilter).
type byFilter struct{}

func (byFilter) String() string { return "by-filter" }

func (byFilter) key(sub *Subscription) (routeKey, int, bool) {
	if sub.ttl < 1 {
		return routeKey{}, 0, false
	}
	return newRouteKey(sub.f.String(), sub.places), sub.ttl - 1, true
}

// attach gives sw nothing of its own, or, in a place that requires
// advertisements, the advertisement table that prunes propagation
// (routing_advertised.go).
func (b byFilter) attach(sw *Switch) switchRouting {
	if sw.place.cfg.RequireAdvertisements {
		return newAdvertised(sw, b.key)
	}
	return stateless{key: b.key}
}

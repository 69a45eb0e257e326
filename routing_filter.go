package sion

// RouteByFilter propagates whole filters (S1 "vocabulary"): a link
// carries only the events some filter behind it matches. The default
// routing of a place.
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

func (b byFilter) attach(*Switch) switchRouting { return stateless{key: b.key} }

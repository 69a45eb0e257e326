// Package manage is sion's management view (S1 SION-MT, the "GUI tool"
// of a SION network): an http.Handler that serves one switch's state as
// JSON, in the manner of NATS monitoring, and a page that draws the
// place as a graph from those endpoints.
//
//	h := manage.New(sw, manage.Config{Addr: "10.0.0.1:4747",
//		Peers: map[string]string{"b": "http://10.0.0.2:8747"}})
//	go http.Serve(l, h)
//
// Endpoints, GET or HEAD only (another method: 405 with an Allow
// header). Every /api response is a JSON object with "switch" (whose view
// it is) and "now" (when it was taken, RFC 3339 UTC); errors are
// {"error": "manage: …"}, naming the query parameter at fault, with
// status 400 (a malformed query string; a parameter the endpoint does
// not take, or given twice; a bad value — /healthz ignores its query), 404 (no such endpoint), 405,
// 414 (a URL over MaxURLBytes) or 503 (busy, below). Field names are the
// core structs' in snake_case (EventsSent → events_sent), made by
// reflection, so a counter the core
// adds to Stats, LinkInfo, RouteInfo, GatewayInfo or SessionInfo appears
// here without a change; times are RFC 3339 (null when zero), states
// their names ("up", "active"). The JSON endpoints send
// Access-Control-Allow-Origin: * so that a neighbour's page can read them.
//
//	/api/switch    name, place, addr (Config.Addr), state (sion.State),
//	               uptime (of the handler), peers (Config.Peers: name →
//	               management URL), stats (sion.Stats)
//	/api/links     links: [sion.LinkInfo] — peer, parent, state, since,
//	               events_sent, events_received, control_sent, …, routes,
//	               proxies
//	/api/routes    total, offset, limit, routes: [sion.RouteInfo] — peer,
//	               filter, ttl, refs, acknowledged, covered_by, places,
//	               gateway; ?peer=NAME keeps one peer's
//	/api/gateways  gateways: [sion.GatewayInfo] — name, peer, peer_place,
//	               requested, state, since, import, export, routes,
//	               proxies, filters (at most Config.MaxFilters, 100),
//	               num_filters, truncated
//	/api/sessions  total, offset, limit, sessions: [sion.SessionInfo
//	               without its subscriptions, plus num_subscriptions and
//	               the sums of their matched, delivered, dropped, and slow:
//	               whether any is a slow consumer]; ?subs=1 adds
//	               subscriptions: [{id, matched, delivered, dropped,
//	               spilled, queued, slow, filters, num_filters}] and
//	               truncated (below); ?kind=local|remote|link|overlay|
//	               gateway keeps one kind
//	/healthz       {"status": "ok"} (200) while the switch is open;
//	               {"status": "closed"} (503) once it is closed; its
//	               query is ignored, as probes may add one
//	/              the page (index.html, sion.css, sion.js, embedded)
//
// /api/routes and /api/sessions list at most limit entries from offset
// (query parameters; the default limit is Config.DefaultLimit, 1024, and
// a request may ask up to Config.MaxLimit, 10000; a larger limit is
// refused, 400), as NATS's connz does, so that a switch with a million
// proxy filters does not write them all by default; total counts them
// all. With ?subs=1, which lists filters, the default limit is
// Config.SubsDefaultLimit (100 sessions) and the most
// Config.SubsMaxLimit (1000), and each session lists at most
// Config.MaxFilters (100) filters over its subscriptions in ID order:
// when it has more, it says "truncated": true, the subscriptions past
// the budget are left out and the last one listed may show only some
// of its filters (num_subscriptions and num_filters count them all).
//
// The snapshot behind one response costs time in proportion to the
// switch's routes or sessions (Switch.Routes, Switch.Sessions), so at
// most Config.MaxConcurrent (4) /api requests take and encode theirs at
// once; one beyond waits for a slot up to Config.MaxWait (1 s) or until
// its request's context ends, and is then answered 503 with
// Retry-After: 1. /healthz takes no slot.
//
// Every response says X-Content-Type-Options: nosniff, Referrer-Policy:
// no-referrer and X-Frame-Options: DENY. The page's
// Content-Security-Policy is default-src 'self' with no inline script or
// style, and connect-src 'self' http: https:, because the page reads the
// views of switches it learns of from one another's "peers", which this
// handler does not know; the API's is default-src 'none'.
//
// The page reads this switch's endpoints every 1.5 s and, for each shared
// link whose peer has a management URL in "peers", that peer's endpoints
// (cross-origin; hence the CORS header), and so on from there, and draws
// every switch it reached as the tree the links make, roots on top:
// nodes are switches (data-switch="NAME"; a
// dashed one is a peer whose view it could not read; red, data-slow, one
// with a slow consumer), edges are shared links (data-link="CHILD->PARENT",
// an arrow from the switch that requested the link to its parent) with
// events/s each way from successive counters, and under each link the
// filters each end propagated to the other with their reference counts
// (text elements with class "route" and data-from, data-to, data-filter,
// data-refs); gateways are edges (data-gateway="NAME") to nodes of other
// places (data-place). Clicking a neighbour opens its own page. It needs
// no internet access. Names and filters come from the network: the page
// puts them in the document only as text and attribute values, never as
// HTML, draws at most 40 characters of a name and 120 of a filter (the
// whole text is the element's tooltip and its data-* value), and
// follows only http and https management URLs.
package manage

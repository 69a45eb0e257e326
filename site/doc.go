// Package site builds S4's edge sites on sion (DESIGN.md, "Beyond one
// tree"; the source is JP7207145B2): a site manager, proxies and
// representative proxies, for switches run at many locations — factories,
// stations, vehicles — and in a cloud. Applications dial a proxy of their
// site as they would dial a switch and never learn which switch serves
// which event type where; a subscription from one site crosses to another
// once, to that site's representative proxy, however many switches serve
// there; and publishes spread evenly over a site's switches.
//
// # Terms
//
// In this package S4's own terms are used. A site is a group of switches
// at one location (S4's "base"). A broker is a sion switch. The site
// manager (Manager; S4's site management unit) is the directory: per site
// its ID, the address of its representative proxy, the addresses of its
// switches, its proxies and what their subscriptions need, and the event
// types published at its switches. A proxy (Proxy) is what applications
// dial; the representative proxy of a site is the one proxy of the site
// that the other sites' proxies send subscriptions to and its own proxies
// hand publishes to. The broker management information is the
// representative's table of switch → event types it has spread there.
//
// # How it is built
//
// Only the public API of package sion is used, and one seam of it made for
// this: sion.Relay. A proxy's front is a sion.Switch whose relay is the
// proxy, so that applications' sessions — local (Proxy.Open) or remote
// (sion.Dial to the proxy's address), with the place's admission — are
// ordinary sion sessions, while the events they publish and subscribe to
// are matched on the site's switches. Events keep their IDs from one end
// to the other (sion.Event.ID), and every front drops an ID it has seen:
// an event reaches each subscription once, even while a subscription moves
// from one representative proxy to another. The site manager is a
// sion.Switch whose relay is the manager, in an event place of its own:
// proxies hold remote sessions there, publish their requests as events of
// type RequestType and receive the answers (AnswerType) and the
// directory's changes (ChangeType) through subscriptions.
//
// # Publishing
//
// A proxy asks the site manager where its site publishes (S4 Fig. 14, 15);
// the answer is cached, and the first publish of an event type registers
// the type at the site. One switch: the proxy publishes there. Several:
// it hands the event to the site's representative proxy, which spreads
// the publishes over the switches so that the counts per switch differ by
// at most one (Fig. 17, 20). A site without switches publishes at the
// fallback site's (ManagerConfig.Fallback; S4: the cloud's broker).
//
// Even the first event of a type new at its site reaches the
// subscriptions that need the type: the site manager announces the type,
// and the proxies whose subscriptions need it place them there and
// acknowledge the change once their placements at that site have been
// granted (a proxy acknowledges all the changes it acted on in one
// request). The answer to the first publish — and to the other proxies'
// publishes of the type meanwhile — waits for those acknowledgements for
// at most ManagerConfig.SettleTimeout. Past it, the proxies of the site
// hold the type's events (ProxyStats.Held; at most ProxyConfig.MaxHeld
// each) and publish them, in order, once the manager tells them that
// every such proxy has acknowledged; a publish of the type meanwhile is
// held too. The manager stops holding them, and they are published, when
// a proxy still awaited becomes unreachable or ManagerConfig.HoldTimeout
// has passed since the first publish. Every event that may have missed a
// subscription so is counted in ProxyStats.Unsettled (and logged): those
// published after such a release, or without the manager's word within
// HoldTimeout and a RequestTimeout, or when the manager restarted; those
// beyond MaxHeld, published at once; those of a type published while the
// manager did not answer (it had not registered the type); and those a
// proxy held when it closed or could not publish. S4 does not say what
// reaches a subscription placed after its type's first publish; holding
// rather than dropping is sion's choice.
//
// # Subscribing
//
// A proxy asks the site manager which sites publish the filter's event
// type or one of its subtypes (inheritance holds: a subscription to Alarm
// reaches the sites that publish FireAlarm). It subscribes at its own
// site's switches directly, and sends the subscription once to each
// remote site's representative proxy (Fig. 18, 21), which subscribes at
// the switches of its site that carry the type (Fig. 19) and sends their
// events back. (A remote site of one switch is subscribed at that switch:
// one message either way, and one hop less for its events; so is a site
// whose representative proxy is being replaced, until it is.) Identical filters are placed once per destination,
// reference-counted: two subscribers to one filter at a proxy cross to a
// site once. Cancelling a subscription, or closing its session, withdraws
// it everywhere. Content filters travel whole, so only matching events
// cross between sites.
//
// # Failure
//
// Proxies register with the site manager every ProxyConfig.Refresh. One
// not heard from for ManagerConfig.Timeout, or whose session with the
// manager ended, is marked unreachable in the directory (Manager.Sites),
// and if it was its site's representative proxy, another reachable proxy
// of the site takes its place (the one with the lowest name; with none,
// the next that asks); the other proxies, told of the change, place their
// subscriptions at the new representative, which places them at its
// switches before the first event of their type reaches one — nothing
// published after they have done so is lost. Until then a proxy whose
// session with a representative is down places its subscriptions at that
// site's switches directly (what is placed stays until the new places
// have it), and a proxy that cannot reach its own representative spreads
// its publishes itself and reports it (it counts them in
// ProxyStats.Unsettled: the other sites' subscriptions, placed through the
// representative, may not be at the switch it chose); so the loss is
// bounded by the time
// it takes a proxy to see a session end (at once for a proxy that closed;
// a transport's heartbeat for one that died) and then to place its
// subscriptions at the new representative. An event that the new
// representative spreads before a proxy's subscription has reached it
// misses that subscription unless the old representative's placement at
// that switch still stands, and it is not counted (ProxyStats.Unsettled
// covers the first events of a type new at a site only); a
// representative proxy not heard from for Timeout is replaced though it
// may merely be slow. A switch whose session is
// down is left out of the spread until it is back, and then counts from
// the others' fewest; one merely slow to answer stays in it (a spread
// attempt not answered within a quarter of RequestTimeout goes on to the
// next switch, and keeps its count where it was sent). While the site manager is away the proxies work on
// their cached answers; when it returns (or restarts, its state in memory
// lost) every proxy registers again at once with its whole state, so the
// directory is rebuilt within one Refresh, a representative proxy keeps
// its role, and every proxy forgets its cache (it may have missed
// changes) and asks again — adding places on a new manager's word but
// dropping none until it has had its Timeout to hear every proxy again.
// A destination that cannot be dialled is left untried for a doubling
// while (Refresh up to 10 s), so it costs one RequestTimeout, not one per
// Subscribe.
//
// # Trust
//
// The site manager trusts every session its place admits
// (ManagerConfig.SharedKey, Admit): any may register a proxy of any site,
// report that site's switches, and become its representative proxy. A
// proxy's name is bound to its session while that session is open.
// ManagerConfig.Authorize binds names to sites and addresses where proxies
// are not all trusted alike. The manager's state is bounded
// (ManagerConfig.MaxSites, MaxProxies, MaxTypesPerSite, MaxTypes); at a
// bound it forgets what is least current. A proxy that lets SettleTimeout
// pass without acknowledging a change is not waited for again until it
// acknowledges one, so no session holds every first publish for
// SettleTimeout; the events are still held for it, up to HoldTimeout. So a
// session that registers as a proxy needing every type and never
// acknowledges delays the first events of each type new at a site by
// HoldTimeout, and has them counted as unsettled. Caller-set event IDs are trusted too (sion.Event.ID): a
// publisher that reuses another's ID suppresses that event.
//
// # Concurrency
//
// Manager and Proxy are safe for concurrent use; Close is idempotent and
// waits for their goroutines.
package site

// Package sion is semantic publish/subscribe: entities publish events
// described by their meaning — an event type from an ontology, typed
// attributes, a JSON or XML payload — and subscribe with filters over that
// meaning (see the filter package). This package holds what has a session
// or a link: event places, switches, sessions, subscriptions, delivery,
// and the shared links and routers that make a place of many switches
// (S1, the SION semantic information network; S2 subscription contracts;
// DESIGN.md "One mechanism", "Delivery" and "Network").
//
// # Terms
//
//   - Event place: a scope in which events spread, with one ontology, its
//     defaults (TTL, routing mode) and an admission hook (EventPlace).
//   - Switch: the semantic information switch (S1 SI-SW). Sessions attach
//     to it; it holds all their filters in one filter.Index and, for each
//     event published, fires every session whose filters match.
//   - Session: an entity's connection to a switch. It publishes, registers
//     subscriptions, has a profile and a look-in spool. Its filters are
//     OR-ed: it fires at most once per event.
//   - Subscription: one or more filters of a session, OR-ed, with its own
//     bounded queue (Session.Subscribe, SubscribeFilter, SubscribeFilters);
//     it receives each event that matches once, however its filters
//     overlap with each other and with others (inheritance, "*", content).
//   - Delivery: an event as a session receives it, with the subscriptions
//     that matched and their scores (the control information given to the
//     receiver).
//   - Look-in: delivery by pull (S1): events wait in the session's spool
//     until the entity calls Session.Pull.
//   - Patronage: reverse matching (S1): an event's condition over the
//     receivers' profiles decides which sessions may receive it.
//   - Slow consumer: a subscription whose queue overflowed; by default it
//     loses the newest events (counted), never delaying anyone else.
//   - Remote session: a session whose entity runs elsewhere: Dial connects
//     it over a transport (transport.Transport; mem in one process) to a
//     switch that serves it (Switch.Serve), with the same API as a local
//     one. Frames use the versioned, bounded wire codec; a session fires
//     once per event, one Deliver frame for all its subscriptions. What
//     the switch sends a remote session is its stream: numbered frames
//     the entity confirms, held until then, up to the session's
//     retention in bytes (ReconnectPolicy.RetentionBytes); so an event
//     the switch matched for it is either received or counted dropped.
//   - Reconnect and retention: a remote session whose connection fails
//     reconnects (ReconnectPolicy), while the switch keeps it for its
//     retention: its subscriptions go on matching and their events wait
//     in its stream. One that returns in time resumes and receives them,
//     each once; later, it is opened anew and told what it lost
//     (ConnectionEvent).
//   - Shared link: a link between two switches of a place (S1), made by
//     one switch's establishment request (Switch.Link) to a switch that
//     serves (Switch.Serve). The requester's peer is its parent; a switch
//     makes at most one request and accepts any number, so the links of a
//     place form a tree. A link that fails is re-established, and both
//     sides then re-send their filters.
//   - Router: one end of a link (S1 SI-R): of a shared link, or of a
//     gateway. It holds a session on its switch whose filters are the
//     proxy filters the peer registered — what fires there crosses the
//     link, never back where it came from — and registers at the peer what
//     its own switch needs, as the place's Routing says: whole filters
//     (RouteByFilter), their event types (RouteByEventType), or everything
//     (RouteUnconditional), each key reference-counted (register on 0→1,
//     release on 1→0). With PlaceConfig.Covering, a key that a key
//     registered over the same shared link covers (filter.Covers, the
//     same places, at least its TTL) is counted under that one instead.
//   - TTL and hops: a filter spreads at most its TTL links from its
//     switch (WithTTL, default the place's); an event crosses at most its
//     TTL links (Control.TTL) and counts them (Control.Hops). An event ID
//     seen twice is dropped.
//   - Subscription contract (S2): on a switch with shared links,
//     Subscribe returns once every switch within the filter's TTL has the
//     filter active: each router acknowledges a register after installing
//     it and hearing back from the links it propagated it on. A timeout
//     (PlaceConfig.ContractTimeout) refuses the subscription with
//     ErrNotGranted and releases what was installed.
//   - Gateway (S1 SI-GW): a link between switches of two
//     places (Switch.Federate, approved by PlaceConfig.Federation), whose
//     ends are routers. The requesting switch holds a Mapping and firewall
//     filters per direction: interest from the target place is converted
//     backwards (filter.Derive) and intersected with the firewall
//     (filter.Conjoin) before it is registered in the source place;
//     events are checked and converted as they cross. Control.Path and
//     PlaceTTL keep events from returning to a place or crossing too many
//     gateways; interest carries the places it came through likewise.
//   - Membership (S1): a switch is Suspended until it serves or links,
//     Active while it does, NonExistent once closed. Each child probes
//     its ancestors (Probe, n hops toward parents) and re-links to the
//     nearest that answers when its parent fails; a leaving switch
//     (Leave) tells its children to link to its parent, or elects one as
//     the new root. Absorb, LinkConfig.Merge and SharedLink.Close absorb
//     a switch, combine places and split them.
//   - Entity (S1, entity.go, discovery.go, search.go): one switch per
//     place it belongs to, discovery by UDP broadcast (transport/udp) into
//     the base place, advertisement of its properties as one filter per
//     place on DiscoveryType events addressed to its identifiers, and
//     event-place search (Entity.Search), which joins places through the
//     entities that answer. Discovery events are the one reserved type
//     routed like user events (ontology.IsRouted); gateways do not carry
//     them.
//   - Admission (S1 security assurance unit): the place's Admit hook
//     decides on every session and link; with PlaceConfig.SharedKey an
//     entity must also prove it knows the key (HMAC-SHA256 challenge and
//     response over fresh nonces; the switch proves it too). Until a peer
//     is admitted it costs the switch a bounded amount: one handshake
//     deadline (SwitchConfig.HandshakeTimeout), a bounded table of
//     handshakes that evicts the busiest source's oldest
//     (MaxHandshakes), handshake frames of at most
//     MaxHandshakeFrameBytes, and the transport's own bounds (see
//     Switch.Serve); refusals are logged at most once per source, and 64
//     times in all, every 10 s.
//   - Rendezvous routing (S3, RouteByRendezvous): the switches of a place
//     form a structured overlay instead of a tree (Switch.Join): each has
//     a 128-bit ID (the SHA-256 of its name, cut to 16 bytes) and a
//     Pastry routing table and leaf set (internal/overlay), and keeps a
//     shared link — an overlay link — to each node of them. The
//     rendezvous switch of an event type is the live switch whose ID is
//     closest to the hash of the type's name; a key's route takes at most
//     ⌈log₁₆ N⌉ + 2 hops and never loops, since each hop is strictly
//     closer to the key, so the place needs no tree rule.
//   - Advertisement (S3, Session.Advertise): the event types (and
//     attribute values) a session will publish. It travels hop by hop
//     toward the rendezvous switch of its type and of each subtype; every
//     switch on the way keeps it in its advertisement table (type,
//     attribute detail, sources, next hop) and registers the type at the
//     link it came from, so that events of the type flow toward the
//     rendezvous switch. A subscription travels the same way, narrowed to
//     each type it covers, and the proxy filters it leaves on the way are
//     the request table; events follow advertisement paths in and request
//     paths out, each type's paths a tree rooted at its rendezvous switch.
//   - Traffic per class and bypass (S3): the rendezvous switch measures
//     the rate of each event class — the type; the type and a first-level
//     attribute's value; the type and a lowest-level one's
//     (RendezvousConfig.Classes) — and, above RendezvousConfig.Threshold,
//     takes its hottest class off itself: the branch point (the first
//     switch downstream where the class's requests fork) and the merge
//     point (the first upstream where its advertisements merge) are found
//     by path changes along the tables, and the merge point sends the
//     class straight to the branch point (bypass.go).
//   - Managed place (S2, RouteManaged, routing_managed.go): the switches
//     propagate no interest; an Agent (agent.go, agent_model.go,
//     agent_deploy.go; agent_conn.go is the switch's end of its
//     connection) keeps the network model — links, advertisements
//     (producers), subscriptions (consumers) — and deploys the optimal
//     constraint of every network filter (a link direction: what its
//     upstream switch forwards, as proxy subscriptions there) with S2's
//     procedure: set A, set B, per model filter a bag, a send flag and a
//     confirm flag; in-band bleeder messages prove to each filter that
//     the filters upstream have their new constraints; the agent grants
//     a subscription or advertisement when every confirm flag is set, and
//     refuses it and rolls back when its timer expires.
//   - Covering (beyond S1, PlaceConfig.Covering, routes_cover.go): over a
//     shared link, a filter that one registered there already covers
//     (filter.Covers) is counted under it instead of registered.
//   - Relay (S4, SwitchConfig.Relay, relay.go): code outside the switch
//     that carries its own entities' publishes and subscriptions elsewhere
//     and brings the matching events back (RelayPort.Deliver), delivered
//     as if they had arrived over a link. The switch is the relay's front:
//     its sessions do not see the difference. Package site builds S4's
//     proxies and site manager as relays.
//   - Control: what travels between two neighbouring switches to run
//     their link — link and federation requests and accepts, registers and
//     releases of proxy filters, markers and acknowledgements, probes,
//     Leave, and in a rendezvous place the overlay's join, leave and
//     repair, advertisements and the bypass's path changes, in an S1
//     place that requires advertisements its advertisement table, in a
//     managed place the bleeders — is
//     link-local: typed messages (internal/linkctl) in the same
//     ordered stream as the link's data events, so that a marker proves
//     the order (S2). Control that must find its way by meaning —
//     discovery and its answers — travels as events of reserved "sion."
//     types (ontology.DiscoveryType), matched by the same index as user
//     events. DESIGN.md "One mechanism" says which is which and why.
//
// # Seams
//
// Four small interfaces keep one mechanism in the code: a new mechanism
// is a new implementation, not a branch in shared code (DESIGN.md
// "Seams"):
//
//   - the link end (linkEnd, router.go): what one end of a link does with
//     interest, proxy filters, events and the control only its kind
//     carries. The shared link's end (link.go), the gateway's
//     (gateway_end.go) and the overlay link's (overlay_end.go: a shared
//     link outside any tree, carrying an event only along its type's tree
//     and the bypass rules) implement it; one
//     requester (requester.go) dials, requests and supervises both kinds,
//     and one accepting side (accept.go) dispatches a request by its type.
//   - the sink (sink.go): where a session's matches go — its own queues
//     and spool, a remote session's stream (remote_switch.go), or a
//     router's link. Sessions are made by newSession, subscriptions by
//     newSubscription, and both outbound streams queue their frames in one
//     queue type with one drop accounting (queue.go).
//   - the routing (Routing, routing.go): which keys a subscription
//     registers at which peers, through the part of it each switch keeps
//     (switchRouting: told of links coming and going, of advertisements
//     and publishes, of subscriptions routed and ended, and handed the
//     control it carries over shared links of its own and an agent's
//     request); by filter, by event type and flood are its stateless
//     implementations (routing_filter.go, routing_type.go,
//     routing_flood.go) — the first two stateful, with an advertisement
//     table that prunes propagation, in a place that requires
//     advertisements (routing_advertised.go, advertised_info.go) —
//     rendezvous its stateful one
//     (routing_rendezvous.go, with overlay_member.go, overlay_end.go,
//     advert.go, bypass.go and rendezvous_info.go), managed the one whose
//     keys come from its agent (routing_managed.go).
//   - the front (front, relay.go): what the switch does with its own
//     entities' publishes and subscriptions — match them here
//     (localFront), or hand them to an exported Relay (relayFront), the
//     one seam code outside the package implements (package site).
//
// # How an event travels
//
// Published on a switch, to a local subscriber: session.go
// (Session.Publish) → switch.go (Switch.inject) → eventplace.go (the
// place admits it: EventPlace.admit) → switch.go (deliver: the
// filter.Index matches it; fire, once per session) → sink.go (localSink)
// → subscription.go (the subscription's queue, under its overflow
// policy; or session.go's look-in spool) → the entity (Subscription.C,
// Next, a handler, Session.Pull).
//
// Over a shared link, from there: switch.go (fire, for the router's
// session, whose proxy filter matched) → sink.go (the router as a sink) →
// router.go (forward, to the link's end) → link.go (sharedEnd.forward: TTL
// and hops, the Forward frame made once for every link) → router.go and
// queue.go (the link's queue and writer) → the transport → on the peer,
// router.go (read) → link.go (sharedEnd.receive, readmit) → eventplace.go
// (the place admits it again) → seen.go (the seen-ID set) → switch.go
// (deliver, on that switch, to its sessions and its other links, never
// back).
//
// Through a gateway: as over a shared link as far as router.go, then
// gateway_end.go (gatewayEnd.forward: PlaceTTL, the place path, the
// firewall and the Mapping of gateway_conv.go at the requesting end) →
// router.go and queue.go → the transport → the other place's router.go →
// gateway_end.go (receive: converted at the requesting end, admitted by
// the other place, eventplace.go) → switch.go (deliver, in that place).
//
// In a place routed by rendezvous (S3): session.go (Publish) → switch.go
// (publish: the place admits it, the routing checks that the session
// advertised it and counts it at its rendezvous switch) → switch.go
// (deliver) → sink.go (the router of the overlay link toward the
// rendezvous switch, whose peer registered the type when the advertisement
// passed) → overlay_end.go (forward: only under a proxy filter of the
// event's own type, and as the bypass rules it read when it was matched
// say, bypass.go) → … → on each switch,
// overlay_end.go (receive: counted if this is the rendezvous switch) →
// switch.go (deliver: up the advertisement path, and down the request
// paths that meet it, never back).
//
// To and from a remote session: remote.go (the entity's Publish, a
// Publish frame of the wire codec) → the transport → remote_switch.go
// (remoteEnd.read, on the connection serve.go accepted) → session.go
// (Session.Publish on the switch's side) → switch.go (inject, deliver) →
// remote_switch.go (remoteEnd.fire: the remote end as a sink) →
// remote_stream.go (the session's stream: numbered, confirmed, held for
// its retention) → remote_switch.go (write) → the transport →
// remote_reconnect.go (the entity's reader) → remote.go (deliver) →
// subscription.go (the queues) or session.go (the spool).
//
// # Delivery
//
// Publish validates the event against the place (type, attribute kinds,
// NaN and ±Inf refused, payload well-formed), matches it and puts it into
// every matching subscription's queue before it returns; it never waits
// for a consumer unless a subscription chose WithOverflow(Block). Events
// published from one goroutine reach each subscription in order.
//
// # Concurrency and lock order
//
// Switch, Session, Subscription, SharedLink, Gateway and Entity are safe
// for concurrent use. No lock is held while user code (handlers,
// callbacks, admission hooks) runs, except Entity's state lock around
// OnStateChange (which must not call Close). A Logger's handler
// (SwitchConfig, SessionConfig, EntityConfig) may be called with any of
// the locks below held: it must not call back into
// sion (a handler that publishes through the session it logs for would
// wait for itself). filter.Index has its own writer lock, taken under
// member.advMu, Gateway.reMu and gatewayEnd.proxyMu only — never under
// Switch.routeMu or anything after it — and never while it matches; the
// refusal log's limiters (internal/guard) have leaf locks. Locks,
// outermost first; a lock may be taken while holding only locks above it:
//
//  1. Entity: member.advMu (serializes advertising) and Entity.stateMu
//     (serializes OnStateChange), before Entity.mu; advMu then subscribes,
//     taking the locks below.
//  2. The entity's side of a remote session (remote.go): remoteClient's
//     pullMu (one Pull at a time), before sendMu (orders requests by
//     number), before remoteClient.mu; pullMu may take the session spool's
//     lock and Session.mu; sendMu may take Session.mu and a
//     Subscription's mu.
//  3. Gateway.reMu (SetMapping, SetFirewall), before gatewayEnd.proxyMu
//     and Switch.routeMu.
//  4. gatewayEnd.proxyMu (the other place's interest installed here),
//     before filter.Index's writer lock, Switch.routeMu and everything a
//     subscription's install and cancel take; never taken under routeMu.
//  5. Switch.routeMu (orders filter propagation), before rvSwitch.mu,
//     gatewayEnd.routeMu, Switch.mu and a router's mu; never held while a
//     frame is sent.
//  6. rvSwitch.mu (a rendezvous place's overlay table, links,
//     advertisement table, bypass roles), before Switch.mu (a bypass
//     counts the request table's next hops), a router's mu (registers,
//     acknowledged messages) and the traffic meters' leaf locks;
//     rendezvous.mu (the names of hashed IDs) is a leaf.
//  7. gatewayEnd.routeMu (this place's interest registered at the other
//     place), before the router's mu.
//  8. Switch.mu, before SharedLink.mu (Link's refusal), a requester's mu
//     (acceptLink's tree check) and remoteEnd.mu (Switch.Close's goodbye);
//     otherwise it is released before another lock is taken.
//  9. router.mu (routes, acknowledgements), before router.qmu (its queue)
//     and Session.mu (Links counts its proxies).
//  10. Leaves — no other lock is taken while one is held: Subscription.mu
//     (a publisher holds it for reading while it offers an event to the
//     queue, cancel for writing), router.qmu, SharedLink.mu, Gateway.mu, a
//     requester's (its link's router, failures and stop), Session.mu, the
//     spool's lock, the stream's lock, remoteEnd.mu, Switch.probeMu (the
//     probe registry), seenIDs.mu (the seen-ID set), remoteClient.mu,
//     Entity.mu, member.mu.
//
// Goroutines, each with an owner that stops it and waits: a subscription
// with a handler has one, owned by its session (Session.Close,
// Switch.Close). A router has a reader, a writer, a watcher until the
// link is up and one goroutine per register or marker waiting for
// acknowledgements from further links; they end with the link
// (SharedLink.Close, Gateway.Close, Switch.Close, the connection's end),
// which waits for them. A requested link or gateway has a supervisor
// (requester.go) that re-establishes it, stopped by its Close or
// Switch.Close; once one has begun, it starts no attempt and keeps none
// that completes (Gateway.Close stops it before it sends the Leave, on
// which the other end closes the link). Each connection Serve accepted
// has one goroutine for as
// long as it serves: the handshake, then the remote session's reader, or
// the wait for its link to end. The switch's side of a remote session
// serves each connection with a reader and a writer; while its
// entity is away, one goroutine waits for the retention to pass; its
// Subscribe, Advertise and Pull requests run in goroutines of their own;
// they end with the session (whose Close waits) or Switch.Close. The
// entity's side has a reader that reconnects and a goroutine that
// confirms what arrived; Session.Close stops both. A switch of a place
// routed by rendezvous has a rerouter (it moves subscriptions and
// advertisements when the overlay changes, and looks at the traffic a
// tenth of a window at a time), one goroutine per overlay link it dials
// (the dial, then the link's supervisor), and short-lived ones that
// answer a newcomer once its link is up, set a bypass up at a merge point
// or remove a bypass's filter; Switch.Close (rvSwitch.close) stops and
// waits for them all. When the rerouter moves registrations to other
// links, one goroutine per reroute waits for the new registers'
// acknowledgements (or the place's ContractTimeout) before it releases
// the old registrations (Switch.releaseAfter); Switch.Close stops and
// waits for those too. An Entity has three
// (probe answers, its probes' answers, its life cycle) and one per piece
// of work started for it (a Serve, a discovery answer), all stopped by
// Entity.Close.
package sion

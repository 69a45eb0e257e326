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
//   - Subscription: one filter of a session with its own bounded queue; it
//     receives each event that matches once, however its filter overlaps
//     with others (inheritance, "*", content).
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
//   - Router: one end of a shared link (S1 SI-R). It holds a session on
//     its switch whose filters are the proxy filters the peer registered
//     — what fires there crosses the link, never back where it came from —
//     and registers at the peer what its own switch needs: whole filters,
//     their event types, or everything, by the place's routing mode, each
//     key reference-counted (register on 0→1, release on 1→0).
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
//   - Gateway (S1 SI-GW, gateway.go): a link between switches of two
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
//   - Control events: link requests, registers, releases, markers and
//     acknowledgements travel as events of reserved "sion." types (ontology.RegisterType, …) in
//     the same frames as data events, in order with them.
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
// Switch, Session and Subscription are safe for concurrent use. No lock
// is held while Switch.mu or Session.mu is taken; a publisher holds
// Subscription.mu (for reading) while it takes the session spool's lock,
// and cancel takes Subscription.mu for writing alone. No lock is held
// while user code (handlers, callbacks, admission hooks) runs. filter.Index has its
// own writer lock and never blocks Match. Every goroutine sion starts (one
// per subscription with a handler) belongs to its session; Session.Close
// and Switch.Close stop them and wait. A remote session has one reader
// goroutine, stopped by Session.Close; the switch's side of each link has a
// reader and a writer, stopped when the link ends or Switch.Close runs.
// A remote session's side on the entity also has a goroutine that
// confirms what arrived, and its reader reconnects; Session.Close stops
// both. The switch's side of a remote session serves each of its
// connections with a reader and a writer (Serve's); while its entity is
// away, one goroutine waits for the retention to pass, and its Subscribe
// and Pull requests run in goroutines of their own: they end with the
// session, whose Close waits for them, or with Switch.Close.
// A shared link's router has a reader, a writer, and one goroutine per
// register or marker waiting for acknowledgements from further links; a
// requested link has a supervisor that re-establishes it. They stop when
// the link ends, SharedLink.Close or Switch.Close runs, which wait for
// them; a requested gateway's supervisor likewise stops on Gateway.Close
// or Switch.Close. A gateway end's route lock is taken under
// Switch.routeMu, before its router's lock; its proxy lock is never taken
// under Switch.routeMu. Switch.routeMu orders filter propagation: it is taken before
// Switch.mu and a router's locks, and never while a frame is sent.
// Switch.mu may be held while a SharedLink's lock is taken, never the
// reverse; a router's own lock is taken before its queue's. On the
// entity's side of a remote session, its send lock (which orders requests
// by number) is taken before its state lock. On the switch's side, a
// remote session's lock, its stream's lock, Session.mu and Switch.mu are
// each released before another is taken.
package sion

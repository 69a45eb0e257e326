// Package sion is semantic publish/subscribe: entities publish events
// described by their meaning — an event type from an ontology, typed
// attributes, a JSON or XML payload — and subscribe with filters over that
// meaning (see the filter package). This package holds what has a session:
// event places, switches, sessions, subscriptions and delivery (S1, the
// SION semantic information network; DESIGN.md "One mechanism" and
// "Delivery").
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
//     once per event, one Deliver frame for all its subscriptions.
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
package sion

// Package metrics exports the counters of sion switches as Prometheus
// metrics (a prometheus.Collector, and an http.Handler for /metrics) and
// as OpenTelemetry metrics (asynchronous instruments on a metric.Meter).
//
//	c, err := metrics.NewCollector(sw1, sw2)        // one Collector for all the switches
//	err = c.Register(prometheus.DefaultRegisterer)  // one Collector per registry
//	http.Handle("/metrics", promhttp.Handler())
//	reg, err := c.RegisterOTel(meter)               // the same values, for OpenTelemetry
//	reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithProducer(c.Producer())) // the histogram's buckets
//
// or, for a /metrics with a registry of its own (and the Go runtime's and
// the process's metrics), http.Handle("/metrics", metrics.HandlerFor(c))
// — metrics.Handler(sw1, sw2) when nothing else needs c. Every series is
// labelled by its switch's name and place, so the switches of a Collector
// must differ in one of them: NewCollector and Collector.Add refuse a
// switch whose name and place another has, naming it. Every Collector
// exports the same families, so a registry takes one: Collector.Register
// refuses a second naming the first one's switches (Add them to one
// Collector instead). Two Collectors of one switch in two registries, as
// Handler makes, do not collide.
//
// Every value is read from the switches' snapshots — Switch.Stats,
// Switch.MatchTime, Switch.SessionCounts, Switch.LinkTotals, Switch.Links
// and Switch.Gateways — when a scrape or a collection asks: nothing runs
// in the background and nothing is added to the switches' hot paths. A
// scrape costs time in proportion to the switches' sessions, links and
// gateways, not their subscriptions: about 0.4 ms for a switch with 10
// links and 1,000 sessions (BenchmarkCollect).
//
// # Metrics
//
// Every series has the labels switch (Switch.Name) and place (the
// switch's EventPlace name); the others are listed with each metric.
// Counters end in _total and never decrease over a Collector's life (see
// Monotonicity); the others are gauges of what is there now; one is a
// histogram. Label values are bounded: peer by the switch's links
// (LinkTotals keeps 4,096 peers apart, the rest under ""), gateway by its
// gateways, and reason, direction and kind by the fixed sets shown.
//
//	Prometheus name                          type       labels (besides switch, place)  OpenTelemetry name                 unit
//	sion_events_in_total                     counter                                    sion.events.in                     {event}
//	sion_events_published_total              counter                                    sion.events.published              {event}
//	sion_events_matched_total                counter                                    sion.events.matched                {match}
//	sion_session_fires_total                 counter                                    sion.session.fires                 {fire}
//	sion_events_delivered_total              counter                                    sion.events.delivered              {event}
//	sion_events_dropped_total                counter    reason                          sion.events.dropped                {event}
//	sion_events_spilled_total                counter                                    sion.events.spilled                {event}
//	sion_events_duplicates_total             counter                                    sion.events.duplicates             {event}
//	sion_admission_refused_total             counter                                    sion.admission.refused             {refusal}
//	sion_remote_disconnects_total            counter                                    sion.remote.disconnects            {disconnect}
//	sion_agent_messages_sent_total           counter                                    sion.agent.messages.sent           {message}
//	sion_agent_messages_received_total       counter                                    sion.agent.messages.received       {message}
//	sion_match_duration_seconds              histogram                                  sion.match.duration.count, .sum    {event}, s
//	sion_sessions                            gauge      kind                            sion.sessions                      {session}
//	sion_sessions_away                       gauge                                      sion.sessions.away                 {session}
//	sion_subscriptions                       gauge                                      sion.subscriptions                 {subscription}
//	sion_filters                             gauge                                      sion.filters                       {filter}
//	sion_retained_bytes                      gauge                                      sion.retained.bytes                By
//	sion_link_events_sent_total              counter    peer                            sion.link.events.sent              {event}
//	sion_link_events_received_total          counter    peer                            sion.link.events.received          {event}
//	sion_link_control_sent_total             counter    peer                            sion.link.control.sent             {message}
//	sion_link_control_received_total         counter    peer                            sion.link.control.received         {message}
//	sion_link_frames_sent_total              counter    peer                            sion.link.frames.sent              {frame}
//	sion_link_frames_received_total          counter    peer                            sion.link.frames.received          {frame}
//	sion_link_sent_bytes_total               counter    peer                            sion.link.bytes.sent               By
//	sion_link_received_bytes_total           counter    peer                            sion.link.bytes.received           By
//	sion_link_events_dropped_total           counter    peer, reason                    sion.link.events.dropped           {event}
//	sion_link_up                             gauge      peer                            sion.link.up                       1
//	sion_link_queued_frames                  gauge      peer                            sion.link.queued.frames            {frame}
//	sion_link_queued_bytes                   gauge      peer                            sion.link.queued.bytes             By
//	sion_link_routes                         gauge      peer                            sion.link.routes                   {key}
//	sion_link_proxies                        gauge      peer                            sion.link.proxies                  {filter}
//	sion_gateway_events_forwarded_total      counter    gateway, direction              sion.gateway.events.forwarded      {event}
//	sion_gateway_events_converted_total      counter    gateway, direction              sion.gateway.events.converted      {event}
//	sion_gateway_events_not_forwarded_total  counter    gateway, direction, reason      sion.gateway.events.not_forwarded  {event}
//	sion_gateway_up                          gauge      gateway                         sion.gateway.up                    1
//	sion_gateway_routes                      gauge      gateway                         sion.gateway.routes                {filter}
//	sion_gateway_proxies                     gauge      gateway                         sion.gateway.proxies               {filter}
//
// What each reads and means:
//
//   - sion_events_in_total: events published on the switch or arrived over
//     its links (Stats.EventsIn); sion_events_published_total: of those,
//     the ones its sessions, local and remote, published and the place
//     admitted (Stats.Published).
//   - sion_events_matched_total: matches of entities' subscriptions, one
//     per subscription and event; links' proxy filters are not counted
//     here but in sion_link_events_sent_total (Stats.Matched).
//   - sion_session_fires_total: sessions fired, one per session and event,
//     links' sessions included (Stats.Fires).
//   - sion_events_delivered_total: events handed over, one per
//     subscription and event — queued, passed to a handler, spooled for
//     look-in, or confirmed by a remote entity (Stats.Deliveries).
//   - sion_events_dropped_total{reason}: events subscriptions matched and
//     lost (Stats.Drops): queue_full (a full queue under DropNewest, or
//     Block's wait ended), evicted (DropOldest), spool (a look-in spool
//     full or expired), stream (a remote session's stream full, or ended
//     unconfirmed). They sum to Stats.Dropped.
//   - sion_events_spilled_total: events the Spill policy put in a look-in
//     spool instead of a full queue; not lost (Stats.Spilled).
//   - sion_events_duplicates_total: events dropped because the switch had
//     seen their ID, not over a link (Stats.Duplicates; over a link:
//     sion_link_events_dropped_total{reason="duplicate"}).
//   - sion_admission_refused_total: sessions and shared links the place
//     refused (Stats.Refused).
//   - sion_remote_disconnects_total: remote sessions' connections that
//     ended with the session kept for its entity's return
//     (Stats.Disconnects).
//   - sion_agent_messages_sent_total, _received_total: messages to and
//     from a managed place's agent (S2; Stats.AgentSent, AgentReceived).
//   - sion_match_duration_seconds: how long the filter index took to match
//     an event, one event in 8 timed (Switch.MatchTime; its buckets, 250
//     ns to 10 ms, are the core's).
//   - sion_sessions{kind}: sessions open now by kind — local, remote,
//     link, overlay, gateway (Switch.SessionCounts); sion_sessions_away: remote
//     sessions whose entity is away (Stats.Away); sion_subscriptions and
//     sion_filters: subscriptions open and filters in the index, links'
//     proxy filters included (Stats.Subscriptions, Filters);
//     sion_retained_bytes: bytes remote sessions' streams hold
//     (Stats.RetainedBytes).
//   - sion_link_…_total{peer}: a peer's shared links over the switch's
//     life, those that ended included (Switch.LinkTotals): data events,
//     control messages, frames (the handshake's excepted) and their bytes
//     (without the transport's framing), each way; events dropped by
//     reason — queue_full (the link's queue was full, or the event did not
//     fit a frame), expired (TTL spent), duplicate and refused (received).
//   - sion_link_up, sion_link_queued_frames, sion_link_queued_bytes,
//     sion_link_routes, sion_link_proxies{peer}: the links up or
//     connecting now (Switch.Links): 1 while up, else 0; frames waiting for
//     the peer and the bytes of their events; keys registered at the peer;
//     the peer's keys installed here.
//   - sion_gateway_events_…_total{gateway, direction}: what each direction
//     of a gateway did with the events that reached it (GatewayCounters;
//     direction "import": into this switch's place, "export": out of it):
//     forwarded (crossed), converted (of those, converted by the
//     Mapping), not_forwarded by the first reason: filtered (firewall),
//     unmapped, refused, expired (PlaceTTL), looped, duplicate, queue_full.
//     The requesting end counts filtered, unmapped and converted; the
//     accepting end forwards.
//   - sion_gateway_up, sion_gateway_routes, sion_gateway_proxies{gateway}:
//     the gateway's state, its filters registered in the other place, and
//     those installed here (GatewayInfo).
//
// OpenTelemetry attributes carry the same values under the keys
// sion.switch, sion.place, sion.peer, sion.gateway, sion.direction,
// sion.reason and sion.session.kind.
//
// # The match-time histogram in OpenTelemetry
//
// The core keeps the histogram pre-bucketed, and OpenTelemetry's API
// takes no pre-aggregated histogram from an asynchronous callback.
// Recording each match into a synchronous histogram would put a call on
// the matching path; RegisterOTel instead exports the histogram's Count
// and Sum as two asynchronous counters, sion.match.duration.count and
// sion.match.duration.sum (mean match time = sum/count). For the
// buckets, an SDK user gives Collector.Producer to a reader
// (sdkmetric.WithProducer): each collection then carries the histogram
// sion.match.duration itself, pre-aggregated, with the core's bounds.
//
// # Monotonicity
//
// The core counts over the switch's life: the switch-level counters
// (Switch.Stats), the per-link ones by peer (Switch.LinkTotals: the links
// to that peer that ended and the one up now), and the per-gateway ones
// by name at both ends (GatewayInfo: a requested Gateway's over its life,
// an accepted one's by name and place across its re-establishments). So
// the counters exported are exact, across links and gateways re-forming.
// On top of that a Collector remembers, for each counter series, the last
// value and the switch it was read from, so that what it exports never
// decreases:
//
//   - A switch removed from a Collector and another of the same name and
//     place added continue the first one's counters: the new switch's
//     values are added to the last ones read from the first, which
//     Remove reads a last time (as a scrape does a closed switch's). The
//     histogram starts again (a counter reset to Prometheus).
//   - A value the core lowers for the same switch — only an accepted
//     gateway beyond the 4,096 whose counters the core remembers, which
//     start from zero each time it re-forms — is held at its highest
//     until the core passes it again: such a gateway undercounts.
//
// What is gone is no longer exported, and the Collector forgets it:
//
//   - A series whose link, gateway or peer the switch no longer reports
//     (Switch.Links, Gateways, LinkTotals) is left out, and what the
//     Collector remembered of it is dropped at the end of that scrape.
//     Counters by peer stay as long as LinkTotals keeps the peer: a link
//     that ended still counts. The session kinds are a fixed set, each
//     exported (0 when there is none).
//   - A closed switch (Switch.State NonExistent) is dropped from the
//     Collector at the next scrape, as if removed: none of its series is
//     exported any more, and its counters are read a last time, so that
//     a switch of its name and place added later (a restart) continues
//     them to its last event.
//   - What it remembers of removed and closed switches stays for the
//     Collector's life — two numbers per counter series, bounded by the
//     switches' names — for such a successor; a successor's series that
//     the first switch had and it has not are forgotten.
//
// A series forgotten that comes back — the peer's link or the gateway
// re-formed — starts from the core's count, which continues the one
// before it (the core keeps it), except past the core's bounds (a peer
// beyond LinkTotals' 4,096, a gateway beyond the 4,096 above) or when the
// series carried a removed switch's count: Prometheus then reads a
// counter reset.
package metrics

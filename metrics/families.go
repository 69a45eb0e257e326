package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// famType is how a family's values behave.
type famType uint8

const (
	counter   famType = iota // monotonic over the process's life
	upDown                   // a count of things present now (additive)
	gauge                    // a state (not additive: up)
	histogram                // the match-time histogram
)

// A family is one metric: its Prometheus name and help, its OpenTelemetry
// name and unit, and its labels after switch and place.
type family struct {
	name, help string // Prometheus
	otel, unit string // OpenTelemetry
	typ        famType
	labels     []string // all labels, switch and place first
	desc       *prometheus.Desc
	index      int // position in families
}

// The labels; every family has switch and place first.
const (
	lSwitch    = "switch"
	lPlace     = "place"
	lPeer      = "peer"
	lGateway   = "gateway"
	lDirection = "direction"
	lReason    = "reason"
	lKind      = "kind"
)

// maxLabels is the most labels a family has: switch, place, gateway,
// direction, reason.
const maxLabels = 5

// families lists every family, in the order of doc.go.
var families []*family

func newFamily(typ famType, name, otel, unit, help string, labels ...string) *family {
	f := &family{name: name, help: help, otel: otel, unit: unit, typ: typ,
		labels: append([]string{lSwitch, lPlace}, labels...), index: len(families)}
	if len(f.labels) > maxLabels {
		panic("metrics: too many labels in " + name)
	}
	f.desc = prometheus.NewDesc(name, help, f.labels, nil)
	families = append(families, f)
	return f
}

// Switch families (Switch.Stats, Switch.SessionCounts).
var (
	fEventsIn = newFamily(counter, "sion_events_in_total", "sion.events.in", "{event}",
		"Events published on the switch or arrived over its shared links (Stats.EventsIn).")
	fPublished = newFamily(counter, "sion_events_published_total", "sion.events.published", "{event}",
		"Events the switch's sessions (local and remote) published and the place admitted (Stats.Published).")
	fMatched = newFamily(counter, "sion_events_matched_total", "sion.events.matched", "{match}",
		"Matches of entities' subscriptions, one per subscription and event; links' proxy filters are not counted (Stats.Matched).")
	fFires = newFamily(counter, "sion_session_fires_total", "sion.session.fires", "{fire}",
		"Sessions fired: one per session and event, the links' sessions included (Stats.Fires).")
	fDelivered = newFamily(counter, "sion_events_delivered_total", "sion.events.delivered", "{event}",
		"Events handed over to subscriptions, one per subscription and event (Stats.Deliveries).")
	fDropped = newFamily(counter, "sion_events_dropped_total", "sion.events.dropped", "{event}",
		"Events subscriptions matched and lost, by reason: queue_full, evicted, spool, stream (Stats.Drops).", lReason)
	fSpilled = newFamily(counter, "sion_events_spilled_total", "sion.events.spilled", "{event}",
		"Events the Spill policy put in a look-in spool instead of a full queue; not lost (Stats.Spilled).")
	fDuplicates = newFamily(counter, "sion_events_duplicates_total", "sion.events.duplicates", "{event}",
		"Events the switch dropped because it had seen their ID already, not over a link (Stats.Duplicates).")
	fRefused = newFamily(counter, "sion_admission_refused_total", "sion.admission.refused", "{refusal}",
		"Sessions and shared links the place refused (Stats.Refused).")
	fDisconnects = newFamily(counter, "sion_remote_disconnects_total", "sion.remote.disconnects", "{disconnect}",
		"Times a remote session's connection ended and the switch kept the session (Stats.Disconnects).")
	fAgentSent = newFamily(counter, "sion_agent_messages_sent_total", "sion.agent.messages.sent", "{message}",
		"Messages sent to the place's agent (S2; Stats.AgentSent).")
	fAgentReceived = newFamily(counter, "sion_agent_messages_received_total", "sion.agent.messages.received", "{message}",
		"Messages received from the place's agent (S2; Stats.AgentReceived).")

	fMatchDuration = newFamily(histogram, "sion_match_duration_seconds", "sion.match.duration", "s",
		"Time the filter index took to match an event, one event in 8 sampled (Switch.MatchTime).")

	fSessions = newFamily(upDown, "sion_sessions", "sion.sessions", "{session}",
		"Sessions open now, by kind: local, remote, link, overlay, gateway (Switch.SessionCounts).", lKind)
	fAway = newFamily(upDown, "sion_sessions_away", "sion.sessions.away", "{session}",
		"Remote sessions whose entity is away now, kept for their retention (Stats.Away).")
	fSubscriptions = newFamily(upDown, "sion_subscriptions", "sion.subscriptions", "{subscription}",
		"Subscriptions open now, the links' proxy filters included (Stats.Subscriptions).")
	fFilters = newFamily(upDown, "sion_filters", "sion.filters", "{filter}",
		"Filters in the switch's filter index now (Stats.Filters).")
	fRetained = newFamily(upDown, "sion_retained_bytes", "sion.retained.bytes", "By",
		"Bytes of deliveries remote sessions' streams hold now (Stats.RetainedBytes).")
)

// Link families, by peer: the counters over the switch's life
// (Switch.LinkTotals), the others now (Switch.Links).
var (
	fLinkEventsSent = newFamily(counter, "sion_link_events_sent_total", "sion.link.events.sent", "{event}",
		"Data events sent over the shared link (LinkTotals.EventsSent).", lPeer)
	fLinkEventsReceived = newFamily(counter, "sion_link_events_received_total", "sion.link.events.received", "{event}",
		"Data events received over the shared link (LinkTotals.EventsReceived).", lPeer)
	fLinkControlSent = newFamily(counter, "sion_link_control_sent_total", "sion.link.control.sent", "{message}",
		"Link control messages sent (LinkTotals.ControlSent).", lPeer)
	fLinkControlReceived = newFamily(counter, "sion_link_control_received_total", "sion.link.control.received", "{message}",
		"Link control messages received (LinkTotals.ControlReceived).", lPeer)
	fLinkFramesSent = newFamily(counter, "sion_link_frames_sent_total", "sion.link.frames.sent", "{frame}",
		"Frames handed to the link's connection, its handshake's excepted (LinkTotals.FramesSent).", lPeer)
	fLinkFramesReceived = newFamily(counter, "sion_link_frames_received_total", "sion.link.frames.received", "{frame}",
		"Frames taken from the link's connection, its handshake's excepted (LinkTotals.FramesReceived).", lPeer)
	fLinkBytesSent = newFamily(counter, "sion_link_sent_bytes_total", "sion.link.bytes.sent", "By",
		"Bytes of the frames sent, without the transport's framing (LinkTotals.BytesSent).", lPeer)
	fLinkBytesReceived = newFamily(counter, "sion_link_received_bytes_total", "sion.link.bytes.received", "By",
		"Bytes of the frames received, without the transport's framing (LinkTotals.BytesReceived).", lPeer)
	fLinkDropped = newFamily(counter, "sion_link_events_dropped_total", "sion.link.events.dropped", "{event}",
		"Events the link did not forward or did not take in, by reason: queue_full (or too big for a frame), expired (TTL spent), duplicate, refused (LinkTotals.Dropped, Expired, Duplicates, Refused).", lPeer, lReason)

	fLinkUp = newFamily(gauge, "sion_link_up", "sion.link.up", "1",
		"1 while the shared link is up, 0 while it connects or is down (LinkInfo.State).", lPeer)
	fLinkQueued = newFamily(upDown, "sion_link_queued_frames", "sion.link.queued.frames", "{frame}",
		"Frames waiting in the link's queue for the peer now (LinkInfo.Queued).", lPeer)
	fLinkQueuedBytes = newFamily(upDown, "sion_link_queued_bytes", "sion.link.queued.bytes", "By",
		"Bytes of the data events waiting in the link's queue or being sent now (LinkInfo.QueuedBytes).", lPeer)
	fLinkRoutes = newFamily(upDown, "sion_link_routes", "sion.link.routes", "{key}",
		"Keys this switch has registered at the peer (LinkInfo.Routes).", lPeer)
	fLinkProxies = newFamily(upDown, "sion_link_proxies", "sion.link.proxies", "{filter}",
		"The peer's keys installed here as proxy filters (LinkInfo.Proxies).", lPeer)
)

// Gateway families, by gateway name and direction (Switch.Gateways).
var (
	fGatewayForwarded = newFamily(counter, "sion_gateway_events_forwarded_total", "sion.gateway.events.forwarded", "{event}",
		"Events that crossed the gateway (GatewayCounters.Forwarded).", lGateway, lDirection)
	fGatewayConverted = newFamily(counter, "sion_gateway_events_converted_total", "sion.gateway.events.converted", "{event}",
		"Of the events that crossed, those the Mapping converted (GatewayCounters.Converted).", lGateway, lDirection)
	fGatewayStopped = newFamily(counter, "sion_gateway_events_not_forwarded_total", "sion.gateway.events.not_forwarded", "{event}",
		"Events that reached the gateway and did not cross, by the first reason: filtered, unmapped, refused, expired, looped, duplicate, queue_full (GatewayCounters).", lGateway, lDirection, lReason)

	fGatewayUp = newFamily(gauge, "sion_gateway_up", "sion.gateway.up", "1",
		"1 while the gateway is up, 0 otherwise (GatewayInfo.State).", lGateway)
	fGatewayRoutes = newFamily(upDown, "sion_gateway_routes", "sion.gateway.routes", "{filter}",
		"Filters registered in the other place for this place's interest (GatewayInfo.Routes).", lGateway)
	fGatewayProxies = newFamily(upDown, "sion_gateway_proxies", "sion.gateway.proxies", "{filter}",
		"Filters installed here for the other place's interest (GatewayInfo.Proxies).", lGateway)
)

package sion

import (
	"cmp"
	"slices"
	"time"
)

// LinkInfo describes one shared link of a switch (see Switch.Links): a
// snapshot of its router's counters (S1 SI-R).
type LinkInfo struct {
	// Peer is the other switch's name (for a requested link that has
	// never been up, the address it goes to); Parent reports whether it is
	// this switch's parent (this switch requested the link).
	Peer   string
	Parent bool
	State  LinkState
	// Since is when the link came up (zero while it is not up).
	Since time.Time
	// EventsSent and EventsReceived count the data events that crossed
	// the link; ControlSent and ControlReceived the link's control
	// messages (filter registers and releases, markers,
	// acknowledgements, probes, advertisements where the place requires
	// them, the handshake's request and accept).
	EventsSent, EventsReceived, ControlSent, ControlReceived uint64
	// Dropped counts events not forwarded because the link's queue was
	// full (65,536 events or 64 MiB of frames wait for the peer; beyond,
	// the newest are dropped, and the first drop of each episode is
	// logged at Warn) or the event did not fit a frame; Expired those not
	// forwarded because their TTL was spent; Duplicates the events
	// received that the switch had seen already; Refused those received
	// that the place refused (logged).
	Dropped, Expired, Duplicates, Refused uint64
	// FramesSent and FramesReceived count the frames the link's
	// connection carried — events, control messages, and the rest of its
	// protocol (its handshake's frames are not counted) — and BytesSent
	// and BytesReceived their bytes, as handed to and taken from the
	// transport (without the transport's own framing).
	FramesSent, FramesReceived, BytesSent, BytesReceived uint64
	// Queued is the number of frames waiting in the link's queue for the
	// peer now, QueuedBytes the bytes of the data events among them and
	// of those being sent (at most 65,536 events and 64 MiB; see Dropped).
	Queued, QueuedBytes int
	// Routes is the number of keys this switch has registered at the
	// peer — not those counted under a covering key (PlaceConfig.Covering;
	// Switch.Routes lists both); Proxies the number of the peer's keys
	// installed here: in the filter index, events match them (a register
	// still being installed is not counted).
	Routes, Proxies int
}

// Links returns the switch's shared links that are connected or
// connecting, and its requested link while it is down, sorted by peer.
// Safe for concurrent use.
func (sw *Switch) Links() []LinkInfo {
	sw.routeMu.Lock()
	routers := slices.Clone(sw.routers)
	sw.routeMu.Unlock()
	var out []LinkInfo
	parentUp := false
	for _, r := range routers {
		if !r.end.inPlace() {
			continue // a gateway: see Gateways
		}
		parentUp = parentUp || r.parent
		out = append(out, r.linkInfo())
	}
	sw.mu.RLock()
	parent := sw.parent
	sw.mu.RUnlock()
	if parent != nil && !parentUp {
		// The requested link has no router in the table read above. Its
		// requester may still hold one: a router that has just left the
		// table (it is ending, and says so) or one that came up since.
		// Either is described by itself, never by a state borrowed from
		// it next to another router's Since.
		if r, st, _ := parent.q.link(parent.released()); r != nil {
			out = append(out, r.linkInfo())
		} else {
			parent.mu.Lock()
			peer := cmp.Or(parent.peerName, parent.addr)
			parent.mu.Unlock()
			out = append(out, LinkInfo{Peer: peer, Parent: true, State: st})
		}
	}
	slices.SortFunc(out, func(a, b LinkInfo) int { return cmp.Compare(a.Peer, b.Peer) })
	return out
}

// linkInfo returns the LinkInfo of r's link now; its State and Since are
// read together (upSince).
func (r *router) linkInfo() LinkInfo {
	r.mu.Lock()
	st, since := r.upSince()
	li := LinkInfo{
		Peer: r.peer, Parent: r.parent, State: st, Since: since,
		EventsSent: r.eventsSent.Load(), EventsReceived: r.eventsRecv.Load(),
		ControlSent: r.ctlSent.Load(), ControlReceived: r.ctlRecv.Load(),
		Dropped: r.dropped.Load(), Expired: r.expired.Load(), Duplicates: r.duplicates.Load(), Refused: r.refused.Load(),
		FramesSent: r.framesSent.Load(), FramesReceived: r.framesRecv.Load(), BytesSent: r.bytesSent.Load(), BytesReceived: r.bytesRecv.Load(),
		Routes: len(r.routes) - r.nCover, Proxies: r.sess.numInstalled(),
	}
	r.mu.Unlock()
	r.qmu.Lock()
	li.Queued, li.QueuedBytes = r.q.len(), r.q.held()
	r.qmu.Unlock()
	return li
}

// maxPeerTotals bounds the peers whose links' counters a switch keeps
// apart (LinkTotals); those of further peers are summed under "".
var maxPeerTotals = 4096 // a variable so that a test can lower it

// totalsKey returns the key under which the counters of peer's links add
// up in LinkTotals — peer, or "" for a peer that came after
// maxPeerTotals others — and makes its entry, so that a peer's live link
// and its ended ones always count under the same key. routeMu must be
// held.
func (sw *Switch) totalsKey(peer string) string {
	if sw.endedBy[peer] != nil {
		return peer
	}
	if sw.endedBy == nil {
		sw.endedBy = map[string]*LinkTotals{}
	}
	if len(sw.endedBy) >= maxPeerTotals {
		peer = ""
		if sw.endedBy[peer] != nil {
			return peer
		}
	}
	sw.endedBy[peer] = &LinkTotals{}
	return peer
}

// routerTotalsKey returns the key r's counters add up under: the one it
// got when it entered the switch's table, or else its peer's now.
// routeMu must be held.
func (sw *Switch) routerTotalsKey(r *router) string {
	if r.totals != nil {
		return *r.totals
	}
	return sw.totalsKey(r.peer)
}

// LinkTotals returns the counters of the switch's shared links (overlay
// links included) by peer name, each over the switch's life: the links
// to that peer that have ended and the one up now, so that they never
// decrease when a link re-forms. It keeps the links of 4,096 peers
// apart; those of further peers, live or ended, add up under "". Safe for
// concurrent use.
func (sw *Switch) LinkTotals() map[string]LinkTotals {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	out := make(map[string]LinkTotals, len(sw.endedBy)+len(sw.routers))
	for p, t := range sw.endedBy {
		out[p] = *t
	}
	for _, r := range append(slices.Clone(sw.routers), sw.ending...) {
		if r.end.inPlace() {
			key := sw.routerTotalsKey(r)
			t := out[key]
			t.add(r)
			out[key] = t
		}
	}
	return out
}

// RouteInfo is one key a switch has propagated over a shared link (see
// Switch.Routes): S1's event path with its reference count, and whether
// the S2 acknowledgement has arrived.
type RouteInfo struct {
	// Peer is the switch the key is registered at.
	Peer string
	// Filter is the proxy filter's text: a subscription's filter (routing
	// by filter), its event type's filter (by event type), or the filter
	// on every event, "{type ⊑ *}", with TTL 0 (flood).
	Filter string
	// TTL is how many links further the peer propagates it; for a key
	// counted under a covering one (CoveredBy), the TTL it needs there,
	// which its cover's is at least.
	TTL int
	// Refs is the number of this switch's subscriptions (its own and the
	// proxies of its other links) that need it.
	Refs int
	// Acknowledged reports whether the peer has acknowledged it (S2); for
	// a covered key, its cover.
	Acknowledged bool
	// CoveredBy is, when the key is counted under another key registered
	// over the same link that covers it (PlaceConfig.Covering, following
	// filter.Covers), that key's Filter: the key itself is not registered
	// at the peer. "" when the key is registered itself.
	CoveredBy string
	// Places lists, for interest that came from other places through
	// gateways, the places it came through, this one last; nil for this
	// place's own interest.
	Places []string
	// Gateway names the gateway the key is registered over; "" for a
	// shared link. Over a gateway, Filter is in the other place's
	// ontology (converted by the gateway's Mapping).
	Gateway string
}

// Routes returns the keys the switch has propagated over its shared links
// with their reference counts — those counted under a covering key
// included (RouteInfo.CoveredBy) — sorted by peer and filter. Safe for
// concurrent use.
func (sw *Switch) Routes() []RouteInfo {
	sw.routeMu.Lock()
	routers := slices.Clone(sw.routers)
	sw.routeMu.Unlock()
	var out []RouteInfo
	for _, r := range routers {
		r.mu.Lock()
		for k, rt := range r.routes {
			ri := RouteInfo{Peer: r.peer, Filter: k.filter, Places: k.placeList(), TTL: rt.sent, Refs: rt.refs, Gateway: r.end.via()}
			if a := rt.ack(); a != nil {
				ri.Acknowledged = a.ok
			}
			if rt.cover != nil {
				ri.TTL, ri.CoveredBy = rt.need(), rt.cover.key.filter
			}
			out = append(out, ri)
		}
		r.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b RouteInfo) int {
		return cmp.Or(cmp.Compare(a.Gateway, b.Gateway), cmp.Compare(a.Peer, b.Peer), cmp.Compare(a.Filter, b.Filter), slices.Compare(a.Places, b.Places), cmp.Compare(a.TTL, b.TTL))
	})
	return out
}

// Constraints returns, for each shared link of the switch, by peer, the
// filters that decide what the switch forwards to that peer — the proxy
// filters installed on its end of the link: the peer's propagated
// interest (S1), or the constraint a managed place's agent deployed (S2
// network filter) — as canonical texts, sorted, without repeats. A link
// whose end has none carries nothing and is left out; {type ⊑ *} passes
// every event. Safe for concurrent use.
func (sw *Switch) Constraints() map[string][]string {
	sw.routeMu.Lock()
	routers := slices.Clone(sw.routers)
	sw.routeMu.Unlock()
	out := map[string][]string{}
	for _, r := range routers {
		if !r.end.inPlace() {
			continue
		}
		r.sess.mu.Lock()
		var fs []string
		for _, sub := range r.sess.subs {
			fs = append(fs, sub.f.String())
		}
		r.sess.mu.Unlock()
		if len(fs) > 0 {
			slices.Sort(fs)
			out[r.peer] = slices.Compact(fs)
		}
	}
	return out
}

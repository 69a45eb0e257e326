package sion

import (
	"cmp"
	"slices"
)

// SessionKind says what is at the other end of a session (SessionInfo.Kind).
type SessionKind string

// The kinds of session a switch holds. An entity's session is local or
// remote; every link of the switch is a session too, whose subscriptions
// are the peer's proxy filters (S1: a router is an entity with a session
// on each switch it joins).
const (
	// SessionLocal is an entity in this process (Switch.Open).
	SessionLocal SessionKind = "local"
	// SessionRemote is an entity over a connection (Dial).
	SessionRemote SessionKind = "remote"
	// SessionLink is the router of a shared link (S1 SI-R).
	SessionLink SessionKind = "link"
	// SessionOverlay is the router of an overlay link of a place routed
	// by rendezvous (S3), a bypass link included.
	SessionOverlay SessionKind = "overlay"
	// SessionGateway is the router of a gateway to another place (S1
	// SI-GW).
	SessionGateway SessionKind = "gateway"
)

// SessionInfo describes one session of a switch (Switch.Sessions): a
// snapshot of what it is and of its subscriptions' counters.
type SessionInfo struct {
	// ID is the session's number on its switch, unique over the switch's
	// life; Name is the entity's name (SessionConfig.Name) or, for a
	// link's session, the name the switch gave it.
	ID   uint64
	Name string
	Kind SessionKind
	// Peer is, for a link or an overlay link, the peer switch's name; for
	// a gateway, the gateway's name; for a remote session, the address
	// of the entity's connection ("" while it is away); "" for a local
	// session.
	Peer string
	// Away reports whether a remote session's entity is away now: its
	// connection ended and the switch keeps the session for its
	// retention (ReconnectPolicy).
	Away bool
	// Subscriptions are the session's subscriptions, by ID: for an
	// entity, those it made; for a link or a gateway, the peer's proxy
	// filters installed here.
	Subscriptions []SubscriptionInfo
	// Spooled is the number of events in the session's look-in spool
	// now; SpoolDropped counts those the spool dropped (full or expired).
	Spooled      int
	SpoolDropped uint64
}

// SubscriptionInfo is one subscription of a SessionInfo: its counters and
// the canonical text of its filters (one, or several OR-ed; see
// Session.SubscribeFilters).
type SubscriptionInfo struct {
	SubscriptionStats
	Filters []string
}

// Sessions returns a snapshot of the switch's sessions, sorted by ID: the
// entities' (local and remote, those away included) and its links' and
// gateways'. It costs time and memory in proportion to the
// subscriptions it lists, proxy filters included. Safe for concurrent
// use.
func (sw *Switch) Sessions() []SessionInfo {
	sw.mu.RLock()
	sessions := make([]*Session, 0, len(sw.sessions))
	for _, s := range sw.sessions {
		sessions = append(sessions, s)
	}
	sw.mu.RUnlock()
	slices.SortFunc(sessions, func(a, b *Session) int { return cmp.Compare(a.id, b.id) })
	out := make([]SessionInfo, 0, len(sessions))
	for _, s := range sessions {
		si := SessionInfo{ID: s.id, Name: s.name, Kind: s.sink.kind()}
		s.sink.describe(&si)
		s.mu.Lock()
		subs := make([]*Subscription, 0, len(s.subs))
		for _, sub := range s.subs {
			subs = append(subs, sub)
		}
		s.mu.Unlock()
		slices.SortFunc(subs, func(a, b *Subscription) int { return cmp.Compare(a.id, b.id) })
		for _, sub := range subs {
			fs := sub.Filters()
			texts := make([]string, len(fs))
			for i, f := range fs {
				texts[i] = f.String()
			}
			si.Subscriptions = append(si.Subscriptions, SubscriptionInfo{SubscriptionStats: sub.Stats(), Filters: texts})
		}
		si.Spooled, si.SpoolDropped = s.spool.stats()
		out = append(out, si)
	}
	return out
}

// SessionCounts returns how many sessions of each kind the switch has
// now: a map with an entry for each kind it has. Unlike Sessions it
// costs only a visit of each session, whatever their subscriptions. Safe
// for concurrent use.
func (sw *Switch) SessionCounts() map[SessionKind]int {
	out := map[SessionKind]int{}
	sw.mu.RLock()
	defer sw.mu.RUnlock()
	for _, s := range sw.sessions {
		out[s.sink.kind()]++
	}
	return out
}

func (localSink) kind() SessionKind { return SessionLocal }

func (*remoteEnd) kind() SessionKind { return SessionRemote }

func (r *router) kind() SessionKind { return r.end.sessionKind() }

// describe has nothing to add for a local session: no peer, never away.
func (localSink) describe(*SessionInfo) {}

// describe fills in where a remote session's entity is.
func (re *remoteEnd) describe(si *SessionInfo) {
	re.mu.Lock()
	si.Away = re.awayNow()
	if !si.Away {
		si.Peer = re.addr
	}
	re.mu.Unlock()
}

// describe fills in the peer of the router's link: the switch, or the
// gateway's name.
func (r *router) describe(si *SessionInfo) {
	si.Peer = r.peer // set when the router is made, never changed
	if gw := r.end.via(); gw != "" {
		si.Peer = gw
	}
}

func (*sharedEnd) sessionKind() SessionKind { return SessionLink }

func (*overlayEnd) sessionKind() SessionKind { return SessionOverlay }

func (*gatewayEnd) sessionKind() SessionKind { return SessionGateway }

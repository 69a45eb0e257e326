package sion

import (
	"context"

	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/overlay"
	"github.com/sion-go/sion/internal/traffic"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
)

// overlayEnd is a router's end of an overlay link between two switches of
// a place routed by rendezvous (S3). It is a shared link in what it does
// with interest and events — registers install as proxy filters, events
// cross with their TTL lowered — with three differences: an event crosses
// only under a proxy filter of its own event type (the keys of rendezvous
// routing are narrowed per type, so each type's paths form a tree rooted
// at its rendezvous switch, and an event of a subtype does not stray onto
// its supertype's tree); the overlay's and the advertisements' messages
// travel over it; it is not in the place's tree (no probes, no S1 Leave),
// and a marker crosses one hop only, since the overlay has cycles.
type overlayEnd struct {
	*sharedEnd
	s    *rvSwitch
	node overlay.Node // the peer's
}

func (*overlayEnd) tree() bool { return false }

// addRoute registers key at the peer as it is, whatever the place's
// Covering says: an overlay link carries an event only under a proxy
// filter of the event's own type, so a key on a supertype does not stand
// for one on a subtype here.
func (*overlayEnd) addRoute(r *router, key routeKey, ttl int) []*linkAck {
	return []*linkAck{r.register(key, ttl)}
}

// removeRoute releases key at the peer.
func (*overlayEnd) removeRoute(r *router, key routeKey, ttl int) { r.release(key, ttl) }

// forward sends e to the peer when a proxy filter of e's own type matched
// it — the peer is on e's type's tree (S3 request or advertisement path)
// — and the switch's bypass rules let it (bypass.go).
func (oe *overlayEnd) forward(r *router, e *Event, hits []hitSub, shared *eventFrames) {
	if oe.s.allows(r, e, hits, shared) {
		oe.sharedEnd.forward(r, e, hits, shared)
	}
}

// receive delivers a data event from the peer on this switch as a shared
// link's end does, and counts it in the traffic of its class when this
// switch is its type's rendezvous switch.
func (oe *overlayEnd) receive(ctx context.Context, r *router, w *wire.Event) {
	r.receiveEvent(ctx, w, "overlay link", oe.s.meterEvent)
}

// control handles the overlay's messages and the advertisements'.
func (oe *overlayEnd) control(r *router, m linkctl.Message) (bool, error) {
	s := oe.s
	switch m := m.(type) {
	case *linkctl.Join:
		return true, s.handleJoin(r, m)
	case *linkctl.JoinReply:
		s.handleJoinReply(m)
	case *linkctl.Announce:
		return true, s.handleAnnounce(r, m)
	case *linkctl.LeafSetRequest:
		return true, s.handleLeafSetRequest(r)
	case *linkctl.LeafSetReply:
		s.handleLeafSetReply(r, m)
	case *linkctl.Advertise:
		return true, s.handleAdvertise(r, m)
	case *linkctl.Unadvertise:
		return true, s.handleUnadvertise(r, m)
	case *linkctl.PathChange:
		return true, s.handlePathChange(r, m)
	case *linkctl.BranchPoint:
		return true, s.handleBranchPoint(r, m)
	case *linkctl.BypassEnd:
		return true, s.handleBypassEnd(r, m)
	default:
		return false, nil
	}
	return true, nil
}

// marker passes a marker one hop: the overlay has cycles, so markers do
// not spread over it (Switch.Flush reaches the overlay neighbours only).
func (*overlayEnd) marker(r *router, _, _ int) *linkAck { return r.marker(0, 0) }

// meterEvent counts e in the traffic of its classes when this switch is
// the rendezvous switch of its type (S3 traffic monitoring): the type,
// and the type with the values of its level-2 and level-3 attributes.
func (s *rvSwitch) meterEvent(e *Event) {
	s.mu.Lock()
	rv := s.tr != nil && s.isRendezvous(e.Type)
	s.mu.Unlock()
	if !rv {
		return
	}
	lv := s.rv.levels(s.sw.place.Ontology(), e.Type)
	var buf [3]traffic.Class
	cs := classesOf(lv, e, &buf)
	s.meter.Record(s.now(), cs...)
	if len(cs) > 1 {
		s.mu.Lock()
		for _, c := range cs[1:] {
			ref := linkctl.ClassRef{Level: byte(c.Level), Type: c.Type, Attr: c.Attr, Value: c.Value}
			if _, ok := s.classVals[ref]; !ok && len(s.classVals) < traffic.DefaultMaxClasses {
				v, _ := e.Value(c.Attr)
				s.classVals[ref] = v
			}
		}
		s.mu.Unlock()
	}
}

// classesOf returns e's classes at the three levels, given its type's
// class attributes lv, in buf.
func classesOf(lv ClassLevels, e *Event, buf *[3]traffic.Class) []traffic.Class {
	buf[0] = traffic.Class{Level: traffic.LevelType, Type: e.Type}
	n := 1
	if v, ok := e.Value(lv.First); ok && lv.First != "" {
		buf[n] = traffic.Class{Level: traffic.LevelUpper, Type: e.Type, Attr: lv.First, Value: classValue(v)}
		n++
	}
	if v, ok := e.Value(lv.Leaf); ok && lv.Leaf != "" {
		buf[n] = traffic.Class{Level: traffic.LevelLowest, Type: e.Type, Attr: lv.Leaf, Value: classValue(v)}
		n++
	}
	return buf[:n]
}

// classValue returns an attribute value as a class names it: a string as
// it is, other kinds as filter source text writes them.
func classValue(v ontology.Value) string {
	if v.Kind() == ontology.KindString {
		return v.Str()
	}
	return v.String()
}

package sion

import (
	"cmp"
	"slices"
	"time"

	"github.com/sion-go/sion/internal/traffic"
	"github.com/sion-go/sion/ontology"
)

// RendezvousInfo describes a switch's part in rendezvous routing (S3; see
// Switch.Rendezvous): its overlay state, its tables, and the traffic it
// carries as a rendezvous switch.
type RendezvousInfo struct {
	// ID is the switch's overlay ID, 32 hexadecimal digits; Joined
	// reports whether Join has made it a member.
	ID     string
	Joined bool
	// Entries counts the distinct nodes of its routing table and leaf
	// set (its overlay state, O(log N)), Leaves those of its leaf set, and
	// Links its overlay links up (its neighbours, and bypass links).
	Entries, Leaves, Links int
	// Advertisements counts the entries of its advertisement table (per
	// exact type and attribute detail); Requests the entries of its
	// request table: the proxy filters its overlay links' peers
	// registered here and events match (a register still being installed
	// is not counted).
	Advertisements, Requests int
	// Types lists the event types of the ontology it is the rendezvous
	// switch of now, sorted.
	Types []string
	// Load is the rate, in events per second over the traffic window, of
	// the events it carried as their type's rendezvous switch; Traffic the
	// rates per event class, at the three levels (S3 identification
	// hierarchy), by level then hottest first.
	Load    float64
	Traffic []ClassRate
	// Bypasses lists its parts in bypasses, by class.
	Bypasses []BypassInfo
}

// ClassRate is the traffic of one event class at a rendezvous switch (S3
// traffic monitoring).
type ClassRate struct {
	// Level is 1 (the type), 2 (the type and Attr, a first-level
	// attribute) or 3 (the type and Attr, a lowest-level one); Value is
	// Attr's value as text (a string as it is).
	Level             int
	Type, Attr, Value string
	// Rate is in events per second over the traffic window.
	Rate float64
}

// BypassInfo is a switch's part in the bypass of one event class (S3).
type BypassInfo struct {
	// Class names the class: "Type/Attr=Value".
	Class string
	// Role is "rendezvous", "branch point", "merge point", or "path" (a
	// switch between them).
	Role string
	// Active reports, at the rendezvous switch, whether the merge point
	// has set the bypass up (else the path change is under way).
	Active bool
}

// Rendezvous returns the switch's part in its place's rendezvous routing,
// and false when the place is not routed by rendezvous (S3). Safe for
// concurrent use.
func (sw *Switch) Rendezvous() (RendezvousInfo, bool) {
	s, ok := sw.routing.(*rvSwitch)
	if !ok {
		return RendezvousInfo{}, false
	}
	return s.info(s.now()), true
}

func (s *rvSwitch) info(now time.Time) RendezvousInfo {
	o := s.sw.place.Ontology()
	s.mu.Lock()
	in := RendezvousInfo{
		ID: s.table.Self().ID.String(), Joined: s.joined,
		Entries: len(s.table.Nodes()), Leaves: len(s.table.Leaves()), Links: len(s.links),
		Advertisements: len(s.adverts),
	}
	for id := range o.NumTypes() {
		if name := o.Type(id).Name; !ontology.IsReserved(name) && s.isRendezvous(name) {
			in.Types = append(in.Types, name)
		}
	}
	links := make([]*router, 0, len(s.links))
	for r := range s.links {
		links = append(links, r)
	}
	for ref, b := range s.rvRoles {
		in.Bypasses = append(in.Bypasses, BypassInfo{Class: classString(ref), Role: "rendezvous", Active: b.active})
	}
	for ref, p := range s.paths {
		role := "path"
		switch {
		case p.branch:
			role = "branch point"
		case p.merge:
			role = "merge point"
		}
		in.Bypasses = append(in.Bypasses, BypassInfo{Class: classString(ref), Role: role, Active: !p.merge || p.proxy != nil})
	}
	s.mu.Unlock()
	slices.Sort(in.Types)
	slices.SortFunc(in.Bypasses, func(a, b BypassInfo) int { return cmp.Compare(a.Class, b.Class) })
	for _, r := range links {
		in.Requests += r.sess.numInstalled()
	}
	in.Load = s.meter.Load(now)
	for _, lv := range []traffic.Level{traffic.LevelType, traffic.LevelUpper, traffic.LevelLowest} {
		rates := s.meter.Rates(now, lv)
		slices.SortStableFunc(rates, func(a, b traffic.Rate) int {
			return cmp.Or(cmp.Compare(b.Rate, a.Rate), cmp.Compare(a.Class.String(), b.Class.String()))
		})
		for _, r := range rates {
			in.Traffic = append(in.Traffic, ClassRate{Level: int(r.Class.Level), Type: r.Class.Type, Attr: r.Class.Attr, Value: r.Class.Value, Rate: r.Rate})
		}
	}
	return in
}

// RendezvousNextHop returns where the switch sends the advertisements and
// subscriptions of event type eventType (S3): the name of the overlay
// neighbour that is its next hop toward the type's rendezvous switch, or
// "" when this switch is that rendezvous switch itself. ok is false when
// the place is not routed by rendezvous, the type is unknown, or the next
// hop has no link up yet. Safe for concurrent use.
func (sw *Switch) RendezvousNextHop(eventType string) (peer string, ok bool) {
	s, isRV := sw.routing.(*rvSwitch)
	if !isRV {
		return "", false
	}
	if _, known := sw.place.Ontology().Lookup(eventType); !known {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isRendezvous(eventType) {
		return "", true
	}
	r := s.nextHop(eventType)
	if r == nil {
		return "", false
	}
	return r.peer, true
}

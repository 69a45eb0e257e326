package sion

import (
	"slices"

	"github.com/sion-go/sion/ontology"
)

// AdvertisementInfo is one entry of a switch's advertisement table in an
// S1 place that requires advertisements (PlaceConfig.RequireAdvertisements
// under RouteByFilter or RouteByEventType; see Switch.Advertisements): an
// event type and attribute detail that publishers on the switch, or
// behind its links, advertised (Session.Advertise).
type AdvertisementInfo struct {
	// Type is the advertised event type, canonical; "*" (filter.AnyType)
	// is the entry a gateway makes, standing for every type, since the
	// events of other places enter through it.
	Type string
	// Attrs is the attribute detail: the values every advertised event
	// carries, sorted by name; nil for none.
	Attrs []ontology.Attr
	// Local counts the advertisements of the switch's own sessions.
	Local int
	// Behind lists, sorted, the peers of the links the entry came over —
	// the switches at their other ends, a gateway's included — behind
	// which it is advertised; subscriptions whose types it overlaps are
	// registered toward them.
	Behind []string
}

// Advertisements returns the switch's advertisement table, sorted by type
// and detail, in a place routed by filter or by event type that requires
// advertisements (PlaceConfig.RequireAdvertisements); nil in other places
// (RendezvousInfo.Advertisements counts a rendezvous switch's entries).
// The table holds every advertisement of the place's tree, each once per
// type and detail. Safe for concurrent use.
func (sw *Switch) Advertisements() []AdvertisementInfo {
	s, ok := sw.routing.(*adSwitch)
	if !ok {
		return nil
	}
	return s.info()
}

func (s *adSwitch) info() []AdvertisementInfo {
	o := s.sw.place.Ontology()
	s.sw.routeMu.Lock()
	defer s.sw.routeMu.Unlock()
	out := make([]AdvertisementInfo, 0, len(s.table))
	for _, k := range s.tableKeys() {
		e := s.table[k]
		in := AdvertisementInfo{Type: k.typ, Local: e.local}
		for _, a := range e.attrs {
			if at, ok := o.Attribute(e.typeID, a.Name); ok {
				if v, ok := detailValue(at.Kind, a.Value); ok {
					in.Attrs = append(in.Attrs, ontology.Attr{Name: a.Name, Value: v})
				}
			}
		}
		for r := range e.from {
			in.Behind = append(in.Behind, r.peer)
		}
		slices.Sort(in.Behind)
		out = append(out, in)
	}
	return out
}

// Package usgs holds the real data the quakewatch and place examples run
// on: a week of the USGS earthquake feed and a small hazard ontology. See
// DATA.md for provenance and the ground truth the examples are checked
// against. Nested modules below examples/ (examples/nats) import it too:
// Go's internal rule goes by import path, not by module.
package usgs

import (
	_ "embed"

	"github.com/sion-go/sion"
)

// Week is the USGS GeoJSON summary feed all_week generated 2023-04-07
// (2,389 features; U.S. public domain).
//
//go:embed all_week_2023-04-07.geojson
var Week []byte

// Hazards is the hazard ontology (sion's JSON ontology format): hazard,
// seismic, anthropogenic and the USGS event types beneath them.
//
//go:embed hazards.json
var Hazards []byte

// Subscriber is one of the examples' subscribers: a name, a filter, and
// whether it uses look-in (pull) delivery.
type Subscriber struct {
	Name, Filter string
	LookIn       bool
}

// Subscribers are the examples' subscribers, in the order their lines are
// printed. The filters use the ontology: "anthropogenic" is the parent of
// explosion, quarry blast and chemical explosion, "seismic" of earthquake
// and ice quake. DATA.md gives the count each must receive.
var Subscribers = []Subscriber{
	{Name: "big", Filter: `{type ⊑ hazard; mag >= 4.5}`},
	{Name: "blasts", Filter: `{type ⊑ anthropogenic}`},
	{Name: "alaska", Filter: `{type ⊑ hazard; place contains "Alaska"; mag >= 2.5}`},
	{Name: "tsunami", Filter: `{type ⊑ hazard; tsunami == 1}`},
	{Name: "deep", Filter: `{type ⊑ seismic; depth > 300}`, LookIn: true},
	{Name: "felt-widely", Filter: `{type ⊑ seismic; match score >= 3; mag >= 5 weight 2; tsunami == 1 weight 2; json(properties.felt) >= 10}`},
}

// Fields turns one GeoJSON feature into an event: the type from
// properties.type, and the attributes mag, place, depth, tsunami, alert
// and time (milliseconds since the epoch).
var Fields = sion.JSONFields{
	TypePath: "properties.type",
	Attrs: []sion.AttrPath{
		{Name: "mag", Path: "properties.mag"},
		{Name: "place", Path: "properties.place"},
		{Name: "depth", Path: "geometry.coordinates.2"},
		{Name: "tsunami", Path: "properties.tsunami"},
		{Name: "alert", Path: "properties.alert"},
		{Name: "time", Path: "properties.time"},
	},
}

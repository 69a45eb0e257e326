// Package usgs holds the real data the quakewatch and place examples run
// on: a week of the USGS earthquake feed and a small hazard ontology. See
// DATA.md for provenance and the ground truth the examples are checked
// against.
package usgs

import _ "embed"

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

package ontology

import "strings"

// ReservedPrefix begins every name reserved for sion's own control types.
// A user type or synonym whose name begins with it is a load error
// (ErrReserved); user types may still name reserved types as parents.
const ReservedPrefix = "sion."

// The built-in control types (S1: control traffic is carried by events of
// reserved types and matched by the same index as user events). Every
// Ontology built by New contains them, before the user's types.
const (
	// ControlType is the root of all control types.
	ControlType = "sion.Control"
	// LinkRequestType asks a switch for a shared link (S1 SI-R).
	LinkRequestType = "sion.LinkRequest"
	// AdvertisementType announces the event types an entity publishes (S1, S3).
	AdvertisementType = "sion.Advertisement"
	// MarkerType is an in-band marker, e.g. a filter-deployment bleeder (S2).
	MarkerType = "sion.Marker"
	// DiscoveryType is a discovery broadcast for event places (S1).
	DiscoveryType = "sion.Discovery"
)

// reservedDefs are the built-in types, in ID order: ControlType is ID 0.
// Later issues append here; the order fixes the IDs of the reserved types.
var reservedDefs = []TypeDef{
	{Name: ControlType, Label: "sion control event"},
	{Name: LinkRequestType, Parents: []string{ControlType}, Label: "shared-link request"},
	{Name: AdvertisementType, Parents: []string{ControlType}, Label: "advertisement"},
	{Name: MarkerType, Parents: []string{ControlType}, Label: "in-band marker"},
	{Name: DiscoveryType, Parents: []string{ControlType}, Label: "discovery"},
}

// NumReserved is the number of built-in types; they have IDs
// 0..NumReserved-1 in every Ontology, and user types follow in the order
// they were given to New.
const NumReserved = 5

// IsReserved reports whether name begins with ReservedPrefix.
func IsReserved(name string) bool { return strings.HasPrefix(name, ReservedPrefix) }

// ReservedTypes returns a copy of the built-in type definitions, in ID order.
func ReservedTypes() []TypeDef {
	out := make([]TypeDef, len(reservedDefs))
	for i, d := range reservedDefs {
		d.Parents = append([]string(nil), d.Parents...)
		out[i] = d
	}
	return out
}

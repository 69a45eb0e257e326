package ontology

import "strings"

// ReservedPrefix begins every name reserved for sion's own control types.
// A user type, attribute or synonym whose name begins with it is a load error
// (ErrReserved); user types may still name reserved types as parents.
const ReservedPrefix = "sion."

// The built-in reserved types: the control traffic that is routed
// between switches through the filter index like user events (S1:
// discovery and event-place search; S3: advertisements). Every Ontology
// built by New contains them, before the user's types. Control that
// stays between two neighbouring switches (link requests, filter
// registers, markers, probes, …) is not an event type: it is a typed
// link message of the root package (DESIGN.md "One mechanism").
const (
	// ControlType is the root of all reserved types.
	ControlType = "sion.Control"
	// AdvertisementType announces the event types an entity publishes (S1, S3).
	AdvertisementType = "sion.Advertisement"
	// DiscoveryType is a discovery event (S1 advertisement and search),
	// addressed to an identifier by AddressAttr.
	DiscoveryType = "sion.Discovery"
	// DiscoveryAnswerType answers a DiscoveryType event: the answering
	// entity's name, places and addresses, addressed to the seeker by
	// name (S1 event-place search) and routed like it.
	DiscoveryAnswerType = "sion.DiscoveryAnswer"
)

// Attributes of the discovery types (S1 advertisement): AddressAttr holds
// the identifier a discovery event is addressed to ("name:…" unicast,
// "attr:key=value" multicast, and so on); SearchAttr the search it belongs
// to. Entities advertise filters on AddressAttr; user attribute names
// beginning with ReservedPrefix are refused, so these never clash.
const (
	AddressAttr = "sion.to"
	SearchAttr  = "sion.search"
)

// reservedDefs are the built-in types, in ID order: ControlType is ID 0.
// Later issues append here; the order fixes the IDs of the reserved types.
var reservedDefs = []TypeDef{
	{Name: ControlType, Label: "sion control event"},
	{Name: AdvertisementType, Parents: []string{ControlType}, Label: "advertisement"},
	{Name: DiscoveryType, Parents: []string{ControlType}, Label: "discovery", Attributes: []Attribute{
		{Name: AddressAttr, Kind: KindString}, {Name: SearchAttr, Kind: KindString}}},
	{Name: DiscoveryAnswerType, Parents: []string{ControlType}, Label: "discovery answer", Attributes: []Attribute{
		{Name: AddressAttr, Kind: KindString}, {Name: SearchAttr, Kind: KindString}}},
}

// NumReserved is the number of built-in types; they have IDs
// 0..NumReserved-1 in every Ontology, and user types follow in the order
// they were given to New.
const NumReserved = 4

// IsRouted reports whether events of the reserved type name are routed
// between switches like user events, by the filters entities advertise
// (the discovery types); the other reserved types are not published yet.
func IsRouted(name string) bool { return name == DiscoveryType || name == DiscoveryAnswerType }

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

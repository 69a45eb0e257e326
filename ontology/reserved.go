package ontology

import "strings"

// ReservedPrefix begins every name reserved for sion's own control types.
// A user type, attribute or synonym whose name begins with it is a load error
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
	// LinkAcceptType accepts a shared-link request (S1).
	LinkAcceptType = "sion.LinkAccept"
	// RegisterType installs a proxy filter at a router's peer (S1 event
	// path, reference counted); the peer acknowledges it (S2).
	RegisterType = "sion.Register"
	// ReleaseType removes a proxy filter a RegisterType installed.
	ReleaseType = "sion.Release"
	// AckType acknowledges a register or a marker once everything behind
	// it is done (S2 contract).
	AckType = "sion.Ack"
	// SyncedType is the marker after a router's initial registers: its
	// peer then has every filter the router's switch had.
	SyncedType = "sion.Synced"
	// ProbeType is an n-hop probe along shared links, restricted by a hop
	// attribute (toward parents, toward children, all), that finds the
	// switches a child can re-link to when its parent fails (S1).
	ProbeType = "sion.Probe"
	// ProbeReplyType answers a probe with the replying switch's name and
	// addresses.
	ProbeReplyType = "sion.ProbeReply"
	// LeaveType tells a switch's neighbours that it leaves the place, and
	// where its children re-link (S1 release and re-establishment).
	LeaveType = "sion.Leave"
	// FederateType is a federation request from one event place to
	// another: it asks for a gateway (S1 SI-GW).
	FederateType = "sion.Federate"
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
	{Name: LinkRequestType, Parents: []string{ControlType}, Label: "shared-link request"},
	{Name: AdvertisementType, Parents: []string{ControlType}, Label: "advertisement"},
	{Name: MarkerType, Parents: []string{ControlType}, Label: "in-band marker"},
	{Name: DiscoveryType, Parents: []string{ControlType}, Label: "discovery", Attributes: []Attribute{
		{Name: AddressAttr, Kind: KindString}, {Name: SearchAttr, Kind: KindString}}},
	{Name: LinkAcceptType, Parents: []string{ControlType}, Label: "shared-link accept"},
	{Name: RegisterType, Parents: []string{ControlType}, Label: "proxy filter register"},
	{Name: ReleaseType, Parents: []string{ControlType}, Label: "proxy filter release"},
	{Name: AckType, Parents: []string{ControlType}, Label: "acknowledgement"},
	{Name: SyncedType, Parents: []string{MarkerType}, Label: "initial filters sent"},
	{Name: ProbeType, Parents: []string{ControlType}, Label: "n-hop probe"},
	{Name: ProbeReplyType, Parents: []string{ControlType}, Label: "probe reply"},
	{Name: LeaveType, Parents: []string{ControlType}, Label: "leave"},
	{Name: FederateType, Parents: []string{ControlType}, Label: "federation request"},
	{Name: DiscoveryAnswerType, Parents: []string{ControlType}, Label: "discovery answer", Attributes: []Attribute{
		{Name: AddressAttr, Kind: KindString}, {Name: SearchAttr, Kind: KindString}}},
}

// NumReserved is the number of built-in types; they have IDs
// 0..NumReserved-1 in every Ontology, and user types follow in the order
// they were given to New.
const NumReserved = 15

// IsRouted reports whether events of the reserved type name are routed
// between switches like user events, by the filters entities advertise
// (the discovery types), rather than handled hop by hop as link control.
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

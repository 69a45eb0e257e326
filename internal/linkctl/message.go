package linkctl

import "strconv"

// Kind identifies a control message type; it is the first byte of every
// body. The zero Kind is no message and never appears in a valid body.
// The numbers are part of the format: never renumber them.
type Kind uint8

// The message kinds, with their numbers.
const (
	KindLinkRequest Kind = 1  // requester → switch: open a shared link
	KindLinkAccept  Kind = 2  // switch → requester: the link is open
	KindFederate    Kind = 3  // gateway → switch: open a federation
	KindRegister    Kind = 4  // either way: install a proxy filter
	KindRelease     Kind = 5  // either way: remove a proxy filter
	KindMarker      Kind = 6  // either way: an in-band barrier
	KindAck         Kind = 7  // either way: a Register, Marker or Advertise is done
	KindSynced      Kind = 8  // either way: the initial Registers precede it
	KindProbe       Kind = 9  // either way: an n-hop probe
	KindProbeReply  Kind = 10 // either way: the answer to a Probe, relayed back
	KindLeave       Kind = 11 // either way: the sender leaves

	KindJoin           Kind = 12 // overlay hop → hop: a newcomer's join, routed toward its ID
	KindJoinReply      Kind = 13 // root → newcomer: the rows gathered and the leaf set
	KindAnnounce       Kind = 14 // switch → each node of its state: here, or leaving
	KindLeafSetRequest Kind = 15 // either way: send me your leaf set (repair)
	KindLeafSetReply   Kind = 16 // either way: the answer to a LeafSetRequest
	KindAdvertise      Kind = 17 // overlay hop → hop: an advertisement toward the rendezvous switch; or over the tree of an S1 place
	KindUnadvertise    Kind = 18 // the way its Advertise went: withdraw it
	KindPathChange     Kind = 19 // along a distribution path: find the branch (or merge) point
	KindBranchPoint    Kind = 20 // back along the path: the branch (or merge) point's answer
	KindOverlayLink    Kind = 21 // requester → switch: open an overlay link (S3)
	KindBypassEnd      Kind = 22 // along a bypassed class's path: the bypass ends

	KindManage      Kind = 23 // agent → switch: manage this switch (S2), the first message
	KindModel       Kind = 24 // switch → agent: the switch's part of the network model, whole
	KindModelChange Kind = 25 // switch → agent: one change to that part
	KindDeploy      Kind = 26 // agent → switch: one deployment's filters at the switch
	KindBleeder     Kind = 27 // over a shared link, downstream: a bleeder message (S2)
	KindDetected    Kind = 28 // switch → agent: all bleeders detected
	KindVerdict     Kind = 29 // agent → switch: a request granted or refused
)

var kindNames = [...]string{
	KindLinkRequest: "link request",
	KindLinkAccept:  "link accept",
	KindFederate:    "federate",
	KindRegister:    "register",
	KindRelease:     "release",
	KindMarker:      "marker",
	KindAck:         "ack",
	KindSynced:      "synced",
	KindProbe:       "probe",
	KindProbeReply:  "probe reply",
	KindLeave:       "leave",

	KindJoin:           "join",
	KindJoinReply:      "join reply",
	KindAnnounce:       "announce",
	KindLeafSetRequest: "leaf set request",
	KindLeafSetReply:   "leaf set reply",
	KindAdvertise:      "advertise",
	KindUnadvertise:    "unadvertise",
	KindPathChange:     "path change",
	KindBranchPoint:    "branch point",
	KindOverlayLink:    "overlay link",
	KindBypassEnd:      "bypass end",

	KindManage:      "manage",
	KindModel:       "model",
	KindModelChange: "model change",
	KindDeploy:      "deploy",
	KindBleeder:     "bleeder",
	KindDetected:    "detected",
	KindVerdict:     "verdict",
}

// String returns the message type's name in lower case ("register",
// "probe reply"), or "Kind(n)" for a number that names no message.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Bounds of the format.
const (
	// MaxHops bounds the hop counts: Register.TTL, Marker.TTL,
	// Marker.Gateways, Probe.Hops, ProbeReply.Hops and Join.Hops, each
	// 0…MaxHops.
	MaxHops = 65535
	// MaxNames bounds the entries of every list: the lists of names
	// (Register.Places, Probe.Path and ProbeReply.Path), the lists of
	// overlay nodes (Join.Rows, JoinReply.Rows and .Leaves,
	// Announce.Leaves, LeafSetReply.Leaves) and Advertise.Attrs.
	MaxNames = 65536
	// IDLen is the length of an overlay ID (package overlay's ID): 16
	// bytes, which travel raw.
	IDLen = 16
)

// Directions of a Probe (Probe.Dir); the numbers are the root package's
// HopDirection.
const (
	DirParents  = 0 // follow only links to the switch's parent
	DirChildren = 1 // follow only links to children
	DirAll      = 2 // follow every link
)

// Directions of a distribution path (PathChange.Direction).
const (
	Downstream = 0 // from the rendezvous switch toward the subscribers
	Upstream   = 1 // from the rendezvous switch toward the publishers
)

// Levels of an event class (ClassRef.Level): the three levels at which
// the rendezvous switch measures traffic (S3).
const (
	LevelType      = 1 // the event type alone
	LevelFirstAttr = 2 // the type and a first-level attribute's value
	LevelLeafAttr  = 3 // the type and a lowest-level attribute's value
)

// Message is one control message. It is implemented only by the pointer
// types of this package (*LinkRequest, *Register, …, *BranchPoint); Decode
// returns one of them and Encode accepts any of them.
type Message interface {
	// Kind returns the message type; it does not read the receiver, so a
	// nil pointer answers too.
	Kind() Kind
	encode(e *encoder)
	decode(d *decoder)
}

// LinkRequest asks a switch for a shared link (S1 shared-link
// establishment, SI-R): the first message on a link, after the wire
// handshake. The switch answers LinkAccept, or a wire.Error and closes.
type LinkRequest struct {
	// Switch names the requesting switch and Place its event place.
	Switch, Place string
	// Link is the requesting link's ID, the same across its
	// re-establishments so that the switch replaces a stale link of the
	// same ID; 0 for an absorb request. Never negative.
	Link int64
	// Addr is where the requester serves links, "" if nowhere.
	Addr string
	// Merge allows the link although the places differ (S1 merge of
	// event places).
	Merge bool
	// Absorb, when not "", makes this an absorb request: the switch
	// leaves its place's tree and links to this address instead.
	Absorb string
}

// LinkAccept accepts a LinkRequest (S1 shared-link establishment): the
// link is up from here on.
type LinkAccept struct {
	// Switch names the accepting switch and Place its event place; Place
	// may be "".
	Switch, Place string
}

// Federate asks a switch of another event place for a federation (S1
// SI-GW): the first message of a gateway, after the wire handshake. The
// switch answers LinkAccept, or a wire.Error and closes.
type Federate struct {
	// Switch names the requesting switch, Place its event place and
	// Gateway the gateway.
	Switch, Place, Gateway string
	// Link is the gateway's ID, the same across its re-establishments.
	// Never negative.
	Link int64
	// Import asks for events of the receiving place to be carried into
	// the requesting one; Export for events of the requesting place to be
	// carried into the receiving one. A request has at least one; the
	// codec does not check that.
	Import, Export bool
}

// Register installs the sender's proxy filter Key at the peer (S1 event
// path: filters propagate against the events' direction). The peer
// installs it, propagates it over its other links within TTL, and
// answers Ack with Ack once every link it went on has acknowledged it
// (the S2 contract). A Register of a Key already installed replaces it.
type Register struct {
	// Key names the proxy filter on this link; Release names it again.
	Key uint64
	// Ack is the number the answering Ack carries.
	Ack uint64
	// Filter is the filter's canonical source text (filter package
	// syntax).
	Filter string
	// TTL is how many more links the filter may spread over from the
	// peer, 0…MaxHops.
	TTL int
	// Places is nil for interest of the sender's place alone; otherwise
	// the event places the interest came through, in order (names without
	// NUL or newline, at most MaxNames), so that gateways never carry it
	// back into one of them.
	Places []string
}

// Release removes the proxy filter Key that a Register installed (S1
// event path). It is not answered.
type Release struct {
	// Key is the Register's Key.
	Key uint64
}

// Marker is an in-band marker (S2 bleeder marker; Switch.Flush): once
// the peer has it, everything sent before it on the link has arrived
// there. The peer passes it on within TTL and Gateways and answers Ack
// with Ack once those links have answered.
type Marker struct {
	// Ack is the number the answering Ack carries.
	Ack uint64
	// TTL is how many more links the marker may cross from the peer, and
	// Gateways how many more gateways; each 0…MaxHops.
	TTL, Gateways int
}

// Ack answers a Register or Marker (S2 contract): it is done downstream
// of the peer, or failed there. It answers an Advertise (S3) the same
// way.
type Ack struct {
	// Ack is the Register's, Marker's or Advertise's Ack.
	Ack uint64
	// Error is "" when the Register or Marker succeeded, else why it
	// failed, for people. Any bytes: it may quote refused input, and an
	// Ack must always encode.
	Error string
}

// Synced follows the Registers a router sends when its link comes up: on
// its arrival the peer holds the sender's initial interest (S1 event
// path). Where the sender also sends its advertisement table as the link
// comes up (an S1 place that requires advertisements), Synced waits for
// the Acks of those Advertises too. It has no fields.
type Synced struct{}

// Probe is an n-hop probe along shared links (S1 membership: finding
// switches within a number of hops, and loops before they close). Every
// switch it reaches answers ProbeReply and passes it on while Hops lasts.
// Probes stay in their place: gateways do not carry them.
type Probe struct {
	// ID names the probe at the prober; replies carry it.
	ID uint64
	// Hops is how many links the probe may still cross, the one it
	// travels on included: at 1 the receiver answers and passes it no
	// further. 0…MaxHops.
	Hops int
	// Dir restricts the links it follows: DirParents, DirChildren or
	// DirAll.
	Dir int
	// Path lists the switches the probe has passed, the prober first
	// (names without NUL or newline, at most MaxNames).
	Path []string
}

// ProbeReply answers a Probe (S1 membership). It travels back along the
// probe's path, each switch relaying it one link towards the prober.
type ProbeReply struct {
	// ID is the Probe's ID.
	ID uint64
	// Hops is the replying switch's distance from the prober in links,
	// 0…MaxHops.
	Hops int
	// Path is the probe's Path as it reached the replying switch, the
	// prober first (names without NUL or newline, at most MaxNames).
	Path []string
	// Switch names the replying switch and Addr is where it serves links,
	// "" if nowhere.
	Switch, Addr string
	// End reports that the probe goes no further from the replying
	// switch (no hops or no links left), so no more replies come that way.
	End bool
	// Pending reports that the replying switch's own parent link is being
	// set up, so its answer cannot rule out a loop.
	Pending bool
}

// Leave tells the peer that the sender leaves (S1 release and
// re-establishment of shared links): its children re-link to Parent, or
// with Parent "" become a root. From a child it means only that the link
// ends. Over a gateway it ends the federation, and Parent is "".
type Leave struct {
	// Parent is the address the peer's new parent serves links at, or ""
	// for none.
	Parent string
}

// OverlayNode is a switch of the S3 overlay (package overlay's Node) as
// the messages carry it: its 16-byte ID and the address it serves links
// at.
type OverlayNode struct {
	// ID is the switch's overlay ID (overlay.HashID of its name).
	ID [IDLen]byte
	// Addr is where the switch serves links, "" if nowhere.
	Addr string
}

// AttrDetail is one attribute of an advertisement's detail (S3): an
// attribute the advertised events carry and its value, as text.
type AttrDetail struct {
	// Name names the attribute and Value is its value; Value may be "".
	Name, Value string
}

// ClassRef names an event class at one of the three levels S3 measures
// traffic at: the type alone (LevelType), or the type and the value of
// an attribute (LevelFirstAttr, LevelLeafAttr). At LevelType, Attr and
// Value are ""; the codec does not check that. Level 0 is no level, so
// the zero ClassRef (and a message holding it) does not encode.
type ClassRef struct {
	// Level is LevelType, LevelFirstAttr or LevelLeafAttr.
	Level byte
	// Type names the event type, Attr the attribute and Value its value.
	Type, Attr, Value string
}

// Join carries a newcomer's join through the overlay (S3 overlay join,
// Pastry's join message): it is routed hop by hop toward Key, the
// newcomer's own ID, and each switch on the route appends the rows of its
// routing table valid for the newcomer (overlay.Table.JoinRows) and
// itself to Rows before it passes the Join on. The root, the switch that
// routes it nowhere further, answers the newcomer with JoinReply.
type Join struct {
	// Key is the key the Join is routed toward: the newcomer's ID.
	Key [IDLen]byte
	// Joiner is the newcomer's ID and JoinerAddr where it serves links,
	// so that the root can answer it.
	Joiner     [IDLen]byte
	JoinerAddr string
	// Hops is how many overlay hops the Join has made, 0…MaxHops; the
	// switches' hop limit ends a route that does not converge.
	Hops int
	// Rows lists the nodes gathered on the route so far, in the order
	// they were appended (at most MaxNames).
	Rows []OverlayNode
}

// JoinReply answers a Join (S3 overlay join): the newcomer's root sends
// it the rows gathered on the route and its own leaf set
// (overlay.Table.LeafSetFor). The newcomer learns them all, then sends
// Announce to every node of its state.
type JoinReply struct {
	// Joiner is the newcomer's ID, the Join's Joiner.
	Joiner [IDLen]byte
	// Rows is the Join's Rows with the root's own rows appended, and
	// Leaves the root's leaf set and the root itself (each at most
	// MaxNames).
	Rows, Leaves []OverlayNode
}

// Announce tells a node of the sender's overlay state that the sender is
// here (S3 overlay join: the last step, after JoinReply), or that it
// leaves (S3 overlay leave). Each receiver learns Node, or on Leaving
// removes it and learns Leaves, which gives the leaver's leaf-set
// neighbours their replacements.
type Announce struct {
	// Node is the sender.
	Node OverlayNode
	// Leaving reports that the sender leaves the overlay.
	Leaving bool
	// Leaves is the leaver's leaf set when Leaving, else normally nil (at
	// most MaxNames); the codec does not check that.
	Leaves []OverlayNode
}

// LeafSetRequest asks a node for its leaf set (S3 overlay repair, after
// a death: overlay.Table.RepairContacts names whom to ask). It is
// answered by LeafSetReply. It has no fields.
type LeafSetRequest struct{}

// LeafSetReply answers a LeafSetRequest (S3 overlay repair) with the
// answering node's leaf set and itself (overlay.Table.LeafSetFor of the
// asker).
type LeafSetReply struct {
	// Leaves lists the nodes (at most MaxNames).
	Leaves []OverlayNode
}

// Advertise carries an advertisement one overlay hop toward the
// rendezvous switch of its type, the root of overlay.HashID(Type) (S3
// advertisement routing): the peer installs it in its advertisement
// table under Key, passes it on toward the rendezvous switch, and
// answers Ack with Ack once it is installed there (as for Register, the
// S2 contract). An Advertise of a Key already installed replaces it.
//
// In an S1 place that requires advertisements (the root package's
// PlaceConfig.RequireAdvertisements) it travels over the shared links of
// the place's tree instead, flooding it: it tells the peer that events
// of Type (with that detail) may come from behind the sender — Type "*"
// with no detail: events of every type, through a gateway — and the peer
// registers toward the sender the subscriptions they may match before it
// answers.
type Advertise struct {
	// Key names the advertisement on this link; Unadvertise names it
	// again.
	Key uint64
	// Ack is the number the answering Ack carries.
	Ack uint64
	// Type names the advertised event type.
	Type string
	// Attrs is the advertisement's attribute detail: the attributes the
	// advertised events carry, with their values (at most MaxNames).
	Attrs []AttrDetail
}

// Unadvertise withdraws the advertisement Key that an Advertise
// installed (S3 advertisement routing, or the tree of an S1 place that
// requires advertisements). It is not answered.
type Unadvertise struct {
	// Key is the Advertise's Key.
	Key uint64
}

// PathChange travels from the rendezvous switch along an event
// distribution path of Class, hop by hop (S3 path change information):
// downstream toward the subscribers to find the branch point, the first
// switch where the class's path forks, or upstream toward the publishers
// to find the merge point, where the class's paths from several
// publishers merge. That switch answers BranchPoint back along the path;
// the others pass the PathChange on. The rendezvous switch then has the
// merge point send the class straight to the branch point (a bypass).
type PathChange struct {
	// Class is the event class whose path is followed.
	Class ClassRef
	// Direction is Downstream or Upstream.
	Direction byte
	// Branch is the branch point's ID when the sender knows it (an
	// upstream PathChange that tells the merge point where to bypass to),
	// else zero; BranchAddr is where the branch point serves links, "" if
	// unknown.
	Branch     [IDLen]byte
	BranchAddr string
	// Seq numbers the rendezvous switch's path changes; the answer
	// carries it, and a switch ignores a Seq older than one it has seen
	// for Class.
	Seq uint64
}

// BranchPoint answers a PathChange (S3 branch-point and merge-point
// detection): it travels back along the path to the rendezvous switch and
// names the switch where the path forks (downstream) or merges
// (upstream).
type BranchPoint struct {
	// Class and Seq are the PathChange's.
	Class ClassRef
	Seq   uint64
	// Node is the branch or merge point.
	Node OverlayNode
}

// OverlayLink asks a switch for an overlay link (S3: the overlay's
// neighbours are linked by shared links, outside the place's tree): the
// first message on a link, after the wire handshake, like LinkRequest. The
// switch answers LinkAccept, or a wire.Error and closes.
type OverlayLink struct {
	// Switch names the requesting switch and Place its event place.
	Switch, Place string
	// Node is the requester's overlay node: its ID and where it serves
	// links.
	Node OverlayNode
}

// BypassEnd ends the bypass of Class that the path change numbered Seq
// set up (S3 bypass, torn down): it travels hop by hop along the class's
// path from the rendezvous switch to the merge point, which stops
// bypassing — each hop acknowledging with Ack once the next hop has, so
// that the rendezvous switch knows the class's events come its way again
// — or, with Ack 0 (not answered), from the merge point or the branch
// point toward the rendezvous switch, to tell it the bypass has ended.
type BypassEnd struct {
	// Class and Seq are the bypass's PathChange's.
	Class ClassRef
	Seq   uint64
	// Ack is the number the answering Ack carries; 0 asks for none.
	Ack uint64
}

// Kind returns KindBypassEnd.
func (*BypassEnd) Kind() Kind { return KindBypassEnd }

// Kind returns KindOverlayLink.
func (*OverlayLink) Kind() Kind { return KindOverlayLink }

// Kind returns KindLinkRequest.
func (*LinkRequest) Kind() Kind { return KindLinkRequest }

// Kind returns KindLinkAccept.
func (*LinkAccept) Kind() Kind { return KindLinkAccept }

// Kind returns KindFederate.
func (*Federate) Kind() Kind { return KindFederate }

// Kind returns KindRegister.
func (*Register) Kind() Kind { return KindRegister }

// Kind returns KindRelease.
func (*Release) Kind() Kind { return KindRelease }

// Kind returns KindMarker.
func (*Marker) Kind() Kind { return KindMarker }

// Kind returns KindAck.
func (*Ack) Kind() Kind { return KindAck }

// Kind returns KindSynced.
func (*Synced) Kind() Kind { return KindSynced }

// Kind returns KindProbe.
func (*Probe) Kind() Kind { return KindProbe }

// Kind returns KindProbeReply.
func (*ProbeReply) Kind() Kind { return KindProbeReply }

// Kind returns KindLeave.
func (*Leave) Kind() Kind { return KindLeave }

// Kind returns KindJoin.
func (*Join) Kind() Kind { return KindJoin }

// Kind returns KindJoinReply.
func (*JoinReply) Kind() Kind { return KindJoinReply }

// Kind returns KindAnnounce.
func (*Announce) Kind() Kind { return KindAnnounce }

// Kind returns KindLeafSetRequest.
func (*LeafSetRequest) Kind() Kind { return KindLeafSetRequest }

// Kind returns KindLeafSetReply.
func (*LeafSetReply) Kind() Kind { return KindLeafSetReply }

// Kind returns KindAdvertise.
func (*Advertise) Kind() Kind { return KindAdvertise }

// Kind returns KindUnadvertise.
func (*Unadvertise) Kind() Kind { return KindUnadvertise }

// Kind returns KindPathChange.
func (*PathChange) Kind() Kind { return KindPathChange }

// Kind returns KindBranchPoint.
func (*BranchPoint) Kind() Kind { return KindBranchPoint }

// newMessage returns a zero message of kind k, or nil for an unknown k.
func newMessage(k Kind) Message {
	switch k {
	case KindLinkRequest:
		return new(LinkRequest)
	case KindLinkAccept:
		return new(LinkAccept)
	case KindFederate:
		return new(Federate)
	case KindRegister:
		return new(Register)
	case KindRelease:
		return new(Release)
	case KindMarker:
		return new(Marker)
	case KindAck:
		return new(Ack)
	case KindSynced:
		return new(Synced)
	case KindProbe:
		return new(Probe)
	case KindProbeReply:
		return new(ProbeReply)
	case KindLeave:
		return new(Leave)
	case KindJoin:
		return new(Join)
	case KindJoinReply:
		return new(JoinReply)
	case KindAnnounce:
		return new(Announce)
	case KindLeafSetRequest:
		return new(LeafSetRequest)
	case KindLeafSetReply:
		return new(LeafSetReply)
	case KindAdvertise:
		return new(Advertise)
	case KindUnadvertise:
		return new(Unadvertise)
	case KindPathChange:
		return new(PathChange)
	case KindBranchPoint:
		return new(BranchPoint)
	case KindOverlayLink:
		return new(OverlayLink)
	case KindBypassEnd:
		return new(BypassEnd)
	case KindManage:
		return new(Manage)
	case KindModel:
		return new(Model)
	case KindModelChange:
		return new(ModelChange)
	case KindDeploy:
		return new(Deploy)
	case KindBleeder:
		return new(Bleeder)
	case KindDetected:
		return new(Detected)
	case KindVerdict:
		return new(Verdict)
	}
	return nil
}

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
	KindAck         Kind = 7  // either way: a Register or Marker is done
	KindSynced      Kind = 8  // either way: the initial Registers precede it
	KindProbe       Kind = 9  // either way: an n-hop probe
	KindProbeReply  Kind = 10 // either way: the answer to a Probe, relayed back
	KindLeave       Kind = 11 // either way: the sender leaves
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
	// Marker.Gateways, Probe.Hops and ProbeReply.Hops, each 0…MaxHops.
	MaxHops = 65535
	// MaxNames bounds the entries of a list of names: Register.Places,
	// Probe.Path and ProbeReply.Path.
	MaxNames = 65536
)

// Directions of a Probe (Probe.Dir); the numbers are the root package's
// HopDirection.
const (
	DirParents  = 0 // follow only links to the switch's parent
	DirChildren = 1 // follow only links to children
	DirAll      = 2 // follow every link
)

// Message is one control message. It is implemented only by the pointer
// types of this package (*LinkRequest, *Register, …, *Leave); Decode
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
// of the peer, or failed there.
type Ack struct {
	// Ack is the Register's or Marker's Ack.
	Ack uint64
	// Error is "" when the Register or Marker succeeded, else why it
	// failed, for people. Any bytes: it may quote refused input, and an
	// Ack must always encode.
	Error string
}

// Synced follows the Registers a router sends when its link comes up: on
// its arrival the peer holds the sender's initial interest (S1 event
// path). It has no fields.
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
	}
	return nil
}

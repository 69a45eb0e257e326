// Package linkctl holds the typed control messages two neighbouring
// switches exchange on a link — a shared link (S1 SI-R) or a gateway (S1
// SI-GW) — and their binary encoding. They are link-local: each one is
// meant for the switch at the other end of the link, which consumes it;
// none is ever routed or matched against a filter index. Control that
// must find its way by meaning (discovery, advertisements) stays an event
// of a reserved "sion." type instead (DESIGN.md, "One mechanism").
//
// A message travels as the body of a wire.Control frame, in the same
// ordered stream as the wire.Forward frames that carry the link's events.
// That order is part of the contract: a Marker answered by an Ack proves
// that every event and Register sent before it has arrived and has been
// passed on (S2 in-band markers), and Synced proves that the initial
// Registers precede it.
//
// Encode turns a message into a whole wire frame; Decode turns the body of
// a decoded wire.Control back into a message. Both are pure and keep no
// state, so they are safe for concurrent use by multiple goroutines.
//
// # Messages
//
// Establishing a link: LinkRequest (answered by LinkAccept or a wire.Error)
// on a shared link, Federate on a gateway. Filter propagation (S1 event
// path, S2 contract): Register and Release; Register and Marker are
// answered by Ack (as is Advertise, below); Synced follows the initial Registers. Membership (S1):
// Probe and ProbeReply for n-hop probes, Leave when a switch leaves its
// place or a gateway ends its federation.
//
// Managed places (S2; DESIGN.md "Beyond one tree"): an agent's own
// connection to a switch — not a link — carries Manage (the agent's
// first message), Model (the switch's part of the network model,
// answering Manage) and ModelChange (each change to it after), Deploy (a
// deployment's filters, bags, send flags and relays at the switch),
// Detected ("all bleeders detected") and Verdict (a subscription or
// advertisement granted or refused). Bleeder is the one message of a
// managed place on a shared link: in band, downstream.
//
// Rendezvous routing (S3, over package overlay's Pastry-style overlay;
// DESIGN.md "Beyond one tree"): Join, routed hop by hop toward a
// newcomer's ID, answered by JoinReply from its root, then Announce to
// the nodes of the newcomer's state; Announce with Leaving when a switch
// leaves the overlay; LeafSetRequest and LeafSetReply to repair a leaf
// set after a death. Advertise (answered by Ack) and Unadvertise, hop by
// hop toward the rendezvous switch of a type. PathChange along an event
// class's distribution path, answered by BranchPoint from the branch (or
// merge) point. Overlay IDs travel as 16 raw bytes, so the package needs
// no import of package overlay; each hop is a message for its peer, which
// consumes it and sends a new one on the next hop.
//
// # Body grammar
//
// A body is one kind byte, then the fields of that kind in declaration
// order, and nothing after them:
//
//	body        = kind message .
//	kind        = byte .                    (Kind: 1 LinkRequest … 29 Verdict)
//
//	LinkRequest = text(Switch) text(Place) sint(Link ≥ 0) text(Addr) bool(Merge) text(Absorb) .
//	LinkAccept  = text(Switch) text(Place) .
//	Federate    = text(Switch) text(Place) text(Gateway) sint(Link ≥ 0) bool(Import) bool(Export) .
//	Register    = uvarint(Key) uvarint(Ack) text(Filter) sint(TTL 0…MaxHops) names(Places) .
//	Release     = uvarint(Key) .
//	Marker      = uvarint(Ack) sint(TTL 0…MaxHops) sint(Gateways 0…MaxHops) .
//	Ack         = uvarint(Ack) string(Error) .
//	Synced      = .
//	Probe       = uvarint(ID) sint(Hops 0…MaxHops) sint(Dir 0…2) names(Path) .
//	ProbeReply  = uvarint(ID) sint(Hops 0…MaxHops) names(Path) text(Switch) text(Addr)
//	              bool(End) bool(Pending) .
//	Leave       = text(Parent) .
//
//	Join           = id(Key) id(Joiner) text(JoinerAddr) sint(Hops 0…MaxHops) nodes(Rows) .
//	JoinReply      = id(Joiner) nodes(Rows) nodes(Leaves) .
//	Announce       = node(Node) bool(Leaving) nodes(Leaves) .
//	LeafSetRequest = .
//	LeafSetReply   = nodes(Leaves) .
//	Advertise      = uvarint(Key) uvarint(Ack) text(Type) attrs(Attrs) .
//	Unadvertise    = uvarint(Key) .
//	PathChange     = class(Class) byte(Direction 0…1) id(Branch) text(BranchAddr) uvarint(Seq) .
//	BranchPoint    = class(Class) uvarint(Seq) node(Node) .
//	OverlayLink    = text(Switch) text(Place) node(Node) .
//	BypassEnd      = class(Class) uvarint(Seq) uvarint(Ack) .
//
//	Manage      = text(Agent) text(Place) .
//	Model       = text(Switch) list(text(Peer) text(Addr)) list(text(Peer) list(text)) uvarint(Follow)
//	              uvarint(Deployment) .
//	ModelChange = byte(Op 1…6) uvarint(Key) uvarint(Session) text(Name) text(Peer) text(Addr) text(Text) attrs(Attrs) .
//	Deploy      = uvarint(Deployment)
//	              list(uvarint(ID) text(Peer) uvarint(Session) list(text) list(uvarint) bool(Send))
//	              list(uvarint(Bleeder) names(To)) .
//	Bleeder     = uvarint(Deployment) uvarint(Filter) .
//	Detected    = uvarint(Deployment) uvarint(Filter) .
//	Verdict     = uvarint(Key) bool(Advert) string(Error) .
//
//	names       = uvarint(n ≤ MaxNames) { name } .
//	name        = text without NUL or LF .   (a switch or place name)
//	nodes       = uvarint(n ≤ MaxNames) { node } .
//	node        = id(ID) text(Addr) .        (an OverlayNode)
//	id          = 16*byte .                  (an overlay ID, raw; IDLen)
//	attrs       = uvarint(n ≤ MaxNames) { text(Name) text(Value) } .
//	class       = byte(Level 1…3) text(Type) text(Attr) text(Value) .
//	list(x)     = uvarint(n ≤ MaxNames) { x } .
//
//	uvarint     = unsigned LEB128 (binary.AppendUvarint), 1 to 10 bytes, minimal .
//	sint        = uvarint of the zigzag encoding (binary.AppendVarint) .
//	bool        = byte 0 or 1 .
//	string      = uvarint(length) length*byte .   (any bytes)
//	text        = string that is valid UTF-8 .
//
// These are the primitives of package wire. The encoding is canonical:
// varints are minimal, bools 0 or 1 and IDs of fixed length, so each
// message has exactly one
// body and Encode(Decode(b)) == b for every body b that decodes. A nil
// list and an empty one both encode as count 0 and decode as nil.
//
// # Bounds and errors
//
// Decode checks every length and count against the bytes remaining before
// it allocates, so a body cannot make it allocate much more than its own
// size; the frame's size is wire.Limits.MaxFrameBytes's business. Errors
// are *MessageError values that name the message, the field and its byte
// offset in the body, e.g.
//
//	linkctl: malformed register message: places 2: contains a newline at offset 14
//
// and wrap ErrMalformed. Encode refuses what Decode would refuse, with the
// same field, offset and reason, so whatever encodes also decodes; it also
// refuses a frame over wire.Limits.MaxFrameBytes with wire's error, which
// wraps wire.ErrTooLarge.
package linkctl

// Package wire is the binary codec of sion's session and link traffic:
// the frames a remote session (sion.Dial over a transport.Conn) and its
// switch exchange, and those of shared links between switches. Encode appends one message as one frame; Decode turns one
// frame back into a message. A transport.Conn carries each frame whole, so
// frames have no outer length prefix. See DESIGN.md "Network", Transports
// (S1): the codec is versioned, bounded and fuzzed, and a malformed frame
// closes that link with an error and harms nothing else.
//
// After Welcome, the frames a switch sends a remote session form the
// session's stream, numbered from 1 without a field for it: the client
// counts them and confirms them with Received, and a client that
// reconnects names the session (Hello.Resume) and how many it received
// (Hello.Received), so that the switch sends the rest again, each once.
//
// A shared link between two switches (sion.Switch.Link), and a gateway
// between two places, speak the same codec: Hello and Welcome open it,
// then each side sends Forward and Control frames in one ordered stream.
// Forward carries events only: data events, and routed control events of
// reserved "sion." types (discovery, advertisements) that are matched like
// any other. Link-local control (link request and accept, federation
// request, proxy filter register and release, marker and ack, probe,
// leave) is a Control frame whose body is a typed message of package
// internal/linkctl; it is never matched against filters, and because it
// shares the stream with the events an S2 marker proves their order. This
// package carries a Control body as opaque bytes.
//
// The package knows only its own plain structs (Hello, Publish, Deliver,
// …, Event); the root package converts between them and its types. It
// imports ontology and the standard library only.
//
// Functions are pure and keep no state, so they are safe for concurrent
// use by multiple goroutines.
//
// # Frame grammar
//
// A frame is one version byte, one kind byte, then the fields of that
// kind in the order below, and nothing after them:
//
//	frame       = version kind body .
//	version     = byte .                    (FrameVersion, 7)
//	kind        = byte .                    (Kind: 1 Hello … 19 Advertise)
//
//	Hello       = uvarint(Version ≤ 65535) text(Session) attrs(Profile) bytes(Token)
//	              bytes(Resume) uvarint(Received) uvarint(RetentionMillis) uvarint(RetentionBytes)
//	              uvarint(SpoolSize ≤ 2³²−1) uvarint(SpoolRetentionMillis) .
//	Welcome     = uvarint(Version ≤ 65535) text(Switch) text(Place) bytes(Token) bool(Resumed)
//	              bool(Expired) uvarint(Requests) counts(Lost) uvarint(MaxPayloadBytes)
//	              uvarint(RetentionMillis) uvarint(RetentionBytes) .
//	Publish     = uvarint(Seq) event .
//	Subscribe   = uvarint(Seq) uvarint(Sub) text(Filter) uvarint(Queue ≤ 2³²−1)
//	              byte(Overflow) bool(LookIn) sint32(TTL) .
//	Unsubscribe = uvarint(Seq) uvarint(Sub) .
//	SetProfile  = uvarint(Seq) attrs(Profile) .
//	Pull        = uvarint(Seq) uvarint(Max ≤ 2³²−1) .
//	Deliver     = event matches .
//	PullReply   = uvarint(Seq) uvarint(n) { event matches } .   (n deliveries)
//	Ack         = uvarint(Seq) .
//	Error       = uvarint(Seq) uvarint(Code ≤ 65535) string(Message) .
//	Bye         = .
//	Forward     = event .
//	Challenge   = bytes(Nonce) bytes(Proof) .
//	Response    = bytes(Proof) .
//	Received    = uvarint(Frames) .
//	Lost        = counts(Lost) .
//	Control     = rest(Body) .                (opaque to this package: internal/linkctl)
//	Advertise   = uvarint(Seq) text(Type) attrs(Attrs) .
//
//	event       = 16*byte(ID) text(Type) attrs(Attrs) text(ContentType) bytes(Data)
//	              text(Condition) sint32(TTL) sint32(Hops) sint32(PlaceTTL) sint32(PlaceHops)
//	              text(Origin) text(Place) uvarint(count ≤ MaxPath) {text(place)}
//	              text(TraceParent) text(TraceState) .   (W3C Trace Context; "" for none)
//	attrs       = uvarint(n) { text(Name) value } .
//	value       = 0x01 string | 0x02 sint | 0x03 float | 0x04 bool | 0x05 sint .
//	              (string, int, float, bool, time as ns since the Unix epoch)
//	matches     = uvarint(n) { uvarint(Sub) float(Score) } .
//	counts      = uvarint(n ≤ MaxMatches) { uvarint(Sub) uvarint(N) } .
//
//	uvarint     = unsigned LEB128 (binary.AppendUvarint), 1 to 10 bytes, minimal .
//	sint        = uvarint of the zigzag encoding (binary.AppendVarint); every int64 .
//	sint32      = sint whose value fits in an int32 .
//	float       = 8 bytes, little-endian math.Float64bits; bit for bit .
//	bool        = byte 0 or 1 .
//	string      = uvarint(length) length*byte .   (any bytes)
//	text        = string that is valid UTF-8 .
//	bytes       = string, decoded as a fresh []byte; nil when empty .
//	rest        = every byte up to the frame's end, decoded as a fresh []byte; nil when empty .
//
// The encoding is canonical: a varint must be minimal (no trailing 0x80
// groups), a bool 0 or 1, so each message has exactly one frame and
// Encode(Decode(f)) == f for every frame f that decodes. Floats are not
// canonicalised: −0, NaN payloads, subnormals and ±Inf travel bit for bit
// (the switch refuses NaN and ±Inf in attributes itself). A zero
// ontology.Value has no encoding. The format does not tell a nil slice
// from an empty one: both encode as length 0 and decode as nil.
//
// # Versions
//
// Every frame starts with FrameVersion. A peer refuses a frame of any
// other version with an error wrapping ErrVersion. FrameVersion is bumped
// on any incompatible change; adding a kind is one. Version 7 added the
// event's trace context (two text fields at its end, two bytes when
// empty); version 6 the Advertise kind. Hello.Version and
// Welcome.Version are the session protocol's negotiation and travel in the
// body.
//
// # Limits and errors
//
// Decode checks every length and count against the bytes remaining and
// against its Limits before it allocates, so a short frame cannot make it
// allocate much more than its own size. Errors are *FrameError values that
// name the field and its byte offset, e.g.
//
//	wire: malformed Publish frame: event attribute 3 name: length 900 exceeds remaining 12 bytes at offset 57
//
// and wrap exactly one of ErrMalformed, ErrTooLarge or ErrVersion. Encode
// refuses what Decode would refuse, with the same sentinels, so whatever
// encodes also decodes.
package wire

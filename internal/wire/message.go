package wire

import (
	"strconv"

	"github.com/sion-go/sion/ontology"
)

// Kind identifies a message type; it is the second byte of every frame.
// The zero Kind is no message and never appears in a valid frame. The
// numbers are part of the wire format: never renumber them.
type Kind uint8

// The message kinds, with their wire numbers.
const (
	KindHello       Kind = 1  // client → switch, the first frame of a session
	KindWelcome     Kind = 2  // switch → client, the answer to Hello
	KindPublish     Kind = 3  // client → switch
	KindSubscribe   Kind = 4  // client → switch
	KindUnsubscribe Kind = 5  // client → switch
	KindSetProfile  Kind = 6  // client → switch
	KindPull        Kind = 7  // client → switch, look-in
	KindDeliver     Kind = 8  // switch → client, push delivery
	KindPullReply   Kind = 9  // switch → client, the answer to Pull
	KindAck         Kind = 10 // switch → client, a request succeeded
	KindError       Kind = 11 // switch → client, a request failed
	KindBye         Kind = 12 // either way, the last frame of a session
	KindForward     Kind = 13 // either way on a shared link: an event crossing it
	KindChallenge   Kind = 14 // switch → client, the answer to Hello in a place with a shared key
	KindResponse    Kind = 15 // client → switch, the answer to Challenge
	KindReceived    Kind = 16 // client → switch, how much of the session's stream arrived
	KindLost        Kind = 17 // switch → client, in the stream: deliveries dropped before they could be sent
	KindControl     Kind = 18 // either way on a shared link or gateway: a link-local control message
	KindAdvertise   Kind = 19 // client → switch
)

var kindNames = [...]string{
	KindHello:       "Hello",
	KindWelcome:     "Welcome",
	KindPublish:     "Publish",
	KindSubscribe:   "Subscribe",
	KindUnsubscribe: "Unsubscribe",
	KindSetProfile:  "SetProfile",
	KindPull:        "Pull",
	KindDeliver:     "Deliver",
	KindPullReply:   "PullReply",
	KindAck:         "Ack",
	KindError:       "Error",
	KindBye:         "Bye",
	KindForward:     "Forward",
	KindChallenge:   "Challenge",
	KindResponse:    "Response",
	KindReceived:    "Received",
	KindLost:        "Lost",
	KindControl:     "Control",
	KindAdvertise:   "Advertise",
}

// String returns the message type's name ("Publish"), or "Kind(n)" for a
// number that names no message.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Message is one frame's content. It is implemented only by the pointer
// types of this package (*Hello, *Publish, …, *Control, *Advertise); Decode returns
// one of them and Encode accepts any of them.
type Message interface {
	// Kind returns the message type; it does not read the receiver, so a
	// nil pointer answers too.
	Kind() Kind
	encode(e *encoder)
	decode(d *decoder)
}

// Hello opens a session: the first frame a client sends to a switch.
type Hello struct {
	// Version is the newest session protocol version the client speaks
	// (the root package's protocol, 2 since sessions resume). It travels
	// in the body and is distinct from the frame version byte
	// (FrameVersion), which must match exactly.
	Version uint16
	// Session names the session (UTF-8); "" asks the switch to name it.
	Session string
	// Profile is the session's profile: the attributes patronage
	// conditions are matched against (S1). Names are UTF-8; the codec does
	// not check duplicates or NaN, the switch does.
	Profile []ontology.Attr
	// Token is the admission credential (any bytes, at most
	// Limits.MaxStringBytes); nil for none.
	Token []byte
	// Resume is the token of the session to resume (Welcome.Token of an
	// earlier Welcome, at most Limits.MaxStringBytes); nil opens a new
	// session.
	Resume []byte
	// Received is, with Resume, the number of frames of the session's
	// stream the client received (every frame the switch sent after
	// Welcome counts, in order, from 1).
	Received uint64
	// RetentionMillis is how long, in milliseconds, the switch should keep
	// the session while it is disconnected; 0 ends it with its connection.
	RetentionMillis uint64
	// RetentionBytes bounds the bytes of deliveries the switch holds for
	// the session, sent but not confirmed or not yet sent; 0 means the
	// switch's default.
	RetentionBytes uint64
	// SpoolSize is the look-in spool's size in events, 0 for the default;
	// SpoolRetentionMillis drops spooled events older than this many
	// milliseconds, 0 for never.
	SpoolSize            uint32
	SpoolRetentionMillis uint64
}

// Welcome accepts a session: the switch's answer to Hello.
type Welcome struct {
	// Version is the session protocol version the switch will speak.
	Version uint16
	// Switch names the switch and Place its event place (UTF-8).
	Switch, Place string
	// Token names the session for a later Hello.Resume (at most
	// Limits.MaxStringBytes).
	Token []byte
	// Resumed reports that the session Hello.Resume named continues: the
	// switch sends its stream again from frame Hello.Received+1.
	Resumed bool
	// Expired reports that the session Hello.Resume named ended while it
	// was disconnected; Lost and Requests are that session's.
	Expired bool
	// Requests is, for a resumed or expired session, the highest request
	// Seq the switch received from it: the client sends again the
	// requests it has no answer to with a higher Seq.
	Requests uint64
	// Lost counts, per subscription, deliveries the switch dropped: for
	// an expired session, those it held when the session ended; for a
	// resumed one, those dropped while it was disconnected (also
	// reported in order by Lost frames in the stream). At most
	// Limits.MaxMatches.
	Lost []Count
	// MaxPayloadBytes is the place's limit on an event's payload, which
	// the client checks before it publishes.
	MaxPayloadBytes uint64
	// RetentionMillis and RetentionBytes are the retention the switch
	// grants (Hello's, capped by the switch).
	RetentionMillis, RetentionBytes uint64
}

// Count is a number of deliveries for one subscription.
type Count struct {
	// Sub is the subscription's client-chosen ID (Subscribe.Sub).
	Sub uint64
	// N is the number of deliveries.
	N uint64
}

// Received tells the switch how many frames of the session's stream the
// client has received (every frame after Welcome counts, from 1); the
// switch may forget them. It is not answered.
type Received struct {
	// Frames is the number of frames received so far.
	Frames uint64
}

// Lost reports, in the session's stream, deliveries the switch dropped
// for the session's subscriptions at this point of the stream (its
// retention was full). At most Limits.MaxMatches counts.
type Lost struct {
	Lost []Count
}

// Publish asks the switch to publish Event. The switch answers Ack or
// Error with the same Seq.
type Publish struct {
	// Seq is the client's request number, echoed in the answer.
	Seq uint64
	// Event is the event to publish; the switch sets its ID and control
	// information.
	Event Event
}

// Subscribe asks the switch to add a subscription. The switch answers Ack
// or Error with the same Seq.
type Subscribe struct {
	// Seq is the client's request number, echoed in the answer.
	Seq uint64
	// Sub is the subscription's ID, chosen by the client and unique in
	// its session; Deliver and PullReply name it in Match.Sub.
	Sub uint64
	// Filter is the filter's source text (UTF-8, filter package syntax).
	Filter string
	// Queue is the subscription's queue length in events; 0 means the
	// switch's default.
	Queue uint32
	// Overflow is the full-queue policy, the number of the root package's
	// Overflow constant; the codec does not interpret it.
	Overflow uint8
	// LookIn asks for look-in delivery (events spool until Pull) instead
	// of push delivery (Deliver frames).
	LookIn bool
	// TTL is how many shared links the filter may spread over; negative
	// means the place's default.
	TTL int32
}

// Unsubscribe asks the switch to cancel the subscription Sub. The switch
// answers Ack or Error with the same Seq.
type Unsubscribe struct {
	// Seq is the client's request number, echoed in the answer.
	Seq uint64
	// Sub is the ID the client gave the subscription in Subscribe.
	Sub uint64
}

// SetProfile replaces the session's profile. The switch answers Ack or
// Error with the same Seq.
type SetProfile struct {
	// Seq is the client's request number, echoed in the answer.
	Seq uint64
	// Profile is the new profile, as in Hello.Profile.
	Profile []ontology.Attr
}

// Advertise declares events the session will publish (S3
// advertisement): events of Type or of a subtype, carrying the attribute
// values Attrs. It carries one advertisement; Session.Advertise sends one
// frame per advertisement. The switch answers Ack or Error with the same
// Seq.
type Advertise struct {
	// Seq is the client's request number, echoed in the answer.
	Seq uint64
	// Type names the event type (UTF-8), canonical or a synonym.
	Type string
	// Attrs are the attribute values every advertised event carries,
	// as in Event.Attrs; nil for none. At most Limits.MaxAttrs; the codec
	// does not check duplicate names or NaN, the switch does.
	Attrs []ontology.Attr
}

// Pull asks the switch for spooled look-in deliveries; it answers
// PullReply (or Error) with the same Seq.
type Pull struct {
	// Seq is the client's request number, echoed in the answer.
	Seq uint64
	// Max is the most deliveries the reply may hold; the switch also keeps
	// the reply within the client's Limits.MaxDeliveries and frame size.
	Max uint32
}

// Match names one subscription that matched a delivered event.
type Match struct {
	// Sub is the subscription's client-chosen ID (Subscribe.Sub).
	Sub uint64
	// Score is the match score (see filter match modes); it travels bit
	// for bit.
	Score float64
}

// Deliver pushes one event to the session: the session fired once for it
// (S1), and Matched lists its subscriptions that matched.
type Deliver struct {
	// Event is the delivered event, control information included.
	Event Event
	// Matched lists the matching subscriptions, at most
	// Limits.MaxMatches.
	Matched []Match
}

// Delivery is one event in a PullReply, shaped like Deliver.
type Delivery struct {
	// Event is the delivered event, control information included.
	Event Event
	// Matched lists the matching subscriptions, at most
	// Limits.MaxMatches.
	Matched []Match
}

// PullReply answers Pull with the deliveries taken from the spool, oldest
// first; none when the spool is empty.
type PullReply struct {
	// Seq is the Seq of the Pull it answers.
	Seq uint64
	// Deliveries are at most Limits.MaxDeliveries and Pull.Max.
	Deliveries []Delivery
}

// Ack reports that the request Seq succeeded.
type Ack struct {
	// Seq is the Seq of the request it answers.
	Seq uint64
}

// Error reports that the request Seq failed, or, with Seq 0, that the
// session failed (the switch then closes it).
type Error struct {
	// Seq is the Seq of the request it answers, or 0.
	Seq uint64
	// Code classifies the failure; the numbers are the session protocol's,
	// the codec does not interpret them.
	Code uint16
	// Message is the error text for people; any bytes (it may quote
	// refused input), at most Limits.MaxStringBytes.
	Message string
}

// Bye ends a session in good order; it has no fields.
type Bye struct{}

// Forward carries one event across a shared link between two switches
// (S1 shared link) or a gateway: a data event, or a routed control event
// of a reserved "sion." type (discovery, advertisements) that is matched
// like any other. Link-local control travels in Control frames, never in
// Forward. Its control information is the event's as it arrives: TTL
// already lowered and Hops raised for the hop. It is not answered.
type Forward struct {
	// Event is the event, ID and control information included.
	Event Event
}

// Challenge asks a client that said Hello to prove it knows the place's
// shared key (S1 security assurance unit), and proves the switch knows it
// too. The key never travels: proofs are MACs over fresh nonces.
type Challenge struct {
	// Nonce is the switch's fresh random nonce, at most
	// Limits.MaxStringBytes.
	Nonce []byte
	// Proof is the switch's MAC over the client's nonce (Hello.Token) and
	// Nonce; the client checks it.
	Proof []byte
}

// Response answers Challenge with the client's proof; the switch answers
// Welcome or Error.
type Response struct {
	// Proof is the client's MAC over Challenge.Nonce, its own nonce and
	// its session name, at most Limits.MaxStringBytes.
	Proof []byte
}

// Control carries one link-local control message between the two ends of
// a shared link or gateway (link request and accept, federation request,
// proxy filter register and release, marker and ack, synced, probe and
// reply, leave): the typed messages of package internal/linkctl, which
// encodes and decodes Body. It travels in the same ordered stream as the
// Forward frames, which is what lets an S2 marker prove that everything
// sent before it has arrived, and is never matched against filters. This
// package does not interpret Body. It is answered as its message says.
type Control struct {
	// Body is the control message's encoding: the rest of the frame after
	// the kind byte, without a length prefix. It may be empty as far as
	// this package is concerned (internal/linkctl refuses an empty one).
	// Decode returns a fresh copy, nil when empty, that the caller may
	// keep; Encode does not keep it. Only Limits.MaxFrameBytes bounds it.
	Body []byte
}

// Event is an event as it travels (S1: control information, semantic
// information, data). The root package converts between it and its own
// Event.
type Event struct {
	// ID is the event's ID; zero in a Publish (the switch assigns it).
	ID [16]byte
	// Type is the event type's name (UTF-8).
	Type string
	// Attrs are the attribute values; names are UTF-8, values valid
	// (ontology.Value with a kind), string values any bytes. At most
	// Limits.MaxAttrs; the codec does not check duplicate names or NaN.
	Attrs []ontology.Attr
	// ContentType is Data's media type (UTF-8), "" to sniff.
	ContentType string
	// Data is the payload, any bytes, at most Limits.MaxDataBytes.
	Data []byte
	// Condition is the patronage condition's source text (UTF-8), "" for
	// none.
	Condition string
	// TTL and Hops are the hops left and taken inside the place; PlaceTTL
	// and PlaceHops the gateways left and crossed.
	TTL, Hops, PlaceTTL, PlaceHops int32
	// Origin names the switch that accepted the event and Place its event
	// place (UTF-8).
	Origin, Place string
	// Path lists the event places the event has been in, in order, the
	// one it is in now last (UTF-8 names); at most MaxPath. Gateways
	// never carry an event into a place on its path.
	Path []string
	// TraceParent and TraceState are the event's W3C Trace Context
	// (UTF-8), "" for none. The codec carries them as they are and does
	// not check their grammar; the switch does.
	TraceParent, TraceState string
}

// MaxPath bounds Event.Path: no event crosses more gateways.
const MaxPath = 64

// Kind returns KindHello.
func (*Hello) Kind() Kind { return KindHello }

// Kind returns KindWelcome.
func (*Welcome) Kind() Kind { return KindWelcome }

// Kind returns KindPublish.
func (*Publish) Kind() Kind { return KindPublish }

// Kind returns KindSubscribe.
func (*Subscribe) Kind() Kind { return KindSubscribe }

// Kind returns KindUnsubscribe.
func (*Unsubscribe) Kind() Kind { return KindUnsubscribe }

// Kind returns KindSetProfile.
func (*SetProfile) Kind() Kind { return KindSetProfile }

// Kind returns KindPull.
func (*Pull) Kind() Kind { return KindPull }

// Kind returns KindDeliver.
func (*Deliver) Kind() Kind { return KindDeliver }

// Kind returns KindPullReply.
func (*PullReply) Kind() Kind { return KindPullReply }

// Kind returns KindAck.
func (*Ack) Kind() Kind { return KindAck }

// Kind returns KindError.
func (*Error) Kind() Kind { return KindError }

// Kind returns KindBye.
func (*Bye) Kind() Kind { return KindBye }

// Kind returns KindForward.
func (*Forward) Kind() Kind { return KindForward }

// Kind returns KindChallenge.
func (*Challenge) Kind() Kind { return KindChallenge }

// Kind returns KindResponse.
func (*Response) Kind() Kind { return KindResponse }

// Kind returns KindReceived.
func (*Received) Kind() Kind { return KindReceived }

// Kind returns KindLost.
func (*Lost) Kind() Kind { return KindLost }

// Kind returns KindControl.
func (*Control) Kind() Kind { return KindControl }

// Kind returns KindAdvertise.
func (*Advertise) Kind() Kind { return KindAdvertise }

// newMessage returns a zero message of kind k, or nil for an unknown k.
func newMessage(k Kind) Message {
	switch k {
	case KindHello:
		return new(Hello)
	case KindWelcome:
		return new(Welcome)
	case KindPublish:
		return new(Publish)
	case KindSubscribe:
		return new(Subscribe)
	case KindUnsubscribe:
		return new(Unsubscribe)
	case KindSetProfile:
		return new(SetProfile)
	case KindPull:
		return new(Pull)
	case KindDeliver:
		return new(Deliver)
	case KindPullReply:
		return new(PullReply)
	case KindAck:
		return new(Ack)
	case KindError:
		return new(Error)
	case KindBye:
		return new(Bye)
	case KindForward:
		return new(Forward)
	case KindChallenge:
		return new(Challenge)
	case KindResponse:
		return new(Response)
	case KindReceived:
		return new(Received)
	case KindLost:
		return new(Lost)
	case KindControl:
		return new(Control)
	case KindAdvertise:
		return new(Advertise)
	}
	return nil
}

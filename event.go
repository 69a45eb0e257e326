package sion

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// EventID identifies an event for its whole life, across switches and
// places: routers drop an event whose ID they have seen (S1 control
// information). The switch that first accepts an event gives it its ID: 8
// random bytes fixed per switch, then the switch's count of IDs given.
type EventID [16]byte

// String returns the ID in hexadecimal.
func (id EventID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero ID, which no published event has.
func (id EventID) IsZero() bool { return id == EventID{} }

// idSource gives event IDs: a counter after a random prefix, enciphered
// with a random AES-128 key of the switch, so that the IDs it gives are
// unpredictable — whoever saw some of them cannot name the next and
// publish first under it (through a CloudEvents endpoint or a NATS
// subject, say) to have the switch's own event dropped as a duplicate —
// while the switch still recognises every ID it gave (gave). Safe for
// concurrent use once made.
type idSource struct {
	prefix [8]byte
	n      atomic.Uint64
	block  cipher.Block // AES-128: a permutation of the 16-byte IDs
}

func newIDSource() *idSource {
	s := &idSource{}
	var key [16]byte
	if _, err := rand.Read(s.prefix[:]); err != nil {
		panic("sion: no random source for event IDs: " + err.Error())
	}
	if _, err := rand.Read(key[:]); err != nil {
		panic("sion: no random source for event IDs: " + err.Error())
	}
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic("sion: event IDs: " + err.Error()) // a 16-byte key is always valid
	}
	s.block = block
	return s
}

// idBufs holds the blocks next and gave encipher in: a slice passed to
// cipher.Block's methods escapes, and a pooled one saves an allocation
// per event.
var idBufs = sync.Pool{New: func() any { return new([32]byte) }}

// next returns a new ID.
func (s *idSource) next() EventID {
	b := idBufs.Get().(*[32]byte)
	copy(b[:8], s.prefix[:])
	binary.BigEndian.PutUint64(b[8:16], s.n.Add(1))
	s.block.Encrypt(b[16:], b[:16])
	id := EventID(b[16:])
	idBufs.Put(b)
	return id
}

// gave reports whether s has given id: an event published again with an
// ID its switch gave it has been here already (it went out, through a
// bridge or a CloudEvents endpoint, and came back). It costs one AES
// block and an atomic load; the switch's seen set would cost a
// hash-table insert per event published.
func (s *idSource) gave(id EventID) bool {
	b := idBufs.Get().(*[32]byte)
	copy(b[16:], id[:])
	s.block.Decrypt(b[:16], b[16:])
	ours := [8]byte(b[:8]) == s.prefix
	c := binary.BigEndian.Uint64(b[8:16])
	idBufs.Put(b)
	return ours && c != 0 && c <= s.n.Load()
}

// Control is an event's control information (S1): what routing depends
// on. The switch sets it at Publish from the place's defaults and keeps it
// up to date as the event travels; what a publisher writes here is
// ignored, except TTL and PlaceTTL, which may lower the place's default.
type Control struct {
	// TTL is how many more hops the event may take inside its place;
	// Hops how many it has taken. At Publish, a TTL of 0 or less, or
	// above the place's, means the place's.
	TTL, Hops int
	// PlaceTTL is how many more gateways the event may cross (at Publish
	// DefaultTTL, 16, or less if the publisher asks); PlaceHops how many
	// it has crossed.
	PlaceTTL, PlaceHops int
	// Origin names the switch that accepted the event, and Place its
	// place.
	Origin, Place string
	// Path lists the event places the event has been in, in order: its
	// origin place first, the place it is in now last. A gateway never
	// carries an event into a place on its path (S1 SI-GW), and no event
	// crosses more than PlaceTTL gateways. Read it, never modify it.
	Path []string
}

// Event is one event (S1: control information, semantic information,
// data): an event type from the place's ontology, typed attributes, and a
// payload with its media type, plus control information and an optional
// patronage condition.
//
// Publish copies the event, so the caller may reuse it afterwards. A
// delivered *Event is shared by every subscription that receives it: read
// it, never modify it. It implements filter.Event.
type Event struct {
	// ID identifies the event everywhere it goes. Publish gives an
	// event with a zero ID a new one; a non-zero ID set by the publisher
	// is kept — an event carried from elsewhere (a relay, a bridge) keeps
	// its identity — and a switch that has seen it (among the last
	// 65,536–131,072 IDs it recorded), or that gave the ID itself (at
	// any time: an event of its own that went out, through a bridge or
	// a CloudEvents endpoint, and came back), drops the event as a
	// duplicate (Stats.Duplicates): Publish returns nil, as for the
	// first copy.
	// Choose such IDs at random (128 bits), never from a counter shared
	// with other publishers; and do not take IDs from sources you do not
	// trust: an event published first with another's ID suppresses that
	// one, wherever the first has been seen. The IDs a switch gives are
	// unpredictable (enciphered with a key of the switch), so no one can
	// claim one before the switch gives it; one already seen outside can
	// still be replayed, and wins only at switches the event has not
	// reached yet.
	ID EventID
	// Type is the event type's name, canonical or a synonym; Publish
	// stores the canonical name.
	Type string
	// Attrs are the attribute values, names canonical or synonyms
	// (Publish stores canonical names), each name at most once.
	Attrs []ontology.Attr
	// ContentType is Data's media type ("application/json",
	// "application/xml", …; "" sniffs the first byte).
	ContentType string
	// Data is the payload; Publish refuses JSON or XML that does not parse.
	Data []byte
	// Condition, when set, is a patronage condition (S1, see
	// filter.CompileCondition): only sessions whose profile it matches
	// receive the event.
	Condition *filter.Filter
	// TraceParent and TraceState are the event's W3C Trace Context
	// (https://www.w3.org/TR/trace-context/, Level 1): the traceparent
	// and tracestate of the operation that published it, e.g.
	// "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" and
	// "congo=t61rcWkgMzE". Both "" (the default) mean none. sion carries
	// them untouched wherever the event goes — shared links, gateways
	// (whatever their Mapping converts), remote sessions, look-in, the
	// adapters — and never interprets them beyond checking them (at
	// Publish, and where an event enters from the wire): a traceparent must be version-traceid-parentid-flags in
	// lower-case hex (2-32-16-2 digits; version ff and an all-zero
	// trace-id or parent-id are invalid; a version after 00 may carry
	// more fields after a dash, at most MaxTraceParentBytes in all); a
	// tracestate follows the spec's list grammar with unique keys, at
	// most MaxTraceStateMembers members and MaxTraceStateBytes bytes, and
	// needs a traceparent. Publish refuses anything else with an error
	// wrapping ErrInvalidEvent that names the field and the problem.
	// Events that enter from the wire are checked the same way, whoever
	// sent them: one with a bad trace context is an invalid event and is
	// dropped as such, never stripped or repaired — over a shared link or
	// a gateway it is logged and counted (LinkInfo.Refused,
	// GatewayCounters.Refused) and the link stays up, as for an unknown
	// type (only a frame that does not decode ends a link); a remote
	// session's Publish gets ErrInvalidEvent back; the entity's side of a
	// remote session drops, and logs, one its switch delivers or a Pull
	// returns.
	// Package github.com/sion-go/sion/metrics maps them to and from
	// OpenTelemetry. Not S1–S4: this is "Around the library".
	TraceParent, TraceState string
	// Control is the control information; see Control.
	Control Control
}

// EventType returns the event's type name (filter.Event).
func (e *Event) EventType() string { return e.Type }

// NumAttrs returns the number of attributes (filter.Event).
func (e *Event) NumAttrs() int { return len(e.Attrs) }

// Attr returns the i-th attribute (filter.Event).
func (e *Event) Attr(i int) (string, ontology.Value) { return e.Attrs[i].Name, e.Attrs[i].Value }

// Payload returns ContentType and Data (filter.Event).
func (e *Event) Payload() (string, []byte) { return e.ContentType, e.Data }

// Value returns the value of the attribute name (canonical) and whether the
// event has it.
func (e *Event) Value(name string) (ontology.Value, bool) {
	for _, a := range e.Attrs {
		if a.Name == name {
			return a.Value, true
		}
	}
	return ontology.Value{}, false
}

// String formats the event for logs: type, ID and attributes.
func (e *Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s{", e.Type)
	for i, a := range e.Attrs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", a.Name, a.Value)
	}
	fmt.Fprintf(&b, "} id=%s", e.ID)
	return b.String()
}

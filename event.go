package sion

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"sync/atomic"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// EventID identifies an event for its whole life, across switches and
// places: routers drop an event whose ID they have seen (S1 control
// information). The switch that first accepts an event gives it its ID: 8
// random bytes fixed per process, then a counter.
type EventID [16]byte

// String returns the ID in hexadecimal.
func (id EventID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero ID, which no published event has.
func (id EventID) IsZero() bool { return id == EventID{} }

var (
	idPrefix  [8]byte
	idCounter atomic.Uint64
)

func init() {
	if _, err := rand.Read(idPrefix[:]); err != nil {
		panic("sion: no random source for event IDs: " + err.Error())
	}
}

func newEventID() EventID {
	var id EventID
	copy(id[:8], idPrefix[:])
	binary.BigEndian.PutUint64(id[8:], idCounter.Add(1))
	return id
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
	// 65,536–131,072 IDs it recorded) drops the event as a duplicate
	// (Stats.Duplicates): Publish returns nil, as for the first copy.
	// Choose such IDs at random (128 bits), never from a counter shared
	// with other publishers; and do not take IDs from sources you do not
	// trust: an event published first with another's ID suppresses that
	// one, wherever the first has been seen.
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

// convertKind returns v as a value of kind k when it is one, or an int
// that a float64 holds exactly (for a float attribute), or an integral
// float within int64 range (for an int attribute).
func convertKind(v ontology.Value, k ontology.Kind) (ontology.Value, bool) {
	switch {
	case v.Kind() == k:
		return v, true
	case k == ontology.KindFloat && v.Kind() == ontology.KindInt:
		f := float64(v.Int())
		if f >= -0x1p63 && f < 0x1p63 && int64(f) == v.Int() {
			return ontology.Float(f), true
		}
	case k == ontology.KindInt && v.Kind() == ontology.KindFloat:
		f := v.Float()
		if f >= -0x1p63 && f < 0x1p63 && f == math.Trunc(f) {
			return ontology.Int(int64(f)), true
		}
	}
	return ontology.Value{}, false
}

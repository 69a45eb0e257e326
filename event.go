package sion

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/wire"
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
	// ID is set by Publish.
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

// admit validates ev against the place and returns the copy the switch
// keeps: the type and attribute names canonical, attribute values of the
// vocabulary's kinds (an int attribute given as an integral float, or a
// float attribute given as an int that float64 holds exactly, is
// converted), attributes sorted by name. Errors wrap ErrUnknownEventType
// or ErrInvalidEvent and name the attribute. checkPayload is false for
// an event that arrived over a shared link: the switch it was published
// at parsed its payload already. routed admits the reserved types that are
// routed like user events (ontology.IsRouted: discovery), which sion
// itself publishes; Publish refuses every reserved type.
func (p *EventPlace) admit(ev *Event, checkPayload, routed bool) (*Event, error) {
	if ev == nil {
		return nil, fmt.Errorf("%w: nil event", ErrInvalidEvent)
	}
	o := p.cfg.Ontology
	out := &Event{
		Type:        ev.Type,
		ContentType: ev.ContentType,
		Condition:   ev.Condition,
		Control:     Control{TTL: p.cfg.TTL, Place: p.cfg.Name, Path: []string{p.cfg.Name}},
	}
	if ev.Control.TTL > 0 && ev.Control.TTL < out.Control.TTL {
		out.Control.TTL = ev.Control.TTL
	}
	out.Control.PlaceTTL = DefaultTTL
	if ev.Control.PlaceTTL > 0 && ev.Control.PlaceTTL < out.Control.PlaceTTL {
		out.Control.PlaceTTL = ev.Control.PlaceTTL
	}
	t, known := o.Lookup(ev.Type)
	switch {
	case known && ontology.IsReserved(t.Name) && !(routed && ontology.IsRouted(t.Name)):
		return nil, fmt.Errorf("%w: event type %q is reserved for sion's control traffic", ErrInvalidEvent, t.Name)
	case known:
		out.Type = t.Name
	case ev.Type == "" || ev.Type == filter.AnyType:
		return nil, fmt.Errorf("%w %q: an event needs a concrete type", ErrUnknownEventType, ev.Type)
	case !p.cfg.AcceptUnknownTypes:
		return nil, fmt.Errorf("%w %q in place %q", ErrUnknownEventType, ev.Type, p.cfg.Name)
	}
	if err := checkPayloadSize(len(ev.Data), p.cfg.MaxPayloadBytes); err != nil {
		return nil, err
	}
	if checkPayload {
		if err := filter.CheckPayload(ev.ContentType, ev.Data); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
		}
	}
	if len(ev.Data) > 0 {
		out.Data = slices.Clone(ev.Data)
	}
	if ev.Condition != nil {
		c, err := canonicalCondition(o, ev.Condition)
		if err != nil {
			return nil, fmt.Errorf("%w: patronage condition %s: %w", ErrInvalidEvent, ev.Condition, err)
		}
		out.Condition = c
	}
	size := 0
	for _, a := range ev.Attrs {
		size += len(a.Name) + len(a.Value.Str())
	}
	if size > p.cfg.MaxPayloadBytes {
		return nil, fmt.Errorf("%w: attribute names and strings of %d bytes exceed the place's limit of %d", ErrInvalidEvent, size, p.cfg.MaxPayloadBytes)
	}
	if err := fitsLink(ev, size); err != nil {
		return nil, err
	}
	out.Attrs = make([]ontology.Attr, 0, len(ev.Attrs))
	for _, a := range ev.Attrs {
		name := o.CanonicalAttribute(a.Name)
		v := a.Value
		if !v.IsValid() {
			return nil, fmt.Errorf("%w: attribute %q has no value", ErrInvalidEvent, a.Name)
		}
		if v.Kind() == ontology.KindFloat && (math.IsNaN(v.Float()) || math.IsInf(v.Float(), 0)) {
			return nil, fmt.Errorf("%w: attribute %q is %v; NaN and ±Inf are refused", ErrInvalidEvent, a.Name, v.Float())
		}
		if known {
			decl, ok := o.Attribute(t.ID, name)
			if !ok {
				return nil, fmt.Errorf("%w: attribute %q is not in the vocabulary of event type %q", ErrInvalidEvent, a.Name, t.Name)
			}
			cv, ok := convertKind(v, decl.Kind)
			if !ok {
				return nil, fmt.Errorf("%w: attribute %q of event type %q is %s, got %s %s", ErrInvalidEvent, a.Name, t.Name, decl.Kind, v.Kind(), v)
			}
			v = cv
		}
		out.Attrs = append(out.Attrs, ontology.Attr{Name: name, Value: v})
	}
	slices.SortFunc(out.Attrs, func(a, b ontology.Attr) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(out.Attrs); i++ {
		if out.Attrs[i].Name == out.Attrs[i-1].Name {
			return nil, fmt.Errorf("%w: attribute %q appears twice (names and synonyms count as one)", ErrInvalidEvent, out.Attrs[i].Name)
		}
	}
	return out, nil
}

// The most one event may hold so that it crosses a shared link (the wire
// codec's default limits and transport.DefaultMaxFrameBytes): an event a
// switch accepts must not be lost on the way to another switch.
const (
	linkMaxAttrs  = 256
	linkMaxString = 64 << 10
	linkMaxFrame  = 1 << 20
)

// checkPayloadSize refuses a payload of n bytes over a place's limit: the
// one check of PlaceConfig.MaxPayloadBytes, for local publishes (on the
// switch) and remote ones (on the entity's side, with the limit the
// switch's Welcome gave, before the event travels).
func checkPayloadSize(n, limit int) error {
	if n > limit {
		return fmt.Errorf("%w: payload of %d bytes exceeds the place's limit of %d", ErrInvalidEvent, n, limit)
	}
	return nil
}

// fitsLink refuses an event that no shared link with the default frame
// limit could carry; attrBytes is the sum of its attribute names and
// string values.
func fitsLink(ev *Event, attrBytes int) error {
	if len(ev.Attrs) > linkMaxAttrs {
		return fmt.Errorf("%w: %d attributes, more than the %d an event may carry over a shared link", ErrInvalidEvent, len(ev.Attrs), linkMaxAttrs)
	}
	for _, a := range ev.Attrs {
		if len(a.Name) > linkMaxString || len(a.Value.Str()) > linkMaxString {
			return fmt.Errorf("%w: attribute %.40q: a name or string value longer than %d bytes cannot cross a shared link", ErrInvalidEvent, a.Name, linkMaxString)
		}
	}
	for what, s := range map[string]string{"type": ev.Type, "content type": ev.ContentType} {
		if len(s) > linkMaxString {
			return fmt.Errorf("%w: a %s longer than %d bytes cannot cross a shared link", ErrInvalidEvent, what, linkMaxString)
		}
	}
	// Frame: the fields' bytes plus at most 12 bytes of lengths and kinds
	// per attribute, 256 for the fixed fields, the origin's switch and
	// place names (MaxNameBytes each), and the longest path of places it
	// may gather crossing gateways.
	size := len(ev.Data) + attrBytes + 12*len(ev.Attrs) + len(ev.Type) + len(ev.ContentType) + 256 + 2*MaxNameBytes + wire.MaxPath*(MaxNameBytes+3)
	if ev.Condition != nil {
		size += len(ev.Condition.String())
	}
	if size > linkMaxFrame {
		return fmt.Errorf("%w: the event takes about %d bytes, more than the %d bytes of a shared link's frame (payload %d bytes)", ErrInvalidEvent, size, linkMaxFrame, len(ev.Data))
	}
	return nil
}

// canonicalCondition checks a patronage condition and returns it with its
// attribute names canonical, as profiles store them (synonyms resolve at
// the edge). Profile attributes are the entity's own and need not be in
// any event type's vocabulary.
func canonicalCondition(o *ontology.Ontology, c *filter.Filter) (*filter.Filter, error) {
	if _, err := c.MatchProfile(nil); err != nil {
		return nil, err
	}
	spec := c.Spec()
	changed := false
	for i := range spec.Predicates {
		op := &spec.Predicates[i].Operand
		if op.Source == filter.SourceAttr {
			if n := o.CanonicalAttribute(op.Name); n != op.Name {
				op.Name, changed = n, true
			}
		}
	}
	if !changed {
		return c, nil
	}
	return filter.Build(spec)
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

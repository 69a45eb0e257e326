package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/sion-go/sion/ontology"
)

// FrameVersion is the version byte that starts every frame this package
// writes, and the only one Decode accepts. It changes on any incompatible
// change of the format.
const FrameVersion = 7

// Wire numbers of value kinds; part of the format, independent of the
// numbering of ontology.Kind.
const (
	valString byte = 1
	valInt    byte = 2
	valFloat  byte = 3
	valBool   byte = 4
	valTime   byte = 5
)

// Encode appends the frame of m to dst and returns the extended slice. It
// checks m against DefaultLimits: see EncodeLimits.
func Encode(dst []byte, m Message) ([]byte, error) {
	return EncodeLimits(dst, m, Limits{})
}

// EncodeLimits appends the frame of m to dst and returns the extended
// slice. It refuses exactly what Decode with the same limits would refuse,
// so that every frame it produces decodes to a message equal to m (empty
// slices decode as nil): a nil message or a zero ontology.Value, invalid
// UTF-8 in a text field, or a nil m give an error wrapping ErrMalformed; a
// string, data, count or frame beyond lim one wrapping ErrTooLarge. The
// error is a *FrameError naming the field. On error it returns dst
// unchanged (its spare capacity may have been written).
//
// EncodeLimits does not keep m or modify it. It allocates only to grow
// dst.
func EncodeLimits(dst []byte, m Message, lim Limits) ([]byte, error) {
	e := encoders.Get().(*encoder) // the methods of Message would move a local one to the heap
	out, err := e.frame(dst, m, lim)
	*e = encoder{}
	encoders.Put(e)
	if err != nil { // a nil *FrameError is not a nil error
		return dst, err
	}
	return out, nil
}

// encoders holds the *encoder values EncodeLimits uses, each frame in
// turn.
var encoders = sync.Pool{New: func() any { return new(encoder) }}

// EncodeForward appends the frame of &Forward{Event: *ev} to dst, as
// EncodeLimits would, without making the Forward: for the path every
// event takes over a shared link.
func EncodeForward(dst []byte, ev *Event, lim Limits) ([]byte, error) {
	e := encoders.Get().(*encoder)
	e.begin(dst, KindForward, 2+eventSize(ev), lim)
	e.event(ev)
	out, err := e.end(dst)
	*e = encoder{}
	encoders.Put(e)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// frame is EncodeLimits with e, which must be the zero encoder.
func (e *encoder) frame(dst []byte, m Message, lim Limits) ([]byte, *FrameError) {
	if m == nil {
		e.buf, e.start, e.lim = dst, len(dst), lim.norm()
		e.fail("message", ErrMalformed, "nil Message")
		return dst, e.err
	}
	e.begin(dst, m.Kind(), sizeHint(m), lim)
	m.encode(e)
	return e.end(dst)
}

// begin starts a frame of kind k after dst, with room for hint bytes.
func (e *encoder) begin(dst []byte, k Kind, hint int, lim Limits) {
	e.buf, e.start, e.lim, e.kind = dst, len(dst), lim.norm(), k
	if n := min(hint, e.lim.MaxFrameBytes); cap(e.buf)-len(e.buf) < n {
		e.buf = slices.Grow(e.buf, n) // one allocation, not one per doubling
	}
	e.buf = append(e.buf, FrameVersion, byte(k))
}

// end checks the frame's length and returns it after dst, or dst and the
// first failure.
func (e *encoder) end(dst []byte) ([]byte, *FrameError) {
	if e.err == nil && len(e.buf)-e.start > e.lim.MaxFrameBytes {
		e.fail("frame", ErrTooLarge, fmt.Sprintf("length %d exceeds limit %d", len(e.buf)-e.start, e.lim.MaxFrameBytes))
		e.err.Offset = 0
	}
	if e.err != nil {
		return dst, e.err
	}
	return e.buf, nil
}

// sizeHint returns how many bytes m's frame takes, for the messages that
// carry events (a few more when a number takes fewer bytes than the
// longest varint of its field), or 0 to let the frame grow as it is
// written.
func sizeHint(m Message) int {
	const head = 2 // version, kind
	switch m := m.(type) {
	case *Forward:
		if m != nil {
			return head + eventSize(&m.Event)
		}
	case *Publish:
		if m != nil {
			return head + uvarintLen(m.Seq) + eventSize(&m.Event)
		}
	case *Deliver:
		if m != nil {
			return head + eventSize(&m.Event) + uvarintLen(uint64(len(m.Matched))) + len(m.Matched)*(binary.MaxVarintLen64+8)
		}
	}
	return 0
}

// eventSize returns the bytes ev takes in a frame.
func eventSize(ev *Event) int {
	n := len(ev.ID) + textLen(ev.Type) + uvarintLen(uint64(len(ev.Attrs))) + textLen(ev.ContentType) +
		uvarintLen(uint64(len(ev.Data))) + len(ev.Data) + textLen(ev.Condition) + 4*binary.MaxVarintLen32 +
		textLen(ev.Origin) + textLen(ev.Place) + uvarintLen(uint64(len(ev.Path))) +
		textLen(ev.TraceParent) + textLen(ev.TraceState)
	for _, a := range ev.Attrs {
		n += textLen(a.Name) + 1
		switch a.Value.Kind() {
		case ontology.KindString:
			n += textLen(a.Value.Str())
		case ontology.KindFloat:
			n += 8
		case ontology.KindBool:
			n++
		default:
			n += binary.MaxVarintLen64
		}
	}
	for _, p := range ev.Path {
		n += textLen(p)
	}
	return n
}

// textLen returns the bytes a length-prefixed s takes.
func textLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

// uvarintLen returns the bytes binary.AppendUvarint writes for v.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// encoder appends one frame to buf. After the first failure err is set
// and every method does nothing.
type encoder struct {
	buf   []byte
	start int // where the frame starts in buf
	lim   Limits
	kind  Kind
	path  path
	err   *FrameError
}

func (e *encoder) fail(leaf string, sentinel error, reason string) {
	if e.err != nil {
		return
	}
	e.err = &FrameError{
		Encoding: true,
		Kind:     e.kind,
		Field:    e.path.field(leaf),
		Offset:   len(e.buf) - e.start,
		Reason:   reason,
		Err:      sentinel,
	}
}

func (e *encoder) uvarint(v uint64) {
	e.buf = binary.AppendUvarint(e.buf, v)
}

// varint appends v zigzag-encoded.
func (e *encoder) varint(v int64) {
	e.buf = binary.AppendVarint(e.buf, v)
}

func (e *encoder) float(f float64) {
	e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(f))
}

func (e *encoder) bool(b bool) {
	if b {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

// text appends a length-prefixed string that must be valid UTF-8.
func (e *encoder) text(leaf, s string) {
	if e.err != nil {
		return
	}
	if !utf8.ValidString(s) {
		e.fail(leaf, ErrMalformed, "invalid UTF-8")
		return
	}
	e.str(leaf, s)
}

// str appends a length-prefixed string of any bytes.
func (e *encoder) str(leaf, s string) {
	if e.err != nil {
		return
	}
	if len(s) > e.lim.MaxStringBytes {
		e.fail(leaf, ErrTooLarge, fmt.Sprintf("length %d exceeds limit %d", len(s), e.lim.MaxStringBytes))
		return
	}
	e.uvarint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

// bytes appends a length-prefixed byte slice of at most max bytes.
func (e *encoder) bytes(leaf string, b []byte, max int) {
	if e.err != nil {
		return
	}
	if len(b) > max {
		e.fail(leaf, ErrTooLarge, fmt.Sprintf("length %d exceeds limit %d", len(b), max))
		return
	}
	e.uvarint(uint64(len(b)))
	e.buf = append(e.buf, b...)
}

// count appends a list's length, which must be at most max.
func (e *encoder) count(leaf string, n, max int) {
	if e.err != nil {
		return
	}
	if n > max {
		e.fail(leaf, ErrTooLarge, fmt.Sprintf("count %d exceeds limit %d", n, max))
		return
	}
	e.uvarint(uint64(n))
}

func (e *encoder) value(leaf string, v ontology.Value) {
	if e.err != nil {
		return
	}
	switch v.Kind() {
	case ontology.KindString:
		e.buf = append(e.buf, valString)
		e.str(leaf, v.Str())
	case ontology.KindInt:
		e.buf = append(e.buf, valInt)
		e.varint(v.Int())
	case ontology.KindFloat:
		e.buf = append(e.buf, valFloat)
		e.float(v.Float())
	case ontology.KindBool:
		e.buf = append(e.buf, valBool)
		e.bool(v.Bool())
	case ontology.KindTime:
		e.buf = append(e.buf, valTime)
		e.varint(v.Int())
	case ontology.KindInvalid:
		e.fail(leaf, ErrMalformed, "zero Value")
	default:
		e.fail(leaf, ErrMalformed, "unknown value kind "+v.Kind().String())
	}
}

// attrs appends a count and the attributes.
func (e *encoder) attrs(as []ontology.Attr) {
	e.count("attribute count", len(as), e.lim.MaxAttrs)
	for i := 0; i < len(as) && e.err == nil; i++ {
		e.path.push("attribute", i)
		e.text("name", as[i].Name)
		e.value("value", as[i].Value)
		e.path.pop()
	}
}

// profile appends a profile's attributes.
func (e *encoder) profile(as []ontology.Attr) {
	e.path.push("profile", -1)
	e.attrs(as)
	e.path.pop()
}

func (e *encoder) event(ev *Event) {
	e.path.push("event", -1)
	e.buf = append(e.buf, ev.ID[:]...)
	e.text("type", ev.Type)
	e.attrs(ev.Attrs)
	e.text("content type", ev.ContentType)
	e.bytes("data", ev.Data, e.lim.MaxDataBytes)
	e.text("condition", ev.Condition)
	e.varint(int64(ev.TTL))
	e.varint(int64(ev.Hops))
	e.varint(int64(ev.PlaceTTL))
	e.varint(int64(ev.PlaceHops))
	e.text("origin", ev.Origin)
	e.text("place", ev.Place)
	e.count("path count", len(ev.Path), MaxPath)
	for i, p := range ev.Path {
		e.path.push("path", i)
		e.text("place", p)
		e.path.pop()
	}
	e.text("traceparent", ev.TraceParent)
	e.text("tracestate", ev.TraceState)
	e.path.pop()
}

func (e *encoder) matches(ms []Match) {
	e.count("match count", len(ms), e.lim.MaxMatches)
	if e.err != nil {
		return
	}
	for _, m := range ms {
		e.uvarint(m.Sub)
		e.float(m.Score)
	}
}

// counts appends a count and the counts, at most MaxMatches.
func (e *encoder) counts(cs []Count) {
	e.count("lost count", len(cs), e.lim.MaxMatches)
	if e.err != nil {
		return
	}
	for _, c := range cs {
		e.uvarint(c.Sub)
		e.uvarint(c.N)
	}
}

// nilMessage reports whether m is a nil pointer, failing the encoding if
// so.
func (e *encoder) nilMessage(isNil bool) bool {
	if isNil {
		e.fail("message", ErrMalformed, "nil *"+e.kind.String())
		e.err.Offset = 0
	}
	return isNil
}

func (m *Hello) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(uint64(m.Version))
	e.text("session", m.Session)
	e.profile(m.Profile)
	e.bytes("token", m.Token, e.lim.MaxStringBytes)
	e.bytes("resume", m.Resume, e.lim.MaxStringBytes)
	e.uvarint(m.Received)
	e.uvarint(m.RetentionMillis)
	e.uvarint(m.RetentionBytes)
	e.uvarint(uint64(m.SpoolSize))
	e.uvarint(m.SpoolRetentionMillis)
}

func (m *Welcome) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(uint64(m.Version))
	e.text("switch", m.Switch)
	e.text("place", m.Place)
	e.bytes("token", m.Token, e.lim.MaxStringBytes)
	e.bool(m.Resumed)
	e.bool(m.Expired)
	e.uvarint(m.Requests)
	e.counts(m.Lost)
	e.uvarint(m.MaxPayloadBytes)
	e.uvarint(m.RetentionMillis)
	e.uvarint(m.RetentionBytes)
}

func (m *Publish) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Seq)
	e.event(&m.Event)
}

func (m *Subscribe) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Seq)
	e.uvarint(m.Sub)
	e.text("filter", m.Filter)
	e.uvarint(uint64(m.Queue))
	e.buf = append(e.buf, m.Overflow)
	e.bool(m.LookIn)
	e.varint(int64(m.TTL))
}

func (m *Unsubscribe) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Seq)
	e.uvarint(m.Sub)
}

func (m *SetProfile) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Seq)
	e.profile(m.Profile)
}

func (m *Advertise) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Seq)
	e.text("type", m.Type)
	e.attrs(m.Attrs)
}

func (m *Pull) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Seq)
	e.uvarint(uint64(m.Max))
}

func (m *Deliver) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.event(&m.Event)
	e.matches(m.Matched)
}

func (m *PullReply) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Seq)
	e.count("delivery count", len(m.Deliveries), e.lim.MaxDeliveries)
	for i := 0; i < len(m.Deliveries) && e.err == nil; i++ {
		e.path.push("delivery", i)
		e.event(&m.Deliveries[i].Event)
		e.matches(m.Deliveries[i].Matched)
		e.path.pop()
	}
}

func (m *Ack) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Seq)
}

func (m *Error) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Seq)
	e.uvarint(uint64(m.Code))
	e.str("message", m.Message)
}

func (m *Received) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Frames)
}

func (m *Lost) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.counts(m.Lost)
}

func (m *Bye) encode(e *encoder) {
	e.nilMessage(m == nil)
}

func (m *Forward) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.event(&m.Event)
}

func (m *Challenge) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.bytes("nonce", m.Nonce, e.lim.MaxStringBytes)
	e.bytes("proof", m.Proof, e.lim.MaxStringBytes)
}

func (m *Response) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.bytes("proof", m.Proof, e.lim.MaxStringBytes)
}

func (m *Control) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	// Refuse an oversized body before copying it, with the error
	// EncodeLimits gives any frame over MaxFrameBytes.
	if n := len(e.buf) - e.start + len(m.Body); n > e.lim.MaxFrameBytes {
		e.fail("frame", ErrTooLarge, fmt.Sprintf("length %d exceeds limit %d", n, e.lim.MaxFrameBytes))
		e.err.Offset = 0
		return
	}
	e.buf = append(e.buf, m.Body...)
}

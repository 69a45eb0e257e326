package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unicode/utf8"

	"github.com/sion-go/sion/ontology"
)

// Smallest encodings, in bytes, of list elements: Decode refuses a count
// whose elements cannot fit in the bytes left before it allocates them.
const (
	minAttrBytes     = 1 + 1 + 1                              // name length, value kind, shortest value
	minMatchBytes    = 1 + 8                                  // sub, score
	minCountBytes    = 1 + 1                                  // sub, n
	minEventBytes    = 16 + 1 + 1 + 1 + 1 + 1 + 4 + 1 + 1 + 1 // id, type, attrs, content type, data, condition, 4 int32, origin, place, path
	minDeliveryBytes = minEventBytes + 1                      // event, match count
	maxVarintBytes   = binary.MaxVarintLen64                  // 10
	lastVarintMax    = 1                                      // the 10th byte of a uint64 varint holds 1 bit
)

// Decode decodes one frame. It returns one of the pointer types of this
// package (*Publish, …), which shares no memory with frame: frame may be
// reused after the call. An empty list or byte slice decodes as nil.
//
// Decode checks the whole frame against lim (a zero Limits means
// DefaultLimits) and the grammar in the package doc, and checks every
// length and count against both the limit and the bytes remaining before
// it allocates. It returns a *FrameError that names the field and byte
// offset and wraps ErrVersion (the version byte is not FrameVersion),
// ErrTooLarge (a limit is exceeded) or ErrMalformed (anything else: a
// truncated, overlong or non-minimal varint, a length or count beyond the
// frame's end, an unknown kind, invalid UTF-8 in a text field, an invalid
// value kind or bool byte, a number out of its field's range, trailing
// bytes).
func Decode(frame []byte, lim Limits) (Message, error) {
	return DecodeReusing(frame, lim, nil)
}

// DecodeReusing is Decode, except that it decodes a Forward frame into
// *fwd (when not nil), which it overwrites and returns, instead of a new
// Forward: for a reader that is done with each message before it decodes
// the next (the slices and strings of the event are new all the same).
func DecodeReusing(frame []byte, lim Limits, fwd *Forward) (Message, error) {
	d := decoders.Get().(*decoder) // the methods of Message would move a local one to the heap
	d.fwd = fwd
	m, err := d.frame(frame, lim)
	*d = decoder{}
	decoders.Put(d)
	return m, err
}

// decoders holds the *decoder values Decode uses, each frame in turn.
var decoders = sync.Pool{New: func() any { return new(decoder) }}

// frame is Decode with d, which must be the zero decoder but for fwd.
func (d *decoder) frame(frame []byte, lim Limits) (Message, error) {
	d.buf, d.lim = frame, lim.norm()
	if len(frame) > d.lim.MaxFrameBytes {
		if len(frame) >= 2 && frame[0] == FrameVersion && newMessage(Kind(frame[1])) != nil {
			d.kind = Kind(frame[1]) // for the error message
		}
		d.fail("frame", ErrTooLarge, 0, fmt.Sprintf("length %d exceeds limit %d", len(frame), d.lim.MaxFrameBytes))
		return nil, d.err
	}
	v := d.byte("version")
	if d.err != nil {
		return nil, d.err
	}
	if v != FrameVersion {
		d.fail("version", ErrVersion, 0, fmt.Sprintf("version %d, want %d", v, FrameVersion))
		return nil, d.err
	}
	k := Kind(d.byte("kind"))
	if d.err != nil {
		return nil, d.err
	}
	var m Message
	if k == KindForward && d.fwd != nil {
		*d.fwd = Forward{}
		m = d.fwd
	} else {
		m = newMessage(k)
	}
	if m == nil {
		d.fail("kind", ErrMalformed, 1, fmt.Sprintf("unknown kind %d", k))
		return nil, d.err
	}
	d.kind = k
	m.decode(d)
	if d.err == nil && d.off != len(d.buf) {
		d.fail("end", ErrMalformed, d.off, fmt.Sprintf("%d trailing bytes", len(d.buf)-d.off))
	}
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

// decoder reads one frame. After the first failure err is set and every
// method returns zero values without reading.
type decoder struct {
	fwd  *Forward // where to decode a Forward frame; nil: a new Forward
	buf  []byte
	off  int
	lim  Limits
	kind Kind
	path path
	err  *FrameError
}

func (d *decoder) fail(leaf string, sentinel error, off int, reason string) {
	if d.err != nil {
		return
	}
	d.err = &FrameError{
		Kind:   d.kind,
		Field:  d.path.field(leaf),
		Offset: off,
		Reason: reason,
		Err:    sentinel,
	}
}

func (d *decoder) byte(leaf string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.buf) {
		d.fail(leaf, ErrMalformed, d.off, "truncated")
		return 0
	}
	b := d.buf[d.off]
	d.off++
	return b
}

// uvarint reads a minimal unsigned LEB128 varint of at most 10 bytes.
func (d *decoder) uvarint(leaf string) uint64 {
	if d.err != nil {
		return 0
	}
	if d.off < len(d.buf) && d.buf[d.off] < 0x80 {
		d.off++
		return uint64(d.buf[d.off-1])
	}
	var x uint64
	for i := 0; i < maxVarintBytes; i++ {
		if d.off+i >= len(d.buf) {
			d.fail(leaf, ErrMalformed, d.off, "truncated varint")
			return 0
		}
		b := d.buf[d.off+i]
		if b < 0x80 {
			switch {
			case i == maxVarintBytes-1 && b > lastVarintMax:
				d.fail(leaf, ErrMalformed, d.off, "varint overflows 64 bits")
				return 0
			case b == 0: // i > 0: the fast path took single bytes
				d.fail(leaf, ErrMalformed, d.off, "non-minimal varint")
				return 0
			}
			d.off += i + 1
			return x | uint64(b)<<(7*i)
		}
		x |= uint64(b&0x7f) << (7 * i)
	}
	d.fail(leaf, ErrMalformed, d.off, "varint longer than 10 bytes")
	return 0
}

// varint reads a zigzag-encoded signed varint.
func (d *decoder) varint(leaf string) int64 {
	u := d.uvarint(leaf)
	return int64(u>>1) ^ -int64(u&1)
}

// int32 reads a zigzag varint that must fit in an int32.
func (d *decoder) int32(leaf string) int32 {
	start := d.off
	v := d.varint(leaf)
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail(leaf, ErrMalformed, start, fmt.Sprintf("value %d out of int32 range", v))
		return 0
	}
	return int32(v)
}

// uint reads a varint that must be at most max.
func (d *decoder) uint(leaf string, max uint64) uint64 {
	start := d.off
	v := d.uvarint(leaf)
	if v > max {
		d.fail(leaf, ErrMalformed, start, fmt.Sprintf("value %d exceeds %d", v, max))
		return 0
	}
	return v
}

func (d *decoder) float(leaf string) float64 {
	if d.err != nil {
		return 0
	}
	if len(d.buf)-d.off < 8 {
		d.fail(leaf, ErrMalformed, d.off, fmt.Sprintf("float needs 8 bytes, %d remain", len(d.buf)-d.off))
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(d.buf[d.off:]))
	d.off += 8
	return f
}

func (d *decoder) bool(leaf string) bool {
	start := d.off
	b := d.byte(leaf)
	if b > 1 {
		d.fail(leaf, ErrMalformed, start, fmt.Sprintf("bool byte %d", b))
	}
	return b == 1
}

// length reads a length prefix and checks it against the bytes remaining,
// then against max. It returns the offset of the prefix, for errors.
func (d *decoder) length(leaf string, max int) (n, start int) {
	start = d.off
	u := d.uvarint(leaf)
	if d.err != nil {
		return 0, start
	}
	if rem := len(d.buf) - d.off; u > uint64(rem) {
		d.fail(leaf, ErrMalformed, start, fmt.Sprintf("length %d exceeds remaining %d bytes", u, rem))
		return 0, start
	}
	if u > uint64(max) {
		d.fail(leaf, ErrTooLarge, start, fmt.Sprintf("length %d exceeds limit %d", u, max))
		return 0, start
	}
	return int(u), start
}

// count reads a list's length and checks it against the bytes remaining
// (each element takes at least min bytes), then against max.
func (d *decoder) count(leaf string, min, max int) int {
	start := d.off
	u := d.uvarint(leaf)
	if d.err != nil {
		return 0
	}
	if rem := len(d.buf) - d.off; u > uint64(rem/min) {
		d.fail(leaf, ErrMalformed, start, fmt.Sprintf("count %d needs at least %d bytes per element, %d remain", u, min, rem))
		return 0
	}
	if u > uint64(max) {
		d.fail(leaf, ErrTooLarge, start, fmt.Sprintf("count %d exceeds limit %d", u, max))
		return 0
	}
	return int(u)
}

// text reads a length-prefixed string that must be valid UTF-8.
func (d *decoder) text(leaf string) string {
	n, start := d.length(leaf, d.lim.MaxStringBytes)
	if d.err != nil || n == 0 {
		return ""
	}
	b := d.buf[d.off : d.off+n]
	if !utf8.Valid(b) {
		d.fail(leaf, ErrMalformed, start, "invalid UTF-8")
		return ""
	}
	d.off += n
	return string(b)
}

// str reads a length-prefixed string of any bytes.
func (d *decoder) str(leaf string) string {
	n, _ := d.length(leaf, d.lim.MaxStringBytes)
	if d.err != nil || n == 0 {
		return ""
	}
	s := string(d.buf[d.off : d.off+n])
	d.off += n
	return s
}

// bytes reads a length-prefixed byte slice of at most max bytes, copied;
// nil when empty.
func (d *decoder) bytes(leaf string, max int) []byte {
	n, _ := d.length(leaf, max)
	if d.err != nil || n == 0 {
		return nil
	}
	b := make([]byte, n)
	copy(b, d.buf[d.off:])
	d.off += n
	return b
}

func (d *decoder) value(leaf string) ontology.Value {
	start := d.off
	switch k := d.byte(leaf); k {
	case valString:
		return ontology.String(d.str(leaf))
	case valInt:
		return ontology.Int(d.varint(leaf))
	case valFloat:
		return ontology.Float(d.float(leaf))
	case valBool:
		return ontology.Bool(d.bool(leaf))
	case valTime:
		return ontology.TimeNanos(d.varint(leaf))
	default:
		d.fail(leaf, ErrMalformed, start, fmt.Sprintf("invalid value kind %d", k))
	}
	return ontology.Value{}
}

func (d *decoder) attrs() []ontology.Attr {
	n := d.count("attribute count", minAttrBytes, d.lim.MaxAttrs)
	if n == 0 {
		return nil
	}
	as := make([]ontology.Attr, n)
	for i := 0; i < n && d.err == nil; i++ {
		d.path.push("attribute", i)
		as[i].Name = d.text("name")
		as[i].Value = d.value("value")
		d.path.pop()
	}
	return as
}

func (d *decoder) profile() []ontology.Attr {
	d.path.push("profile", -1)
	as := d.attrs()
	d.path.pop()
	return as
}

func (d *decoder) event(ev *Event) {
	d.path.push("event", -1)
	if d.err == nil {
		if rem := len(d.buf) - d.off; rem < len(ev.ID) {
			d.fail("id", ErrMalformed, d.off, fmt.Sprintf("needs 16 bytes, %d remain", rem))
		} else {
			d.off += copy(ev.ID[:], d.buf[d.off:])
		}
	}
	ev.Type = d.text("type")
	ev.Attrs = d.attrs()
	ev.ContentType = d.text("content type")
	ev.Data = d.bytes("data", d.lim.MaxDataBytes)
	ev.Condition = d.text("condition")
	ev.TTL = d.int32("ttl")
	ev.Hops = d.int32("hops")
	ev.PlaceTTL = d.int32("place ttl")
	ev.PlaceHops = d.int32("place hops")
	ev.Origin = d.text("origin")
	ev.Place = d.text("place")
	if n := d.count("path count", 1, MaxPath); n > 0 {
		ev.Path = make([]string, n)
		for i := 0; i < n && d.err == nil; i++ {
			d.path.push("path", i)
			ev.Path[i] = d.text("place")
			d.path.pop()
		}
	}
	ev.TraceParent = d.text("traceparent")
	ev.TraceState = d.text("tracestate")
	d.path.pop()
}

func (d *decoder) matches() []Match {
	n := d.count("match count", minMatchBytes, d.lim.MaxMatches)
	if n == 0 {
		return nil
	}
	ms := make([]Match, n)
	for i := 0; i < n && d.err == nil; i++ {
		d.path.push("match", i)
		ms[i].Sub = d.uvarint("sub")
		ms[i].Score = d.float("score")
		d.path.pop()
	}
	return ms
}

func (d *decoder) counts() []Count {
	n := d.count("lost count", minCountBytes, d.lim.MaxMatches)
	if n == 0 {
		return nil
	}
	cs := make([]Count, n)
	for i := 0; i < n && d.err == nil; i++ {
		d.path.push("lost", i)
		cs[i].Sub = d.uvarint("sub")
		cs[i].N = d.uvarint("n")
		d.path.pop()
	}
	return cs
}

func (m *Hello) decode(d *decoder) {
	m.Version = uint16(d.uint("version", math.MaxUint16))
	m.Session = d.text("session")
	m.Profile = d.profile()
	m.Token = d.bytes("token", d.lim.MaxStringBytes)
	m.Resume = d.bytes("resume", d.lim.MaxStringBytes)
	m.Received = d.uvarint("received")
	m.RetentionMillis = d.uvarint("retention")
	m.RetentionBytes = d.uvarint("retention bytes")
	m.SpoolSize = uint32(d.uint("spool size", math.MaxUint32))
	m.SpoolRetentionMillis = d.uvarint("spool retention")
}

func (m *Welcome) decode(d *decoder) {
	m.Version = uint16(d.uint("version", math.MaxUint16))
	m.Switch = d.text("switch")
	m.Place = d.text("place")
	m.Token = d.bytes("token", d.lim.MaxStringBytes)
	m.Resumed = d.bool("resumed")
	m.Expired = d.bool("expired")
	m.Requests = d.uvarint("requests")
	m.Lost = d.counts()
	m.MaxPayloadBytes = d.uvarint("max payload bytes")
	m.RetentionMillis = d.uvarint("retention")
	m.RetentionBytes = d.uvarint("retention bytes")
}

func (m *Publish) decode(d *decoder) {
	m.Seq = d.uvarint("seq")
	d.event(&m.Event)
}

func (m *Subscribe) decode(d *decoder) {
	m.Seq = d.uvarint("seq")
	m.Sub = d.uvarint("sub")
	m.Filter = d.text("filter")
	m.Queue = uint32(d.uint("queue", math.MaxUint32))
	m.Overflow = d.byte("overflow")
	m.LookIn = d.bool("look-in")
	m.TTL = d.int32("ttl")
}

func (m *Unsubscribe) decode(d *decoder) {
	m.Seq = d.uvarint("seq")
	m.Sub = d.uvarint("sub")
}

func (m *SetProfile) decode(d *decoder) {
	m.Seq = d.uvarint("seq")
	m.Profile = d.profile()
}

func (m *Advertise) decode(d *decoder) {
	m.Seq = d.uvarint("seq")
	m.Type = d.text("type")
	m.Attrs = d.attrs()
}

func (m *Pull) decode(d *decoder) {
	m.Seq = d.uvarint("seq")
	m.Max = uint32(d.uint("max", math.MaxUint32))
}

func (m *Deliver) decode(d *decoder) {
	d.event(&m.Event)
	m.Matched = d.matches()
}

func (m *PullReply) decode(d *decoder) {
	m.Seq = d.uvarint("seq")
	n := d.count("delivery count", minDeliveryBytes, d.lim.MaxDeliveries)
	if n == 0 {
		return
	}
	m.Deliveries = make([]Delivery, n)
	for i := 0; i < n && d.err == nil; i++ {
		d.path.push("delivery", i)
		d.event(&m.Deliveries[i].Event)
		m.Deliveries[i].Matched = d.matches()
		d.path.pop()
	}
}

func (m *Ack) decode(d *decoder) {
	m.Seq = d.uvarint("seq")
}

func (m *Error) decode(d *decoder) {
	m.Seq = d.uvarint("seq")
	m.Code = uint16(d.uint("code", math.MaxUint16))
	m.Message = d.str("message")
}

func (m *Received) decode(d *decoder) {
	m.Frames = d.uvarint("frames")
}

func (m *Lost) decode(d *decoder) {
	m.Lost = d.counts()
}

func (*Bye) decode(*decoder) {}

func (m *Forward) decode(d *decoder) {
	d.event(&m.Event)
}

func (m *Challenge) decode(d *decoder) {
	m.Nonce = d.bytes("nonce", d.lim.MaxStringBytes)
	m.Proof = d.bytes("proof", d.lim.MaxStringBytes)
}

func (m *Response) decode(d *decoder) {
	m.Proof = d.bytes("proof", d.lim.MaxStringBytes)
}

// decode copies the rest of the frame, which Decode has already checked
// against MaxFrameBytes; nil when empty.
func (m *Control) decode(d *decoder) {
	if d.err != nil || d.off == len(d.buf) {
		return
	}
	m.Body = make([]byte, len(d.buf)-d.off)
	d.off += copy(m.Body, d.buf[d.off:])
}

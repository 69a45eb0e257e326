package linkctl

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/sion-go/sion/internal/wire"
)

// Decode decodes the body of a Control frame (see the package doc's
// grammar) and returns one of the pointer types of this package
// (*Register, …), which shares no memory with c: c.Body may be reused
// after the call. An empty list decodes as nil.
//
// It checks every length and count against the bytes remaining before it
// allocates, and returns a *MessageError that names the message, the
// field and its offset in the body and wraps ErrMalformed when the body
// breaks the grammar: it is empty or nil (as is c), its kind is unknown,
// a varint is truncated, overlong or not minimal, a length or count runs
// past the end, a text field is not UTF-8, a bool byte is not 0 or 1, an
// overlay ID has fewer than 16 bytes left, a number (a byte included) is
// out of its field's range, a list has more than MaxNames
// entries, a name contains NUL or a newline, or bytes follow the last
// field.
func Decode(c *wire.Control) (Message, error) {
	d := decoder{}
	if c == nil {
		d.fail("message", 0, "nil *wire.Control")
		return nil, d.err
	}
	d.buf = c.Body
	if len(d.buf) == 0 {
		d.fail("kind", 0, "empty body")
		return nil, d.err
	}
	k := Kind(d.buf[0])
	m := newMessage(k)
	if m == nil {
		d.fail("kind", 0, fmt.Sprintf("unknown kind %d", k))
		return nil, d.err
	}
	d.off, d.kind = 1, k
	m.decode(&d)
	if d.err == nil && d.off != len(d.buf) {
		d.fail("end", d.off, fmt.Sprintf("%d trailing bytes", len(d.buf)-d.off))
	}
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

// decoder reads one body. After the first failure err is set and every
// method returns zero values without reading.
type decoder struct {
	buf  []byte
	off  int
	kind Kind
	err  *MessageError
}

func (d *decoder) fail(field string, off int, reason string) {
	if d.err == nil {
		d.err = &MessageError{Kind: d.kind, Field: field, Offset: off, Reason: reason}
	}
}

// uvarint reads a minimal unsigned LEB128 varint of at most 10 bytes.
func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	if d.off < len(d.buf) && d.buf[d.off] < 0x80 {
		d.off++
		return uint64(d.buf[d.off-1])
	}
	var x uint64
	for i := range binary.MaxVarintLen64 {
		if d.off+i >= len(d.buf) {
			d.fail(field, d.off, "truncated varint")
			return 0
		}
		b := d.buf[d.off+i]
		if b < 0x80 {
			switch {
			case i == binary.MaxVarintLen64-1 && b > 1: // the 10th byte holds 1 bit
				d.fail(field, d.off, "varint overflows 64 bits")
				return 0
			case b == 0: // i > 0: the fast path took single bytes
				d.fail(field, d.off, "non-minimal varint")
				return 0
			}
			d.off += i + 1
			return x | uint64(b)<<(7*i)
		}
		x |= uint64(b&0x7f) << (7 * i)
	}
	d.fail(field, d.off, "varint longer than 10 bytes")
	return 0
}

// int reads a zigzag-encoded varint that must be in lo…hi.
func (d *decoder) int(field string, lo, hi int64) int64 {
	start := d.off
	u := d.uvarint(field)
	v := int64(u>>1) ^ -int64(u&1)
	if d.err == nil && (v < lo || v > hi) {
		d.fail(field, start, rangeReason(v, lo, hi))
		return 0
	}
	return v
}

func (d *decoder) bool(field string) bool {
	if d.err != nil {
		return false
	}
	if d.off >= len(d.buf) {
		d.fail(field, d.off, "truncated")
		return false
	}
	b := d.buf[d.off]
	if b > 1 {
		d.fail(field, d.off, fmt.Sprintf("bool byte %d", b))
		return false
	}
	d.off++
	return b == 1
}

// raw reads a length-prefixed string and returns its bytes, still in buf,
// and the offset of its prefix.
func (d *decoder) raw(field string) (b []byte, start int) {
	start = d.off
	u := d.uvarint(field)
	if d.err != nil {
		return nil, start
	}
	if rem := len(d.buf) - d.off; u > uint64(rem) {
		d.fail(field, start, fmt.Sprintf("length %d exceeds remaining %d bytes", u, rem))
		return nil, start
	}
	b = d.buf[d.off : d.off+int(u)]
	d.off += int(u)
	return b, start
}

// str reads a length-prefixed string of any bytes.
func (d *decoder) str(field string) string {
	b, _ := d.raw(field)
	return string(b)
}

// text reads a length-prefixed string that must be valid UTF-8.
func (d *decoder) text(field string) string {
	b, start := d.raw(field)
	if d.err == nil && !utf8.Valid(b) {
		d.fail(field, start, "invalid UTF-8")
		return ""
	}
	return string(b)
}

// names reads a count and the names; nil when there are none.
func (d *decoder) names(field string) []string {
	start := d.off
	u := d.uvarint(field + " count")
	if d.err != nil || u == 0 {
		return nil
	}
	if rem := len(d.buf) - d.off; u > uint64(rem) { // each name takes a byte at least
		d.fail(field+" count", start, fmt.Sprintf("count %d needs at least 1 byte per entry, %d remain", u, rem))
		return nil
	}
	if u > MaxNames {
		d.fail(field+" count", start, fmt.Sprintf("count %d exceeds %d", u, MaxNames))
		return nil
	}
	ns := make([]string, u)
	for i := range ns {
		b, start := d.raw(field)
		if d.err != nil {
			d.err.Field = fmt.Sprintf("%s %d", field, i) // name the entry
			return nil
		}
		ns[i] = string(b)
		if reason := nameReason(ns[i]); reason != "" {
			d.fail(fmt.Sprintf("%s %d", field, i), start, reason)
			return nil
		}
	}
	return ns
}

// byteIn reads one byte that must be in lo…hi.
func (d *decoder) byteIn(field string, lo, hi byte) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.buf) {
		d.fail(field, d.off, "truncated")
		return 0
	}
	b := d.buf[d.off]
	if b < lo || b > hi {
		d.fail(field, d.off, rangeReason(int64(b), int64(lo), int64(hi)))
		return 0
	}
	d.off++
	return b
}

// id reads an overlay ID: 16 raw bytes.
func (d *decoder) id(field string) (id [IDLen]byte) {
	if d.err != nil {
		return id
	}
	if rem := len(d.buf) - d.off; rem < IDLen {
		d.fail(field, d.off, fmt.Sprintf("truncated ID: %d of %d bytes", rem, IDLen))
		return id
	}
	copy(id[:], d.buf[d.off:])
	d.off += IDLen
	return id
}

// node reads an overlay node: its ID and address. i is its index in list
// field, or -1 for a lone node.
func (d *decoder) node(field string, i int) (n OverlayNode) {
	if d.err != nil {
		return n
	}
	n.ID = d.id("id")
	n.Addr = d.text("addr")
	if d.err != nil {
		d.err.Field = entry(field, i, d.err.Field) // name the entry
		return OverlayNode{}
	}
	return n
}

// count reads the count of a list whose entries take at least `least` bytes
// each, and checks it against the bytes remaining and MaxNames.
func (d *decoder) count(field string, least int) uint64 {
	start := d.off
	u := d.uvarint(field + " count")
	if d.err != nil || u == 0 {
		return 0
	}
	if rem := len(d.buf) - d.off; u > uint64(rem/least) {
		d.fail(field+" count", start, fmt.Sprintf("count %d needs at least %d bytes per entry, %d remain", u, least, rem))
		return 0
	}
	if u > MaxNames {
		d.fail(field+" count", start, fmt.Sprintf("count %d exceeds %d", u, MaxNames))
		return 0
	}
	return u
}

// nodes reads a count and the overlay nodes; nil when there are none.
func (d *decoder) nodes(field string) []OverlayNode {
	u := d.count(field, IDLen+1) // an ID and an address length
	if u == 0 {
		return nil
	}
	ns := make([]OverlayNode, u)
	for i := range ns {
		ns[i] = d.node(field, i)
		if d.err != nil {
			return nil
		}
	}
	return ns
}

// attrs reads a count and the attribute details; nil when there are
// none.
func (d *decoder) attrs(field string) []AttrDetail {
	u := d.count(field, 2) // two lengths
	if u == 0 {
		return nil
	}
	as := make([]AttrDetail, u)
	for i := range as {
		as[i].Name = d.text("name")
		as[i].Value = d.text("value")
		if d.err != nil {
			d.err.Field = entry(field, i, d.err.Field) // name the entry
			return nil
		}
	}
	return as
}

// class reads an event class: its level (1…3) and three texts.
func (d *decoder) class(field string) (c ClassRef) {
	c.Level = d.byteIn(field+" level", LevelType, LevelLeafAttr)
	c.Type = d.text(field + " type")
	c.Attr = d.text(field + " attr")
	c.Value = d.text(field + " value")
	return c
}

func (m *LinkRequest) decode(d *decoder) {
	m.Switch = d.text("switch")
	m.Place = d.text("place")
	m.Link = d.int("link", 0, math.MaxInt64)
	m.Addr = d.text("addr")
	m.Merge = d.bool("merge")
	m.Absorb = d.text("absorb")
}

func (m *LinkAccept) decode(d *decoder) {
	m.Switch = d.text("switch")
	m.Place = d.text("place")
}

func (m *Federate) decode(d *decoder) {
	m.Switch = d.text("switch")
	m.Place = d.text("place")
	m.Gateway = d.text("gateway")
	m.Link = d.int("link", 0, math.MaxInt64)
	m.Import = d.bool("import")
	m.Export = d.bool("export")
}

func (m *Register) decode(d *decoder) {
	m.Key = d.uvarint("key")
	m.Ack = d.uvarint("ack")
	m.Filter = d.text("filter")
	m.TTL = int(d.int("ttl", 0, MaxHops))
	m.Places = d.names("places")
}

func (m *Release) decode(d *decoder) {
	m.Key = d.uvarint("key")
}

func (m *Marker) decode(d *decoder) {
	m.Ack = d.uvarint("ack")
	m.TTL = int(d.int("ttl", 0, MaxHops))
	m.Gateways = int(d.int("gateways", 0, MaxHops))
}

func (m *Ack) decode(d *decoder) {
	m.Ack = d.uvarint("ack")
	m.Error = d.str("error")
}

func (*Synced) decode(*decoder) {}

func (m *Probe) decode(d *decoder) {
	m.ID = d.uvarint("id")
	m.Hops = int(d.int("hops", 0, MaxHops))
	m.Dir = int(d.int("dir", DirParents, DirAll))
	m.Path = d.names("path")
}

func (m *ProbeReply) decode(d *decoder) {
	m.ID = d.uvarint("id")
	m.Hops = int(d.int("hops", 0, MaxHops))
	m.Path = d.names("path")
	m.Switch = d.text("switch")
	m.Addr = d.text("addr")
	m.End = d.bool("end")
	m.Pending = d.bool("pending")
}

func (m *Leave) decode(d *decoder) {
	m.Parent = d.text("parent")
}

func (m *Join) decode(d *decoder) {
	m.Key = d.id("key")
	m.Joiner = d.id("joiner")
	m.JoinerAddr = d.text("joiner addr")
	m.Hops = int(d.int("hops", 0, MaxHops))
	m.Rows = d.nodes("rows")
}

func (m *JoinReply) decode(d *decoder) {
	m.Joiner = d.id("joiner")
	m.Rows = d.nodes("rows")
	m.Leaves = d.nodes("leaves")
}

func (m *BypassEnd) decode(d *decoder) {
	m.Class = d.class("class")
	m.Seq = d.uvarint("seq")
	m.Ack = d.uvarint("ack")
}

func (m *OverlayLink) decode(d *decoder) {
	m.Switch = d.text("switch")
	m.Place = d.text("place")
	m.Node = d.node("node", -1)
}

func (m *Announce) decode(d *decoder) {
	m.Node = d.node("node", -1)
	m.Leaving = d.bool("leaving")
	m.Leaves = d.nodes("leaves")
}

func (*LeafSetRequest) decode(*decoder) {}

func (m *LeafSetReply) decode(d *decoder) {
	m.Leaves = d.nodes("leaves")
}

func (m *Advertise) decode(d *decoder) {
	m.Key = d.uvarint("key")
	m.Ack = d.uvarint("ack")
	m.Type = d.text("type")
	m.Attrs = d.attrs("attrs")
}

func (m *Unadvertise) decode(d *decoder) {
	m.Key = d.uvarint("key")
}

func (m *PathChange) decode(d *decoder) {
	m.Class = d.class("class")
	m.Direction = d.byteIn("direction", Downstream, Upstream)
	m.Branch = d.id("branch")
	m.BranchAddr = d.text("branch addr")
	m.Seq = d.uvarint("seq")
}

func (m *BranchPoint) decode(d *decoder) {
	m.Class = d.class("class")
	m.Seq = d.uvarint("seq")
	m.Node = d.node("node", -1)
}

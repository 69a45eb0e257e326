package linkctl

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/sion-go/sion/internal/wire"
)

// Encode returns the whole wire frame that carries m: a wire.Control
// frame whose body is m's encoding (see the package doc's grammar), ready
// for transport.Conn.Send.
//
// It refuses exactly what Decode would refuse, so that every frame it
// returns decodes to a message equal to m (empty lists decode as nil): a
// nil m or nil pointer, invalid UTF-8 in a text field, a number out of its
// field's range (PathChange.Direction, ClassRef.Level included), a list over MaxNames entries or a NUL or newline in a
// name give a *MessageError wrapping ErrMalformed. A frame longer than
// lim.MaxFrameBytes (a zero lim means wire.DefaultLimits) gives wire's
// *wire.FrameError wrapping wire.ErrTooLarge.
//
// Encode does not keep m or modify it. It allocates the body and the
// frame.
func Encode(m Message, lim wire.Limits) ([]byte, error) {
	if m == nil {
		return nil, &MessageError{Encoding: true, Field: "message", Reason: "nil Message"}
	}
	e := encoder{buf: make([]byte, 0, 64), kind: m.Kind()}
	e.buf = append(e.buf, byte(e.kind))
	m.encode(&e)
	if e.err != nil {
		return nil, e.err
	}
	frame, err := wire.EncodeLimits(make([]byte, 0, 2+len(e.buf)), &wire.Control{Body: e.buf}, lim)
	if err != nil {
		return nil, err
	}
	return frame, nil
}

// encoder appends one body to buf. After the first failure err is set and
// every method does nothing.
type encoder struct {
	buf  []byte
	kind Kind
	err  *MessageError
}

func (e *encoder) fail(field, reason string) {
	if e.err == nil {
		e.err = &MessageError{Encoding: true, Kind: e.kind, Field: field, Offset: len(e.buf), Reason: reason}
	}
}

// nilMessage reports whether m is a nil pointer, failing the encoding if
// so.
func (e *encoder) nilMessage(isNil bool) bool {
	if isNil {
		e.fail("message", "nil pointer")
		e.err.Offset = 0
	}
	return isNil
}

func (e *encoder) uvarint(v uint64) {
	if e.err == nil {
		e.buf = binary.AppendUvarint(e.buf, v)
	}
}

// int appends v zigzag-encoded, which must be in lo…hi.
func (e *encoder) int(field string, v, lo, hi int64) {
	if e.err != nil {
		return
	}
	if v < lo || v > hi {
		e.fail(field, rangeReason(v, lo, hi))
		return
	}
	e.buf = binary.AppendVarint(e.buf, v)
}

func (e *encoder) bool(b bool) {
	if e.err != nil {
		return
	}
	if b {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

// str appends a length-prefixed string of any bytes.
func (e *encoder) str(s string) {
	if e.err == nil {
		e.buf = binary.AppendUvarint(e.buf, uint64(len(s)))
		e.buf = append(e.buf, s...)
	}
}

// text appends a length-prefixed string that must be valid UTF-8.
func (e *encoder) text(field, s string) {
	if e.err != nil {
		return
	}
	if !utf8.ValidString(s) {
		e.fail(field, "invalid UTF-8")
		return
	}
	e.str(s)
}

// names appends a count and the names, each valid UTF-8 without NUL or
// newline.
func (e *encoder) names(field string, ns []string) {
	if e.err != nil {
		return
	}
	if len(ns) > MaxNames {
		e.fail(field+" count", fmt.Sprintf("count %d exceeds %d", len(ns), MaxNames))
		return
	}
	e.uvarint(uint64(len(ns)))
	for i, n := range ns {
		if reason := nameReason(n); reason != "" {
			e.fail(fmt.Sprintf("%s %d", field, i), reason)
			return
		}
		e.str(n)
	}
}

// byteIn appends v as one byte, which must be in lo…hi.
func (e *encoder) byteIn(field string, v, lo, hi byte) {
	if e.err != nil {
		return
	}
	if v < lo || v > hi {
		e.fail(field, rangeReason(int64(v), int64(lo), int64(hi)))
		return
	}
	e.buf = append(e.buf, v)
}

// id appends an overlay ID: its 16 bytes, raw.
func (e *encoder) id(id *[IDLen]byte) {
	if e.err == nil {
		e.buf = append(e.buf, id[:]...)
	}
}

// entry names entry i of list field, or field itself when i < 0, and sub
// a part of it.
func entry(field string, i int, sub string) string {
	if i < 0 {
		return field + " " + sub
	}
	return fmt.Sprintf("%s %d %s", field, i, sub)
}

// node appends an overlay node: its ID and address. i is its index in
// list field, or -1 for a lone node.
func (e *encoder) node(field string, i int, n *OverlayNode) {
	e.id(&n.ID)
	if e.err == nil && !utf8.ValidString(n.Addr) {
		e.fail(entry(field, i, "addr"), "invalid UTF-8")
		return
	}
	e.str(n.Addr)
}

// nodes appends a count and the overlay nodes.
func (e *encoder) nodes(field string, ns []OverlayNode) {
	if e.err != nil {
		return
	}
	if len(ns) > MaxNames {
		e.fail(field+" count", fmt.Sprintf("count %d exceeds %d", len(ns), MaxNames))
		return
	}
	e.uvarint(uint64(len(ns)))
	for i := range ns {
		e.node(field, i, &ns[i])
	}
}

// attrs appends a count and the attribute details, each a name and a
// value, both valid UTF-8.
func (e *encoder) attrs(field string, as []AttrDetail) {
	if e.err != nil {
		return
	}
	if len(as) > MaxNames {
		e.fail(field+" count", fmt.Sprintf("count %d exceeds %d", len(as), MaxNames))
		return
	}
	e.uvarint(uint64(len(as)))
	for i := range as {
		if !utf8.ValidString(as[i].Name) {
			e.fail(entry(field, i, "name"), "invalid UTF-8")
			return
		}
		e.str(as[i].Name)
		if !utf8.ValidString(as[i].Value) {
			e.fail(entry(field, i, "value"), "invalid UTF-8")
			return
		}
		e.str(as[i].Value)
	}
}

// class appends an event class: its level (1…3) and three texts.
func (e *encoder) class(field string, c *ClassRef) {
	e.byteIn(field+" level", c.Level, LevelType, LevelLeafAttr)
	e.text(field+" type", c.Type)
	e.text(field+" attr", c.Attr)
	e.text(field+" value", c.Value)
}

// rangeReason says why v is not in lo…hi.
func rangeReason(v, lo, hi int64) string {
	if lo == 0 && hi == math.MaxInt64 {
		return fmt.Sprintf("negative value %d", v)
	}
	return fmt.Sprintf("value %d out of range %d…%d", v, lo, hi)
}

// nameReason says why s is no name, or returns "".
func nameReason(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "invalid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains NUL"
	case strings.IndexByte(s, '\n') >= 0:
		return "contains a newline"
	}
	return ""
}

func (m *LinkRequest) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.text("switch", m.Switch)
	e.text("place", m.Place)
	e.int("link", m.Link, 0, math.MaxInt64)
	e.text("addr", m.Addr)
	e.bool(m.Merge)
	e.text("absorb", m.Absorb)
}

func (m *LinkAccept) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.text("switch", m.Switch)
	e.text("place", m.Place)
}

func (m *Federate) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.text("switch", m.Switch)
	e.text("place", m.Place)
	e.text("gateway", m.Gateway)
	e.int("link", m.Link, 0, math.MaxInt64)
	e.bool(m.Import)
	e.bool(m.Export)
}

func (m *Register) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Key)
	e.uvarint(m.Ack)
	e.text("filter", m.Filter)
	e.int("ttl", int64(m.TTL), 0, MaxHops)
	e.names("places", m.Places)
}

func (m *Release) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Key)
}

func (m *Marker) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Ack)
	e.int("ttl", int64(m.TTL), 0, MaxHops)
	e.int("gateways", int64(m.Gateways), 0, MaxHops)
}

func (m *Ack) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Ack)
	e.str(m.Error)
}

func (m *Synced) encode(e *encoder) {
	e.nilMessage(m == nil)
}

func (m *Probe) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.ID)
	e.int("hops", int64(m.Hops), 0, MaxHops)
	e.int("dir", int64(m.Dir), DirParents, DirAll)
	e.names("path", m.Path)
}

func (m *ProbeReply) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.ID)
	e.int("hops", int64(m.Hops), 0, MaxHops)
	e.names("path", m.Path)
	e.text("switch", m.Switch)
	e.text("addr", m.Addr)
	e.bool(m.End)
	e.bool(m.Pending)
}

func (m *Leave) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.text("parent", m.Parent)
}

func (m *Join) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.id(&m.Key)
	e.id(&m.Joiner)
	e.text("joiner addr", m.JoinerAddr)
	e.int("hops", int64(m.Hops), 0, MaxHops)
	e.nodes("rows", m.Rows)
}

func (m *JoinReply) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.id(&m.Joiner)
	e.nodes("rows", m.Rows)
	e.nodes("leaves", m.Leaves)
}

func (m *BypassEnd) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.class("class", &m.Class)
	e.uvarint(m.Seq)
	e.uvarint(m.Ack)
}

func (m *OverlayLink) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.text("switch", m.Switch)
	e.text("place", m.Place)
	e.node("node", -1, &m.Node)
}

func (m *Announce) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.node("node", -1, &m.Node)
	e.bool(m.Leaving)
	e.nodes("leaves", m.Leaves)
}

func (m *LeafSetRequest) encode(e *encoder) {
	e.nilMessage(m == nil)
}

func (m *LeafSetReply) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.nodes("leaves", m.Leaves)
}

func (m *Advertise) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Key)
	e.uvarint(m.Ack)
	e.text("type", m.Type)
	e.attrs("attrs", m.Attrs)
}

func (m *Unadvertise) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Key)
}

func (m *PathChange) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.class("class", &m.Class)
	e.byteIn("direction", m.Direction, Downstream, Upstream)
	e.id(&m.Branch)
	e.text("branch addr", m.BranchAddr)
	e.uvarint(m.Seq)
}

func (m *BranchPoint) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.class("class", &m.Class)
	e.uvarint(m.Seq)
	e.node("node", -1, &m.Node)
}

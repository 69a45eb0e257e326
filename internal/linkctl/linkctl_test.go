package linkctl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/internal/wire"
)

type sample struct {
	name string
	msg  Message
}

// manyNames returns n distinct names, MaxNames at most.
func manyNames(n int) []string {
	ns := make([]string, n)
	for i := range ns {
		ns[i] = fmt.Sprint("sw-", i)
	}
	return ns
}

// samples returns messages of every kind: zero values, realistic ones and
// the extremes of every field, empty (non-nil) lists included.
func samples() []sample {
	long := strings.Repeat("長", 2000)
	return append([]sample{
		{"LinkRequest/zero", &LinkRequest{}},
		{"LinkRequest/realistic", &LinkRequest{Switch: "sw-osaka-2", Place: "kansai", Link: 17, Addr: "10.0.0.7:7010"}},
		{"LinkRequest/merge", &LinkRequest{Switch: "sw-b", Place: "other", Link: 1, Merge: true}},
		{"LinkRequest/absorb", &LinkRequest{Switch: "sw-a", Place: "kansai", Absorb: "10.0.0.9:7010"}},
		{"LinkRequest/extreme", &LinkRequest{Switch: long, Place: "場所\x00\n", Link: math.MaxInt64, Addr: "[::1]:65535", Merge: true, Absorb: long}},
		{"LinkAccept/zero", &LinkAccept{}},
		{"LinkAccept/realistic", &LinkAccept{Switch: "sw-tokyo-1", Place: "kanto"}},
		{"Federate/zero", &Federate{}},
		{"Federate/realistic", &Federate{Switch: "sw-tokyo-1", Place: "kanto", Gateway: "gw-kanto-kansai", Link: 3, Import: true}},
		{"Federate/extreme", &Federate{Switch: long, Place: long, Gateway: long, Link: math.MaxInt64, Import: true, Export: true}},
		{"Register/zero", &Register{}},
		{"Register/realistic", &Register{Key: 12, Ack: 40, Filter: `{type ⊑ music.BGM} && tempo >= 120`, TTL: 3}},
		{"Register/through places", &Register{Key: 13, Ack: 41, Filter: "{}", TTL: 2, Places: []string{"kanto", "kansai"}}},
		{"Register/one empty place", &Register{Places: []string{""}}},
		{"Register/empty places", &Register{Places: []string{}}},
		{"Register/extreme", &Register{Key: math.MaxUint64, Ack: math.MaxUint64, Filter: long, TTL: MaxHops, Places: manyNames(MaxNames)}},
		{"Release/zero", &Release{}},
		{"Release/max", &Release{Key: math.MaxUint64}},
		{"Marker/zero", &Marker{}},
		{"Marker/realistic", &Marker{Ack: 41, TTL: 5, Gateways: 1}},
		{"Marker/extreme", &Marker{Ack: math.MaxUint64, TTL: MaxHops, Gateways: MaxHops}},
		{"Ack/zero", &Ack{}},
		{"Ack/error", &Ack{Ack: 40, Error: `filter: unknown attribute "tempoo"`}},
		{"Ack/any bytes", &Ack{Ack: math.MaxUint64, Error: "bad \xff\x00\n bytes"}},
		{"Synced", &Synced{}},
		{"Probe/zero", &Probe{}},
		{"Probe/realistic", &Probe{ID: 77, Hops: 3, Dir: DirParents, Path: []string{"sw-a", "sw-b"}}},
		{"Probe/children", &Probe{ID: 78, Hops: 1, Dir: DirChildren, Path: []string{"sw-a"}}},
		{"Probe/extreme", &Probe{ID: math.MaxUint64, Hops: MaxHops, Dir: DirAll, Path: manyNames(MaxNames)}},
		{"Probe/empty path", &Probe{Path: []string{}}},
		{"ProbeReply/zero", &ProbeReply{}},
		{"ProbeReply/realistic", &ProbeReply{ID: 77, Hops: 2, Path: []string{"sw-a", "sw-b"}, Switch: "sw-c", Addr: "10.0.0.3:7010", End: true}},
		{"ProbeReply/pending", &ProbeReply{ID: 1, Hops: 1, Path: []string{"sw-a"}, Switch: "sw-b", Pending: true}},
		{"ProbeReply/extreme", &ProbeReply{ID: math.MaxUint64, Hops: MaxHops, Path: []string{"", "スイッチ", long}, Switch: long, Addr: long, End: true, Pending: true}},
		{"Leave/zero", &Leave{}},
		{"Leave/realistic", &Leave{Parent: "10.0.0.1:7010"}},
	}, append(s3Samples(), s2Samples()...)...)
}

// normal returns m as Decode returns it: every empty list nil.
func normal(m Message) Message {
	nilEmpty := func(ns []string) []string {
		if len(ns) == 0 {
			return nil
		}
		return ns
	}
	nilNodes := func(ns []OverlayNode) []OverlayNode {
		if len(ns) == 0 {
			return nil
		}
		return ns
	}
	switch m := m.(type) {
	case *Join:
		c := *m
		c.Rows = nilNodes(m.Rows)
		return &c
	case *JoinReply:
		c := *m
		c.Rows, c.Leaves = nilNodes(m.Rows), nilNodes(m.Leaves)
		return &c
	case *Announce:
		c := *m
		c.Leaves = nilNodes(m.Leaves)
		return &c
	case *LeafSetReply:
		c := *m
		c.Leaves = nilNodes(m.Leaves)
		return &c
	case *Advertise:
		c := *m
		if len(m.Attrs) == 0 {
			c.Attrs = nil
		}
		return &c
	case *Register:
		c := *m
		c.Places = nilEmpty(m.Places)
		return &c
	case *Probe:
		c := *m
		c.Path = nilEmpty(m.Path)
		return &c
	case *ProbeReply:
		c := *m
		c.Path = nilEmpty(m.Path)
		return &c
	}
	return m
}

// encode returns m's frame.
func encode(t testing.TB, m Message) []byte {
	t.Helper()
	frame, err := Encode(m, wire.Limits{})
	require.NoError(t, err)
	return frame
}

// decodeFrame decodes a whole frame, which must be a wire.Control.
func decodeFrame(t testing.TB, frame []byte) (Message, error) {
	t.Helper()
	wm, err := wire.Decode(frame, wire.Limits{})
	require.NoError(t, err)
	c, ok := wm.(*wire.Control)
	require.True(t, ok, "a %T frame", wm)
	return Decode(c)
}

func TestRoundTrip(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			frame := encode(t, s.msg)
			require.GreaterOrEqual(t, len(frame), 3)
			assert.Equal(t, []byte{wire.FrameVersion, byte(wire.KindControl), byte(s.msg.Kind())}, frame[:3])

			got, err := decodeFrame(t, frame)
			require.NoError(t, err)
			assert.Equal(t, normal(s.msg), got)
			assert.Equal(t, s.msg.Kind(), got.Kind())

			assert.Equal(t, frame, encode(t, got), "the encoding is canonical")
		})
	}
}

func TestEmptyListsDecodeAsNil(t *testing.T) {
	tests := []struct {
		name  string
		empty Message
		zero  Message
	}{
		{"Register places", &Register{Places: []string{}}, &Register{}},
		{"Probe path", &Probe{Path: []string{}}, &Probe{}},
		{"ProbeReply path", &ProbeReply{Path: []string{}}, &ProbeReply{}},
		{"Join rows", &Join{Rows: []OverlayNode{}}, &Join{}},
		{"JoinReply rows and leaves", &JoinReply{Rows: []OverlayNode{}, Leaves: []OverlayNode{}}, &JoinReply{}},
		{"Announce leaves", &Announce{Leaves: []OverlayNode{}}, &Announce{}},
		{"LeafSetReply leaves", &LeafSetReply{Leaves: []OverlayNode{}}, &LeafSetReply{}},
		{"Advertise attrs", &Advertise{Attrs: []AttrDetail{}}, &Advertise{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame := encode(t, tt.empty)
			assert.Equal(t, encode(t, tt.zero), frame, "nil and empty encode alike")
			got, err := decodeFrame(t, frame)
			require.NoError(t, err)
			assert.Equal(t, tt.zero, got)
		})
	}
}

func TestDecodeDoesNotKeepBody(t *testing.T) {
	m := &ProbeReply{ID: 9, Hops: 2, Path: []string{"sw-a", "sw-b"}, Switch: "sw-c", Addr: "10.0.0.3:7010"}
	frame := encode(t, m)
	c := &wire.Control{Body: frame[2:]}
	got, err := Decode(c)
	require.NoError(t, err)
	for i := range c.Body {
		c.Body[i] = 0xee
	}
	assert.Equal(t, m, got)
}

// TestGoldenRegister pins the format: if this fails, the encoding changed,
// which needs a new wire.FrameVersion.
func TestGoldenRegister(t *testing.T) {
	m := &Register{Key: 300, Ack: 2, Filter: "{}", TTL: 3, Places: []string{"a", "bc"}}
	want := []byte{
		wire.FrameVersion, byte(wire.KindControl),
		0x04,       // KindRegister
		0xac, 0x02, // Key 300
		0x02,           // Ack 2
		0x02, '{', '}', // Filter
		0x06,      // TTL zigzag(3) = 6
		0x02,      // 2 places
		0x01, 'a', // "a"
		0x02, 'b', 'c', // "bc"
	}
	assert.Equal(t, want, encode(t, m))
	got, err := decodeFrame(t, want)
	require.NoError(t, err)
	assert.Equal(t, m, got)
}

func TestTruncatedBodiesFail(t *testing.T) {
	for _, s := range samples() {
		if strings.HasSuffix(s.name, "/extreme") {
			continue // long: every prefix of the others covers the same fields
		}
		t.Run(s.name, func(t *testing.T) {
			body := encode(t, s.msg)[2:]
			for i := range len(body) {
				m, err := Decode(&wire.Control{Body: body[:i:i]})
				assert.Nil(t, m)
				assert.ErrorIs(t, err, ErrMalformed, "prefix of %d bytes", i)
			}
		})
	}
}

// body hand-writes bodies for the malformed cases. Every method returns a
// new body, so that one prefix can start many cases.
type body []byte

func newBody(k Kind) body { return body{byte(k)} }

func (b body) u(v uint64) body        { return binary.AppendUvarint(slices.Clip(b), v) }
func (b body) z(v int64) body         { return binary.AppendVarint(slices.Clip(b), v) }
func (b body) raw(p ...byte) body     { return append(slices.Clip(b), p...) }
func (b body) s(s string) body        { return append(b.u(uint64(len(s))), s...) }
func (b body) control() *wire.Control { return &wire.Control{Body: b} }

// register appends a Register's fields up to its places.
func (b body) register(ttl int64) body { return b.u(1).u(2).s("{}").z(ttl) }

// names appends a list of names.
func (b body) names(ns ...string) body {
	b = b.u(uint64(len(ns))) // a new body: appending to it is safe
	for _, n := range ns {
		b = append(binary.AppendUvarint(b, uint64(len(n))), n...)
	}
	return b
}

// emptyNames returns n empty names.
func emptyNames(n int) []string { return make([]string, n) }

func TestDecodeMalformed(t *testing.T) {
	reg := newBody(KindRegister).register(3) // up to places
	probe := newBody(KindProbe).u(1).z(2).z(DirAll)
	reply := newBody(KindProbeReply).u(1).z(2)
	tests := []struct {
		name  string
		body  []byte
		kind  Kind
		field string
		off   int
		text  string // the whole error text
	}{
		{"nil body", nil, 0, "kind", 0, "linkctl: malformed message: kind: empty body at offset 0"},
		{"empty body", []byte{}, 0, "kind", 0, "linkctl: malformed message: kind: empty body at offset 0"},
		{"kind 0", []byte{0}, 0, "kind", 0, "linkctl: malformed message: kind: unknown kind 0 at offset 0"},
		{"kind 30", []byte{30, 0}, 0, "kind", 0, "linkctl: malformed message: kind: unknown kind 30 at offset 0"},
		{"bypass end class level 0", []byte{22, 0}, KindBypassEnd, "class level", 1, "linkctl: malformed bypass end message: class level: value 0 out of range 1…3 at offset 1"},
		{"overlay link place truncated", []byte{21, 0}, KindOverlayLink, "place", 2, "linkctl: malformed overlay link message: place: truncated varint at offset 2"},
		{"kind 255", []byte{255}, 0, "kind", 0, "linkctl: malformed message: kind: unknown kind 255 at offset 0"},
		{"trailing byte after synced", newBody(KindSynced).raw(0), KindSynced, "end", 1, "linkctl: malformed synced message: end: 1 trailing bytes at offset 1"},
		{"trailing bytes after release", newBody(KindRelease).u(7).raw(1, 2), KindRelease, "end", 2, "linkctl: malformed release message: end: 2 trailing bytes at offset 2"},
		{"truncated varint", newBody(KindRelease).raw(0x80), KindRelease, "key", 1, "linkctl: malformed release message: key: truncated varint at offset 1"},
		{"non-minimal varint", newBody(KindRelease).raw(0x80, 0x00), KindRelease, "key", 1, "linkctl: malformed release message: key: non-minimal varint at offset 1"},
		{"non-minimal 10-byte varint", newBody(KindAck).raw(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00).s(""), KindAck, "ack", 1, "linkctl: malformed ack message: ack: non-minimal varint at offset 1"},
		{"varint overflows", newBody(KindMarker).raw(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02), KindMarker, "ack", 1, "linkctl: malformed marker message: ack: varint overflows 64 bits at offset 1"},
		{"11-byte varint", newBody(KindProbe).raw(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01), KindProbe, "id", 1, "linkctl: malformed probe message: id: varint longer than 10 bytes at offset 1"},
		{"non-minimal sint", newBody(KindMarker).u(1).raw(0x86, 0x00).z(0), KindMarker, "ttl", 2, "linkctl: malformed marker message: ttl: non-minimal varint at offset 2"},
		{"register TTL 65536", newBody(KindRegister).register(MaxHops + 1).u(0), KindRegister, "ttl", 6, "linkctl: malformed register message: ttl: value 65536 out of range 0…65535 at offset 6"},
		{"register TTL -1", newBody(KindRegister).register(-1).u(0), KindRegister, "ttl", 6, "linkctl: malformed register message: ttl: value -1 out of range 0…65535 at offset 6"},
		{"register TTL min int64", newBody(KindRegister).register(math.MinInt64).u(0), KindRegister, "ttl", 6, "value -9223372036854775808 out of range"},
		{"marker TTL 65536", newBody(KindMarker).u(1).z(MaxHops + 1).z(0), KindMarker, "ttl", 2, "linkctl: malformed marker message: ttl: value 65536 out of range 0…65535 at offset 2"},
		{"marker gateways -1", newBody(KindMarker).u(1).z(0).z(-1), KindMarker, "gateways", 3, "linkctl: malformed marker message: gateways: value -1 out of range 0…65535 at offset 3"},
		{"probe hops 65536", newBody(KindProbe).u(1).z(MaxHops + 1).z(0).u(0), KindProbe, "hops", 2, "linkctl: malformed probe message: hops: value 65536 out of range 0…65535 at offset 2"},
		{"probe hops -1", newBody(KindProbe).u(1).z(-1).z(0).u(0), KindProbe, "hops", 2, "linkctl: malformed probe message: hops: value -1 out of range"},
		{"probe dir 3", newBody(KindProbe).u(1).z(1).z(3).u(0), KindProbe, "dir", 3, "linkctl: malformed probe message: dir: value 3 out of range 0…2 at offset 3"},
		{"probe dir -1", newBody(KindProbe).u(1).z(1).z(-1).u(0), KindProbe, "dir", 3, "linkctl: malformed probe message: dir: value -1 out of range 0…2 at offset 3"},
		{"probe reply hops 65536", newBody(KindProbeReply).u(1).z(MaxHops+1).u(0).s("").s("").raw(0, 0), KindProbeReply, "hops", 2, "linkctl: malformed probe reply message: hops: value 65536 out of range"},
		{"link request link -1", newBody(KindLinkRequest).s("a").s("p").z(-1).s("").raw(0).s(""), KindLinkRequest, "link", 5, "linkctl: malformed link request message: link: negative value -1 at offset 5"},
		{"federate link -1", newBody(KindFederate).s("").s("").s("").z(-1).raw(1, 0), KindFederate, "link", 4, "linkctl: malformed federate message: link: negative value -1 at offset 4"},
		{"link request merge byte 2", newBody(KindLinkRequest).s("a").s("p").z(1).s("").raw(2).s(""), KindLinkRequest, "merge", 7, "linkctl: malformed link request message: merge: bool byte 2 at offset 7"},
		{"federate import byte 0xff", newBody(KindFederate).s("").s("").s("").z(0).raw(0xff, 0), KindFederate, "import", 5, "linkctl: malformed federate message: import: bool byte 255 at offset 5"},
		{"federate export truncated", newBody(KindFederate).s("").s("").s("").z(0).raw(1), KindFederate, "export", 6, "linkctl: malformed federate message: export: truncated at offset 6"},
		{"probe reply end byte 2", newBody(KindProbeReply).u(1).z(1).u(0).s("").s("").raw(2, 0), KindProbeReply, "end", 6, "linkctl: malformed probe reply message: end: bool byte 2 at offset 6"},
		{"probe reply pending byte 2", newBody(KindProbeReply).u(1).z(1).u(0).s("").s("").raw(0, 2), KindProbeReply, "pending", 7, "linkctl: malformed probe reply message: pending: bool byte 2 at offset 7"},
		{"invalid UTF-8 in switch", newBody(KindLinkAccept).s("sw\xff").s(""), KindLinkAccept, "switch", 1, "linkctl: malformed link accept message: switch: invalid UTF-8 at offset 1"},
		{"invalid UTF-8 in place", newBody(KindLinkRequest).s("").s("\xc0\x80").z(0).s("").raw(0).s(""), KindLinkRequest, "place", 2, "linkctl: malformed link request message: place: invalid UTF-8 at offset 2"},
		{"invalid UTF-8 in addr", newBody(KindLinkRequest).s("").s("").z(0).s("\xed\xa0\x80").raw(0).s(""), KindLinkRequest, "addr", 4, "linkctl: malformed link request message: addr: invalid UTF-8 at offset 4"},
		{"invalid UTF-8 in absorb", newBody(KindLinkRequest).s("").s("").z(0).s("").raw(0).s("\xff"), KindLinkRequest, "absorb", 6, "linkctl: malformed link request message: absorb: invalid UTF-8 at offset 6"},
		{"invalid UTF-8 in gateway", newBody(KindFederate).s("").s("").s("\xfe").z(0).raw(1, 1), KindFederate, "gateway", 3, "linkctl: malformed federate message: gateway: invalid UTF-8 at offset 3"},
		{"invalid UTF-8 in filter", newBody(KindRegister).u(1).u(2).s("\xff").z(0).u(0), KindRegister, "filter", 3, "linkctl: malformed register message: filter: invalid UTF-8 at offset 3"},
		{"invalid UTF-8 in parent", newBody(KindLeave).s("\xff"), KindLeave, "parent", 1, "linkctl: malformed leave message: parent: invalid UTF-8 at offset 1"},
		{"invalid UTF-8 in reply switch", reply.u(0).s("\xff").s("").raw(0, 0), KindProbeReply, "switch", 4, "linkctl: malformed probe reply message: switch: invalid UTF-8 at offset 4"},
		{"length beyond the end", newBody(KindLeave).u(1 << 62), KindLeave, "parent", 1, "linkctl: malformed leave message: parent: length 4611686018427387904 exceeds remaining 0 bytes at offset 1"},
		{"ack error length beyond the end", newBody(KindAck).u(1).u(5).raw('a'), KindAck, "error", 2, "linkctl: malformed ack message: error: length 5 exceeds remaining 1 bytes at offset 2"},
		{"places count beyond the end", reg.u(5).s("a").s("b"), KindRegister, "places count", len(reg), fmt.Sprintf("linkctl: malformed register message: places count: count 5 needs at least 1 byte per entry, 4 remain at offset %d", len(reg))},
		{"places count 2^62", reg.u(1 << 62), KindRegister, "places count", len(reg), "count 4611686018427387904 needs at least 1 byte per entry, 0 remain"},
		{"places count over MaxNames", reg.names(emptyNames(MaxNames + 1)...), KindRegister, "places count", len(reg), fmt.Sprintf("linkctl: malformed register message: places count: count 65537 exceeds 65536 at offset %d", len(reg))},
		{"path count over MaxNames", probe.names(emptyNames(MaxNames + 1)...), KindProbe, "path count", len(probe), "path count: count 65537 exceeds 65536"},
		{"places truncated count", reg.raw(0x80), KindRegister, "places count", len(reg), "places count: truncated varint"},
		{"NUL in place", reg.names("kanto", "kan\x00sai"), KindRegister, "places 1", len(reg) + 7, fmt.Sprintf("linkctl: malformed register message: places 1: contains NUL at offset %d", len(reg)+7)},
		{"newline in place", reg.names("kan\nto"), KindRegister, "places 0", len(reg) + 1, fmt.Sprintf("linkctl: malformed register message: places 0: contains a newline at offset %d", len(reg)+1)},
		{"invalid UTF-8 in place", reg.names("ok", "\xff"), KindRegister, "places 1", len(reg) + 4, "places 1: invalid UTF-8"},
		{"place length beyond the end", reg.u(2).s("a").u(5).raw('b'), KindRegister, "places 1", len(reg) + 3, "linkctl: malformed register message: places 1: length 5 exceeds remaining 1 bytes"},
		{"newline in probe path", probe.names("sw-a", "sw-b\n"), KindProbe, "path 1", len(probe) + 6, "linkctl: malformed probe message: path 1: contains a newline"},
		{"NUL in reply path", reply.names("\x00").s("").s("").raw(0, 0), KindProbeReply, "path 0", len(reply) + 1, "linkctl: malformed probe reply message: path 0: contains NUL"},
		{"reply path count beyond the end", reply.u(9).s("").s(""), KindProbeReply, "path count", len(reply), "path count: count 9 needs at least 1 byte per entry, 2 remain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(&wire.Control{Body: tt.body})
			require.Error(t, err)
			assert.Nil(t, m)
			assert.ErrorIs(t, err, ErrMalformed)
			var me *MessageError
			require.ErrorAs(t, err, &me)
			assert.False(t, me.Encoding)
			assert.Equal(t, tt.kind, me.Kind)
			assert.Equal(t, tt.field, me.Field)
			assert.Equal(t, tt.off, me.Offset)
			assert.Contains(t, err.Error(), tt.text)
			assert.True(t, strings.HasPrefix(err.Error(), "linkctl: "), err.Error())
		})
	}
}

func TestDecodeNilControl(t *testing.T) {
	m, err := Decode(nil)
	assert.Nil(t, m)
	assert.ErrorIs(t, err, ErrMalformed)
	assert.EqualError(t, err, "linkctl: malformed message: message: nil *wire.Control at offset 0")
}

func TestMessageError(t *testing.T) {
	_, err := Decode(&wire.Control{Body: newBody(KindRegister).register(3).names("a", "b\nc")})
	var me *MessageError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, &MessageError{Kind: KindRegister, Field: "places 1", Offset: 10, Reason: "contains a newline"}, me)
	assert.Equal(t, "linkctl: malformed register message: places 1: contains a newline at offset 10", err.Error())
	assert.Same(t, ErrMalformed, errors.Unwrap(err))
	assert.False(t, errors.Is(err, wire.ErrMalformed), "linkctl's sentinel is its own")
}

// TestEncodeRefuses checks that Encode refuses what Decode refuses, with
// the same field, offset and reason: body is the frame body Decode
// refuses for the same value.
func TestEncodeRefuses(t *testing.T) {
	reg := newBody(KindRegister).register(3)
	tests := []struct {
		name string
		msg  Message
		body body
		text string
	}{
		{"register TTL -1", &Register{Key: 1, Ack: 2, Filter: "{}", TTL: -1}, newBody(KindRegister).register(-1).u(0), "linkctl: cannot encode register message: ttl: value -1 out of range 0…65535 at offset 6"},
		{"register TTL 65536", &Register{Key: 1, Ack: 2, Filter: "{}", TTL: MaxHops + 1}, newBody(KindRegister).register(MaxHops + 1).u(0), "ttl: value 65536 out of range 0…65535"},
		{"marker TTL -1", &Marker{Ack: 1, TTL: -1}, newBody(KindMarker).u(1).z(-1).z(0), "linkctl: cannot encode marker message: ttl: value -1"},
		{"marker gateways 65536", &Marker{Ack: 1, Gateways: MaxHops + 1}, newBody(KindMarker).u(1).z(0).z(MaxHops + 1), "gateways: value 65536"},
		{"probe hops -1", &Probe{Hops: -1}, newBody(KindProbe).u(0).z(-1).z(0).u(0), "linkctl: cannot encode probe message: hops: value -1"},
		{"probe dir 3", &Probe{Dir: 3}, newBody(KindProbe).u(0).z(0).z(3).u(0), "dir: value 3 out of range 0…2"},
		{"probe reply hops 65536", &ProbeReply{Hops: MaxHops + 1}, newBody(KindProbeReply).u(0).z(MaxHops+1).u(0).s("").s("").raw(0, 0), "hops: value 65536"},
		{"link request link -1", &LinkRequest{Link: -1}, newBody(KindLinkRequest).s("").s("").z(-1).s("").raw(0).s(""), "linkctl: cannot encode link request message: link: negative value -1 at offset 3"},
		{"federate link min", &Federate{Link: math.MinInt64}, newBody(KindFederate).s("").s("").s("").z(math.MinInt64).raw(0, 0), "link: negative value -9223372036854775808"},
		{"invalid UTF-8 in switch", &LinkAccept{Switch: "\xff"}, newBody(KindLinkAccept).s("\xff").s(""), "linkctl: cannot encode link accept message: switch: invalid UTF-8 at offset 1"},
		{"invalid UTF-8 in filter", &Register{Filter: "\xff"}, newBody(KindRegister).u(0).u(0).s("\xff").z(0).u(0), "filter: invalid UTF-8"},
		{"invalid UTF-8 in gateway", &Federate{Gateway: "\xff"}, newBody(KindFederate).s("").s("").s("\xff").z(0).raw(0, 0), "gateway: invalid UTF-8"},
		{"invalid UTF-8 in parent", &Leave{Parent: "\xff"}, newBody(KindLeave).s("\xff"), "parent: invalid UTF-8"},
		{"invalid UTF-8 in absorb", &LinkRequest{Absorb: "\xff"}, newBody(KindLinkRequest).s("").s("").z(0).s("").raw(0).s("\xff"), "absorb: invalid UTF-8"},
		{"invalid UTF-8 in reply addr", &ProbeReply{Addr: "\xff"}, newBody(KindProbeReply).u(0).z(0).u(0).s("").s("\xff").raw(0, 0), "addr: invalid UTF-8"},
		{"NUL in place", &Register{Key: 1, Ack: 2, Filter: "{}", TTL: 3, Places: []string{"kanto", "kan\x00sai"}}, reg.names("kanto", "kan\x00sai"), "linkctl: cannot encode register message: places 1: contains NUL at offset 14"},
		{"newline in path", &Probe{Path: []string{"a\nb"}}, newBody(KindProbe).u(0).z(0).z(0).names("a\nb"), "path 0: contains a newline"},
		{"invalid UTF-8 in reply path", &ProbeReply{Path: []string{"ok", "\xff"}}, newBody(KindProbeReply).u(0).z(0).names("ok", "\xff").s("").s("").raw(0, 0), "path 1: invalid UTF-8"},
		{"places over MaxNames", &Register{Key: 1, Ack: 2, Filter: "{}", TTL: 3, Places: emptyNames(MaxNames + 1)}, reg.names(emptyNames(MaxNames + 1)...), "linkctl: cannot encode register message: places count: count 65537 exceeds 65536 at offset 7"},
		{"path over MaxNames", &ProbeReply{Path: emptyNames(MaxNames + 1)}, newBody(KindProbeReply).u(0).z(0).names(emptyNames(MaxNames+1)...).s("").s("").raw(0, 0), "path count: count 65537 exceeds 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame, err := Encode(tt.msg, wire.Limits{})
			require.Error(t, err)
			assert.Nil(t, frame)
			assert.ErrorIs(t, err, ErrMalformed)
			assert.Contains(t, err.Error(), tt.text)
			var enc *MessageError
			require.ErrorAs(t, err, &enc)
			assert.True(t, enc.Encoding)
			assert.Equal(t, tt.msg.Kind(), enc.Kind)

			_, err = Decode(tt.body.control())
			var dec *MessageError
			require.ErrorAs(t, err, &dec, "Decode refuses the same body")
			dec.Encoding = true
			assert.Equal(t, dec, enc, "the same field, offset and reason")
		})
	}
}

func TestEncodeNil(t *testing.T) {
	tests := []struct {
		name string
		msg  Message
		text string
	}{
		{"nil Message", nil, "linkctl: cannot encode message: message: nil Message at offset 0"},
		{"nil *Register", (*Register)(nil), "linkctl: cannot encode register message: message: nil pointer at offset 0"},
		{"nil *Synced", (*Synced)(nil), "linkctl: cannot encode synced message: message: nil pointer at offset 0"},
		{"nil *ProbeReply", (*ProbeReply)(nil), "linkctl: cannot encode probe reply message: message: nil pointer at offset 0"},
		{"nil *Join", (*Join)(nil), "linkctl: cannot encode join message: message: nil pointer at offset 0"},
		{"nil *LeafSetRequest", (*LeafSetRequest)(nil), "linkctl: cannot encode leaf set request message: message: nil pointer at offset 0"},
		{"nil *BranchPoint", (*BranchPoint)(nil), "linkctl: cannot encode branch point message: message: nil pointer at offset 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame, err := Encode(tt.msg, wire.Limits{})
			assert.Nil(t, frame)
			assert.ErrorIs(t, err, ErrMalformed)
			assert.EqualError(t, err, tt.text)
		})
	}
}

// TestFrameLimit checks that Encode keeps the frame within
// wire.Limits.MaxFrameBytes and refuses a longer one with wire's error.
func TestFrameLimit(t *testing.T) {
	at := &Register{Filter: strings.Repeat("x", 100)}
	n := len(encode(t, at))
	lim := wire.Limits{MaxFrameBytes: n}

	frame, err := Encode(at, lim)
	require.NoError(t, err, "at the limit")
	_, err = wire.Decode(frame, lim)
	require.NoError(t, err, "at the limit")

	over := &Register{Filter: strings.Repeat("x", 101)}
	frame, err = Encode(over, lim)
	assert.Nil(t, frame)
	assert.ErrorIs(t, err, wire.ErrTooLarge)
	assert.NotErrorIs(t, err, ErrMalformed)
	var fe *wire.FrameError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, wire.KindControl, fe.Kind)
	_, err = wire.Decode(encode(t, over), lim)
	assert.ErrorIs(t, err, wire.ErrTooLarge, "what Encode refuses, wire.Decode refuses")

	_, err = Encode(&Probe{Path: manyNames(MaxNames)}, wire.Limits{MaxFrameBytes: 1 << 10})
	assert.ErrorIs(t, err, wire.ErrTooLarge)
}

// TestShortBodyAllocatesLittle checks that counts and lengths are checked
// against the bytes remaining before anything is allocated.
func TestShortBodyAllocatesLittle(t *testing.T) {
	tests := []struct {
		name string
		body body
	}{
		{"places count", newBody(KindRegister).register(0).u(1 << 28)},
		{"path count at the limit", newBody(KindProbe).u(0).z(0).z(0).u(MaxNames).raw(0, 0)},
		{"reply path count", newBody(KindProbeReply).u(0).z(0).u(1 << 40)},
		{"filter length", newBody(KindRegister).u(0).u(0).u(1 << 28)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const runs = 100
			c := tt.body.control()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range runs {
				_, err := Decode(c)
				assert.ErrorIs(t, err, ErrMalformed)
			}
			runtime.ReadMemStats(&after)
			perRun := (after.TotalAlloc - before.TotalAlloc) / runs
			assert.Less(t, perRun, uint64(1<<10), "bytes allocated per Decode of a %d-byte body", len(tt.body))
		})
	}
}

func TestKind(t *testing.T) {
	names := []string{"link request", "link accept", "federate", "register", "release", "marker", "ack", "synced", "probe", "probe reply", "leave",
		"join", "join reply", "announce", "leaf set request", "leaf set reply", "advertise", "unadvertise", "path change", "branch point", "overlay link", "bypass end",
		"manage", "model", "model change", "deploy", "bleeder", "detected", "verdict"}
	for i, name := range names {
		k := Kind(i + 1)
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, name, k.String())
			m := newMessage(k)
			require.NotNil(t, m)
			assert.Equal(t, k, m.Kind())
		})
	}
	for _, k := range []Kind{0, 30, 255} {
		t.Run(k.String(), func(t *testing.T) {
			assert.Equal(t, fmt.Sprintf("Kind(%d)", k), k.String())
			assert.Nil(t, newMessage(k))
		})
	}
	kinds := make([]Kind, 0, len(names))
	for _, s := range samples() {
		if !slices.Contains(kinds, s.msg.Kind()) {
			kinds = append(kinds, s.msg.Kind())
		}
	}
	assert.Len(t, kinds, len(names), "samples cover every kind")
}

func TestConcurrentUse(t *testing.T) {
	m := &ProbeReply{ID: 9, Hops: 2, Path: []string{"sw-a", "sw-b"}, Switch: "sw-c", Addr: "10.0.0.3:7010", End: true}
	want := encode(t, m)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				frame, err := Encode(m, wire.Limits{})
				assert.NoError(t, err)
				assert.Equal(t, want, frame)
				got, err := Decode(&wire.Control{Body: want[2:]})
				assert.NoError(t, err)
				assert.Equal(t, m, got)
			}
		})
	}
	wg.Wait()
}

func BenchmarkRegister(b *testing.B) {
	m := &Register{Key: 1042, Ack: 88017, Filter: `{type ⊑ music.BGM} && tempo >= 120 && licensed`, TTL: 7, Places: []string{"kanto", "kansai"}}
	frame := encode(b, m)
	b.Run("Encode", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Encode(m, wire.Limits{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Decode", func(b *testing.B) {
		c := &wire.Control{Body: frame[2:]}
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

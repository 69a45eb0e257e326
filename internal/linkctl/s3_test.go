package linkctl

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/internal/wire"
)

// idOf returns an overlay ID whose bytes count up from b.
func idOf(b byte) (id [IDLen]byte) {
	for i := range id {
		id[i] = b + byte(i)
	}
	return id
}

// manyNodes returns n distinct overlay nodes.
func manyNodes(n int) []OverlayNode {
	ns := make([]OverlayNode, n)
	for i := range ns {
		ns[i].ID[0], ns[i].ID[1], ns[i].ID[15] = byte(i>>8), byte(i), 0xff
		ns[i].Addr = fmt.Sprintf("10.%d.%d.1:7010", byte(i>>8), byte(i))
	}
	return ns
}

// manyAttrs returns n attribute details.
func manyAttrs(n int) []AttrDetail {
	as := make([]AttrDetail, n)
	for i := range as {
		as[i] = AttrDetail{Name: fmt.Sprint("a", i), Value: fmt.Sprint(i)}
	}
	return as
}

var (
	nodeA = OverlayNode{ID: idOf(0xa0), Addr: "10.0.0.1:7010"}
	nodeB = OverlayNode{ID: idOf(0xb0), Addr: "10.0.0.2:7010"}
	nodeC = OverlayNode{ID: idOf(0xc0), Addr: "[::1]:7010"}
	allFF = [IDLen]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// s3Samples returns messages of every S3 kind, as samples does.
func s3Samples() []sample {
	long := strings.Repeat("長", 2000)
	bgm := ClassRef{Level: LevelType, Type: "music.BGM"}
	jazz := ClassRef{Level: LevelFirstAttr, Type: "music.BGM", Attr: "genre", Value: "jazz"}
	return []sample{
		{"Join/zero", &Join{}},
		{"Join/first hop", &Join{Key: nodeC.ID, Joiner: nodeC.ID, JoinerAddr: nodeC.Addr}},
		{"Join/realistic", &Join{Key: nodeC.ID, Joiner: nodeC.ID, JoinerAddr: nodeC.Addr, Hops: 2, Rows: []OverlayNode{nodeA, nodeB}}},
		{"Join/empty rows", &Join{Rows: []OverlayNode{}}},
		{"Join/extreme", &Join{Key: allFF, Joiner: allFF, JoinerAddr: long, Hops: MaxHops, Rows: append(manyNodes(1000), OverlayNode{ID: allFF, Addr: long}, OverlayNode{})}},
		{"JoinReply/zero", &JoinReply{}},
		{"JoinReply/realistic", &JoinReply{Joiner: nodeC.ID, Rows: []OverlayNode{nodeA}, Leaves: []OverlayNode{nodeA, nodeB}}},
		{"JoinReply/empty lists", &JoinReply{Rows: []OverlayNode{}, Leaves: []OverlayNode{}}},
		{"JoinReply/extreme", &JoinReply{Joiner: allFF, Rows: manyNodes(2000), Leaves: manyNodes(2000)}},
		{"Announce/zero", &Announce{}},
		{"OverlayLink/zero", &OverlayLink{}},
		{"BypassEnd/toward the merge point", &BypassEnd{Class: bgm, Seq: 3, Ack: 17}},
		{"BypassEnd/toward the rendezvous switch", &BypassEnd{Class: ClassRef{Level: LevelFirstAttr, Type: "music.BGM", Attr: "artist", Value: "x"}, Seq: math.MaxUint64}},
		{"OverlayLink/node", &OverlayLink{Switch: "b23", Place: "fig2", Node: nodeC}},
		{"Announce/here", &Announce{Node: nodeC}},
		{"Announce/leaving", &Announce{Node: nodeC, Leaving: true, Leaves: []OverlayNode{nodeA, nodeB}}},
		{"Announce/extreme", &Announce{Node: OverlayNode{ID: allFF, Addr: long}, Leaving: true, Leaves: manyNodes(2000)}},
		{"LeafSetRequest", &LeafSetRequest{}},
		{"LeafSetReply/zero", &LeafSetReply{}},
		{"LeafSetReply/realistic", &LeafSetReply{Leaves: []OverlayNode{nodeA, nodeB, nodeC}}},
		{"LeafSetReply/empty", &LeafSetReply{Leaves: []OverlayNode{}}},
		{"LeafSetReply/extreme", &LeafSetReply{Leaves: manyNodes(4000)}},
		{"Advertise/zero", &Advertise{}},
		{"Advertise/realistic", &Advertise{Key: 3, Ack: 90, Type: "music.BGM", Attrs: []AttrDetail{{"genre", "jazz"}, {"tempo", "120"}}}},
		{"Advertise/empty attrs", &Advertise{Attrs: []AttrDetail{}}},
		{"Advertise/any text", &Advertise{Type: "型\x00\n", Attrs: []AttrDetail{{"", ""}, {"名\n", "値\x00"}}}},
		{"Advertise/extreme", &Advertise{Key: math.MaxUint64, Ack: math.MaxUint64, Type: long, Attrs: manyAttrs(MaxNames)}},
		{"Unadvertise/zero", &Unadvertise{}},
		{"Unadvertise/max", &Unadvertise{Key: math.MaxUint64}},
		{"PathChange/downstream", &PathChange{Class: bgm, Seq: 1}},
		{"PathChange/upstream with branch", &PathChange{Class: jazz, Direction: Upstream, Branch: nodeB.ID, BranchAddr: nodeB.Addr, Seq: 7}},
		{"PathChange/extreme", &PathChange{Class: ClassRef{Level: LevelLeafAttr, Type: long, Attr: long, Value: long}, Direction: Upstream, Branch: allFF, BranchAddr: long, Seq: math.MaxUint64}},
		{"BranchPoint/type", &BranchPoint{Class: bgm, Seq: 1, Node: nodeB}},
		{"BranchPoint/leaf attr", &BranchPoint{Class: ClassRef{Level: LevelLeafAttr, Type: "music.BGM", Attr: "artist", Value: ""}, Seq: 8}},
		{"BranchPoint/extreme", &BranchPoint{Class: ClassRef{Level: LevelLeafAttr, Type: long, Attr: long, Value: long}, Seq: math.MaxUint64, Node: OverlayNode{ID: allFF, Addr: long}}},
	}
}

// s3Seeds returns a realistic message of every S3 kind, for FuzzDecode.
func s3Seeds() []Message {
	return []Message{
		&Join{Key: nodeC.ID, Joiner: nodeC.ID, JoinerAddr: nodeC.Addr, Hops: 2, Rows: []OverlayNode{nodeA, nodeB}},
		&JoinReply{Joiner: nodeC.ID, Rows: []OverlayNode{nodeA}, Leaves: []OverlayNode{nodeA, nodeB}},
		&Announce{Node: nodeC, Leaving: true, Leaves: []OverlayNode{nodeA, nodeB}},
		&LeafSetRequest{},
		&LeafSetReply{Leaves: []OverlayNode{nodeA, nodeB, nodeC}},
		&Advertise{Key: 3, Ack: 90, Type: "music.BGM", Attrs: []AttrDetail{{"genre", "jazz"}, {"tempo", "120"}}},
		&Unadvertise{Key: 3},
		&PathChange{Class: ClassRef{Level: LevelFirstAttr, Type: "music.BGM", Attr: "genre", Value: "jazz"}, Direction: Upstream, Branch: nodeB.ID, BranchAddr: nodeB.Addr, Seq: 7},
		&BranchPoint{Class: ClassRef{Level: LevelType, Type: "music.BGM"}, Seq: 1, Node: nodeB},
	}
}

func (b body) id(id [IDLen]byte) body  { return b.raw(id[:]...) }
func (b body) node(n OverlayNode) body { return b.id(n.ID).s(n.Addr) }

// nodeList appends a list of overlay nodes.
func (b body) nodeList(ns ...OverlayNode) body {
	b = b.u(uint64(len(ns))) // a new body: appending to it is safe
	for _, n := range ns {
		b = append(b, n.ID[:]...)
		b = append(binary.AppendUvarint(b, uint64(len(n.Addr))), n.Addr...)
	}
	return b
}

// attrList appends a list of attribute details, given as name, value,
// name, value….
func (b body) attrList(nv ...string) body {
	b = b.u(uint64(len(nv) / 2)) // a new body: appending to it is safe
	for _, s := range nv {
		b = append(binary.AppendUvarint(b, uint64(len(s))), s...)
	}
	return b
}

func (b body) class(level byte, typ, attr, value string) body {
	return b.raw(level).s(typ).s(attr).s(value)
}

func TestDecodeMalformedS3(t *testing.T) {
	var zero [IDLen]byte
	short := make([]byte, 15)
	join := newBody(KindJoin).id(nodeC.ID).id(nodeC.ID).s("x").z(2) // up to rows
	adv := newBody(KindAdvertise).u(5).u(6).s("music.BGM")          // up to attrs
	pc := newBody(KindPathChange).class(2, "music.BGM", "genre", "jazz")
	bp := newBody(KindBranchPoint).class(1, "music.BGM", "", "").u(9)
	ann := newBody(KindAnnounce).node(nodeA).raw(1) // up to leaves
	tests := []struct {
		name  string
		body  []byte
		kind  Kind
		field string
		off   int
		text  string // the whole error text, or a part of it
	}{
		{"join key truncated", newBody(KindJoin).raw(1, 2, 3), KindJoin, "key", 1, "linkctl: malformed join message: key: truncated ID: 3 of 16 bytes at offset 1"},
		{"join key empty", newBody(KindJoin), KindJoin, "key", 1, "key: truncated ID: 0 of 16 bytes"},
		{"join joiner truncated", newBody(KindJoin).id(zero).raw(short...), KindJoin, "joiner", 17, "linkctl: malformed join message: joiner: truncated ID: 15 of 16 bytes at offset 17"},
		{"join joiner addr invalid UTF-8", newBody(KindJoin).id(zero).id(zero).s("\xff").z(0).u(0), KindJoin, "joiner addr", 33, "linkctl: malformed join message: joiner addr: invalid UTF-8 at offset 33"},
		{"join hops 65536", newBody(KindJoin).id(zero).id(zero).s("").z(MaxHops + 1).u(0), KindJoin, "hops", 34, "linkctl: malformed join message: hops: value 65536 out of range 0…65535 at offset 34"},
		{"join hops -1", newBody(KindJoin).id(zero).id(zero).s("").z(-1).u(0), KindJoin, "hops", 34, "hops: value -1 out of range 0…65535"},
		{"join rows count beyond the end", join.u(2).node(nodeA), KindJoin, "rows count", len(join), fmt.Sprintf("linkctl: malformed join message: rows count: count 2 needs at least 17 bytes per entry, 30 remain at offset %d", len(join))},
		{"join rows count 2^62", join.u(1 << 62), KindJoin, "rows count", len(join), "rows count: count 4611686018427387904 needs at least 17 bytes per entry, 0 remain"},
		{"join rows over MaxNames", join.nodeList(make([]OverlayNode, MaxNames+1)...), KindJoin, "rows count", len(join), "rows count: count 65537 exceeds 65536"},
		{"join rows truncated count", join.raw(0x80), KindJoin, "rows count", len(join), "rows count: truncated varint"},
		{"join rows 1 ID truncated", join.u(2).node(nodeA).raw(1, 2, 3, 4, 5, 6, 7, 8), KindJoin, "rows 1 id", len(join) + 31, fmt.Sprintf("linkctl: malformed join message: rows 1 id: truncated ID: 8 of 16 bytes at offset %d", len(join)+31)},
		{"join rows 0 addr invalid UTF-8", join.nodeList(OverlayNode{ID: nodeA.ID, Addr: "\xff"}), KindJoin, "rows 0 addr", len(join) + 17, "rows 0 addr: invalid UTF-8"},
		{"join rows 0 addr beyond the end", join.u(1).id(nodeA.ID).u(5).raw('x'), KindJoin, "rows 0 addr", len(join) + 17, "rows 0 addr: length 5 exceeds remaining 1 bytes"},
		{"join rows 0 addr truncated length", join.u(1).id(nodeA.ID).raw(0x80), KindJoin, "rows 0 addr", len(join) + 17, "rows 0 addr: truncated varint"},
		{"join reply rows 0 addr invalid UTF-8", newBody(KindJoinReply).id(zero).nodeList(OverlayNode{Addr: "\xc0\x80"}).u(0), KindJoinReply, "rows 0 addr", 34, "linkctl: malformed join reply message: rows 0 addr: invalid UTF-8 at offset 34"},
		{"join reply leaves truncated count", newBody(KindJoinReply).id(zero).u(0).raw(0x80), KindJoinReply, "leaves count", 18, "linkctl: malformed join reply message: leaves count: truncated varint at offset 18"},
		{"join reply trailing byte", newBody(KindJoinReply).id(zero).u(0).u(0).raw(0), KindJoinReply, "end", 19, "end: 1 trailing bytes"},
		{"announce node ID truncated", newBody(KindAnnounce).raw(1, 2), KindAnnounce, "node id", 1, "linkctl: malformed announce message: node id: truncated ID: 2 of 16 bytes at offset 1"},
		{"announce node addr invalid UTF-8", newBody(KindAnnounce).id(zero).s("\xff").raw(0).u(0), KindAnnounce, "node addr", 17, "linkctl: malformed announce message: node addr: invalid UTF-8 at offset 17"},
		{"announce leaving byte 2", newBody(KindAnnounce).node(nodeA).raw(2).u(0), KindAnnounce, "leaving", 31, "linkctl: malformed announce message: leaving: bool byte 2 at offset 31"},
		{"announce leaving truncated", newBody(KindAnnounce).node(nodeA), KindAnnounce, "leaving", 31, "leaving: truncated"},
		{"announce leaves 1 addr invalid UTF-8", ann.nodeList(nodeB, OverlayNode{Addr: "a\xffb"}), KindAnnounce, "leaves 1 addr", len(ann) + 1 + 30 + 16, "leaves 1 addr: invalid UTF-8"},
		{"trailing byte after leaf set request", newBody(KindLeafSetRequest).raw(0), KindLeafSetRequest, "end", 1, "linkctl: malformed leaf set request message: end: 1 trailing bytes at offset 1"},
		{"leaf set reply leaves count 2^62", newBody(KindLeafSetReply).u(1 << 62), KindLeafSetReply, "leaves count", 1, "linkctl: malformed leaf set reply message: leaves count: count 4611686018427387904 needs at least 17 bytes per entry, 0 remain at offset 1"},
		{"leaf set reply trailing byte", newBody(KindLeafSetReply).nodeList(nodeA).raw(7), KindLeafSetReply, "end", 32, "end: 1 trailing bytes"},
		{"advertise key truncated", newBody(KindAdvertise).raw(0xff), KindAdvertise, "key", 1, "linkctl: malformed advertise message: key: truncated varint at offset 1"},
		{"advertise type invalid UTF-8", newBody(KindAdvertise).u(5).u(6).s("\xff").u(0), KindAdvertise, "type", 3, "linkctl: malformed advertise message: type: invalid UTF-8 at offset 3"},
		{"advertise attrs count beyond the end", adv.u(3).s("a").s("b"), KindAdvertise, "attrs count", len(adv), fmt.Sprintf("linkctl: malformed advertise message: attrs count: count 3 needs at least 2 bytes per entry, 4 remain at offset %d", len(adv))},
		{"advertise attrs over MaxNames", adv.attrList(make([]string, 2*(MaxNames+1))...), KindAdvertise, "attrs count", len(adv), "attrs count: count 65537 exceeds 65536"},
		{"advertise attrs 1 name invalid UTF-8", adv.attrList("tempo", "120", "\xff", "x"), KindAdvertise, "attrs 1 name", len(adv) + 11, fmt.Sprintf("linkctl: malformed advertise message: attrs 1 name: invalid UTF-8 at offset %d", len(adv)+11)},
		{"advertise attrs 0 value invalid UTF-8", adv.attrList("tempo", "\xed\xa0\x80"), KindAdvertise, "attrs 0 value", len(adv) + 7, "attrs 0 value: invalid UTF-8"},
		{"advertise attrs 0 value beyond the end", adv.u(1).s("tempo").u(9).raw('1'), KindAdvertise, "attrs 0 value", len(adv) + 7, "attrs 0 value: length 9 exceeds remaining 1 bytes"},
		{"unadvertise non-minimal varint", newBody(KindUnadvertise).raw(0x81, 0x00), KindUnadvertise, "key", 1, "linkctl: malformed unadvertise message: key: non-minimal varint at offset 1"},
		{"unadvertise trailing byte", newBody(KindUnadvertise).u(1).raw(0), KindUnadvertise, "end", 2, "end: 1 trailing bytes"},
		{"path change level truncated", newBody(KindPathChange), KindPathChange, "class level", 1, "linkctl: malformed path change message: class level: truncated at offset 1"},
		{"path change level 0", newBody(KindPathChange).class(0, "t", "", "").raw(0).id(zero).s("").u(1), KindPathChange, "class level", 1, "linkctl: malformed path change message: class level: value 0 out of range 1…3 at offset 1"},
		{"path change level 4", newBody(KindPathChange).class(4, "t", "", "").raw(0).id(zero).s("").u(1), KindPathChange, "class level", 1, "class level: value 4 out of range 1…3"},
		{"path change level 255", newBody(KindPathChange).class(255, "t", "", "").raw(0).id(zero).s("").u(1), KindPathChange, "class level", 1, "class level: value 255 out of range 1…3"},
		{"path change class type invalid UTF-8", newBody(KindPathChange).class(1, "\xff", "", "").raw(0).id(zero).s("").u(1), KindPathChange, "class type", 2, "class type: invalid UTF-8"},
		{"path change class attr invalid UTF-8", newBody(KindPathChange).class(2, "t", "\xff", "").raw(0).id(zero).s("").u(1), KindPathChange, "class attr", 4, "class attr: invalid UTF-8"},
		{"path change class value invalid UTF-8", newBody(KindPathChange).class(3, "t", "a", "\xff").raw(0).id(zero).s("").u(1), KindPathChange, "class value", 6, "class value: invalid UTF-8"},
		{"path change direction 2", pc.raw(2).id(zero).s("").u(1), KindPathChange, "direction", len(pc), fmt.Sprintf("linkctl: malformed path change message: direction: value 2 out of range 0…1 at offset %d", len(pc))},
		{"path change direction truncated", pc, KindPathChange, "direction", len(pc), "direction: truncated"},
		{"path change branch truncated", pc.raw(1).raw(1, 2, 3, 4), KindPathChange, "branch", len(pc) + 1, "branch: truncated ID: 4 of 16 bytes"},
		{"path change branch addr invalid UTF-8", pc.raw(0).id(zero).s("\xff").u(1), KindPathChange, "branch addr", len(pc) + 17, "branch addr: invalid UTF-8"},
		{"path change seq truncated", pc.raw(0).id(zero).s(""), KindPathChange, "seq", len(pc) + 18, "seq: truncated varint"},
		{"branch point level 4", newBody(KindBranchPoint).class(4, "t", "", "").u(1).node(nodeA), KindBranchPoint, "class level", 1, "linkctl: malformed branch point message: class level: value 4 out of range 1…3 at offset 1"},
		{"branch point seq overflows", newBody(KindBranchPoint).class(1, "t", "", "").raw(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02), KindBranchPoint, "seq", 6, "seq: varint overflows 64 bits"},
		{"branch point node ID truncated", bp.raw(1), KindBranchPoint, "node id", len(bp), "node id: truncated ID: 1 of 16 bytes"},
		{"branch point node addr invalid UTF-8", bp.id(zero).s("\xff"), KindBranchPoint, "node addr", len(bp) + 16, fmt.Sprintf("linkctl: malformed branch point message: node addr: invalid UTF-8 at offset %d", len(bp)+16)},
		{"branch point trailing byte", bp.node(nodeA).raw(0), KindBranchPoint, "end", len(bp) + 30, "end: 1 trailing bytes"},
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
		})
	}
}

// TestEncodeRefusesS3 is TestEncodeRefuses for the S3 messages.
func TestEncodeRefusesS3(t *testing.T) {
	var zero [IDLen]byte
	bgm := ClassRef{Level: LevelType, Type: "music.BGM"}
	pcBody := func(c body) body { return c.raw(0).id(zero).s("").u(0) }
	tests := []struct {
		name string
		msg  Message
		body body
		text string
	}{
		{"join hops -1", &Join{Key: nodeC.ID, Joiner: nodeC.ID, Hops: -1}, newBody(KindJoin).id(nodeC.ID).id(nodeC.ID).s("").z(-1).u(0), "linkctl: cannot encode join message: hops: value -1 out of range 0…65535 at offset 34"},
		{"join hops 65536", &Join{Hops: MaxHops + 1}, newBody(KindJoin).id(zero).id(zero).s("").z(MaxHops + 1).u(0), "hops: value 65536"},
		{"join joiner addr invalid UTF-8", &Join{JoinerAddr: "\xff"}, newBody(KindJoin).id(zero).id(zero).s("\xff").z(0).u(0), "linkctl: cannot encode join message: joiner addr: invalid UTF-8 at offset 33"},
		{"join rows 1 addr invalid UTF-8", &Join{Key: nodeC.ID, Joiner: nodeC.ID, JoinerAddr: "x", Hops: 1, Rows: []OverlayNode{nodeA, {ID: nodeB.ID, Addr: "\xff"}}},
			newBody(KindJoin).id(nodeC.ID).id(nodeC.ID).s("x").z(1).nodeList(nodeA, OverlayNode{ID: nodeB.ID, Addr: "\xff"}), "linkctl: cannot encode join message: rows 1 addr: invalid UTF-8 at offset 83"},
		{"join rows over MaxNames", &Join{Rows: make([]OverlayNode, MaxNames+1)}, newBody(KindJoin).id(zero).id(zero).s("").z(0).nodeList(make([]OverlayNode, MaxNames+1)...), "linkctl: cannot encode join message: rows count: count 65537 exceeds 65536 at offset 35"},
		{"join reply leaves 0 addr invalid UTF-8", &JoinReply{Rows: []OverlayNode{nodeA}, Leaves: []OverlayNode{{Addr: "\xff"}}}, newBody(KindJoinReply).id(zero).nodeList(nodeA).nodeList(OverlayNode{Addr: "\xff"}), "leaves 0 addr: invalid UTF-8"},
		{"join reply rows over MaxNames", &JoinReply{Rows: make([]OverlayNode, MaxNames+1)}, newBody(KindJoinReply).id(zero).nodeList(make([]OverlayNode, MaxNames+1)...).u(0), "rows count: count 65537 exceeds 65536"},
		{"announce node addr invalid UTF-8", &Announce{Node: OverlayNode{ID: nodeA.ID, Addr: "\xff"}}, newBody(KindAnnounce).id(nodeA.ID).s("\xff").raw(0).u(0), "linkctl: cannot encode announce message: node addr: invalid UTF-8 at offset 17"},
		{"announce leaves over MaxNames", &Announce{Node: nodeA, Leaving: true, Leaves: make([]OverlayNode, MaxNames+1)}, newBody(KindAnnounce).node(nodeA).raw(1).nodeList(make([]OverlayNode, MaxNames+1)...), "leaves count: count 65537 exceeds 65536"},
		{"leaf set reply leaves 2 addr invalid UTF-8", &LeafSetReply{Leaves: []OverlayNode{nodeA, nodeB, {Addr: "\xc0\x80"}}}, newBody(KindLeafSetReply).nodeList(nodeA, nodeB, OverlayNode{Addr: "\xc0\x80"}), "linkctl: cannot encode leaf set reply message: leaves 2 addr: invalid UTF-8 at offset 78"},
		{"advertise type invalid UTF-8", &Advertise{Key: 1, Ack: 2, Type: "\xff"}, newBody(KindAdvertise).u(1).u(2).s("\xff").u(0), "linkctl: cannot encode advertise message: type: invalid UTF-8 at offset 3"},
		{"advertise attrs 1 name invalid UTF-8", &Advertise{Type: "t", Attrs: []AttrDetail{{"a", "b"}, {"\xff", "c"}}}, newBody(KindAdvertise).u(0).u(0).s("t").attrList("a", "b", "\xff", "c"), "linkctl: cannot encode advertise message: attrs 1 name: invalid UTF-8 at offset 10"},
		{"advertise attrs 0 value invalid UTF-8", &Advertise{Attrs: []AttrDetail{{"a", "\xff"}}}, newBody(KindAdvertise).u(0).u(0).s("").attrList("a", "\xff"), "attrs 0 value: invalid UTF-8 at offset 7"},
		{"advertise attrs over MaxNames", &Advertise{Attrs: make([]AttrDetail, MaxNames+1)}, newBody(KindAdvertise).u(0).u(0).s("").attrList(make([]string, 2*(MaxNames+1))...), "attrs count: count 65537 exceeds 65536 at offset 4"},
		{"path change zero", &PathChange{}, pcBody(newBody(KindPathChange).class(0, "", "", "")), "linkctl: cannot encode path change message: class level: value 0 out of range 1…3 at offset 1"},
		{"path change level 4", &PathChange{Class: ClassRef{Level: 4, Type: "t"}}, pcBody(newBody(KindPathChange).class(4, "t", "", "")), "class level: value 4 out of range 1…3"},
		{"path change direction 2", &PathChange{Class: bgm, Direction: 2}, newBody(KindPathChange).class(1, "music.BGM", "", "").raw(2).id(zero).s("").u(0), "linkctl: cannot encode path change message: direction: value 2 out of range 0…1 at offset 14"},
		{"path change class type invalid UTF-8", &PathChange{Class: ClassRef{Level: 1, Type: "\xff"}}, pcBody(newBody(KindPathChange).class(1, "\xff", "", "")), "class type: invalid UTF-8 at offset 2"},
		{"path change class attr invalid UTF-8", &PathChange{Class: ClassRef{Level: 2, Type: "t", Attr: "\xff"}}, pcBody(newBody(KindPathChange).class(2, "t", "\xff", "")), "class attr: invalid UTF-8 at offset 4"},
		{"path change class value invalid UTF-8", &PathChange{Class: ClassRef{Level: 3, Type: "t", Attr: "a", Value: "\xff"}}, pcBody(newBody(KindPathChange).class(3, "t", "a", "\xff")), "class value: invalid UTF-8 at offset 6"},
		{"path change branch addr invalid UTF-8", &PathChange{Class: bgm, Direction: Upstream, Branch: nodeB.ID, BranchAddr: "\xff", Seq: 3}, newBody(KindPathChange).class(1, "music.BGM", "", "").raw(1).id(nodeB.ID).s("\xff").u(3), "branch addr: invalid UTF-8 at offset 31"},
		{"branch point zero", &BranchPoint{}, newBody(KindBranchPoint).class(0, "", "", "").u(0).node(OverlayNode{}), "linkctl: cannot encode branch point message: class level: value 0 out of range 1…3 at offset 1"},
		{"branch point node addr invalid UTF-8", &BranchPoint{Class: bgm, Seq: 300, Node: OverlayNode{ID: nodeB.ID, Addr: "\xff"}}, newBody(KindBranchPoint).class(1, "music.BGM", "", "").u(300).id(nodeB.ID).s("\xff"), "node addr: invalid UTF-8 at offset 32"},
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

// TestGoldenS3 pins the format of the S3 messages: if this fails, the
// encoding changed, which needs a new wire.FrameVersion.
func TestGoldenS3(t *testing.T) {
	key, row := idOf(0x10), idOf(0x20)
	cat := func(parts ...[]byte) (b []byte) {
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	tests := []struct {
		name string
		msg  Message
		want []byte
	}{
		{"Join", &Join{Key: key, Joiner: key, JoinerAddr: "a:1", Hops: 2, Rows: []OverlayNode{{ID: row, Addr: "b"}}}, cat(
			[]byte{wire.FrameVersion, byte(wire.KindControl), 12}, // KindJoin
			key[:], key[:], // Key, Joiner: 16 raw bytes each
			[]byte{0x03, 'a', ':', '1'}, // JoinerAddr
			[]byte{0x04},                // Hops zigzag(2) = 4
			[]byte{0x01},                // 1 row
			row[:], []byte{0x01, 'b'},   // its ID and Addr
		)},
		{"Advertise", &Advertise{Key: 300, Ack: 1, Type: "t", Attrs: []AttrDetail{{"n", "v"}}}, []byte{
			wire.FrameVersion, byte(wire.KindControl), 17, // KindAdvertise
			0xac, 0x02, // Key 300
			0x01,      // Ack 1
			0x01, 't', // Type
			0x01,                 // 1 attribute
			0x01, 'n', 0x01, 'v', // its Name and Value
		}},
		{"PathChange", &PathChange{Class: ClassRef{Level: 2, Type: "t", Attr: "a", Value: "v"}, Direction: Upstream, Branch: row, Seq: 300}, cat(
			[]byte{wire.FrameVersion, byte(wire.KindControl), 19}, // KindPathChange
			[]byte{0x02, 0x01, 't', 0x01, 'a', 0x01, 'v'},         // Class: Level 2 as a byte, Type, Attr, Value
			[]byte{0x01},       // Direction upstream, a byte
			row[:],             // Branch
			[]byte{0x00},       // BranchAddr ""
			[]byte{0xac, 0x02}, // Seq 300
		)},
		{"LeafSetRequest", &LeafSetRequest{}, []byte{wire.FrameVersion, byte(wire.KindControl), 15}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, encode(t, tt.msg))
			got, err := decodeFrame(t, tt.want)
			require.NoError(t, err)
			assert.Equal(t, tt.msg, got)
		})
	}
}

// TestMaxListsS3 round-trips lists of MaxNames entries, which take more
// than the default frame size.
func TestMaxListsS3(t *testing.T) {
	lim := wire.Limits{MaxFrameBytes: 8 << 20}
	tests := []struct {
		name string
		msg  Message
	}{
		{"Join rows", &Join{Hops: 1, Rows: manyNodes(MaxNames)}},
		{"JoinReply rows and leaves", &JoinReply{Rows: manyNodes(MaxNames), Leaves: manyNodes(MaxNames)}},
		{"Announce leaves", &Announce{Leaving: true, Leaves: manyNodes(MaxNames)}},
		{"LeafSetReply leaves", &LeafSetReply{Leaves: manyNodes(MaxNames)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Encode(tt.msg, wire.Limits{})
			assert.ErrorIs(t, err, wire.ErrTooLarge, "over the default frame size")
			frame, err := Encode(tt.msg, lim)
			require.NoError(t, err)
			wm, err := wire.Decode(frame, lim)
			require.NoError(t, err)
			got, err := Decode(wm.(*wire.Control))
			require.NoError(t, err)
			assert.Equal(t, tt.msg, got)
		})
	}
}

// TestShortBodyAllocatesLittleS3 is TestShortBodyAllocatesLittle for the
// lists of the S3 messages.
func TestShortBodyAllocatesLittleS3(t *testing.T) {
	tests := []struct {
		name string
		body body
	}{
		{"join rows count", newBody(KindJoin).raw(make([]byte, 32)...).s("").z(0).u(1 << 28)},
		{"join reply leaves count", newBody(KindJoinReply).raw(make([]byte, 16)...).u(0).u(1 << 40)},
		{"leaf set reply count at the limit", newBody(KindLeafSetReply).u(MaxNames).raw(make([]byte, 100)...)},
		{"advertise attrs count", newBody(KindAdvertise).u(0).u(0).s("t").u(1 << 28)},
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

func BenchmarkJoin(b *testing.B) {
	m := &Join{Key: nodeC.ID, Joiner: nodeC.ID, JoinerAddr: nodeC.Addr, Hops: 3, Rows: manyNodes(45)} // 3 rows of 15
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

package overlay

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// id parses up to 32 hex digits, left-aligned: id("8") is 0x8000…0.
func id(t testing.TB, s string) ID {
	t.Helper()
	s += strings.Repeat("0", 32-len(s))
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	var x ID
	copy(x[:], b)
	return x
}

// low is the ID of a small number, right-aligned: low(3) is 0x0…03.
func low(v uint64) ID { return u128{0, v}.id() }

// high is 2^128 - v.
func high(v uint64) ID { return sub(u128{}, u128{0, v}).id() }

func node(x ID) Node { return Node{ID: x, Addr: x.String()[:4]} }

func TestHashIDAndString(t *testing.T) {
	x := HashID("sw-0")
	assert.Len(t, x.String(), 32)
	assert.Equal(t, x, HashID("sw-0"))
	assert.NotEqual(t, x, HashID("sw-1"))
	// SHA-256("abc") = ba7816bf 8f01cfea 414140de 5dae2223 …
	assert.Equal(t, "ba7816bf8f01cfea414140de5dae2223", HashID("abc").String())
}

func TestDigit(t *testing.T) {
	x := id(t, "0123456789abcdeffedcba9876543210")
	for _, tc := range []struct {
		name string
		i    int
		want int
	}{
		{"most significant", 0, 0},
		{"second", 1, 1},
		{"high nibble", 10, 0xa},
		{"middle", 16, 0xf},
		{"least significant", 31, 0},
		{"next to last", 30, 1},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, x.Digit(tc.i)) })
	}
}

func TestSharedPrefix(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		want int
	}{
		{"none", "1", "2", 0},
		{"one", "12", "13", 1},
		{"in the low half", "0123456789abcdef01", "0123456789abcdef02", 17},
		{"all but last", "0123456789abcdeffedcba9876543210", "0123456789abcdeffedcba9876543211", 31},
		{"equal", "0123456789abcdeffedcba9876543210", "0123456789abcdeffedcba9876543210", 32},
		{"nibble boundary", "8", "0", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, SharedPrefix(id(t, tc.a), id(t, tc.b)))
			assert.Equal(t, tc.want, SharedPrefix(id(t, tc.b), id(t, tc.a)))
		})
	}
}

func TestDistanceAndCloser(t *testing.T) {
	half := id(t, "8") // 2^127
	for _, tc := range []struct {
		name string
		a, b ID
		want ID
	}{
		{"same", low(5), low(5), ID{}},
		{"plain", low(5), low(9), low(4)},
		{"wraps at 2^128", high(2), low(3), low(5)},
		{"half the ring", ID{}, half, half},
		{"just past half goes the other way", ID{}, high(0x7fff), low(0x7fff)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Distance(tc.a, tc.b))
			assert.Equal(t, tc.want, Distance(tc.b, tc.a))
		})
	}
	for _, tc := range []struct {
		name      string
		key, a, b ID
		want      bool
	}{
		{"nearer", low(10), low(11), low(20), true},
		{"farther", low(10), low(20), low(11), false},
		{"across zero", low(1), high(1), low(4), true},
		{"tie: smaller ID wins", low(10), low(8), low(12), true},
		{"tie: larger ID loses", low(10), low(12), low(8), false},
		{"tie across zero: smaller ID wins", ID{}, low(1), high(1), true},
		{"tie at half the ring", ID{}, half, half, false},
		{"itself", low(3), low(4), low(4), false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, Closer(tc.key, tc.a, tc.b)) })
	}
}

func TestAddKeepsLeafSidesOrderedAndBounded(t *testing.T) {
	self := id(t, "8")
	tb := NewTable(node(self), 4) // 2 per side
	for _, x := range []ID{
		id(t, "81"), id(t, "84"), id(t, "82"), id(t, "83"), // clockwise
		id(t, "7f"), id(t, "7c"), id(t, "7e"), // counter-clockwise
	} {
		tb.Add(node(x))
	}
	assert.Equal(t, []Node{node(id(t, "7e")), node(id(t, "7f")), node(id(t, "81")), node(id(t, "82"))}, tb.Leaves())
	assert.Equal(t, 4, tb.LeafSize())

	for _, tc := range []struct {
		name    string
		n       Node
		changed bool
	}{
		{"known again", node(id(t, "81")), false},
		{"new address", Node{ID: id(t, "81"), Addr: "moved"}, true},
		{"self", node(self), false},
		{"farther than a full side, cell taken", node(id(t, "841")), false},
		{"farther than a full side, new cell", node(id(t, "1")), true},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.changed, tb.Add(tc.n)) })
	}
	assert.Equal(t, "moved", tb.Leaves()[2].Addr)
	// Row 0: 7… and 1… (self's column 8 stays empty); row 1: 81 … 84.
	assert.Equal(t, []ID{id(t, "1"), id(t, "7f")}, ids(tb.Row(0)))
	assert.Equal(t, []ID{id(t, "81"), id(t, "82"), id(t, "83"), id(t, "84")}, ids(tb.Row(1)))
	// 6 cells + 4 leaf slots.
	assert.Equal(t, 10, tb.Len())
	assert.Equal(t, []ID{id(t, "1"), id(t, "7e"), id(t, "7f"), id(t, "81"), id(t, "82"), id(t, "83"), id(t, "84")}, ids(tb.Nodes()))
}

func ids(ns []Node) []ID {
	out := make([]ID, len(ns))
	for i, n := range ns {
		out[i] = n.ID
	}
	return out
}

func TestSmallOverlayLeafSetCoversTheRing(t *testing.T) {
	tb := NewTable(node(low(100)), 0)
	assert.Equal(t, DefaultLeaves, tb.LeafSize())
	assert.True(t, tb.Root(id(t, "abc")), "alone: root of every key")
	tb.Learn([]Node{node(low(200)), node(id(t, "8"))})
	// Each side holds both nodes; Leaves lists each once.
	assert.Equal(t, []ID{low(200), id(t, "8")}, ids(tb.Leaves()))
	next, ok := tb.NextHop(id(t, "7"))
	require.True(t, ok)
	assert.Equal(t, id(t, "8"), next.ID)
	assert.True(t, tb.Root(low(120)))
}

func TestRemove(t *testing.T) {
	self := id(t, "8")
	tb := NewTable(node(self), 4)
	tb.Learn([]Node{node(id(t, "81")), node(id(t, "82")), node(id(t, "83")), node(id(t, "7f")), node(id(t, "7e")), node(id(t, "1"))})
	before := tb.Len()
	for _, tc := range []struct {
		name    string
		x       ID
		changed bool
	}{
		{"unknown", id(t, "5"), false},
		{"self", self, false},
		{"leaf and cell", id(t, "81"), true},
		{"cell only", id(t, "1"), true},
		{"again", id(t, "81"), false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.changed, tb.Remove(tc.x)) })
	}
	assert.Equal(t, before-3, tb.Len())
	// The clockwise side is one short (83 was pushed out earlier): its
	// farthest leaf is the one to ask.
	assert.Equal(t, []ID{id(t, "7e"), id(t, "7f"), id(t, "82")}, ids(tb.Leaves()))
	assert.Equal(t, []Node{node(id(t, "82"))}, tb.RepairContacts())
	tb.Add(node(id(t, "83")))
	assert.Nil(t, tb.RepairContacts())
}

func TestNextHop(t *testing.T) {
	// self = 0x10…0, L = 4. Leaves: 0x1001…, 0x1002… clockwise; 0x0fff…,
	// 0x0ffe… counter-clockwise. Routing table: 0x3…, 0xf…, 0x12…, 0x15….
	self := id(t, "1")
	tb := NewTable(node(self), 4)
	tb.Learn([]Node{
		node(id(t, "1001")), node(id(t, "1002")),
		node(id(t, "0fff")), node(id(t, "0ffe")),
		node(id(t, "3")), node(id(t, "f")), node(id(t, "12")), node(id(t, "15")),
	})
	for _, tc := range []struct {
		name string
		key  ID
		want ID // zero: self is the root
	}{
		{"self's own ID", self, ID{}},
		{"in leaf range, self closest", id(t, "10000001"), ID{}},
		{"in leaf range, a clockwise leaf", id(t, "10018"), id(t, "1001")},
		{"in leaf range, across a digit", id(t, "0fff8"), id(t, "0fff")},
		{"in leaf range, tie between self and a leaf: smaller ID", id(t, "10008"), ID{}},
		{"row 0", id(t, "3456"), id(t, "3")},
		{"row 1", id(t, "1234"), id(t, "12")},
		{"rare: empty cell, a closer node with the same prefix", id(t, "14"), id(t, "15")},
		{"rare: the closest of those sharing the prefix", id(t, "18"), id(t, "15")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, ok := tb.NextHop(tc.key)
			if tc.want == (ID{}) {
				assert.False(t, ok, "got %v", next.ID)
				assert.True(t, tb.Root(tc.key))
				return
			}
			require.True(t, ok)
			assert.Equal(t, tc.want, next.ID)
			assert.False(t, tb.Root(tc.key))
		})
	}
}

func TestNextHopWrapsAroundZero(t *testing.T) {
	// self just below 2^128; its clockwise leaves wrap to small IDs.
	tb := NewTable(node(high(10)), 4)
	tb.Learn([]Node{node(low(5)), node(low(20)), node(high(30)), node(high(40)), node(id(t, "8"))})
	for _, tc := range []struct {
		name string
		key  ID
		want ID
		ok   bool
	}{
		{"zero: low(5) is closer", ID{}, low(5), true},
		{"just past zero", low(3), low(5), true},
		{"just below self", high(12), ID{}, false},
		{"between the two counter-clockwise leaves", high(36), high(40), true},
		{"past the farthest clockwise leaf: routing table", id(t, "7"), id(t, "8"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, ok := tb.NextHop(tc.key)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, next.ID)
		})
	}
}

func TestJoinAndRepairMaterial(t *testing.T) {
	self := id(t, "8")
	tb := NewTable(node(self), 4)
	tb.Learn([]Node{node(id(t, "81")), node(id(t, "82")), node(id(t, "7f")), node(id(t, "7e")), node(id(t, "1")), node(id(t, "812"))})

	// A newcomer 0x811…: shares 1 digit with self, so rows 0 and 1, and self.
	x := id(t, "811")
	assert.ElementsMatch(t, []ID{id(t, "1"), id(t, "7f"), id(t, "81"), id(t, "82"), self}, ids(tb.JoinRows(x)))
	// Its root's leaf set, self included.
	assert.Equal(t, []ID{id(t, "7e"), id(t, "7f"), id(t, "81"), id(t, "812"), self}, ids(tb.LeafSetFor(x)))
	// The asker is left out.
	assert.Equal(t, []ID{id(t, "7e"), id(t, "7f"), id(t, "812"), self}, ids(tb.LeafSetFor(id(t, "81"))))

	nt := NewTable(node(x), 4)
	assert.True(t, nt.Learn(tb.JoinRows(x)))
	assert.True(t, nt.Learn(tb.LeafSetFor(x)))
	assert.False(t, nt.Learn(tb.LeafSetFor(x)), "nothing new the second time")
	assert.Equal(t, []ID{self, id(t, "81"), id(t, "812"), id(t, "82")}, ids(nt.Leaves()))
}

func TestRepairContactsOfAnEmptySide(t *testing.T) {
	tb := NewTable(node(id(t, "8")), 4)
	tb.Learn([]Node{node(id(t, "81")), node(id(t, "82")), node(id(t, "83")), node(id(t, "7f"))})
	// Counter-clockwise: 7f, then (wrapping) 83. Lose both.
	tb.Remove(id(t, "7f"))
	tb.Remove(id(t, "83"))
	// Clockwise side full (81, 82); counter-clockwise side empty: the
	// nearest known node counter-clockwise is 82.
	assert.Equal(t, []Node{node(id(t, "82"))}, tb.RepairContacts())
}

func TestNextHopDoesNotAllocate(t *testing.T) {
	s := buildSim(t, 200)
	allocs := testing.AllocsPerRun(100, func() {
		for _, x := range s.ids[:20] {
			s.live[x].NextHop(s.randomID())
		}
	})
	assert.Zero(t, allocs)
}

package overlay

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestWants: Wants(n) reports exactly whether Add(n) would take a new node
// in, and changes nothing; checked on tables of growing size against a
// twin that Adds.
func TestWants(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	id := func() ID {
		var x ID
		binary.BigEndian.PutUint64(x[:8], rng.Uint64())
		binary.BigEndian.PutUint64(x[8:], rng.Uint64())
		return x
	}
	for _, leaves := range []int{2, 16} {
		self := Node{ID: id(), Addr: "self"}
		a, b := NewTable(self, leaves), NewTable(self, leaves)
		for i := range 3000 {
			n := Node{ID: id(), Addr: "n"}
			before := len(a.Nodes())
			w := a.Wants(n)
			assert.Equal(t, before, len(a.Nodes()), "Wants changed the table")
			assert.Equal(t, b.Add(n), w, "node %d, L=%d", i, leaves)
			a.Add(n)
			assert.False(t, a.Wants(n), "a node held is not wanted")
		}
	}
}

// TestClone: a clone changes independently of its table.
func TestClone(t *testing.T) {
	self := Node{ID: ID{0x80}, Addr: "self"}
	a := NewTable(self, 4)
	a.Add(Node{ID: ID{0x81}, Addr: "x"})
	c := a.Clone()
	c.Add(Node{ID: ID{0x82}, Addr: "y"})
	c.Add(Node{ID: ID{0x7f}, Addr: "z"})
	assert.Len(t, a.Nodes(), 1)
	assert.Len(t, c.Nodes(), 3)
}

package guard

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSource(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr net.Addr
		want string
	}{
		{"tcp", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 4000}, "10.0.0.7"},
		{"udp6", &net.UDPAddr{IP: net.ParseIP("fe80::1"), Port: 9}, "fe80::1"},
		{"name", stringAddr("switch-a"), "switch-a"},
		{"nil", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, Source(tc.addr)) })
	}
}

type stringAddr string

func (a stringAddr) Network() string { return "mem" }
func (a stringAddr) String() string  { return string(a) }

func TestHandshakesEvictTheBusiestSourceOldestFirst(t *testing.T) {
	h := NewHandshakes(4)
	var evicted []string
	start := func(src, name string) func() {
		done, _, _ := h.Start(src, func() { evicted = append(evicted, name) })
		return done
	}
	start("attacker", "a1")
	start("attacker", "a2")
	legit := start("legit", "l1")
	start("attacker", "a3")
	require.Equal(t, 4, h.Len())

	_, victim, ok := h.Start("legit", func() { evicted = append(evicted, "l2") })
	require.True(t, ok)
	assert.Equal(t, "attacker", victim)
	assert.Equal(t, []string{"a1"}, evicted, "the oldest of the source with the most goes first")

	legit() // l1 finished its handshake
	legit() // twice is harmless
	assert.Equal(t, 3, h.Len())
	start("other", "o1")
	_, _, ok = h.Start("other", func() {})
	require.True(t, ok)
	assert.Equal(t, []string{"a1", "a2"}, evicted)
	assert.Equal(t, uint64(2), h.Evicted())
}

func TestHandshakesTieGoesToTheOldest(t *testing.T) {
	h := NewHandshakes(2)
	var evicted []string
	h.Start("x", func() { evicted = append(evicted, "x") })
	h.Start("y", func() { evicted = append(evicted, "y") })
	h.Start("z", func() { evicted = append(evicted, "z") })
	assert.Equal(t, []string{"x"}, evicted)
}

func TestHandshakesConcurrent(t *testing.T) {
	h := NewHandshakes(16)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 500 {
				done, _, _ := h.Start(fmt.Sprint(i%3), func() {})
				if j%2 == 0 {
					done()
				}
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, h.Len(), 16)
}

func TestEvery(t *testing.T) {
	ev := NewEvery(time.Second, 2)
	t0 := time.Unix(1000, 0)
	ok, _ := ev.Allow("a", t0)
	assert.True(t, ok)
	for i := range 5 {
		ok, _ = ev.Allow("a", t0.Add(time.Duration(i)*100*time.Millisecond))
		assert.False(t, ok)
	}
	ok, n := ev.Allow("a", t0.Add(time.Second))
	assert.True(t, ok)
	assert.Equal(t, uint64(5), n, "the suppressed ones are counted")

	ok, _ = ev.Allow("b", t0)
	assert.True(t, ok)
	ok, _ = ev.Allow("c", t0) // forgets "a", allowed longest ago
	assert.True(t, ok)
	ok, _ = ev.Allow("b", t0.Add(time.Millisecond))
	assert.False(t, ok, "b is still remembered")
	ok, _ = ev.Allow("a", t0.Add(time.Millisecond))
	assert.True(t, ok, "a was forgotten, so it is allowed again")
}

func TestWindow(t *testing.T) {
	w := NewWindow(3, time.Second)
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		ok, _ := w.Allow(t0.Add(time.Duration(i) * time.Millisecond))
		assert.True(t, ok, "event %d", i)
	}
	for i := range 5 {
		ok, _ := w.Allow(t0.Add(time.Duration(10+i) * time.Millisecond))
		assert.False(t, ok)
	}
	ok, n := w.Allow(t0.Add(time.Second))
	assert.True(t, ok, "a new interval")
	assert.Equal(t, uint64(5), n)
}

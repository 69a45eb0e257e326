package sion_test

// Attacks on a place routed by rendezvous (S3) through its link protocol,
// by an admitted overlay peer speaking internal/linkctl by hand.

import (
	"context"
	"fmt"
	"math/big"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
)

// mallory is a hand-made overlay peer linked to one switch of a place: it
// answers the switch's registers and markers (so it stalls nothing), and
// counts the events the switch forwards to it.
type mallory struct {
	t       *testing.T
	name    string
	conn    transport.Conn
	ctx     context.Context
	forward atomic.Int64 // Forward frames received
	mu      sync.Mutex
	got     []linkctl.Message // control messages received
	closed  chan struct{}
}

// linkMallory links a peer named name (its ID is its name's hash, so it is
// admitted as a real switch would be) to the switch at addr.
func linkMallory(t *testing.T, p *overlayPlace, addr, name string) *mallory {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	conn, err := p.tr.Dial(ctx, addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	send(t, conn, &wire.Hello{Version: 2, Session: name})
	require.IsType(t, &wire.Welcome{}, recv(t, conn))
	m := &mallory{t: t, name: name, conn: conn, ctx: ctx, closed: make(chan struct{})}
	m.send(&linkctl.OverlayLink{Switch: name, Place: "overlay", Node: linkctl.OverlayNode{ID: sion.OverlayKey(name), Addr: name}})
	first := recv(t, conn)
	c, ok := first.(*wire.Control)
	require.True(t, ok, "%v", first)
	acc, err := linkctl.Decode(c)
	require.NoError(t, err)
	require.IsType(t, &linkctl.LinkAccept{}, acc)
	m.send(&linkctl.Synced{})
	go m.read()
	return m
}

func (m *mallory) send(msg linkctl.Message) {
	f, err := linkctl.Encode(msg, wire.DefaultLimits())
	require.NoError(m.t, err)
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	require.NoError(m.t, m.conn.Send(ctx, f))
}

func (m *mallory) read() {
	defer close(m.closed)
	for {
		f, err := m.conn.Recv(m.ctx)
		if err != nil {
			return
		}
		w, err := wire.Decode(f, wire.DefaultLimits())
		if err != nil {
			return
		}
		switch w := w.(type) {
		case *wire.Forward:
			m.forward.Add(1)
		case *wire.Control:
			msg, err := linkctl.Decode(w)
			if err != nil {
				continue
			}
			m.mu.Lock()
			m.got = append(m.got, msg)
			m.mu.Unlock()
			var ack uint64
			switch msg := msg.(type) {
			case *linkctl.Register:
				ack = msg.Ack
			case *linkctl.Marker:
				ack = msg.Ack
			case *linkctl.Advertise:
				ack = msg.Ack
			case *linkctl.BypassEnd:
				ack = msg.Ack
			}
			if ack != 0 {
				f, err := linkctl.Encode(&linkctl.Ack{Ack: ack}, wire.DefaultLimits())
				if err == nil {
					m.conn.Send(m.ctx, f)
				}
			}
		case *wire.Error:
			m.mu.Lock()
			m.got = append(m.got, nil)
			m.mu.Unlock()
			return
		}
	}
}

// nonRendezvous returns the indexes of n switches of p that are not the
// rendezvous switch of eventType.
func nonRendezvous(t *testing.T, p *overlayPlace, eventType string, n int) []int {
	t.Helper()
	var rv *sion.Switch
	require.Eventually(t, func() bool { rv = rendezvousOf(p.sws, eventType); return rv != nil }, 10*time.Second, 10*time.Millisecond)
	var out []int
	for i, sw := range p.sws {
		if sw != rv && len(out) < n {
			out = append(out, i)
		}
	}
	require.Len(t, out, n)
	return out
}

// noDelivery reports whether sub gets nothing within d.
func noDelivery(sub *sion.Subscription, d time.Duration) bool {
	select {
	case <-sub.C():
		return false
	case <-time.After(d):
		return true
	}
}

func zoneNotice(zone string) *sion.Event {
	return &sion.Event{Type: "Notice", Attrs: []ontology.Attr{{Name: "zone", Value: ontology.String(zone)}}}
}

// TestForgedPathChangeCannotDropAClass: an admitted overlay peer that is on
// no path of Notice sends the publisher's switch an upstream PathChange
// with no branch point. Before, the switch took itself for the merge
// point of a bypass "to nowhere" and dropped the class's events silently
// for as long as the peer's link stayed up; now a path change counts only
// from the next hop toward the type's rendezvous switch.
func TestForgedPathChangeCannotDropAClass(t *testing.T) {
	p := newOverlayPlace(t, 6, sion.PlaceConfig{})
	ctx := context.Background()
	hosts := nonRendezvous(t, p, "Notice", 2)
	pub := p.open(hosts[0], "pub")
	require.NoError(t, pub.Advertise(ctx, sion.Advertisement{Type: "Notice"}))
	sub, err := p.open(hosts[1], "sub").Subscribe(ctx, "{type ⊑ Notice}")
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, zoneNotice("hall")))
	next(t, sub)

	m := linkMallory(t, p, p.addrs[hosts[0]], "mallory")
	m.send(&linkctl.PathChange{Class: linkctl.ClassRef{Level: 2, Type: "Notice", Attr: "zone", Value: "hall"}, Direction: linkctl.Upstream, Seq: 1})
	time.Sleep(200 * time.Millisecond)

	require.NoError(t, pub.Publish(ctx, zoneNotice("hall")))
	require.NoError(t, pub.Publish(ctx, zoneNotice("lobby")))
	info, _ := p.sws[hosts[0]].Rendezvous()
	t.Logf("publisher's switch's bypasses: %+v; Stats.Dropped %d", info.Bypasses, p.sws[hosts[0]].Stats().Dropped)
	d := next(t, sub)
	assert.Equal(t, "hall", mustStr(d.Event, "zone"), "the zone=hall event was dropped at the publisher's switch by a forged PathChange")
}

// TestForgedPathChangeCannotDivertAClass: the same forged PathChange, with
// the attacker's own node as the branch point, made the publisher's
// switch send the class's events only to the attacker; now it is ignored
// and the real subscriber gets them.
func TestForgedPathChangeCannotDivertAClass(t *testing.T) {
	p := newOverlayPlace(t, 6, sion.PlaceConfig{})
	ctx := context.Background()
	hosts := nonRendezvous(t, p, "Notice", 2)
	pub := p.open(hosts[0], "pub")
	require.NoError(t, pub.Advertise(ctx, sion.Advertisement{Type: "Notice"}))
	sub, err := p.open(hosts[1], "sub").Subscribe(ctx, "{type ⊑ Notice}")
	require.NoError(t, err)

	m := linkMallory(t, p, p.addrs[hosts[0]], "mallory")
	m.send(&linkctl.PathChange{Class: linkctl.ClassRef{Level: 2, Type: "Notice", Attr: "zone", Value: "hall"}, Direction: linkctl.Upstream,
		Branch: sion.OverlayKey("mallory"), BranchAddr: "mallory", Seq: 1})
	time.Sleep(200 * time.Millisecond)

	for range 5 {
		require.NoError(t, pub.Publish(ctx, zoneNotice("hall")))
	}
	time.Sleep(200 * time.Millisecond)
	t.Logf("events forwarded to mallory: %d", m.forward.Load())
	got := 0
	for !noDelivery(sub, 500*time.Millisecond) {
		got++
	}
	assert.Equal(t, 5, got, "the subscriber's events of zone=hall (mallory got %d)", m.forward.Load())
}

func mustStr(e *sion.Event, attr string) string {
	v, ok := e.Value(attr)
	if !ok {
		return ""
	}
	return v.Str()
}

// blackhole listens at addr on p's transport and accepts connections that
// it never answers (a host that takes the TCP connection and then hangs).
func blackhole(t *testing.T, p *overlayPlace, addr string) {
	t.Helper()
	l, err := p.tr.Listen(addr)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept(context.Background())
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
}

// TestFakeLeafSetEntryTakesNothingAway: an admitted overlay peer sends the
// publisher's switch an unsolicited LeafSetReply naming one fake node whose
// ID is the key of Notice and whose address accepts connections but never
// answers. Before, the switch took the node into its table at once, before
// it had a link to it: its next hop toward Notice's rendezvous switch became
// a node it could not reach, it withdrew its advertisement from the real
// path, and the Notice events it published reached nobody until the dial
// timed out. Now a node enters a table only once its link is up, and an
// unsolicited LeafSetReply is dropped.
func TestFakeLeafSetEntryTakesNothingAway(t *testing.T) {
	p := newOverlayPlace(t, 6, sion.PlaceConfig{})
	ctx := context.Background()
	hosts := nonRendezvous(t, p, "Notice", 2)
	pub := p.open(hosts[0], "pub")
	require.NoError(t, pub.Advertise(ctx, sion.Advertisement{Type: "Notice"}))
	sub, err := p.open(hosts[1], "sub").Subscribe(ctx, "{type ⊑ Notice}")
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, zoneNotice("a")))
	next(t, sub)

	blackhole(t, p, "void")
	m := linkMallory(t, p, p.addrs[hosts[0]], "mallory")
	m.send(&linkctl.LeafSetReply{Leaves: []linkctl.OverlayNode{{ID: sion.OverlayKey("Notice"), Addr: "void"}}})
	time.Sleep(300 * time.Millisecond)
	hop, ok := p.sws[hosts[0]].RendezvousNextHop("Notice")
	t.Logf("next hop toward Notice after the fake leaf: %q %v", hop, ok)

	require.NoError(t, pub.Publish(ctx, zoneNotice("b")))
	assert.False(t, noDelivery(sub, 3*time.Second), "an event published after Advertise and Subscribe returned was lost: a fake leaf set entry from one peer cut the publisher's switch off Notice's rendezvous switch")
}

// joinFlood sends n Joins on their second hop (Hops 1, so the first-hop
// check does not apply) for fresh joiner IDs at addr, routed to the
// victim's own ID: the victim is their root and dials each joiner to
// answer it.
func joinFlood(m *mallory, victim string, n int, addr string) {
	key := sion.OverlayKey(victim)
	for i := range n {
		var id [16]byte
		id[0], id[1], id[2], id[3] = 0xee, byte(i>>16), byte(i>>8), byte(i)
		m.send(&linkctl.Join{Key: key, Joiner: id, JoinerAddr: addr, Hops: 1})
	}
}

// TestJoinFloodDialsBounded: an admitted overlay peer sends Joins
// on their "second hop" for made-up joiners whose address accepts and
// hangs. The switch, their root, dialled every one to send its JoinReply,
// without bound (2,000 messages: 4,000 goroutines for HandshakeTimeout);
// now at most maxOverlayDials dials run at once.
func TestJoinFloodDialsBounded(t *testing.T) {
	p := newOverlayPlace(t, 3, sion.PlaceConfig{})
	blackhole(t, p, "void")
	m := linkMallory(t, p, p.addrs[1], "mallory")
	time.Sleep(200 * time.Millisecond)
	before := runtime.NumGoroutine()
	joinFlood(m, "sw1", 2000, "void")
	time.Sleep(time.Second)
	after := runtime.NumGoroutine()
	t.Logf("goroutines: %d before, %d after 2000 forged Joins", before, after)
	assert.Less(t, after-before, 200, "goroutines the switch started for one peer's forged Joins")
}

// TestJoinFloodTombstonesBounded: the same forged Joins with joiners at
// an address where nothing listens: each dial fails at once and leaves a
// tombstone of the made-up ID, which was removed only if that ID was ever
// learned again — never; now tombstones are bounded, expired ones first.
func TestJoinFloodTombstonesBounded(t *testing.T) {
	p := newOverlayPlace(t, 3, sion.PlaceConfig{})
	m := linkMallory(t, p, p.addrs[1], "mallory")
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	time.Sleep(200 * time.Millisecond)
	h0 := heap()
	joinFlood(m, "sw1", 50000, "nowhere")
	time.Sleep(2 * time.Second)
	h1 := heap()
	time.Sleep(11 * time.Second) // past overlayTomb
	h2 := heap()
	t.Logf("heap: %d KiB before, %d KiB after 50,000 forged Joins, %d KiB 11 s later", h0>>10, h1>>10, h2>>10)
	assert.Less(t, int64(h2)-int64(h0), int64(1<<20), "heap kept for one peer's expired tombstones")
}

// ringDist is the distance of a and b on the ring of 2^128 IDs.
func ringDist(a, b [16]byte) *big.Int {
	x, y := new(big.Int).SetBytes(a[:]), new(big.Int).SetBytes(b[:])
	d := new(big.Int).Sub(x, y)
	d.Abs(d)
	ring := new(big.Int).Lsh(big.NewInt(1), 128)
	if o := new(big.Int).Sub(ring, d); o.Cmp(d) < 0 {
		d = o
	}
	return d
}

// grindName returns a name whose overlay ID is closer to eventType's key
// than every switch of p: about len(p.sws) hashes.
func grindName(t *testing.T, p *overlayPlace, eventType string) string {
	key := sion.OverlayKey(eventType)
	best := new(big.Int).Lsh(big.NewInt(1), 128)
	for _, sw := range p.sws {
		if d := ringDist(sion.OverlayKey(sw.Name()), key); d.Cmp(best) < 0 {
			best = d
		}
	}
	for i := 0; ; i++ {
		name := fmt.Sprintf("mallory-%d", i)
		if ringDist(sion.OverlayKey(name), key).Cmp(best) < 0 {
			t.Logf("%s is closer to %s's key than every switch, after %d hashes", name, eventType, i+1)
			return name
		}
	}
}

// TestGroundNameRefusedByAdmission: any entity may pick a switch name by
// hashing names until one lands closer to a type's key than every switch
// (about N hashes for N switches) and so, once admitted, become the
// type's rendezvous switch — admission is the defence, as
// RouteByRendezvous says. A place whose Admit hook admits only its own
// switches' overlay links refuses the ground name, and its events flow.
func TestGroundNameRefusedByAdmission(t *testing.T) {
	admit := func(_ context.Context, req sion.AdmissionRequest) error {
		if req.Link && !strings.HasPrefix(req.Session, "sw") {
			return fmt.Errorf("switch %q is not one of ours", req.Session)
		}
		return nil
	}
	p := newOverlayPlace(t, 8, sion.PlaceConfig{Admit: admit})
	ctx := context.Background()
	name := grindName(t, p, "Notice")
	for _, addr := range p.addrs {
		m := overlayRequest(t, p, addr, &linkctl.OverlayLink{Switch: name, Place: "overlay", Node: linkctl.OverlayNode{ID: sion.OverlayKey(name), Addr: name}})
		e, ok := m.(*wire.Error)
		require.True(t, ok, "%v", m)
		assert.Contains(t, e.Message, "is not one of ours")
	}
	pub := p.open(1, "pub")
	require.NoError(t, pub.Advertise(ctx, sion.Advertisement{Type: "Notice"}))
	sub, err := p.open(5, "sub").Subscribe(ctx, "{type ⊑ Notice}")
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, zoneNotice("x")))
	assert.False(t, noDelivery(sub, 2*time.Second), "the event was lost")
}

// TestLinkAdvertisementsChecked: an admitted overlay peer advertises
// one type with many distinct attribute details — attributes outside the
// type's vocabulary, which a local or remote Advertise refuses with
// ErrInvalidEvent — and every switch up to the rendezvous switch kept an
// entry for each; now a link's advertisements are checked as a session's
// are, and bounded per link.
func TestLinkAdvertisementsChecked(t *testing.T) {
	p := newOverlayPlace(t, 8, sion.PlaceConfig{Routing: sion.RouteByRendezvous(sion.RendezvousConfig{Leaves: 2})})
	ctx := context.Background()
	hosts := nonRendezvous(t, p, "Notice", 1)
	err := p.open(hosts[0], "s").Advertise(ctx, sion.Advertisement{Type: "Notice", Attrs: []ontology.Attr{{Name: "bogus", Value: ontology.String("x")}}})
	require.ErrorIs(t, err, sion.ErrInvalidEvent, "a session cannot advertise an attribute outside the vocabulary")
	m := linkMallory(t, p, p.addrs[hosts[0]], "mallory")
	const n = 3000
	for i := range n {
		m.send(&linkctl.Advertise{Key: uint64(i + 1), Ack: uint64(i + 1), Type: "Notice", Attrs: []linkctl.AttrDetail{{Name: "bogus", Value: fmt.Sprint(i)}}})
	}
	time.Sleep(2 * time.Second)
	total := 0
	for _, sw := range p.sws {
		info, _ := sw.Rendezvous()
		total += info.Advertisements
	}
	t.Logf("advertisement entries in the place after %d forged Advertises over one link: %d", n, total)
	assert.Less(t, total, n, "one peer's advertisements outside the vocabulary, kept by every switch on the path")
}

package sion

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/internal/overlay"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// readingPlace returns a place routed by rendezvous whose one event type,
// Reading, has its overlay key at the switch ids gives distance 0; ids
// places every switch at its distance above that key, neighbours (nil:
// no limit) is RendezvousConfig.Neighbours; and a mem network.
func readingPlace(t *testing.T, name string, ids map[string]uint64, neighbours map[string][]string) (*EventPlace, *mem.Network) {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{{Name: "Reading"}})
	require.NoError(t, err)
	at := make(map[string][16]byte, len(ids))
	for sw, d := range ids {
		k := OverlayKey("Reading")
		binary.BigEndian.PutUint64(k[8:], binary.BigEndian.Uint64(k[8:])+d)
		at[sw] = k
	}
	place, err := NewEventPlace(PlaceConfig{Name: name, Ontology: o, Routing: RouteByRendezvous(RendezvousConfig{IDs: at, Neighbours: neighbours})})
	require.NoError(t, err)
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	return place, tr
}

// joinedPair starts switches R and M of place on tr, R alone in the
// overlay and M joined through R.
func joinedPair(t *testing.T, tr *mem.Network, place *EventPlace) (r, m *Switch) {
	t.Helper()
	ctx := context.Background()
	r = activeSwitch(t, tr, place, "R")
	require.NoError(t, r.Join(ctx, tr, ""))
	m = activeSwitch(t, tr, place, "M")
	require.NoError(t, m.Join(ctx, tr, "R"))
	return r, m
}

// openSession opens a session named name on sw, closed when the test
// ends.
func openSession(t *testing.T, sw *Switch, name string) *Session {
	t.Helper()
	s, err := sw.Open(context.Background(), SessionConfig{Name: name})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// dialBeside makes s dial n although a link to n is up (dialLocked dials
// only a node without one), and returns the dial once it has ended.
func dialBeside(t *testing.T, s *rvSwitch, n overlay.Node) *overlayLink {
	t.Helper()
	s.mu.Lock()
	up := s.peers[n.ID]
	require.NotNil(t, up)
	delete(s.peers, n.ID)
	ol := s.dialLocked(n)
	s.peers[n.ID] = up
	s.mu.Unlock()
	require.NotNil(t, ol)
	<-ol.done
	return ol
}

// TestRendezvousLinkHandoverKeepsRegistration: when two overlay links
// join the same two switches (each dialled the other) and the one a
// subscription's registration and an advertisement went over ends, the
// other takes its place (rvSwitch.linkDown) and both are sent again over
// it: an event published once the registration is acknowledged again
// reaches the subscriber. The second link is forced here; in a running
// overlay it appears when two switches learn each other at once.
func TestRendezvousLinkHandoverKeepsRegistration(t *testing.T) {
	const typ = "Reading"
	// R is the rendezvous switch of Reading; P publishes on R's neighbour
	// M, whose advertisement goes to R; S subscribes on M too.
	place, tr := readingPlace(t, "handover", map[string]uint64{"R": 0, "M": 1}, nil)
	ctx := context.Background()
	r, m := joinedPair(t, tr, place)

	// A second link from M to R, beside the one Join made.
	ms := rvOf(m)
	rID := rvOf(r).selfNode()
	ms.mu.Lock()
	first := ms.peers[rID.ID]
	ms.mu.Unlock()
	ol := dialBeside(t, ms, rID)
	require.NoError(t, ol.err)
	require.Eventually(t, func() bool {
		ms.mu.Lock()
		defer ms.mu.Unlock()
		return len(ms.links) == 2 && ms.peers[rID.ID] == first
	}, 10*time.Second, time.Millisecond)

	// On each switch a publisher and a subscriber: M's events reach R's
	// subscriber along M's advertisement (R's register of the type at
	// M), R's reach M's along the subscription's registration at R.
	pubs := []*Session{openSession(t, m, "PM"), openSession(t, r, "PR")}
	var subs []*Subscription
	for _, sw := range []*Switch{m, r} {
		sub, err := openSession(t, sw, "S"+sw.Name()).Subscribe(ctx, `{type ⊑ Reading}`, WithQueue(8))
		require.NoError(t, err)
		subs = append(subs, sub)
	}
	for _, p := range pubs {
		require.NoError(t, p.Advertise(ctx, Advertisement{Type: typ}))
	}
	publish := func() {
		t.Helper()
		for _, p := range pubs {
			require.NoError(t, p.Publish(ctx, &Event{Type: typ}))
			for _, sub := range subs {
				select {
				case <-sub.C():
				case <-time.After(10 * time.Second):
					t.Fatalf("%s's event: no delivery to %s within 10 s", p.name, sub.sess.name)
				}
			}
		}
	}
	publish()

	first.close() // the link both went over ends; the second is M's way to R now
	<-first.finished
	require.Eventually(t, func() bool {
		for _, ri := range m.Routes() {
			if ri.Peer == "R" && ri.Filter == "{type ⊑ Reading}" && ri.Acknowledged {
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "M's registration at R is not sent again: %v", m.Routes())
	require.Eventually(t, func() bool {
		ms.mu.Lock()
		defer ms.mu.Unlock()
		for _, e := range ms.adverts {
			if e.next == nil || e.last == nil || !chanClosed(e.last.done) {
				return false
			}
		}
		return len(ms.adverts) > 0
	}, 10*time.Second, time.Millisecond, "M's advertisement is not sent on to R again")
	publish()
}

// TestRendezvousSwitchDiesWhileRegisterInstalls: when the rendezvous
// switch of a type dies, the subscriber's switch registers the
// subscription at the switch now closest to the type's key; while that
// register is still being installed there (stopped here by a hook), the
// new rendezvous switch reports no request (RendezvousInfo.Requests) and
// the link no proxy filter (LinkInfo.Proxies) — an event it matched then
// would be lost — and once they report it, an event published reaches the
// subscriber.
func TestRendezvousSwitchDiesWhileRegisterInstalls(t *testing.T) {
	const typ = "Reading"
	// R1 is the rendezvous switch of Reading, R2 next closest, then S.
	place, tr := readingPlace(t, "dies", map[string]uint64{"R1": 0, "R2": 1, "S": 2}, nil)
	ctx := context.Background()
	var r1Close func()
	{
		sw, err := NewSwitch(SwitchConfig{Name: "R1", Place: place})
		require.NoError(t, err)
		l, err := tr.Listen("R1")
		require.NoError(t, err)
		served := make(chan error, 1)
		go func() { served <- sw.Serve(ctx, l) }()
		r1Close = sync.OnceFunc(func() {
			require.NoError(t, sw.Close())
			require.NoError(t, <-served)
		})
		t.Cleanup(r1Close)
		require.Eventually(t, func() bool { return sw.State() == Active }, 10*time.Second, time.Millisecond)
		require.NoError(t, sw.Join(ctx, tr, ""))
	}
	r2 := activeSwitch(t, tr, place, "R2")
	require.NoError(t, r2.Join(ctx, tr, "R1"))
	s := activeSwitch(t, tr, place, "S")
	require.NoError(t, s.Join(ctx, tr, "R1"))

	pub := openSession(t, r2, "P")
	require.NoError(t, pub.Advertise(ctx, Advertisement{Type: typ}))
	sub, err := openSession(t, s, "S").Subscribe(ctx, `{type ⊑ Reading}`, WithQueue(8))
	require.NoError(t, err)
	publish := func() {
		t.Helper()
		require.NoError(t, pub.Publish(ctx, &Event{Type: typ}))
		select {
		case <-sub.C():
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery within 10 s")
		}
	}
	publish()

	// R2 stops S's register of the subscription in the middle of its
	// installation, until the test has looked.
	reached, release := holdInstall(t, r2, func(peer, f string) bool { return peer == "S" && f == "{type ⊑ Reading}" })
	r1Close()
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("S did not register the subscription at R2 within 10 s")
	}
	// S may have found R1 dead before R2 has: wait until R2 has too (the
	// proxy R1 registered at R2 for P's advertisement is gone with it).
	var info RendezvousInfo
	require.Eventually(t, func() bool {
		info, _ = r2.Rendezvous()
		return slices.Equal(info.Types, []string{typ})
	}, 10*time.Second, time.Millisecond, "R2 is the rendezvous switch of Reading now")
	assert.Zero(t, info.Requests, "R2 counts a request it has not installed")
	for _, l := range r2.Links() {
		assert.Zero(t, l.Proxies, "R2 counts a proxy filter of %s it has not installed", l.Peer)
	}
	release()
	require.Eventually(t, func() bool {
		info, _ := r2.Rendezvous()
		return info.Requests > 0
	}, 10*time.Second, time.Millisecond)
	publish()
}

// TestRendezvousFailedDialKeepsLiveNode: a dial to a node that fails
// while a link to that node is up (the node's own, accepted meanwhile)
// leaves the node in the table. Before, the failure made it dead to the
// overlay: M took R out and held R's keys itself, so M's subscriber
// registered nowhere R's publisher sends, and R's events were lost.
func TestRendezvousFailedDialKeepsLiveNode(t *testing.T) {
	const typ = "Reading"
	// R is the rendezvous switch of Reading.
	place, tr := readingPlace(t, "dial", map[string]uint64{"R": 0, "M": 1}, nil)
	ctx := context.Background()
	r, m := joinedPair(t, tr, place)

	// M dials R at an address nothing listens on, while its link to R
	// is up.
	ms := rvOf(m)
	rNode := rvOf(r).selfNode()
	ol := dialBeside(t, ms, overlay.Node{ID: rNode.ID, Addr: "nowhere"})
	require.Error(t, ol.err)
	holds := func() bool {
		ms.mu.Lock()
		defer ms.mu.Unlock()
		return slices.ContainsFunc(ms.table.Nodes(), func(n overlay.Node) bool { return n.ID == rNode.ID })
	}
	require.True(t, holds(), "M took R, whose link is up, out of its table")
	info, ok := m.Rendezvous()
	require.True(t, ok)
	assert.Empty(t, info.Types, "M holds no type's key: R does")

	pub := openSession(t, r, "P")
	require.NoError(t, pub.Advertise(ctx, Advertisement{Type: typ}))
	sub, err := openSession(t, m, "S").Subscribe(ctx, `{type ⊑ Reading}`, WithQueue(8))
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, &Event{Type: typ}))
	select {
	case <-sub.C():
	case <-time.After(10 * time.Second):
		t.Fatal("R's event did not reach M's subscriber within 10 s")
	}
	assert.True(t, holds())
}

// TestRendezvousRerouteReleasesAfterNewPath: when a subscription's next
// hop toward its rendezvous switch moves from X to Y (Y joined, nearer
// the key), the registration over X is released only once the one over
// Y is acknowledged: an event the rendezvous switch publishes while Y's
// register is still being installed there reaches the subscriber through
// X. Before, S released over X at once, X's release could reach R first,
// and R then had no route to S's filter.
func TestRendezvousRerouteReleasesAfterNewPath(t *testing.T) {
	const typ = "Reading"
	// R is the rendezvous switch of Reading. S reaches it only through
	// X, and through Y once Y is there: Y is nearer the key than X.
	place, tr := readingPlace(t, "reroute", map[string]uint64{"R": 0, "Y": 1, "X": 2, "S": 3},
		map[string][]string{"R": {"X", "Y"}, "X": {"R", "S", "Y"}, "Y": {"R", "S", "X"}, "S": {"X", "Y"}})
	ctx := context.Background()
	r := activeSwitch(t, tr, place, "R")
	require.NoError(t, r.Join(ctx, tr, ""))
	x := activeSwitch(t, tr, place, "X")
	require.NoError(t, x.Join(ctx, tr, "R"))
	s := activeSwitch(t, tr, place, "S")
	require.NoError(t, s.Join(ctx, tr, "X"))

	pub := openSession(t, r, "P")
	require.NoError(t, pub.Advertise(ctx, Advertisement{Type: typ}))
	sub, err := openSession(t, s, "S").Subscribe(ctx, `{type ⊑ Reading}`, WithQueue(8))
	require.NoError(t, err)
	publish := func(what string) {
		t.Helper()
		require.NoError(t, pub.Publish(ctx, &Event{Type: typ}))
		select {
		case <-sub.C():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no delivery within 10 s", what)
		}
	}
	publish("through X")
	proxiesOf := func(sw *Switch, peer string) int {
		for _, l := range sw.Links() {
			if l.Peer == peer {
				return l.Proxies
			}
		}
		return 0
	}
	require.Positive(t, proxiesOf(r, "X"))

	// R holds Y's register of S's subscription in its installation.
	reached, release := holdInstall(t, r, func(peer, f string) bool { return peer == "Y" && f == "{type ⊑ Reading}" })
	y := activeSwitch(t, tr, place, "Y")
	require.NoError(t, y.Join(ctx, tr, "R"))
	// Y, which knows R, links to S: S learns Y, nearer the key than X.
	joined := make(chan error, 1)
	go func() { // the link's coming up waits for Y's registers
		_, err := rvOf(y).dialWait(ctx, rvOf(s).selfNode())
		joined <- err
	}()
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		for _, sw := range []*Switch{r, x, y, s} {
			t.Logf("%s routes %+v", sw.Name(), sw.Routes())
			for _, l := range sw.Links() {
				t.Logf("%s link %s proxies %d routes %d", sw.Name(), l.Peer, l.Proxies, l.Routes)
			}
		}
		t.Fatal("S's subscription did not reach R through Y within 10 s")
	}
	// Give X's release, if S sent it, time to reach R (it takes
	// microseconds over mem): S must not have sent it yet.
	deadline := time.Now().Add(time.Second)
	for proxiesOf(r, "X") > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !assert.Positive(t, proxiesOf(r, "X"), "S released its registration through X before the one through Y was acknowledged") {
		for _, sw := range []*Switch{r, x, y, s} {
			t.Logf("%s routes %+v", sw.Name(), sw.Routes())
			for _, l := range sw.Links() {
				t.Logf("%s link %s proxies %d routes %d", sw.Name(), l.Peer, l.Proxies, l.Routes)
			}
		}
	}
	publish("while Y's register is installed at R")

	release()
	require.NoError(t, <-joined)
	require.Eventually(t, func() bool { return proxiesOf(r, "X") == 0 && proxiesOf(r, "Y") > 0 }, 10*time.Second, time.Millisecond,
		"once Y's register is acknowledged, S releases through X")
	publish("through Y")
}

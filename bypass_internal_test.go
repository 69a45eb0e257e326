package sion

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// bypassNet is the smallest network with a bypass (S3): a publisher on M,
// the rendezvous switch R, a subscriber on B; M's events cross R to B
// until R bypasses their class, and then go from M straight to B.
type bypassNet struct {
	m, r, b *Switch
	pub     *Session
	sub     *Subscription
	class   linkctl.ClassRef
}

const bypassNetType = "Reading"

func newBypassNet(t *testing.T) *bypassNet {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{{Name: bypassNetType, Attributes: []ontology.Attribute{{Name: "Place", Kind: ontology.KindString}}}})
	require.NoError(t, err)
	key := OverlayKey(bypassNetType)
	near := func(d int64) [16]byte {
		k := key
		binary.BigEndian.PutUint64(k[8:], binary.BigEndian.Uint64(k[8:])+uint64(d))
		return k
	}
	place, err := NewEventPlace(PlaceConfig{Name: "bypass", Ontology: o, Routing: RouteByRendezvous(RendezvousConfig{
		Classes:    map[string]ClassLevels{bypassNetType: {First: "Place"}},
		IDs:        map[string][16]byte{"R": key, "M": near(1), "B": near(-1)},
		Neighbours: map[string][]string{"R": {"M", "B"}, "M": {"R"}, "B": {"R"}},
	})})
	require.NoError(t, err)
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	sws := map[string]*Switch{}
	for _, j := range []struct{ name, via string }{{"R", ""}, {"M", "R"}, {"B", "R"}} {
		sw := activeSwitch(t, tr, place, j.name)
		require.NoError(t, sw.Join(ctx, tr, j.via), j.name)
		sws[j.name] = sw
	}
	n := &bypassNet{m: sws["M"], r: sws["R"], b: sws["B"],
		class: linkctl.ClassRef{Level: 2, Type: bypassNetType, Attr: "Place", Value: classValue(ontology.String("Y"))}}
	n.pub, err = n.m.Open(ctx, SessionConfig{Name: "P"})
	require.NoError(t, err)
	t.Cleanup(func() { n.pub.Close() })
	require.NoError(t, n.pub.Advertise(ctx, Advertisement{Type: bypassNetType}))
	s, err := n.b.Open(ctx, SessionConfig{Name: "S"})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	n.sub, err = s.Subscribe(ctx, `{type ⊑ Reading}`, WithQueue(64))
	require.NoError(t, err)
	// One event of the class crosses R, which learns the class.
	require.NoError(t, n.pub.Publish(ctx, n.event()))
	n.next(t)
	return n
}

func (n *bypassNet) event() *Event {
	return &Event{Type: bypassNetType, Attrs: []ontology.Attr{{Name: "Place", Value: ontology.String("Y")}}}
}

// next returns the subscriber's next event.
func (n *bypassNet) next(t *testing.T) *Event {
	t.Helper()
	select {
	case d := <-n.sub.C():
		return d.Event
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10 s")
	}
	return nil
}

func rvOf(sw *Switch) *rvSwitch { return sw.routing.(*rvSwitch) }

// startBypass has R bypass the class, and waits until M sends it over
// the bypass only.
func (n *bypassNet) startBypass(t *testing.T) {
	r := rvOf(n.r)
	n.r.routeMu.Lock()
	r.mu.Lock()
	val, ok := r.classVals[n.class]
	started := ok && r.startBypass(classOf{n.class, val}, r.now())
	r.mu.Unlock()
	n.r.routeMu.Unlock()
	require.True(t, started, "R starts the bypass")
	m := rvOf(n.m)
	require.Eventually(t, func() bool {
		tb := m.bypass.Load()
		return tb != nil && tb.classes[n.class].only != nil
	}, 10*time.Second, time.Millisecond, "M sends the class over the bypass only")
}

// endBypass has M end the bypass (as Release would), and waits until
// M's bypass filter is gone.
func (n *bypassNet) endBypass(t *testing.T) {
	m := rvOf(n.m)
	n.m.routeMu.Lock()
	m.mu.Lock()
	p := m.paths[n.class]
	if p != nil {
		m.endMerge(n.class, p)
		m.endOver(n.class, p.seq, false, nil, p.toward, p.away)
	}
	m.mu.Unlock()
	n.m.routeMu.Unlock()
	require.NotNil(t, p, "M is the merge point")
	require.Eventually(t, func() bool { return m.bypass.Load() == nil }, 10*time.Second, time.Millisecond, "M's bypass filter is gone")
}

// publishAcross publishes an event of the class on M and, once M has
// matched it and before it goes over any link, runs change — a bypass
// starting or ending meanwhile.
func (n *bypassNet) publishAcross(t *testing.T, change func()) {
	e, err := n.m.place.admit(n.event(), admitPublished)
	require.NoError(t, err)
	e.ID, e.Control.Origin = newEventID(), n.m.cfg.Name
	var once sync.Once
	skip := func(*Session) bool { once.Do(change); return false }
	require.NoError(t, n.m.deliverExcept(context.Background(), nil, nil, skip, e))
}

// TestBypassChangeAcrossAnEvent: an event that a merge point matched as
// its bypass starts or ends reaches the branch point exactly once — it
// goes the old way or the new one, as the filters it matched say. Before
// the fix the event read the bypass rules when it crossed a link, after
// its match: matched before the bypass filter was installed and crossing
// after the merge point had turned to it, it went nowhere (lost — the
// Fig. 2 test's "no delivery within 10 s" while the bypass was set up);
// matched with that filter and crossing after it had gone, it went both
// ways (a duplicate).
func TestBypassChangeAcrossAnEvent(t *testing.T) {
	n := newBypassNet(t)

	n.publishAcross(t, func() { n.startBypass(t) })
	n.next(t)
	require.Eventually(t, func() bool {
		info, _ := n.r.Rendezvous()
		return len(info.Bypasses) == 1 && info.Bypasses[0].Active
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, n.pub.Publish(context.Background(), n.event()))
	n.next(t) // over the bypass

	n.publishAcross(t, func() { n.endBypass(t) })
	n.next(t)
	require.NoError(t, n.pub.Publish(context.Background(), n.event()))
	n.next(t) // across R again

	// Whatever M sent, over the bypass link or across R, has reached B.
	require.NoError(t, n.m.Flush(context.Background()))
	require.NoError(t, n.r.Flush(context.Background()))
	assert.Zero(t, len(n.sub.C()), "an event delivered again")
	for _, l := range n.b.Links() {
		assert.Zero(t, l.Duplicates, "B: duplicates from %s", l.Peer)
	}
}

package sion_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport/mem"
)

// TestRendezvousConfigRefused: NewEventPlace names what is wrong in a
// RendezvousConfig.
func TestRendezvousConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  sion.RendezvousConfig
		want string
	}{
		{"unknown type", sion.RendezvousConfig{Classes: map[string]sion.ClassLevels{"Nope": {}}}, `event type "Nope" is not in the ontology`},
		{"attribute outside the vocabulary", sion.RendezvousConfig{Classes: map[string]sion.ClassLevels{"Notice": {First: "celsius"}}}, `attribute "celsius" is not in the type's vocabulary`},
		{"negative threshold", sion.RendezvousConfig{Threshold: -1}, "must not be negative"},
		{"bypass level 1", sion.RendezvousConfig{BypassLevel: 1}, "BypassLevel is 1; it is 2 or 3"},
		{"window too short", sion.RendezvousConfig{Window: time.Millisecond}, "below 10ms"},
		{"one ID twice", sion.RendezvousConfig{IDs: map[string][16]byte{"a": {1}, "b": {1}}}, `switches "a" and "b" have the same ID`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sion.NewEventPlace(sion.PlaceConfig{Name: "p", Ontology: ont1(t), Routing: sion.RouteByRendezvous(tc.cfg)})
			require.ErrorIs(t, err, sion.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestJoinRefused: Join belongs to places routed by rendezvous, needs a
// serving switch, and is made once.
func TestJoinRefused(t *testing.T) {
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	s1 := newSwitch(t, sion.PlaceConfig{})
	err = s1.Join(ctx, tr, "")
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "Join is for places routed by rendezvous")

	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "p", Ontology: ont1(t), Routing: sion.RouteByRendezvous(sion.RendezvousConfig{})})
	require.NoError(t, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "idle", Place: place})
	require.NoError(t, err)
	defer sw.Close()
	err = sw.Join(ctx, tr, "")
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "serves nowhere")
	require.ErrorIs(t, sw.Join(ctx, nil, ""), sion.ErrInvalidConfig)

	p := newOverlayPlace(t, 2, sion.PlaceConfig{})
	err = p.sws[1].Join(ctx, p.tr, p.addrs[0])
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "has joined the overlay already")
}

// overlayRequest asks the switch at addr for an overlay link as a hand-made
// peer would, and returns what it answers.
func overlayRequest(t *testing.T, p *overlayPlace, addr string, req *linkctl.OverlayLink) wire.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := p.tr.Dial(ctx, addr)
	require.NoError(t, err)
	defer conn.Close()
	send(t, conn, &wire.Hello{Version: 2, Session: req.Switch}) // the session protocol's version
	require.IsType(t, &wire.Welcome{}, recv(t, conn))
	f, err := linkctl.Encode(req, wire.DefaultLimits())
	require.NoError(t, err)
	require.NoError(t, conn.Send(ctx, f))
	return recv(t, conn)
}

// TestOverlayLinkRefused: a peer cannot claim an overlay ID that is not
// its name's, link from another place, or take a member's name.
func TestOverlayLinkRefused(t *testing.T) {
	p := newOverlayPlace(t, 2, sion.PlaceConfig{})
	key := sion.OverlayKey("Alarm")
	for _, tc := range []struct {
		name string
		req  *linkctl.OverlayLink
		want string
	}{
		{"an ID not its name's", &linkctl.OverlayLink{Switch: "mallory", Place: "overlay", Node: linkctl.OverlayNode{ID: key, Addr: "mallory"}}, `switch "mallory" claims overlay ID`},
		{"another place", &linkctl.OverlayLink{Switch: "x", Place: "other", Node: linkctl.OverlayNode{ID: sion.OverlayKey("x"), Addr: "x"}}, `the overlay link request came from place "other"`},
		{"the switch's own name", &linkctl.OverlayLink{Switch: "sw0", Place: "overlay", Node: linkctl.OverlayNode{ID: sion.OverlayKey("sw0"), Addr: "x"}}, `has this switch's name "sw0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := overlayRequest(t, p, p.addrs[0], tc.req)
			e, ok := m.(*wire.Error)
			require.True(t, ok, "%v", m)
			assert.Contains(t, e.Message, tc.want)
			info, _ := p.sws[0].Rendezvous()
			assert.Equal(t, 1, info.Entries, "nothing learned")
		})
	}
}

// TestOverlayLinkInS1PlaceRefused: a place routed by S1 has no overlay.
func TestOverlayLinkInS1PlaceRefused(t *testing.T) {
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	p := &overlayPlace{t: t, tr: tr}
	sw := newSwitch(t, sion.PlaceConfig{Name: "s1"})
	l, err := tr.Listen("s1")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- sw.Serve(context.Background(), l) }()
	t.Cleanup(func() { sw.Close(); <-served })
	m := overlayRequest(t, p, "s1", &linkctl.OverlayLink{Switch: "x", Place: "s1", Node: linkctl.OverlayNode{ID: sion.OverlayKey("x"), Addr: "x"}})
	e, ok := m.(*wire.Error)
	require.True(t, ok, "%v", m)
	assert.Contains(t, e.Message, `place "s1" is not routed by rendezvous`)
}

// TestForgedJoinClosesOnlyItsLink: an admitted overlay neighbour that
// sends a join for another switch's ID on its first hop is a protocol
// error: its link closes, the place goes on.
func TestForgedJoinClosesOnlyItsLink(t *testing.T) {
	p := newOverlayPlace(t, 12, sion.PlaceConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := p.tr.Dial(ctx, p.addrs[0])
	require.NoError(t, err)
	defer conn.Close()
	send(t, conn, &wire.Hello{Version: 2, Session: "eve"})
	require.IsType(t, &wire.Welcome{}, recv(t, conn))
	for _, m := range []linkctl.Message{
		&linkctl.OverlayLink{Switch: "eve", Place: "overlay", Node: linkctl.OverlayNode{ID: sion.OverlayKey("eve"), Addr: "eve"}},
		&linkctl.Join{Key: sion.OverlayKey("sw1"), Joiner: sion.OverlayKey("sw1"), JoinerAddr: "eve"},
	} {
		f, err := linkctl.Encode(m, wire.DefaultLimits())
		require.NoError(t, err)
		require.NoError(t, conn.Send(ctx, f))
	}
	var refusal *wire.Error
	for refusal == nil {
		f, err := conn.Recv(ctx)
		require.NoError(t, err)
		m, err := wire.Decode(f, wire.DefaultLimits())
		require.NoError(t, err)
		refusal, _ = m.(*wire.Error)
	}
	assert.Contains(t, refusal.Message, "not of the peer")
	checkExactlyOnce(t, p) // the others are untouched
}

package sion_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport/mem"
)

// dialRawAgent opens a hand-driven agent's connection to switch at of n:
// the wire handshake, Manage, and the switch's Model.
func dialRawAgent(t *testing.T, n *mnet, at int, name string) *rawLink {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	conn, err := n.tr.Dial(ctx, n.addrs[at])
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	l := &rawLink{t: t, conn: conn, ctx: ctx}
	l.send(&wire.Hello{Version: 2, Session: "agent:" + name})
	require.IsType(t, &wire.Welcome{}, l.recv())
	l.sendControl(&linkctl.Manage{Agent: name, Place: n.place.Name()})
	c, ok := l.recv().(*wire.Control)
	require.True(t, ok)
	m, err := linkctl.Decode(c)
	require.NoError(t, err)
	require.IsType(t, &linkctl.Model{}, m)
	return l
}

// TestManagedHostileAgent: what an admitted agent's connection carries
// that a switch cannot use — messages of the wrong direction or kind, a
// frame that does not decode, a Deploy with a filter that does not
// compile — ends that connection, logged, and nothing else: the
// constraints deployed stay, granted subscriptions keep their events,
// and the next agent manages the place. A Deploy naming a link the
// switch does not have and a Verdict on no request are harmless (the
// link may just have ended, the request just been cancelled).
func TestManagedHostileAgent(t *testing.T) {
	ctx := context.Background()
	n := newMnet(t, sion.PlaceConfig{}, line(2))
	first := n.startAgent("agent")
	p := open(t, n.sws[0], "p")
	require.NoError(t, p.Advertise(ctx, sion.Advertisement{Type: "Reading"}))
	sub := subscribe(t, open(t, n.sws[1], "c"), `{type ⊑ Reading; n > 1}`, sion.WithQueue(4096))
	deployed := map[string][]string{"sw0→sw1": {"{type ⊑ Reading; n > 1}"}}
	n.settledAt(deployed)
	require.NoError(t, first.Close()) // the hand-driven agents take its name

	k := 0
	delivers := func(t *testing.T) {
		t.Helper()
		k++
		publish(t, p, &sion.Event{Type: "Reading", Attrs: attrs("n", 100+k)})
		publish(t, p, &sion.Event{Type: "Reading", Attrs: attrs("n", 0)})
		n.flush(0)
		got := queued(sub)
		if assert.Len(t, got, 1) {
			assert.Equal(t, int64(100+k), must(got[0].Event.Value("n")).Int())
		}
		assert.Equal(t, deployed, n.constraints())
	}
	for _, tc := range []struct {
		name string
		send func(l *rawLink)
		log  string
	}{
		{"bleeder", func(l *rawLink) { l.sendControl(&linkctl.Bleeder{Deployment: 1, Filter: 1}) }, "sent a bleeder message"},
		{"model", func(l *rawLink) { l.sendControl(&linkctl.Model{Switch: "sw0"}) }, "sent a model message"},
		{"model change", func(l *rawLink) {
			l.sendControl(&linkctl.ModelChange{Op: linkctl.ChangeCancel, Key: 1})
		}, "sent a model change message"},
		{"detected", func(l *rawLink) { l.sendControl(&linkctl.Detected{Deployment: 1, Filter: 1}) }, "sent a detected message"},
		{"manage again", func(l *rawLink) { l.sendControl(&linkctl.Manage{Agent: "agent", Place: n.place.Name()}) }, "sent a manage message"},
		{"link request", func(l *rawLink) {
			l.sendControl(&linkctl.LinkRequest{Switch: "mallory", Place: n.place.Name(), Link: 1})
		}, "sent a link request message"},
		{"hello", func(l *rawLink) { l.send(&wire.Hello{Version: 2}) }, "sent a Hello frame"},
		{"garbage", func(l *rawLink) { require.NoError(t, l.conn.Send(l.ctx, []byte{0xff, 0xff, 0xff})) }, "protocol error"},
		{"malformed control", func(l *rawLink) { l.send(&wire.Control{Body: []byte{byte(linkctl.KindDeploy), 0x80}}) }, "malformed deploy"},
		{"filter that does not compile", func(l *rawLink) {
			l.sendControl(&linkctl.Deploy{Deployment: 1000, Filters: []linkctl.DeployFilter{{ID: 1, Peer: "sw1", Constraint: []string{"{type ⊑ Alarm}", "{type ⊑"}}}})
		}, "does not compile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := dialRawAgent(t, n, 0, "agent")
			tc.send(l)
			l.closedWith()
			require.Eventually(t, func() bool { return strings.Contains(n.logs[0].String(), tc.log) }, 10*time.Second, time.Millisecond, "logged %q", tc.log)
			delivers(t)
		})
	}
	t.Run("harmless", func(t *testing.T) {
		l := dialRawAgent(t, n, 0, "agent")
		l.sendControl(&linkctl.Deploy{Deployment: 2000, Filters: []linkctl.DeployFilter{{ID: 1, Peer: "nowhere", Constraint: []string{"{}"}, Bag: []uint64{7}, Send: true}},
			Relays: []linkctl.Relay{{Bleeder: 7, To: []string{"nowhere", "sw1"}}}})
		l.sendControl(&linkctl.Verdict{Key: 12345})
		l.sendControl(&linkctl.Verdict{Key: 12345, Advert: true, Error: "no"})
		l.sendControl(&linkctl.Deploy{Deployment: 1}) // an old deployment: ignored
		// Still connected: the switch still reads, and ends the
		// connection on what it must.
		l.sendControl(&linkctl.Bleeder{Deployment: 2000, Filter: 1})
		l.closedWith()
		require.Eventually(t, func() bool { return strings.Count(n.logs[0].String(), "sent a bleeder message") == 2 }, 10*time.Second, time.Millisecond)
		delivers(t)
	})

	// The next agent learns the switches' state and manages the place.
	n.startAgent("agent")
	n.settledAt(deployed)
	wide := subscribe(t, open(t, n.sws[1], "c2"), `{type ⊑ Reading}`, sion.WithQueue(4096))
	n.settledAt(map[string][]string{"sw0→sw1": {"{type ⊑ *}"}})
	publish(t, p, &sion.Event{Type: "Reading", Attrs: attrs("n", 0)})
	n.flush(0)
	assert.Len(t, queued(wide), 1)
}

// TestBleederOnAnUnmanagedLink: a place that is not managed ends a link
// that carries a bleeder (ErrProtocol, in the error frame).
func TestBleederOnAnUnmanagedLink(t *testing.T) {
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	n := newNetwork(t, tr, func(i int) string { return fmt.Sprintf("sw%d", i) }, sion.PlaceConfig{}, []int{-1})
	sub := subscribe(t, open(t, n.sws[0], "c"), `{type ⊑ Alarm}`)
	l := dialRawLink(t, n, 0, "mallory")
	l.sendControl(&linkctl.Bleeder{Deployment: 1, Filter: 1})
	msg := l.closedWith()
	assert.Contains(t, msg, sion.ErrProtocol.Error())
	assert.Contains(t, msg, "bleeder")
	publish(t, open(t, n.sws[0], "p"), &sion.Event{Type: "Alarm"})
	assert.Len(t, queued(sub), 1, "the switch serves on")
}

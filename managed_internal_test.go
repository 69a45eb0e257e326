package sion

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/internal/linkctl"
)

// routerTo returns sw's shared link to peer.
func routerTo(t *testing.T, sw *Switch, peer string) *router {
	t.Helper()
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	for _, r := range sw.routers {
		if r.peer == peer {
			return r
		}
	}
	t.Fatalf("%s has no link to %s", sw.cfg.Name, peer)
	return nil
}

// early returns what m keeps of bleeders that came before their Deploy.
func (m *managedSwitch) earlyState() (int, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.early), m.earlyOf
}

// TestManagedEarlyBleedersBounded: a neighbour that sends bleeders of
// deployments the switch has not been told of — one over and over, many
// of one deployment, one of each of many — costs the switch at most
// maxEarly of them; its contracts hold and its agent goes on deploying.
func TestManagedEarlyBleedersBounded(t *testing.T) {
	f := newFig1(t, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n3 := f.sw["N3"].routing.(*managedSwitch)
	r := routerTo(t, f.sw["N1"], "N3") // N1 plays the hostile neighbour
	const future = 1 << 40
	flush := func() {
		t.Helper()
		require.NoError(t, f.sw["N1"].Flush(ctx)) // after the bleeders, in the link's order
	}

	for range 3 * maxEarly {
		r.sendControl(&linkctl.Bleeder{Deployment: future, Filter: 7})
	}
	flush()
	size, of := n3.earlyState()
	assert.Equal(t, 1, size, "the same bleeder again and again")
	assert.Equal(t, uint64(future), of)

	for id := range uint64(3 * maxEarly) {
		r.sendControl(&linkctl.Bleeder{Deployment: future, Filter: id})
	}
	flush()
	size, _ = n3.earlyState()
	assert.Equal(t, maxEarly, size, "many bleeders of one deployment")

	for k := range uint64(3 * maxEarly) {
		r.sendControl(&linkctl.Bleeder{Deployment: future + 1 + k, Filter: k})
	}
	flush()
	size, of = n3.earlyState()
	assert.Equal(t, 1, size, "one bleeder of each of many deployments: the last one's")
	assert.Equal(t, uint64(future+3*maxEarly), of)

	// The place goes on: C1's new subscription is granted and gets its
	// events, and no more.
	sub, err := f.c1.Subscribe(ctx, "{type ⊑ Alarm}")
	require.NoError(t, err)
	require.NoError(t, f.prod["P2"].Publish(ctx, &Event{Type: "Alarm"}))
	require.NoError(t, f.prod["P1"].Publish(ctx, &Event{Type: "Reading"}))
	got := recvAll(t, sub, 1)
	assert.Equal(t, "Alarm", got[0].Event.Type)
}

// TestManagedAgentForgetsConsumers: the agent's model keeps a consumer
// filter while its session has subscriptions, and no longer: sessions
// that come, subscribe and go — or are refused — leave nothing behind.
func TestManagedAgentForgetsConsumers(t *testing.T) {
	f := newFig1(t, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	model := func() (cons, byID, dirs int) {
		f.agent.mu.Lock()
		defer f.agent.mu.Unlock()
		return len(f.agent.md.cons), len(f.agent.md.byID), len(f.agent.md.dirs)
	}
	cons0, _, dirs0 := model()
	require.Equal(t, 2, cons0, "C2 and C3")
	for i := range 30 {
		s := f.open("N3", "passing")
		_, err := s.Subscribe(ctx, "{type ⊑ Alarm}")
		require.NoError(t, err, "session %d", i)
		_, err = s.Subscribe(ctx, "{type ⊑ Reading}")
		require.NoError(t, err, "session %d", i)
		require.NoError(t, s.Close())
		f.drain() // OnDeployment must not block
	}
	c1, err := f.c1.Subscribe(ctx, "{type ⊑ Changed}")
	require.NoError(t, err)
	require.NoError(t, c1.Cancel())
	// A refused subscription too: N1 holds its bleeders.
	f.sw["N1"].routing.(*managedSwitch).hold.Store(true)
	_, err = f.open("N4", "refused").Subscribe(ctx, "{type ⊑ Alarm}")
	require.ErrorIs(t, err, ErrNotGranted)
	f.sw["N1"].routing.(*managedSwitch).hold.Store(false)
	require.Eventually(t, func() bool {
		cons, byID, dirs := model()
		return cons == cons0 && dirs == dirs0 && byID == cons+dirs
	}, 10*time.Second, time.Millisecond, "the model keeps C2 and C3 alone")
}

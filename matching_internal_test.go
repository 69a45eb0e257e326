package sion

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// TestUnregisterWaitsForDeliveriesInFlight: a delivery whose Match
// reported a subscription finds it when it looks it up, even though the
// subscription was unregistered in between — the index no longer reports
// it to a Match that starts later, but the switch forgets it only once
// that delivery has left. Without this, a proxy filter replaced make
// before break (a cover released under PlaceConfig.Covering, a TTL
// raised) lost the events matched just before its replacement went in
// (TestCoveringReleaseMakesBeforeBreak missed one event in about ten runs
// on a loaded machine).
func TestUnregisterWaitsForDeliveriesInFlight(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "Notice"}})
	require.NoError(t, err)
	p, err := NewEventPlace(PlaceConfig{Name: "p", Ontology: o})
	require.NoError(t, err)
	sw, err := NewSwitch(SwitchConfig{Name: "sw", Place: p})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sw.Close()) })
	ctx := context.Background()
	s, err := sw.Open(ctx, SessionConfig{Name: "app"})
	require.NoError(t, err)
	sub, err := s.Subscribe(ctx, `{type ⊑ Notice}`)
	require.NoError(t, err)
	e, err := p.admit(&Event{Type: "Notice"}, admitPublished)
	require.NoError(t, err)
	reported := func() bool {
		found := false
		sw.index.Match(e, func(id uint64, _ float64) { found = found || id == sub.id })
		return found
	}
	known := func() bool {
		sw.mu.RLock()
		defer sw.mu.RUnlock()
		return sw.subs[sub.id] == sub
	}

	// A delivery enters and its Match reports the subscription.
	g := sw.matching.enter()
	require.True(t, reported())
	done := make(chan struct{})
	go func() {
		sw.unregister(sub)
		close(done)
	}()
	// Once a new Match no longer reports it, the delivery in flight must
	// still find it, however long it takes to look.
	require.Eventually(t, func() bool { return !reported() }, 10*time.Second, time.Millisecond)
	for range 100 {
		runtime.Gosched()
	}
	time.Sleep(10 * time.Millisecond)
	assert.True(t, known(), "forgotten while a delivery that matched it was in flight")
	select {
	case <-done:
		t.Fatal("unregister returned while a delivery that matched the subscription was in flight")
	default:
	}
	sw.matching.leave(g)
	<-done
	assert.False(t, known(), "still known once the delivery left")

}

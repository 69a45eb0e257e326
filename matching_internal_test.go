package sion

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// TestUnregisterWaitsForDeliveriesInFlight: a delivery whose Match
// reported a subscription finds it when it looks it up, even though the
// subscription was unregistered meanwhile — the switch takes it out of the
// index, and forgets it, only once that delivery has left. Without this, a
// proxy filter replaced make before break (a cover released under
// PlaceConfig.Covering, a TTL raised) lost the events matched just before
// its replacement went in (TestCoveringReleaseMakesBeforeBreak missed one
// event in about ten runs on a loaded machine).
func TestUnregisterWaitsForDeliveriesInFlight(t *testing.T) {
	sw, p := newMatchingSwitch(t)
	waits := make(chan struct{}, 2)
	sw.matching.testWait = func() {
		select { // never blocks: Close unregisters what is left, and waits too
		case waits <- struct{}{}:
		default:
		}
	}
	ctx := context.Background()
	s, err := sw.Open(ctx, SessionConfig{Name: "app"})
	require.NoError(t, err)
	sub, err := s.Subscribe(ctx, `{type ⊑ Notice}`)
	require.NoError(t, err)
	e, err := p.admit(&Event{Type: "Notice"}, admitPublished)
	require.NoError(t, err)
	reported := func() bool { return indexReports(sw, e, sub.id) }
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
	<-waits // unregister waits for the delivery in flight
	assert.True(t, reported(), "taken out of the index while a delivery that may match it was in flight")
	assert.True(t, known(), "forgotten while a delivery that matched it was in flight")
	select {
	case <-done:
		t.Fatal("unregister returned while a delivery that matched the subscription was in flight")
	default:
	}
	sw.matching.leave(g)
	<-done
	assert.False(t, reported(), "still in the index once unregister returned")
	assert.False(t, known(), "still known once the delivery left")
}

// TestUnregisterMakeBeforeBreakAcrossGroups: a proxy filter replaced make
// before break by one of another type group — {type ⊑ Notice} by
// {type ⊑ *}, as a managed place (S2) widens a constraint — loses no
// event whose Match began before the replacement's Add. filter.Index
// visits the event's type groups one after the other, and Add and Remove
// change a group in place without waiting for a Match in progress: a Match
// that read the group of {type ⊑ *} before the Add and reads the group of
// Notice after the Remove finds neither. So unregister lets the Matches in
// progress end before it takes the old filter out of the index. The
// delivery here is held between its enter and its Match, where the held
// Match of the fault was; before the fix unregister took the old filter
// out at once (TestManagedContractDuringDeployments lost one event in a
// few runs on a loaded machine).
func TestUnregisterMakeBeforeBreakAcrossGroups(t *testing.T) {
	sw, p := newMatchingSwitch(t)
	ctx := context.Background()
	s, err := sw.Open(ctx, SessionConfig{Name: "app"})
	require.NoError(t, err)
	old, err := s.Subscribe(ctx, `{type ⊑ Notice}`)
	require.NoError(t, err)
	held, release := make(chan struct{}), make(chan struct{})
	sw.matching.testEntered = func(e *Event) {
		if e.Type == "Notice" {
			close(held)
			<-release
		}
	}
	waits := make(chan struct{}, 2)
	sw.matching.testWait = func() {
		select { // never blocks: Close unregisters what is left, and waits too
		case waits <- struct{}{}:
		default:
		}
	}
	published := make(chan error, 1)
	go func() { published <- s.Publish(ctx, &Event{Type: "Notice"}) }()
	<-held // a delivery has entered; its Match has not begun

	// The replacement goes in, then the old filter is unregistered.
	repl, err := s.Subscribe(ctx, `{type ⊑ *}`)
	require.NoError(t, err)
	e, err := p.admit(&Event{Type: "Notice"}, admitPublished)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		s.forget(old)
		close(done)
	}()
	<-waits
	// The held Match may have read the group of {type ⊑ *} already: the
	// old filter must still be there for it.
	assert.True(t, indexReports(sw, e, old.id), "the old filter left the index while a Match that may have missed its replacement was in progress")
	close(release)
	require.NoError(t, <-published)
	<-done
	assert.False(t, indexReports(sw, e, old.id))
	assert.True(t, indexReports(sw, e, repl.id))
	assert.Positive(t, count(repl)+count(old), "the event reached the session, through the old filter or its replacement")
}

func newMatchingSwitch(t *testing.T) (*Switch, *EventPlace) {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{{Name: "Notice"}})
	require.NoError(t, err)
	p, err := NewEventPlace(PlaceConfig{Name: "p", Ontology: o})
	require.NoError(t, err)
	sw, err := NewSwitch(SwitchConfig{Name: "sw", Place: p})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sw.Close()) })
	return sw, p
}

// indexReports reports whether a Match of e on sw's index reports id.
func indexReports(sw *Switch, e *Event, id uint64) bool {
	found := false
	sw.index.Match(e, func(got uint64, _ float64) { found = found || got == id })
	return found
}

// count returns how many deliveries wait in sub's queue, and drains them.
func count(sub *Subscription) int {
	n := 0
	for {
		select {
		case _, ok := <-sub.C():
			if !ok {
				return n
			}
			n++
		default:
			return n
		}
	}
}

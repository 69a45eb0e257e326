package sion_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
)

// Regression tests for what the newcomer trial of 2026-12-01 found.

func TestReadersRefuseTimesOutOfRange(t *testing.T) {
	tp := timePlace(t) // ONT-1 has no time attribute
	jr, err := tp.NewJSONReader(sion.JSONFields{Type: "Tick", Attrs: []sion.AttrPath{{Name: "at", Path: "at"}}})
	require.NoError(t, err)
	xr, err := tp.NewXMLReader(sion.XMLFields{Type: "Tick", Attrs: []sion.AttrPath{{Name: "at", Path: "@at"}}})
	require.NoError(t, err)
	for _, ts := range []string{"3000-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "2262-04-12T00:00:00Z", "1677-09-21T00:00:00Z"} {
		_, err := jr.Read([]byte(`{"at": "` + ts + `"}`))
		require.ErrorIs(t, err, sion.ErrInvalidEvent, ts)
		assert.Contains(t, err.Error(), "the times sion holds")
		_, err = xr.Read([]byte(`<tick at="` + ts + `"/>`))
		require.ErrorIs(t, err, sion.ErrInvalidEvent, ts)
	}
	ev, err := jr.Read([]byte(`{"at": "2262-04-11T23:47:16Z"}`))
	require.NoError(t, err)
	assert.Equal(t, time.Date(2262, 4, 11, 23, 47, 16, 0, time.UTC).UnixNano(), must(ev.Value("at")).Int())
	_, err = jr.Read([]byte(`not json`))
	require.ErrorIs(t, err, sion.ErrInvalidEvent, "a fixed type does not excuse a document that is not JSON")
}

func TestSubscribeRacingCloseLeavesNoFilter(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	pub := open(t, sw, "pub")
	for i := range 400 {
		s := open(t, sw, fmt.Sprint("s", i))
		var wg sync.WaitGroup
		wg.Go(func() { s.Subscribe(context.Background(), `{type ⊑ Reading; n >= 1}`) })
		wg.Go(func() { s.Close() })
		wg.Wait()
		publish(t, pub, reading(1))
	}
	require.NoError(t, pub.Close())
	st := sw.Stats()
	assert.Equal(t, 0, st.Subscriptions)
	assert.Equal(t, 0, st.Filters, "no filter left behind in the index")
}

func TestSwitchCloseWaitsForHandlersOfClosingSessions(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	s := open(t, sw, "app")
	release, started := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	subscribe(t, s, `{type ⊑ Reading}`, sion.WithHandler(func(sion.Delivery) {
		close(started)
		<-release
		finished.Store(true)
	}))
	publish(t, s, reading(1))
	<-started
	go s.Close() // waits for the handler
	require.Eventually(t, func() bool { return s.Publish(context.Background(), reading(2)) != nil }, 2*time.Second, time.Millisecond)
	go func() {
		time.Sleep(20 * time.Millisecond)
		close(release)
	}()
	require.NoError(t, sw.Close())
	assert.True(t, finished.Load(), "Switch.Close returned before the handler did")
}

func TestProfilesAndConditionsResolveSynonyms(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	ctx := context.Background()
	s, err := sw.Open(ctx, sion.SessionConfig{Name: "hot", Profile: attrs("tempC", 40.0)})
	require.NoError(t, err)
	sub := subscribe(t, s, `{type ⊑ Alarm}`)
	pub := open(t, sw, "pub")
	for _, c := range []string{`{tempC > 30}`, `{celsius > 30}`} {
		publish(t, pub, &sion.Event{Type: "FireAlarm", Condition: filter.MustCompile(c)})
	}
	assert.Equal(t, 2, count(sub), "a condition on a synonym sees the canonical profile attribute")
	_, err = sw.Open(ctx, sion.SessionConfig{Name: "twice", Profile: attrs("tempC", 1.0, "celsius", 2.0)})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	require.ErrorIs(t, s.SetProfile(attrs("tempC", 1.0, "celsius", 2.0)), sion.ErrInvalidConfig)
}

func TestSubscribeOptionLimits(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	s, other := open(t, sw, "s"), open(t, sw, "other")
	ctx := context.Background()
	for _, n := range []int{0, -1, sion.MaxQueue + 1, 1 << 45} {
		_, err := s.Subscribe(ctx, `{type ⊑ Reading}`, sion.WithQueue(n))
		require.ErrorIs(t, err, sion.ErrInvalidConfig, "queue %d", n)
	}
	sub, err := s.Subscribe(ctx, `{type ⊑ Reading}`, nil, sion.WithQueue(sion.MaxQueue))
	require.NoError(t, err, "a nil option is skipped")
	require.ErrorIs(t, other.Unsubscribe(sub), sion.ErrInvalidConfig, "not other's subscription")
	require.NoError(t, s.Unsubscribe(sub))
}

func TestSpillAndLookInShareOneSpoolEntry(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	s := open(t, sw, "s")
	a := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(1), sion.WithOverflow(sion.Spill))
	b := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(1), sion.WithOverflow(sion.Spill))
	l := subscribe(t, s, `{type ⊑ Reading}`, sion.WithLookIn())
	publish(t, s, reading(1)) // a and b queue it; l spools it
	publish(t, s, reading(2)) // a and b spill it; l spools it: one entry
	got, err := s.Pull(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, ns(got), "each event once")
	ids := func(d sion.Delivery) (out []uint64) {
		for _, m := range d.Matched {
			out = append(out, m.Subscription)
		}
		return out
	}
	assert.Equal(t, []uint64{a.ID(), b.ID(), l.ID()}, ids(got[1]))
	assert.Equal(t, uint64(1), a.Stats().Spilled)
	assert.Equal(t, []int64{1}, ns(queued(a)))
}

func TestBlockedPublisherWokenByItsOwnClose(t *testing.T) {
	variants(t, sion.PlaceConfig{}, func(t *testing.T, w *world) {
		s := w.session(t, "subscriber")
		if w.remote {
			// Remote: Block is refused, since it would hold up the session's
			// connection (TestRemoteBlockRefused).
			_, err := s.Subscribe(context.Background(), `{type ⊑ Reading}`, sion.WithQueue(1), sion.WithOverflow(sion.Block))
			require.ErrorIs(t, err, sion.ErrInvalidConfig)
			return
		}
		sub := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(1), sion.WithOverflow(sion.Block))
		pub := w.session(t, "publisher")
		publish(t, pub, reading(1))
		settle(t, s)
		errc := make(chan error, 1)
		go func() { errc <- pub.Publish(context.Background(), reading(2)) }()
		require.Eventually(t, func() bool { return sub.Stats().Matched == 2 }, 2*time.Second, time.Millisecond)
		require.NoError(t, pub.Close())
		require.ErrorIs(t, <-errc, sion.ErrClosed)
		assert.Equal(t, uint64(1), sub.Stats().Dropped, "the event it could not deliver is counted")
	})
}

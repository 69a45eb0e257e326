package sion_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

func reading(n int) *sion.Event { return &sion.Event{Type: "Reading", Attrs: attrs("n", n)} }

func ns(ds []sion.Delivery) []int64 {
	var out []int64
	for _, d := range ds {
		out = append(out, must(d.Event.Value("n")).Int())
	}
	return out
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestOverflowPolicies publishes 10 events to a subscription whose queue
// holds 3 and that nobody reads, under each policy, and checks exactly
// what stays, what is dropped and what the counters say.
func TestOverflowPolicies(t *testing.T) {
	for _, c := range []struct {
		policy                      sion.Overflow
		queue, spool                []int64
		delivered, dropped, spilled uint64
	}{
		{sion.DropNewest, seq(1, 3), nil, 3, 7, 0},
		{sion.DropOldest, seq(8, 10), nil, 10, 7, 0}, // all 10 were handed over; 7 were evicted later (B35: counters never go back)
		{sion.Spill, seq(1, 3), seq(4, 10), 3, 0, 7},
	} {
		t.Run(c.policy.String(), func(t *testing.T) {
			sw := newSwitch(t, sion.PlaceConfig{})
			s := open(t, sw, "app")
			var slow []sion.SubscriptionStats
			sub := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(3), sion.WithOverflow(c.policy),
				sion.WithSlowConsumer(func(st sion.SubscriptionStats) { slow = append(slow, st) }))
			for n := 1; n <= 10; n++ {
				publish(t, s, reading(n))
			}
			st := sub.Stats()
			assert.Equal(t, sion.SubscriptionStats{ID: sub.ID(), Matched: 10, Delivered: c.delivered, Dropped: c.dropped, Spilled: c.spilled, Queued: 3, Slow: true}, st)
			require.Len(t, slow, 1, "one slow-consumer report per episode")
			assert.Equal(t, ns(queued(sub)), c.queue)
			if c.spool != nil {
				got, err := s.Pull(context.Background(), 0)
				require.NoError(t, err)
				assert.Equal(t, c.spool, ns(got))
			}
			assert.Equal(t, c.dropped, sw.Stats().Dropped)
		})
	}

	t.Run("block", func(t *testing.T) {
		sw := newSwitch(t, sion.PlaceConfig{})
		s := open(t, sw, "app")
		blocked := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(2), sion.WithOverflow(sion.Block))
		other := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(100))
		publish(t, s, reading(1))
		publish(t, s, reading(2))
		// Full: the publisher waits until its context ends, then the event
		// is dropped for this subscription only.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := s.Publish(ctx, reading(3))
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, uint64(1), blocked.Stats().Dropped)
		assert.Equal(t, seq(1, 3), ns(queued(other)), "the other subscription got it")
		// A consumer makes room: the publisher waits for it, and nothing is lost.
		done := make(chan error, 1)
		go func() { done <- s.Publish(context.Background(), reading(4)) }()
		d, err := blocked.Next(context.Background())
		require.NoError(t, err)
		require.NoError(t, <-done)
		assert.Equal(t, []int64{1}, ns([]sion.Delivery{d}))
		assert.Equal(t, []int64{2, 4}, ns(queued(blocked)))
		// Cancel wakes a publisher blocked on the subscription.
		publish(t, s, reading(5))
		publish(t, s, reading(6))
		go func() { done <- s.Publish(context.Background(), reading(7)) }()
		require.Eventually(t, func() bool { return blocked.Stats().Matched == 7 }, 2*time.Second, time.Millisecond)
		require.NoError(t, blocked.Cancel())
		require.NoError(t, <-done)
	})

	t.Run("drop-newest resumes after the queue empties", func(t *testing.T) {
		sw := newSwitch(t, sion.PlaceConfig{})
		s := open(t, sw, "app")
		sub := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(2))
		for n := 1; n <= 4; n++ {
			publish(t, s, reading(n))
		}
		_, err := sub.Next(context.Background()) // 1 out, 2 still queued: the episode goes on
		require.NoError(t, err)
		publish(t, s, reading(5))
		assert.Equal(t, []int64{2}, ns(queued(sub)))
		publish(t, s, reading(6)) // the queue was emptied: a new episode starts
		assert.Equal(t, []int64{6}, ns(queued(sub)))
		assert.Equal(t, uint64(3), sub.Stats().Dropped)
		assert.False(t, sub.Stats().Slow)
	})
}

func TestLookIn(t *testing.T) {
	ctx := context.Background()
	t.Run("one spool entry per event for the session", func(t *testing.T) {
		sw := newSwitch(t, sion.PlaceConfig{})
		s := open(t, sw, "away")
		a := subscribe(t, s, `{type ⊑ Reading}`, sion.WithLookIn())
		b := subscribe(t, s, `{type ⊑ Reading; n >= 2}`, sion.WithLookIn())
		assert.Nil(t, a.C())
		_, err := a.Next(ctx)
		require.ErrorIs(t, err, sion.ErrNoQueue)
		pub := open(t, sw, "pub")
		for n := 1; n <= 3; n++ {
			publish(t, pub, reading(n))
		}
		got, err := s.Pull(ctx, 2)
		require.NoError(t, err)
		require.Equal(t, []int64{1, 2}, ns(got))
		assert.Equal(t, []sion.Match{{Subscription: a.ID()}}, got[0].Matched)
		assert.Equal(t, []sion.Match{{Subscription: a.ID()}, {Subscription: b.ID(), Score: 1}}, got[1].Matched)
		got, err = s.Pull(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, []int64{3}, ns(got))
		// Pull waits for the next event.
		res := make(chan []sion.Delivery)
		go func() {
			got, _ := s.Pull(ctx, 1)
			res <- got
		}()
		publish(t, pub, reading(4))
		assert.Equal(t, []int64{4}, ns(<-res))
		// ... and gives up with its context.
		tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		_, err = s.Pull(tctx, 1)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, uint64(4), a.Stats().Delivered)
	})
	t.Run("spool size and retention", func(t *testing.T) {
		sw := newSwitch(t, sion.PlaceConfig{})
		s, err := sw.Open(ctx, sion.SessionConfig{Name: "away", SpoolSize: 3, SpoolRetention: time.Hour})
		require.NoError(t, err)
		sub := subscribe(t, s, `{type ⊑ Reading}`, sion.WithLookIn())
		for n := 1; n <= 5; n++ {
			publish(t, s, reading(n))
		}
		st := s.Stats()
		assert.Equal(t, 3, st.Spooled)
		assert.Equal(t, uint64(2), st.SpoolDropped)
		assert.Equal(t, uint64(2), sub.Stats().Dropped)
		assert.Equal(t, uint64(5), sub.Stats().Delivered, "all 5 were spooled; 2 were evicted later, and Delivered never goes back (B35)")
		got, err := s.Pull(ctx, 0)
		require.NoError(t, err)
		assert.Equal(t, seq(3, 5), ns(got), "the oldest were dropped")

		s2, err := sw.Open(ctx, sion.SessionConfig{Name: "brief", SpoolRetention: time.Nanosecond})
		require.NoError(t, err)
		subscribe(t, s2, `{type ⊑ Reading}`, sion.WithLookIn())
		publish(t, s2, reading(1))
		time.Sleep(time.Millisecond) // let the retention pass: the thing under test is time itself
		tctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		defer cancel()
		_, err = s2.Pull(tctx, 0)
		require.ErrorIs(t, err, context.DeadlineExceeded, "the expired event is gone")
		assert.Equal(t, uint64(1), s2.Stats().SpoolDropped)
	})
	t.Run("Close wakes Pull", func(t *testing.T) {
		sw := newSwitch(t, sion.PlaceConfig{})
		s := open(t, sw, "away")
		subscribe(t, s, `{type ⊑ Reading}`, sion.WithLookIn())
		errc := make(chan error)
		go func() {
			_, err := s.Pull(ctx, 1)
			errc <- err
		}()
		require.NoError(t, s.Close())
		require.ErrorIs(t, <-errc, sion.ErrClosed)
	})
}

func TestPatronage(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	ctx := context.Background()
	var subs []*sion.Subscription
	var sessions []*sion.Session
	for _, tier := range []int{1, 2, 3} {
		s, err := sw.Open(ctx, sion.SessionConfig{Name: fmt.Sprint("tier", tier), Profile: attrs("tier", tier)})
		require.NoError(t, err)
		sessions = append(sessions, s)
		subs = append(subs, subscribe(t, s, `{type ⊑ Alarm}`))
	}
	none, err := sw.Open(ctx, sion.SessionConfig{Name: "no profile"})
	require.NoError(t, err)
	subs = append(subs, subscribe(t, none, `{type ⊑ Alarm}`))

	pub := open(t, sw, "pub")
	cond, err := filter.CompileCondition(`{tier >= 2}`)
	require.NoError(t, err)
	publish(t, pub, &sion.Event{Type: "FireAlarm", Condition: cond})
	publish(t, pub, &sion.Event{Type: "FireAlarm"})
	var got []int
	for _, sub := range subs {
		got = append(got, count(sub))
	}
	assert.Equal(t, []int{1, 2, 2, 1}, got, "the condition holds for tiers 2 and 3 only; no condition reaches all")

	// A new profile applies to events published afterwards.
	s1 := subs[0]
	require.NoError(t, sessions[0].SetProfile(attrs("tier", 5)))
	assert.Equal(t, attrs("tier", 5), sessions[0].Profile())
	publish(t, pub, &sion.Event{Type: "FireAlarm", Condition: cond})
	assert.Equal(t, 1, count(s1))
}

// TestConcurrentPublishSubscribe runs publishers, subscribers that come
// and go, and readers at once (under -race in CI), and checks per-publisher
// order and exactly-once delivery for subscriptions that stay.
func TestConcurrentPublishSubscribe(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	const publishers, perPublisher = 4, 500
	stay := open(t, sw, "stay")
	var mu sync.Mutex
	seen := map[string][]int64{} // by publisher, in arrival order
	sub := subscribe(t, stay, `{type ⊑ Notice}`, sion.WithQueue(publishers*perPublisher), sion.WithHandler(func(d sion.Delivery) {
		mu.Lock()
		defer mu.Unlock()
		z := must(d.Event.Value("zone")).Str()
		seen[z] = append(seen[z], must(d.Event.Value("seq")).Int())
	}))
	stop := make(chan struct{})
	var churn sync.WaitGroup
	var churned atomic.Int64
	for i := range 2 {
		churn.Go(func() {
			s := open(t, sw, fmt.Sprint("churn", i))
			for {
				select {
				case <-stop:
					return
				default:
				}
				sub, err := s.Subscribe(context.Background(), fmt.Sprintf(`{type ⊑ Notice; seq >= %d}`, churned.Add(1)%perPublisher), sion.WithQueue(4))
				if err != nil {
					t.Error(err)
					return
				}
				_ = queued(sub)
				if err := sub.Cancel(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var pubs sync.WaitGroup
	for p := range publishers {
		pubs.Go(func() {
			s := open(t, sw, fmt.Sprint("pub", p))
			for i := range perPublisher {
				if err := s.Publish(context.Background(), &sion.Event{Type: "Notice", Attrs: attrs("zone", fmt.Sprint("p", p), "seq", i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	pubs.Wait()
	close(stop)
	churn.Wait()
	require.NoError(t, stay.Drain(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, publishers)
	for p, got := range seen {
		assert.Equal(t, seq(0, perPublisher-1), got, "publisher %s: every event once, in order", p)
	}
	assert.Equal(t, uint64(publishers*perPublisher), sub.Stats().Delivered)
	assert.Positive(t, churned.Load())
}

func TestCloseAndDrain(t *testing.T) {
	ctx := context.Background()
	sw := newSwitch(t, sion.PlaceConfig{})
	s := open(t, sw, "app")
	var handled atomic.Int64
	subscribe(t, s, `{type ⊑ Reading}`, sion.WithHandler(func(sion.Delivery) { handled.Add(1) }))
	ch := subscribe(t, s, `{type ⊑ Reading}`)
	for n := 1; n <= 50; n++ {
		publish(t, s, reading(n))
	}
	// Drain waits for the channel subscription's reader too.
	go func() {
		for range ch.C() {
		}
	}()
	require.NoError(t, sw.Drain(ctx))
	assert.Equal(t, int64(50), handled.Load(), "the handler saw every queued event before Drain returned")
	require.NoError(t, sw.Close(), "idempotent")
	require.NoError(t, s.Close(), "idempotent")
	_, err := sw.Open(ctx, sion.SessionConfig{Name: "late"})
	require.ErrorIs(t, err, sion.ErrClosed)
	require.ErrorIs(t, s.Publish(ctx, reading(1)), sion.ErrClosed)
	_, ok := <-ch.C()
	assert.False(t, ok, "channels are closed")
	assert.Equal(t, 0, sw.Stats().Sessions)
}

func TestAdmission(t *testing.T) {
	refuse := errors.New("not on the list")
	var asked []sion.AdmissionRequest
	sw := newSwitch(t, sion.PlaceConfig{Admit: func(_ context.Context, r sion.AdmissionRequest) error {
		asked = append(asked, r)
		if r.Session != "alice" {
			return refuse
		}
		return nil
	}})
	_, err := sw.Open(context.Background(), sion.SessionConfig{Name: "alice"})
	require.NoError(t, err)
	_, err = sw.Open(context.Background(), sion.SessionConfig{Name: "mallory"})
	require.ErrorIs(t, err, sion.ErrNotAdmitted)
	require.ErrorIs(t, err, refuse)
	assert.Contains(t, err.Error(), `"mallory"`)
	assert.Equal(t, []sion.AdmissionRequest{{Place: "test", Switch: "sw1", Session: "alice"}, {Place: "test", Switch: "sw1", Session: "mallory"}}, asked)
	assert.Equal(t, sion.Stats{Sessions: 1, Refused: 1}, sw.Stats())
}

func TestConfigErrors(t *testing.T) {
	o := ont1(t)
	for _, cfg := range []sion.PlaceConfig{{Ontology: o}, {Name: "p"}, {Name: "p", Ontology: o, TTL: -1}, {Name: "p", Ontology: o, MaxPayloadBytes: -1}} {
		_, err := sion.NewEventPlace(cfg)
		require.ErrorIs(t, err, sion.ErrInvalidConfig, "%+v", cfg)
	}
	p, err := sion.NewEventPlace(sion.PlaceConfig{Name: "p", Ontology: o})
	require.NoError(t, err)
	assert.Equal(t, sion.DefaultTTL, p.Config().TTL)
	for _, cfg := range []sion.SwitchConfig{{Place: p}, {Name: "s"}} {
		_, err := sion.NewSwitch(cfg)
		require.ErrorIs(t, err, sion.ErrInvalidConfig)
	}
	sw := newSwitch(t, sion.PlaceConfig{})
	_, err = sw.Open(context.Background(), sion.SessionConfig{SpoolSize: -1})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	_, err = sw.Open(context.Background(), sion.SessionConfig{Profile: []ontology.Attr{{Name: "tier"}}})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
}

// TestDrainHandlesEveryQueuedEvent: Drain returns only after a handler has
// been called for every event queued before it. An earlier Drain waited for
// the queue to be empty and then cancelled, which lost an event the handler
// goroutine had taken but not yet handed over (seen once in
// examples/alerts); that window is too narrow for a test to force, so this
// checks the invariant over many rounds, and Drain now closes the queue and
// waits for the handler goroutine to finish it.
func TestDrainHandlesEveryQueuedEvent(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	for i := range 300 {
		s := open(t, sw, fmt.Sprint("s", i))
		var n atomic.Int64
		subscribe(t, s, `{type ⊑ Reading}`, sion.WithHandler(func(sion.Delivery) { n.Add(1) }))
		for k := 1; k <= 3; k++ {
			publish(t, s, reading(k))
		}
		require.NoError(t, s.Drain(context.Background()))
		require.Equal(t, int64(3), n.Load(), "iteration %d", i)
	}
}

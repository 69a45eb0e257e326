package sion_test

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// relayWait bounds every wait of these tests for something that happens
// on another goroutine (a relay's handler, a remote session's reader).
const relayWait = 10 * time.Second

// testRelay is a Relay that carries its front's traffic to back, an
// ordinary switch in the same process: Publish publishes the event on a
// session of back (keeping its ID), Subscribe subscribes there with the
// same filter and a handler that hands what arrives to the front
// (RelayPort.Deliver), Unsubscribe cancels that subscription. It records
// every call. The fields above mu are set before the front is made.
type testRelay struct {
	dropPublish  bool          // Publish drops the event and returns nil
	publishErr   error         // Publish returns it, carrying nothing
	subscribeErr error         // Subscribe returns it, taking nothing
	entered      chan uint64   // when non-nil, Subscribe sends the front subscription's ID on it first
	hold         chan struct{} // when non-nil, Subscribe waits (ignoring ctx) until it is closed

	sess *sion.Session // the relay's session on back

	mu           sync.Mutex
	port         *sion.RelayPort
	attached     int
	published    []sion.Event                  // copies of what Publish was given
	subscribed   []uint64                      // front subscription IDs, in call order
	unsubscribed map[uint64]int                // Unsubscribe calls, by front subscription ID
	backSubs     map[uint64]*sion.Subscription // what Subscribe made on back, by front subscription ID
	delivered    []deliverCall                 // what the handlers handed to Deliver, and its answer
}

// deliverCall is one call of RelayPort.Deliver made by a testRelay.
type deliverCall struct {
	ID  sion.EventID
	Err error
}

var _ sion.Relay = (*testRelay)(nil)

func (r *testRelay) Attach(p *sion.RelayPort) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attached++
	r.port = p
}

func (r *testRelay) Publish(ctx context.Context, _ *sion.Session, ev *sion.Event) error {
	r.mu.Lock()
	r.published = append(r.published, *ev)
	r.mu.Unlock()
	switch {
	case r.publishErr != nil:
		return r.publishErr
	case r.dropPublish:
		return nil
	}
	return r.sess.Publish(ctx, ev)
}

func (r *testRelay) Subscribe(ctx context.Context, _ *sion.Session, sub *sion.Subscription) error {
	r.mu.Lock()
	r.subscribed = append(r.subscribed, sub.ID())
	port := r.port
	r.mu.Unlock()
	if r.entered != nil {
		r.entered <- sub.ID()
	}
	if r.hold != nil {
		<-r.hold
	}
	if r.subscribeErr != nil {
		return r.subscribeErr
	}
	// The relay takes the subscription even if ctx ended while it was
	// held: what it started, Unsubscribe undoes.
	bs, err := r.sess.SubscribeFilter(context.WithoutCancel(ctx), sub.Filter(), sion.WithHandler(func(d sion.Delivery) {
		err := port.Deliver(context.Background(), d.Event)
		r.mu.Lock()
		r.delivered = append(r.delivered, deliverCall{ID: d.Event.ID, Err: err})
		r.mu.Unlock()
	}))
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.backSubs[sub.ID()] = bs
	r.mu.Unlock()
	return nil
}

func (r *testRelay) Unsubscribe(_ *sion.Session, sub *sion.Subscription) {
	r.mu.Lock()
	r.unsubscribed[sub.ID()]++
	bs := r.backSubs[sub.ID()]
	delete(r.backSubs, sub.ID())
	r.mu.Unlock()
	if bs != nil {
		bs.Cancel()
	}
}

// relayCalls is a snapshot of a testRelay's records.
type relayCalls struct {
	Attached     int
	Published    []sion.Event
	Subscribed   []uint64
	Unsubscribed map[uint64]int
	Delivered    []deliverCall
}

func (r *testRelay) calls() relayCalls {
	r.mu.Lock()
	defer r.mu.Unlock()
	return relayCalls{
		Attached:     r.attached,
		Published:    append([]sion.Event(nil), r.published...),
		Subscribed:   append([]uint64(nil), r.subscribed...),
		Unsubscribed: maps.Clone(r.unsubscribed),
		Delivered:    append([]deliverCall(nil), r.delivered...),
	}
}

func (r *testRelay) unsubscribes(id uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unsubscribed[id]
}

func (r *testRelay) relayPort() *sion.RelayPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.port
}

// waitDelivered waits until the relay's handlers have made n Deliver calls
// that returned.
func (r *testRelay) waitDelivered(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.calls().Delivered) >= n }, relayWait, time.Millisecond,
		"the relay did not bring %d events back", n)
	require.Len(t, r.calls().Delivered, n)
}

// relayRig is a front (a relay's, or an ordinary switch when the rig has
// no relay) served over a mem network at "front", and the back switch the
// relay carries its traffic to.
type relayRig struct {
	front, back *sion.Switch
	relay       *testRelay         // nil: front is an ordinary switch
	spy         *sion.Subscription // on back, {type ⊑ Event}: every event back saw
	network     *mem.Network
}

// newRelayRig makes a rig with relay r (nil for an ordinary front). The
// front closes at cleanup before the back does.
func newRelayRig(t *testing.T, r *testRelay, frontPlace ...func(*sion.PlaceConfig)) *relayRig {
	t.Helper()
	ont := ont1(t)
	rig := &relayRig{relay: r, back: siteSwitch(t, "back", ont, nil)}
	rig.spy = subscribe(t, open(t, rig.back, "spy"), `{type ⊑ Event}`)
	var relay sion.Relay
	if r != nil {
		r.unsubscribed = map[uint64]int{}
		r.backSubs = map[uint64]*sion.Subscription{}
		r.sess = open(t, rig.back, "relay")
		relay = r
	}
	rig.front = siteSwitch(t, "front", ont, relay, frontPlace...)
	rig.network = serveMem(t, rig.front) // at "switch"
	return rig
}

// siteSwitch returns a switch named name in a place "site" with ontology
// ont and relay (nil: none), closed at cleanup; place adjusts the place's
// configuration.
func siteSwitch(t *testing.T, name string, ont *ontology.Ontology, relay sion.Relay, place ...func(*sion.PlaceConfig)) *sion.Switch {
	t.Helper()
	cfg := sion.PlaceConfig{Name: "site", Ontology: ont}
	for _, f := range place {
		f(&cfg)
	}
	p, err := sion.NewEventPlace(cfg)
	require.NoError(t, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: name, Place: p, Relay: relay})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sw.Close()) })
	return sw
}

// sessionKind opens sessions on a rig's front: local (Switch.Open) or
// remote (Dial over the mem network). Remote sessions do not reconnect:
// the front ends one as soon as its connection does, so tests that close
// it see its end on the front without waiting for a retention — a Close
// whose goodbye the switch misses would otherwise keep it there, away,
// for DefaultRetention.
type sessionKind struct {
	name   string
	remote bool
}

var sessionKinds = []sessionKind{{name: "local"}, {name: "remote", remote: true}}

func (k sessionKind) open(t *testing.T, rig *relayRig, name string) *sion.Session {
	t.Helper()
	if !k.remote {
		return open(t, rig.front, name)
	}
	s, err := sion.Dial(context.Background(), rig.network, "switch", sion.SessionConfig{Name: name, Reconnect: sion.ReconnectPolicy{Disabled: true}})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func relayNotice(zone string, seq int) *sion.Event {
	return &sion.Event{Type: "Notice", Attrs: attrs("zone", zone, "seq", seq)}
}

// sessionsGone waits until sw has no sessions left: a remote session's
// Close is done on the switch's side too (its subscriptions unregistered).
func sessionsGone(t *testing.T, sw *sion.Switch) {
	t.Helper()
	require.Eventually(t, func() bool { return sw.Stats().Sessions == 0 }, relayWait, time.Millisecond)
}

// TestRelayInvisibleToSessions: what a front's sessions publish is matched
// by the relay, not by the front, and what the relay brings back reaches
// the front's subscribers once, with the ID the back switch saw — for
// local and remote sessions alike.
func TestRelayInvisibleToSessions(t *testing.T) {
	ctx := context.Background()
	errBack := errors.New("relay: back switch unreachable")
	for _, k := range sessionKinds {
		t.Run(k.name, func(t *testing.T) {
			cases := []struct {
				name  string
				relay *testRelay
				check func(t *testing.T, rig *relayRig, subS *sion.Session, sub *sion.Subscription, pubErr error)
			}{{
				name:  "carried and brought back once",
				relay: &testRelay{},
				check: func(t *testing.T, rig *relayRig, subS *sion.Session, sub *sion.Subscription, pubErr error) {
					require.NoError(t, pubErr)
					back := queued(rig.spy)
					require.Len(t, back, 1, "the back switch saw the event once")
					d := next(t, sub)
					require.NotNil(t, d.Event)
					assert.False(t, d.Event.ID.IsZero())
					assert.Equal(t, back[0].Event.ID, d.Event.ID, "the front's subscriber has the ID the back switch saw")
					assert.Equal(t, "Notice", d.Event.Type)
					assert.ElementsMatch(t, attrs("zone", "hall", "seq", 1), d.Event.Attrs)

					rig.relay.waitDelivered(t, 1)
					settle(t, subS)
					assert.Empty(t, queued(sub), "delivered exactly once")
					calls := rig.relay.calls()
					assert.Equal(t, 1, calls.Attached)
					require.Len(t, calls.Published, 1)
					assert.Equal(t, calls.Published[0].ID, d.Event.ID,
						"the event comes back with the ID the front gave it: the back switch keeps a publisher's ID (Event.ID)")
					assert.Equal(t, "front", calls.Published[0].Control.Origin)
					assert.Equal(t, "site", calls.Published[0].Control.Place)
					assert.Equal(t, []deliverCall{{ID: d.Event.ID}}, calls.Delivered)

					require.Eventually(t, func() bool { return rig.front.Stats().Deliveries == 1 }, relayWait, time.Millisecond)
					st := rig.front.Stats()
					assert.Equal(t, uint64(1), st.EventsIn, "the relay's Deliver alone entered the event")
					assert.Equal(t, uint64(1), st.Fires)
					assert.Equal(t, uint64(1), st.Deliveries)
					assert.Equal(t, uint64(0), st.Duplicates)
				},
			}, {
				name:  "not matched on the front",
				relay: &testRelay{dropPublish: true},
				check: func(t *testing.T, rig *relayRig, subS *sion.Session, sub *sion.Subscription, pubErr error) {
					require.NoError(t, pubErr)
					settle(t, subS)
					assert.Empty(t, queued(sub), "the front delivered nothing itself")
					assert.Empty(t, queued(rig.spy))
					calls := rig.relay.calls()
					require.Len(t, calls.Published, 1)
					assert.False(t, calls.Published[0].ID.IsZero(), "the front gave the event an ID")
					assert.Equal(t, "front", calls.Published[0].Control.Origin)
					assert.Empty(t, calls.Delivered)
					st := rig.front.Stats()
					assert.Equal(t, uint64(0), st.EventsIn)
					assert.Equal(t, uint64(0), st.Fires)
					assert.Equal(t, uint64(0), st.Deliveries)
				},
			}, {
				name:  "the relay's error is Publish's",
				relay: &testRelay{publishErr: errBack},
				check: func(t *testing.T, rig *relayRig, subS *sion.Session, sub *sion.Subscription, pubErr error) {
					require.Error(t, pubErr)
					if k.remote { // the error crosses the wire as text
						assert.ErrorContains(t, pubErr, errBack.Error())
					} else {
						assert.ErrorIs(t, pubErr, errBack)
					}
					settle(t, subS)
					assert.Empty(t, queued(sub))
					assert.Len(t, rig.relay.calls().Published, 1)
					assert.Equal(t, uint64(0), rig.front.Stats().EventsIn)
				},
			}}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					rig := newRelayRig(t, tc.relay)
					pub := k.open(t, rig, "pub")
					subS := k.open(t, rig, "sub")
					sub := subscribe(t, subS, `{type ⊑ Notice; zone == "hall"}`)
					calls := rig.relay.calls()
					require.Len(t, calls.Subscribed, 1)
					assert.Equal(t, 2, rig.back.Stats().Subscriptions, "the spy's and the relay's")

					err := pub.Publish(ctx, relayNotice("hall", 1))
					tc.check(t, rig, subS, sub, err)
				})
			}
		})
	}
}

// TestRelayEventID: a caller-set Event.ID survives Publish, and a switch
// that has seen it drops the event as a duplicate (Publish returns nil);
// a zero ID gets a new one each time. On an ordinary switch and on a
// relay's front, for local and remote publishers.
func TestRelayEventID(t *testing.T) {
	ctx := context.Background()
	id := sion.EventID{0x5e, 0x1f, 0x0a, 0x11, 0x3c, 0x9d, 0x42, 0x07, 0xb8, 0x21, 0x6e, 0x90, 0xd4, 0x13, 0x7a, 0x55}
	fronts := []struct {
		name  string
		relay func() *testRelay
	}{
		{name: "ordinary", relay: func() *testRelay { return nil }},
		{name: "relay front", relay: func() *testRelay { return &testRelay{} }},
	}
	for _, fr := range fronts {
		for _, k := range sessionKinds {
			t.Run(fr.name+"/"+k.name, func(t *testing.T) {
				// got returns the n deliveries sub gets, and checks that no
				// more come.
				got := func(t *testing.T, rig *relayRig, subS *sion.Session, sub *sion.Subscription, n int) []sion.Delivery {
					t.Helper()
					var out []sion.Delivery
					for range n {
						out = append(out, next(t, sub))
					}
					if rig.relay != nil {
						rig.relay.waitDelivered(t, n)
					}
					settle(t, subS)
					assert.Empty(t, queued(sub))
					return out
				}

				t.Run("caller-set ID twice", func(t *testing.T) {
					rig := newRelayRig(t, fr.relay())
					pub := k.open(t, rig, "pub")
					subS := k.open(t, rig, "sub")
					sub := subscribe(t, subS, `{type ⊑ Notice}`)
					ev := relayNotice("hall", 1)
					ev.ID = id
					require.NoError(t, pub.Publish(ctx, ev))
					require.NoError(t, pub.Publish(ctx, ev), "a duplicate returns nil")

					ds := got(t, rig, subS, sub, 1)
					assert.Equal(t, id, ds[0].Event.ID, "the caller's ID survives")
					assert.Equal(t, uint64(1), rig.front.Stats().Duplicates)
					if rig.relay != nil {
						calls := rig.relay.calls()
						require.Len(t, calls.Published, 1, "the relay is told once")
						assert.Equal(t, id, calls.Published[0].ID, "the front passes the caller's ID on")
						back := queued(rig.spy)
						require.Len(t, back, 1)
						assert.Equal(t, id, back[0].Event.ID, "the back switch keeps the ID the relay published with")
					}
				})

				// An event that went out (a bridge, a CloudEvents endpoint)
				// and is published again on its first switch with the ID
				// that switch gave it has been there: a duplicate, however
				// long ago (issue 19: dedupe by ID holds for round trips).
				// An ID next to it (the switch's IDs are enciphered: it
				// names no count the switch gave) is an ordinary caller-set
				// ID.
				t.Run("an ID the switch gave, published again", func(t *testing.T) {
					rig := newRelayRig(t, fr.relay())
					pub := k.open(t, rig, "pub")
					subS := k.open(t, rig, "sub")
					sub := subscribe(t, subS, `{type ⊑ Notice}`)
					require.NoError(t, pub.Publish(ctx, relayNotice("hall", 1)))
					first := next(t, sub).Event

					again := relayNotice("hall", 1)
					again.ID = first.ID
					require.NoError(t, pub.Publish(ctx, again), "a duplicate returns nil")
					ahead := relayNotice("hall", 2)
					ahead.ID = first.ID
					ahead.ID[15] += 100
					require.NoError(t, pub.Publish(ctx, ahead))

					assert.Equal(t, ahead.ID, next(t, sub).Event.ID)
					if rig.relay != nil {
						rig.relay.waitDelivered(t, 2) // first and ahead
					}
					settle(t, subS)
					assert.Empty(t, queued(sub), "again was delivered")
					assert.Equal(t, uint64(1), rig.front.Stats().Duplicates)
				})

				t.Run("zero ID twice", func(t *testing.T) {
					rig := newRelayRig(t, fr.relay())
					pub := k.open(t, rig, "pub")
					subS := k.open(t, rig, "sub")
					sub := subscribe(t, subS, `{type ⊑ Notice}`)
					ev := relayNotice("hall", 1)
					require.NoError(t, pub.Publish(ctx, ev))
					require.NoError(t, pub.Publish(ctx, ev), "the same *Event again: Publish copied it")
					assert.True(t, ev.ID.IsZero(), "Publish left the caller's event alone")

					ds := got(t, rig, subS, sub, 2)
					assert.False(t, ds[0].Event.ID.IsZero())
					assert.False(t, ds[1].Event.ID.IsZero())
					assert.NotEqual(t, ds[0].Event.ID, ds[1].Event.ID)
					assert.Equal(t, uint64(0), rig.front.Stats().Duplicates)
					if rig.relay != nil {
						calls := rig.relay.calls()
						require.Len(t, calls.Published, 2)
						for i := range 2 {
							assert.Equal(t, calls.Published[i].ID, ds[i].Event.ID,
								"the event comes back with the ID the front gave it: the back switch keeps a publisher's ID (Event.ID)")
						}
					}
				})
			})
		}
	}
}

// TestRelayPortDeliver: what a relay brings back reaches the front's
// matching subscriptions with its ID and control information, once per
// session and once per subscription, and once whatever the number of
// times it is brought back; invalid events and a closed front are
// refused.
func TestRelayPortDeliver(t *testing.T) {
	ctx := context.Background()
	event := func(b byte) *sion.Event {
		ev := relayNotice("hall", int(b))
		ev.ID = sion.EventID{0xde, b}
		ev.Control = sion.Control{TTL: 5, Hops: 2, Origin: "elsewhere", Place: "site", Path: []string{"site"}}
		return ev
	}

	t.Run("delivers", func(t *testing.T) {
		cases := []struct {
			name       string
			deliver    func(t *testing.T, port *sion.RelayPort, ev *sion.Event)
			duplicates uint64
		}{{
			name: "once",
			deliver: func(t *testing.T, port *sion.RelayPort, ev *sion.Event) {
				require.NoError(t, port.Deliver(ctx, ev))
			},
		}, {
			name: "twice: deduplicated",
			deliver: func(t *testing.T, port *sion.RelayPort, ev *sion.Event) {
				require.NoError(t, port.Deliver(ctx, ev))
				require.NoError(t, port.Deliver(ctx, ev), "a duplicate returns nil")
			},
			duplicates: 1,
		}, {
			name: "on eight paths at once: deduplicated",
			deliver: func(t *testing.T, port *sion.RelayPort, ev *sion.Event) {
				var wg sync.WaitGroup
				errs := make(chan error, 8)
				for range 8 {
					wg.Go(func() { errs <- port.Deliver(ctx, ev) })
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
			},
			duplicates: 7,
		}}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				rig := newRelayRig(t, &testRelay{})
				s := open(t, rig.front, "app")
				a := subscribe(t, s, `{type ⊑ Notice}`)
				b := subscribe(t, s, `{type ⊑ Event}`)
				other := subscribe(t, open(t, rig.front, "other"), `{type ⊑ Notice; zone == "hall"}`)
				miss := subscribe(t, open(t, rig.front, "elsewhere"), `{type ⊑ Alarm}`)

				ev := event(1)
				tc.deliver(t, rig.relay.relayPort(), ev)

				for name, sub := range map[string]*sion.Subscription{"a": a, "b": b, "other": other} {
					ds := queued(sub)
					require.Len(t, ds, 1, name)
					assert.Equal(t, ev.ID, ds[0].Event.ID, name)
					assert.Equal(t, ev.Control, ds[0].Event.Control, name)
					assert.ElementsMatch(t, ev.Attrs, ds[0].Event.Attrs, name) // admitted: sorted by name
				}
				assert.Empty(t, queued(miss))
				st := rig.front.Stats()
				assert.Equal(t, uint64(1), st.EventsIn)
				assert.Equal(t, uint64(2), st.Fires, "one per session")
				assert.Equal(t, uint64(3), st.Deliveries, "one per subscription")
				assert.Equal(t, tc.duplicates, st.Duplicates)
				assert.Empty(t, queued(rig.spy), "Deliver does not go back to the relay")
				assert.Empty(t, rig.relay.calls().Published)
			})
		}
	})

	t.Run("refuses", func(t *testing.T) {
		cases := []struct {
			name    string
			unknown bool // the place accepts unknown types
			closed  bool // the front is closed first
			ev      *sion.Event
			want    error
		}{
			{name: "nil event", ev: nil, want: sion.ErrInvalidEvent},
			{name: "zero ID", ev: relayNotice("hall", 1), want: sion.ErrInvalidEvent},
			{name: "unknown type", ev: &sion.Event{ID: sion.EventID{1}, Type: "Gossip"}, want: sion.ErrInvalidEvent},
			{name: "unknown type, accepted by the place", unknown: true, ev: &sion.Event{ID: sion.EventID{1}, Type: "Gossip"}},
			{name: "front closed", closed: true, ev: event(1), want: sion.ErrClosed},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				rig := newRelayRig(t, &testRelay{}, func(c *sion.PlaceConfig) { c.AcceptUnknownTypes = tc.unknown })
				front := rig.front
				sub := subscribe(t, open(t, front, "app"), `{type ⊑ Notice}`)
				if tc.closed {
					require.NoError(t, front.Close())
				}

				err := rig.relay.relayPort().Deliver(ctx, tc.ev)
				if tc.want == nil {
					require.NoError(t, err)
					assert.Equal(t, uint64(1), front.Stats().EventsIn)
					return
				}
				require.ErrorIs(t, err, tc.want)
				assert.Empty(t, queued(sub))
				st := front.Stats()
				assert.Equal(t, uint64(0), st.EventsIn)
				assert.Equal(t, uint64(0), st.Duplicates)
			})
		}
	})

	t.Run("Block subscription full: ctx's error", func(t *testing.T) {
		rig := newRelayRig(t, &testRelay{})
		sub := subscribe(t, open(t, rig.front, "app"), `{type ⊑ Notice}`, sion.WithQueue(1), sion.WithOverflow(sion.Block))
		port := rig.relay.relayPort()
		require.NoError(t, port.Deliver(ctx, event(1)))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := port.Deliver(cctx, event(2))
		require.ErrorIs(t, err, context.Canceled)
		ds := queued(sub)
		require.Len(t, ds, 1)
		assert.Equal(t, event(1).ID, ds[0].Event.ID)
		assert.Equal(t, uint64(1), rig.front.Stats().Dropped)
	})
}

// TestRelaySubscribeRefused: a relay's error refuses the subscription
// (ErrNotGranted), which leaves nothing installed, and the relay is not
// told to undo what it did not take.
func TestRelaySubscribeRefused(t *testing.T) {
	ctx := context.Background()
	errFull := errors.New("relay: back switch full")
	for _, k := range sessionKinds {
		t.Run(k.name, func(t *testing.T) {
			rig := newRelayRig(t, &testRelay{subscribeErr: errFull})
			s := k.open(t, rig, "app")
			before := rig.front.Stats()

			sub, err := s.Subscribe(ctx, `{type ⊑ Notice}`)
			require.ErrorIs(t, err, sion.ErrNotGranted)
			assert.Nil(t, sub)
			if !k.remote { // the relay's error crosses the wire as text
				assert.ErrorIs(t, err, errFull)
			}
			assert.ErrorContains(t, err, errFull.Error())

			after := rig.front.Stats()
			assert.Equal(t, before.Filters, after.Filters)
			assert.Equal(t, before.Subscriptions, after.Subscriptions)
			calls := rig.relay.calls()
			assert.Len(t, calls.Subscribed, 1)
			require.NoError(t, s.Close())
			sessionsGone(t, rig.front)
			assert.Empty(t, rig.relay.calls().Unsubscribed, "Unsubscribe is never called for it")
		})
	}
}

// TestRelayUnsubscribe: the relay is told once when a subscription it took
// ends, whether it is cancelled (however often) or its session closes.
func TestRelayUnsubscribe(t *testing.T) {
	for _, k := range sessionKinds {
		t.Run(k.name, func(t *testing.T) {
			cases := []struct {
				name string
				subs int
				end  func(t *testing.T, s *sion.Session, subs []*sion.Subscription)
			}{{
				name: "Cancel twice",
				subs: 1,
				end: func(t *testing.T, s *sion.Session, subs []*sion.Subscription) {
					require.NoError(t, subs[0].Cancel())
					require.NoError(t, subs[0].Cancel())
					require.NoError(t, s.Unsubscribe(subs[0]))
				},
			}, {
				name: "session Close with two subscriptions",
				subs: 2,
				end:  func(t *testing.T, s *sion.Session, _ []*sion.Subscription) {},
			}}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					rig := newRelayRig(t, &testRelay{})
					s := k.open(t, rig, "app")
					var subs []*sion.Subscription
					for range tc.subs {
						subs = append(subs, subscribe(t, s, `{type ⊑ Notice}`))
					}
					ids := rig.relay.calls().Subscribed
					require.Len(t, ids, tc.subs)
					require.Equal(t, 1+tc.subs, rig.back.Stats().Subscriptions, "the spy's and the relay's")

					tc.end(t, s, subs)
					require.NoError(t, s.Close())
					sessionsGone(t, rig.front)

					want := map[uint64]int{}
					for _, id := range ids {
						want[id] = 1
					}
					assert.Equal(t, want, rig.relay.calls().Unsubscribed)
					assert.Equal(t, 1, rig.back.Stats().Subscriptions, "the relay cancelled what it made on back")
					st := rig.front.Stats()
					assert.Equal(t, 0, st.Subscriptions)
					assert.Equal(t, 0, st.Filters)
				})
			}
		})
	}
}

// TestRelayCancelWhileSubscribing: a subscription that ends while the
// relay's Subscribe is still running is undone once the relay returns:
// Unsubscribe is called exactly once for it.
func TestRelayCancelWhileSubscribing(t *testing.T) {
	cases := []struct {
		name   string
		remote bool
		// end ends the subscription whose Subscribe is held, on session s;
		// cancel cancels that Subscribe's ctx.
		end func(t *testing.T, s *sion.Session, cancel context.CancelFunc)
		// check checks what Subscribe returned once the relay did.
		check func(t *testing.T, sub *sion.Subscription, err error)
	}{{
		name: "local session closed",
		end:  func(t *testing.T, s *sion.Session, _ context.CancelFunc) { require.NoError(t, s.Close()) },
		check: func(t *testing.T, sub *sion.Subscription, err error) {
			assert.ErrorIs(t, err, sion.ErrClosed)
			assert.Nil(t, sub)
		},
	}, {
		name:   "remote Subscribe's ctx cancelled",
		remote: true,
		end:    func(t *testing.T, _ *sion.Session, cancel context.CancelFunc) { cancel() },
		check: func(t *testing.T, sub *sion.Subscription, err error) {
			// The entity's side waits for the switch's answer or ctx's
			// end, whichever it sees first: when the relay was released
			// before it saw ctx end, the answer (the relay took the
			// subscription) may win, and the subscription is live until
			// its session closes.
			if err == nil {
				assert.NoError(t, sub.Err(), "Subscribe returned a live subscription")
				return
			}
			assert.ErrorIs(t, err, context.Canceled)
			assert.Nil(t, sub)
		},
	}, {
		name:   "remote session closed",
		remote: true,
		end:    func(t *testing.T, s *sion.Session, _ context.CancelFunc) { require.NoError(t, s.Close()) },
		check: func(t *testing.T, sub *sion.Subscription, err error) {
			assert.ErrorIs(t, err, sion.ErrClosed)
			assert.Nil(t, sub)
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &testRelay{entered: make(chan uint64, 1), hold: make(chan struct{})}
			rig := newRelayRig(t, r)
			var release sync.Once
			t.Cleanup(func() { release.Do(func() { close(r.hold) }) }) // before the front closes
			s := sessionKind{remote: tc.remote}.open(t, rig, "app")

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				sub *sion.Subscription
				err error
			}
			done := make(chan result, 1)
			go func() {
				sub, err := s.Subscribe(ctx, `{type ⊑ Notice}`)
				done <- result{sub, err}
			}()
			var id uint64
			select {
			case id = <-r.entered:
			case <-time.After(relayWait):
				t.Fatal("the relay's Subscribe was not called")
			}

			tc.end(t, s, cancel)
			release.Do(func() { close(r.hold) })
			var res result
			select {
			case res = <-done:
			case <-time.After(relayWait):
				t.Fatal("Subscribe did not return after the relay did")
			}
			tc.check(t, res.sub, res.err)

			require.NoError(t, s.Close())
			sessionsGone(t, rig.front)
			require.Eventually(t, func() bool { return r.unsubscribes(id) > 0 }, relayWait, time.Millisecond,
				"the relay was not told to undo the subscription")
			require.NoError(t, rig.front.Close()) // every goroutine of the front has returned
			assert.Equal(t, map[uint64]int{id: 1}, r.calls().Unsubscribed, "exactly once")
			assert.Equal(t, 1, rig.back.Stats().Subscriptions, "the spy's alone: the relay's was cancelled")
			st := rig.front.Stats()
			assert.Equal(t, 0, st.Subscriptions)
			assert.Equal(t, 0, st.Filters)
		})
	}
}

// TestRelayFrontTakesNoLinks: a front refuses to make shared links,
// gateways or overlay links (ErrInvalidConfig), and refuses link requests
// that reach it (ErrLinkRefused).
func TestRelayFrontTakesNoLinks(t *testing.T) {
	ctx := context.Background()
	t.Run("asked of the front", func(t *testing.T) {
		rig := newRelayRig(t, &testRelay{})
		back := serveMem(t, rig.back) // somewhere the front could have linked to
		cases := []struct {
			name string
			call func() error
		}{
			{name: "Link", call: func() error {
				l, err := rig.front.Link(ctx, back, "switch", sion.LinkConfig{})
				assert.Nil(t, l)
				return err
			}},
			{name: "Federate", call: func() error {
				g, err := rig.front.Federate(ctx, back, "switch", sion.GatewayConfig{})
				assert.Nil(t, g)
				return err
			}},
			{name: "Absorb", call: func() error { return rig.front.Absorb(ctx, back, "switch") }},
			{name: "Join", call: func() error { return rig.front.Join(ctx, back, "switch") }},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				err := tc.call()
				require.ErrorIs(t, err, sion.ErrInvalidConfig)
				assert.ErrorContains(t, err, "relay's front")
				assert.Empty(t, rig.front.Links())
				assert.Empty(t, rig.front.Gateways())
				assert.Empty(t, rig.back.Links())
			})
		}
	})

	t.Run("requested of the front", func(t *testing.T) {
		rig := newRelayRig(t, &testRelay{})
		other := siteSwitch(t, "other", ont1(t), nil)
		l, err := other.Link(ctx, rig.network, "switch", sion.LinkConfig{})
		require.ErrorIs(t, err, sion.ErrLinkRefused)
		assert.Nil(t, l)
		assert.ErrorContains(t, err, "relay's front")
		assert.Empty(t, other.Links())
		assert.Empty(t, rig.front.Links())
		assert.Equal(t, uint64(1), rig.front.Stats().Refused)

		// The refusal harmed nothing: the front still carries its sessions.
		s := open(t, rig.front, "app")
		sub := subscribe(t, s, `{type ⊑ Notice}`)
		publish(t, s, relayNotice("hall", 1))
		assert.Equal(t, "Notice", next(t, sub).Event.Type)
	})
}

// TestRelayClose: closing the front and the back switch, in either order,
// tells the relay of every subscription's end and leaves no goroutine
// behind.
func TestRelayClose(t *testing.T) {
	cases := []struct {
		name       string
		frontFirst bool
	}{
		{name: "front then back", frontFirst: true},
		{name: "back then front"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			ctx := context.Background()
			ont := ont1(t)
			r := &testRelay{unsubscribed: map[uint64]int{}, backSubs: map[uint64]*sion.Subscription{}}
			backPlace, err := sion.NewEventPlace(sion.PlaceConfig{Name: "site", Ontology: ont})
			require.NoError(t, err)
			back, err := sion.NewSwitch(sion.SwitchConfig{Name: "back", Place: backPlace})
			require.NoError(t, err)
			t.Cleanup(func() { back.Close() }) // if the test stops early; closed below
			r.sess, err = back.Open(ctx, sion.SessionConfig{Name: "relay"})
			require.NoError(t, err)
			frontPlace, err := sion.NewEventPlace(sion.PlaceConfig{Name: "site", Ontology: ont})
			require.NoError(t, err)
			front, err := sion.NewSwitch(sion.SwitchConfig{Name: "front", Place: frontPlace, Relay: r})
			require.NoError(t, err)
			t.Cleanup(func() { front.Close() })
			network, err := mem.NewNetwork(mem.Config{})
			require.NoError(t, err)
			l, err := network.Listen("front")
			require.NoError(t, err)
			served := make(chan error, 1)
			go func() { served <- front.Serve(ctx, l) }()

			local, err := front.Open(ctx, sion.SessionConfig{Name: "local"})
			require.NoError(t, err)
			remote, err := sion.Dial(ctx, network, "front", sion.SessionConfig{Name: "remote"})
			require.NoError(t, err)
			t.Cleanup(func() { remote.Close() })
			a := subscribe(t, local, `{type ⊑ Notice}`)
			subscribe(t, remote, `{type ⊑ Notice}`)
			subscribe(t, remote, `{type ⊑ Alarm}`)
			publish(t, remote, relayNotice("hall", 1))
			assert.Equal(t, "Notice", next(t, a).Event.Type)
			ids := r.calls().Subscribed
			require.Len(t, ids, 3)

			closeFront := func() {
				require.NoError(t, front.Close())
				require.NoError(t, front.Close(), "Close is idempotent")
				select {
				case err := <-served:
					require.NoError(t, err)
				case <-time.After(relayWait):
					t.Fatal("Serve did not return after Close")
				}
			}
			closeBack := func() {
				require.NoError(t, back.Close())
				require.NoError(t, back.Close(), "Close is idempotent")
			}
			if tc.frontFirst {
				closeFront()
				closeBack()
			} else {
				closeBack()
				closeFront()
			}
			require.NoError(t, remote.Close())

			want := map[uint64]int{}
			for _, id := range ids {
				want[id] = 1
			}
			assert.Equal(t, want, r.calls().Unsubscribed)
			assert.Equal(t, 0, front.Stats().Sessions)
			assert.Equal(t, 0, back.Stats().Sessions)
		})
	}
}

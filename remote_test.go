package sion_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
)

// world is one switch and a way to open sessions on it: local (Switch.Open)
// or remote (Dial over the mem transport, the wire codec in between).
// Scenarios run once per variant with the same body (STYLE: one test body
// over each variant); settle waits until deliveries in flight to the given
// sessions have reached their subscriptions (Session.Sync).
type world struct {
	sw     *sion.Switch
	open   func(t *testing.T, cfg sion.SessionConfig) *sion.Session
	remote bool
}

func (w *world) session(t *testing.T, name string) *sion.Session {
	return w.open(t, sion.SessionConfig{Name: name})
}

func settle(t *testing.T, sessions ...*sion.Session) {
	t.Helper()
	for _, s := range sessions {
		require.NoError(t, s.Sync(context.Background()))
	}
}

func variants(t *testing.T, cfg sion.PlaceConfig, body func(t *testing.T, w *world)) {
	t.Run("local", func(t *testing.T) {
		sw := newSwitch(t, cfg)
		body(t, &world{sw: sw, open: func(t *testing.T, c sion.SessionConfig) *sion.Session {
			s, err := sw.Open(context.Background(), c)
			require.NoError(t, err)
			return s
		}})
	})
	t.Run("mem-remote", func(t *testing.T) {
		sw := newSwitch(t, cfg)
		network := serveMem(t, sw)
		body(t, &world{sw: sw, remote: true, open: func(t *testing.T, c sion.SessionConfig) *sion.Session {
			s, err := sion.Dial(context.Background(), network, "switch", c)
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			return s
		}})
	})
}

// serveMem serves sw's remote sessions on a mem network at address
// "switch" until the test ends.
func serveMem(t testing.TB, sw *sion.Switch) *mem.Network {
	t.Helper()
	network, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	serveAt(t, sw, network, "switch")
	return network
}

// serveAt serves sw's remote sessions on tr at addr until the test ends,
// and returns the address listened on; the switch closes then too.
func serveAt(t testing.TB, sw *sion.Switch, tr transport.Transport, addr string) string {
	t.Helper()
	l, err := tr.Listen(addr)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- sw.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-served)
		require.NoError(t, sw.Close())
	})
	return l.Addr().String()
}

func TestErrorsLocalAndRemote(t *testing.T) {
	variants(t, sion.PlaceConfig{}, func(t *testing.T, w *world) {
		ctx := context.Background()
		s := w.session(t, "app")
		subscribe(t, s, `{type ⊑ Notice; zone == "hall"}`)
		subscribe(t, s, `{type ⊑ Notice; zone prefix "hall."}`)

		// Errors carry the same sentinels and name what was wrong.
		err := s.Publish(ctx, &sion.Event{Type: "Gossip"})
		require.ErrorIs(t, err, sion.ErrUnknownEventType)
		assert.Contains(t, err.Error(), `"Gossip"`)
		err = s.Publish(ctx, &sion.Event{Type: "Reading", Attrs: attrs("n", "seven")})
		require.ErrorIs(t, err, sion.ErrInvalidEvent)
		assert.Contains(t, err.Error(), `"n"`)
		_, err = s.Subscribe(ctx, `{type ⊑ Gossip}`)
		require.ErrorIs(t, err, sion.ErrUnknownEventType)
		_, err = s.Subscribe(ctx, `{xpath(/t:reading)}`)
		require.ErrorIs(t, err, sion.ErrInvalidFilter)
		_, err = s.Subscribe(ctx, `{type ⊑ Reading; colour == 1}`)
		require.ErrorIs(t, err, sion.ErrInvalidFilter)
		assert.Equal(t, 2, w.sw.Stats().Subscriptions, "refused subscriptions left nothing behind")
	})
}

func TestRemoteDeliveryModes(t *testing.T) {
	variants(t, sion.PlaceConfig{}, func(t *testing.T, w *world) {
		ctx := context.Background()
		pub := w.session(t, "pub")
		// Drop newest at the subscriber's queue, with counters.
		s := w.session(t, "slow")
		small := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(3))
		// Look-in: one spool entry per event for the session.
		away := w.session(t, "away")
		a := subscribe(t, away, `{type ⊑ Reading}`, sion.WithLookIn())
		b := subscribe(t, away, `{type ⊑ Reading; n >= 9}`, sion.WithLookIn())
		// A handler, drained.
		h := w.session(t, "handler")
		var handled atomic.Int64
		subscribe(t, h, `{type ⊑ Reading; n >= 5}`, sion.WithHandler(func(sion.Delivery) { handled.Add(1) }))
		for n := 1; n <= 10; n++ {
			publish(t, pub, reading(n))
		}
		settle(t, s, away, h)
		assert.Equal(t, seq(1, 3), ns(queued(small)))
		st := small.Stats()
		assert.Equal(t, uint64(7), st.Dropped)
		assert.True(t, st.Slow)

		got, err := away.Pull(ctx, 8)
		require.NoError(t, err)
		assert.Equal(t, seq(1, 8), ns(got))
		got, err = away.Pull(ctx, 0)
		require.NoError(t, err)
		assert.Equal(t, seq(9, 10), ns(got))
		assert.Equal(t, []sion.Match{{Subscription: a.ID()}, {Subscription: b.ID(), Score: 1}}, got[0].Matched)
		tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		_, err = away.Pull(tctx, 1)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		publish(t, pub, reading(11)) // the pull that gave up does not lose it
		got, err = away.Pull(ctx, 0)
		require.NoError(t, err)
		assert.Equal(t, []int64{11}, ns(got))

		require.NoError(t, h.Drain(ctx))
		assert.Equal(t, int64(7), handled.Load())
	})
}

func TestRemotePatronage(t *testing.T) {
	variants(t, sion.PlaceConfig{}, func(t *testing.T, w *world) {
		var subs []*sion.Subscription
		var sessions []*sion.Session
		for tier := 1; tier <= 3; tier++ {
			s := w.open(t, sion.SessionConfig{Name: fmt.Sprint("tier", tier), Profile: attrs("tier", tier)})
			sessions = append(sessions, s)
			subs = append(subs, subscribe(t, s, `{type ⊑ Alarm}`))
		}
		pub := w.session(t, "pub")
		cond := filter.MustCompile(`{tier >= 2}`)
		publish(t, pub, &sion.Event{Type: "FireAlarm", Condition: cond})
		settle(t, sessions...)
		assert.Equal(t, []int{0, 1, 1}, []int{count(subs[0]), count(subs[1]), count(subs[2])})
		require.NoError(t, sessions[0].SetProfile(attrs("tier", 7)))
		publish(t, pub, &sion.Event{Type: "FireAlarm", Condition: cond})
		settle(t, sessions...)
		assert.Equal(t, []int{1, 1, 1}, []int{count(subs[0]), count(subs[1]), count(subs[2])})
	})
}

func TestRemoteClose(t *testing.T) {
	variants(t, sion.PlaceConfig{}, func(t *testing.T, w *world) {
		ctx := context.Background()
		s := w.session(t, "app")
		sub := subscribe(t, s, `{type ⊑ Reading}`)
		require.NoError(t, s.Close())
		require.NoError(t, s.Close(), "idempotent")
		require.ErrorIs(t, s.Publish(ctx, reading(1)), sion.ErrClosed)
		_, ok := <-sub.C()
		assert.False(t, ok)
		require.Eventually(t, func() bool { return w.sw.Stats().Sessions == 0 }, 2*time.Second, time.Millisecond,
			"the switch forgot the session")

		// Closing the switch ends local sessions, and remote ones that do
		// not reconnect; a remote session that reconnects waits for its
		// switch, and a call on it waits until its ctx ends.
		s2 := w.open(t, sion.SessionConfig{Name: "app2", Reconnect: sion.ReconnectPolicy{Disabled: true}})
		sub2 := subscribe(t, s2, `{type ⊑ Reading}`)
		var s3 *sion.Session
		if w.remote {
			s3 = w.session(t, "app3")
		}
		require.NoError(t, w.sw.Close())
		if w.remote {
			_, ok = <-sub2.C() // the link ended: the queue is closed
			assert.False(t, ok)
			<-s2.Done()
			require.ErrorIs(t, s2.Err(), sion.ErrClosed)
			_, err := sub2.Next(ctx)
			require.ErrorIs(t, err, sion.ErrClosed)
			assert.NotContains(t, err.Error(), "cancelled", "it says why: %v", err)
			require.ErrorIs(t, s2.Publish(ctx, reading(2)), sion.ErrClosed)

			tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			err = s3.Publish(tctx, reading(3))
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NotErrorIs(t, err, sion.ErrClosed)
			require.NoError(t, s3.Close())
		} else {
			require.ErrorIs(t, s2.Publish(ctx, reading(2)), sion.ErrClosed)
			<-s2.Done()
			require.ErrorIs(t, sub2.Err(), sion.ErrClosed)
		}
	})
}

func TestRemoteAdmissionAndBadFrames(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{Admit: func(_ context.Context, r sion.AdmissionRequest) error {
		if r.Session == "mallory" {
			return errors.New("not on the list")
		}
		return nil
	}})
	network := serveMem(t, sw)
	ctx := context.Background()
	_, err := sion.Dial(ctx, network, "switch", sion.SessionConfig{Name: "mallory"})
	require.ErrorIs(t, err, sion.ErrNotAdmitted)
	assert.Contains(t, err.Error(), "not on the list")

	good, err := sion.Dial(ctx, network, "switch", sion.SessionConfig{Name: "alice"})
	require.NoError(t, err)
	defer good.Close()
	sub := subscribe(t, good, `{type ⊑ Reading}`)

	// A peer that sends garbage after its hello loses its link, and nobody
	// else notices.
	for _, garbage := range [][]byte{{0xff, 0xff}, {wire.FrameVersion, byte(wire.KindPublish), 0x80}, {wire.FrameVersion, byte(wire.KindWelcome), 1, 0, 0}} {
		conn, err := network.Dial(ctx, "switch")
		require.NoError(t, err)
		hello, err := wire.Encode(nil, &wire.Hello{Version: 2, Session: "fuzzer"})
		require.NoError(t, err)
		require.NoError(t, conn.Send(ctx, hello))
		f, err := conn.Recv(ctx)
		require.NoError(t, err)
		m, err := wire.Decode(f, wire.DefaultLimits())
		require.NoError(t, err)
		require.IsType(t, &wire.Welcome{}, m)
		require.NoError(t, conn.Send(ctx, garbage))
		f, err = conn.Recv(ctx)
		require.NoError(t, err)
		m, err = wire.Decode(f, wire.DefaultLimits())
		require.NoError(t, err)
		require.IsType(t, &wire.Error{}, m, "the switch says why")
		_, err = conn.Recv(ctx)
		require.Error(t, err, "then closes the link")
		conn.Close()
	}
	// And a peer that does not start with a hello is refused.
	conn, err := network.Dial(ctx, "switch")
	require.NoError(t, err)
	require.NoError(t, conn.Send(ctx, []byte("GET / HTTP/1.1")))
	f, err := conn.Recv(ctx)
	require.NoError(t, err)
	m, err := wire.Decode(f, wire.DefaultLimits())
	require.NoError(t, err)
	require.IsType(t, &wire.Error{}, m)
	conn.Close()

	pub := open(t, sw, "pub")
	publish(t, pub, &sion.Event{Type: "Reading", Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(1)}}})
	require.NoError(t, good.Sync(ctx))
	assert.Equal(t, 1, count(sub), "the good session still works")
	require.Eventually(t, func() bool { return sw.Stats().Sessions == 2 }, 2*time.Second, time.Millisecond,
		"the bad links' sessions are gone; alice and pub remain")
}

// TestRemoteCloseAfterCancel: a remote session that cancels a
// subscription and closes at once ends on the switch at once. The switch's
// reply to the Unsubscribe may fail to reach the entity that has closed;
// that must not cost the goodbye queued behind it, or the switch would
// keep the session (and its subscriptions, matching) for its retention.
func TestRemoteCloseAfterCancel(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{Name: "p", Ontology: ont1(t)})
	network := serveMem(t, sw)
	for i := range 50 {
		sess, err := sion.Dial(context.Background(), network, "switch", sion.SessionConfig{Name: fmt.Sprintf("e%d", i)})
		require.NoError(t, err)
		sub, err := sess.Subscribe(context.Background(), "{type ⊑ Alarm}")
		require.NoError(t, err)
		require.NoError(t, sub.Cancel())
		require.NoError(t, sess.Close())
		require.Eventually(t, func() bool { return sw.Stats().Sessions == 0 }, 2*time.Second, time.Millisecond,
			"run %d: the switch keeps the closed session (%+v)", i, sw.Stats())
	}
}

package sion_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
)

// badTraceContexts are trace contexts a hostile peer may put in a frame
// that decodes well: the wire codec does not read them, the switch must.
var badTraceContexts = []struct{ name, parent, state string }{
	{"upper-case trace-id", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""},
	{"newline in traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nX-Evil: 1", ""},
	{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
	{"tracestate without traceparent", "", "congo=t61rcWkgMzE"},
	{"tracestate with a newline", traceParent, "congo=t61rc\nWkgMzE"},
	{"tracestate key twice", traceParent, "congo=1,congo=2"},
}

// TestTraceContextCheckedFromSharedLink: an event whose trace context
// W3C Trace Context does not allow, in a well-formed Forward frame from
// a peer switch, is refused and counted like any other invalid event
// (LinkInfo.Refused); it reaches no subscriber and the link stays.
func TestTraceContextCheckedFromSharedLink(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, []int{-1, 0}, func(t *testing.T, n *network) {
		sub := subscribe(t, open(t, n.sws[1], "app"), `{type ⊑ Reading}`)
		l := dialRawLink(t, n, 0, "rogue")
		info := func() sion.LinkInfo {
			for _, li := range n.sws[0].Links() {
				if li.Peer == "rogue" {
					return li
				}
			}
			return sion.LinkInfo{}
		}
		for i, tc := range badTraceContexts {
			t.Run(tc.name, func(t *testing.T) {
				l.send(&wire.Forward{Event: wire.Event{ID: [16]byte{byte(i + 1)}, Type: "Reading", TTL: 3, TraceParent: tc.parent, TraceState: tc.state}})
				// Received is counted as the frame arrives, Refused a moment
				// later, once the event is checked: wait for both.
				require.Eventually(t, func() bool { li := info(); return li.EventsReceived == uint64(i+1) && li.Refused >= uint64(i+1) },
					10*time.Second, time.Millisecond, "received and refused: %+v", info())
				assert.Equal(t, uint64(i+1), info().Refused, "refused and counted once")
			})
		}
		// The link stays and carries a good trace context untouched.
		l.send(&wire.Forward{Event: wire.Event{ID: [16]byte{0xee}, Type: "Reading", TTL: 3, TraceParent: traceParent, TraceState: traceState}})
		var got *sion.Event
		select {
		case d := <-sub.C():
			got = d.Event
		case <-time.After(10 * time.Second):
			t.Fatal("the good event did not cross the link")
		}
		assert.Equal(t, traceParent, got.TraceParent)
		assert.Equal(t, traceState, got.TraceState)
		assert.Equal(t, uint64(len(badTraceContexts)), info().Refused)
		assert.Zero(t, count(sub), "no bad event came through")
	})
}

// TestTraceContextCheckedFromSwitch: the entity's side of a remote
// session checks what its switch sends too — a hostile or broken switch
// cannot hand an application (and the adapters' headers after it) a
// trace context that Publish would have refused. The event is dropped
// as invalid, pushed or pulled; the session goes on.
func TestTraceContextCheckedFromSwitch(t *testing.T) {
	for _, lookIn := range []bool{false, true} {
		name := map[bool]string{false: "push", true: "look-in"}[lookIn]
		t.Run(name, func(t *testing.T) {
			network, err := mem.NewNetwork(mem.Config{})
			require.NoError(t, err)
			l, err := network.Listen("fake-switch")
			require.NoError(t, err)
			t.Cleanup(func() { l.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			t.Cleanup(cancel)

			accepted := make(chan transport.Conn, 1)
			go func() {
				defer close(accepted)
				conn, err := l.Accept(ctx)
				if err != nil {
					return
				}
				if _, err := conn.Recv(ctx); err == nil { // the hello
					w, _ := wire.Encode(nil, &wire.Welcome{Version: 2, Switch: "fake", Place: "test", Token: []byte("t"), MaxPayloadBytes: 1 << 20})
					conn.Send(ctx, w)
				}
				accepted <- conn
			}()
			s, err := sion.Dial(ctx, network, "fake-switch", sion.SessionConfig{Name: "victim", Reconnect: sion.ReconnectPolicy{Disabled: true}})
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			conn := <-accepted
			require.NotNil(t, conn)
			t.Cleanup(func() { conn.Close() })
			send := func(m wire.Message) {
				f, err := wire.Encode(nil, m)
				require.NoError(t, err)
				require.NoError(t, conn.Send(ctx, f))
			}

			// The fake switch grants the subscription.
			var opts []sion.SubscribeOption
			if lookIn {
				opts = append(opts, sion.WithLookIn())
			}
			subscribed := make(chan *sion.Subscription, 1)
			go func() {
				sub, err := s.Subscribe(ctx, "{type ⊑ Reading}", opts...)
				assert.NoError(t, err)
				subscribed <- sub
			}()
			var req *wire.Subscribe
			for req == nil {
				f, err := conn.Recv(ctx)
				require.NoError(t, err)
				m, err := wire.Decode(f, wire.DefaultLimits())
				require.NoError(t, err)
				req, _ = m.(*wire.Subscribe)
			}
			send(&wire.Ack{Seq: req.Seq})
			sub := <-subscribed
			require.NotNil(t, sub)

			events := []wire.Event{}
			for i, tc := range badTraceContexts {
				events = append(events, wire.Event{ID: [16]byte{byte(i + 1)}, Type: "Reading", TraceParent: tc.parent, TraceState: tc.state})
			}
			events = append(events, wire.Event{ID: [16]byte{0xee}, Type: "Reading", TraceParent: traceParent, TraceState: traceState})
			matched := []wire.Match{{Sub: req.Sub, Score: 1}}
			var got []*sion.Event
			if !lookIn {
				for _, ev := range events {
					send(&wire.Deliver{Event: ev, Matched: matched})
				}
				select {
				case d := <-sub.C():
					got = append(got, d.Event)
				case <-ctx.Done():
					t.Fatal("the good event was not delivered")
				}
				// Deliveries are handled in order: had a bad one passed, it
				// would have come first.
			} else {
				pulled := make(chan []sion.Delivery, 1)
				go func() {
					ds, err := s.Pull(ctx, len(events))
					assert.NoError(t, err)
					pulled <- ds
				}()
				var pull *wire.Pull
				for pull == nil {
					f, err := conn.Recv(ctx)
					require.NoError(t, err)
					m, err := wire.Decode(f, wire.DefaultLimits())
					require.NoError(t, err)
					pull, _ = m.(*wire.Pull)
				}
				var ds []wire.Delivery
				for _, ev := range events {
					ds = append(ds, wire.Delivery{Event: ev, Matched: matched})
				}
				send(&wire.PullReply{Seq: pull.Seq, Deliveries: ds})
				for _, d := range <-pulled {
					got = append(got, d.Event)
				}
			}
			require.Len(t, got, 1, "only the event with a valid trace context")
			assert.Equal(t, traceParent, got[0].TraceParent)
			assert.Equal(t, traceState, got[0].TraceState)
			assert.NoError(t, s.Err(), "the session goes on")
		})
	}
}

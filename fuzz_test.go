package sion_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
)

// FuzzLinkFrames sends what its input holds, cut into frames, over a link
// to a serving switch after a valid hello: the switch must not panic or
// hang, must answer or close that link, and must keep serving others.
//
//	go test -run=^$ -fuzz=FuzzLinkFrames -fuzztime=1m .
func FuzzLinkFrames(f *testing.F) {
	seeds := []wire.Message{
		&wire.Publish{Seq: 1, Event: wire.Event{Type: "Reading", Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(3)}}}},
		&wire.Publish{Seq: 2, Event: wire.Event{Type: "Reading", ContentType: "application/xml", Data: []byte("<a>"), Condition: "{tier >"}},
		&wire.Subscribe{Seq: 3, Sub: 1, Filter: `{type ⊑ Reading; n >= 2}`, Queue: 1, Overflow: 3},
		&wire.Subscribe{Seq: 4, Sub: 1, Filter: `{xpath(/t:x)}`, Overflow: 9, LookIn: true},
		&wire.Unsubscribe{Seq: 5, Sub: 77},
		&wire.SetProfile{Seq: 6, Profile: []ontology.Attr{{Name: "tier", Value: ontology.Float(2)}}},
		&wire.Pull{Seq: 7, Max: 1 << 31},
		&wire.Ack{Seq: 8},
		&wire.Deliver{Event: wire.Event{Type: "Reading"}},
		&wire.Received{Frames: 1},
		&wire.Received{Frames: 1 << 60},
		&wire.Lost{Lost: []wire.Count{{Sub: 1, N: 3}}},
		&wire.Publish{Seq: 0, Event: wire.Event{Type: "Reading"}},
		&wire.Hello{Version: 2, Session: "again", Resume: []byte("0123456789abcdef"), Received: 9},
		&wire.Bye{},
	}
	for _, m := range seeds {
		b, err := wire.Encode(nil, m)
		require.NoError(f, err)
		f.Add(append([]byte{byte(len(b))}, b...))
	}
	f.Add([]byte{3, 0xff, 0xff, 0xff})

	sw := newSwitch(f, sion.PlaceConfig{})
	network := serveMem(f, sw)
	ctx := context.Background()
	pub := open(f, sw, "pub")
	f.Fuzz(func(t *testing.T, data []byte) {
		conn, err := network.Dial(ctx, "switch")
		require.NoError(t, err)
		defer conn.Close()
		hello, _ := wire.Encode(nil, &wire.Hello{Version: 2, Session: "fuzz"})
		require.NoError(t, conn.Send(ctx, hello))
		_, err = conn.Recv(ctx)
		require.NoError(t, err)
		for len(data) > 0 { // frames: a length byte, then that many bytes
			n := min(int(data[0]), len(data)-1)
			if conn.Send(ctx, data[1:1+n]) != nil {
				break
			}
			data = data[1+n:]
		}
		// The switch answers a ping or has closed the link, promptly.
		ping, _ := wire.Encode(nil, &wire.Ack{Seq: 1 << 40})
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if conn.Send(tctx, ping) == nil {
			for {
				f, err := conn.Recv(tctx)
				require.NotErrorIs(t, err, context.DeadlineExceeded, "the switch neither answered nor closed the link")
				if err != nil {
					break
				}
				if m, err := wire.Decode(f, wire.DefaultLimits()); err == nil {
					if a, ok := m.(*wire.Ack); ok && a.Seq == 1<<40 {
						break
					}
				}
			}
		}
		conn.Close()
		// Others are served as before.
		good, err := sion.Dial(ctx, network, "switch", sion.SessionConfig{Name: "good"})
		require.NoError(t, err)
		defer good.Close()
		sub := subscribe(t, good, `{type ⊑ Reading; n == 42}`)
		publish(t, pub, reading(42))
		require.NoError(t, good.Sync(ctx))
		require.Equal(t, 1, count(sub))
	})
}

// FuzzSharedLinkFrames sends what its input holds, cut into frames, over
// a shared link to a serving switch after a valid link handshake: the
// switch must not panic or hang, must answer a marker or close that link,
// and must keep its other links working.
//
//	go test -run=^$ -fuzz=FuzzSharedLinkFrames -fuzztime=1m .
func FuzzSharedLinkFrames(f *testing.F) {
	for _, m := range []linkctl.Message{
		&linkctl.Register{Ack: 1, Filter: "{type ⊑ Alarm}", Key: 1, TTL: 2},
		&linkctl.Register{Ack: 2, Filter: "{xpath(/t:x)}", Key: 2},
		&linkctl.Release{Key: 1},
		&linkctl.Marker{Ack: 3, TTL: 5},
		&linkctl.Ack{Ack: 1},
		&linkctl.Probe{Dir: 2, Hops: 3, ID: 4, Path: []string{"a", "b"}},
		&linkctl.ProbeReply{Addr: "x", End: true, Hops: 1, ID: 4, Path: []string{"fuzz"}, Switch: "s"},
		&linkctl.Leave{Parent: "nowhere"},
		&linkctl.Synced{},
	} {
		b := controlFrame(f, m)
		f.Add(append([]byte{byte(len(b))}, b...))
	}
	for _, m := range []wire.Message{
		&wire.Forward{Event: wire.Event{ID: [16]byte{9}, Type: "Alarm", TTL: 2}},
		&wire.Forward{Event: wire.Event{ID: [16]byte{8}, Type: "Reading", Attrs: attrs("n", 1.5), TTL: -1}},
		&wire.Forward{Event: wire.Event{ID: [16]byte{7}, Type: "Alarm", TTL: 2, TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "a=1"}},
		&wire.Forward{Event: wire.Event{ID: [16]byte{6}, Type: "Alarm", TTL: 2, TraceParent: "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "A=1"}},
		&wire.Bye{},
	} {
		b, err := wire.Encode(nil, m)
		require.NoError(f, err)
		f.Add(append([]byte{byte(len(b))}, b...))
	}
	f.Add([]byte{3, 0xff, 0xff, 0xff})

	n := newFuzzNetwork(f)
	ctx := context.Background()
	sub := subscribe(f, open(f, n.sws[1], "app"), `{type ⊑ Reading; n == 42}`)
	pub := open(f, n.sws[0], "pub")
	marker := controlFrame(f, &linkctl.Marker{Ack: 1 << 30})
	f.Fuzz(func(t *testing.T, data []byte) {
		l := dialRawLink(t, n, 0, "fuzz")
		for len(data) > 0 { // frames: a length byte, then that many bytes
			k := min(int(data[0]), len(data)-1)
			if l.conn.Send(l.ctx, data[1:1+k]) != nil {
				break
			}
			data = data[1+k:]
		}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if l.conn.Send(tctx, marker) == nil {
			for {
				f, err := l.conn.Recv(tctx)
				require.NotErrorIs(t, err, context.DeadlineExceeded, "the switch neither answered the marker nor closed the link")
				if err != nil {
					break
				}
				if m, err := wire.Decode(f, wire.DefaultLimits()); err == nil {
					if c, ok := m.(*wire.Control); ok {
						if a, err := linkctl.Decode(c); err == nil && a.Kind() == linkctl.KindAck && a.(*linkctl.Ack).Ack == 1<<30 {
							break
						}
					}
				}
			}
		}
		l.conn.Close()
		require.Eventually(t, func() bool { return len(n.sws[0].Links()) == 1 }, 10*time.Second, time.Millisecond)
		// The real link works as before.
		publish(t, pub, reading(42))
		require.NoError(t, n.sws[0].Flush(ctx))
		require.Equal(t, 1, count(sub))
	})
}

// FuzzRemoteSessionFrames is the other side of FuzzLinkFrames: a switch
// that answers a remote session's hello and then sends what its input
// holds, cut into frames. The entity's side must not panic or hang: it
// takes the frames it understands, ends the session on one it does not
// (with Reconnect disabled), and Close returns.
//
//	go test -run=^$ -fuzz=FuzzRemoteSessionFrames -fuzztime=1m .
func FuzzRemoteSessionFrames(f *testing.F) {
	seeds := []wire.Message{
		&wire.Deliver{Event: wire.Event{Type: "Reading", Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(3)}}}, Matched: []wire.Match{{Sub: 1, Score: 1}}},
		&wire.Deliver{Event: wire.Event{Type: "Reading", Condition: "{tier >"}, Matched: []wire.Match{{Sub: 99}}},
		&wire.Ack{Seq: 1},
		&wire.Ack{Seq: 1 << 40},
		&wire.Error{Seq: 2, Code: 4, Message: "no"},
		&wire.Error{Code: 8, Message: "the end"},
		&wire.PullReply{Seq: 3, Deliveries: []wire.Delivery{{Event: wire.Event{Type: "Reading"}}}},
		&wire.Lost{Lost: []wire.Count{{Sub: 1, N: 1 << 62}, {Sub: 7, N: 1}}},
		&wire.Welcome{Version: 2},
		&wire.Forward{Event: wire.Event{Type: "Reading"}},
	}
	for _, m := range seeds {
		b, err := wire.Encode(nil, m)
		require.NoError(f, err)
		f.Add(append([]byte{byte(len(b))}, b...))
	}
	f.Add([]byte{3, 0xff, 0xff, 0xff})

	network, err := mem.NewNetwork(mem.Config{})
	require.NoError(f, err)
	l, err := network.Listen("fake-switch")
	require.NoError(f, err)
	f.Cleanup(func() { l.Close() })
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		accepted := make(chan transport.Conn, 1)
		go func() {
			conn, err := l.Accept(ctx)
			if err != nil {
				close(accepted)
				return
			}
			if _, err := conn.Recv(ctx); err == nil { // the hello
				w, _ := wire.Encode(nil, &wire.Welcome{Version: 2, Switch: "fake", Place: "test", Token: []byte("t"), MaxPayloadBytes: 1 << 20})
				conn.Send(ctx, w)
			}
			accepted <- conn
		}()
		s, err := sion.Dial(ctx, network, "fake-switch", sion.SessionConfig{Name: "victim", Reconnect: sion.ReconnectPolicy{Disabled: true}})
		conn := <-accepted
		require.NotNil(t, conn)
		defer conn.Close()
		require.NoError(t, err)
		defer s.Close()
		for len(data) > 0 { // frames: a length byte, then that many bytes
			n := min(int(data[0]), len(data)-1)
			if conn.Send(ctx, data[1:1+n]) != nil {
				break
			}
			data = data[1+n:]
		}
		conn.Close()
		select {
		case <-s.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the session did not end when its switch went away")
		}
		require.ErrorIs(t, s.Err(), sion.ErrClosed)
	})
}

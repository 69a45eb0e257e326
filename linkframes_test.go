package sion_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
)

// rawLink is a hand-driven child switch: it completes the link handshake
// and then sends whatever a test wants.
type rawLink struct {
	t    *testing.T
	conn transport.Conn
	ctx  context.Context
}

func dialRawLink(t *testing.T, n *network, at int, name string) *rawLink {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	conn, err := n.tr.Dial(ctx, n.addrs[at])
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	l := &rawLink{t: t, conn: conn, ctx: ctx}
	l.send(&wire.Hello{Version: 2, Session: name})
	require.IsType(t, &wire.Welcome{}, l.recv())
	l.send(&wire.Forward{Event: wire.Event{Type: ontology.LinkRequestType, Attrs: attrs("link", 7, "place", n.place.Name(), "switch", name)}})
	fw, ok := l.recv().(*wire.Forward)
	require.True(t, ok)
	require.Equal(t, ontology.LinkAcceptType, fw.Event.Type)
	l.send(&wire.Forward{Event: wire.Event{Type: ontology.SyncedType}})
	return l
}

func (l *rawLink) send(m wire.Message) {
	l.t.Helper()
	f, err := wire.Encode(nil, m)
	require.NoError(l.t, err)
	require.NoError(l.t, l.conn.Send(l.ctx, f))
}

func (l *rawLink) recv() wire.Message {
	l.t.Helper()
	f, err := l.conn.Recv(l.ctx)
	require.NoError(l.t, err)
	m, err := wire.Decode(f, wire.DefaultLimits())
	require.NoError(l.t, err)
	return m
}

// recvUntil reads frames until one of type typ (a control or data event
// type, or "Error") arrives, and returns it; it fails if the link ends.
func (l *rawLink) recvUntil(typ string) wire.Message {
	l.t.Helper()
	for {
		m := l.recv()
		switch m := m.(type) {
		case *wire.Error:
			if typ == "Error" {
				return m
			}
		case *wire.Forward:
			if m.Event.Type == typ {
				return m
			}
		}
	}
}

// closed reports whether the switch ended the link: frames until an
// error frame, then the end.
func (l *rawLink) closedWith() string {
	l.t.Helper()
	msg := ""
	for {
		f, err := l.conn.Recv(l.ctx)
		if err != nil {
			require.NotErrorIs(l.t, err, context.DeadlineExceeded, "the link stayed open")
			return msg
		}
		if m, err := wire.Decode(f, wire.DefaultLimits()); err == nil {
			if e, ok := m.(*wire.Error); ok {
				msg = e.Message
			}
		}
	}
}

// TestMalformedLinkFrames: what a peer switch sends that the switch
// cannot use closes that link only, with an error frame saying why;
// events the place refuses are counted and dropped; bad filters are
// refused in the acknowledgement.
func TestMalformedLinkFrames(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, []int{-1, 0}, func(t *testing.T, n *network) {
		sub := subscribe(t, open(t, n.sws[1], "app"), `{type ⊑ Alarm}`)

		for _, tc := range []struct {
			name  string
			frame func() []byte
			says  string
		}{
			{"garbage", func() []byte { return []byte{0xff, 0x00, 0x01} }, "protocol error"},
			{"a session frame", func() []byte { f, _ := wire.Encode(nil, &wire.Pull{Seq: 1}); return f }, "does not carry Pull frames"},
			{"register without a key", func() []byte {
				f, _ := wire.Encode(nil, &wire.Forward{Event: wire.Event{Type: ontology.RegisterType, Attrs: attrs("filter", "{}", "ttl", 1)}})
				return f
			}, `control attribute "key" is missing`},
			{"release of an unknown key", func() []byte {
				f, _ := wire.Encode(nil, &wire.Forward{Event: wire.Event{Type: ontology.ReleaseType, Attrs: attrs("key", 99)}})
				return f
			}, "release of key 99"},
			{"an unknown control type", func() []byte {
				f, _ := wire.Encode(nil, &wire.Forward{Event: wire.Event{Type: ontology.LinkAcceptType}})
				return f
			}, `unexpected control event "sion.LinkAccept"`},
			{"a key of the wrong kind", func() []byte {
				f, _ := wire.Encode(nil, &wire.Forward{Event: wire.Event{Type: ontology.AckType, Attrs: attrs("ack", "one")}})
				return f
			}, `control attribute "ack" is string, want int`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				l := dialRawLink(t, n, 0, "rogue")
				require.NoError(t, l.conn.Send(l.ctx, tc.frame()))
				assert.Contains(t, l.closedWith(), tc.says)
			})
		}

		// A bad filter is refused in its acknowledgement; the link stays.
		l := dialRawLink(t, n, 0, "careless")
		l.send(&wire.Forward{Event: wire.Event{Type: ontology.RegisterType, Attrs: attrs("ack", 1, "filter", "{type ⊑ Gossip}", "key", 1, "ttl", 0)}})
		ack := l.recvUntil(ontology.AckType).(*wire.Forward)
		assert.Contains(t, must(controlValue(ack.Event.Attrs, "error")).Str(), `unknown event type "Gossip"`)
		// An event the place refuses is counted and dropped; the link stays.
		l.send(&wire.Forward{Event: wire.Event{ID: [16]byte{1}, Type: "Gossip", TTL: 3}})
		l.send(&wire.Forward{Event: wire.Event{ID: [16]byte{2}, Type: "Alarm", TTL: 3}})
		l.send(&wire.Forward{Event: wire.Event{ID: [16]byte{2}, Type: "Alarm", TTL: 3}}) // a duplicate
		var info sion.LinkInfo
		require.Eventually(t, func() bool {
			for _, li := range n.sws[0].Links() {
				if li.Peer == "careless" {
					info = li
				}
			}
			return info.EventsReceived == 3
		}, 10*time.Second, time.Millisecond, "all three frames handled")
		require.Eventually(t, func() bool { return count(sub) == 1 }, 10*time.Second, time.Millisecond, "the good event crossed sw0 to sw1")
		assert.Equal(t, uint64(1), info.Refused)
		assert.Equal(t, uint64(1), info.Duplicates)
		assert.Equal(t, uint64(3), info.EventsReceived)

		// The rest of the place never noticed.
		l.conn.Close() // it would not answer Flush's marker
		require.Eventually(t, func() bool { return len(n.sws[0].Links()) == 1 }, 10*time.Second, time.Millisecond)
		publish(t, open(t, n.sws[0], "pub"), &sion.Event{Type: "Alarm"})
		n.flush()
		assert.Equal(t, 1, count(sub))
	})
}

func controlValue(as []ontology.Attr, name string) (ontology.Value, bool) {
	for _, a := range as {
		if a.Name == name {
			return a.Value, true
		}
	}
	return ontology.Value{}, false
}

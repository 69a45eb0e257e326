package sion_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
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
		hello, _ := wire.Encode(nil, &wire.Hello{Version: 1, Session: "fuzz"})
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

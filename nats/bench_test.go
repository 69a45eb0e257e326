package nats_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/nats"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// benchBatch is how many events one op publishes before it waits for
// them all to arrive.
const benchBatch = 1000

// BenchmarkSharedLink measures the events/s of one shared link: a child
// switch publishes the USGS week's events, in batches of benchBatch, and
// a subscriber of every hazard on its parent switch receives them. The
// link runs over the NATS transport (each switch with its own connection
// to one embedded NATS server) and over transport/tcp on loopback, in the
// same run. For NATS it also reports the messages the server took in per
// event (data, acknowledgements, keepalives, both ways).
//
//	go test -run '^$' -bench SharedLink .
func BenchmarkSharedLink(b *testing.B) {
	s := startServer(b, nil)
	for _, sys := range []struct {
		name string
		// transports returns the parent's and the child's transport,
		// and the address the parent listens on.
		transports func(b *testing.B) (parent, child transport.Transport, addr string)
	}{
		{"nats", func(b *testing.B) (transport.Transport, transport.Transport, string) {
			cfg := nats.Config{SubjectPrefix: prefix(b)}
			return newTransport(b, connect(b, s.ClientURL()), cfg), newTransport(b, connect(b, s.ClientURL()), cfg), "parent"
		}},
		{"tcp", func(b *testing.B) (transport.Transport, transport.Transport, string) {
			tr, err := tcp.New(tcp.Config{})
			require.NoError(b, err)
			return tr, tr, "127.0.0.1:0"
		}},
	} {
		b.Run("transport="+sys.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			place, readWeek := usgsPlace(b)
			events := readWeek()
			ptr, ctr, addr := sys.transports(b)
			parent := serve(b, place, ptr, "parent", addr)
			child, err := sion.NewSwitch(sion.SwitchConfig{Name: "child", Place: place})
			require.NoError(b, err)
			b.Cleanup(func() { child.Close() })
			_, err = child.Link(ctx, ctr, parent.addr, sion.LinkConfig{ProbeHops: -1})
			require.NoError(b, err)

			var got atomic.Int64
			arrived := make(chan struct{}, 1)
			var want atomic.Int64
			sess, err := parent.sw.Open(ctx, sion.SessionConfig{Name: "watcher"})
			require.NoError(b, err)
			sub, err := sess.Subscribe(ctx, `{type ⊑ hazard}`, sion.WithQueue(4*benchBatch), sion.WithHandler(func(sion.Delivery) {
				if got.Add(1) >= want.Load() {
					select {
					case arrived <- struct{}{}:
					default:
					}
				}
			}))
			require.NoError(b, err)
			pub, err := child.Open(ctx, sion.SessionConfig{Name: "feed"})
			require.NoError(b, err)

			sent := 0
			send := func() {
				want.Store(int64(sent + benchBatch))
				for range benchBatch {
					require.NoError(b, pub.Publish(ctx, events[sent%len(events)]))
					sent++
				}
				for got.Load() < want.Load() {
					select {
					case <-arrived:
					case <-ctx.Done():
						b.Fatalf("only %d of %d events arrived (%+v)", got.Load(), want.Load(), sub.Stats())
					}
				}
			}
			send() // warm up: the link's buffers, the NATS subscriptions
			inMsgs := func() int64 {
				v, err := s.Varz(nil)
				require.NoError(b, err)
				return v.InMsgs
			}
			b.ReportAllocs()
			start, from, msgs := time.Now(), sent, inMsgs()
			for b.Loop() {
				send()
			}
			b.ReportMetric(float64(sent-from)/time.Since(start).Seconds(), "events/s")
			if sys.name == "nats" {
				b.ReportMetric(float64(inMsgs()-msgs)/float64(sent-from), "NATS-msgs/event")
			}
			for _, li := range child.Links() {
				require.Zero(b, li.Dropped, "events dropped on the link")
			}
			require.Equal(b, int64(sent), got.Load(), "every event arrived once")
		})
	}
}

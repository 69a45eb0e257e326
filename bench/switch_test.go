package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// Publish → deliver through one switch, against what a Go user would pick
// instead: watermill's in-memory gochannel pub/sub, every subscriber
// receiving every message and applying the same filter by hand.
//
// Workload: events Reading{n, t} with n = i mod 100 and t the publish time;
// subscriber j wants n >= threshold(j), so an event reaches about half of
// them. One publisher goroutine. A benchmark op is a batch of 100 events
// published back to back, then waited for until every matching subscriber
// has received them (gochannel's Publish returns before delivery, with a
// goroutine per message and subscriber, so an op must include the wait or
// b.N grows without bound). Reported: ns/op per batch, events/s,
// deliveries/s, and the p50/p99 latency from Publish to the subscriber's
// handler (µs). sion subscriptions have a 1,024-event queue, ten batches,
// so nothing is dropped; local ones use WithOverflow(Block), so a slow
// subscriber would slow the publisher (remote sessions cannot Block).

func threshold(j int) int64 { return int64(j*37) % 100 }

// overflow returns the benchmarks' overflow policy: Block for a local
// session, the default for a remote one, which cannot Block (its queue
// holds more than a batch, so nothing is dropped).
func overflow(remote bool) sion.SubscribeOption {
	if remote {
		return sion.WithOverflow(sion.DropNewest)
	}
	return sion.WithOverflow(sion.Block)
}

var readingOnt = sync.OnceValues(func() (*ontology.Ontology, error) {
	return ontology.New([]ontology.TypeDef{{Name: "Reading", Attributes: []ontology.Attribute{
		{Name: "n", Kind: ontology.KindInt}, {Name: "t", Kind: ontology.KindInt},
	}}})
})

// expected returns how many deliveries events 0…events-1 make to subs
// subscribers.
func expected(subs, events int) int64 {
	var per [100]int64
	for j := range subs {
		for n := threshold(j); n < 100; n++ {
			per[n]++
		}
	}
	var total int64
	for i := range events {
		total += per[i%100]
	}
	return total
}

// latencies is a histogram of latencies with 5 % wide buckets, safe for
// concurrent use, that never allocates while recording.
type latencies struct {
	buckets [1024]atomic.Int64
	n       atomic.Int64
}

func (h *latencies) record(d time.Duration) {
	b := 0
	if d > 0 {
		b = min(len(h.buckets)-1, int(math.Log(float64(d))/math.Log(1.05)))
	}
	h.buckets[b].Add(1)
	h.n.Add(1)
}

// quantile returns the latency below which fraction q of the records fall,
// in microseconds.
func (h *latencies) quantile(q float64) float64 {
	want := int64(math.Ceil(q * float64(h.n.Load())))
	var seen int64
	for b := range h.buckets {
		if seen += h.buckets[b].Load(); seen >= want && want > 0 {
			return math.Pow(1.05, float64(b+1)) / 1e3
		}
	}
	return 0
}

func report(b *testing.B, start time.Time, events int, deliveries int64, h *latencies) {
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(events)/el, "events/s")
	b.ReportMetric(float64(deliveries)/el, "deliveries/s")
	b.ReportMetric(h.quantile(0.50), "p50-µs")
	b.ReportMetric(h.quantile(0.99), "p99-µs")
}

var subscriberCounts = []int{1, 10, 1000}

const batch = 100 // events per benchmark op

// waitFor waits until n reaches want.
func waitFor(n *atomic.Int64, want int64) {
	for n.Load() < want {
		time.Sleep(10 * time.Microsecond)
	}
}

func BenchmarkPublishDeliver(b *testing.B) {
	for _, subs := range subscriberCounts {
		b.Run(fmt.Sprintf("sion-local/subs=%d", subs), func(b *testing.B) { benchSion(b, subs, false) })
		b.Run(fmt.Sprintf("sion-mem-remote/subs=%d", subs), func(b *testing.B) { benchSion(b, subs, true) })
		b.Run(fmt.Sprintf("watermill-gochannel/subs=%d", subs), func(b *testing.B) { benchWatermill(b, subs) })
	}
}

// benchSion runs the sion side; with remote, the subscribers and the
// publisher are remote sessions over the mem transport (the wire codec
// and the link goroutines in between).
func benchSion(b *testing.B, subs int, remote bool) {
	ont, err := readingOnt()
	require.NoError(b, err)
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "bench", Ontology: ont})
	require.NoError(b, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "sw", Place: place})
	require.NoError(b, err)
	defer sw.Close()
	ctx := context.Background()
	open := func(name string) (*sion.Session, error) { return sw.Open(ctx, sion.SessionConfig{Name: name}) }
	if remote {
		network, err := mem.NewNetwork(mem.Config{})
		require.NoError(b, err)
		l, err := network.Listen("switch")
		require.NoError(b, err)
		sctx, stop := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- sw.Serve(sctx, l) }()
		defer func() { stop(); <-served }()
		open = func(name string) (*sion.Session, error) {
			return sion.Dial(ctx, network, "switch", sion.SessionConfig{Name: name})
		}
	}
	var got atomic.Int64
	var h latencies
	for j := range subs {
		s, err := open(fmt.Sprint("sub", j))
		require.NoError(b, err)
		defer s.Close()
		_, err = s.Subscribe(ctx, fmt.Sprintf(`{type ⊑ Reading; n >= %d}`, threshold(j)),
			sion.WithQueue(1024), overflow(remote), sion.WithHandler(func(d sion.Delivery) {
				t, _ := d.Event.Value("t")
				h.record(time.Duration(time.Now().UnixNano() - t.Int()))
				got.Add(1)
			}))
		require.NoError(b, err)
	}
	pub, err := open("pub")
	require.NoError(b, err)
	defer pub.Close()
	b.ReportAllocs()
	start := time.Now()
	i := 0
	for b.Loop() {
		for range batch {
			ev := &sion.Event{Type: "Reading", Attrs: []ontology.Attr{
				{Name: "n", Value: ontology.Int(int64(i % 100))}, {Name: "t", Value: ontology.Int(time.Now().UnixNano())},
			}}
			if err := pub.Publish(ctx, ev); err != nil {
				b.Fatal(err)
			}
			i++
		}
		waitFor(&got, expected(subs, i))
	}
	want := expected(subs, i)
	report(b, start, i, want, &h)
	require.Equal(b, want, got.Load(), "every matching subscriber got every event once")
}

func benchWatermill(b *testing.B, subs int) {
	ps := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 1024}, watermill.NopLogger{})
	defer ps.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got atomic.Int64
	var h latencies
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for j := range subs {
		msgs, err := ps.Subscribe(ctx, "readings")
		require.NoError(b, err)
		th := threshold(j)
		wg.Go(func() {
			for msg := range msgs {
				// The filter by hand: parse the attribute, compare.
				if n, err := strconv.ParseInt(msg.Metadata.Get("n"), 10, 64); err == nil && n >= th {
					t, _ := strconv.ParseInt(msg.Metadata.Get("t"), 10, 64)
					h.record(time.Duration(time.Now().UnixNano() - t))
					got.Add(1)
				}
				msg.Ack()
			}
		})
	}
	b.ReportAllocs()
	start := time.Now()
	i := 0
	for b.Loop() {
		for range batch {
			msg := message.NewMessage(watermill.NewUUID(), nil)
			msg.Metadata.Set("n", strconv.Itoa(i%100))
			msg.Metadata.Set("t", strconv.FormatInt(time.Now().UnixNano(), 10))
			if err := ps.Publish("readings", msg); err != nil {
				b.Fatal(err)
			}
			i++
		}
		waitFor(&got, expected(subs, i))
	}
	want := expected(subs, i)
	report(b, start, i, want, &h)
	require.Equal(b, want, got.Load())
}

package watermill_test

import (
	"context"
	"sync"
	"testing"
	"time"

	wmessage "github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/watermill"
)

// topicStats returns the Subscriber's counters of topic.
func topicStats(t *testing.T, sub *watermill.Subscriber, topic string) watermill.TopicStats {
	t.Helper()
	for _, st := range sub.Stats() {
		if st.Topic == topic {
			return st
		}
	}
	require.FailNow(t, "no such topic", topic)
	return watermill.TopicStats{}
}

// TestNack checks that Nack offers the same message again, as a fresh
// copy, before the messages behind it, with and without a delay.
func TestNack(t *testing.T) {
	for _, v := range variants {
		for _, delay := range []time.Duration{0, time.Millisecond} {
			t.Run(v.name+"/delay="+delay.String(), func(t *testing.T) {
				p := newPair(t, v.make(t, loadOntology(t, readings)), watermill.SubscriberConfig{RedeliveryDelay: delay})
				ch := subscribeTo(t, p.sub, "Reading")
				require.NoError(t, p.pub.Publish("Reading",
					newMessage(uuid1, "one", map[string]string{"seq": "1"}),
					newMessage(uuid2, "two", map[string]string{"seq": "2"})))

				first := receive(t, ch)
				require.True(t, first.Nack())
				again := receive(t, ch)
				assert.NotSame(t, first, again)
				assert.True(t, first.Equals(again), "same UUID, payload and metadata")
				require.True(t, again.Ack())
				second := receive(t, ch)
				assert.Equal(t, uuid2, second.UUID)
				second.Ack()
				assert.Equal(t, uint64(1), topicStats(t, p.sub, "Reading").Redelivered)
			})
		}
	}
}

// TestNextWaitsForAck checks that a consumer gets no message while it
// holds one it has not acknowledged: the next one waits, taken from the
// sion queue, until Ack.
func TestNextWaitsForAck(t *testing.T) {
	p := newPair(t, variants[0].make(t, loadOntology(t, readings)), watermill.SubscriberConfig{})
	ch := subscribeTo(t, p.sub, "Reading")
	require.NoError(t, p.pub.Publish("Reading", newMessage(uuid1, "", nil), newMessage(uuid2, "", nil)))
	first := receive(t, ch)
	require.Eventually(t, func() bool {
		st := topicStats(t, p.sub, "Reading")
		return st.Waiting == 1 && st.Queued == 0
	}, 10*time.Second, time.Millisecond, "the second message waits for the consumer")
	select {
	case m := <-ch:
		require.Failf(t, "a message before Ack", "%s", m.UUID)
	default:
	}
	first.Ack()
	assert.Equal(t, uuid2, receive(t, ch).UUID)
}

// TestContexts checks the messages' contexts: values of Subscribe's ctx,
// cancelled after Ack and Nack; and that ctx's end closes the channel and
// hands an unacknowledged message to the next consumer.
func TestContexts(t *testing.T) {
	type key struct{}
	p := newPair(t, variants[0].make(t, loadOntology(t, readings)), watermill.SubscriberConfig{})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	ch, err := p.sub.Subscribe(ctx, "Reading")
	require.NoError(t, err)
	require.NoError(t, p.pub.Publish("Reading", newMessage(uuid1, "", nil), newMessage(uuid2, "", nil), newMessage(uuid3, "", nil)))

	for _, settle := range []struct {
		name string
		fn   func(*wmessage.Message) bool
	}{{"ack", (*wmessage.Message).Ack}, {"nack", (*wmessage.Message).Nack}} {
		t.Run(settle.name, func(t *testing.T) {
			m := receive(t, ch)
			assert.Equal(t, "v", m.Context().Value(key{}))
			require.NoError(t, m.Context().Err())
			require.True(t, settle.fn(m))
			<-m.Context().Done()
		})
	}
	held := receive(t, ch) // uuid2 again, after the Nack
	assert.Equal(t, uuid2, held.UUID)
	cancel()
	for range ch { // closes; a message offered meanwhile is left unread
	}
	<-held.Context().Done()

	next := subscribeTo(t, p.sub, "Reading")
	assert.Equal(t, uuid2, receive(t, next).UUID, "the unacknowledged message goes to the next consumer")
}

// TestClose checks Close: channels closed, held messages' contexts
// cancelled, idempotent, later calls refused.
func TestClose(t *testing.T) {
	p := newPair(t, variants[0].make(t, loadOntology(t, readings)), watermill.SubscriberConfig{})
	ch := subscribeTo(t, p.sub, "Reading")
	idle := subscribeTo(t, p.sub, "Alarm")
	require.NoError(t, p.pub.Publish("Reading", newMessage(uuid1, "", nil)))
	m := receive(t, ch)

	require.NoError(t, p.sub.Close())
	require.NoError(t, p.sub.Close())
	require.NoError(t, p.pub.Close())
	require.NoError(t, p.pub.Close())
	<-m.Context().Done()
	for _, c := range []<-chan *wmessage.Message{ch, idle} {
		_, open := <-c
		assert.False(t, open)
	}
	_, err := p.sub.Subscribe(context.Background(), "Reading")
	require.ErrorIs(t, err, sion.ErrClosed)
	require.ErrorIs(t, p.sub.SubscribeInitialize("Reading"), sion.ErrClosed)
	require.ErrorIs(t, p.pub.Publish("Reading", newMessage(uuid2, "", nil)), sion.ErrClosed)
}

// TestCompetingConsumers checks that the consumers of one topic on one
// Subscriber share its messages: each goes to exactly one of them.
func TestCompetingConsumers(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := newPair(t, v.make(t, loadOntology(t, readings)), watermill.SubscriberConfig{})
			const consumers, messages = 3, 60
			var (
				mu   sync.Mutex
				seen = map[string]int{}
				wg   sync.WaitGroup
			)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			all := make(chan struct{})
			for range consumers {
				ch, err := p.sub.Subscribe(ctx, "Reading")
				require.NoError(t, err)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for m := range ch {
						m.Ack()
						mu.Lock()
						seen[m.UUID]++
						if seen[m.UUID] == 1 && len(seen) == messages {
							close(all)
						}
						mu.Unlock()
					}
				}()
			}
			var sent []*wmessage.Message
			for range messages {
				sent = append(sent, wmessage.NewMessage(wmessage.NewMessage("", nil).UUID, nil))
			}
			for i := range sent {
				sent[i].UUID = newUUID(i)
			}
			require.NoError(t, p.pub.Publish("Reading", sent...))
			select {
			case <-all:
			case <-time.After(20 * time.Second):
				require.FailNow(t, "not every message arrived")
			}
			cancel()
			wg.Wait()
			for _, m := range sent {
				assert.Equal(t, 1, seen[m.UUID], m.UUID)
			}
		})
	}
}

// newUUID returns a canonical UUID made of i.
func newUUID(i int) string {
	const hex = "0123456789abcdef"
	b := []byte("00000000-0000-4000-8000-000000000000")
	for j, pos := 0, len(b)-1; j < 8; j, pos = j+1, pos-1 {
		b[pos] = hex[(i>>(4*j))&15]
	}
	return string(b)
}

// TestOverflow checks what a slow consumer costs: past the queue, new
// events are dropped for this Subscriber, counted and reported, and what
// fit is delivered.
func TestOverflow(t *testing.T) {
	var (
		mu   sync.Mutex
		slow []string
	)
	p := newPair(t, variants[0].make(t, loadOntology(t, readings)), watermill.SubscriberConfig{Queue: 2,
		SlowConsumer: func(topic string, st sion.SubscriptionStats) {
			mu.Lock()
			defer mu.Unlock()
			slow = append(slow, topic)
		}})
	require.NoError(t, p.sub.SubscribeInitialize("Reading"))
	for i := range 5 {
		require.NoError(t, p.pub.Publish("Reading", newMessage(newUUID(i), "", nil)))
	}
	// The dispatcher may hold one message it took from the queue.
	st := topicStats(t, p.sub, "Reading")
	assert.Contains(t, []uint64{2, 3}, st.Dropped)
	mu.Lock()
	assert.Equal(t, []string{"Reading"}, slow)
	mu.Unlock()

	ch := subscribeTo(t, p.sub, "Reading")
	for i := range 5 - int(st.Dropped) {
		m := receive(t, ch)
		assert.Equal(t, newUUID(i), m.UUID, "a gap-free prefix")
		m.Ack()
	}
	require.NoError(t, p.pub.Publish("Reading", newMessage(uuid1, "", nil)))
	assert.Equal(t, uuid1, receive(t, ch).UUID)
}

// TestSessionEnds checks that the channels close when the subscription's
// session ends, and that the Subscriber then refuses new topics.
func TestSessionEnds(t *testing.T) {
	n := variants[0].make(t, loadOntology(t, readings))
	s := n.subscriberSession(t, "doomed")
	sub, err := watermill.NewSubscriber(s, watermill.SubscriberConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sub.Close()) })
	ch := subscribeTo(t, sub, "Reading")
	require.NoError(t, s.Close())
	for range ch {
	}
	_, err = sub.Subscribe(context.Background(), "Reading")
	require.ErrorIs(t, err, sion.ErrClosed)
}

package watermill

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	wmessage "github.com/ThreeDotsLabs/watermill/message"

	"github.com/sion-go/sion"
)

// SubscriberConfig configures a Subscriber: the conversion (Config) and
// the sion subscription each topic gets. The zero value means the
// defaults.
type SubscriberConfig struct {
	Config
	// Queue is the length, in events, of each topic's sion subscription
	// queue (sion.WithQueue): how many events may wait for the consumers
	// of the topic, besides the one the Subscriber has taken to offer
	// next (TopicStats.Waiting); 0 means sion.DefaultQueue.
	Queue int
	// Overflow is what a topic's full queue does (sion.WithOverflow); the
	// zero value is sion.DropNewest: new events are dropped for this
	// Subscriber only, counted in TopicStats.Dropped, and SlowConsumer is
	// called. sion.Block makes the publisher wait instead (a local session
	// only: a remote session refuses it, and Subscribe returns an error
	// wrapping sion.ErrInvalidConfig). Choose it with care: a topic's
	// queue lives until Close, consumer or not, so a full one holds its
	// publishers until their messages' contexts end (and a publisher
	// whose event crossed a shared link holds up that link).
	Overflow sion.Overflow
	// RedeliveryDelay is how long a nacked message waits before it is
	// offered again; the messages behind it wait too, so order is kept.
	// 0 offers it again at once.
	RedeliveryDelay time.Duration
	// SlowConsumer, when set, is called with the topic and its sion
	// subscription's counters whenever the topic's queue overflows after
	// it had room (sion.WithSlowConsumer): it runs on the publishing
	// goroutine and must return quickly.
	SlowConsumer func(topic string, st sion.SubscriptionStats)
}

// Subscriber is a watermill message.Subscriber over a sion session (S1
// sessions and subscriptions). Each topic it is asked for gets one sion
// subscription on the session, with the topic's filter (Topics.Filter),
// made by the first SubscribeInitialize or Subscribe of the topic and
// kept until Close: events of the topic published after it was made wait
// in its queue, whether or not a Subscribe call is reading them. Every
// Subscribe call of a topic is a consumer of that queue; with several,
// each message goes to one of them (competing consumers). It does not own
// the session: Close cancels its subscriptions, not the session.
//
// A Subscriber is safe for concurrent use.
type Subscriber struct {
	s   *sion.Session
	c   *codec
	cfg SubscriberConfig

	mu     sync.Mutex
	topics map[string]*topicQueue // mu
	closed bool                   // mu
	stop   chan struct{}          // closed by Close
	wg     sync.WaitGroup         // dispatchers and fetchers
}

var (
	_ wmessage.Subscriber           = (*Subscriber)(nil)
	_ wmessage.SubscribeInitializer = (*Subscriber)(nil)
)

// NewSubscriber returns a Subscriber on s. It returns an error wrapping
// sion.ErrInvalidConfig for a nil session, a remote one (sion.Dial)
// without Config.Ontology, or a negative Queue or RedeliveryDelay.
func NewSubscriber(s *sion.Session, cfg SubscriberConfig) (*Subscriber, error) {
	c, err := newCodec(s, cfg.Config)
	if err != nil {
		return nil, err
	}
	if cfg.Queue < 0 || cfg.RedeliveryDelay < 0 {
		return nil, fmt.Errorf("%w: watermill: negative Queue or RedeliveryDelay", sion.ErrInvalidConfig)
	}
	return &Subscriber{s: s, c: c, cfg: cfg, topics: map[string]*topicQueue{}, stop: make(chan struct{})}, nil
}

// SubscribeInitialize makes topic's sion subscription now, so that
// messages published from now on wait for a later Subscribe (see
// Subscriber). It returns when the subscription is active on every switch
// within its TTL (S2 subscription contract), and the errors of Subscribe.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.topicLocked(context.Background(), topic)
	return err
}

// Subscribe returns a channel of topic's messages: those published after
// the topic's sion subscription was made (by this call, or an earlier
// SubscribeInitialize or Subscribe of this Subscriber), converted as the
// package documentation says ("Mapping"). It returns once the
// subscription is active on every switch within its TTL (S2).
//
// The channel carries one message at a time: the next is sent only after
// the previous one is acknowledged. Ack takes it off the queue; Nack
// offers it again — a fresh message with the same UUID, payload and
// metadata — after RedeliveryDelay, before any other message of the topic.
// Each message's Context derives from ctx (its values are ctx's) and is
// cancelled after Ack or Nack and when the channel closes. The channel
// closes when ctx ends, at Close, or when the topic's sion subscription
// ends (its session closed or failed for good; logged at level Warn). A
// message not yet acknowledged then goes back to the head of the topic's
// queue, for the next consumer; an Ack that comes later does not take it
// back.
//
// Errors, wrapped: sion.ErrClosed after Close; the Topics' error;
// sion.ErrUnknownEventType, sion.ErrInvalidFilter, sion.ErrInvalidConfig
// and sion.ErrNotGranted from Session.Subscribe. Test them with errors.Is.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *wmessage.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.topicLocked(ctx, topic)
	if err != nil {
		return nil, err
	}
	c := &consumer{out: make(chan *wmessage.Message), gone: ctx.Done(),
		msgContext: func() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }}
	select {
	case q.attach <- c:
		return c.out, nil
	case <-q.done: // the sion subscription has just ended: make another
		delete(s.topics, topic)
		if q, err = s.topicLocked(ctx, topic); err != nil {
			return nil, err
		}
		select {
		case q.attach <- c:
			return c.out, nil
		case <-q.done:
			return nil, fmt.Errorf("watermill: topic %q: %w", topic, q.sub.Err())
		}
	}
}

// topicLocked returns topic's queue, making it when there is none or the
// one there has ended. s.mu must be held.
func (s *Subscriber) topicLocked(ctx context.Context, topic string) (*topicQueue, error) {
	if s.closed {
		return nil, fmt.Errorf("watermill: subscriber: %w", sion.ErrClosed)
	}
	if q, ok := s.topics[topic]; ok {
		select {
		case <-q.done:
		default:
			return q, nil
		}
	}
	src, err := s.c.topics.Filter(topic)
	if err != nil {
		return nil, fmt.Errorf("watermill: topic %q: %w", topic, err)
	}
	opts := []sion.SubscribeOption{sion.WithOverflow(s.cfg.Overflow)}
	if s.cfg.Queue > 0 {
		opts = append(opts, sion.WithQueue(s.cfg.Queue))
	}
	if fn := s.cfg.SlowConsumer; fn != nil {
		opts = append(opts, sion.WithSlowConsumer(func(st sion.SubscriptionStats) { fn(topic, st) }))
	}
	sub, err := s.s.Subscribe(ctx, src, opts...)
	if err != nil {
		return nil, fmt.Errorf("watermill: topic %q: %w", topic, err)
	}
	q := &topicQueue{name: topic, sub: sub, attach: make(chan *consumer), done: make(chan struct{}),
		want: make(chan struct{}), fetched: make(chan sion.Delivery), fetchErr: make(chan error, 1)}
	s.topics[topic] = q
	s.wg.Add(2)
	go func() { defer s.wg.Done(); q.fetch(s.stop) }()
	go func() { defer s.wg.Done(); s.dispatch(q) }()
	return q, nil
}

// Close cancels every topic's sion subscription, closes every channel
// Subscribe returned (cancelling the Context of each message not yet
// acknowledged), and waits for the Subscriber's goroutines. Messages
// waiting in the topics' queues are dropped. Later calls return errors
// wrapping sion.ErrClosed. Close is idempotent and returns nil; it waits
// for a Subscribe in progress (bounded by the place's ContractTimeout)
// and does not close the session.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stop)
		for _, q := range s.topics {
			_ = q.sub.Cancel() // idempotent; its error is ErrClosed at most
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// TopicStats is a snapshot of one topic's counters: its sion
// subscription's (Dropped counts the events its full queue lost, Queued
// those waiting in it) and the messages taken from that queue that wait
// here for a consumer.
type TopicStats struct {
	// Topic is the topic as given to Subscribe or SubscribeInitialize.
	Topic string
	sion.SubscriptionStats
	// Waiting is the number of messages taken from the sion queue that
	// wait here for a consumer: at most one new message, plus those
	// nacked or returned by a consumer that ended.
	Waiting int
	// Redelivered counts the times a message was offered again (a Nack,
	// or its consumer ending before Ack), over the topic's life.
	Redelivered uint64
}

// Stats returns the counters of the Subscriber's topics, sorted by topic.
func (s *Subscriber) Stats() []TopicStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TopicStats, 0, len(s.topics))
	for _, name := range slices.Sorted(maps.Keys(s.topics)) {
		q := s.topics[name]
		out = append(out, TopicStats{Topic: name, SubscriptionStats: q.sub.Stats(),
			Waiting: int(q.waiting.Load()), Redelivered: q.redelivered.Load()})
	}
	return out
}

// topicQueue is one topic's sion subscription, the goroutine that takes
// its events (fetch) and the one that hands them to consumers (dispatch).
type topicQueue struct {
	name     string
	sub      *sion.Subscription
	attach   chan *consumer
	done     chan struct{} // closed when dispatch returns
	want     chan struct{} // dispatch asks fetch for an event
	fetched  chan sion.Delivery
	fetchErr chan error // fetch's last error, then fetch returns

	waiting     atomic.Int64
	redelivered atomic.Uint64
}

// fetch takes the subscription's events with Next, one each time
// dispatch asks, and hands them to it, until the subscription ends or
// stop closes.
func (q *topicQueue) fetch(stop <-chan struct{}) {
	for {
		select {
		case <-q.want:
		case <-stop:
			return
		}
		d, err := q.sub.Next(context.Background()) // Cancel (Close) ends it
		if err != nil {
			q.fetchErr <- err
			return
		}
		select {
		case q.fetched <- d:
		case <-stop:
			return
		}
	}
}

// consumer is one Subscribe call: its channel, its context's Done, and
// how to derive a message's Context from that context (held as a
// function for the consumer's life, which that context bounds).
type consumer struct {
	out        chan *wmessage.Message
	gone       <-chan struct{}
	msgContext func() (context.Context, context.CancelFunc)
}

// entry is a message waiting to be offered: a template without a
// context, copied for each offer.
type entry struct {
	tmpl      *wmessage.Message
	notBefore time.Time
}

// offer is a copy of an entry made for one consumer, with its context.
type offer struct {
	e      *entry
	msg    *wmessage.Message
	cancel context.CancelFunc
}

func (c *consumer) offer(e *entry) *offer {
	ctx, cancel := c.msgContext()
	msg := wmessage.NewMessage(e.tmpl.UUID, slices.Clone(e.tmpl.Payload))
	msg.Metadata = maps.Clone(e.tmpl.Metadata)
	if msg.Metadata == nil {
		msg.Metadata = wmessage.Metadata{}
	}
	msg.SetContext(ctx)
	return &offer{e: e, msg: msg, cancel: cancel}
}

// dispatch hands the topic's messages to its consumers until the
// Subscriber closes or the subscription ends; see dispatcher.
func (s *Subscriber) dispatch(q *topicQueue) {
	d := &dispatcher{q: q, delay: s.cfg.RedeliveryDelay, toMessage: s.c.toMessage}
	defer close(q.done)
	if err := d.run(s.stop); err != nil {
		s.c.log.Warn("watermill: a topic's sion subscription ended", "topic", q.name, "err", err)
	}
	d.closeAll()
}

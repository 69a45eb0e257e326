package watermill

import (
	"fmt"
	"sync/atomic"

	wmessage "github.com/ThreeDotsLabs/watermill/message"

	"github.com/sion-go/sion"
)

// Publisher is a watermill message.Publisher that publishes each message
// as one sion event on a session (S1 sessions: Session.Publish), converted
// as Config says (see the package documentation, "Mapping"). It does not
// own the session: Close does not close it.
//
// A Publisher is safe for concurrent use: messages published from one
// goroutine reach each subscription in the order they were published.
type Publisher struct {
	s      *sion.Session
	c      *codec
	closed atomic.Bool
}

var _ wmessage.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher on s. It returns an error wrapping
// sion.ErrInvalidConfig for a nil session, or a remote one (sion.Dial)
// without Config.Ontology.
func NewPublisher(s *sion.Session, cfg Config) (*Publisher, error) {
	c, err := newCodec(s, cfg)
	if err != nil {
		return nil, err
	}
	return &Publisher{s: s, c: c}, nil
}

// Publish publishes messages on topic, one event each, in order, with
// Session.Publish under each message's Context (which bounds waits: a
// remote session's round trip, a full sion.Block subscription). It
// returns once each event has been handed to the switch's subscriptions
// and links (see Session.Publish); it stops at the first message that
// fails and returns its error, naming the topic and the message's UUID:
// the messages before it are published, those after it are not.
//
// Errors wrap sion.ErrUnknownEventType (the topic names no event type of
// the ontology), sion.ErrInvalidEvent (a metadata value that does not
// parse as its attribute's kind, naming key and value; a metadata key
// that is no attribute of the type when no Config.MetadataAttribute
// carries it; a payload the place refuses; a nil message), the Topics'
// error, sion.ErrClosed (after Close, or on a closed session), or the
// message context's error; test them with errors.Is.
//
// A message published again with the same UUID on the same topic is the
// same event: the switch drops the copy (a publisher's retry is delivered
// once) and Publish returns nil, as for the first.
func (p *Publisher) Publish(topic string, messages ...*wmessage.Message) error {
	for _, msg := range messages {
		if p.closed.Load() {
			return fmt.Errorf("watermill: publisher: %w", sion.ErrClosed)
		}
		if msg == nil {
			return fmt.Errorf("watermill: topic %q: %w: nil message", topic, sion.ErrInvalidEvent)
		}
		ev, err := p.c.toEvent(topic, msg)
		if err != nil {
			return fmt.Errorf("%w (message %q)", err, msg.UUID)
		}
		if err := p.s.Publish(msg.Context(), ev); err != nil {
			return fmt.Errorf("watermill: topic %q, message %q: %w", topic, msg.UUID, err)
		}
	}
	return nil
}

// Close makes later Publish calls fail with an error wrapping
// sion.ErrClosed. Publish is synchronous, so there is nothing to flush;
// the session stays open (its owner closes it). Close is idempotent and
// returns nil.
func (p *Publisher) Close() error {
	p.closed.Store(true)
	return nil
}

// Package watermill connects sion to ThreeDotsLabs' watermill: Publisher
// is a watermill message.Publisher and Subscriber a message.Subscriber
// (and message.SubscribeInitializer) over a sion session (S1 sessions and
// subscriptions), so that watermill's Router, middleware and handlers run
// on a sion place. It is a nested module: its dependency on watermill
// stays out of sion's core go.mod. It imports the root package and
// ontology; nothing of sion imports it.
//
// It is built and tested against watermill v1.4.7, the newest approved
// release served to this project (v1.5.1 is served only from an earlier,
// unapproved copy); it uses only message.Message, Publisher, Subscriber
// and SubscribeInitializer, which v1.5 keeps.
//
// # Mapping
//
//   - topic: Config.Topics decides. By default (TypeTopics) a topic is the
//     name or a synonym of an event type: a message published on topic T
//     is an event of type T — a topic the ontology does not know is refused
//     with an error wrapping sion.ErrUnknownEventType that names it — and
//     Subscribe(T) subscribes {type ⊑ T}, so it also receives T's
//     subtypes, published on their own topics. AttributeTopics maps every
//     topic to one event type with the topic in a string attribute, for
//     topic names that are not types; other mappings implement Topics.
//   - metadata and attributes: a metadata key that is an attribute of the
//     event type's vocabulary (by name or synonym) becomes that attribute,
//     its text parsed by the attribute's kind: int in decimal, float as
//     strconv.ParseFloat reads it (finite, in decimal), bool as strconv.ParseBool, time
//     in RFC 3339 (1677-09-21 to 2262-04-11, ontology.MinTime to MaxTime), string as is. Text that does not
//     parse is an error naming the key and the value (wrapping
//     sion.ErrInvalidEvent). On the way back each attribute is a metadata
//     key under its canonical name, written so that it parses back to the
//     same value (int and float shortest, time RFC 3339 with nanoseconds
//     in UTC, bool "true" or "false"), except the attributes the topic
//     itself sets (AttributeTopics' attribute), which are left out so a
//     handler can forward the message to another topic.
//   - other metadata keys are not dropped silently: when
//     Config.MetadataAttribute names a string attribute of the event
//     type, they travel in it as a JSON object and come back as metadata;
//     otherwise Publish refuses the message with an error naming the key
//     (wrapping sion.ErrInvalidEvent). Watermill's middleware adds keys
//     (correlation_id, retry counts…): give their types such an attribute,
//     or declare the keys as attributes.
//   - UUID and event ID: a message UUID in canonical form (36 characters,
//     lower-case hex, 8-4-4-4-12, as watermill.NewUUID writes it) is the
//     event ID XOR the first 16 bytes of SHA-256 over the topic (its
//     canonical spelling, Topics.Topic), so it comes back exactly and the
//     ID is as random as the UUID. A message published again with the same
//     UUID on the same topic is the same event: the switch drops the copy
//     (sion.Event.ID; counted in Stats.Duplicates) and it is delivered
//     once. The topic is the event's own (Topics.Topic: with TypeTopics
//     its type), not the one it was received on: the same UUID on another
//     topic is another event, so a handler that forwards a message keeps
//     it; but a handler that receives an earthquake on topic "seismic"
//     (a supertype) and forwards it to "earthquake" publishes it again
//     on its own topic, and the copy is dropped — the earthquake's
//     subscribers had it. Any other non-empty UUID (a ULID,
//     an upper-case UUID) gives the ID SHA-256(topic, UUID) cut to 16
//     bytes, as deterministic; it comes back only through
//     Config.MetadataAttribute, else as the canonical UUID of the ID XOR
//     the topic's key. An empty UUID gets a fresh ID (no deduplication).
//     Events published in sion without this package come out with the
//     UUID of their ID in the same way, and deduplicate if republished.
//   - payload: Message.Payload is Event.Data (copied both ways). Its media
//     type is the metadata key Config.ContentTypeKey ("content_type"),
//     else Config.ContentType, else "" (sion sniffs: a payload beginning
//     with '{', '[' or '<' must parse as JSON or XML, which Publish
//     checks); on the way back the key is set when the event's content type
//     is neither "" nor Config.ContentType.
//   - trace context: the metadata keys traceparent and tracestate
//     (TraceParentKey, TraceStateKey) are the event's W3C Trace Context,
//     sion.Event.TraceParent and TraceState, both ways and as they are;
//     never attributes. Publish refuses a bad one (wrapping
//     sion.ErrInvalidEvent and naming it).
//
// # What degrades
//
//   - Delivery and acknowledgement: each topic a Subscriber is asked for
//     is one sion subscription, with a bounded queue
//     (SubscriberConfig.Queue, default sion.DefaultQueue events), made by
//     the first SubscribeInitialize or Subscribe of the topic and kept
//     until Close. The channel of Subscribe carries one message at a time:
//     the next is sent only after Ack. Nack offers the same message again
//     (a fresh copy with the same UUID, payload and metadata) after
//     SubscriberConfig.RedeliveryDelay, ahead of everything behind it; a
//     message not acknowledged when its consumer ends goes back to the
//     head likewise. Several Subscribe calls of one topic on one
//     Subscriber compete: each message goes to one of them.
//   - Slow consumers: while a topic's consumers are slower than its
//     publishers, events wait in the sion queue; when it is full, sion's
//     overflow policy applies (SubscriberConfig.Overflow): by default new
//     events are dropped for this Subscriber only, never delaying the
//     publisher or other subscribers, counted (TopicStats.Dropped, from
//     sion's SubscriptionStats) and reported (SubscriberConfig.SlowConsumer,
//     a Warn log of the switch). sion.Block makes publishers wait instead,
//     on a local session only (a remote session refuses it).
//   - No persistence: sion keeps no log. A topic receives what is
//     published after its sion subscription is made (Subscribe or
//     SubscribeInitialize return once it is active on every switch within
//     its TTL, S2); a new Subscriber does not see older messages, and
//     what waits in a Subscriber's queues is lost when it closes. A remote
//     session's reconnection keeps its events for its retention
//     (sion.ReconnectPolicy), with nothing lost or doubled.
//   - No consumer groups: two Subscribers each receive every message; to
//     share the work, share one Subscriber.
//   - Order: messages published from one goroutine reach a topic's queue
//     in order (per publisher, along a path); a single consumer receives
//     them in that order, redeliveries included. Messages of different
//     publishers interleave, and competing consumers see them in no
//     defined order.
//   - Exactly once: a subscription receives each event once, and a
//     republished message is dropped by ID (within the last 65,536–131,072
//     IDs a switch has seen), so nothing arrives twice unless it was
//     nacked or its consumer ended before Ack. Within those bounds and
//     while no queue overflows, watermill's universal suite passes with
//     ExactlyOnceDelivery, GuaranteedOrder and RequireSingleInstance.
//
// # Errors
//
// Errors wrap sion's sentinels (sion.ErrUnknownEventType,
// sion.ErrInvalidEvent, sion.ErrInvalidConfig, sion.ErrClosed, …) with
// the topic, the message's UUID and the metadata key in the message; test
// them with errors.Is. Messages start with "watermill:".
//
// # Concurrency
//
// Publisher and Subscriber are safe for concurrent use. Close of each is
// idempotent; the Subscriber's waits for its goroutines. Neither owns its
// session: close it after them.
package watermill

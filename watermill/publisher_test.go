package watermill_test

import (
	"context"
	"testing"
	"time"

	wmessage "github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/watermill"
)

// readings is a real ontology for the default mapping, topic = event
// type: a synonym, a subtype, a vocabulary of every kind, a carrier
// attribute ("extra") on Reading and none on Alarm.
const readings = `{"types": [
  {"name": "Reading", "synonyms": ["Measurement"], "attributes": [
    {"name": "celsius", "kind": "float", "unit": "degC", "synonyms": ["temp"]},
    {"name": "station", "kind": "string"},
    {"name": "seq", "kind": "int"},
    {"name": "ok", "kind": "bool"},
    {"name": "at", "kind": "time"},
    {"name": "extra", "kind": "string"}]},
  {"name": "Outdoor", "parents": ["Reading"]},
  {"name": "Alarm", "attributes": [{"name": "level", "kind": "int"}]}]}`

// pair is a Publisher and a Subscriber of one network, sharing cfg.
type pair struct {
	n   *network
	pub *watermill.Publisher
	sub *watermill.Subscriber
}

func newPair(t *testing.T, n *network, cfg watermill.SubscriberConfig) *pair {
	t.Helper()
	cfg.Ontology = n.o
	pub, err := watermill.NewPublisher(n.publisherSession(t, "pub"), cfg.Config)
	require.NoError(t, err)
	sub, err := watermill.NewSubscriber(n.subscriberSession(t, "sub"), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, pub.Close())
		require.NoError(t, sub.Close())
	})
	return &pair{n: n, pub: pub, sub: sub}
}

func subscribeTo(t *testing.T, sub *watermill.Subscriber, topic string) <-chan *wmessage.Message {
	t.Helper()
	ch, err := sub.Subscribe(context.Background(), topic)
	require.NoError(t, err)
	return ch
}

// receive returns the next message of ch, failing after a generous bound
// (a hang, not a timing assertion).
func receive(t *testing.T, ch <-chan *wmessage.Message) *wmessage.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		require.True(t, ok, "channel closed")
		return m
	case <-time.After(20 * time.Second):
		require.FailNow(t, "no message")
		return nil
	}
}

func newMessage(uuid, payload string, md map[string]string) *wmessage.Message {
	m := wmessage.NewMessage(uuid, []byte(payload))
	for k, v := range md {
		m.Metadata.Set(k, v)
	}
	return m
}

const (
	uuid1 = "0f8fad5b-d9cb-469f-a165-70867728950e"
	uuid2 = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	uuid3 = "1b4e28ba-2fa1-41d2-883f-0016d3cca427"
)

// TestTypeTopics checks the default mapping on a real ontology: a topic is
// an event type (a synonym resolves), Subscribe(T) receives T's subtypes,
// metadata becomes typed attributes and comes back under canonical names.
func TestTypeTopics(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := newPair(t, v.make(t, loadOntology(t, readings)), watermill.SubscriberConfig{})
			all := subscribeTo(t, p.sub, "Reading")
			outdoor := subscribeTo(t, p.sub, "Outdoor")

			require.NoError(t, p.pub.Publish("Reading", newMessage(uuid1, "a", map[string]string{"temp": "21.50", "station": "n"})))
			require.NoError(t, p.pub.Publish("Measurement", newMessage(uuid2, "b", map[string]string{"seq": "7"})))
			require.NoError(t, p.pub.Publish("Outdoor", newMessage(uuid3, "c", map[string]string{"ok": "1"})))

			for _, want := range []struct {
				uuid, payload string
				md            wmessage.Metadata
			}{
				{uuid1, "a", wmessage.Metadata{"celsius": "21.5", "station": "n"}},
				{uuid2, "b", wmessage.Metadata{"seq": "7"}},
				{uuid3, "c", wmessage.Metadata{"ok": "true"}},
			} {
				m := receive(t, all)
				assert.Equal(t, want.uuid, m.UUID)
				assert.Equal(t, want.payload, string(m.Payload))
				assert.Equal(t, want.md, m.Metadata)
				require.True(t, m.Ack())
			}
			m := receive(t, outdoor)
			assert.Equal(t, uuid3, m.UUID)
			m.Ack()
		})
	}
}

// TestPublishErrors checks what Publish refuses, the sentinel it wraps
// and what its message names.
func TestPublishErrors(t *testing.T) {
	n := variants[0].make(t, loadOntology(t, readings))
	p := newPair(t, n, watermill.SubscriberConfig{})
	carrying := newPair(t, n, watermill.SubscriberConfig{Config: watermill.Config{MetadataAttribute: "extra"}})
	for _, tc := range []struct {
		name  string
		p     *pair
		topic string
		md    map[string]string
		data  string
		want  error
		names []string
	}{
		{"unknown topic", p, "Gossip", nil, "", sion.ErrUnknownEventType, []string{`"Gossip"`}},
		{"int that does not parse", p, "Reading", map[string]string{"seq": "7.5"}, "", sion.ErrInvalidEvent, []string{`"seq"`, `"7.5"`}},
		{"float that is not finite", p, "Reading", map[string]string{"celsius": "NaN"}, "", sion.ErrInvalidEvent, []string{`"celsius"`, `"NaN"`}},
		{"float in hexadecimal", p, "Reading", map[string]string{"celsius": "0x1p-2"}, "", sion.ErrInvalidEvent, []string{`"celsius"`, `"0x1p-2"`}},
		{"bool that does not parse", p, "Reading", map[string]string{"ok": "yes"}, "", sion.ErrInvalidEvent, []string{`"ok"`, `"yes"`}},
		{"time that is not RFC 3339", p, "Reading", map[string]string{"at": "yesterday"}, "", sion.ErrInvalidEvent, []string{`"at"`, `"yesterday"`}},
		{"time out of range", p, "Reading", map[string]string{"at": "3000-01-01T00:00:00Z"}, "", sion.ErrInvalidEvent, []string{`"at"`}},
		{"key outside the vocabulary, no carrier", p, "Reading", map[string]string{"correlation_id": "x"}, "", sion.ErrInvalidEvent, []string{`"correlation_id"`, "MetadataAttribute"}},
		{"key outside a vocabulary without the carrier", carrying, "Alarm", map[string]string{"correlation_id": "x"}, "", sion.ErrInvalidEvent, []string{`"correlation_id"`, `"Alarm"`}},
		{"the carrier as a key", carrying, "Reading", map[string]string{"extra": "x"}, "", sion.ErrInvalidEvent, []string{`"extra"`}},
		{"two keys for one attribute", p, "Reading", map[string]string{"temp": "1", "celsius": "2"}, "", sion.ErrInvalidEvent, []string{`"celsius"`, `"temp"`}},
		{"payload that is not JSON", p, "Reading", nil, "{oops", sion.ErrInvalidEvent, []string{uuid1}},
		{"nil message", p, "Reading", nil, "", sion.ErrInvalidEvent, []string{"nil message"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.pub.Publish(tc.topic, newMessage(uuid1, tc.data, tc.md))
			if tc.name == "nil message" {
				err = tc.p.pub.Publish(tc.topic, nil)
			}
			require.ErrorIs(t, err, tc.want)
			for _, s := range append(tc.names, `"`+tc.topic+`"`) {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

// TestMetadataKinds checks that each kind's text parses and comes back in
// the form that parses to the same value.
func TestMetadataKinds(t *testing.T) {
	p := newPair(t, variants[0].make(t, loadOntology(t, readings)), watermill.SubscriberConfig{})
	ch := subscribeTo(t, p.sub, "Reading")
	for _, tc := range []struct{ name, key, in, out string }{
		{"string kept byte for byte", "station", " North \t", " North \t"},
		{"int", "seq", "-9223372036854775808", "-9223372036854775808"},
		{"float shortest", "celsius", "21.50", "21.5"},
		{"float exponent", "celsius", "1e21", "1e+21"},
		{"negative zero", "celsius", "-0", "-0"},
		{"bool", "ok", "TRUE", "true"},
		{"time to UTC", "at", "2024-05-01T12:00:00.5+02:00", "2024-05-01T10:00:00.5Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, p.pub.Publish("Reading", newMessage("", "", map[string]string{tc.key: tc.in})))
			m := receive(t, ch)
			assert.Equal(t, tc.out, m.Metadata.Get(tc.key))
			m.Ack()
		})
	}
}

// TestMetadataAttribute checks that keys outside the vocabulary and a
// UUID that is not canonical travel in Config.MetadataAttribute.
func TestMetadataAttribute(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := newPair(t, v.make(t, loadOntology(t, readings)),
				watermill.SubscriberConfig{Config: watermill.Config{MetadataAttribute: "extra"}})
			ch := subscribeTo(t, p.sub, "Reading")
			md := map[string]string{"correlation_id": "c-1", "station": "s", "{odd}": `"quoted"`}
			require.NoError(t, p.pub.Publish("Outdoor", newMessage("01HZX3M7Q4W8E2R5T9Y1U6I0OP", "x", md)))
			m := receive(t, ch)
			assert.Equal(t, "01HZX3M7Q4W8E2R5T9Y1U6I0OP", m.UUID)
			assert.Equal(t, wmessage.Metadata(md), m.Metadata)
			m.Ack()
		})
	}
}

// TestUUIDs checks the UUID ↔ event ID mapping: a message published again
// on its topic is dropped by the switch, the same UUID on another topic is
// another event, an empty UUID is never deduplicated, and a UUID that is
// not canonical gets a deterministic ID.
func TestUUIDs(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := newPair(t, v.make(t, loadOntology(t, readings)), watermill.SubscriberConfig{})
			readingsCh := subscribeTo(t, p.sub, "Reading")
			alarms := subscribeTo(t, p.sub, "Alarm")
			ulid := "01HZX3M7Q4W8E2R5T9Y1U6I0OP"
			for _, tc := range []struct {
				topic, uuid string
			}{
				{"Reading", uuid1}, {"Reading", uuid1}, // a retry: one event
				{"Measurement", uuid1},           // a synonym is the same topic
				{"Alarm", uuid1},                 // another topic: another event
				{"Reading", ""}, {"Reading", ""}, // no UUID: two events
				{"Reading", ulid}, {"Reading", ulid}, // derived ID: one event
				{"Reading", "0F8FAD5B-D9CB-469F-A165-70867728950E"}, // upper case: derived
				{"Reading", uuid2},
			} {
				require.NoError(t, p.pub.Publish(tc.topic, newMessage(tc.uuid, "", nil)))
			}
			var got []string
			for range 6 {
				m := receive(t, readingsCh)
				got = append(got, m.UUID)
				m.Ack()
			}
			assert.Equal(t, uuid1, got[0])
			assert.NotEqual(t, got[1], got[2], "empty UUIDs are two events")
			assert.NotEqual(t, ulid, got[3], "a UUID that is not canonical comes back only through a carrier")
			assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, got[3])
			assert.NotEqual(t, got[3], got[4])
			assert.Equal(t, uuid2, got[5], "the retries and the synonym's copy were dropped")
			m := receive(t, alarms)
			assert.Equal(t, uuid1, m.UUID)
			m.Ack()

			// What came back republishes as the same event: got[3], the
			// canonical UUID of a derived ID, maps to that ID again.
			require.NoError(t, p.pub.Publish("Reading", newMessage(got[3], "", nil)))
			require.NoError(t, p.pub.Publish("Reading", newMessage(uuid3, "", nil)))
			m = receive(t, readingsCh)
			assert.Equal(t, uuid3, m.UUID)
			m.Ack()
		})
	}
}

// TestNativeEvents checks that an event published in sion without this
// package comes out with the UUID of its ID, which republishes as that
// event.
func TestNativeEvents(t *testing.T) {
	n := variants[0].make(t, loadOntology(t, readings))
	p := newPair(t, n, watermill.SubscriberConfig{})
	ch := subscribeTo(t, p.sub, "Reading")
	native := n.publisherSession(t, "native")
	ctx := context.Background()
	require.NoError(t, native.Publish(ctx, &sion.Event{Type: "Reading", Attrs: []ontology.Attr{{Name: "seq", Value: ontology.Int(1)}}}))
	m := receive(t, ch)
	m.Ack()
	require.NoError(t, p.pub.Publish("Reading", newMessage(m.UUID, "", nil)))
	require.NoError(t, p.pub.Publish("Reading", newMessage(uuid2, "", nil)))
	m = receive(t, ch)
	assert.Equal(t, uuid2, m.UUID, "the republished copy was dropped")
	m.Ack()
	assert.Equal(t, uint64(1), n.pubSw.Stats().Duplicates)
}

// TestContentType checks the content type's metadata key and default.
func TestContentType(t *testing.T) {
	n := variants[0].make(t, loadOntology(t, readings))
	for _, tc := range []struct {
		name        string
		cfg         watermill.Config
		md          map[string]string
		payload     string
		wantEvent   string
		wantMessage map[string]string
	}{
		{"from metadata", watermill.Config{}, map[string]string{"content_type": "application/json"}, `{"a":1}`, "application/json", map[string]string{"content_type": "application/json"}},
		{"none: sniffed", watermill.Config{}, nil, "plain", "", map[string]string{}},
		{"default not echoed", watermill.Config{ContentType: "text/plain"}, nil, "{not json", "text/plain", map[string]string{}},
		{"another key", watermill.Config{ContentTypeKey: "ct"}, map[string]string{"ct": "application/xml"}, "<a/>", "application/xml", map[string]string{"ct": "application/xml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, n, watermill.SubscriberConfig{Config: tc.cfg})
			ch := subscribeTo(t, p.sub, "Alarm")
			raw := n.subscriberSession(t, "raw")
			rawSub, err := raw.Subscribe(context.Background(), "{type ⊑ Alarm}")
			require.NoError(t, err)
			require.NoError(t, p.pub.Publish("Alarm", newMessage("", tc.payload, tc.md)))
			d, err := rawSub.Next(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.wantEvent, d.Event.ContentType)
			m := receive(t, ch)
			assert.Equal(t, wmessage.Metadata(tc.wantMessage), m.Metadata)
			assert.Equal(t, tc.payload, string(m.Payload))
			m.Ack()
		})
	}
}

// TestConfigErrors checks the constructors' refusals.
func TestConfigErrors(t *testing.T) {
	n := variants[2].make(t, loadOntology(t, readings))
	remote := n.subscriberSession(t, "remote")
	_, err := watermill.NewPublisher(remote, watermill.Config{})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "Ontology")
	_, err = watermill.NewSubscriber(nil, watermill.SubscriberConfig{})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	_, err = watermill.NewSubscriber(remote, watermill.SubscriberConfig{Config: watermill.Config{Ontology: n.o}, Queue: -1})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)

	// A remote session refuses sion.Block: one subscription would hold up
	// the session's others.
	sub, err := watermill.NewSubscriber(remote, watermill.SubscriberConfig{Config: watermill.Config{Ontology: n.o}, Overflow: sion.Block})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sub.Close()) })
	_, err = sub.Subscribe(context.Background(), "Reading")
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	plain, err := watermill.NewSubscriber(remote, watermill.SubscriberConfig{Config: watermill.Config{Ontology: n.o}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, plain.Close()) })
	_, err = plain.Subscribe(context.Background(), "Gossip")
	require.ErrorIs(t, err, sion.ErrUnknownEventType)
	assert.Contains(t, err.Error(), `"Gossip"`)
	_, err = watermill.AttributeTopics{Type: "Reading"}.Filter("x")
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
}

// TestAttributeTopics checks the mapping of any topic to one event type:
// the topic's attribute stays out of the metadata, so a received message
// can be published on another topic as it is.
func TestAttributeTopics(t *testing.T) {
	o := loadOntology(t, suiteOntology)
	n := variants[0].make(t, o)
	p := newPair(t, n, watermill.SubscriberConfig{Config: watermill.Config{
		Topics: watermill.AttributeTopics{Type: "Message", Attribute: "topic"}, MetadataAttribute: "metadata"}})
	in, out := subscribeTo(t, p.sub, "orders.in"), subscribeTo(t, p.sub, "orders/out ✓")
	require.NoError(t, p.pub.Publish("orders.in", newMessage(uuid1, "x", map[string]string{"k": "v"})))
	m := receive(t, in)
	assert.Equal(t, wmessage.Metadata{"k": "v"}, m.Metadata)
	require.NoError(t, p.pub.Publish("orders/out ✓", m))
	m.Ack()
	fwd := receive(t, out)
	assert.Equal(t, uuid1, fwd.UUID)
	assert.Equal(t, wmessage.Metadata{"k": "v"}, fwd.Metadata)
	fwd.Ack()

	// A topic's attribute given again as metadata must agree.
	err := p.pub.Publish("orders.in", newMessage(uuid2, "", map[string]string{"topic": "elsewhere"}))
	require.ErrorIs(t, err, sion.ErrInvalidEvent)
	assert.Contains(t, err.Error(), `"elsewhere"`)
	require.NoError(t, p.pub.Publish("orders.in", newMessage(uuid2, "", map[string]string{"topic": "orders.in"})))
	assert.Equal(t, uuid2, receive(t, in).UUID)
}

// TestRepublishElsewhere checks that a message published again with its
// UUID on another switch of the place is dropped there too: the switch
// has seen its event ID arrive over the shared link.
func TestRepublishElsewhere(t *testing.T) {
	n := variants[1].make(t, loadOntology(t, readings)) // tcp-link
	p := newPair(t, n, watermill.SubscriberConfig{})
	other, err := watermill.NewPublisher(n.subscriberSession(t, "pub-b"), watermill.Config{})
	require.NoError(t, err)
	ch := subscribeTo(t, p.sub, "Reading")
	require.NoError(t, p.pub.Publish("Reading", newMessage(uuid1, "a", nil)))
	m := receive(t, ch)
	assert.Equal(t, uuid1, m.UUID)
	m.Ack()
	require.NoError(t, other.Publish("Reading", newMessage(uuid1, "a", nil)))
	require.NoError(t, other.Publish("Reading", newMessage(uuid2, "b", nil)))
	assert.Equal(t, uuid2, receive(t, ch).UUID, "the copy published on the subscriber's switch was dropped")
	assert.Equal(t, uint64(1), n.subSw.Stats().Duplicates)
}

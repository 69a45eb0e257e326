package watermill

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	wmessage "github.com/ThreeDotsLabs/watermill/message"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
)

// DefaultContentTypeKey is the metadata key that carries a message's
// content type when Config.ContentTypeKey is "".
const DefaultContentTypeKey = "content_type"

// TraceParentKey and TraceStateKey are the metadata keys that carry an
// event's W3C Trace Context (sion.Event.TraceParent and TraceState) both
// ways, as they are; an empty field has no key. They are never
// attributes: an attribute of either name does not travel as metadata.
// The switch checks them at Publish (see sion.Event.TraceParent).
const (
	TraceParentKey = "traceparent"
	TraceStateKey  = "tracestate"
)

// Config says how messages and events convert, for a Publisher and a
// Subscriber alike. The zero value means the defaults (on a local
// session); both sides of a topic should use the same Topics,
// MetadataAttribute and ContentTypeKey.
type Config struct {
	// Ontology is the place's ontology, which decides each attribute's
	// kind. nil means the ontology of the session's place; a remote
	// session (sion.Dial) does not know it, so there it is required.
	Ontology *ontology.Ontology
	// Topics maps topics to events and filters; nil means TypeTopics.
	Topics Topics
	// MetadataAttribute names a string attribute (canonical or synonym)
	// that carries what the event type's vocabulary cannot: the metadata
	// keys that are not attributes of the type, and a message UUID that is
	// not a canonical UUID, as one JSON object {"uuid": …, "metadata":
	// {…}}. It applies to the types whose vocabulary has it. "" (the
	// default), or a type without it: such metadata is refused (see
	// Publisher.Publish) and such a UUID does not come back.
	MetadataAttribute string
	// ContentTypeKey is the metadata key whose value is the payload's
	// media type (sion.Event.ContentType), both ways; "" means
	// DefaultContentTypeKey. It is never an attribute.
	ContentTypeKey string
	// ContentType is the media type of payloads whose message has no
	// ContentTypeKey; "" lets sion sniff the first byte (a payload that
	// starts with '{', '[' or '<' must then parse as JSON or XML).
	ContentType string
	// Logger receives the Subscriber's log records (a topic's sion
	// subscription that ended other than by Close); nil discards them.
	Logger *slog.Logger
}

// codec converts between messages and events; immutable after newCodec.
type codec struct {
	o       *ontology.Ontology
	topics  Topics
	carrier string // canonical attribute name, or ""
	ctKey   string
	ct      string
	log     *slog.Logger
}

func newCodec(s *sion.Session, cfg Config) (*codec, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: watermill: nil session", sion.ErrInvalidConfig)
	}
	c := &codec{o: cfg.Ontology, topics: cfg.Topics, ctKey: cfg.ContentTypeKey, ct: cfg.ContentType, log: cfg.Logger}
	if c.o == nil {
		sw := s.Switch()
		if sw == nil {
			return nil, fmt.Errorf("%w: watermill: Config.Ontology is required for a remote session", sion.ErrInvalidConfig)
		}
		c.o = sw.Place().Ontology()
	}
	if c.topics == nil {
		c.topics = TypeTopics{}
	}
	if c.ctKey == "" {
		c.ctKey = DefaultContentTypeKey
	}
	if c.ctKey == TraceParentKey || c.ctKey == TraceStateKey {
		return nil, fmt.Errorf("%w: watermill: Config.ContentTypeKey %q carries the trace context", sion.ErrInvalidConfig, c.ctKey)
	}
	if cfg.MetadataAttribute != "" {
		c.carrier = c.o.CanonicalAttribute(cfg.MetadataAttribute)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// carried is the JSON object in Config.MetadataAttribute.
type carried struct {
	UUID     string            `json:"uuid,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// toEvent converts msg, published on topic, into the event to publish.
// Errors wrap sion.ErrUnknownEventType or sion.ErrInvalidEvent, or the
// Topics' error, and name the topic and the metadata key.
func (c *codec) toEvent(topic string, msg *wmessage.Message) (*sion.Event, error) {
	typ, tattrs, err := c.topics.Event(topic)
	if err != nil {
		return nil, fmt.Errorf("watermill: topic %q: %w", topic, err)
	}
	t, ok := c.o.Lookup(typ)
	if !ok {
		return nil, fmt.Errorf("watermill: topic %q: %w %q", topic, sion.ErrUnknownEventType, typ)
	}
	ev := &sion.Event{Type: t.Name, ContentType: c.ct, Data: msg.Payload}
	fromTopic := map[string]ontology.Value{}
	for _, a := range tattrs {
		name := c.o.CanonicalAttribute(a.Name)
		fromTopic[name] = a.Value
		ev.Attrs = append(ev.Attrs, ontology.Attr{Name: name, Value: a.Value})
	}
	var extra map[string]string
	byAttr := map[string]string{} // canonical attribute → metadata key
	keys := make([]string, 0, len(msg.Metadata))
	for k := range msg.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := msg.Metadata[k]
		switch k {
		case c.ctKey:
			ev.ContentType = v
			continue
		case TraceParentKey:
			ev.TraceParent = v
			continue
		case TraceStateKey:
			ev.TraceState = v
			continue
		}
		a, ok := c.o.Attribute(t.ID, k)
		if !ok {
			if extra == nil {
				extra = map[string]string{}
			}
			extra[k] = v
			continue
		}
		if c.carrier != "" && a.Name == c.carrier {
			return nil, fmt.Errorf("watermill: topic %q: %w: metadata key %q is Config.MetadataAttribute, which carries other keys", topic, sion.ErrInvalidEvent, k)
		}
		if other, dup := byAttr[a.Name]; dup {
			return nil, fmt.Errorf("watermill: topic %q: %w: metadata keys %q and %q name one attribute %q", topic, sion.ErrInvalidEvent, other, k, a.Name)
		}
		byAttr[a.Name] = k
		val, err := parseValue(v, a.Kind)
		if err != nil {
			return nil, fmt.Errorf("watermill: topic %q: %w: metadata %q = %q: %w", topic, sion.ErrInvalidEvent, k, v, err)
		}
		if tv, set := fromTopic[a.Name]; set {
			if !ontology.Equal(tv, val) {
				return nil, fmt.Errorf("watermill: topic %q: %w: metadata %q = %q contradicts the topic's attribute %s = %s", topic, sion.ErrInvalidEvent, k, v, a.Name, tv)
			}
			continue
		}
		ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a.Name, Value: val})
	}
	scope := c.scope(ev, topic)
	var keep carried
	switch id, ok := parseUUID(msg.UUID); {
	case ok:
		ev.ID = xorID(id, scope)
	case msg.UUID != "":
		ev.ID = derivedID(scope, msg.UUID)
		keep.UUID = msg.UUID
	}
	if len(extra) > 0 || keep.UUID != "" {
		a, ok := c.carrierOf(t.ID)
		switch {
		case ok:
			keep.Metadata = extra
			b, err := json.Marshal(keep)
			if err != nil {
				return nil, fmt.Errorf("watermill: topic %q: %w: %w", topic, sion.ErrInvalidEvent, err)
			}
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a, Value: ontology.String(string(b))})
		case len(extra) > 0:
			k := slices.Sorted(maps.Keys(extra))[0]
			return nil, fmt.Errorf("watermill: topic %q: %w: metadata key %q is not an attribute of event type %q, and no Config.MetadataAttribute of that type carries it", topic, sion.ErrInvalidEvent, k, t.Name)
		}
	}
	return ev, nil
}

// carrierOf returns the carrier attribute when type typeID has it as a
// string attribute.
func (c *codec) carrierOf(typeID int) (string, bool) {
	if c.carrier == "" {
		return "", false
	}
	a, ok := c.o.Attribute(typeID, c.carrier)
	return a.Name, ok && a.Kind == ontology.KindString
}

// scope returns the canonical topic of ev (see Topics.Topic), or topic
// when ev carries none: the scope of its message UUID.
func (c *codec) scope(ev *sion.Event, topic string) string {
	if s, ok := c.topics.Topic(ev); ok {
		return s
	}
	return topic
}

// toMessage converts a delivered event into a template message, without
// a context, whose Payload is ev.Data itself (never modified: each offer
// copies it); subscribed is the topic of the Subscribe call, the scope of
// its UUID when the event carries no topic.
func (c *codec) toMessage(ev *sion.Event, subscribed string) *wmessage.Message {
	scope := c.scope(ev, subscribed)
	skip := map[string]bool{}
	if _, tattrs, err := c.topics.Event(scope); err == nil {
		for _, a := range tattrs {
			name := c.o.CanonicalAttribute(a.Name)
			if v, ok := ev.Value(name); ok && ontology.Equal(v, a.Value) {
				skip[name] = true
			}
		}
	}
	md := wmessage.Metadata{}
	var keep carried
	for i := range ev.NumAttrs() {
		name, v := ev.Attr(i)
		if skip[name] || name == TraceParentKey || name == TraceStateKey {
			continue
		}
		if c.carrier != "" && name == c.carrier && v.Kind() == ontology.KindString {
			if err := json.Unmarshal([]byte(v.Str()), &keep); err == nil {
				continue
			}
			keep = carried{}
		}
		md[name] = formatValue(v)
	}
	for k, v := range keep.Metadata {
		if _, taken := md[k]; !taken && k != TraceParentKey && k != TraceStateKey {
			md[k] = v
		}
	}
	if ev.ContentType != "" && ev.ContentType != c.ct {
		md[c.ctKey] = ev.ContentType
	}
	if ev.TraceParent != "" {
		md[TraceParentKey] = ev.TraceParent
	}
	if ev.TraceState != "" {
		md[TraceStateKey] = ev.TraceState
	}
	uuid := keep.UUID
	if uuid == "" {
		uuid = formatUUID(xorID(ev.ID, scope))
	}
	msg := wmessage.NewMessage(uuid, ev.Data) // shared, read only: each offer copies it
	msg.Metadata = md
	return msg
}

// parseValue parses metadata text s as a value of kind k: an int in
// decimal, a finite float in decimal as strconv.ParseFloat reads it, a bool as
// strconv.ParseBool, a time in RFC 3339 from 1677-09-21 to 2262-04-11 (ontology.MinTime to MaxTime).
func parseValue(s string, k ontology.Kind) (ontology.Value, error) {
	switch k {
	case ontology.KindString:
		return ontology.String(s), nil
	case ontology.KindInt:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return ontology.Value{}, errors.New("not a decimal int64")
		}
		return ontology.Int(n), nil
	case ontology.KindFloat:
		f, err := strconv.ParseFloat(s, 64)
		// Not Go's hexadecimal floats nor digit separators (0x1p-2).
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || strings.ContainsAny(s, "xX_") {
			return ontology.Value{}, errors.New("not a finite float in decimal")
		}
		return ontology.Float(f), nil
	case ontology.KindBool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return ontology.Value{}, errors.New("not a bool")
		}
		return ontology.Bool(b), nil
	case ontology.KindTime:
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return ontology.Value{}, errors.New("not an RFC 3339 time")
		}
		if !ontology.TimeInRange(tm) {
			return ontology.Value{}, errors.New("outside 1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z, the times sion holds")
		}
		return ontology.Time(tm), nil
	}
	return ontology.Value{}, fmt.Errorf("attribute of kind %s", k)
}

// formatValue writes v as metadata text that parseValue reads back to an
// equal value.
func formatValue(v ontology.Value) string {
	switch v.Kind() {
	case ontology.KindString:
		return v.Str()
	case ontology.KindInt:
		return strconv.FormatInt(v.Int(), 10)
	case ontology.KindFloat:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case ontology.KindBool:
		return strconv.FormatBool(v.Bool())
	case ontology.KindTime:
		return v.Time().Format(time.RFC3339Nano)
	}
	return v.String()
}

// parseUUID parses a canonical UUID — 36 characters, lower-case hex in
// groups of 8-4-4-4-12 — which formatUUID writes back unchanged.
func parseUUID(s string) (sion.EventID, bool) {
	var id sion.EventID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, false
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	for _, r := range h {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return id, false
		}
	}
	if _, err := hex.Decode(id[:], []byte(h)); err != nil {
		return id, false
	}
	return id, true
}

// formatUUID writes id as a canonical UUID.
func formatUUID(id sion.EventID) string {
	h := hex.EncodeToString(id[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// scopeKey is the 16 bytes a UUID is XOR-ed with on topic: the first 16
// bytes of SHA-256 over a domain string and the topic.
func scopeKey(topic string) sion.EventID {
	sum := sha256.Sum256([]byte("sion/watermill topic\x00" + topic))
	return sion.EventID(sum[:16])
}

// xorID returns id XOR scopeKey(topic): the event ID of UUID id on topic,
// and the UUID of event ID id on topic.
func xorID(id sion.EventID, topic string) sion.EventID {
	k := scopeKey(topic)
	for i := range id {
		id[i] ^= k[i]
	}
	return id
}

// derivedID is the event ID of a message whose UUID is not canonical: the
// first 16 bytes of SHA-256 over a domain string, the topic and the UUID,
// each but the first prefixed with its length.
func derivedID(topic, uuid string) sion.EventID {
	b := []byte("sion/watermill id\x00")
	b = binary.AppendUvarint(b, uint64(len(topic)))
	b = append(b, topic...)
	b = binary.AppendUvarint(b, uint64(len(uuid)))
	b = append(b, uuid...)
	sum := sha256.Sum256(b)
	return sion.EventID(sum[:16])
}

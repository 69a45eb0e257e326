package watermill

import (
	"fmt"
	"strconv"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
)

// Topics maps watermill topics to sion's meaning and back: what a
// topic's messages become when published, which filter Subscribe(topic)
// registers, and which topic a delivered event was published on. The
// three must agree: an event built by Event(topic) must match Filter(topic)
// and give Topic the same topic back (its canonical spelling: a type
// synonym comes back as the type's canonical name).
//
// Implementations must be safe for concurrent use. TypeTopics (the
// default) and AttributeTopics are the two this package provides.
type Topics interface {
	// Event returns the event type (a name or synonym of the ontology)
	// and the attributes (names canonical or synonyms) of every event that
	// a message published on topic becomes. An error refuses the publish
	// and is returned wrapped. The Subscriber calls it too, with the topic
	// of a delivered event, to leave the topic's own attributes out of the
	// message's metadata.
	Event(topic string) (eventType string, attrs []ontology.Attr, err error)
	// Filter returns the filter source (see the filter package) of the
	// sion subscription Subscribe(topic) makes.
	Filter(topic string) (string, error)
	// Topic returns the topic ev was published on, and false when ev
	// carries none (an event published in sion without this mapping). ev
	// has canonical type and attribute names.
	Topic(ev *sion.Event) (string, bool)
}

// TypeTopics is the default Topics: a topic is the name (or a synonym) of
// an event type of the place's ontology. A message published on topic T
// becomes an event of type T; Subscribe(T) registers {type ⊑ T}, so it
// also receives the events of T's subtypes, published on their own topics;
// the topic of a delivered event is its type's canonical name. A topic the
// ontology does not know is refused (sion.ErrUnknownEventType).
type TypeTopics struct{}

// Event returns topic as the event type, with no attributes.
func (TypeTopics) Event(topic string) (string, []ontology.Attr, error) { return topic, nil, nil }

// Filter returns {type ⊑ topic}, the name quoted.
func (TypeTopics) Filter(topic string) (string, error) {
	return "{type ⊑ " + strconv.Quote(topic) + "}", nil
}

// Topic returns ev's type name.
func (TypeTopics) Topic(ev *sion.Event) (string, bool) { return ev.Type, true }

// AttributeTopics maps every topic to one event type, Type, and carries the
// topic in its string attribute Attribute: a message published on topic T
// becomes an event of type Type with Attribute = T, and Subscribe(T)
// registers {type ⊑ Type; Attribute == T}. It suits topics that are not
// names of the ontology (watermill's generated names, say); the place's
// ontology must give Type (or an ancestor) the attribute, of kind string.
type AttributeTopics struct {
	// Type is the event type of every topic's events.
	Type string
	// Attribute is the string attribute of Type that holds the topic, by
	// its canonical name.
	Attribute string
}

// Event returns Type and the attribute holding topic; an AttributeTopics
// with an empty Type or Attribute is an error wrapping
// sion.ErrInvalidConfig.
func (a AttributeTopics) Event(topic string) (string, []ontology.Attr, error) {
	if err := a.check(); err != nil {
		return "", nil, err
	}
	return a.Type, []ontology.Attr{{Name: a.Attribute, Value: ontology.String(topic)}}, nil
}

// Filter returns {type ⊑ Type; Attribute == topic}, names and topic
// quoted.
func (a AttributeTopics) Filter(topic string) (string, error) {
	if err := a.check(); err != nil {
		return "", err
	}
	return "{type ⊑ " + strconv.Quote(a.Type) + "; " + strconv.Quote(a.Attribute) + " == " +
		ontology.String(topic).String() + "}", nil
}

// Topic returns the string value of Attribute, and false when ev has none.
func (a AttributeTopics) Topic(ev *sion.Event) (string, bool) {
	v, ok := ev.Value(a.Attribute)
	if !ok || v.Kind() != ontology.KindString {
		return "", false
	}
	return v.Str(), true
}

func (a AttributeTopics) check() error {
	if a.Type == "" || a.Attribute == "" {
		return fmt.Errorf("%w: watermill: AttributeTopics needs Type and Attribute", sion.ErrInvalidConfig)
	}
	return nil
}

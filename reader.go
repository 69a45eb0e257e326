package sion

import (
	"errors"
	"fmt"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// AttrPath says where one attribute of an event is read from in a
// document.
type AttrPath struct {
	// Name is the attribute, canonical or a synonym.
	Name string
	// Path is a gjson path into the document (tidwall/gjson syntax).
	Path string
	// TimeUnit is, for a time attribute given as a JSON number, the unit
	// it counts since the Unix epoch; 0 means time.Millisecond. A time
	// attribute given as a string is parsed as RFC 3339.
	TimeUnit time.Duration
}

// JSONFields declares once how to read events from JSON documents: the
// event type and each attribute at a gjson path.
type JSONFields struct {
	// TypePath is the gjson path of the event type's name (a type name or
	// synonym of the place's ontology). Type, when set instead, is the
	// event type of every document.
	TypePath, Type string
	// Attrs are the attributes to read. A path that is missing or null in
	// a document leaves its attribute out of that event.
	Attrs []AttrPath
	// NoPayload leaves the document out of the event; by default it is
	// the event's payload, with content type application/json.
	NoPayload bool
}

// JSONReader reads events from JSON documents as its JSONFields declare,
// with the kinds the place's ontology gives the attributes: a JSON number
// becomes an int, a float or a time as the attribute's kind says (an int
// attribute refuses a fractional number), a string becomes a string or an
// RFC 3339 time, true and false a bool. Events it returns are ready for
// Session.Publish, which validates them again. A JSONReader is immutable
// and safe for concurrent use.
type JSONReader struct {
	place  *EventPlace
	fields JSONFields
}

// NewJSONReader checks fields against the place's ontology: every
// attribute must be declared by some event type, a fixed Type must be
// known, and exactly one of TypePath and Type must be set. Errors wrap
// ErrInvalidConfig and name the field.
func (p *EventPlace) NewJSONReader(fields JSONFields) (*JSONReader, error) {
	o := p.cfg.Ontology
	if (fields.TypePath == "") == (fields.Type == "") {
		return nil, fmt.Errorf("%w: JSONFields needs exactly one of TypePath and Type", ErrInvalidConfig)
	}
	if fields.Type != "" {
		if _, ok := o.Lookup(fields.Type); !ok {
			return nil, fmt.Errorf("%w: JSONFields.Type %q: %w", ErrInvalidConfig, fields.Type, ErrUnknownEventType)
		}
	}
	for i, a := range fields.Attrs {
		switch {
		case a.Name == "" || a.Path == "":
			return nil, fmt.Errorf("%w: JSONFields.Attrs[%d] needs a Name and a Path", ErrInvalidConfig, i)
		case !o.HasAttribute(a.Name):
			return nil, fmt.Errorf("%w: JSONFields.Attrs[%d]: attribute %q is not in the ontology", ErrInvalidConfig, i, a.Name)
		case a.TimeUnit < 0:
			return nil, fmt.Errorf("%w: JSONFields.Attrs[%d]: negative TimeUnit", ErrInvalidConfig, i)
		}
	}
	return &JSONReader{place: p, fields: fields}, nil
}

// Read returns the event that doc describes. It errs (wrapping
// ErrUnknownEventType or ErrInvalidEvent, naming the type or the
// attribute and its path) when the type is missing or unknown, or a value
// does not fit its attribute's kind. doc is copied when it becomes the
// payload.
func (r *JSONReader) Read(doc []byte) (*Event, error) {
	o := r.place.cfg.Ontology
	name := r.fields.Type
	if name == "" {
		v, ok := filter.JSONValue(doc, r.fields.TypePath)
		if !ok || v.Kind() != ontology.KindString {
			return nil, fmt.Errorf("%w: no event type name at %q", ErrInvalidEvent, r.fields.TypePath)
		}
		name = v.Str()
	}
	t, ok := o.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w %q (read at %q)", ErrUnknownEventType, name, r.fields.TypePath)
	}
	ev := &Event{Type: t.Name}
	for _, a := range r.fields.Attrs {
		v, ok := filter.JSONValue(doc, a.Path)
		if !ok {
			continue
		}
		decl, ok := o.Attribute(t.ID, a.Name)
		if !ok {
			return nil, fmt.Errorf("%w: attribute %q (at %q) is not in the vocabulary of event type %q", ErrInvalidEvent, a.Name, a.Path, t.Name)
		}
		cv, err := asKind(v, decl.Kind, a.TimeUnit)
		if err != nil {
			return nil, fmt.Errorf("%w: attribute %q (at %q): %v", ErrInvalidEvent, a.Name, a.Path, err)
		}
		ev.Attrs = append(ev.Attrs, ontology.Attr{Name: decl.Name, Value: cv})
	}
	if !r.fields.NoPayload {
		ev.ContentType, ev.Data = "application/json", append([]byte(nil), doc...)
	}
	return ev, nil
}

// ReadList reads one event from each element of the array at the gjson
// path list in doc (for a GeoJSON FeatureCollection, "features"). It
// returns the events it could read, in order, and the errors of the
// others joined (each names the element's index); an error wrapping
// ErrInvalidEvent alone when doc is not JSON or has no array there.
func (r *JSONReader) ReadList(doc []byte, list string) ([]*Event, error) {
	if err := filter.CheckPayload("application/json", doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	elems, ok := filter.JSONElements(doc, list)
	if !ok {
		return nil, fmt.Errorf("%w: no JSON array at %q", ErrInvalidEvent, list)
	}
	events := make([]*Event, 0, len(elems))
	var errs []error
	for i, e := range elems {
		ev, err := r.Read(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("element %d of %q: %w", i, list, err))
			continue
		}
		events = append(events, ev)
	}
	return events, errors.Join(errs...)
}

// asKind converts a JSON value to attribute kind k.
func asKind(v ontology.Value, k ontology.Kind, unit time.Duration) (ontology.Value, error) {
	if cv, ok := convertKind(v, k); ok {
		return cv, nil
	}
	if k == ontology.KindTime {
		switch v.Kind() {
		case ontology.KindString:
			t, err := time.Parse(time.RFC3339Nano, v.Str())
			if err != nil {
				return ontology.Value{}, fmt.Errorf("time %q is not RFC 3339", v.Str())
			}
			return ontology.Time(t), nil
		case ontology.KindInt:
			if unit == 0 {
				unit = time.Millisecond
			}
			n := v.Int()
			if n > 0 && n > (1<<63-1)/int64(unit) || n < 0 && n < (-1<<63)/int64(unit) {
				return ontology.Value{}, fmt.Errorf("time %d × %v is out of range", n, unit)
			}
			return ontology.TimeNanos(n * int64(unit)), nil
		}
	}
	return ontology.Value{}, fmt.Errorf("want %s, got %s %s", k, v.Kind(), v)
}

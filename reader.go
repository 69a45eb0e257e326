package sion

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
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
	// a document leaves its attribute out of that event; a value for an
	// attribute the document's event type does not have is an error, not
	// dropped.
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
	if err := distinctAttrs(o, fields.Attrs, "JSONFields"); err != nil {
		return nil, err
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
	if err := filter.CheckPayload("application/json", doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	o := r.place.cfg.Ontology
	name := r.fields.Type
	if name == "" {
		v, ok := filter.JSONValue(doc, r.fields.TypePath)
		if !ok || v.Kind() != ontology.KindString {
			return nil, fmt.Errorf("%w: no event type name at %q", ErrInvalidEvent, r.fields.TypePath)
		}
		name = v.Str()
	}
	t, err := readType(o, name, r.fields.TypePath)
	if err != nil {
		return nil, err
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

// distinctAttrs refuses two paths for one attribute (names and synonyms
// count as one).
func distinctAttrs(o *ontology.Ontology, attrs []AttrPath, what string) error {
	seen := map[string]int{}
	for i, a := range attrs {
		c := o.CanonicalAttribute(a.Name)
		if j, dup := seen[c]; dup {
			return fmt.Errorf("%w: %s.Attrs[%d] and [%d] both read attribute %q", ErrInvalidConfig, what, j, i, c)
		}
		seen[c] = i
	}
	return nil
}

// readType looks up the event type name a reader read at path: one the
// ontology does not know, or reserves for sion's control traffic, is
// refused as Publish would refuse it.
func readType(o *ontology.Ontology, name, path string) (*ontology.EventType, error) {
	t, ok := o.Lookup(name)
	switch {
	case !ok:
		return nil, fmt.Errorf("%w %q (read at %q)", ErrUnknownEventType, name, path)
	case ontology.IsReserved(t.Name):
		return nil, fmt.Errorf("%w: event type %q (read at %q) is reserved for sion's control traffic", ErrInvalidEvent, t.Name, path)
	}
	return t, nil
}

// asKind converts a JSON value to attribute kind k. A number too large
// for a float64 (1e999, which JSON allows) is refused, as Publish refuses
// ±Inf.
func asKind(v ontology.Value, k ontology.Kind, unit time.Duration) (ontology.Value, error) {
	if cv, ok := v.As(k); ok {
		if cv.Kind() == ontology.KindFloat && (math.IsNaN(cv.Float()) || math.IsInf(cv.Float(), 0)) {
			return ontology.Value{}, fmt.Errorf("%v: the number is beyond float64's range (NaN and ±Inf are refused)", v)
		}
		return cv, nil
	}
	if k == ontology.KindTime {
		switch v.Kind() {
		case ontology.KindString:
			return parseTime(v.Str())
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

// XMLFields declares once how to read events from XML documents: the
// event type and each attribute at an XPath 1.0 expression, evaluated with
// the element an event is read from as context node.
type XMLFields struct {
	// Namespaces binds the prefixes the expressions use to namespace URIs;
	// names match by URI, whatever prefixes a document uses.
	Namespaces map[string]string
	// TypePath is the XPath of the event type's name; Type, when set
	// instead, is the event type of every element.
	TypePath, Type string
	// Attrs are the attributes to read; Path is an XPath expression whose
	// string value is parsed by the attribute's kind (int, float, bool as
	// in Go's strconv; time as RFC 3339). An expression that selects
	// nothing leaves its attribute out of that event; a value for an
	// attribute the element's event type does not have is an error.
	Attrs []AttrPath
	// NoPayload leaves the element out of the event; by default the
	// element, with the namespace declarations in scope, is the event's
	// payload, with content type application/xml.
	NoPayload bool
}

// XMLReader reads events from XML documents as its XMLFields declare. It
// is immutable and safe for concurrent use.
type XMLReader struct {
	place    *EventPlace
	fields   XMLFields
	typePath *filter.XMLPath
	attrs    []*filter.XMLPath
}

// NewXMLReader compiles the fields' expressions with their namespace
// bindings (an unbound prefix is an error) and checks the attribute names
// and a fixed Type against the place's ontology. Errors wrap
// ErrInvalidConfig and name the field.
func (p *EventPlace) NewXMLReader(fields XMLFields) (*XMLReader, error) {
	o := p.cfg.Ontology
	if (fields.TypePath == "") == (fields.Type == "") {
		return nil, fmt.Errorf("%w: XMLFields needs exactly one of TypePath and Type", ErrInvalidConfig)
	}
	if err := distinctAttrs(o, fields.Attrs, "XMLFields"); err != nil {
		return nil, err
	}
	r := &XMLReader{place: p, fields: fields}
	if fields.Type != "" {
		if _, ok := o.Lookup(fields.Type); !ok {
			return nil, fmt.Errorf("%w: XMLFields.Type %q: %w", ErrInvalidConfig, fields.Type, ErrUnknownEventType)
		}
	} else {
		x, err := filter.CompileXMLPath(fields.TypePath, fields.Namespaces)
		if err != nil {
			return nil, fmt.Errorf("%w: XMLFields.TypePath: %w", ErrInvalidConfig, err)
		}
		r.typePath = x
	}
	for i, a := range fields.Attrs {
		switch {
		case a.Name == "" || a.Path == "":
			return nil, fmt.Errorf("%w: XMLFields.Attrs[%d] needs a Name and a Path", ErrInvalidConfig, i)
		case !o.HasAttribute(a.Name):
			return nil, fmt.Errorf("%w: XMLFields.Attrs[%d]: attribute %q is not in the ontology", ErrInvalidConfig, i, a.Name)
		}
		x, err := filter.CompileXMLPath(a.Path, fields.Namespaces)
		if err != nil {
			return nil, fmt.Errorf("%w: XMLFields.Attrs[%d] (%q): %w", ErrInvalidConfig, i, a.Name, err)
		}
		r.attrs = append(r.attrs, x)
	}
	return r, nil
}

// ReadList parses doc and reads one event from each element the XPath
// list selects (for an Atom feed, "/atom:feed/atom:entry" with atom bound).
// It returns the events it could read, in document order, and the errors
// of the others joined (each names the element's index); an error
// wrapping ErrInvalidEvent alone when doc does not parse or list does not
// compile.
func (r *XMLReader) ReadList(doc []byte, list string) ([]*Event, error) {
	sel, err := filter.CompileXMLPath(list, r.fields.Namespaces)
	if err != nil {
		return nil, fmt.Errorf("%w: list: %w", ErrInvalidEvent, err)
	}
	elems, err := filter.XMLElements(doc, sel)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	events := make([]*Event, 0, len(elems))
	var errs []error
	for i, e := range elems {
		ev, err := r.read(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("element %d of %q: %w", i, list, err))
			continue
		}
		events = append(events, ev)
	}
	return events, errors.Join(errs...)
}

// Read parses doc and reads one event from its root element.
func (r *XMLReader) Read(doc []byte) (*Event, error) {
	root, _ := filter.CompileXMLPath("/*", nil)
	elems, err := filter.XMLElements(doc, root)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	if len(elems) != 1 {
		return nil, fmt.Errorf("%w: no root element", ErrInvalidEvent)
	}
	return r.read(elems[0])
}

func (r *XMLReader) read(e filter.XMLElement) (*Event, error) {
	o := r.place.cfg.Ontology
	name := r.fields.Type
	if r.typePath != nil {
		s, ok, err := e.Value(r.typePath)
		if err != nil {
			return nil, fmt.Errorf("%w: event type at %q: %w", ErrInvalidEvent, r.fields.TypePath, err)
		}
		s = strings.TrimSpace(s)
		if !ok || s == "" {
			return nil, fmt.Errorf("%w: no event type name at %q", ErrInvalidEvent, r.fields.TypePath)
		}
		name = s
	}
	t, err := readType(o, name, r.fields.TypePath)
	if err != nil {
		return nil, err
	}
	ev := &Event{Type: t.Name}
	for i, a := range r.fields.Attrs {
		s, ok, err := e.Value(r.attrs[i])
		if err != nil {
			return nil, fmt.Errorf("%w: attribute %q (at %q): %w", ErrInvalidEvent, a.Name, a.Path, err)
		}
		if !ok {
			continue
		}
		decl, ok := o.Attribute(t.ID, a.Name)
		if !ok {
			return nil, fmt.Errorf("%w: attribute %q (at %q) is not in the vocabulary of event type %q", ErrInvalidEvent, a.Name, a.Path, t.Name)
		}
		v, err := parseKind(s, decl.Kind)
		if err != nil {
			return nil, fmt.Errorf("%w: attribute %q (at %q): %v", ErrInvalidEvent, a.Name, a.Path, err)
		}
		ev.Attrs = append(ev.Attrs, ontology.Attr{Name: decl.Name, Value: v})
	}
	if !r.fields.NoPayload {
		ev.ContentType, ev.Data = "application/xml", e.OuterXML()
	}
	return ev, nil
}

// parseTime parses an RFC 3339 time that a time value can hold.
func parseTime(s string) (ontology.Value, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return ontology.Value{}, fmt.Errorf("time %q is not RFC 3339", s)
	}
	if !ontology.TimeInRange(t) {
		return ontology.Value{}, fmt.Errorf("time %q is outside 1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z, the times sion holds", s)
	}
	return ontology.Time(t), nil
}

// parseKind parses the text s as a value of kind k.
func parseKind(s string, k ontology.Kind) (ontology.Value, error) {
	t := strings.TrimSpace(s)
	switch k {
	case ontology.KindString:
		return ontology.String(s), nil
	case ontology.KindInt:
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return ontology.Value{}, fmt.Errorf("%q is not an int", s)
		}
		return ontology.Int(n), nil
	case ontology.KindFloat:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return ontology.Value{}, fmt.Errorf("%q is not a finite float", s)
		}
		return ontology.Float(f), nil
	case ontology.KindBool:
		b, err := strconv.ParseBool(t)
		if err != nil {
			return ontology.Value{}, fmt.Errorf("%q is not a bool", s)
		}
		return ontology.Bool(b), nil
	case ontology.KindTime:
		return parseTime(t)
	}
	return ontology.Value{}, fmt.Errorf("no text form for kind %s", k)
}

package cloudevents

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
)

// Config configures a Codec. Only Ontology is required; the zero value of
// every other field is a usable default. See the package documentation
// for the mapping each field changes.
type Config struct {
	// Ontology gives the event types and each type's vocabulary, which
	// decides the kinds of attributes on the way in. Required.
	Ontology *ontology.Ontology
	// TypePrefix comes before the canonical type name in the CloudEvent's
	// type ("org.example.hazard." gives "org.example.hazard.earthquake");
	// "" means none.
	TypePrefix string
	// Source is the CloudEvent's source on the way out, a non-empty URI
	// reference; "" means "/sion/<place>" (see the package documentation).
	Source string
	// TimeAttribute names the time attribute carried as the CloudEvent's
	// time, and SubjectAttribute the string attribute carried as its
	// subject (canonical names or synonyms); "" leaves time or subject
	// out.
	TimeAttribute, SubjectAttribute string
	// Extensions renames attributes: attribute name (canonical or synonym)
	// → extension name. The extension name must be lower-case ASCII
	// letters and digits, not a context attribute's name, not start with
	// "sion", and not be another attribute's name.
	Extensions map[string]string
	// OmitControl leaves the sion* control extensions out on the way out.
	OmitControl bool
}

// Codec converts between sion events and CloudEvents as its Config says.
// It is immutable after NewCodec and safe for concurrent use.
type Codec struct {
	cfg      Config
	o        *ontology.Ontology
	timeAttr string            // canonical, or ""
	subjAttr string            // canonical, or ""
	toExt    map[string]string // canonical attribute → extension name (renamed ones)
	fromExt  map[string]string // extension name → canonical attribute (renamed ones)
}

// contextNames are the CloudEvents context attribute names (1.0 and 0.3)
// and "data", which no extension may take.
var contextNames = map[string]bool{
	"specversion": true, "id": true, "source": true, "type": true,
	"subject": true, "time": true, "datacontenttype": true, "dataschema": true,
	"datacontentencoding": true, "schemaurl": true, "data": true,
}

// The Distributed Tracing extension's attributes
// (extensions.TraceParentExtension, extensions.TraceStateExtension): an
// event's W3C trace context, sion.Event.TraceParent and TraceState.
const (
	traceParentExt = extensions.TraceParentExtension
	traceStateExt  = extensions.TraceStateExtension
)

// controlPrefix starts every extension sion writes for control
// information; on the way in all such extensions are dropped.
const controlPrefix = "sion"

// extNameProblem says why name cannot be a user attribute's extension
// name, or returns "".
func extNameProblem(name string) string {
	if name == "" {
		return "is empty"
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return "is not only lower-case ASCII letters and digits"
		}
	}
	if contextNames[name] {
		return "is a CloudEvents context attribute"
	}
	if name == traceParentExt || name == traceStateExt {
		return "belongs to the Distributed Tracing extension, which carries the event's trace context"
	}
	if strings.HasPrefix(name, controlPrefix) {
		return `starts with "sion", which is reserved for sion's control information`
	}
	return ""
}

// NewCodec checks cfg and returns a Codec. It returns an error wrapping
// sion.ErrInvalidConfig, naming the field, when Ontology is nil, Source is
// not a URI reference, TimeAttribute or SubjectAttribute is not in the
// ontology, or an Extensions entry names an attribute not in the ontology
// or an extension name it cannot use. cfg.Extensions is copied.
func NewCodec(cfg Config) (*Codec, error) {
	if cfg.Ontology == nil {
		return nil, fmt.Errorf("%w: cloudevents: Config.Ontology is nil", sion.ErrInvalidConfig)
	}
	o := cfg.Ontology
	if cfg.Source != "" {
		if _, err := url.Parse(cfg.Source); err != nil {
			return nil, fmt.Errorf("%w: cloudevents: Config.Source %q is not a URI reference: %v", sion.ErrInvalidConfig, cfg.Source, err)
		}
	}
	c := &Codec{cfg: cfg, o: o, toExt: map[string]string{}, fromExt: map[string]string{}}
	for field, name := range map[string]string{"TimeAttribute": cfg.TimeAttribute, "SubjectAttribute": cfg.SubjectAttribute} {
		if name != "" && !o.HasAttribute(name) {
			return nil, fmt.Errorf("%w: cloudevents: Config.%s: attribute %q is not in the ontology", sion.ErrInvalidConfig, field, name)
		}
	}
	if cfg.TimeAttribute != "" {
		c.timeAttr = o.CanonicalAttribute(cfg.TimeAttribute)
	}
	if cfg.SubjectAttribute != "" {
		c.subjAttr = o.CanonicalAttribute(cfg.SubjectAttribute)
	}
	if c.timeAttr != "" && c.timeAttr == c.subjAttr {
		return nil, fmt.Errorf("%w: cloudevents: Config.TimeAttribute and SubjectAttribute are both %q", sion.ErrInvalidConfig, c.timeAttr)
	}
	for attr, ext := range cfg.Extensions {
		if !o.HasAttribute(attr) {
			return nil, fmt.Errorf("%w: cloudevents: Config.Extensions[%q]: attribute is not in the ontology", sion.ErrInvalidConfig, attr)
		}
		if p := extNameProblem(ext); p != "" {
			return nil, fmt.Errorf("%w: cloudevents: Config.Extensions[%q]: extension name %q %s", sion.ErrInvalidConfig, attr, ext, p)
		}
		canon := o.CanonicalAttribute(attr)
		if o.HasAttribute(ext) && o.CanonicalAttribute(ext) != canon {
			return nil, fmt.Errorf("%w: cloudevents: Config.Extensions[%q]: extension name %q is another attribute's name", sion.ErrInvalidConfig, attr, ext)
		}
		if prev, ok := c.toExt[canon]; ok && prev != ext {
			return nil, fmt.Errorf("%w: cloudevents: Config.Extensions: attribute %q is renamed twice (%q, %q)", sion.ErrInvalidConfig, canon, prev, ext)
		}
		if prev, ok := c.fromExt[ext]; ok && prev != canon {
			return nil, fmt.Errorf("%w: cloudevents: Config.Extensions: attributes %q and %q are both renamed %q", sion.ErrInvalidConfig, prev, canon, ext)
		}
		c.toExt[canon], c.fromExt[ext] = ext, canon
	}
	return c, nil
}

// Ontology returns the ontology the Codec was made with.
func (c *Codec) Ontology() *ontology.Ontology { return c.o }

// ToCloudEvent returns e as a CloudEvents 1.0 event. The type must be in
// the ontology and not reserved (else an error wrapping
// sion.ErrUnknownEventType); every attribute must be in the type's
// vocabulary with a value of its kind (an int for a float attribute, or an
// integral float for an int one, is converted as Publish converts it),
// finite, and have an extension name (else an error wrapping
// sion.ErrInvalidEvent that names the attribute). e is not modified and
// e.Data is copied.
func (c *Codec) ToCloudEvent(e *sion.Event) (event.Event, error) {
	if e == nil {
		return event.Event{}, fmt.Errorf("%w: cloudevents: nil event", sion.ErrInvalidEvent)
	}
	t, err := c.eventType(e.Type)
	if err != nil {
		return event.Event{}, err
	}
	id := e.ID
	if id.IsZero() {
		if _, err := rand.Read(id[:]); err != nil {
			return event.Event{}, fmt.Errorf("%w: cloudevents: no random source for an event ID: %v", sion.ErrInvalidEvent, err)
		}
	}
	ec := &event.EventContextV1{ID: id.String(), Type: c.cfg.TypePrefix + t.Name}
	src := c.cfg.Source
	if src == "" {
		src = "/sion"
		if e.Control.Place != "" {
			src += "/" + url.PathEscape(e.Control.Place)
		}
	}
	u, err := url.Parse(src)
	if err != nil {
		return event.Event{}, fmt.Errorf("%w: cloudevents: source %q: %v", sion.ErrInvalidEvent, src, err)
	}
	ec.Source = types.URIRef{URL: *u}
	ext := map[string]any{}
	for _, a := range e.Attrs {
		name := c.o.CanonicalAttribute(a.Name)
		decl, ok := c.o.Attribute(t.ID, name)
		if !ok {
			return event.Event{}, fmt.Errorf("%w: cloudevents: attribute %q is not in the vocabulary of event type %q", sion.ErrInvalidEvent, a.Name, t.Name)
		}
		v, ok := a.Value.As(decl.Kind)
		if !ok {
			return event.Event{}, fmt.Errorf("%w: cloudevents: attribute %q of event type %q is %s, got %s %s", sion.ErrInvalidEvent, a.Name, t.Name, decl.Kind, a.Value.Kind(), a.Value)
		}
		if !v.IsFinite() {
			return event.Event{}, fmt.Errorf("%w: cloudevents: attribute %q is %s; NaN and ±Inf are refused", sion.ErrInvalidEvent, a.Name, v)
		}
		if decl.Kind == ontology.KindString && !utf8.ValidString(v.Str()) {
			// A CloudEvents String is Unicode: the JSON format and other
			// receivers cannot carry these bytes unchanged.
			return event.Event{}, fmt.Errorf("%w: cloudevents: attribute %q is not valid UTF-8, which a CloudEvents String must be", sion.ErrInvalidEvent, a.Name)
		}
		switch {
		case name == c.timeAttr && decl.Kind != ontology.KindTime, name == c.subjAttr && decl.Kind != ontology.KindString:
			return event.Event{}, fmt.Errorf("%w: cloudevents: attribute %q of event type %q is %s; the CloudEvent's time must be a time, its subject a string", sion.ErrInvalidEvent, name, t.Name, decl.Kind)
		case name == c.timeAttr:
			if ec.Time != nil {
				return event.Event{}, fmt.Errorf("%w: cloudevents: attribute %q appears twice (names and synonyms count as one)", sion.ErrInvalidEvent, name)
			}
			ec.Time = &types.Timestamp{Time: v.Time()}
			continue
		case name == c.subjAttr:
			if ec.Subject != nil {
				return event.Event{}, fmt.Errorf("%w: cloudevents: attribute %q appears twice (names and synonyms count as one)", sion.ErrInvalidEvent, name)
			}
			if strings.TrimSpace(v.Str()) == "" {
				return event.Event{}, fmt.Errorf("%w: cloudevents: attribute %q is the subject and empty or blank; CloudEvents forbids that", sion.ErrInvalidEvent, name)
			}
			s := v.Str()
			ec.Subject = &s
			continue
		}
		en, renamed := c.toExt[name]
		if !renamed {
			en = name
			if p := extNameProblem(en); p != "" {
				return event.Event{}, fmt.Errorf("%w: cloudevents: attribute %q cannot be an extension: its name %s; rename it in Config.Extensions", sion.ErrInvalidEvent, name, p)
			}
		}
		if _, dup := ext[en]; dup {
			return event.Event{}, fmt.Errorf("%w: cloudevents: attribute %q appears twice (names and synonyms count as one)", sion.ErrInvalidEvent, name)
		}
		ext[en] = extValue(v)
	}
	if !c.cfg.OmitControl {
		controlExtensions(ext, e)
	}
	if e.TraceParent != "" {
		ext[traceParentExt] = e.TraceParent
	}
	if e.TraceState != "" {
		ext[traceStateExt] = e.TraceState
	}
	if len(ext) > 0 {
		ec.Extensions = ext
	}
	ce := event.Event{Context: ec}
	if e.ContentType != "" {
		ct := e.ContentType
		ec.DataContentType = &ct
	}
	if len(e.Data) > 0 {
		ce.DataEncoded = slices.Clone(e.Data)
		ce.DataBase64 = !inline(ce.DataMediaType(), e.ContentType, e.Data)
	}
	if err := ce.Validate(); err != nil {
		return event.Event{}, fmt.Errorf("%w: cloudevents: %v", sion.ErrInvalidEvent, strings.TrimSpace(err.Error()))
	}
	return ce, nil
}

// inline reports whether data can be written in the SDK's structured JSON
// encoding as it is (application/json, text/json) or as a string (XML in
// UTF-8) and read back unchanged, by the SDK and by a receiver following
// the JSON format; otherwise it goes as data_base64.
func inline(mediaType, contentType string, data []byte) bool {
	if contentType == "" {
		return false // the SDK would take it for JSON
	}
	if mediaType == "application/json" || mediaType == "text/json" {
		return true // the SDK writes these inline
	}
	if strings.HasSuffix(mediaType, "+json") {
		// The SDK would write it as a JSON string, which the JSON format
		// reads as a string, not the payload's JSON value: base64 is exact.
		return false
	}
	return (mediaType == "application/xml" || mediaType == "text/xml" || strings.HasSuffix(mediaType, "+xml")) && utf8.Valid(data)
}

// extValue returns v as a CloudEvents extension value (see the package
// documentation's kinds).
func extValue(v ontology.Value) any {
	switch v.Kind() {
	case ontology.KindBool:
		return v.Bool()
	case ontology.KindTime:
		return types.Timestamp{Time: v.Time()}
	case ontology.KindInt:
		if i := v.Int(); i >= math.MinInt32 && i <= math.MaxInt32 {
			return int32(i)
		}
		return strconv.FormatInt(v.Int(), 10)
	case ontology.KindFloat:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	}
	return v.Str()
}

// controlExtensions adds e's control information to ext as sion*
// extensions, leaving zero values out.
func controlExtensions(ext map[string]any, e *sion.Event) {
	ctl := e.Control
	for name, s := range map[string]string{"sionorigin": ctl.Origin, "sionplace": ctl.Place, "sionpath": strings.Join(ctl.Path, ",")} {
		if s != "" {
			ext[name] = s
		}
	}
	for name, n := range map[string]int{"sionhops": ctl.Hops, "sionttl": ctl.TTL, "sionplacehops": ctl.PlaceHops, "sionplacettl": ctl.PlaceTTL} {
		if n != 0 {
			ext[name] = extValue(ontology.Int(int64(n)))
		}
	}
	if e.Condition != nil {
		ext["sioncondition"] = e.Condition.String()
	}
}

// eventType returns the ontology's type named name, refusing unknown and
// reserved types.
func (c *Codec) eventType(name string) (*ontology.EventType, error) {
	if ontology.IsReserved(name) {
		return nil, fmt.Errorf("%w: cloudevents: event type %q is reserved for sion's control traffic", sion.ErrUnknownEventType, name)
	}
	t, ok := c.o.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: cloudevents: event type %q is not in the ontology", sion.ErrUnknownEventType, name)
	}
	return t, nil
}

// FromCloudEvent returns ce as a sion event, ready for Session.Publish:
// ID, Type (canonical), Attrs (canonical names, sorted by name, kinds from
// the type's vocabulary), ContentType and Data (copied), TraceParent and
// TraceState (the Distributed Tracing extension, as they are: Publish
// checks them); Control and Condition are zero. It returns an error wrapping
// sion.ErrUnknownEventType when the type lacks Config.TypePrefix or names
// no type of the ontology (or a reserved one), and one wrapping
// sion.ErrInvalidEvent, naming the extension, when ce does not validate,
// an extension is not in the type's vocabulary, or its value does not fit
// its attribute's kind. Extensions starting with "sion" are dropped.
func (c *Codec) FromCloudEvent(ce event.Event) (sion.Event, error) {
	if ce.Context == nil {
		return sion.Event{}, fmt.Errorf("%w: cloudevents: the CloudEvent has no context", sion.ErrInvalidEvent)
	}
	if err := ce.Validate(); err != nil {
		return sion.Event{}, fmt.Errorf("%w: cloudevents: %v", sion.ErrInvalidEvent, strings.TrimSpace(err.Error()))
	}
	name, ok := strings.CutPrefix(ce.Type(), c.cfg.TypePrefix)
	if !ok {
		return sion.Event{}, fmt.Errorf("%w: cloudevents: type %q does not start with the prefix %q", sion.ErrUnknownEventType, ce.Type(), c.cfg.TypePrefix)
	}
	t, err := c.eventType(name)
	if err != nil {
		return sion.Event{}, fmt.Errorf("%w (CloudEvent type %q)", err, ce.Type())
	}
	out := sion.Event{ID: eventID(ce.Source(), ce.ID()), Type: t.Name, ContentType: ce.DataContentType()}
	if d := ce.Data(); len(d) > 0 {
		out.Data = slices.Clone(d)
	}
	// time and subject become attributes where the type has them.
	if _, has := c.o.Attribute(t.ID, c.timeAttr); has && !ce.Time().IsZero() {
		a, err := c.attribute(t, "time", c.timeAttr, ce.Time())
		if err != nil {
			return sion.Event{}, err
		}
		out.Attrs = append(out.Attrs, a)
	}
	if _, has := c.o.Attribute(t.ID, c.subjAttr); has && ce.Subject() != "" {
		a, err := c.attribute(t, "subject", c.subjAttr, ce.Subject())
		if err != nil {
			return sion.Event{}, err
		}
		out.Attrs = append(out.Attrs, a)
	}
	for en, raw := range ce.Extensions() {
		if strings.HasPrefix(strings.ToLower(en), controlPrefix) {
			continue // control information is never trusted
		}
		if en == traceParentExt || en == traceStateExt {
			s, err := types.ToString(raw)
			if err != nil {
				return sion.Event{}, fmt.Errorf("%w: cloudevents: extension %q (W3C trace context) is not a String: %v", sion.ErrInvalidEvent, en, err)
			}
			if en == traceParentExt {
				out.TraceParent = s
			} else {
				out.TraceState = s
			}
			continue
		}
		if p := extNameProblem(en); p != "" {
			return sion.Event{}, fmt.Errorf("%w: cloudevents: extension %q: its name %s", sion.ErrInvalidEvent, en, p)
		}
		attr, ok := c.fromExt[en]
		if !ok {
			attr = en
			if _, renamed := c.toExt[c.o.CanonicalAttribute(en)]; renamed {
				return sion.Event{}, fmt.Errorf("%w: cloudevents: extension %q: its attribute travels as extension %q", sion.ErrInvalidEvent, en, c.toExt[c.o.CanonicalAttribute(en)])
			}
		}
		a, err := c.attribute(t, "extension "+strconv.Quote(en), attr, raw)
		if err != nil {
			return sion.Event{}, err
		}
		switch a.Name {
		case c.timeAttr:
			return sion.Event{}, fmt.Errorf("%w: cloudevents: extension %q: attribute %q travels as the CloudEvent's time", sion.ErrInvalidEvent, en, a.Name)
		case c.subjAttr:
			return sion.Event{}, fmt.Errorf("%w: cloudevents: extension %q: attribute %q travels as the CloudEvent's subject", sion.ErrInvalidEvent, en, a.Name)
		}
		out.Attrs = append(out.Attrs, a)
	}
	slices.SortFunc(out.Attrs, func(a, b ontology.Attr) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(out.Attrs); i++ {
		if out.Attrs[i].Name == out.Attrs[i-1].Name {
			return sion.Event{}, fmt.Errorf("%w: cloudevents: attribute %q appears twice (names and synonyms count as one)", sion.ErrInvalidEvent, out.Attrs[i].Name)
		}
	}
	return out, nil
}

// attribute returns the attribute name of type t with the value raw (from
// the CloudEvent's what), of the kind the type's vocabulary declares.
func (c *Codec) attribute(t *ontology.EventType, what, name string, raw any) (ontology.Attr, error) {
	decl, ok := c.o.Attribute(t.ID, name)
	if !ok {
		return ontology.Attr{}, fmt.Errorf("%w: cloudevents: %s: attribute %q is not in the vocabulary of event type %q", sion.ErrInvalidEvent, what, name, t.Name)
	}
	v, err := parseValue(raw, decl.Kind)
	if err != nil {
		return ontology.Attr{}, fmt.Errorf("%w: cloudevents: %s: attribute %q of event type %q is %s: %v", sion.ErrInvalidEvent, what, decl.Name, t.Name, decl.Kind, err)
	}
	return ontology.Attr{Name: decl.Name, Value: v}, nil
}

// parseValue returns raw, a CloudEvents attribute value, as a value of
// kind k (see the package documentation's kinds on the way in).
func parseValue(raw any, k ontology.Kind) (ontology.Value, error) {
	bad := func() (ontology.Value, error) { return ontology.Value{}, fmt.Errorf("got %T %v", raw, raw) }
	switch k {
	case ontology.KindString:
		if s, ok := raw.(string); ok {
			if !utf8.ValidString(s) {
				return ontology.Value{}, fmt.Errorf("%q is not valid UTF-8, which a CloudEvents String must be", s)
			}
			return ontology.String(s), nil
		}
	case ontology.KindInt:
		switch r := raw.(type) {
		case int32:
			return ontology.Int(int64(r)), nil
		case string:
			i, err := strconv.ParseInt(r, 10, 64)
			if err != nil {
				return ontology.Value{}, fmt.Errorf("%q is not a decimal int64", r)
			}
			return ontology.Int(i), nil
		}
	case ontology.KindFloat:
		switch r := raw.(type) {
		case int32:
			return ontology.Float(float64(r)), nil
		case string:
			f, err := strconv.ParseFloat(r, 64)
			// ParseFloat also reads Go's hexadecimal floats and digit
			// separators (0x1p-2, 0x_1p0), which no CloudEvents writer
			// writes: refused.
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || strings.ContainsAny(r, "xX_") {
				return ontology.Value{}, fmt.Errorf("%q is not a finite float64 in decimal", r)
			}
			return ontology.Float(f), nil
		}
	case ontology.KindBool:
		switch r := raw.(type) {
		case bool:
			return ontology.Bool(r), nil
		case string:
			if r == "true" || r == "false" {
				return ontology.Bool(r == "true"), nil
			}
			return ontology.Value{}, fmt.Errorf("%q is not true or false", r)
		}
	case ontology.KindTime:
		var tm time.Time
		switch r := raw.(type) {
		case types.Timestamp:
			tm = r.Time
		case *types.Timestamp:
			if r == nil {
				return bad()
			}
			tm = r.Time
		case time.Time:
			tm = r
		case string:
			p, err := types.ParseTime(r)
			if err != nil {
				return ontology.Value{}, fmt.Errorf("%q is not an RFC 3339 time", r)
			}
			tm = p
		default:
			return bad()
		}
		if !ontology.TimeInRange(tm) {
			return ontology.Value{}, fmt.Errorf("%s is outside 1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z, the times sion holds", tm.Format(time.RFC3339Nano))
		}
		return ontology.Time(tm), nil
	}
	return bad()
}

// eventID returns the EventID for CloudEvent id from source: id itself
// when it is 32 lower-case hex digits, not all zero, else the first 16
// bytes of SHA-256 over the length-prefixed source and id.
func eventID(source, id string) sion.EventID {
	var out sion.EventID
	if len(id) == 2*len(out) && strings.ToLower(id) == id {
		if _, err := hex.Decode(out[:], []byte(id)); err == nil && !out.IsZero() {
			return out
		}
	}
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(source)))])
	h.Write([]byte(source))
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(id)))])
	h.Write([]byte(id))
	copy(out[:], h.Sum(nil))
	return out
}

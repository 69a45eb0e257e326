package filter

import (
	"errors"
	"fmt"
	"strings"

	"github.com/antchfx/xmlquery"
	"github.com/tidwall/gjson"

	"github.com/sion-go/sion/ontology"
)

// Event is what a filter reads of an event: its type, its attributes and
// its payload. The root package's events implement it; BasicEvent is a
// plain implementation. Implementations must be safe for concurrent reads
// and must not change while a Match or Eval call reads them.
type Event interface {
	// EventType returns the canonical name of the event's type.
	EventType() string
	// NumAttrs returns the number of attributes.
	NumAttrs() int
	// Attr returns the i-th attribute, 0 ≤ i < NumAttrs(). Names are
	// canonical and unique within one event.
	Attr(i int) (name string, v ontology.Value)
	// Payload returns the payload and its media type ("application/json",
	// "application/xml", "text/xml", any "+json" or "+xml" type, in any
	// case; parameters after ';' are ignored; "" means sniff the first non-space byte: '{' or
	// '[' is JSON, '<' is XML). The slice is read, never kept or changed.
	Payload() (contentType string, data []byte)
}

// BasicEvent is a plain Event, for tests, benchmarks and small programs.
type BasicEvent struct {
	Type        string
	Attrs       []ontology.Attr
	ContentType string
	Data        []byte
}

// EventType returns e.Type.
func (e *BasicEvent) EventType() string { return e.Type }

// NumAttrs returns len(e.Attrs).
func (e *BasicEvent) NumAttrs() int { return len(e.Attrs) }

// Attr returns e.Attrs[i].
func (e *BasicEvent) Attr(i int) (string, ontology.Value) { return e.Attrs[i].Name, e.Attrs[i].Value }

// Payload returns e.ContentType and e.Data.
func (e *BasicEvent) Payload() (string, []byte) { return e.ContentType, e.Data }

// payloadKind classifies a payload.
type payloadKind uint8

const (
	payloadNone payloadKind = iota
	payloadJSON
	payloadXML
)

func classify(ct string, data []byte) payloadKind {
	if len(data) == 0 {
		return payloadNone
	}
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	switch {
	case ct == "":
		for _, c := range data {
			switch c {
			case ' ', '\t', '\r', '\n':
				continue
			case '{', '[':
				return payloadJSON
			case '<':
				return payloadXML
			}
			return payloadNone
		}
		return payloadNone
	case strings.EqualFold(ct, "application/json") || strings.EqualFold(ct, "text/json") || hasSuffixFold(ct, "+json"):
		return payloadJSON
	case strings.EqualFold(ct, "application/xml") || strings.EqualFold(ct, "text/xml") || hasSuffixFold(ct, "+xml"):
		return payloadXML
	}
	return payloadNone
}

// hasSuffixFold is strings.HasSuffix ignoring ASCII case: media types are
// case-insensitive (RFC 2045).
func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

// CheckPayload reports whether data is what its media type (classified as
// Event.Payload describes) says: valid JSON for a JSON type, well-formed
// XML for an XML type. Other media types, and an empty payload, are
// opaque and always pass. The switch calls it at Publish, so that the
// matcher, which trusts the media type, never reads a malformed payload as
// if every path were missing. Errors wrap ErrPayload and say what failed
// to parse; the cost is one parse of data.
func CheckPayload(contentType string, data []byte) error {
	switch classify(contentType, data) {
	case payloadJSON:
		if !gjson.ValidBytes(data) {
			return fmt.Errorf("%w: not valid JSON (content type %q, %d bytes)", ErrPayload, contentType, len(data))
		}
	case payloadXML:
		doc, err := readXML(data)
		if err != nil {
			return fmt.Errorf("%w: not well-formed XML (content type %q): %v", ErrPayload, contentType, err)
		}
		roots := 0
		for n := doc.FirstChild; n != nil; n = n.NextSibling {
			if n.Type == xmlquery.ElementNode {
				roots++
			}
		}
		if roots != 1 {
			return fmt.Errorf("%w: not well-formed XML (content type %q): %d root elements, want 1", ErrPayload, contentType, roots)
		}
	}
	return nil
}

// ErrPayload is wrapped by CheckPayload's errors.
var ErrPayload = errors.New("filter: invalid payload")

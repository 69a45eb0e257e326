package ontology

import (
	"errors"
	"strconv"
)

// Sentinel errors carried in LoadError.Err (wrapped with detail, so test them
// with errors.Is on the *LoadError, which unwraps).
var (
	// ErrSyntax: the input is not well-formed JSON or XML, or a JSON field has
	// the wrong type (a number where a string is expected, …).
	ErrSyntax = errors.New("syntax error")
	// ErrUnknownField: a JSON object has a field the format does not define,
	// or defines a field twice.
	ErrUnknownField = errors.New("unknown field")
	// ErrEmptyName: a type, parent, synonym or attribute name is "".
	ErrEmptyName = errors.New("empty name")
	// ErrReserved: a user type, attribute or synonym name begins with
	// ReservedPrefix.
	ErrReserved = errors.New("reserved name")
	// ErrDuplicateType: two types have the same canonical name.
	ErrDuplicateType = errors.New("duplicate type")
	// ErrSynonym: a synonym collides with a type name, another type's
	// synonym, or (for attributes) another attribute or its synonyms.
	ErrSynonym = errors.New("synonym collision")
	// ErrUnknownParent: a parent names no type or type synonym.
	ErrUnknownParent = errors.New("unknown parent")
	// ErrCycle: the parent relation has a cycle; the message lists its path.
	ErrCycle = errors.New("inheritance cycle")
	// ErrTooLarge reports an input past a size limit: a hierarchy with
	// more than MaxClosurePairs (type, ancestor) pairs, or an RDF/XML file
	// whose entities would expand past MaxEntityExpansion bytes.
	ErrTooLarge = errors.New("too large")
	// ErrVocabulary: an attribute is inherited from two parents with a
	// different Kind or Unit, redeclared with a different Kind or Unit than
	// inherited, or declared twice by one type.
	ErrVocabulary = errors.New("conflicting vocabulary")
	// ErrInvalidKind: an attribute has KindInvalid or an unknown kind name.
	ErrInvalidKind = errors.New("invalid attribute kind")
)

// Position is where something was read from: File may be "" (a reader with
// no name), Line and Col are 1-based, and 0 means unknown. Col counts bytes.
type Position struct {
	File      string
	Line, Col int
}

// IsValid reports whether the position has a line number.
func (p Position) IsValid() bool { return p.Line > 0 }

// String returns "file:line:col", leaving out the parts that are unknown
// ("file:line", "line:col", "file"), or "-" when nothing is known — the
// convention of go/token.Position.
func (p Position) String() string {
	s := p.File
	if p.IsValid() {
		if s != "" {
			s += ":"
		}
		s += strconv.Itoa(p.Line)
		if p.Col > 0 {
			s += ":" + strconv.Itoa(p.Col)
		}
	}
	if s == "" {
		s = "-"
	}
	return s
}

// LoadError is the error of New, LoadJSON and LoadRDFXML: what is wrong
// (Err, which wraps one of the Err* sentinels), with the type it concerns
// (Type, "" when the error is not about one type, e.g. a syntax error) and
// where it was read (Pos; the zero Position for types built by a program
// without positions).
type LoadError struct {
	Pos  Position
	Type string
	Err  error
}

// Error returns `ontology: file:line:col: type "X": what`; the position and
// the type part are left out when unknown.
func (e *LoadError) Error() string {
	s := "ontology: "
	if e.Pos.File != "" || e.Pos.IsValid() {
		s += e.Pos.String() + ": "
	}
	if e.Type != "" {
		s += "type " + strconv.Quote(e.Type) + ": "
	}
	if e.Err == nil {
		return s + "error"
	}
	return s + e.Err.Error()
}

// Unwrap returns Err, so errors.Is(err, ErrCycle) works on a *LoadError.
func (e *LoadError) Unwrap() error { return e.Err }

// Limits on what a loaded ontology may cost. An ontology is often read
// from a file someone else wrote: these keep a small hostile or broken file
// from taking the process's memory.
const (
	// MaxClosurePairs bounds the (type, ancestor) pairs that Ancestors and
	// Descendants tabulate, 16 bytes each: a chain of about 5,800 types,
	// or millions of types in a shallow hierarchy.
	MaxClosurePairs = 1 << 24
	// MaxEntityExpansion bounds the bytes that DTD entity references in an
	// RDF/XML file may expand to.
	MaxEntityExpansion = 16 << 20
)

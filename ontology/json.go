package ontology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/tidwall/gjson"
)

// LoadJSON reads an ontology in sion's JSON format (see the package
// documentation) from r and builds it with New. file names the input in
// positions ("" is allowed). The whole input is read; r is not closed.
//
// Errors are *LoadError with the line and column (1-based, in bytes) of the
// offending value: ErrSyntax for malformed JSON or a field of the wrong JSON
// type, ErrUnknownField for a field the format does not define or one given
// twice, ErrEmptyName for a missing name, ErrInvalidKind for an unknown kind
// name, and every error of New, positioned at the type's object.
func LoadJSON(r io.Reader, file string) (*Ontology, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &LoadError{Pos: Position{File: file}, Err: fmt.Errorf("%w: reading: %w", ErrSyntax, err)}
	}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		// A UTF-8 byte order mark, as some editors write: read it as
		// spaces, so that positions stay those of the file.
		data = append([]byte("   "), data[3:]...)
	}
	l := &jsonLoader{src: data, lines: lineStarts(data), file: file}
	defs, err := l.load()
	if err != nil {
		return nil, err
	}
	return New(defs)
}

type jsonLoader struct {
	src   []byte
	lines []int
	file  string
}

// lineStarts returns the byte offset at which each line begins.
func lineStarts(src []byte) []int {
	starts := []int{0}
	for i, c := range src {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// posAt converts a byte offset into a 1-based line and column.
func posAt(file string, lines []int, off int) Position {
	i := sort.Search(len(lines), func(i int) bool { return lines[i] > off }) - 1
	i = max(i, 0)
	return Position{File: file, Line: i + 1, Col: off - lines[i] + 1}
}

func (l *jsonLoader) pos(r gjson.Result) Position { return posAt(l.file, l.lines, r.Index) }

func (l *jsonLoader) errAt(r gjson.Result, typ string, err error) *LoadError {
	return &LoadError{Pos: l.pos(r), Type: typ, Err: err}
}

func (l *jsonLoader) load() ([]TypeDef, error) {
	if !gjson.ValidBytes(l.src) {
		// gjson does not say where; encoding/json does.
		off := 0
		var v any
		var se *json.SyntaxError
		if err := json.Unmarshal(l.src, &v); errors.As(err, &se) {
			off = int(se.Offset)
			// Offset counts the bytes read, the bad one included.
			off = max(min(off-1, len(l.src)-1), 0)
			return nil, &LoadError{Pos: posAt(l.file, l.lines, off), Err: fmt.Errorf("%w: %s", ErrSyntax, se.Error())}
		}
		off = len(bytes.TrimRight(l.src, " \t\r\n"))
		return nil, &LoadError{Pos: posAt(l.file, l.lines, max(off-1, 0)), Err: fmt.Errorf("%w: invalid JSON", ErrSyntax)}
	}
	root := gjson.ParseBytes(l.src)
	root.Index = len(l.src) - len(bytes.TrimLeft(l.src, " \t\r\n"))
	var defs []TypeDef
	err := l.object(root, "", "top level", map[string]func(gjson.Result) error{
		"types": func(v gjson.Result) error {
			return l.array(v, "", `"types"`, func(t gjson.Result) error {
				d, err := l.typeDef(t)
				defs = append(defs, d)
				return err
			})
		},
	})
	if err != nil {
		return nil, err
	}
	if !root.Get("types").Exists() {
		return nil, l.errAt(root, "", fmt.Errorf("%w: missing \"types\"", ErrSyntax))
	}
	return defs, nil
}

// object checks that v is an object whose fields are all in fields, none
// twice, and calls each field's function.
func (l *jsonLoader) object(v gjson.Result, typ, what string, fields map[string]func(gjson.Result) error) error {
	if !v.IsObject() {
		return l.errAt(v, typ, fmt.Errorf("%w: %s must be an object, not %s", ErrSyntax, what, jsonKind(v)))
	}
	seen := map[string]bool{}
	var err error
	v.ForEach(func(k, val gjson.Result) bool {
		f, ok := fields[k.Str]
		switch {
		case !ok:
			names := make([]string, 0, len(fields))
			for n := range fields {
				names = append(names, n)
			}
			sort.Strings(names)
			err = l.errAt(k, typ, fmt.Errorf("%w %q in %s (allowed: %v)", ErrUnknownField, k.Str, what, names))
		case seen[k.Str]:
			err = l.errAt(k, typ, fmt.Errorf("%w: %q given twice in %s", ErrUnknownField, k.Str, what))
		default:
			seen[k.Str] = true
			err = f(val)
		}
		return err == nil
	})
	return err
}

func (l *jsonLoader) array(v gjson.Result, typ, what string, each func(gjson.Result) error) error {
	if !v.IsArray() {
		return l.errAt(v, typ, fmt.Errorf("%w: %s must be an array, not %s", ErrSyntax, what, jsonKind(v)))
	}
	var err error
	v.ForEach(func(_, e gjson.Result) bool {
		err = each(e)
		return err == nil
	})
	return err
}

func (l *jsonLoader) str(v gjson.Result, typ, what string, dst *string) error {
	if v.Type != gjson.String {
		return l.errAt(v, typ, fmt.Errorf("%w: %s must be a string, not %s", ErrSyntax, what, jsonKind(v)))
	}
	*dst = v.Str
	return nil
}

func (l *jsonLoader) strs(v gjson.Result, typ, what string, dst *[]string) error {
	return l.array(v, typ, what, func(e gjson.Result) error {
		var s string
		if err := l.str(e, typ, what+" element", &s); err != nil {
			return err
		}
		if s == "" {
			return l.errAt(e, typ, fmt.Errorf("%w in %s", ErrEmptyName, what))
		}
		*dst = append(*dst, s)
		return nil
	})
}

func (l *jsonLoader) typeDef(t gjson.Result) (TypeDef, error) {
	d := TypeDef{Pos: l.pos(t)}
	// The name first, so that errors in other fields can name the type.
	if n := t.Get("name"); t.IsObject() && n.Type == gjson.String {
		d.Name = n.Str
	}
	err := l.object(t, d.Name, "a type", map[string]func(gjson.Result) error{
		"name":     func(v gjson.Result) error { return l.str(v, d.Name, `"name"`, &d.Name) },
		"parents":  func(v gjson.Result) error { return l.strs(v, d.Name, `"parents"`, &d.Parents) },
		"synonyms": func(v gjson.Result) error { return l.strs(v, d.Name, `"synonyms"`, &d.Synonyms) },
		"label":    func(v gjson.Result) error { return l.str(v, d.Name, `"label"`, &d.Label) },
		"attributes": func(v gjson.Result) error {
			return l.array(v, d.Name, `"attributes"`, func(a gjson.Result) error {
				attr, err := l.attribute(a, d.Name)
				d.Attributes = append(d.Attributes, attr)
				return err
			})
		},
	})
	if err != nil {
		return d, err
	}
	if d.Name == "" {
		return d, l.errAt(t, "", fmt.Errorf("%w: a type needs a non-empty \"name\"", ErrEmptyName))
	}
	return d, nil
}

func (l *jsonLoader) attribute(a gjson.Result, typ string) (Attribute, error) {
	var attr Attribute
	var kind string
	var kindVal gjson.Result
	err := l.object(a, typ, "an attribute", map[string]func(gjson.Result) error{
		"name": func(v gjson.Result) error { return l.str(v, typ, `attribute "name"`, &attr.Name) },
		"kind": func(v gjson.Result) error {
			kindVal = v
			return l.str(v, typ, `attribute "kind"`, &kind)
		},
		"unit":     func(v gjson.Result) error { return l.str(v, typ, `attribute "unit"`, &attr.Unit) },
		"synonyms": func(v gjson.Result) error { return l.strs(v, typ, `attribute "synonyms"`, &attr.Synonyms) },
	})
	if err != nil {
		return attr, err
	}
	if attr.Name == "" {
		return attr, l.errAt(a, typ, fmt.Errorf("%w: an attribute needs a non-empty \"name\"", ErrEmptyName))
	}
	if !kindVal.Exists() {
		return attr, l.errAt(a, typ, fmt.Errorf("%w: attribute %q has no \"kind\"", ErrInvalidKind, attr.Name))
	}
	k, ok := ParseKind(kind)
	if !ok {
		return attr, l.errAt(kindVal, typ, fmt.Errorf("%w: attribute %q: kind %q (want string, int, float, bool or time)", ErrInvalidKind, attr.Name, kind))
	}
	attr.Kind = k
	return attr, nil
}

func jsonKind(v gjson.Result) string {
	switch v.Type {
	case gjson.Null:
		return "null"
	case gjson.False, gjson.True:
		return "a boolean"
	case gjson.Number:
		return "a number"
	case gjson.String:
		return "a string"
	}
	if v.IsArray() {
		return "an array"
	}
	return "an object"
}

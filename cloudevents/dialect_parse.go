package cloudevents

// The parsing of a Subscriptions API filter expression, from JSON text or
// its decoded form, into expr trees (see CompileFilters).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// decodeJSON decodes JSON text into []any, map[string]any and strings
// (numbers as json.Number), refusing duplicate keys.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec, "filters", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, ferr(ErrFilterInvalid, "filters", "not one JSON value: text follows it")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, path string, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, ferr(ErrFilterInvalid, path, "not JSON: %v", err)
	}
	if tok == json.Delim('[') || tok == json.Delim('{') {
		if depth++; depth > MaxFilterDepth {
			return nil, ferr(ErrFilterUnsupported, path, "nested more than %d deep (MaxFilterDepth)", MaxFilterDepth)
		}
	}
	switch tok {
	case json.Delim('['):
		out := []any{}
		for i := 0; dec.More(); i++ {
			v, err := decodeValue(dec, fmt.Sprintf("%s[%d]", path, i), depth)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, ferr(ErrFilterInvalid, path, "not JSON: %v", err)
		}
		return out, nil
	case json.Delim('{'):
		out := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, ferr(ErrFilterInvalid, path, "not JSON: %v", err)
			}
			k := kt.(string)
			if _, dup := out[k]; dup {
				return nil, ferr(ErrFilterInvalid, path, "key %q appears twice", k)
			}
			v, err := decodeValue(dec, path+"."+k, depth)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		if _, err := dec.Token(); err != nil {
			return nil, ferr(ErrFilterInvalid, path, "not JSON: %v", err)
		}
		return out, nil
	}
	return tok, nil
}

// describe names the JSON kind of a decoded value for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64, int:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("a %T", x)
	}
}

type exprOp uint8

const (
	opAll exprOp = iota
	opAny
	opNot
	opLeaf
	opSQL  // a sql dialect expression, compiled by compileSQL
	opAtom // a DNF made by compileSQL
)

// expr is a parsed filter expression. A leaf is one key of an exact,
// prefix or suffix object; an object with several keys is an opAll of
// leaves.
type expr struct {
	op   exprOp
	kids []*expr
	path string
	pos  int // in a sql expression, the byte offset of the operator
	// leaves
	dialect, key, value string
	sql                 *sqlNode // opSQL
	atom                *atom    // opAtom
	memo                [2]*dnfMemo
}

// dialects lists the dialect names for error messages.
const dialects = "exact, prefix, suffix, all, any, not, sql"

// parser counts what parseExpr has read, against MaxFilterDepth and
// MaxFilterTests.
type parser struct{ tests int }

func (ps *parser) parseExpr(v any, path string, depth int) (*expr, error) {
	if depth++; depth > MaxFilterDepth {
		return nil, ferr(ErrFilterUnsupported, path, "expressions nested more than %d deep (MaxFilterDepth)", MaxFilterDepth)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, ferr(ErrFilterInvalid, path, "a filter expression is an object with one key, its dialect; got %s", describe(v))
	}
	if len(m) != 1 {
		keys := slices.Sorted(mapKeys(m))
		return nil, ferr(ErrFilterInvalid, path, "a filter expression has exactly one key, its dialect (%s); got %d: %s", dialects, len(m), strings.Join(keys, ", "))
	}
	var name string
	var body any
	for k, v := range m { // its one key
		name, body = k, v
	}
	p := path + "." + name
	switch name {
	case "exact", "prefix", "suffix":
		obj, ok := body.(map[string]any)
		if !ok {
			return nil, ferr(ErrFilterInvalid, p, "want an object of attribute names and string values, got %s", describe(body))
		}
		if len(obj) == 0 {
			return nil, ferr(ErrFilterInvalid, p, "names no attribute")
		}
		if ps.tests += len(obj); ps.tests > MaxFilterTests {
			return nil, ferr(ErrFilterUnsupported, p, "more than %d attribute tests (MaxFilterTests)", MaxFilterTests)
		}
		e := &expr{op: opAll, path: p}
		for _, k := range slices.Sorted(mapKeys(obj)) {
			s, ok := obj[k].(string)
			switch {
			case k == "":
				return nil, ferr(ErrFilterInvalid, p, "an attribute name is empty")
			case !ok:
				return nil, ferr(ErrFilterInvalid, p+"."+k, "the value must be a string, got %s", describe(obj[k]))
			case s == "":
				return nil, ferr(ErrFilterInvalid, p+"."+k, "the value is empty")
			}
			e.kids = append(e.kids, &expr{op: opLeaf, path: p + "." + k, dialect: name, key: k, value: s})
		}
		if len(e.kids) == 1 {
			return e.kids[0], nil
		}
		return e, nil
	case "all", "any":
		arr, ok := body.([]any)
		if !ok {
			return nil, ferr(ErrFilterInvalid, p, "want an array of filter expressions, got %s", describe(body))
		}
		if len(arr) == 0 {
			return nil, ferr(ErrFilterInvalid, p, "needs at least one filter expression")
		}
		e := &expr{op: opAll, path: p}
		if name == "any" {
			e.op = opAny
		}
		for i, x := range arr {
			k, err := ps.parseExpr(x, fmt.Sprintf("%s[%d]", p, i), depth)
			if err != nil {
				return nil, err
			}
			e.kids = append(e.kids, k)
		}
		return e, nil
	case "not":
		k, err := ps.parseExpr(body, p, depth)
		if err != nil {
			return nil, err
		}
		return &expr{op: opNot, path: p, kids: []*expr{k}}, nil
	case "sql":
		src, ok := body.(string)
		if !ok {
			return nil, ferr(ErrFilterInvalid, p, "want a string, a CESQL expression; got %s", describe(body))
		}
		n, err := parseSQL(src, p, depth, &ps.tests)
		if err != nil {
			return nil, err
		}
		return &expr{op: opSQL, path: p, sql: n}, nil
	}
	return nil, ferr(ErrFilterInvalid, path, "unknown dialect %q (want one of %s)", name, dialects)
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

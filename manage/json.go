package manage

import (
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"
)

// plain turns a value of sion's info structs into what encoding/json
// writes with snake_case names: a struct becomes a map keyed by its
// exported fields' names in snake_case (EventsSent → events_sent, TTL →
// ttl, CoveredBy → covered_by), an embedded struct's fields joining its
// own; a time.Time becomes RFC 3339 text (null when zero); a named
// non-struct type with a String method (sion.LinkState, time.Duration)
// its String; a nil slice an empty array. Fields the core adds later
// appear without a change here.
func plain(v any) any { return plainValue(reflect.ValueOf(v), 0) }

var (
	timeType     = reflect.TypeFor[time.Time]()
	stringerType = reflect.TypeFor[fmt.Stringer]()
)

func plainValue(v reflect.Value, depth int) any {
	if !v.IsValid() || depth > 16 {
		return nil
	}
	t := v.Type()
	if t == timeType {
		tm := v.Interface().(time.Time)
		if tm.IsZero() {
			return nil
		}
		return tm.UTC().Format(time.RFC3339Nano)
	}
	if t.Kind() != reflect.Struct && t.PkgPath() != "" && t.Implements(stringerType) && t.Kind() != reflect.Pointer {
		return v.Interface().(fmt.Stringer).String()
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return plainValue(v.Elem(), depth+1)
	case reflect.Struct:
		m := map[string]any{}
		plainStruct(v, m, depth)
		return m
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return v.Interface() // bytes: base64, as encoding/json writes them
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = plainValue(v.Index(i), depth+1)
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return map[string]any{}
		}
		m := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			m[fmt.Sprint(it.Key().Interface())] = plainValue(it.Value(), depth+1)
		}
		return m
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return nil
	}
	return v.Interface()
}

// plainStruct puts v's exported fields in m, an embedded struct's fields
// among them.
func plainStruct(v reflect.Value, m map[string]any, depth int) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		switch f.Type.Kind() {
		case reflect.Func, reflect.Chan, reflect.UnsafePointer:
			continue
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			plainStruct(v.Field(i), m, depth+1)
			continue
		}
		m[snake(f.Name)] = plainValue(v.Field(i), depth+1)
	}
}

// snake returns a Go field name in snake_case: a word starts at an
// upper-case letter after a lower-case letter or digit, and at the last
// upper-case letter of an initialism followed by a lower-case one
// (TLSState → tls_state).
func snake(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) && i > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

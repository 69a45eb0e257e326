package ontology

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Kind is the kind of an attribute value: string, integer, float, bool or
// time. The zero Kind is KindInvalid, which no declared attribute has.
type Kind uint8

// The value kinds of DESIGN.md "Attribute predicates".
const (
	KindInvalid Kind = iota // no value; the zero Value
	KindString              // a byte string, compared by bytes
	KindInt                 // an int64, exact
	KindFloat               // a float64; integers and floats compare by exact numeric value
	KindBool                // true or false; only = and != apply
	KindTime                // an instant, nanoseconds since the Unix epoch (UTC), int64
)

var kindNames = [...]string{"invalid", "string", "int", "float", "bool", "time"}

// String returns the kind's name as written in ontology files: "string",
// "int", "float", "bool" or "time".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseKind returns the Kind named s ("string", "int", "float", "bool",
// "time"; "integer" and "double" are accepted as synonyms). It returns
// KindInvalid and false for any other name.
func ParseKind(s string) (Kind, bool) {
	switch s {
	case "string":
		return KindString, true
	case "int", "integer":
		return KindInt, true
	case "float", "double":
		return KindFloat, true
	case "bool", "boolean":
		return KindBool, true
	case "time":
		return KindTime, true
	}
	return KindInvalid, false
}

// Numeric reports whether k is KindInt or KindFloat.
func (k Kind) Numeric() bool { return k == KindInt || k == KindFloat }

// Value is one typed attribute value. The zero Value has KindInvalid and
// stands for "no value". Values are small, immutable and comparable with
// the methods below, not with ==; they are safe to share between goroutines.
//
// A time is kept as int64 nanoseconds since the Unix epoch, so it covers
// MinTime to MaxTime (1677-09-21 to 2262-04-11) and drops the location
// (instants compare, not clocks).
type Value struct {
	s    string
	n    uint64
	kind Kind
}

// String returns a string Value.
func String(s string) Value { return Value{kind: KindString, s: s} }

// Int returns an integer Value.
func Int(i int64) Value { return Value{kind: KindInt, n: uint64(i)} }

// Float returns a float Value. NaN and ±Inf are representable here; the
// places that accept values from users (Publish, filter.Compile) refuse them.
func Float(f float64) Value { return Value{kind: KindFloat, n: math.Float64bits(f)} }

// Bool returns a bool Value.
func Bool(b bool) Value {
	if b {
		return Value{kind: KindBool, n: 1}
	}
	return Value{kind: KindBool}
}

// Time returns a time Value holding t as nanoseconds since the Unix epoch.
// t must be within the int64 nanosecond range (MinTime to MaxTime; see
// TimeInRange): outside it the value is undefined, as for t.UnixNano.
func Time(t time.Time) Value { return Value{kind: KindTime, n: uint64(t.UnixNano())} }

// Bounds of the times a time Value holds: int64 nanoseconds since the Unix
// epoch.
var (
	MinTime = time.Unix(0, math.MinInt64).UTC() // 1677-09-21T00:12:43.145224192Z
	MaxTime = time.Unix(0, math.MaxInt64).UTC() // 2262-04-11T23:47:16.854775807Z
)

// TimeInRange reports whether t is within [MinTime, MaxTime], so that
// Time(t) holds it exactly.
func TimeInRange(t time.Time) bool { return !t.Before(MinTime) && !t.After(MaxTime) }

// TimeNanos returns a time Value from nanoseconds since the Unix epoch.
func TimeNanos(ns int64) Value { return Value{kind: KindTime, n: uint64(ns)} }

// Kind returns v's kind.
func (v Value) Kind() Kind { return v.kind }

// IsValid reports whether v holds a value (its kind is not KindInvalid).
func (v Value) IsValid() bool { return v.kind != KindInvalid }

// Str returns the string of a KindString value, or "" for other kinds.
func (v Value) Str() string { return v.s }

// Int returns the integer of a KindInt value, or the nanoseconds of a
// KindTime value; 0 for other kinds.
func (v Value) Int() int64 {
	if v.kind == KindInt || v.kind == KindTime {
		return int64(v.n)
	}
	return 0
}

// Float returns the float of a KindFloat value, the (possibly rounded)
// float64 of a KindInt value, or 0 for other kinds.
func (v Value) Float() float64 {
	switch v.kind {
	case KindFloat:
		return math.Float64frombits(v.n)
	case KindInt:
		return float64(int64(v.n))
	}
	return 0
}

// Bool returns the bool of a KindBool value, or false.
func (v Value) Bool() bool { return v.kind == KindBool && v.n != 0 }

// Time returns the instant of a KindTime value in UTC, or the zero time.
func (v Value) Time() time.Time {
	if v.kind != KindTime {
		return time.Time{}
	}
	return time.Unix(0, int64(v.n)).UTC()
}

// As returns v as a value of kind k, the conversion an attribute's
// declared kind allows (S1: the vocabulary decides an attribute's kind):
// v itself when it is of kind k; an int that a float64 holds exactly, for
// k = KindFloat; an integral float within int64's range, for k = KindInt.
// Any other pair returns ok = false. NaN and ±Inf pass unchanged as
// floats; callers that refuse them check IsFinite.
func (v Value) As(k Kind) (cv Value, ok bool) {
	switch {
	case v.kind == k:
		return v, true
	case k == KindFloat && v.kind == KindInt:
		f := float64(v.Int())
		if f >= -0x1p63 && f < 0x1p63 && int64(f) == v.Int() {
			return Float(f), true
		}
	case k == KindInt && v.kind == KindFloat:
		f := v.Float()
		if f >= -0x1p63 && f < 0x1p63 && f == math.Trunc(f) {
			return Int(int64(f)), true
		}
	}
	return Value{}, false
}

// IsNaN reports whether v is a float NaN.
func (v Value) IsNaN() bool { return v.kind == KindFloat && math.IsNaN(v.Float()) }

// IsFinite reports whether v is not a float NaN or ±Inf. Non-float values
// are finite.
func (v Value) IsFinite() bool {
	if v.kind != KindFloat {
		return true
	}
	f := v.Float()
	return !math.IsNaN(f) && !math.IsInf(f, 0)
}

// Compare compares a and b. It returns -1, 0 or +1 and ok = true when the
// two are ordered: both numeric (int and float compared by exact
// mathematical value, so 2^53+1 as an int is greater than 2^53 as a float,
// and 0 = 0.0 = -0.0), both strings (by bytes), both times (as instants) or
// both bools (false < true). It returns ok = false when the kinds differ
// (other than int/float), when either is invalid, or when either is NaN.
// Compare does not allocate.
func Compare(a, b Value) (c int, ok bool) {
	switch {
	case a.kind == b.kind:
		switch a.kind {
		case KindString:
			switch {
			case a.s < b.s:
				return -1, true
			case a.s > b.s:
				return 1, true
			}
			return 0, true
		case KindInt, KindTime:
			return cmpInt(int64(a.n), int64(b.n)), true
		case KindFloat:
			return cmpFloat(a.Float(), b.Float())
		case KindBool:
			return cmpInt(int64(a.n), int64(b.n)), true
		}
		return 0, false
	case a.kind == KindInt && b.kind == KindFloat:
		return cmpIntFloat(int64(a.n), b.Float())
	case a.kind == KindFloat && b.kind == KindInt:
		c, ok := cmpIntFloat(int64(b.n), a.Float())
		return -c, ok
	}
	return 0, false
}

// Equal reports whether a and b are the same value: Compare gives 0. Values
// of different kinds are never equal, except int and float of the same
// mathematical value. NaN equals nothing.
func Equal(a, b Value) bool {
	c, ok := Compare(a, b)
	return ok && c == 0
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpFloat(a, b float64) (int, bool) {
	switch {
	case a < b:
		return -1, true
	case a > b:
		return 1, true
	case a == b:
		return 0, true
	}
	return 0, false // NaN
}

// cmpIntFloat compares an int64 with a float64 by exact mathematical value.
func cmpIntFloat(i int64, f float64) (int, bool) {
	if math.IsNaN(f) {
		return 0, false
	}
	if f >= 0x1p63 {
		return -1, true
	}
	if f < -0x1p63 {
		return 1, true
	}
	t := int64(f) // exact: |f| < 2^63, truncated toward zero
	if i != t {
		return cmpInt(i, t), true
	}
	frac := f - float64(t)
	switch {
	case frac > 0:
		return -1, true
	case frac < 0:
		return 1, true
	}
	return 0, true
}

// Key returns a comparable key for v such that Equal(a, b) if and only if
// a.Key() == b.Key(), for all non-NaN values: an integral float within
// int64 range keys as the integer (so 0, 0.0 and -0.0 share one key). It is
// what hash-based indexes store. Key does not allocate.
func (v Value) Key() ValueKey {
	if v.kind == KindFloat {
		f := v.Float()
		if f >= -0x1p63 && f < 0x1p63 && f == math.Trunc(f) {
			return ValueKey{kind: KindInt, n: uint64(int64(f))}
		}
	}
	return ValueKey(v)
}

// ValueKey is the comparable form of a Value returned by Value.Key; use it
// as a map key.
type ValueKey struct {
	s    string
	n    uint64
	kind Kind
}

// String formats v for people and for filter source text: strings are
// quoted as Go literals, floats always carry a '.', 'e', "Inf" or "NaN" so
// that they read back as floats, times are RFC 3339 with nanoseconds.
func (v Value) String() string {
	switch v.kind {
	case KindString:
		return strconv.Quote(v.s)
	case KindInt:
		return strconv.FormatInt(int64(v.n), 10)
	case KindFloat:
		return FormatFloat(v.Float())
	case KindBool:
		return strconv.FormatBool(v.n != 0)
	case KindTime:
		return fmt.Sprintf("time(%q)", v.Time().Format(time.RFC3339Nano))
	}
	return "<invalid>"
}

// FormatFloat formats f with the fewest digits that read back exactly,
// always marked as a float ("0.0", "-0.0", "1e+21", "0.5").
func FormatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.', 'e', 'I', 'N':
			return s
		}
	}
	return s + ".0"
}

package sion

import (
	"fmt"
	"strings"
)

// Limits of the W3C Trace Context fields an event may carry
// (Event.TraceParent, Event.TraceState).
const (
	// MaxTraceStateBytes bounds Event.TraceState: the 512 characters
	// W3C Trace Context asks every vendor to propagate, so that whatever
	// sion accepts survives every hop after it whole.
	MaxTraceStateBytes = 512
	// MaxTraceStateMembers bounds the key=value list members of
	// Event.TraceState (W3C Trace Context: at most 32).
	MaxTraceStateMembers = 32
	// MaxTraceParentBytes bounds Event.TraceParent; only a traceparent of
	// a future version (after 00) may be longer than 55 bytes.
	MaxTraceParentBytes = 512
)

// traceParentLen is the length of a version 00 traceparent:
// 2 + 1 + 32 + 1 + 16 + 1 + 2.
const traceParentLen = 55

// checkTraceContext checks an event's trace context against W3C Trace
// Context Level 1 (https://www.w3.org/TR/trace-context/): it refuses a
// traceparent or tracestate that does not follow the grammar, and a
// tracestate without a traceparent. Errors wrap ErrInvalidEvent and name
// the field and what is wrong. Empty fields cost two comparisons.
func checkTraceContext(parent, state string) error {
	if parent == "" && state == "" {
		return nil
	}
	if parent == "" {
		return fmt.Errorf("%w: tracestate without a traceparent (W3C Trace Context)", ErrInvalidEvent)
	}
	if why := traceParentProblem(parent); why != "" {
		return fmt.Errorf("%w: traceparent %.80q: %s (W3C Trace Context: version-traceid-parentid-flags, lower-case hex)", ErrInvalidEvent, parent, why)
	}
	if why := traceStateProblem(state); why != "" {
		return fmt.Errorf("%w: tracestate %.80q: %s (W3C Trace Context)", ErrInvalidEvent, state, why)
	}
	return nil
}

// traceParentProblem returns what is wrong with a traceparent, or "".
// Version 00 is exactly 55 bytes; a later version (01 to fe) at least
// 55, its first 55 bytes read as version 00's and, when longer, a dash
// after them and visible ASCII to the end (the spec's forward
// compatibility rule).
func traceParentProblem(tp string) string {
	switch {
	case len(tp) < traceParentLen:
		return fmt.Sprintf("%d bytes, want %d", len(tp), traceParentLen)
	case len(tp) > MaxTraceParentBytes:
		return fmt.Sprintf("%d bytes, more than %d", len(tp), MaxTraceParentBytes)
	}
	fields := [...]struct {
		name     string
		from, to int
	}{{"version", 0, 2}, {"trace-id", 3, 35}, {"parent-id", 36, 52}, {"trace-flags", 53, 55}}
	for i, f := range fields {
		if i > 0 && tp[f.from-1] != '-' {
			return fmt.Sprintf("byte %d is %q, want '-' before the %s", f.from-1, tp[f.from-1], f.name)
		}
		if why := lowerHexProblem(tp[f.from:f.to]); why != "" {
			return fmt.Sprintf("%s %q (%d lower-case hex digits): %s", f.name, tp[f.from:f.to], f.to-f.from, why)
		}
	}
	switch {
	case tp[:2] == "ff":
		return "version ff is invalid"
	case tp[3:35] == "00000000000000000000000000000000":
		return "trace-id is all zeros"
	case tp[36:52] == "0000000000000000":
		return "parent-id is all zeros"
	case tp[:2] == "00" && len(tp) != traceParentLen:
		return fmt.Sprintf("version 00 is %d bytes, got %d", traceParentLen, len(tp))
	case len(tp) > traceParentLen && tp[traceParentLen] != '-':
		return fmt.Sprintf("byte %d is %q, want '-' or the end after the trace-flags", traceParentLen, tp[traceParentLen])
	}
	for i := traceParentLen; i < len(tp); i++ {
		if tp[i] < 0x21 || tp[i] > 0x7e {
			return fmt.Sprintf("byte %d is %q, not visible ASCII", i, tp[i])
		}
	}
	return ""
}

// lowerHexProblem returns what keeps s from being lower-case hex, or "".
func lowerHexProblem(s string) string {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			return fmt.Sprintf("upper-case %q", c)
		default:
			return fmt.Sprintf("%q is not a hex digit", c)
		}
	}
	return ""
}

// traceStateProblem returns what is wrong with a tracestate, or "": the
// Level 1 grammar (list-members separated by commas with optional spaces
// and tabs around them; a member is empty or key=value, the key a
// simple-key or tenant@system, the value 1 to 256 printable ASCII bytes
// but ',' and '=', not ending in a space), each key at most once, at most
// MaxTraceStateMembers key=value members (empty ones do not count) and
// MaxTraceStateBytes bytes.
func traceStateProblem(ts string) string {
	if len(ts) > MaxTraceStateBytes {
		return fmt.Sprintf("%d bytes, more than %d", len(ts), MaxTraceStateBytes)
	}
	var keys [MaxTraceStateMembers]string
	n := 0
	for i, rest, more := 0, ts, true; more; i++ {
		var m string
		m, rest, more = strings.Cut(rest, ",")
		m = strings.Trim(m, " \t")
		if m == "" {
			continue
		}
		key, value, ok := strings.Cut(m, "=")
		if !ok {
			return fmt.Sprintf("list-member %d %.40q has no '='", i, m)
		}
		if why := traceStateKeyProblem(key); why != "" {
			return fmt.Sprintf("list-member %d: key %.40q: %s", i, key, why)
		}
		if why := traceStateValueProblem(value); why != "" {
			return fmt.Sprintf("list-member %d: value %.40q: %s", i, value, why)
		}
		for _, k := range keys[:n] {
			if k == key {
				return fmt.Sprintf("key %q appears twice", key)
			}
		}
		if n == MaxTraceStateMembers {
			return fmt.Sprintf("more than %d list-members", MaxTraceStateMembers)
		}
		keys[n] = key
		n++
	}
	return ""
}

// traceStateKeyProblem checks a key: simple-key = lcalpha 0*255(keychar),
// or multi-tenant-key = (lcalpha / DIGIT) 0*240(keychar) "@" lcalpha
// 0*13(keychar), keychar = lcalpha / DIGIT / "_" / "-" / "*" / "/".
func traceStateKeyProblem(key string) string {
	tenant, system, multi := strings.Cut(key, "@")
	if !multi {
		if why := keyPartProblem(key, 256, false); why != "" {
			return why
		}
		return ""
	}
	if why := keyPartProblem(tenant, 241, true); why != "" {
		return "tenant-id " + why
	}
	if why := keyPartProblem(system, 14, false); why != "" {
		return "system-id " + why
	}
	return ""
}

// keyPartProblem checks one part of a key: 1 to max keychars, the first
// a lower-case letter (or a digit, with digitFirst).
func keyPartProblem(s string, max int, digitFirst bool) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > max:
		return fmt.Sprintf("is %d bytes, more than %d", len(s), max)
	case !('a' <= s[0] && s[0] <= 'z' || digitFirst && '0' <= s[0] && s[0] <= '9'):
		if digitFirst {
			return fmt.Sprintf("begins with %q, not a lower-case letter or digit", s[0])
		}
		return fmt.Sprintf("begins with %q, not a lower-case letter", s[0])
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_', c == '-', c == '*', c == '/':
		default:
			return fmt.Sprintf("has %q, not a-z 0-9 _ - * /", c)
		}
	}
	return ""
}

// traceStateValueProblem checks a value: 0*255(chr) nblk-chr, chr = ' '
// or nblk-chr, nblk-chr = 0x21-0x7E but ',' and '='.
func traceStateValueProblem(v string) string {
	switch {
	case v == "":
		return "is empty"
	case len(v) > 256:
		return fmt.Sprintf("is %d bytes, more than 256", len(v))
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return fmt.Sprintf("has %q, not printable ASCII other than ',' and '='", c)
		}
	}
	return ""
}

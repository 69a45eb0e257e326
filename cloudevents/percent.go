package cloudevents

import (
	"net/http"
	"strings"
)

// The HTTP protocol binding (1.0.2, section 3.1.3.2) carries each context
// attribute of binary mode in a "ce-" header, percent-encoded: space,
// '"', '%' and every byte outside printable ASCII become '%' and two
// hexadecimal digits, and a receiver decodes them once. The SDK does
// neither, so the Sender encodes the headers it built and the Handler
// decodes them before the SDK reads the request.

// percentEncode returns v with the bytes the binding names encoded.
func percentEncode(v string) string {
	n := 0
	for i := 0; i < len(v); i++ {
		if mustEncode(v[i]) {
			n++
		}
	}
	if n == 0 {
		return v
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(v) + 2*n)
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !mustEncode(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func mustEncode(c byte) bool { return c <= ' ' || c == '"' || c == '%' || c >= 0x7f }

// percentDecode decodes each '%' and two hexadecimal digits of v once. A
// '%' not followed by two hexadecimal digits stays as it is: a producer
// that does not encode (the SDK) may send "50% off".
func percentDecode(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) && unhex(v[i+1]) >= 0 && unhex(v[i+2]) >= 0 {
			b = append(b, byte(unhex(v[i+1])<<4|unhex(v[i+2])))
			i += 2
			continue
		}
		b = append(b, v[i])
	}
	return string(b)
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// ceHeaders applies f to the value of every "ce-" header of h.
func ceHeaders(h http.Header, f func(string) string) {
	for k, vs := range h {
		if len(k) > 3 && strings.EqualFold(k[:3], "ce-") {
			for i, v := range vs {
				vs[i] = f(v)
			}
		}
	}
}

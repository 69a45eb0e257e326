package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Strings that come from the network — event types, attribute names,
// media types, switch, session and gateway names, filters, errors a
// switch sends — reach a terminal only escaped: a control character (ESC
// of an escape sequence, CR, NUL, any other C0 or C1 code) or invalid
// UTF-8 would otherwise act on the terminal, or rewrite what the line
// shows. JSON output is escaped by encoding/json.

// quoteIfNeeded returns s as it is when every rune of it prints (Unicode
// letters, marks, numbers, punctuation, symbols and the ASCII space), and
// otherwise s quoted as strconv.Quote quotes it ("\x1b[2J").
func quoteIfNeeded(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// badName says what is wrong with a name given to serve (a switch, a
// place, a peer): "" when nothing, else "is empty" or that it holds a
// character that does not print.
func badName(name string) (string, bool) {
	if name == "" {
		return "is empty", true
	}
	if quoteIfNeeded(name) != name {
		return "holds a character that does not print (a control character or invalid UTF-8)", true
	}
	return "", false
}

// escaper is a Writer that escapes, in what is written to w, each control
// character but newline and tab, and each byte of invalid UTF-8, as \xNN
// (\u0080… for C1): the command's standard error, whose messages may
// quote a peer.
type escaper struct{ w io.Writer }

func (e escaper) Write(p []byte) (int, error) {
	clean := true
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		if (r == utf8.RuneError && size <= 1) || (unicode.IsControl(r) && r != '\n' && r != '\t') {
			clean = false
			break
		}
		i += size
	}
	if clean {
		return e.w.Write(p)
	}
	out := make([]byte, 0, len(p)+16)
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			out = fmt.Appendf(out, `\x%02x`, p[i])
		case r == '\n' || r == '\t':
			out = append(out, byte(r))
		case r < 0x80 && unicode.IsControl(r):
			out = fmt.Appendf(out, `\x%02x`, r)
		case unicode.IsControl(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, p[i:i+size]...)
		}
		i += size
	}
	if _, err := e.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// errorf writes a message of the command on w (its standard error) as
// one line: a newline inside it, which a peer's error text may hold to
// forge a line of its own, is written as \n; the escaper that w is takes care
// of the other control characters.
func errorf(w io.Writer, format string, args ...any) {
	msg, nl := strings.CutSuffix(fmt.Sprintf(format, args...), "\n")
	msg = strings.ReplaceAll(msg, "\n", `\n`)
	if nl {
		msg += "\n"
	}
	io.WriteString(w, msg)
}

// jsonForTerminal returns the JSON text b with what encoding/json leaves
// raw in strings and a terminal may act on — DEL and the C1 controls
// (U+0080–U+009F; U+009B is CSI) — escaped as \u007f, \u0080…, and each
// byte of invalid UTF-8 (which json.RawMessage passes through) as
// \ufffd. The JSON means the same, but for the invalid bytes.
func jsonForTerminal(b []byte) []byte {
	clean := true
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if (r == utf8.RuneError && size <= 1) || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			clean = false
			break
		}
		i += size
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			out = append(out, `\ufffd`...)
		case r == 0x7f || (r >= 0x80 && r <= 0x9f):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

package wire

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors. Every error from Encode, EncodeLimits and Decode is a
// *FrameError that wraps exactly one of them; test with errors.Is.
var (
	// ErrMalformed reports a frame that does not follow the grammar
	// (truncated, overlong or non-minimal varint, a length beyond the
	// frame's end, unknown kind, invalid UTF-8 in a text field, an
	// invalid value kind, a number out of its field's range, trailing
	// bytes), or a message that would encode to one (a zero Value, invalid
	// UTF-8, a nil message).
	ErrMalformed = errors.New("wire: malformed frame")
	// ErrTooLarge reports a well-formed frame or message that exceeds a
	// Limits bound: the frame's length, a string's or the data's length,
	// or a count of attributes, matches or deliveries.
	ErrTooLarge = errors.New("wire: frame exceeds a limit")
	// ErrVersion reports a frame whose version byte is not FrameVersion.
	// A peer refuses it; it may still answer with an Error frame of its
	// own version before closing the link.
	ErrVersion = errors.New("wire: unsupported frame version")
)

// FrameError describes why a frame could not be decoded, or a message
// encoded: which field, at which byte offset of the frame, and why. It
// unwraps to ErrMalformed, ErrTooLarge or ErrVersion.
type FrameError struct {
	// Encoding is true for an error from Encode or EncodeLimits, false
	// for one from Decode.
	Encoding bool
	// Kind is the frame's message type, 0 when not known yet.
	Kind Kind
	// Field names the field, e.g. "event attribute 3 name".
	Field string
	// Offset is the byte offset in the frame where the field starts (for
	// Encode, where it would have started).
	Offset int
	// Reason says what is wrong, e.g. "length 900 exceeds remaining 12
	// bytes".
	Reason string
	// Err is the sentinel: ErrMalformed, ErrTooLarge or ErrVersion.
	Err error
}

// Error formats e as "wire: malformed Publish frame: event attribute 3
// name: length 900 exceeds remaining 12 bytes at offset 57".
func (e *FrameError) Error() string {
	frame := "frame"
	if e.Kind != 0 {
		frame = e.Kind.String() + " frame"
	}
	var what string
	switch {
	case e.Encoding:
		what = "cannot encode " + frame
	case e.Err == ErrTooLarge:
		what = "oversized " + frame
	case e.Err == ErrVersion:
		what = frame + " of an unsupported version"
	default:
		what = "malformed " + frame
	}
	return "wire: " + what + ": " + e.Field + ": " + e.Reason + " at offset " + strconv.Itoa(e.Offset)
}

// Unwrap returns the sentinel.
func (e *FrameError) Unwrap() error { return e.Err }

// path is the stack of enclosing fields ("delivery 2", "event",
// "attribute 3") that error messages name. It never allocates until an
// error is formatted.
type path struct {
	elems [6]pathElem
	n     int
}

type pathElem struct {
	name string
	idx  int // <0: no index
}

func (p *path) push(name string, idx int) {
	if p.n < len(p.elems) {
		p.elems[p.n] = pathElem{name, idx}
	}
	p.n++
}

func (p *path) pop() { p.n-- }

// field returns the path with leaf appended, space-separated.
func (p *path) field(leaf string) string {
	var b strings.Builder
	for i := 0; i < p.n && i < len(p.elems); i++ {
		el := p.elems[i]
		b.WriteString(el.name)
		if el.idx >= 0 {
			b.WriteByte(' ')
			b.WriteString(strconv.Itoa(el.idx))
		}
		b.WriteByte(' ')
	}
	b.WriteString(leaf)
	return b.String()
}

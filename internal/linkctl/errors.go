package linkctl

import (
	"errors"
	"strconv"
)

// ErrMalformed reports a control message that does not follow the body
// grammar: an empty body, an unknown kind, a truncated, overlong or
// non-minimal varint, a length or count beyond the body's end, invalid
// UTF-8 in a text field, a bool byte other than 0 or 1, an overlay ID
// shorter than 16 bytes, a number out of its field's range, a list over
// MaxNames entries, a NUL or newline in a name, trailing bytes; or a message that would encode to one (a nil
// message among them). Every such error from Encode and Decode is a
// *MessageError that wraps it; test with errors.Is.
var ErrMalformed = errors.New("linkctl: malformed control message")

// MessageError describes why a control message could not be decoded or
// encoded: which message, which field, at which byte offset of the body,
// and why. It unwraps to ErrMalformed.
type MessageError struct {
	// Encoding is true for an error from Encode, false for one from
	// Decode.
	Encoding bool
	// Kind is the message's kind, 0 when not known (an empty body, an
	// unknown kind, a nil Message).
	Kind Kind
	// Field names the field, e.g. "places 2" (the third entry of Places).
	Field string
	// Offset is the byte offset in the body (the kind byte is at 0) where
	// the field starts; for Encode, where it would have started.
	Offset int
	// Reason says what is wrong, e.g. "contains a newline".
	Reason string
}

// Error formats e as "linkctl: malformed register message: places 2:
// contains a newline at offset 14", or "linkctl: cannot encode register
// message: …" for an error from Encode.
func (e *MessageError) Error() string {
	msg := "message"
	if e.Kind != 0 {
		msg = e.Kind.String() + " message"
	}
	what := "malformed " + msg
	if e.Encoding {
		what = "cannot encode " + msg
	}
	return "linkctl: " + what + ": " + e.Field + ": " + e.Reason + " at offset " + strconv.Itoa(e.Offset)
}

// Unwrap returns ErrMalformed.
func (e *MessageError) Unwrap() error { return ErrMalformed }

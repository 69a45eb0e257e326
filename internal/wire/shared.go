package wire

import "fmt"

// SharedDeliver encodes one event once for many receivers: each receiver's
// Deliver frame is the same event bytes followed by its own matches. A
// SharedDeliver is immutable after NewSharedDeliver and safe for
// concurrent use.
type SharedDeliver struct {
	prefix []byte // version, kind, event; no match count
	lim    Limits
}

// NewSharedDeliver encodes ev for Deliver frames within lim. Errors are
// those of EncodeLimits for a Deliver with ev.
func NewSharedDeliver(ev *Event, lim Limits) (*SharedDeliver, error) {
	f, err := EncodeLimits(nil, &Deliver{Event: *ev}, lim)
	if err != nil {
		return nil, err
	}
	// The frame ends with the match count 0, one byte.
	return &SharedDeliver{prefix: f[:len(f)-1], lim: lim.norm()}, nil
}

// Frame returns a new Deliver frame: the shared event and matched. It is
// byte for byte what Encode gives for Deliver{Event: ev, Matched:
// matched}, and refuses what it would refuse (a frame over MaxFrameBytes,
// too many matches).
func (s *SharedDeliver) Frame(matched []Match) ([]byte, error) {
	e := encoder{buf: append(make([]byte, 0, len(s.prefix)+1+len(matched)*12), s.prefix...), lim: s.lim, kind: KindDeliver}
	e.matches(matched)
	if e.err == nil && len(e.buf) > e.lim.MaxFrameBytes {
		e.fail("frame", ErrTooLarge, fmt.Sprintf("length %d exceeds limit %d", len(e.buf), e.lim.MaxFrameBytes))
	}
	if e.err != nil {
		return nil, e.err
	}
	return e.buf, nil
}

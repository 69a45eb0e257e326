package sion

import (
	"context"
	"errors"
	"fmt"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/wire"
)

// protocolVersion is the session protocol's version, sent in Hello and
// Welcome. 2: remote sessions resume (Hello.Resume, Welcome.Token, the
// numbered stream confirmed by Received).
const protocolVersion = 2

// Error codes of wire.Error frames: which sentinel the error wraps.
const (
	codeInternal uint16 = iota + 1
	codeInvalidEvent
	codeUnknownEventType
	codeInvalidFilter
	codeNotAdmitted
	codeClosed
	codeInvalidConfig
	codeProtocol
	codeDeadline
	codeCanceled
	codeLinkRefused
	codeNotGranted
	codeSessionExpired
	codeNotAdvertised
)

var codeSentinels = map[uint16]error{
	codeInvalidEvent:     ErrInvalidEvent,
	codeUnknownEventType: ErrUnknownEventType,
	codeInvalidFilter:    ErrInvalidFilter,
	codeNotAdmitted:      ErrNotAdmitted,
	codeClosed:           ErrClosed,
	codeInvalidConfig:    ErrInvalidConfig,
	codeProtocol:         ErrProtocol,
	codeDeadline:         context.DeadlineExceeded,
	codeCanceled:         context.Canceled,
	codeLinkRefused:      ErrLinkRefused,
	codeNotGranted:       ErrNotGranted,
	codeSessionExpired:   ErrSessionExpired,
	codeNotAdvertised:    ErrNotAdvertised,
}

// errorCode returns the code of the sentinel err wraps.
func errorCode(err error) uint16 {
	for _, c := range []uint16{codeUnknownEventType, codeInvalidEvent, codeInvalidFilter, codeNotAdmitted, codeClosed, codeInvalidConfig, codeProtocol, codeNotGranted, codeNotAdvertised, codeLinkRefused, codeSessionExpired, codeDeadline, codeCanceled} {
		if errors.Is(err, codeSentinels[c]) {
			return c
		}
	}
	return codeInternal
}

// remoteError is an error a switch reported over a link: its text is the
// switch's, and it wraps the sentinel its code names, so errors.Is works
// on a remote session as on a local one.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

func fromWireError(m *wire.Error) error {
	return &remoteError{msg: m.Message, sentinel: codeSentinels[m.Code]}
}

func toWireEvent(e *Event) wire.Event {
	w := wire.Event{
		ID: e.ID, Type: e.Type, Attrs: e.Attrs, ContentType: e.ContentType, Data: e.Data,
		TTL: clamp32(e.Control.TTL), Hops: clamp32(e.Control.Hops),
		PlaceTTL: clamp32(e.Control.PlaceTTL), PlaceHops: clamp32(e.Control.PlaceHops),
		Origin: e.Control.Origin, Place: e.Control.Place, Path: e.Control.Path,
		TraceParent: e.TraceParent, TraceState: e.TraceState,
	}
	if e.Condition != nil {
		w.Condition = e.Condition.String()
	}
	return w
}

func clamp32(n int) int32 { return int32(max(-1<<31, min(1<<31-1, n))) }

// fromWireEvent converts an event that came over the wire — a shared or
// overlay link, a gateway, a remote session in either direction, a pull
// reply — and checks what the wire codec does not read: the patronage
// condition compiles and the trace context follows W3C Trace Context
// (checkTraceContext), so that no peer puts into this process, and from
// it into the adapters' headers, what Publish would refuse. Errors wrap
// ErrInvalidEvent; each caller drops such an event as it drops any
// invalid event (a link counts it in LinkInfo.Refused and stays up).
func fromWireEvent(w *wire.Event) (*Event, error) {
	if err := checkTraceContext(w.TraceParent, w.TraceState); err != nil {
		return nil, err
	}
	e := &Event{
		ID: w.ID, Type: w.Type, Attrs: w.Attrs, ContentType: w.ContentType, Data: w.Data,
		TraceParent: w.TraceParent, TraceState: w.TraceState,
		Control: Control{
			TTL: int(w.TTL), Hops: int(w.Hops), PlaceTTL: int(w.PlaceTTL), PlaceHops: int(w.PlaceHops),
			Origin: w.Origin, Place: w.Place, Path: w.Path,
		},
	}
	if w.Condition != "" {
		c, err := filter.CompileCondition(w.Condition)
		if err != nil {
			return nil, fmt.Errorf("%w: patronage condition: %w", ErrInvalidEvent, err)
		}
		e.Condition = c
	}
	return e, nil
}

func toWireMatches(ms []Match) []wire.Match {
	out := make([]wire.Match, len(ms))
	for i, m := range ms {
		out[i] = wire.Match{Sub: m.Subscription, Score: m.Score}
	}
	return out
}

func fromWireMatches(ms []wire.Match) []Match {
	out := make([]Match, len(ms))
	for i, m := range ms {
		out[i] = Match{Subscription: m.Sub, Score: m.Score}
	}
	return out
}

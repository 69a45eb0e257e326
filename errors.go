package sion

import "errors"

// Sentinel errors of the root package. Errors returned by sion wrap them,
// with the detail (which attribute, which subscription, which limit) in
// the message: test them with errors.Is.
var (
	// ErrClosed is returned by calls on a Switch, Session or Subscription
	// that has been closed or cancelled, and by calls a Close unblocked.
	ErrClosed = errors.New("sion: closed")

	// ErrUnknownEventType is returned by Publish for an event type the
	// place's ontology does not know (unless the place accepts unknown
	// types), and by Subscribe for a filter on such a type.
	ErrUnknownEventType = errors.New("sion: unknown event type")

	// ErrInvalidEvent is returned by Publish for an event the place
	// refuses: an attribute the type's vocabulary does not have, a value of
	// the wrong kind, NaN or ±Inf in a number, a repeated attribute, or a
	// payload that is too large or does not parse as its content type.
	ErrInvalidEvent = errors.New("sion: invalid event")

	// ErrInvalidFilter is returned by Subscribe for a filter that does not
	// compile or does not fit the place's ontology; it also wraps the
	// filter package's error (filter.ErrSyntax or filter.ErrInvalid).
	ErrInvalidFilter = errors.New("sion: invalid filter")

	// ErrNotAdmitted is returned by Open when the place's admission hook
	// refuses the session (S1 security assurance unit).
	ErrNotAdmitted = errors.New("sion: not admitted")

	// ErrInvalidConfig is returned by constructors and Open for a
	// configuration they cannot use; the message names the field.
	ErrInvalidConfig = errors.New("sion: invalid configuration")

	// ErrProtocol is returned when a link (see Dial and Switch.Serve)
	// carries a frame that does not decode or is not expected; that link
	// is closed, nothing else is harmed.
	ErrProtocol = errors.New("sion: protocol error")

	// ErrLinkRefused is returned by Switch.Link when the switch has a
	// parent link already or the peer refuses the request (S1 tree rule,
	// another place); the message says which.
	ErrLinkRefused = errors.New("sion: shared link refused")

	// ErrNotGranted is returned by Subscribe on a switch with shared
	// links when the subscription contract (S2) is not granted: a switch
	// within the filter's TTL did not acknowledge the filter within the
	// place's ContractTimeout, refused it, or ctx ended. Whatever was
	// installed is rolled back. A remote session's Subscribe also fails
	// with it when the session holds its switch's
	// SwitchConfig.MaxSessionFilters already.
	ErrNotGranted = errors.New("sion: subscription not granted")

	// ErrSessionExpired is returned by a call on a remote session whose
	// connection failed while the request was on its way and whose
	// switch no longer held the session when it reconnected (its
	// retention had passed, or another switch answered): the request may
	// or may not have taken effect. The session itself goes on, opened
	// anew (see ReconnectPolicy).
	ErrSessionExpired = errors.New("sion: session expired")

	// ErrNoQueue is returned by Subscription.Next for a subscription
	// whose events go elsewhere: to its handler (WithHandler) or to its
	// session's spool (WithLookIn, read with Session.Pull).
	ErrNoQueue = errors.New("sion: subscription has no queue to read")
)

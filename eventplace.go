package sion

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sion-go/sion/ontology"
)

// MaxNameBytes bounds the names of places and switches, which every event
// carries in its control information.
const MaxNameBytes = 256

// Defaults of PlaceConfig.
const (
	DefaultTTL             = 16        // hops an event or filter may travel inside a place
	DefaultMaxPayloadBytes = 960 << 10 // bytes: with its attributes, an event fits a shared link's 1 MiB frame
	DefaultContractTimeout = 10 * time.Second
)

// PlaceConfig configures an EventPlace. The zero value of every field but
// Name and Ontology means the default.
type PlaceConfig struct {
	// Name identifies the place; required, at most MaxNameBytes.
	Name string
	// Ontology holds the place's event types; required.
	Ontology *ontology.Ontology
	// TTL is the hop limit events and filters get inside the place when
	// their publisher (Control.TTL) or subscriber (WithTTL) sets none or
	// more; 0 means DefaultTTL; at most 65535.
	TTL int
	// Routing is how the place's switches propagate interest over their
	// links: RouteByFilter (nil means it), RouteByEventType or
	// RouteUnconditional (S1 routing modes); see Routing.
	Routing Routing
	// ContractTimeout bounds how long Subscribe waits for the switches
	// within the filter's TTL to acknowledge it (S2 subscription
	// contract) before refusing it with ErrNotGranted; 0 means
	// DefaultContractTimeout.
	ContractTimeout time.Duration
	// SharedKey, when set, admits to the place's switches only the
	// sessions and shared links that prove they know it (S1 security
	// assurance unit): a challenge–response with HMAC-SHA256 over fresh
	// nonces, so the key never travels, and the switch proves it knows the
	// key too. Remote sessions give it in SessionConfig.SharedKey; a
	// switch's shared links use its place's. Local sessions (Switch.Open)
	// are inside the process and are not asked. A refused entity gets an
	// error wrapping ErrNotAdmitted, and the refusal is logged. nil means
	// no key; a key shorter than MinSharedKeyBytes (an empty one too, as
	// from an unset environment variable) is refused by NewEventPlace
	// with ErrInvalidConfig. Use 32 random bytes.
	SharedKey []byte
	// AcceptUnknownTypes lets Publish take events whose type the ontology
	// does not know; they match only filters on the wildcard type "*".
	AcceptUnknownTypes bool
	// MaxPayloadBytes caps an event's payload, and separately the bytes
	// of its attribute names and string values; 0 means
	// DefaultMaxPayloadBytes. Whatever it says, Publish refuses an event
	// that could not cross a shared link (ErrInvalidEvent): more than 256
	// attributes, a name or string value over 64 KiB, or more than about
	// 1 MiB in all — so an event a switch accepts is never lost on the
	// way to another switch for its size (a link configured with a
	// smaller frame still drops it, counted in LinkInfo.Dropped and
	// logged).
	MaxPayloadBytes int
	// Admit, when set, is asked before a session opens and before a
	// shared link is accepted; a non-nil error refuses it, Open (or Dial,
	// or Link) returns an error wrapping ErrNotAdmitted and that error,
	// and the refusal is logged at level Warn. It may be called from many
	// goroutines at once.
	Admit func(ctx context.Context, req AdmissionRequest) error
	// Federation, when set, approves federation requests from other
	// places (S1 SI-GW, see Switch.Federate): nil error approves, and the
	// gateway opens; an error refuses it, and Federate returns an error
	// wrapping ErrNotAdmitted and this one. nil refuses every request: a
	// place is federated only with its consent. Admission (SharedKey,
	// Admit with AdmissionRequest.Gateway set) is checked first. It may
	// be called from many goroutines at once.
	Federation func(ctx context.Context, req FederationRequest) error
}

// AdmissionRequest is what an admission hook is told about an entity that
// asks to open a session in a place.
type AdmissionRequest struct {
	Place   string // the place's name
	Switch  string // the switch the session opens on
	Session string // the session's name, as its SessionConfig gives it; for a link, the requesting switch's name
	// Remote is the address of the entity's end of the connection for a
	// remote session or a link; nil for a local session (Switch.Open).
	Remote net.Addr
	// TLS is the connection's TLS state for a remote session or link over
	// a TLS transport (transport/tcp with Config.TLS): with mutual TLS,
	// TLS.PeerCertificates[0] is the entity's verified certificate. Nil
	// otherwise.
	TLS *tls.ConnectionState
	// Link reports a shared-link establishment request (Switch.Link).
	// A router opens a session like any entity and then asks for the
	// link, so the hook is asked twice for a link: once for its session
	// (Link false) and once for the link.
	Link bool
	// Gateway reports a federation request (Switch.Federate): Session is
	// the gateway's name; PlaceConfig.Federation is asked after Admit.
	Gateway bool
}

// EventPlace is a scope in which events spread, with one ontology (S1
// "event place"): its name, ontology, defaults and admission hook. Several
// switches may share one place. An EventPlace is immutable after
// NewEventPlace and safe for concurrent use.
type EventPlace struct {
	cfg PlaceConfig
}

// NewEventPlace validates cfg, fills in defaults and returns the place. A
// missing name or ontology, or a negative TTL or payload limit, returns an error wrapping ErrInvalidConfig.
func NewEventPlace(cfg PlaceConfig) (*EventPlace, error) {
	if err := checkName("PlaceConfig.Name", cfg.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	switch {
	case cfg.Ontology == nil:
		return nil, fmt.Errorf("%w: PlaceConfig.Ontology is nil", ErrInvalidConfig)
	case cfg.TTL < 0:
		return nil, fmt.Errorf("%w: PlaceConfig.TTL is %d, below 0", ErrInvalidConfig, cfg.TTL)
	case cfg.MaxPayloadBytes < 0:
		return nil, fmt.Errorf("%w: PlaceConfig.MaxPayloadBytes is %d, below 0", ErrInvalidConfig, cfg.MaxPayloadBytes)
	case cfg.TTL > 65535:
		return nil, fmt.Errorf("%w: PlaceConfig.TTL is %d, above 65535", ErrInvalidConfig, cfg.TTL)
	case checkKey("PlaceConfig.SharedKey", cfg.SharedKey) != nil:
		return nil, checkKey("PlaceConfig.SharedKey", cfg.SharedKey)
	case cfg.ContractTimeout < 0:
		return nil, fmt.Errorf("%w: PlaceConfig.ContractTimeout is %v, below 0", ErrInvalidConfig, cfg.ContractTimeout)
	}
	if cfg.Routing == nil {
		cfg.Routing = RouteByFilter
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.ContractTimeout == 0 {
		cfg.ContractTimeout = DefaultContractTimeout
	}
	if cfg.MaxPayloadBytes == 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	return &EventPlace{cfg: cfg}, nil
}

// Name returns the place's name.
func (p *EventPlace) Name() string { return p.cfg.Name }

// Ontology returns the place's ontology.
func (p *EventPlace) Ontology() *ontology.Ontology { return p.cfg.Ontology }

// Config returns the place's configuration with defaults filled in.
func (p *EventPlace) Config() PlaceConfig { return p.cfg }

// checkName refuses a name of a place, switch or entity that is empty,
// over MaxNameBytes, or not UTF-8 text without NUL and newline (names
// travel in frames and logs, and newline separates them in route keys).
func checkName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > MaxNameBytes:
		return fmt.Errorf("%s has %d bytes, at most %d", what, len(s), MaxNameBytes)
	case !utf8.ValidString(s) || strings.ContainsAny(s, "\x00\n"):
		return fmt.Errorf("%s %q is not UTF-8 text without NUL and newline", what, s)
	}
	return nil
}

package sion

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/wire"
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
	// Covering, when set, keeps a switch from registering at the peer of
	// a shared link a key (a filter, with the places its interest came
	// through) that a key it has registered over that link already
	// covers: the same places, a TTL at the peer at least as large, and
	// every event the new filter matches matched by the registered one
	// (filter.Covers over the place's ontology: sound, not complete — a
	// cover it does not recognise costs a register, never an event). The
	// covered key is counted under the covering one: no Register is sent,
	// and its subscriptions' contracts (S2) wait on the covering key's
	// acknowledgement. When the covering key is released, each key
	// counted under it goes under another registered key that covers it,
	// or is registered itself, before the Release in the link's ordered
	// stream (make before break: no subscription misses an event); so
	// does a covered key whose TTL must rise above its cover's. A key
	// registered before a broader one arrives stays registered: nothing
	// is released in favour of a broader key. Switch.Routes shows what
	// covers what (RouteInfo.CoveredBy); LinkInfo.Routes counts only the
	// keys registered. false (the default) registers every key.
	//
	// It applies over the place's shared links, with each S1 routing (by
	// filter: a subscription's filter under a broader one; by event type:
	// a subtype's key under its supertype's), and not over gateways
	// (their keys are converted) nor S3 overlay links (an event crosses
	// an overlay link only under a proxy filter of its own event type).
	// Cost, per key registered over a link, and per key re-homed when its
	// cover goes: two map lookups per ancestor of its event type, and at
	// most 64 candidates examined, each a TTL test and a filter.Covers
	// call (past them the key is registered); each key's filter is
	// compiled once per link. Events pay nothing. This follows the
	// "natural next step" of S1's filter propagation (DESIGN.md
	// "Network"; covering is beyond S1). Every switch of a place should
	// say the same; each link decides alone, so switches that differ
	// still deliver exactly.
	Covering bool
	// RequireAdvertisements makes every session declare what it publishes
	// (Session.Advertise) before it publishes it: Publish refuses an event
	// that none of its session's advertisements covers with an error
	// wrapping ErrNotAdvertised, as a place routed by rendezvous always
	// does (S3). Under RouteByFilter and RouteByEventType it also prunes
	// S1 propagation (DESIGN.md "Beyond one tree"): the switches tell
	// each other, over the shared links of the place's tree, which event
	// types and attribute details are advertised behind each link
	// (reference counted per link, at most 4096 entries from one link's
	// peer), and a subscription is registered over a link only when an
	// advertisement behind it may produce events its filter's type
	// matches — the advertised type and the filter's are one, one is a
	// subtype of the other, or they share a subtype. Filters on sion's
	// reserved types (discovery, whose publishers do not advertise) are
	// never pruned, and a gateway counts as advertising every type, since
	// the events of other places enter through it. Advertise then returns
	// once every switch has registered toward the publisher the
	// subscriptions within their TTL that may match (S2 contract), so an
	// event published after it returns reaches every subscription whose
	// Subscribe returned before. Under RouteUnconditional only Publish is
	// checked. false, the default: Publish checks no advertisement, and
	// interest spreads as far as its TTL allows. Advertisements cost
	// control messages of their own (LinkInfo.ControlSent); the saving is
	// in the subscriptions that no longer travel toward switches without
	// a publisher of their types.
	RequireAdvertisements bool
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
	// Agent reports an agent's request to manage the switch (S2, a place
	// routed by RouteManaged): Session is the agent's name. The hook is
	// asked twice, as for a link: for the agent's session and for the
	// request.
	Agent bool
}

// EventPlace is a scope in which events spread, with one ontology (S1
// "event place"): its name, ontology, defaults and admission hook. Several
// switches may share one place. An EventPlace is immutable after
// NewEventPlace and safe for concurrent use.
type EventPlace struct {
	cfg  PlaceConfig
	path []string // []string{cfg.Name}, len = cap: the Control.Path of every event admitted here, shared like the events themselves (never modified in place; an append copies it)
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
	if c, ok := cfg.Routing.(interface {
		check(*ontology.Ontology) error
	}); ok {
		if err := c.check(cfg.Ontology); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
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
	return &EventPlace{cfg: cfg, path: []string{cfg.Name}}, nil
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

// Admission of events: every event enters a place through admit, with the
// rule of where it comes from — what was checked before it arrived, and
// which reserved types may enter. A session's Publish, an event forwarded
// over a shared link, one converted by a gateway and the switch's own
// routed control (discovery) each name their rule; there is one
// implementation.

// admitRule says how admit treats an event, by where it comes from.
type admitRule struct {
	// parsePayload checks that a JSON or XML payload parses. An event
	// that comes from another switch (over a shared link or a gateway)
	// was parsed at the switch it was published at.
	parsePayload bool
	// routed admits the reserved types routed like user events
	// (ontology.IsRouted: discovery), which sion itself publishes; every
	// other reserved type is refused.
	routed bool
	// routedOnly admits those types alone.
	routedOnly bool
	// keepID keeps the ID the event carries (zero: the switch gives it
	// one): a publisher's own ID, for an event carried from elsewhere.
	keepID bool
	// owned: the event is the caller's own copy, decoded from a frame,
	// which nothing else holds: admit validates and returns it in place,
	// keeping its Data and Attrs slices instead of copying them, and
	// leaves Control.Path nil — the caller sets the control information
	// the event carried (readmit).
	owned bool
}

// The rules, by where the event comes from.
var (
	// admitPublished: a session's Publish. The payload is parsed here;
	// every reserved type is refused, so that no entity forges control
	// traffic.
	admitPublished = admitRule{parsePayload: true, keepID: true}
	// admitForwarded: an event that arrived over a shared link of the
	// place. Its payload was parsed at its origin; the routed reserved
	// types (discovery) travel like user events.
	admitForwarded = admitRule{routed: true, owned: true}
	// admitConverted: an event that entered the place through a gateway,
	// converted by its Mapping. Its payload was parsed at its origin;
	// reserved types are refused (gateways carry no discovery).
	admitConverted = admitRule{}
	// admitControl: a routed reserved event the switch itself publishes
	// (discovery and its answers, for Entity); only those types.
	admitControl = admitRule{parsePayload: true, routed: true, routedOnly: true}
)

// admit validates ev against the place by rule r and returns the copy the
// switch keeps (with r.owned, ev itself, changed in place): the type and
// attribute names canonical, attribute values of the vocabulary's kinds
// (an int attribute given as an integral float, or a float attribute
// given as an int that float64 holds exactly, is converted), attributes
// sorted by name, control information from the place's defaults (TTL and
// PlaceTTL lowered where ev asks), the trace context checked and copied
// as it is. Errors wrap ErrUnknownEventType or ErrInvalidEvent and name
// the attribute or field.
func (p *EventPlace) admit(ev *Event, r admitRule) (*Event, error) {
	if ev == nil {
		return nil, fmt.Errorf("%w: nil event", ErrInvalidEvent)
	}
	if r.owned { // validate ev in place, taking over its slices
		in := *ev
		*ev = Event{Data: in.Data, Attrs: in.Attrs[:0]}
		return p.admitInto(ev, &in, r)
	}
	return p.admitInto(&Event{Control: Control{Path: p.path}}, ev, r)
}

// admitInto is admit, into out: an empty event, but for the Path of its
// control information, and, when r.owned, ev's Data and Attrs[:0].
func (p *EventPlace) admitInto(out, ev *Event, r admitRule) (*Event, error) {
	o := p.cfg.Ontology
	if err := checkTraceContext(ev.TraceParent, ev.TraceState); err != nil {
		return nil, err
	}
	out.Type, out.ContentType, out.Condition = ev.Type, ev.ContentType, ev.Condition
	out.TraceParent, out.TraceState = ev.TraceParent, ev.TraceState
	out.Control.TTL, out.Control.Place = p.cfg.TTL, p.cfg.Name
	if r.keepID {
		out.ID = ev.ID
	}
	if ev.Control.TTL > 0 && ev.Control.TTL < out.Control.TTL {
		out.Control.TTL = ev.Control.TTL
	}
	out.Control.PlaceTTL = DefaultTTL
	if ev.Control.PlaceTTL > 0 && ev.Control.PlaceTTL < out.Control.PlaceTTL {
		out.Control.PlaceTTL = ev.Control.PlaceTTL
	}
	t, known := o.Lookup(ev.Type)
	switch {
	case ontology.IsReserved(ev.Type) && !(known && r.routed && ontology.IsRouted(t.Name)):
		// Known or not (a link's control is not an event type): the
		// prefix is sion's, whatever AcceptUnknownTypes says.
		return nil, fmt.Errorf("%w: event type %q is reserved for sion's control traffic", ErrInvalidEvent, ev.Type)
	case r.routedOnly && !(known && ontology.IsRouted(t.Name)):
		return nil, fmt.Errorf("sion: control event of type %q, which is not routed (ontology.IsRouted)", ev.Type)
	case known:
		out.Type = t.Name
	case ev.Type == "" || ev.Type == filter.AnyType:
		return nil, fmt.Errorf("%w %q: an event needs a concrete type", ErrUnknownEventType, ev.Type)
	case !p.cfg.AcceptUnknownTypes:
		return nil, fmt.Errorf("%w %q in place %q", ErrUnknownEventType, ev.Type, p.cfg.Name)
	}
	if err := checkPayloadSize(len(ev.Data), p.cfg.MaxPayloadBytes); err != nil {
		return nil, err
	}
	if r.parsePayload {
		if err := filter.CheckPayload(ev.ContentType, ev.Data); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
		}
	}
	if len(ev.Data) > 0 && !r.owned {
		out.Data = slices.Clone(ev.Data)
	}
	if ev.Condition != nil {
		c, err := canonicalCondition(o, ev.Condition)
		if err != nil {
			return nil, fmt.Errorf("%w: patronage condition %s: %w", ErrInvalidEvent, ev.Condition, err)
		}
		out.Condition = c
	}
	size := 0
	for _, a := range ev.Attrs {
		size += len(a.Name) + len(a.Value.Str())
	}
	if size > p.cfg.MaxPayloadBytes {
		return nil, fmt.Errorf("%w: attribute names and strings of %d bytes exceed the place's limit of %d", ErrInvalidEvent, size, p.cfg.MaxPayloadBytes)
	}
	if err := fitsLink(ev, size); err != nil {
		return nil, err
	}
	if !r.owned {
		out.Attrs = make([]ontology.Attr, 0, len(ev.Attrs))
	}
	var vocab []ontology.Attribute // the type's, own and inherited, sorted by canonical name
	if known {
		vocab = o.Vocabulary(t.ID)
	}
	for _, a := range ev.Attrs {
		name := o.CanonicalAttribute(a.Name)
		v := a.Value
		if !v.IsValid() {
			return nil, fmt.Errorf("%w: attribute %q has no value", ErrInvalidEvent, a.Name)
		}
		if v.Kind() == ontology.KindFloat && (math.IsNaN(v.Float()) || math.IsInf(v.Float(), 0)) {
			return nil, fmt.Errorf("%w: attribute %q is %v; NaN and ±Inf are refused", ErrInvalidEvent, a.Name, v.Float())
		}
		if known {
			decl, ok := vocabEntry(vocab, name)
			if !ok {
				return nil, fmt.Errorf("%w: attribute %q is not in the vocabulary of event type %q", ErrInvalidEvent, a.Name, t.Name)
			}
			cv, ok := v.As(decl.Kind)
			if !ok {
				return nil, fmt.Errorf("%w: attribute %q of event type %q is %s, got %s %s", ErrInvalidEvent, a.Name, t.Name, decl.Kind, v.Kind(), v)
			}
			v = cv
		}
		out.Attrs = append(out.Attrs, ontology.Attr{Name: name, Value: v})
	}
	slices.SortFunc(out.Attrs, func(a, b ontology.Attr) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(out.Attrs); i++ {
		if out.Attrs[i].Name == out.Attrs[i-1].Name {
			return nil, fmt.Errorf("%w: attribute %q appears twice (names and synonyms count as one)", ErrInvalidEvent, out.Attrs[i].Name)
		}
	}
	return out, nil
}

// vocabEntry returns the entry of vocabulary v (ontology.Vocabulary,
// sorted by name) for the canonical attribute name: what
// Ontology.Attribute returns, for a name already canonical, without its
// map lookup and its comparisons through a function value (admit runs it
// for every attribute of every event).
func vocabEntry(v []ontology.Attribute, name string) (*ontology.Attribute, bool) {
	lo, hi := 0, len(v)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if v[h].Name < name {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo < len(v) && v[lo].Name == name {
		return &v[lo], true
	}
	return nil, false
}

// The most one event may hold so that it crosses a shared link (the wire
// codec's default limits and transport.DefaultMaxFrameBytes): an event a
// switch accepts must not be lost on the way to another switch.
const (
	linkMaxAttrs  = 256
	linkMaxString = 64 << 10
	linkMaxFrame  = 1 << 20
)

// checkPayloadSize refuses a payload of n bytes over a place's limit: the
// one check of PlaceConfig.MaxPayloadBytes, for local publishes (on the
// switch) and remote ones (on the entity's side, with the limit the
// switch's Welcome gave, before the event travels).
func checkPayloadSize(n, limit int) error {
	if n > limit {
		return fmt.Errorf("%w: payload of %d bytes exceeds the place's limit of %d", ErrInvalidEvent, n, limit)
	}
	return nil
}

// fitsLink refuses an event that no shared link with the default frame
// limit could carry; attrBytes is the sum of its attribute names and
// string values.
func fitsLink(ev *Event, attrBytes int) error {
	if len(ev.Attrs) > linkMaxAttrs {
		return fmt.Errorf("%w: %d attributes, more than the %d an event may carry over a shared link", ErrInvalidEvent, len(ev.Attrs), linkMaxAttrs)
	}
	for _, a := range ev.Attrs {
		if len(a.Name) > linkMaxString || len(a.Value.Str()) > linkMaxString {
			return fmt.Errorf("%w: attribute %.40q: a name or string value longer than %d bytes cannot cross a shared link", ErrInvalidEvent, a.Name, linkMaxString)
		}
	}
	for _, f := range [...]struct{ what, s string }{{"type", ev.Type}, {"content type", ev.ContentType}} {
		if len(f.s) > linkMaxString {
			return fmt.Errorf("%w: a %s longer than %d bytes cannot cross a shared link", ErrInvalidEvent, f.what, linkMaxString)
		}
	}
	// Frame: the fields' bytes plus at most 12 bytes of lengths and kinds
	// per attribute, 256 for the fixed fields, the origin's switch and
	// place names (MaxNameBytes each), and the longest path of places it
	// may gather crossing gateways.
	size := len(ev.Data) + attrBytes + 12*len(ev.Attrs) + len(ev.Type) + len(ev.ContentType) + len(ev.TraceParent) + len(ev.TraceState) +
		256 + 2*MaxNameBytes + wire.MaxPath*(MaxNameBytes+3)
	if ev.Condition != nil {
		size += len(ev.Condition.String())
	}
	if size > linkMaxFrame {
		return fmt.Errorf("%w: the event takes about %d bytes, more than the %d bytes of a shared link's frame (payload %d bytes)", ErrInvalidEvent, size, linkMaxFrame, len(ev.Data))
	}
	return nil
}

// canonicalCondition checks a patronage condition and returns it with its
// attribute names canonical, as profiles store them (synonyms resolve at
// the edge). Profile attributes are the entity's own and need not be in
// any event type's vocabulary.
func canonicalCondition(o *ontology.Ontology, c *filter.Filter) (*filter.Filter, error) {
	if _, err := c.MatchProfile(nil); err != nil {
		return nil, err
	}
	spec := c.Spec()
	changed := false
	for i := range spec.Predicates {
		op := &spec.Predicates[i].Operand
		if op.Source == filter.SourceAttr {
			if n := o.CanonicalAttribute(op.Name); n != op.Name {
				op.Name, changed = n, true
			}
		}
	}
	if !changed {
		return c, nil
	}
	return filter.Build(spec)
}

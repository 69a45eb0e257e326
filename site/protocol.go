package site

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
)

// The site manager speaks with proxies over sion itself: its own event
// place, whose ontology holds the three event types below, on a switch
// whose relay (sion.Relay) is the manager. A proxy holds a remote session
// there. Its requests are events of type RequestType that it publishes;
// the manager answers each with an event of type AnswerType that carries
// the proxy's name, which the proxy's subscription
// {type ⊑ SiteAnswer; proxy = NAME} matches, and announces changes of the
// directory with events of type ChangeType, which every proxy subscribes
// to. Payloads are JSON (the structs below).
const (
	// RequestType is a proxy's request to the site manager: a
	// registration, a delivery-destination request (S4 500) or an
	// acknowledgement of a change.
	RequestType = "SiteRequest"
	// AnswerType is the site manager's answer to one request.
	AnswerType = "SiteAnswer"
	// ChangeType announces a change of the site management information:
	// a site's representative proxy, switches or event types.
	ChangeType = "SiteChange"
)

// controlOntology returns the ontology of the site manager's place.
func controlOntology() *ontology.Ontology {
	str := func(n string) ontology.Attribute { return ontology.Attribute{Name: n, Kind: ontology.KindString} }
	num := func(n string) ontology.Attribute { return ontology.Attribute{Name: n, Kind: ontology.KindInt} }
	o, err := ontology.New([]ontology.TypeDef{
		{Name: RequestType, Attributes: []ontology.Attribute{str("proxy"), str("kind"), num("req")}},
		{Name: AnswerType, Attributes: []ontology.Attribute{str("proxy"), num("req")}},
		{Name: ChangeType, Attributes: []ontology.Attribute{str("site"), num("change")}},
	})
	if err != nil {
		panic("site: control ontology: " + err.Error()) // a constant: tested
	}
	return o
}

// Request kinds.
const (
	kindRegister  = "register"  // the proxy's state, nothing asked
	kindPublish   = "publish"   // where a publish of Types goes (S4 Fig. 14 S1402)
	kindSubscribe = "subscribe" // where a subscription to Types goes (S1404)
	kindAck       = "ack"       // the proxy has acted on changes Change and Changes
)

// request is a proxy's request. Every request carries the proxy's whole
// registration, so that a site manager that restarted knows it again
// from the first request of each proxy.
type request struct {
	Site string `json:"site"`
	Addr string `json:"addr"` // where the proxy serves
	// Switches are the site's switches as the proxy was configured with
	// them (ProxyConfig.Switches); nil when it was not.
	Switches []string `json:"switches,omitempty"`
	// Representative: the proxy acts as its site's representative proxy
	// (as the manager last told it). Known is the address of its site's
	// representative proxy as the proxy last heard it, "" for none: a
	// site manager that restarted keeps that one in the role until it
	// registers, rather than give the role to the first proxy that asks.
	Representative bool   `json:"representative,omitempty"`
	Known          string `json:"known,omitempty"`
	// Published are the event types published at the proxy; Subscribed
	// the event types its subscriptions need (each filter's type and its
	// subtypes, "*" for every type).
	Published  []string `json:"published,omitempty"`
	Subscribed []string `json:"subscribed,omitempty"`
	// Types are the event types asked about (publish, subscribe).
	Types []string `json:"types,omitempty"`
	// Change and Changes are the changes acknowledged (ack): the proxy
	// placed its subscriptions again after each, at the change's site.
	// Epoch is the manager's epoch of those changes (0: not said, taken
	// as the manager's own); an acknowledgement of another epoch is
	// ignored.
	Change  int64   `json:"change,omitempty"`
	Changes []int64 `json:"changes,omitempty"`
	Epoch   uint64  `json:"epoch,omitempty"`
	// Unreachable names a representative proxy (by address) the proxy
	// could not reach.
	Unreachable string `json:"unreachable,omitempty"`
	// Seq numbers the proxy's registrations in the order it took them.
	// A proxy sends requests from several goroutines at once, so one that
	// took its registration earlier may be served later: the manager
	// keeps the registration with the highest Seq of the session, and a
	// lower one does not take back what a later one said (0: none given,
	// always taken).
	Seq int64 `json:"seq,omitempty"`
}

// siteEntry is one site as the site manager tells it.
type siteEntry struct {
	ID             string   `json:"id"`
	Representative string   `json:"representative,omitempty"` // its address; "" when none
	Switches       []string `json:"switches,omitempty"`
	Types          []string `json:"types,omitempty"` // of those asked about, the ones published there
}

// answer is the site manager's answer to one request.
type answer struct {
	Epoch uint64 `json:"epoch"`
	// Young: the manager started less than its Timeout ago, and its
	// directory may still lack what proxies have not registered again
	// yet: a proxy adds what it says, and drops nothing for it.
	Young bool   `json:"young,omitempty"`
	Error string `json:"error,omitempty"`
	// NoSwitch: Error is an ErrNoSwitch.
	NoSwitch bool `json:"noSwitch,omitempty"`
	// Own is the proxy's own site; Representative says whether the
	// proxy is its representative proxy now.
	Own            siteEntry `json:"own"`
	Representative bool      `json:"representative,omitempty"`
	// Publish is where the proxy's publishes go (publish): its own site,
	// or the fallback site when its own has no switches.
	Publish *siteEntry `json:"publish,omitempty"`
	// Sites are the sites whose switches carry one of the types asked
	// about (subscribe), the proxy's own included.
	Sites []siteEntry `json:"sites,omitempty"`
	// Change is the last change the manager had announced when it made
	// the answer: the answer holds every change up to it and none after.
	// A change announced after it may reach the proxy first (answers and
	// changes travel on two subscriptions): the proxy lays such changes
	// over the answer again (Proxy.replayLocked).
	Change int64 `json:"change,omitempty"`
	// Hold (publish, register): change Hold, which brought HoldTypes to
	// the site where the proxy publishes, has not settled — a proxy that
	// needs one of them has not acknowledged it — and the proxy holds the
	// events of HoldTypes it publishes until it is told that it has
	// (Settled), or for HoldFor at most (the manager gives up on it by
	// then) and a RequestTimeout more.
	Hold      int64         `json:"hold,omitempty"`
	HoldTypes []string      `json:"holdTypes,omitempty"`
	HoldFor   time.Duration `json:"holdFor,omitempty"`
	// Settled, in a notice that answers no request (req 0): change
	// Settled has settled. Complete: every proxy that needed it
	// acknowledged it (else one went unreachable first, or the manager
	// gave up on it after ManagerConfig.HoldTimeout, and the events held
	// may have missed its subscribers).
	Settled  int64 `json:"settled,omitempty"`
	Complete bool  `json:"complete,omitempty"`
}

// answerError is the error an answer carries (answer.Error); it wraps
// ErrNoSwitch when the answer says so.
type answerError struct {
	msg      string
	noSwitch bool
}

func (e *answerError) Error() string        { return e.msg }
func (e *answerError) Is(target error) bool { return e.noSwitch && target == ErrNoSwitch }

// change announces a change of the directory.
type change struct {
	Epoch  uint64 `json:"epoch"`
	Change int64  `json:"change"`
	Site   string `json:"site"`
	// Types are event types newly published at the site; Moved that the
	// site's representative proxy or switches changed.
	Types []string  `json:"types,omitempty"`
	Moved bool      `json:"moved,omitempty"`
	Entry siteEntry `json:"entry"`
}

// Bounds of what one proxy may send the site manager (it refuses the
// request otherwise): names and lists it keeps.
const (
	maxNameBytes = sion.MaxNameBytes
	maxListLen   = 4096 // types or switches in one request
)

// check refuses a request the site manager would not keep.
func (r *request) check() error {
	if err := checkName("site", r.Site); err != nil {
		return err
	}
	if err := checkName("addr", r.Addr); err != nil {
		return err
	}
	for _, l := range []struct {
		what string
		xs   []string
	}{{"switches", r.Switches}, {"published", r.Published}, {"subscribed", r.Subscribed}, {"types", r.Types}} {
		if len(l.xs) > maxListLen {
			return fmt.Errorf("site: request lists %d %s, at most %d", len(l.xs), l.what, maxListLen)
		}
		for _, x := range l.xs {
			if err := checkName(l.what, x); err != nil {
				return err
			}
		}
	}
	if len(r.Changes) > maxListLen {
		return fmt.Errorf("site: request lists %d changes, at most %d", len(r.Changes), maxListLen)
	}
	if r.Known != "" {
		if err := checkName("known", r.Known); err != nil {
			return err
		}
	}
	if r.Unreachable != "" {
		return checkName("unreachable", r.Unreachable)
	}
	return nil
}

func checkName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("site: empty %s", what)
	case len(s) > maxNameBytes:
		return fmt.Errorf("site: %s of %d bytes, at most %d", what, len(s), maxNameBytes)
	}
	return nil
}

// event makes an event of type t with attrs and v as JSON payload, with
// a fresh random ID (the manager's front delivers it as it is).
func event(t string, v any, attrs ...ontology.Attr) (*sion.Event, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	ev := &sion.Event{Type: t, Attrs: attrs, ContentType: "application/json", Data: data}
	rand.Read(ev.ID[:])
	slices.SortFunc(ev.Attrs, func(a, b ontology.Attr) int { return strings.Compare(a.Name, b.Name) })
	return ev, nil
}

// attrString returns ev's attribute name as a string, "" when absent.
func attrString(ev *sion.Event, name string) string {
	v, ok := ev.Value(name)
	if !ok || v.Kind() != ontology.KindString {
		return ""
	}
	return v.Str()
}

// attrInt returns ev's attribute name as an integer, 0 when absent.
func attrInt(ev *sion.Event, name string) int64 {
	v, ok := ev.Value(name)
	if !ok || v.Kind() != ontology.KindInt {
		return 0
	}
	return v.Int()
}

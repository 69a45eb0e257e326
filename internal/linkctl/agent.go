package linkctl

import "fmt"

// The messages of a managed place (S2): an agent's connection to each
// switch carries Manage, Model, ModelChange, Deploy, Detected and Verdict
// (out of band: they never cross a shared link), and a shared link
// carries Bleeder, in band, in the ordered stream of its events.

// Manage is the first message on an agent's connection to a switch of a
// managed place (S2 agent), after the wire handshake: the switch answers
// with Model, or a wire.Error and closes.
type Manage struct {
	// Agent names the agent and Place the place it manages.
	Agent, Place string
}

// Model is a switch's part of the agent's network model, whole: sent
// when the agent connects, followed by Follow ModelChange messages — a
// ChangeAdvertise for each of its sessions' advertisements (the
// producers) and a ChangeSubscribe for each of their subscriptions (the
// consumers) — that complete it; ModelChange messages follow as the
// switch changes. (Its sessions' advertisements and subscriptions travel
// one per message, so that a switch with many fits any frame.)
type Model struct {
	// Switch names the switch.
	Switch string
	// Links are its shared links of the place's tree that are up.
	Links []ModelLink
	// Constraints are the constraints deployed at the switch now: what it
	// forwards over each link (an agent that restarts learns them here).
	Constraints []Constraint
	// Follow is the number of ModelChange messages that complete it.
	Follow uint64
	// Deployment is the last deployment the switch carried out (0:
	// none). A switch ignores a Deploy numbered below it, so an agent
	// that restarts numbers its deployments above every switch's.
	Deployment uint64
}

// ModelLink is one shared link of a switch.
type ModelLink struct {
	// Peer names the switch at the other end; Addr is where the peer
	// serves links and agents, "" when the switch does not know.
	Peer, Addr string
}

// Constraint is the constraint a switch applies to what it forwards over
// the link to Peer: the filters of the proxy subscriptions there (S2
// network filter). No filters: nothing crosses.
type Constraint struct {
	Peer    string
	Filters []string
}

// The operations of a ModelChange (ModelChange.Op).
const (
	ChangeLinkUp    = 1 // a shared link to Peer came up (Addr: where Peer serves)
	ChangeLinkDown  = 2 // the link to Peer ended
	ChangeAdvertise = 3 // advertisement Key of Session: Text is its type; a request, answered by Verdict (also when it completes a Model)
	ChangeWithdraw  = 4 // advertisement Key is withdrawn
	ChangeSubscribe = 5 // subscription Key of Session: Text is its filter; a request, answered by Verdict (also when it completes a Model)
	ChangeCancel    = 6 // subscription Key is cancelled
)

// ModelChange tells the agent one change to the switch's part of the
// model. Fields an operation does not use are zero.
type ModelChange struct {
	// Op is one of ChangeLinkUp … ChangeCancel.
	Op byte
	// Key names the advertisement or subscription; Session its session,
	// and Name the session's name.
	Key, Session uint64
	Name         string
	// Peer and Addr name a link's peer and where it serves.
	Peer, Addr string
	// Text is an advertisement's type or a subscription's filter; Attrs
	// an advertisement's attribute detail.
	Text  string
	Attrs []AttrDetail
}

// Deploy carries the part of one deployment (S2 Fig. 3A–3C) that
// concerns the switch: the model filters of set B at the switch, each
// with its new constraint, bag and send flag, and where to pass on the
// bleeders that reach the switch. A Deploy supersedes whatever an
// earlier deployment left pending at the switch (a rollback is a Deploy
// of the old constraints with empty bags).
type Deploy struct {
	// Deployment numbers the deployment; bleeders carry it.
	Deployment uint64
	// Filters are the switch's model filters of set B.
	Filters []DeployFilter
	// Relays say where the bleeders of this deployment that reach the
	// switch go on to.
	Relays []Relay
}

// DeployFilter is one model filter of set B at a switch: the network
// filter on the link to Peer (the switch's constraint on what it
// forwards there), or, when Peer is "", the consumer filter of session
// Session — the subscriptions of the requesting consumer, adjacent to
// it.
type DeployFilter struct {
	// ID names the model filter; bleeders and Detected carry it.
	ID uint64
	// Peer names the link; "" for a consumer filter.
	Peer string
	// Session is a consumer filter's session; 0 for a network filter.
	Session uint64
	// Constraint is a network filter's new constraint (filter texts);
	// none: nothing crosses. A consumer filter's is its subscriptions'
	// and travels empty.
	Constraint []string
	// Bag lists the model filters whose bleeders must reach the filter
	// before it activates its constraint and answers Detected; empty:
	// it activates at once and answers nothing.
	Bag []uint64
	// Send is the send flag: once active, the filter sends a bleeder
	// with its ID downstream over its link.
	Send bool
}

// Relay says where a bleeder that reaches the switch goes on to.
type Relay struct {
	// Bleeder is the model filter whose bleeder it is.
	Bleeder uint64
	// To names the links (peers) it is passed on over.
	To []string
}

// Bleeder is the in-band bleeder message of S2: sent downstream over a
// shared link by a network filter once its new constraint is active, in
// the link's ordered stream, so that every event the filter passed
// before it arrives before it. It is not answered.
type Bleeder struct {
	Deployment uint64
	// Filter is the sending model filter's ID.
	Filter uint64
}

// Detected is S2's "all bleeders detected": model filter Filter has
// seen every bleeder of its bag and its new constraint is active.
type Detected struct {
	Deployment, Filter uint64
}

// Verdict answers a request — a ChangeSubscribe or ChangeAdvertise with
// Key — granting it (Error "") or refusing it, and the switch refuses the
// request with Error.
type Verdict struct {
	Key uint64
	// Advert reports that Key names an advertisement, not a
	// subscription.
	Advert bool
	Error  string
}

// Kind returns KindManage.
func (*Manage) Kind() Kind { return KindManage }

// Kind returns KindModel.
func (*Model) Kind() Kind { return KindModel }

// Kind returns KindModelChange.
func (*ModelChange) Kind() Kind { return KindModelChange }

// Kind returns KindDeploy.
func (*Deploy) Kind() Kind { return KindDeploy }

// Kind returns KindBleeder.
func (*Bleeder) Kind() Kind { return KindBleeder }

// Kind returns KindDetected.
func (*Detected) Kind() Kind { return KindDetected }

// Kind returns KindVerdict.
func (*Verdict) Kind() Kind { return KindVerdict }

func (m *Manage) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.text("agent", m.Agent)
	e.text("place", m.Place)
}

func (m *Manage) decode(d *decoder) {
	m.Agent = d.text("agent")
	m.Place = d.text("place")
}

func (m *Model) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.text("switch", m.Switch)
	e.list("links", len(m.Links), func(i int) {
		e.text("peer", m.Links[i].Peer)
		e.text("addr", m.Links[i].Addr)
	})
	e.list("constraints", len(m.Constraints), func(i int) {
		e.text("peer", m.Constraints[i].Peer)
		e.texts("filters", m.Constraints[i].Filters)
	})
	e.uvarint(m.Follow)
	e.uvarint(m.Deployment)
}

func (m *Model) decode(d *decoder) {
	m.Switch = d.text("switch")
	m.Links = decodeList(d, "links", 2, func() (l ModelLink) {
		l.Peer = d.text("peer")
		l.Addr = d.text("addr")
		return l
	})
	m.Constraints = decodeList(d, "constraints", 2, func() (c Constraint) {
		c.Peer = d.text("peer")
		c.Filters = d.texts("filters")
		return c
	})
	m.Follow = d.uvarint("follow")
	m.Deployment = d.uvarint("deployment")
}

func (m *ModelChange) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.byteIn("op", m.Op, ChangeLinkUp, ChangeCancel)
	e.uvarint(m.Key)
	e.uvarint(m.Session)
	e.text("name", m.Name)
	e.text("peer", m.Peer)
	e.text("addr", m.Addr)
	e.text("text", m.Text)
	e.attrs("attrs", m.Attrs)
}

func (m *ModelChange) decode(d *decoder) {
	m.Op = d.byteIn("op", ChangeLinkUp, ChangeCancel)
	m.Key = d.uvarint("key")
	m.Session = d.uvarint("session")
	m.Name = d.text("name")
	m.Peer = d.text("peer")
	m.Addr = d.text("addr")
	m.Text = d.text("text")
	m.Attrs = d.attrs("attrs")
}

func (m *Deploy) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Deployment)
	e.list("filters", len(m.Filters), func(i int) {
		f := &m.Filters[i]
		e.uvarint(f.ID)
		e.text("peer", f.Peer)
		e.uvarint(f.Session)
		e.texts("constraint", f.Constraint)
		e.uvarints("bag", f.Bag)
		e.bool(f.Send)
	})
	e.list("relays", len(m.Relays), func(i int) {
		e.uvarint(m.Relays[i].Bleeder)
		e.names("to", m.Relays[i].To)
	})
}

func (m *Deploy) decode(d *decoder) {
	m.Deployment = d.uvarint("deployment")
	m.Filters = decodeList(d, "filters", 6, func() (f DeployFilter) {
		f.ID = d.uvarint("id")
		f.Peer = d.text("peer")
		f.Session = d.uvarint("session")
		f.Constraint = d.texts("constraint")
		f.Bag = d.uvarints("bag")
		f.Send = d.bool("send")
		return f
	})
	m.Relays = decodeList(d, "relays", 2, func() (r Relay) {
		r.Bleeder = d.uvarint("bleeder")
		r.To = d.names("to")
		return r
	})
}

func (m *Bleeder) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Deployment)
	e.uvarint(m.Filter)
}

func (m *Bleeder) decode(d *decoder) {
	m.Deployment = d.uvarint("deployment")
	m.Filter = d.uvarint("filter")
}

func (m *Detected) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Deployment)
	e.uvarint(m.Filter)
}

func (m *Detected) decode(d *decoder) {
	m.Deployment = d.uvarint("deployment")
	m.Filter = d.uvarint("filter")
}

func (m *Verdict) encode(e *encoder) {
	if e.nilMessage(m == nil) {
		return
	}
	e.uvarint(m.Key)
	e.bool(m.Advert)
	e.str(m.Error)
}

func (m *Verdict) decode(d *decoder) {
	m.Key = d.uvarint("key")
	m.Advert = d.bool("advert")
	m.Error = d.str("error")
}

// list appends a count and n entries, each appended by entry(i); an
// error inside an entry names it ("links 2 peer").
func (e *encoder) list(field string, n int, entry func(i int)) {
	if e.err != nil {
		return
	}
	if n > MaxNames {
		e.fail(field+" count", fmt.Sprintf("count %d exceeds %d", n, MaxNames))
		return
	}
	e.uvarint(uint64(n))
	for i := range n {
		entry(i)
		if e.err != nil {
			e.err.Field = fmt.Sprintf("%s %d %s", field, i, e.err.Field)
			return
		}
	}
}

// texts appends a count and the texts (any valid UTF-8).
func (e *encoder) texts(field string, ts []string) {
	e.list(field, len(ts), func(i int) { e.text("text", ts[i]) })
}

// uvarints appends a count and the numbers.
func (e *encoder) uvarints(field string, us []uint64) {
	e.list(field, len(us), func(i int) { e.uvarint(us[i]) })
}

// decodeList reads a count of entries that take at least least bytes
// each, and the entries, each read by entry; nil when there are none. An
// error inside an entry names it.
func decodeList[T any](d *decoder, field string, least int, entry func() T) []T {
	u := d.count(field, least)
	if u == 0 {
		return nil
	}
	out := make([]T, u)
	for i := range out {
		out[i] = entry()
		if d.err != nil {
			d.err.Field = fmt.Sprintf("%s %d %s", field, i, d.err.Field)
			return nil
		}
	}
	return out
}

// texts reads a count and the texts; nil when there are none.
func (d *decoder) texts(field string) []string {
	return decodeList(d, field, 1, func() string { return d.text("text") })
}

// uvarints reads a count and the numbers; nil when there are none.
func (d *decoder) uvarints(field string) []uint64 {
	return decodeList(d, field, 1, func() uint64 { return d.uvarint("id") })
}

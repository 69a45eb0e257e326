package sion

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
)

// RouteManaged hands a place's routing to an agent (S2): switches
// propagate no interest themselves; an Agent connected to every switch of
// the place keeps a model of it — its shared links, the advertisements of
// its sessions (the producers, Session.Advertise) and their
// subscriptions (the consumers) — computes the optimal constraint of
// each link direction (an event crosses a link only when a consumer
// downstream wants it and a producer upstream makes it, and no
// constraint that would discard nothing is deployed) and deploys the
// changes with S2's bleeder procedure, granting or refusing each
// subscription and advertisement.
//
// In a managed place:
//   - Subscribe returns once the agent has granted the subscription: the
//     constraints every event it may match needs are active on the paths
//     from the producers (S2 contract); the agent's refusal, or no verdict
//     within the place's ContractTimeout (no agent connected, say),
//     refuses it with ErrNotGranted.
//   - Publish refuses an event its session has not advertised
//     (ErrNotAdvertised), and Advertise returns once the agent has granted
//     the advertisement: the paths from the session's switch to the
//     consumers that may want its events are deployed. A refused
//     advertisement is withdrawn.
//   - Cancel and a session's end narrow the constraints in the background.
//   - Filters on sion's own (reserved) types — discovery — are propagated
//     as in RouteByFilter, since their publishers advertise nothing.
//   - A link that comes up carries what the agent deploys over it: events
//     published before the agent has heard of the link (ModelChange) and
//     deployed are not carried over it.
//
// Choose it over RouteByFilter when subscriptions are many and producers
// of each type few, so that propagating every subscription everywhere
// costs more than one agent that knows where producers are; its cost is
// an agent (a single point that grants contracts: while it is away new
// subscriptions wait) and a connection from it to every switch.
var RouteManaged Routing = managed{}

type managed struct{}

func (managed) String() string { return "managed" }

func (managed) attach(sw *Switch) switchRouting {
	return &managedSwitch{
		sw:       sw,
		reserved: stateless{key: byFilter{}.key},
		subs:     map[uint64]*managedRequest{},
		ads:      map[uint64]*managedRequest{},
		sessAds:  map[*Session][]uint64{},
		filters:  map[*router]*netFilter{},
		waits:    map[uint64]*bagWait{},
		early:    map[uint64]bool{},
	}
}

// managedSwitch is a switch's part of a managed place (S2): the
// requests it reports to the agent, the network filters the agent
// deployed on its links, and the current deployment's waits.
//
// Lock order: Switch.routeMu, then mu (routed and unrouted hold routeMu),
// then a router's mu.
type managedSwitch struct {
	sw       *Switch
	reserved stateless // reserved types travel by filter

	mu      sync.Mutex
	agent   *agentConn                 // mu; the agent connected now, nil: none
	subs    map[uint64]*managedRequest // mu; consumer subscriptions, by ID
	ads     map[uint64]*managedRequest // mu; advertisements, by key
	sessAds map[*Session][]uint64      // mu; the advertisement keys of each session
	nextAd  uint64                     // mu
	filters map[*router]*netFilter     // mu; the network filters of the switch's links
	dep     uint64                     // mu; the deployment whose Deploy came last
	waits   map[uint64]*bagWait        // mu; model filters of dep waiting for bleeders, by ID
	relays  map[uint64][]string        // mu; dep's relays: bleeder → peers
	early   map[uint64]bool            // mu; bleeders of deployment dep+1… seen before its Deploy (bounded)
	earlyOf uint64                     // mu; the deployment early is for

	// applyMu orders the deployments' actions — installing and removing
	// network filters' proxy subscriptions, sending bleeders — which run
	// without mu, since installing takes Switch.routeMu. Lock order:
	// applyMu, then Switch.routeMu, then mu.
	applyMu sync.Mutex

	hold atomic.Bool // tests: keep this switch's bleeders (neither send nor relay them)
}

// managedRequest is a subscription or advertisement reported to the
// agent: a request until the agent's verdict.
type managedRequest struct {
	key     uint64
	session uint64
	name    string // the session's
	text    string // a subscription's filter, an advertisement's type
	attrs   []linkctl.AttrDetail
	sess    *Session
	ad      Advertisement
	verdict *linkAck // closed on the verdict; nil once granted
}

// netFilter is the network filter of one link direction at this switch
// (S2): the constraint on what it forwards to the peer — proxy
// subscriptions of the link's router session that the agent deployed.
type netFilter struct {
	active map[string]*Subscription // filter text → proxy subscription
}

// bagWait is a model filter of the current deployment waiting for the
// bleeders in its bag: a network filter (r set, with the constraint it
// activates then) or the consumer filter of a session (r nil).
type bagWait struct {
	id         uint64
	r          *router
	constraint []string
	bag        map[uint64]bool // bleeders still awaited
	send       bool
}

// maxEarly bounds the bleeders a switch keeps for a deployment whose
// Deploy has not reached it yet.
const maxEarly = 4096

// consumer reports whether sub is a consumer's subscription the agent
// must know: not a proxy filter of a shared link, not on a reserved type.
func consumer(sub *Subscription) bool {
	if r, ok := sub.sess.sink.(*router); ok && r.end.inPlace() {
		return false
	}
	return !ontology.IsReserved(sub.f.Type())
}

func (m *managedSwitch) keys(r *router, sub *Subscription, reg func(routeKey, int)) {
	if ontology.IsReserved(sub.f.Type()) {
		m.reserved.keys(r, sub, reg)
	}
}

func (m *managedSwitch) linkUp(r *router) ([]routeKey, []*linkAck) {
	if r.end.tree() {
		m.mu.Lock()
		m.filters[r] = &netFilter{active: map[string]*Subscription{}}
		m.report(&linkctl.ModelChange{Op: linkctl.ChangeLinkUp, Peer: r.peer})
		m.mu.Unlock()
	}
	return nil, nil
}

func (m *managedSwitch) linkDown(r *router) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.filters[r]; !ok {
		return
	}
	delete(m.filters, r) // its proxy subscriptions end with its session
	for id, w := range m.waits {
		if w.r == r {
			delete(m.waits, id)
		}
	}
	m.report(&linkctl.ModelChange{Op: linkctl.ChangeLinkDown, Peer: r.peer})
}

func (*managedSwitch) join(context.Context, transport.Transport, string) error {
	return fmt.Errorf("%w: Join is for places routed by rendezvous (RouteByRendezvous); link the switches of a managed place with Link", ErrInvalidConfig)
}

func (m *managedSwitch) acceptOverlay(ctx context.Context, conn transport.Conn, sess *Session, o *linkctl.OverlayLink) {
	m.reserved.acceptOverlay(ctx, conn, sess, o)
}

func (*managedSwitch) leave(context.Context) error { return nil }

// routed reports a consumer's new subscription to the agent and returns
// the wait for the agent's verdict (the contract).
func (m *managedSwitch) routed(sub *Subscription) []*linkAck {
	if !consumer(sub) {
		return nil
	}
	a := &linkAck{done: make(chan struct{}), peer: "the agent"}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subs[sub.id] = &managedRequest{key: sub.id, session: sub.sess.id, name: sub.sess.name, text: sub.f.String(), verdict: a}
	m.report(&linkctl.ModelChange{Op: linkctl.ChangeSubscribe, Key: sub.id, Session: sub.sess.id, Name: sub.sess.name, Text: sub.f.String()})
	return []*linkAck{a}
}

// unrouted reports a consumer's subscription that ended.
func (m *managedSwitch) unrouted(sub *Subscription) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.subs[sub.id]; !ok {
		return
	}
	delete(m.subs, sub.id)
	m.report(&linkctl.ModelChange{Op: linkctl.ChangeCancel, Key: sub.id})
}

// matched has nothing to record: a managed place's constraints are proxy
// filters, which the event matched.
func (*managedSwitch) matched(*eventFrames) {}

// advertise reports session s's advertisements to the agent and waits for
// its verdicts; a refused one is withdrawn.
func (m *managedSwitch) advertise(ctx context.Context, s *Session, ads []Advertisement) error {
	var reqs []*managedRequest
	var waits []*linkAck
	m.mu.Lock()
	for _, ad := range ads {
		m.nextAd++
		d, _ := detailOf(ad.Attrs)
		q := &managedRequest{key: m.nextAd, session: s.id, name: s.name, text: ad.Type, attrs: d, sess: s, ad: ad, verdict: &linkAck{done: make(chan struct{}), peer: "the agent"}}
		m.ads[q.key] = q
		m.sessAds[s] = append(m.sessAds[s], q.key)
		m.report(&linkctl.ModelChange{Op: linkctl.ChangeAdvertise, Key: q.key, Session: s.id, Name: s.name, Text: ad.Type, Attrs: d})
		reqs, waits = append(reqs, q), append(waits, q.verdict)
	}
	m.mu.Unlock()
	t := time.NewTimer(m.sw.place.cfg.ContractTimeout)
	defer t.Stop()
	for i, q := range reqs {
		var err error
		select {
		case <-waits[i].done:
			err = waits[i].err
		case <-t.C:
			err = fmt.Errorf("no verdict from the place's agent within %v", m.sw.place.cfg.ContractTimeout)
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			m.withdrawAll(s, reqs)
			return fmt.Errorf("%w: advertisement of %s: %w", ErrNotGranted, q.ad.Type, err)
		}
	}
	return nil
}

// withdrawAll withdraws advertisements reqs of session s, from the agent
// and from the session.
func (m *managedSwitch) withdrawAll(s *Session, reqs []*managedRequest) {
	m.mu.Lock()
	for _, q := range reqs {
		if _, ok := m.ads[q.key]; ok {
			delete(m.ads, q.key)
			m.report(&linkctl.ModelChange{Op: linkctl.ChangeWithdraw, Key: q.key})
		}
		m.sessAds[s] = slices.DeleteFunc(m.sessAds[s], func(k uint64) bool { return k == q.key })
	}
	m.mu.Unlock()
	ads := make([]Advertisement, len(reqs))
	for i, q := range reqs {
		ads[i] = q.ad
	}
	s.unadvertise(ads)
}

// withdraw reports the advertisements of session s, which ends.
func (m *managedSwitch) withdraw(s *Session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range m.sessAds[s] {
		if _, ok := m.ads[k]; ok {
			delete(m.ads, k)
			m.report(&linkctl.ModelChange{Op: linkctl.ChangeWithdraw, Key: k})
		}
	}
	delete(m.sessAds, s)
}

// publishing admits what session s has advertised.
func (m *managedSwitch) publishing(s *Session, e *Event) error {
	return advertised(m.sw.place.Ontology(), s, e)
}

// report sends change c to the agent, if one is connected. mu must be
// held: changes leave in the order they happen, after the Model.
func (m *managedSwitch) report(c *linkctl.ModelChange) {
	if m.agent != nil {
		m.agent.send(c)
	}
}

// close ends the agent's connection.
func (m *managedSwitch) close() {
	m.mu.Lock()
	a := m.agent
	m.mu.Unlock()
	if a != nil {
		a.conn.Close()
		<-a.ended
	}
}

// linkControl handles a bleeder from link r.
func (m *managedSwitch) linkControl(r *router, msg linkctl.Message) (bool, error) {
	b, ok := msg.(*linkctl.Bleeder)
	if !ok {
		return false, nil
	}
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	var acts []func()
	switch {
	case b.Deployment < m.dep:
		// A bleeder of a deployment that is over here.
	case b.Deployment > m.dep:
		if m.earlyOf != b.Deployment {
			m.early, m.earlyOf = map[uint64]bool{}, b.Deployment
		}
		if len(m.early) < maxEarly {
			m.early[b.Filter] = true
		}
	default:
		acts = m.bleeder(b.Filter, nil)
	}
	m.mu.Unlock()
	run(acts)
	return true, nil
}

// run carries out actions in order.
func run(acts []func()) {
	for _, act := range acts {
		act()
	}
}

// bleeder handles the bleeder of model filter id of the current
// deployment: the filters whose bags it completes activate, and it goes
// on as the deployment's relays say. It appends to acts what must be done
// without mu, in order (activations install subscriptions, which takes
// Switch.routeMu). mu must be held.
func (m *managedSwitch) bleeder(id uint64, acts []func()) []func() {
	for _, w := range m.sortedWaits() {
		if !w.bag[id] {
			continue
		}
		delete(w.bag, id)
		if len(w.bag) == 0 {
			delete(m.waits, w.id)
			acts = m.activate(w, acts)
			detected := &linkctl.Detected{Deployment: m.dep, Filter: w.id}
			acts = append(acts, func() { m.toAgent(detected) })
		}
	}
	for _, peer := range m.relays[id] {
		acts = append(acts, m.sendBleeder(peer, m.dep, id))
	}
	return acts
}

// toAgent sends msg to the agent connected now, if any.
func (m *managedSwitch) toAgent(msg linkctl.Message) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.agent.send(msg)
}

// sortedWaits returns the waits in ID order (the order they activate).
func (m *managedSwitch) sortedWaits() []*bagWait {
	out := make([]*bagWait, 0, len(m.waits))
	for _, w := range m.waits {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *bagWait) int { return compareUint64(a.id, b.id) })
	return out
}

// activate appends to acts making model filter w's new constraint active
// (a consumer filter's is already) and then, when its send flag is set,
// sending its bleeder. mu must be held.
func (m *managedSwitch) activate(w *bagWait, acts []func()) []func() {
	if w.r == nil {
		return acts
	}
	if nf := m.filters[w.r]; nf != nil {
		acts = append(acts, func() { m.apply(w.r, nf, w.constraint) })
	}
	if w.send {
		acts = append(acts, m.sendBleeder(w.r.peer, m.dep, w.id))
	}
	return acts
}

// apply makes the constraint of network filter nf, on link r, be
// constraint: the new proxy subscriptions go in before the old ones come
// out, so that an event that both would pass is never discarded. applyMu
// must be held, and not mu.
func (m *managedSwitch) apply(r *router, nf *netFilter, constraint []string) {
	m.mu.Lock()
	have := maps.Clone(nf.active)
	m.mu.Unlock()
	want := map[string]bool{}
	for _, text := range constraint {
		want[text] = true
		if have[text] != nil {
			continue
		}
		f, err := filter.Compile(text)
		if err != nil {
			m.sw.log.Warn("sion: the agent deployed a filter that does not compile; not installed", "switch", m.sw.cfg.Name, "peer", r.peer, "filter", text, "err", err)
			continue
		}
		sub := newSubscription(r.sess, f, subConfig{ttl: 0}, 0, nil)
		r.sess.mu.Lock()
		r.sess.subs[sub.id] = sub
		r.sess.mu.Unlock()
		if _, err := m.sw.install(sub); err != nil {
			r.sess.forget(sub)
			m.sw.log.Warn("sion: deployed filter not installed", "switch", m.sw.cfg.Name, "peer", r.peer, "filter", text, "err", err)
			continue
		}
		m.mu.Lock()
		nf.active[text] = sub
		m.mu.Unlock()
	}
	for text, sub := range have {
		if !want[text] {
			m.mu.Lock()
			delete(nf.active, text)
			m.mu.Unlock()
			r.sess.forget(sub)
			sub.cancel()
		}
	}
}

// sendBleeder returns the sending of the bleeder of model filter id of
// deployment dep over the link to peer; nothing when the switch is made
// to hold its bleeders. mu must be held.
func (m *managedSwitch) sendBleeder(peer string, dep, id uint64) func() {
	r := m.routerTo(peer)
	return func() {
		if r != nil && !m.hold.Load() {
			r.sendControl(&linkctl.Bleeder{Deployment: dep, Filter: id})
		}
	}
}

// deploy carries out the agent's Deploy: it supersedes what an earlier
// deployment left pending, activates the filters with empty bags (and
// sends their bleeders) and sets the others waiting.
func (m *managedSwitch) deploy(d *linkctl.Deploy) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	if d.Deployment < m.dep {
		m.mu.Unlock()
		return
	}
	m.dep = d.Deployment
	m.waits = map[uint64]*bagWait{}
	m.relays = map[uint64][]string{}
	for _, rl := range d.Relays {
		m.relays[rl.Bleeder] = rl.To
	}
	var acts []func()
	for i := range d.Filters {
		f := &d.Filters[i]
		w := &bagWait{id: f.ID, constraint: f.Constraint, send: f.Send, bag: map[uint64]bool{}}
		if f.Peer != "" {
			w.r = m.routerTo(f.Peer)
			if w.r == nil {
				continue // the link is gone; the agent hears of it
			}
		}
		for _, b := range f.Bag {
			w.bag[b] = true
		}
		if len(w.bag) == 0 {
			acts = m.activate(w, acts)
		} else {
			m.waits[w.id] = w
		}
	}
	if m.earlyOf == m.dep {
		for _, id := range slices.Sorted(maps.Keys(m.early)) {
			acts = m.bleeder(id, acts)
		}
	}
	if m.earlyOf <= m.dep {
		m.early, m.earlyOf = map[uint64]bool{}, 0
	}
	m.mu.Unlock()
	run(acts)
}

// routerTo returns the shared link to peer. mu must be held.
func (m *managedSwitch) routerTo(peer string) *router {
	for r := range m.filters {
		if r.peer == peer {
			return r
		}
	}
	return nil
}

// verdict resolves request key with the agent's verdict.
func (m *managedSwitch) verdict(v *linkctl.Verdict) {
	m.mu.Lock()
	defer m.mu.Unlock()
	table := m.subs
	if v.Advert {
		table = m.ads
	}
	q := table[v.Key]
	if q == nil || q.verdict == nil {
		return
	}
	if v.Error != "" {
		q.verdict.err = errors.New(v.Error)
	} else {
		q.verdict.ok = true
	}
	close(q.verdict.done)
	q.verdict = nil
}

// model returns the switch's whole part of the network model: the Model
// and the ModelChange messages that complete it (its advertisements and
// subscriptions, each a request the agent answers). mu must be held.
func (m *managedSwitch) model() []linkctl.Message {
	md := &linkctl.Model{Switch: m.sw.cfg.Name, Deployment: m.dep}
	for r, nf := range m.filters {
		md.Links = append(md.Links, linkctl.ModelLink{Peer: r.peer})
		c := linkctl.Constraint{Peer: r.peer}
		for text := range nf.active {
			c.Filters = append(c.Filters, text)
		}
		slices.Sort(c.Filters)
		md.Constraints = append(md.Constraints, c)
	}
	slices.SortFunc(md.Links, func(a, b linkctl.ModelLink) int { return cmp.Compare(a.Peer, b.Peer) })
	slices.SortFunc(md.Constraints, func(a, b linkctl.Constraint) int { return cmp.Compare(a.Peer, b.Peer) })
	out := []linkctl.Message{md}
	for _, q := range sortedRequests(m.ads) {
		out = append(out, &linkctl.ModelChange{Op: linkctl.ChangeAdvertise, Key: q.key, Session: q.session, Name: q.name, Text: q.text, Attrs: q.attrs})
	}
	for _, q := range sortedRequests(m.subs) {
		out = append(out, &linkctl.ModelChange{Op: linkctl.ChangeSubscribe, Key: q.key, Session: q.session, Name: q.name, Text: q.text})
	}
	md.Follow = uint64(len(out) - 1)
	return out
}

func sortedRequests(t map[uint64]*managedRequest) []*managedRequest {
	out := make([]*managedRequest, 0, len(t))
	for _, q := range t {
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b *managedRequest) int { return compareUint64(a.key, b.key) })
	return out
}

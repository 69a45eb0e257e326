package site

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
)

// errManagerAway: the proxy has no session with the site manager now.
var errManagerAway = errors.New("site: the site manager is not reachable")

// managerLink is a proxy's session with the site manager: requests and
// their answers, the changes it announces, and the registration it
// repeats every Refresh.
type managerLink struct {
	p *Proxy

	mu      sync.Mutex
	sess    *sion.Session         // mu; nil until the first dial succeeds
	next    int64                 // mu; the last request's number
	pending map[int64]chan answer // mu; requests waiting for their answers
	// acks are the changes to acknowledge once the subscriptions are
	// placed again, by number, with the addresses of their site (its
	// representative proxy and switches): a change is acknowledged once
	// no placement at one of them failed. ackEpoch is their epoch.
	acks     map[int64][]string   // mu
	ackEpoch uint64               // mu
	reported map[string]time.Time // mu; representative proxies reported unreachable, when
	epoch    uint64               // mu; the manager's, as last answered
	closed   bool                 // mu

	kick    chan struct{} // register now (1-buffered)
	dialled chan struct{} // closed when the first dial has succeeded
	away    atomic.Bool   // the session's connection is down: requests fail at once
}

func newManagerLink(p *Proxy) *managerLink {
	return &managerLink{p: p, pending: map[int64]chan answer{}, acks: map[int64][]string{}, reported: map[string]time.Time{}, kick: make(chan struct{}, 1), dialled: make(chan struct{})}
}

// run dials the site manager until it answers, subscribes to the answers
// and changes meant for the proxy, and registers every Refresh (and at
// once when the session was opened anew: the manager restarted).
func (m *managerLink) run() {
	p := m.p
	backoff := 50 * time.Millisecond
	for {
		sess, err := m.dial()
		if err == nil {
			m.mu.Lock()
			m.sess = sess
			m.mu.Unlock()
			close(m.dialled)
			break
		}
		p.log.Warn("site: site manager not reachable; retrying", "proxy", p.cfg.Name, "manager", p.cfg.Manager, "err", err)
		select {
		case <-p.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
	t := time.NewTicker(p.cfg.Refresh)
	defer t.Stop()
	for {
		ctx, cancel := p.context(p.cfg.RequestTimeout)
		if _, err := m.request(ctx, kindRegister, nil); err == nil {
			p.kick() // the manager may know more than the cache: place again
		}
		cancel()
		select {
		case <-p.stop:
			return
		case <-t.C:
		case <-m.kick:
		}
	}
}

// dial opens the session and its two subscriptions. The session tries
// to reconnect at least every Refresh (not sion's default backoff of up
// to 5 s), so that a site manager that returns hears from every proxy
// within about one Refresh — and a representative proxy claims its role
// back within the new manager's Timeout.
func (m *managerLink) dial() (*sion.Session, error) {
	p := m.p
	ctx, cancel := p.context(p.cfg.RequestTimeout)
	defer cancel()
	sess, err := sion.Dial(ctx, p.cfg.Transport, p.cfg.Manager, sion.SessionConfig{
		Name: p.cfg.Name, SharedKey: p.cfg.ManagerKey, Logger: p.log,
		Reconnect: sion.ReconnectPolicy{MinBackoff: min(sion.DefaultMinBackoff, p.cfg.Refresh), MaxBackoff: p.cfg.Refresh, OnChange: func(ev sion.ConnectionEvent) {
			m.away.Store(!ev.Connected)
			if ev.Connected {
				select {
				case m.kick <- struct{}{}:
				default:
				}
			}
		}},
	})
	if err != nil {
		return nil, err
	}
	answers := fmt.Sprintf("{type ⊑ %s; proxy == %s}", AnswerType, strconv.Quote(p.cfg.Name))
	if _, err := sess.Subscribe(ctx, answers, sion.WithQueue(1024), sion.WithHandler(m.onAnswer)); err != nil {
		sess.Close()
		return nil, err
	}
	if _, err := sess.Subscribe(ctx, "{type ⊑ "+ChangeType+"}", sion.WithQueue(DefaultQueue), sion.WithHandler(m.onChange),
		sion.WithSlowConsumer(func(sion.SubscriptionStats) { m.lostChanges() })); err != nil {
		sess.Close()
		return nil, err
	}
	return sess, nil
}

// close ends the session.
func (m *managerLink) close() {
	m.mu.Lock()
	m.closed = true
	sess := m.sess
	m.mu.Unlock()
	if sess != nil {
		sess.Close()
	}
}

// registration returns the proxy's registration, for a request; p.mu
// must be held.
func (p *Proxy) registrationLocked() request {
	p.regSeq++
	return request{
		Site: p.cfg.Site, Addr: p.cfg.Addr, Switches: p.cfg.Switches, Representative: p.dir.isRep, Known: p.dir.own.Representative,
		Published: slices.Sorted(maps.Keys(p.published)), Subscribed: slices.Sorted(maps.Keys(p.subscribed)), Seq: p.regSeq,
	}
}

// request sends a request of kind about types and waits for the answer,
// which it applies to the directory; errManagerAway or ctx's error when
// none comes within RequestTimeout.
func (m *managerLink) request(ctx context.Context, kind string, types []string) (answer, error) {
	return m.send(ctx, kind, types, func(*request) {})
}

// send is request with a last word on the request (fill).
func (m *managerLink) send(ctx context.Context, kind string, types []string, fill func(*request)) (answer, error) {
	p := m.p
	p.counts.managerRequests.Add(1)
	p.mu.Lock()
	r := p.registrationLocked()
	p.mu.Unlock()
	r.Types = types
	fill(&r)
	m.mu.Lock()
	sess := m.sess
	m.next++
	n := m.next
	var ch chan answer
	if kind != kindAck {
		ch = make(chan answer, 1)
		m.pending[n] = ch
	}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.pending, n)
		m.mu.Unlock()
	}()
	fail := func(err error) (answer, error) {
		p.counts.managerFailures.Add(1)
		return answer{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	if sess == nil {
		// A proxy just made waits for its first session with the manager
		// (bounded): its first answers should not be guesses.
		select {
		case <-m.dialled:
			m.mu.Lock()
			sess = m.sess
			m.mu.Unlock()
		case <-ctx.Done():
		}
	}
	if sess == nil || m.away.Load() {
		return fail(errManagerAway)
	}
	ev, err := event(RequestType, r, ontology.Attr{Name: "proxy", Value: ontology.String(p.cfg.Name)},
		ontology.Attr{Name: "kind", Value: ontology.String(kind)}, ontology.Attr{Name: "req", Value: ontology.Int(n)})
	if err != nil {
		return fail(err)
	}
	if err := sess.Publish(ctx, ev); err != nil {
		return fail(fmt.Errorf("%w: %w", errManagerAway, err))
	}
	if ch == nil {
		return answer{}, nil
	}
	select {
	case a := <-ch:
		m.apply(a, kind, types, registered(&r, kind))
		if a.Error != "" {
			p.counts.managerRefusals.Add(1)
		}
		return a, nil
	case <-ctx.Done():
		return fail(fmt.Errorf("%w: no answer to request %d: %w", errManagerAway, n, ctx.Err()))
	}
}

// registered returns the event types the site manager registers at the
// site with request r of kind: those published, and those asked about
// by a publish.
func registered(r *request, kind string) []string {
	if kind == kindPublish {
		return slices.Concat(r.Published, r.Types)
	}
	return r.Published
}

// onAnswer hands an answer to the request waiting for it, and takes a
// notice that a change settled (answer.Settled; it answers no request).
func (m *managerLink) onAnswer(d sion.Delivery) {
	var a answer
	if err := json.Unmarshal(d.Event.Data, &a); err != nil {
		m.p.log.Warn("site: malformed answer from the site manager", "proxy", m.p.cfg.Name, "err", err)
		return
	}
	n := attrInt(d.Event, "req")
	if n == 0 && a.Settled != 0 {
		m.p.settledNotice(a.Epoch, a.Settled, a.Complete)
		return
	}
	m.mu.Lock()
	ch := m.pending[n]
	m.mu.Unlock()
	if ch != nil {
		select {
		case ch <- a:
		default:
		}
	}
}

// apply takes what an answer to a request of kind about types says — of
// the proxy's own site, where it publishes, (subscribe) which sites
// publish types, and which of the types it publishes (registered, now
// known to the manager) to hold — and then lays over it the changes the
// proxy received that the answer does not hold yet: an answer made
// before a change may arrive after it, and must not undo it.
func (m *managerLink) apply(a answer, kind string, types, registered []string) {
	p := m.p
	m.newEpoch(a.Epoch)
	p.young.Store(a.Young)
	if a.Error != "" {
		return
	}
	p.mu.Lock()
	for _, t := range registered {
		delete(p.holds.unregistered, t)
	}
	if a.Hold != 0 {
		p.startHoldLocked(a.Epoch, a.Hold, a.HoldTypes, a.HoldFor)
	}
	p.setOwnLocked(a.Own)
	if p.dir.isRep != a.Representative {
		p.log.Info("site: representative proxy role", "proxy", p.cfg.Name, "site", p.cfg.Site, "representative", a.Representative)
	}
	p.dir.isRep = a.Representative
	if a.Publish != nil {
		e := *a.Publish
		p.dir.publish = &e
	}
	if kind == kindSubscribe {
		for _, t := range types {
			p.dir.sites[t] = nil
		}
		for _, e := range a.Sites {
			for _, t := range e.Types {
				p.dir.sites[t] = append(p.dir.sites[t], withoutTypes(e))
			}
		}
	}
	whole := p.replayLocked(a.Epoch, a.Change)
	p.mu.Unlock()
	if !whole {
		m.lostChanges()
	}
}

// maxChangeLog bounds the changes a proxy keeps to lay over answers made
// before them (Proxy.changes).
const maxChangeLog = 256

// recordLocked keeps change c to lay over answers made before it; p.mu
// must be held.
func (p *Proxy) recordLocked(c change) {
	if len(p.changes) > 0 && p.changes[0].Epoch != c.Epoch {
		p.changes, p.forgot = nil, 0 // a new manager numbers its changes from 1
	}
	if len(p.changes) == maxChangeLog {
		p.forgot = p.changes[0].Change
		p.changes = slices.Delete(p.changes, 0, 1)
	}
	p.changes = append(p.changes, c)
}

// replayLocked applies again the changes of epoch later than change
// after — those an answer made after change after does not hold — and
// reports false when some of them are no longer kept (the caller forgets
// the cache: lostChanges); p.mu must be held.
func (p *Proxy) replayLocked(epoch uint64, after int64) bool {
	if len(p.changes) == 0 || p.changes[0].Epoch != epoch {
		return true
	}
	if p.forgot > after {
		return false
	}
	for _, c := range p.changes {
		if c.Change > after {
			p.applyChangeLocked(c)
		}
	}
	return true
}

// applyChangeLocked applies change c to the cached directory; p.mu must
// be held.
func (p *Proxy) applyChangeLocked(c change) {
	e := withoutTypes(c.Entry)
	if c.Site == p.cfg.Site {
		p.setOwnLocked(e)
		p.dir.isRep = e.Representative == p.cfg.Addr
	} else if p.dir.publish != nil && p.dir.publish.ID == c.Site {
		p.dir.publish = &e
	}
	for t, es := range p.dir.sites {
		i := slices.IndexFunc(es, func(x siteEntry) bool { return x.ID == c.Site })
		switch {
		case i >= 0:
			es[i] = e
		case slices.Contains(c.Types, t) || (t == "*" && len(c.Types) > 0):
			p.dir.sites[t] = append(es, e)
		}
	}
}

// newEpoch notes the site manager's epoch; a new one means it restarted,
// and what the proxy cached from before may have missed changes
// announced while its session was being opened anew: it is forgotten, and
// every subscription asks again.
func (m *managerLink) newEpoch(epoch uint64) {
	m.mu.Lock()
	restarted := m.epoch != 0 && m.epoch != epoch
	m.epoch = epoch
	m.mu.Unlock()
	if restarted {
		m.p.log.Info("site: the site manager restarted", "proxy", m.p.cfg.Name)
		m.p.releaseHolds() // the changes held for are not the new manager's
		m.lostChanges()
	}
}

// setOwnLocked takes the site manager's entry for the proxy's own site;
// p.mu must be held.
func (p *Proxy) setOwnLocked(e siteEntry) {
	if len(e.Switches) == 0 {
		e.Switches = p.cfg.Switches
	}
	e.Types = nil
	if !slices.Equal(e.Switches, p.dir.own.Switches) {
		p.kick()
	}
	p.dir.own = e
	if p.dir.publish != nil && p.dir.publish.ID == e.ID {
		p.dir.publish = &e
	}
}

// onChange applies a change the site manager announced to the cached
// directory, and has the subscriptions placed again; a change that
// brings an event type some subscription needs is acknowledged once they
// are (the manager holds the first publish of the type until then).
func (m *managerLink) onChange(d sion.Delivery) {
	p := m.p
	var c change
	if err := json.Unmarshal(d.Event.Data, &c); err != nil {
		p.log.Warn("site: malformed change from the site manager", "proxy", p.cfg.Name, "err", err)
		return
	}
	m.newEpoch(c.Epoch)
	p.mu.Lock()
	p.recordLocked(c)
	p.applyChangeLocked(c)
	need := false
	for _, t := range c.Types {
		if p.subscribed[t] > 0 {
			need = true
		}
	}
	need = need || (p.subscribed["*"] > 0 && len(c.Types) > 0)
	p.mu.Unlock()
	if need {
		addrs := slices.Clone(c.Entry.Switches)
		if c.Entry.Representative != "" {
			addrs = append(addrs, c.Entry.Representative)
		}
		m.mu.Lock()
		if m.ackEpoch != c.Epoch {
			clear(m.acks) // the last manager's: the new one does not know them
			m.ackEpoch = c.Epoch
		}
		m.acks[c.Change] = addrs
		m.mu.Unlock()
	}
	p.kick()
}

// lostChanges: changes were dropped (the proxy fell behind): forget the
// cache, so that every subscription asks the manager again.
func (m *managerLink) lostChanges() {
	p := m.p
	p.mu.Lock()
	clear(p.dir.sites)
	for _, fs := range p.subs {
		fs.fresh = true
	}
	p.mu.Unlock()
	p.kick()
}

// acknowledge tells the site manager that the subscriptions were placed
// again after changes of its epoch: one request for all of them. Those
// not sent are kept (with their sites' addresses, from acks) for the next
// placement.
func (m *managerLink) acknowledge(ctx context.Context, epoch uint64, changes []int64, acks map[int64][]string) {
	for part := range slices.Chunk(changes, maxListLen) {
		if _, err := m.send(ctx, kindAck, nil, func(r *request) { r.Changes, r.Epoch = part, epoch }); err != nil {
			m.p.log.Warn("site: changes not acknowledged; trying again after the next placement", "proxy", m.p.cfg.Name, "changes", part, "err", err)
			for _, c := range part {
				m.keepAck(epoch, c, acks[c])
			}
		}
	}
}

// takeAcks returns the changes to acknowledge, with their sites'
// addresses, and their epoch, and forgets them.
func (m *managerLink) takeAcks() (uint64, map[int64][]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.acks
	m.acks = map[int64][]string{}
	return m.ackEpoch, a
}

// keepAck takes back change c of epoch, whose site's addresses are
// addrs, to acknowledge after the next placement.
func (m *managerLink) keepAck(epoch uint64, c int64, addrs []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ackEpoch == epoch {
		m.acks[c] = addrs
	}
}

// unreachable reports a representative proxy the proxy could not reach,
// at most once a second each.
func (m *managerLink) unreachable(addr string) {
	m.mu.Lock()
	if time.Since(m.reported[addr]) < time.Second || m.closed {
		m.mu.Unlock()
		return
	}
	m.reported[addr] = time.Now()
	if len(m.reported) > 1024 {
		clear(m.reported)
	}
	m.p.wg.Go(func() { // under mu, before close: Close waits for it
		ctx, cancel := m.p.context(m.p.cfg.RequestTimeout)
		defer cancel()
		m.send(ctx, kindRegister, nil, func(r *request) { r.Unreachable = addr })
	})
	m.mu.Unlock()
}

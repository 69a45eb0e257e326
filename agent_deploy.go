package sion

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
)

// The agent's loop: it applies what the switches report to the model and
// deploys what changes, one deployment at a time (S2 Fig. 3A–3C, 4).

// agentRequest is a subscription or advertisement waiting for the
// agent's verdict.
type agentRequest struct {
	sw     string
	key    uint64
	advert bool
	cons   consKey
	what   string // for the record
	known  bool   // it completed a switch's Model: state, perhaps granted already
	typ    string // an advertisement's type
}

// deployment is the deployment in flight.
type deployment struct {
	id       uint64
	reqs     []agentRequest
	setB     []*modelFilter
	changed  []dirKey
	old, new map[dirKey][]string
	bag      map[uint64][]uint64
	send     map[uint64]bool
	confirm  map[uint64]bool
	switches []string                   // those with a part in it
	parts    map[string]*linkctl.Deploy // their parts, by switch
	reached  map[string]bool            // those sent their part
	timer    *time.Timer
	start    time.Time
}

// loop is the agent's one goroutine that owns the model.
func (a *Agent) loop() {
	for {
		var timeout <-chan time.Time
		if a.cur != nil {
			timeout = a.cur.timer.C
		}
		select {
		case in := <-a.in:
			a.mu.Lock()
			a.take(in)
			for more := true; more; {
				select {
				case in := <-a.in:
					a.take(in)
				default:
					more = false
				}
			}
			if a.ready {
				a.step()
			}
			a.publish()
			a.mu.Unlock()
		case <-timeout:
			a.mu.Lock()
			a.finish(fmt.Errorf("not every network filter confirmed its new constraint within %v (S2 timer)", a.timeout))
			a.step()
			a.publish()
			a.mu.Unlock()
		case <-a.life.Done():
			a.mu.Lock()
			if a.cur != nil {
				a.cur.timer.Stop()
			}
			a.mu.Unlock()
			return
		}
	}
}

// take handles one input: Detected and the state of connections at once,
// model changes now or, while a deployment is in flight, after it. mu
// must be held.
func (a *Agent) take(in agentInput) {
	if in.ready {
		a.ready = true
		return
	}
	switch m := in.msg.(type) {
	case *linkctl.Detected:
		if a.cur != nil && m.Deployment == a.cur.id {
			if _, ok := a.cur.bag[m.Filter]; ok {
				a.cur.confirm[m.Filter] = true
			}
		}
		return
	case *linkctl.Model:
		a.links[in.sw] = in.link
		// A switch that connects while a deployment waits for it gets its
		// part now.
		if d := a.cur; d != nil && d.parts[in.sw] != nil && !d.reached[in.sw] {
			a.sendDeploy(in.sw, in.link, d.parts[in.sw])
			d.reached[in.sw] = true
		}
		// Number deployments above whatever the switch carried out: it
		// ignores a Deploy numbered below (an agent that restarts).
		a.dep = max(a.dep, m.Deployment)
	}
	if in.ended {
		if a.links[in.sw] == in.link {
			delete(a.links, in.sw)
		}
	}
	a.queue = append(a.queue, in)
}

// step finishes the deployment in flight if every confirm flag is set,
// and starts the next when none is in flight. mu must be held.
func (a *Agent) step() {
	if a.cur != nil && a.confirmed() {
		a.finish(nil)
	}
	if a.cur != nil {
		return
	}
	reqs, touched := a.apply()
	a.deploy(reqs, touched)
}

// apply applies the queued changes to the model and returns the requests
// among them and the directions whose optimal constraint may differ from
// the deployed one. mu must be held.
func (a *Agent) apply() ([]agentRequest, []dirKey) {
	md := a.md
	queue := a.queue
	a.queue = nil
	all := false
	for _, in := range queue {
		s := md.sw(in.sw)
		switch m := in.msg.(type) {
		case *linkctl.Model:
			s.connected = true
			s.links = map[string]bool{}
			for _, l := range m.Links {
				s.links[l.Peer] = true
			}
			md.linksChanged()
			// Its advertisements and subscriptions follow (in.follow),
			// applied below as changes.
			s.ads = map[uint64]modelAd{}
			s.subs = map[uint64]modelSub{}
			for _, c := range m.Constraints {
				mf := md.dir(dirKey{in.sw, c.Peer})
				mf.deployed = slices.Sorted(slices.Values(c.Filters))
				mf.unsure, mf.sent = mf.sent, false
			}
			all = true
		case *linkctl.ModelChange:
			if m.Op == linkctl.ChangeLinkUp || m.Op == linkctl.ChangeLinkDown {
				s.links[m.Peer] = m.Op == linkctl.ChangeLinkUp
				if !s.links[m.Peer] {
					delete(s.links, m.Peer)
				}
				// The switch's end of a link that came up, or went, holds
				// no network filter: whatever was deployed there is gone.
				// Unless a Deploy sent before this report was applied
				// reached the link after it came up.
				if mf := md.dirs[dirKey{in.sw, m.Peer}]; mf != nil {
					mf.deployed = nil
					if m.Op == linkctl.ChangeLinkUp {
						mf.unsure, mf.sent = mf.sent, false
					}
				}
				md.linksChanged()
				all = true
			}
		}
		if in.ended {
			s.connected = false // its links now count as its neighbours report them
			md.linksChanged()
			all = true
		}
	}
	adj := md.adjacency()
	var reqs []agentRequest
	var touched, stale []dirKey // stale: to recompute from their sides
	for d := range a.dirty {
		touched = append(touched, d)
	}
	clear(a.dirty)
	var changes []agentInput // the changes, a Model's completion included
	for _, in := range queue {
		for _, c := range in.follow {
			changes = append(changes, agentInput{sw: in.sw, msg: c, snapshot: true})
		}
		if _, ok := in.msg.(*linkctl.ModelChange); ok {
			changes = append(changes, in)
		}
	}
	for _, in := range changes {
		m := in.msg.(*linkctl.ModelChange)
		s := md.sw(in.sw)
		switch m.Op {
		case linkctl.ChangeSubscribe:
			f, err := filter.Compile(m.Text)
			if err != nil {
				a.verdictTo(in.sw, m.Key, false, fmt.Sprintf("the agent cannot read filter %q: %v", m.Text, err))
				continue
			}
			c := consKey{in.sw, m.Session}
			touched = append(touched, md.addSub(adj, c, m.Name, m.Key, f)...)
			q := a.subRequest(in.sw, m.Key, m.Session, m.Name, m.Text)
			q.known = in.snapshot
			reqs = append(reqs, q)
		case linkctl.ChangeCancel:
			if sub, ok := s.subs[m.Key]; ok {
				delete(s.subs, m.Key)
				md.forget(consKey{in.sw, sub.session})
				stale = append(stale, md.pathsBetween(md.producersOf(adj, sub.f), []string{in.sw})...)
			}
			reqs = slices.DeleteFunc(reqs, func(q agentRequest) bool { return !q.advert && q.sw == in.sw && q.key == m.Key })
		case linkctl.ChangeAdvertise:
			s.ads[m.Key] = modelAd{session: m.Session, typ: m.Text, attrs: m.Attrs}
			stale = append(stale, md.pathsBetween([]string{in.sw}, md.consumersOf(adj, m.Text))...)
			// A direction that passed everything its side made may not
			// pass everything of the new type.
			stale = append(stale, md.awayFrom(adj, in.sw, func(want []string) bool { return slices.Equal(want, []string{passAll}) })...)
			reqs = append(reqs, agentRequest{sw: in.sw, key: m.Key, advert: true, typ: m.Text, known: in.snapshot, what: fmt.Sprintf("advertise %s/%s %s", in.sw, m.Name, m.Text)})
		case linkctl.ChangeWithdraw:
			if ad, ok := s.ads[m.Key]; ok {
				delete(s.ads, m.Key)
				stale = append(stale, md.pathsBetween([]string{in.sw}, md.consumersOf(adj, ad.typ))...)
				// A direction may now pass everything its side makes.
				stale = append(stale, md.awayFrom(adj, in.sw, func(want []string) bool { return len(want) > 0 })...)
			}
			reqs = slices.DeleteFunc(reqs, func(q agentRequest) bool { return q.advert && q.sw == in.sw && q.key == m.Key })
		}
	}
	for _, in := range queue {
		if _, ok := in.msg.(*linkctl.Model); ok {
			md.forgetIdle(in.sw) // consumers whose sessions have no subscription left
		}
	}
	if all {
		stale = md.allDirs(adj)
	}
	md.recompute(adj, stale)
	return reqs, append(touched, stale...)
}

func (a *Agent) subRequest(sw string, key, session uint64, name, text string) agentRequest {
	return agentRequest{sw: sw, key: key, cons: consKey{sw, session}, what: fmt.Sprintf("subscribe %s/%s %s", sw, name, text)}
}

// deploy starts the deployment of the directions among touched whose
// optimal constraint differs from the deployed one, answering reqs (S2
// Fig. 3A: steps 53–58 and procedure A; Fig. 3B: steps 69–78). mu must
// be held.
func (a *Agent) deploy(reqs []agentRequest, touched []dirKey) {
	md := a.md
	adj := md.adjacency()
	d := &deployment{old: map[dirKey][]string{}, new: map[dirKey][]string{}, bag: map[uint64][]uint64{}, send: map[uint64]bool{}, confirm: map[uint64]bool{}, reqs: reqs, start: time.Now()}
	seen := map[dirKey]bool{}
	for _, k := range touched {
		mf := md.dirs[k]
		if seen[k] || mf == nil || !mf.unsure && slices.Equal(mf.want, mf.deployed) || !md.linked(k.from, k.to) {
			continue
		}
		// A switch the agent has not heard from gets no part: it could
		// neither be told nor answer. Nor does one it is not connected to
		// now when its change only narrows, which no request needs: it is
		// deployed when the switch connects again (its Model).
		if md.sws[k.from] == nil || a.links[k.from] == nil && md.covers(mf.deployed, mf.want) {
			continue
		}
		seen[k] = true
		d.changed = append(d.changed, k)
		d.old[k], d.new[k] = mf.deployed, mf.want
		d.setB = append(d.setB, mf)
	}
	if len(d.changed) == 0 && len(reqs) == 0 {
		return
	}
	// Set B: the changed network filters and the requesting consumers'
	// filters (adjacent to them).
	inB := map[uint64]bool{}
	for _, mf := range d.setB {
		inB[mf.id] = true
	}
	for _, q := range reqs {
		var sinks []*modelFilter
		if q.advert {
			sinks = a.sinksOf(adj, q, d)
		} else if cf := md.cons[q.cons]; cf != nil {
			sinks = []*modelFilter{cf}
		}
		for _, cf := range sinks {
			if !inB[cf.id] {
				inB[cf.id] = true
				d.setB = append(d.setB, cf)
			}
		}
	}
	slices.SortFunc(d.setB, func(x, y *modelFilter) int { return cmp.Compare(x.id, y.id) })
	a.dep++
	d.id = a.dep
	a.deployments.Add(1)
	// Procedure A (Fig. 4), only when a contract is to be granted: for
	// each target, its downstream filters of set B get its identifier in
	// their bags, and it gets its send flag.
	if len(reqs) > 0 {
		for _, f := range d.setB {
			for _, down := range md.downstream(adj, f) {
				if inB[down.id] {
					d.bag[down.id] = append(d.bag[down.id], f.id)
					d.send[f.id] = true
				}
			}
		}
	}
	// Pass the constraints (steps 71–75), the send flags (76–82) and the
	// relays that carry each bleeder to the bags it is in.
	msgs := map[string]*linkctl.Deploy{}
	msg := func(sw string) *linkctl.Deploy {
		if msgs[sw] == nil {
			msgs[sw] = &linkctl.Deploy{Deployment: d.id}
		}
		return msgs[sw]
	}
	for _, f := range d.setB {
		df := linkctl.DeployFilter{ID: f.id, Bag: d.bag[f.id], Send: d.send[f.id]}
		host := f.cons.sw
		if f.consumer {
			df.Session = f.cons.session
		} else {
			host, df.Peer, df.Constraint = f.dir.from, f.dir.to, f.want
		}
		m := msg(host)
		m.Filters = append(m.Filters, df)
	}
	for _, f := range d.setB {
		if !d.send[f.id] {
			continue
		}
		for sw, to := range a.relays(adj, d, f) {
			m := msg(sw)
			m.Relays = append(m.Relays, linkctl.Relay{Bleeder: f.id, To: to})
		}
	}
	d.parts, d.reached = msgs, map[string]bool{}
	for _, sw := range slices.Sorted(maps.Keys(msgs)) {
		d.switches = append(d.switches, sw)
		if l := a.links[sw]; l != nil {
			a.sendDeploy(sw, l, msgs[sw])
			d.reached[sw] = true
		}
	}
	d.timer = time.NewTimer(a.timeout)
	a.cur = d
	if a.confirmed() {
		a.finish(nil)
	}
}

// sinksOf returns the consumer filters an advertisement's deployment
// must hear from before it is granted: those downstream of a changed
// direction whose subscriptions may match the advertised type.
func (a *Agent) sinksOf(adj map[string][]string, q agentRequest, d *deployment) []*modelFilter {
	md := a.md
	var out []*modelFilter
	for _, k := range d.changed {
		for _, f := range md.downstream(adj, md.dirs[k]) {
			if !f.consumer {
				continue
			}
			for _, sub := range md.sws[f.cons.sw].subs {
				if sub.session == f.cons.session && filterOverlaps(md.o, sub.f.Type(), q.typ) {
					out = append(out, f)
					break
				}
			}
		}
	}
	return out
}

// relays returns, per switch, where the bleeder of network filter f goes
// on to so that it reaches every model filter whose bag holds it: the
// links of the paths from f's downstream switch to those filters'
// switches.
func (a *Agent) relays(adj map[string][]string, d *deployment, f *modelFilter) map[string][]string {
	targets := map[string]bool{}
	for id, bag := range d.bag {
		if slices.Contains(bag, f.id) {
			mf := a.md.byID[id]
			if mf.consumer {
				targets[mf.cons.sw] = true
			} else {
				targets[mf.dir.from] = true
			}
		}
	}
	out := map[string][]string{}
	for t := range targets {
		p := a.md.path(f.dir.to, t)
		for _, k := range p {
			if !slices.Contains(out[k.from], k.to) {
				out[k.from] = append(out[k.from], k.to)
			}
		}
	}
	for sw := range out {
		slices.Sort(out[sw])
	}
	return out
}

// confirmed reports whether every model filter of the deployment in
// flight with a non-empty bag has its confirm flag set (step 83).
func (a *Agent) confirmed() bool {
	for id, bag := range a.cur.bag {
		if len(bag) > 0 && !a.cur.confirm[id] {
			return false
		}
	}
	return true
}

// finish ends the deployment in flight: with err nil it grants its
// requests (step 84); otherwise it refuses them (step 89), takes them out
// of the model and rolls the network filters back (step 90). mu must be
// held.
func (a *Agent) finish(err error) {
	d := a.cur
	a.cur = nil
	d.timer.Stop()
	md := a.md
	var verdicts []agentRequest
	refusal := ""
	if err == nil {
		for _, k := range d.changed {
			// A switch the agent is not connected to has not changed; it
			// says what it has when it connects (Model).
			if d.reached[k.from] {
				md.dirs[k].deployed = md.dirs[k].want
				md.dirs[k].unsure = false
			}
		}
		verdicts = d.reqs
		a.granted.Add(uint64(len(d.reqs)))
	} else {
		refusal = fmt.Sprintf("agent %q: %v", a.cfg.Name, err)
		verdicts = d.reqs
		a.refused.Add(uint64(len(d.reqs)))
		for _, q := range d.reqs {
			if q.known {
				// It completed a Model: the switch may have granted it
				// before (an earlier agent did) and keeps it, ignoring
				// this refusal; if it was waiting, the switch takes it
				// out and reports that (Cancel, Withdraw).
				continue
			}
			s := md.sw(q.sw)
			if q.advert {
				delete(s.ads, q.key)
			} else {
				delete(s.subs, q.key)
			}
		}
		// Roll back: the old constraints, at once, and nothing pending.
		a.dep++
		back := map[string]*linkctl.Deploy{}
		for _, sw := range d.switches {
			back[sw] = &linkctl.Deploy{Deployment: a.dep}
		}
		for _, k := range d.changed {
			m := back[k.from]
			m.Filters = append(m.Filters, linkctl.DeployFilter{ID: md.dirs[k].id, Peer: k.to, Constraint: d.old[k]})
			a.dirty[k] = true
		}
		for _, sw := range d.switches {
			if l := a.links[sw]; l != nil {
				a.sendDeploy(sw, l, back[sw])
			}
		}
		for _, k := range d.changed {
			// What it had before, which deployed still says.
			if a.links[k.from] != nil {
				md.dirs[k].unsure = false
			}
		}
		md.recompute(md.adjacency(), d.changed)
	}
	// What it deployed, then the record, then the verdicts: whoever the
	// record or a verdict wakes finds both (Constraints, OnDeployment).
	a.publish()
	if a.cfg.OnDeployment != nil {
		a.cfg.OnDeployment(a.record(d, err))
	}
	for _, q := range verdicts {
		a.verdictTo(q.sw, q.key, q.advert, refusal)
		if err != nil && !q.advert {
			md.forget(q.cons) // after the record, which names it
		}
	}
}

// sendDeploy sends switch sw its part of a deployment, or a roll back,
// over l, and marks the network filters it carries as sent (see
// modelFilter.sent). mu must be held.
func (a *Agent) sendDeploy(sw string, l *agentLink, m *linkctl.Deploy) {
	for _, f := range m.Filters {
		if f.Peer != "" {
			if mf := a.md.dirs[dirKey{sw, f.Peer}]; mf != nil {
				mf.sent = true
			}
		}
	}
	l.send(m)
}

// verdictTo sends a verdict on request key to switch sw.
func (a *Agent) verdictTo(sw string, key uint64, advert bool, refusal string) {
	if l := a.links[sw]; l != nil {
		l.send(&linkctl.Verdict{Key: key, Advert: advert, Error: refusal})
	}
}

// record returns the record of deployment d.
func (a *Agent) record(d *deployment, err error) Deployment {
	r := Deployment{ID: d.id, Granted: err == nil && len(d.reqs) > 0, Err: err, Elapsed: time.Since(d.start)}
	for _, q := range d.reqs {
		r.Requests = append(r.Requests, q.what)
	}
	for _, k := range d.changed {
		r.SetA = append(r.SetA, a.md.dirs[k].name)
	}
	slices.Sort(r.SetA)
	for _, f := range d.setB {
		df := DeploymentFilter{Name: f.name, Send: d.send[f.id], Confirmed: d.confirm[f.id]}
		if !f.consumer {
			df.Old, df.Constraint = d.old[f.dir], d.new[f.dir]
		}
		for _, id := range d.bag[f.id] {
			df.Bag = append(df.Bag, a.md.byID[id].name)
		}
		r.SetB = append(r.SetB, df)
	}
	if err != nil {
		r.Err = errors.New(err.Error())
	}
	return r
}

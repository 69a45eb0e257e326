package site

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
)

// goneLocked marks p unreachable and stops waiting for it; mu must be
// held.
func (m *Manager) goneLocked(p *proxyState) {
	p.reachable = false
	m.log.Info("site: proxy unreachable", "proxy", p.name, "site", p.site, "addr", p.addr)
	for _, st := range m.settling {
		m.ackedLocked(st, p.name, true)
	}
}

// serveLocked updates the directory with request r of proxy name and
// returns the answer, and the change the answer must wait for (nil for
// none); mu must be held.
func (m *Manager) serveLocked(ctx context.Context, s *sion.Session, name, kind string, r *request) (answer, *settle, error) {
	p := m.proxies[name]
	if p != nil && p.sess != s && p.sess != nil && !done(p.sess) {
		return answer{}, nil, fmt.Errorf("site: proxy name %q is registered by another session, still open", name)
	}
	if p != nil && p.sess == s && r.Seq != 0 && r.Seq < p.seq {
		// A registration the proxy took before the one kept, served after
		// it (the proxy sends requests from several goroutines): it says
		// nothing newer, and the proxy is heard from all the same.
		r.Site, r.Addr, r.Switches = p.site, p.addr, p.switches
		r.Published, r.Subscribed = p.published, slices.Sorted(maps.Keys(p.subscribed))
		r.Representative, r.Known = false, "" // what it knew then of the role
	}
	if m.cfg.Authorize != nil && (p == nil || p.site != r.Site || p.addr != r.Addr || !slices.Equal(p.switches, r.Switches)) {
		// Asked with mu held: Authorize must be quick (a table lookup).
		if err := m.cfg.Authorize(ctx, Registration{Proxy: name, Site: r.Site, Addr: r.Addr, Switches: slices.Clone(r.Switches)}); err != nil {
			return answer{}, nil, fmt.Errorf("site: proxy %q of site %q at %s not authorized: %w", name, r.Site, r.Addr, err)
		}
	}
	own, err := m.siteLocked(r.Site)
	if err != nil {
		return answer{}, nil, err
	}
	if p == nil {
		if len(m.proxies) >= m.cfg.MaxProxies && !m.forgetProxyLocked() {
			return answer{}, nil, fmt.Errorf("site: %d proxies, at most %d, all reachable: proxy %q not registered", len(m.proxies), m.cfg.MaxProxies, name)
		}
		p = &proxyState{name: name}
		m.proxies[name] = p
	}
	if p.sess != s || r.Seq > p.seq {
		p.seq = r.Seq
	}
	p.sess = s
	if p.site != "" && p.site != r.Site {
		if old := m.sites[p.site]; old != nil && old.representative == p.addr {
			old.representative = "" // it moved
			m.announceLocked(old, nil, true)
		}
	}
	p.site, p.addr, p.lastSeen, p.reachable = r.Site, r.Addr, time.Now(), true
	p.switches = slices.Clone(r.Switches)
	p.published = r.Published
	p.subscribed = map[string]struct{}{}
	for _, t := range r.Subscribed {
		p.subscribed[t] = struct{}{}
	}
	if kind == kindAck && (r.Epoch == 0 || r.Epoch == m.epoch) {
		p.lagging = false
		for _, c := range append(r.Changes, r.Change) {
			if st := m.settling[c]; st != nil {
				m.ackedLocked(st, name, false)
			}
		}
	}
	moved := false
	if !own.operator && len(r.Switches) > 0 && !slices.Equal(own.switches, r.Switches) {
		own.switches, moved = slices.Clone(r.Switches), true
	}
	if r.Unreachable != "" && r.Unreachable == own.representative {
		if rp := m.proxyAt(own.id, own.representative); rp == nil || time.Since(rp.lastSeen) > m.cfg.Timeout/2 {
			m.log.Info("site: representative proxy reported unreachable and not heard from; replacing it", "site", own.id, "representative", own.representative, "by", name)
			own.representative = ""
		}
	}
	switch {
	case own.representative == r.Addr:
	case own.representative == "" && r.Known != "" && !r.Representative && time.Since(m.started) < m.cfg.Timeout:
		// A manager that restarted: the proxy knows its site's
		// representative proxy, which keeps the role — it claims it
		// when it registers, or reap replaces it when it does not
		// within Timeout — so that no subscription moves.
		own.representative, own.selfRegistered, moved = r.Known, true, true
	case own.representative == "":
		// The first proxy of the site to ask becomes its representative
		// (S4 self-registration).
		own.representative, own.selfRegistered, moved = r.Addr, !r.Representative, true
	case r.Representative && own.selfRegistered && time.Since(m.started) < m.cfg.Timeout:
		// A manager that restarted gave the role to the first proxy that
		// asked; the one that held it before says so within Timeout and
		// takes it back.
		own.representative, own.selfRegistered, moved = r.Addr, false, true
	}
	a := answer{Epoch: m.epoch, Young: m.young(), Own: m.entry(own, nil), Representative: own.representative == r.Addr}
	// The types published at the site whose switches take this proxy's
	// publishes.
	at := own
	if len(own.switches) == 0 && m.cfg.Fallback != "" {
		if fb := m.sites[m.cfg.Fallback]; fb != nil {
			at = fb
		}
	}
	published := r.Published
	if kind == kindPublish {
		published = append(slices.Clone(published), r.Types...)
	}
	var fresh []string
	for _, t := range published {
		if _, ok := at.types[t]; !ok {
			if len(at.types) >= m.cfg.MaxTypesPerSite || m.types >= m.cfg.MaxTypes {
				return answer{}, nil, fmt.Errorf("site: site %q has %d event types (at most %d), all sites %d (at most %d): %q not registered", at.id, len(at.types), m.cfg.MaxTypesPerSite, m.types, m.cfg.MaxTypes, t)
			}
			at.types[t] = struct{}{}
			m.types++
			fresh = append(fresh, t)
		}
	}
	slices.Sort(fresh)
	fresh = slices.Compact(fresh)
	var wait *settle
	if moved && at != own {
		m.announceLocked(own, nil, true)
	}
	if len(fresh) > 0 || (moved && at == own) {
		wait = m.announceLocked(at, fresh, moved && at == own)
	}
	switch kind {
	case kindPublish:
		if len(at.switches) == 0 {
			return answer{}, nil, fmt.Errorf("%w: site %q has no switch, and the fallback site %q none either", ErrNoSwitch, own.id, m.cfg.Fallback)
		}
		e := m.entry(at, nil)
		a.Publish = &e
	case kindSubscribe:
		a.Sites = m.sitesFor(r.Types)
	}
	if kind == kindPublish && wait == nil {
		// A publish of a type whose first publish at the site still waits
		// waits too (and its events are held as long): from another proxy
		// of the site it would overtake the first and reach the switches
		// before the subscriptions.
		wait = m.settlingLocked(at.id, r.Types)
	}
	if wait != nil {
		// The types of the change the proxy publishes: it holds their
		// events while the change settles.
		for _, t := range wait.types {
			if slices.Contains(published, t) {
				a.HoldTypes = append(a.HoldTypes, t)
			}
		}
	}
	if kind != kindPublish && wait != nil {
		// Only a publish waits for a fresh type to settle; a registration
		// that brought one (the proxy published it while the manager was
		// away) is answered at once, and the proxy holds the type's
		// events from then on.
		if len(a.HoldTypes) > 0 {
			wait.holders[name] = true
			a.Hold, a.HoldFor = wait.change, max(m.cfg.HoldTimeout-time.Since(wait.began), 0)
		}
		wait = nil
	}
	a.Change = m.change // after the changes this request itself announced
	return a, wait, nil
}

// settlingLocked returns the latest change still settling that brought
// one of types to site, or nil; mu must be held.
func (m *Manager) settlingLocked(site string, types []string) *settle {
	var out *settle
	for _, st := range m.settling {
		if st.site != site || len(st.waiting) == 0 || (out != nil && st.change < out.change) {
			continue
		}
		if slices.ContainsFunc(types, func(t string) bool { return slices.Contains(st.types, t) }) {
			out = st
		}
	}
	return out
}

// young reports whether the manager started less than Timeout ago:
// proxies may not all have registered again (answer.Young).
func (m *Manager) young() bool { return time.Since(m.started) < m.cfg.Timeout }

// done reports whether session s has ended.
func done(s *sion.Session) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

// forgetSiteLocked forgets a site the operator did not set up and no
// reachable proxy serves, with its proxies, and reports whether there was
// one; mu must be held.
func (m *Manager) forgetSiteLocked() bool {
	served := map[string]bool{}
	for _, p := range m.proxies {
		if p.reachable {
			served[p.site] = true
		}
	}
	for id, st := range m.sites {
		if st.configured || served[id] {
			continue
		}
		maps.DeleteFunc(m.proxies, func(_ string, p *proxyState) bool { return p.site == id })
		m.types -= len(st.types)
		delete(m.sites, id)
		m.log.Info("site: site forgotten to make room", "site", st.id)
		return true
	}
	return false
}

// forgetProxyLocked forgets the proxy unreachable for longest, and
// reports whether there was one; mu must be held.
func (m *Manager) forgetProxyLocked() bool {
	var old *proxyState
	for _, p := range m.proxies {
		if !p.reachable && (old == nil || p.lastSeen.Before(old.lastSeen)) {
			old = p
		}
	}
	if old == nil {
		return false
	}
	delete(m.proxies, old.name)
	return true
}

// proxyAt returns the proxy of site that serves at addr, or nil; mu must
// be held.
func (m *Manager) proxyAt(site, addr string) *proxyState {
	for _, p := range m.proxies {
		if p.site == site && p.addr == addr && p.reachable {
			return p
		}
	}
	return nil
}

// entry returns st as the manager tells it, with those of types
// published there (all of them when types is nil).
func (m *Manager) entry(st *siteState, types []string) siteEntry {
	e := siteEntry{ID: st.id, Representative: st.representative, Switches: slices.Clone(st.switches)}
	for _, t := range types {
		if _, ok := st.types[t]; ok || t == "*" {
			e.Types = append(e.Types, t)
		}
	}
	return e
}

// sitesFor returns the sites at which one of types is published ("*":
// any), sorted by ID; mu must be held.
func (m *Manager) sitesFor(types []string) []siteEntry {
	var out []siteEntry
	for _, st := range m.sites {
		var hit []string
		for _, t := range types {
			if _, ok := st.types[t]; ok || (t == "*" && len(st.types) > 0) {
				hit = append(hit, t)
			}
		}
		if len(hit) > 0 && len(st.switches) > 0 {
			e := m.entry(st, nil)
			e.Types = hit
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b siteEntry) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// announceLocked tells every proxy that site st changed — fresh event
// types published there, or (moved) its representative proxy or
// switches — and returns what an answer waiting for the proxies that
// need one of the fresh types waits on (nil when none does); mu must be
// held.
func (m *Manager) announceLocked(st *siteState, fresh []string, moved bool) *settle {
	m.change++
	c := change{Epoch: m.epoch, Change: m.change, Site: st.id, Types: fresh, Moved: moved, Entry: m.entry(st, nil)}
	var wait *settle
	if len(fresh) > 0 {
		// Every reachable proxy whose subscriptions need a fresh type;
		// answers wait for those that are not lagging.
		need := map[string]bool{}
		for _, p := range m.proxies {
			if !p.reachable {
				continue
			}
			_, all := p.subscribed["*"]
			for _, t := range fresh {
				if _, ok := p.subscribed[t]; ok || all {
					need[p.name] = !p.lagging
					break
				}
			}
		}
		if len(need) > 0 {
			wait = newSettle(m.change, st.id, fresh, need)
			m.settling[m.change] = wait
		}
	}
	ev, err := event(ChangeType, c, ontology.Attr{Name: "site", Value: ontology.String(st.id)}, ontology.Attr{Name: "change", Value: ontology.Int(m.change)})
	if err == nil && m.port != nil {
		// Deliver to remote sessions never waits (they have no Block
		// subscriptions); the manager holds mu so that changes go out in
		// order.
		err = m.port.Deliver(context.Background(), ev)
	}
	if err != nil && !errors.Is(err, sion.ErrClosed) {
		m.log.Warn("site: change not announced", "site", st.id, "err", err)
	}
	return wait
}

// reap marks the proxies not heard from for Timeout unreachable, and
// gives the representative role of those that held it to another
// reachable proxy of their site (electLocked).
func (m *Manager) reap() {
	t := time.NewTicker(m.cfg.Timeout / 3)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.mu.Lock()
		var orphaned []*siteState // sites whose representative proxy went
		for _, p := range m.proxies {
			if !p.reachable || time.Since(p.lastSeen) <= m.cfg.Timeout {
				continue
			}
			m.goneLocked(p)
			if st := m.sites[p.site]; st != nil && st.representative == p.addr && !slices.Contains(orphaned, st) {
				orphaned = append(orphaned, st)
			}
		}
		// A representative proxy that a restarted manager kept because
		// its site's proxies knew it, and that did not register within
		// Timeout, goes too.
		if time.Since(m.started) > m.cfg.Timeout {
			for _, st := range m.sites {
				if st.representative != "" && st.selfRegistered && m.proxyAt(st.id, st.representative) == nil && !slices.Contains(orphaned, st) {
					orphaned = append(orphaned, st)
				}
			}
		}
		// Another reachable proxy of the site takes the role at once, so
		// that the other sites' proxies move their subscriptions once,
		// from the old representative to the new, and not first to every
		// switch of the site; with none, the next proxy that asks.
		for _, st := range orphaned {
			st.representative, st.selfRegistered = m.electLocked(st.id), true
			m.log.Info("site: representative proxy unreachable; replaced", "site", st.id, "by", st.representative)
			m.announceLocked(st, nil, true)
		}
		m.giveUpLocked()
		m.mu.Unlock()
	}
}

// electLocked returns the address of the proxy that takes over site id's
// representative role from one that became unreachable: its reachable
// proxy with the lowest name, "" when none is; mu must be held.
func (m *Manager) electLocked(id string) string {
	var best *proxyState
	for _, p := range m.proxies {
		if p.site == id && p.reachable && (best == nil || p.name < best.name) {
			best = p
		}
	}
	if best == nil {
		return ""
	}
	return best.addr
}

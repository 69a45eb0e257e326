package site

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/sion-go/sion/ontology"
)

// settle is a change that brought event types new at a site, which the
// proxies whose subscriptions need one of them have not all acknowledged
// (placed their subscriptions again after it). While it settles, the
// first publish of one of its types at the site is answered once the
// proxies that are not lagging have acknowledged it, or SettleTimeout has
// passed; an answer given before it settled says so (answer.Hold), and
// the proxy holds the events of the types it publishes until the manager
// tells it that the change settled (answer.Settled) — every proxy that
// needs a type acknowledged it, or went unreachable — or HoldTimeout has
// passed since the first publish. (S4 is silent on a subscription that
// is not yet placed where a publish goes: see doc.go, "Publishing".)
type settle struct {
	change int64
	site   string   // where the types were published first
	types  []string // the fresh types
	began  time.Time
	// waiting are the proxies that have not acknowledged the change, by
	// name; true for those answers wait for (they were not lagging), and
	// prompt counts them. ready closes when prompt falls to 0.
	waiting map[string]bool
	prompt  int
	ready   chan struct{}
	// holders are the proxies answered with Hold: they are told when the
	// change settles.
	holders map[string]bool
	// missed: a proxy that needed the change went unreachable before it
	// acknowledged it, or HoldTimeout passed: the events held may have
	// missed its subscribers (answer.Complete is false).
	missed bool
}

// newSettle returns the settle of change c, which brought types to site,
// waiting for the proxies in need (true: not lagging, answers wait for
// it).
func newSettle(c int64, site string, types []string, need map[string]bool) *settle {
	st := &settle{change: c, site: site, types: types, began: time.Now(), waiting: need, ready: make(chan struct{}), holders: map[string]bool{}}
	for _, w := range need {
		if w {
			st.prompt++
		}
	}
	if st.prompt == 0 {
		close(st.ready)
	}
	return st
}

// ackedLocked takes proxy name off st's waiting list — it acknowledged
// the change, or (gone) became unreachable — and ends st when none is
// left; mu must be held.
func (m *Manager) ackedLocked(st *settle, name string, gone bool) {
	w, ok := st.waiting[name]
	if !ok {
		return
	}
	delete(st.waiting, name)
	st.missed = st.missed || gone
	if w {
		st.prompt--
		if st.prompt == 0 {
			close(st.ready)
		}
	}
	if len(st.waiting) == 0 {
		m.settledLocked(st)
	}
}

// expireLocked stops answers waiting for st — SettleTimeout has passed —
// and returns the proxies they waited for, now lagging: not waited for
// again until they acknowledge a change; mu must be held.
func (m *Manager) expireLocked(st *settle) []string {
	var late []string
	for name, w := range st.waiting {
		if !w {
			continue
		}
		st.waiting[name] = false
		late = append(late, name)
		if p := m.proxies[name]; p != nil {
			p.lagging = true
		}
	}
	if st.prompt > 0 {
		st.prompt = 0
		close(st.ready)
	}
	slices.Sort(late)
	return late
}

// settledLocked ends st and tells the proxies that hold events for it;
// mu must be held. Delivered with mu held, the notice follows every
// answer that told a proxy to hold for st.
func (m *Manager) settledLocked(st *settle) {
	if m.settling[st.change] != st {
		return
	}
	delete(m.settling, st.change)
	if st.prompt > 0 {
		st.prompt = 0
		close(st.ready)
	}
	if m.port == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(st.holders)) {
		a := answer{Epoch: m.epoch, Settled: st.change, Complete: !st.missed}
		ev, err := event(AnswerType, a, ontology.Attr{Name: "proxy", Value: ontology.String(name)}, ontology.Attr{Name: "req", Value: ontology.Int(0)})
		if err == nil {
			err = m.port.Deliver(context.Background(), ev) // to a remote session: never waits
		}
		if err != nil {
			m.log.Warn("site: settled change not told", "proxy", name, "change", st.change, "err", err)
		}
	}
}

// giveUpLocked ends the settles that began HoldTimeout ago or more: the
// proxies still waited for have not acknowledged them, and the events
// held for them are published (and counted as unsettled); mu must be
// held.
func (m *Manager) giveUpLocked() {
	for _, st := range m.settling {
		if time.Since(st.began) < m.cfg.HoldTimeout {
			continue
		}
		m.log.Warn("site: change not acknowledged within HoldTimeout; the events held for it are published", "site", st.site, "types", st.types, "waiting", slices.Sorted(maps.Keys(st.waiting)))
		st.missed = true
		m.settledLocked(st)
	}
}

// answerSettled delivers answer a to request n of proxy name once settle
// st lets it: when the proxies it waits for have acknowledged the change,
// or SettleTimeout has passed. An answer given while st still settles
// tells the proxy to hold the events of the types (answer.Hold) until it
// is told that st settled.
func (m *Manager) answerSettled(name string, n int64, a answer, st *settle) {
	t := time.NewTimer(m.cfg.SettleTimeout)
	defer t.Stop()
	select {
	case <-st.ready:
	case <-t.C:
		m.mu.Lock()
		late := m.expireLocked(st)
		m.mu.Unlock()
		if len(late) > 0 {
			m.log.Warn("site: change not acknowledged in time by every proxy that needs it; answering, the events held until it is", "proxy", name, "waiting", late)
		}
	case <-m.stop:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.SettleTimeout)
	defer cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.settling[st.change] == st {
		st.holders[name] = true
		a.Hold, a.HoldFor = st.change, max(m.cfg.HoldTimeout-time.Since(st.began), 0)
	}
	// With mu held, so that the notice that st settled follows it
	// (settledLocked); to a remote session it never waits.
	if err := m.answer(ctx, name, n, a); err != nil {
		m.log.Warn("site: answer not delivered", "proxy", name, "err", err)
	}
}

package site

import (
	"errors"
	"time"

	"github.com/sion-go/sion"
)

// DefaultMaxHeld bounds the events a proxy holds (ProxyConfig.MaxHeld).
const DefaultMaxHeld = 4096

// maxSettledKept bounds the settled notices a proxy remembers (holds.settled).
const maxSettledKept = 4096

// holds are the events a proxy holds: those of event types new at the
// site where it publishes whose change has not settled — a proxy whose
// subscriptions need the type has not acknowledged placing them
// (answer.Hold) — published in order once it has (answer.Settled), or
// after the site manager's HoldTimeout (answer.HoldFor) and a
// RequestTimeout more. (S4 is silent on a subscription not yet placed
// where a publish goes: doc.go, "Publishing".)
type holds struct {
	types map[string]*heldType // p.mu; by event type
	n     int                  // p.mu; events held, over all types
	// settled are the changes of the manager's epoch told settled: such
	// a notice may overtake the answer that says to hold for it (they
	// reach the proxy on one subscription, but are taken on two
	// goroutines). p.mu.
	settled map[int64]bool
	epoch   uint64
	// unregistered are event types published while the site manager did
	// not answer: it has not registered them at the site, so the events
	// may miss subscribers until it has (ProxyStats.Unsettled). p.mu.
	unregistered map[string]bool
}

// heldType is what is held of one event type.
type heldType struct {
	epoch    uint64
	change   int64
	events   []heldEvent
	release  chan struct{} // closed once released (released)
	released bool
	complete bool          // set before release closes: every proxy that needed the change acknowledged it
	drained  chan struct{} // closed once the events held are published and t is no longer held
}

// heldEvent is one event held, with the site of the proxy that handed it
// over ("" for an application's).
type heldEvent struct {
	ev   *sion.Event
	from string
}

func newHolds() holds {
	return holds{types: map[string]*heldType{}, settled: map[int64]bool{}, unregistered: map[string]bool{}}
}

// startHoldLocked starts holding the events of types, which change c of
// the manager's epoch brought to the site where the proxy publishes,
// until the manager tells that c settled or d (answer.HoldFor) and a
// RequestTimeout more have passed; p.mu must be held.
func (p *Proxy) startHoldLocked(epoch uint64, c int64, types []string, d time.Duration) {
	h := &p.holds
	if p.closed || (h.epoch == epoch && h.settled[c]) {
		return
	}
	for _, t := range types {
		if h.types[t] != nil {
			continue
		}
		ht := &heldType{epoch: epoch, change: c, release: make(chan struct{}), drained: make(chan struct{})}
		h.types[t] = ht
		p.wg.Go(func() { p.keep(t, ht, d+p.cfg.RequestTimeout) }) // under mu, before Close: it waits for it
	}
}

// hold holds ev, handed over from site from, if its type is held, and
// reports whether it did. When its type's hold is being released, it
// returns a channel that closes once the events held are published: ev
// follows them. An event of a held type that the hold has no room for
// (ProxyConfig.MaxHeld), or of a type the site manager has not registered
// yet, is published at once and counted in ProxyStats.Unsettled.
func (p *Proxy) hold(ev *sion.Event, from string) (bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := &p.holds
	if h.unregistered[ev.Type] {
		p.counts.unsettled.Add(1)
		return false, nil
	}
	ht := h.types[ev.Type]
	switch {
	case ht == nil:
		return false, nil
	case ht.released:
		return false, ht.drained
	case h.n >= p.cfg.MaxHeld:
		p.counts.unsettled.Add(1)
		return false, nil
	}
	ht.events = append(ht.events, heldEvent{ev, from})
	h.n++
	p.counts.held.Add(1)
	return true, nil
}

// settledNotice releases what is held for change c of the manager's
// epoch, which settled (complete: every proxy that needed it
// acknowledged it).
func (p *Proxy) settledNotice(epoch uint64, c int64, complete bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := &p.holds
	if h.epoch != epoch || len(h.settled) >= maxSettledKept {
		clear(h.settled)
		h.epoch = epoch
	}
	h.settled[c] = true
	for _, ht := range h.types {
		if ht.epoch == epoch && ht.change == c {
			releaseLocked(ht, complete)
		}
	}
}

// releaseHolds releases everything held, as not settled: the site
// manager restarted, and knows nothing of the changes held for.
func (p *Proxy) releaseHolds() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ht := range p.holds.types {
		releaseLocked(ht, false)
	}
}

// releaseLocked releases ht; p.mu must be held.
func releaseLocked(ht *heldType, complete bool) {
	if !ht.released {
		ht.released, ht.complete = true, complete
		close(ht.release)
	}
}

// keep holds the events of type t until ht is released or d has passed,
// then publishes them in order and stops holding t (the publishes of t
// meanwhile wait for it). Events released before the change settled
// everywhere count in ProxyStats.Unsettled, and so do those the proxy's
// Close drops or that fail to publish.
func (p *Proxy) keep(t string, ht *heldType, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ht.release:
	case <-timer.C:
		p.log.Warn("site: the site manager did not tell in time that a change settled; publishing the events held", "proxy", p.cfg.Name, "type", t, "change", ht.change)
	case <-p.stop:
	}
	// Released: nothing is added to ht from now on.
	p.mu.Lock()
	releaseLocked(ht, false) // no-op when released: complete stays
	complete, evs := ht.complete, ht.events
	ht.events = nil
	p.holds.n -= len(evs)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if p.holds.types[t] == ht {
			delete(p.holds.types, t)
		}
		p.mu.Unlock()
		close(ht.drained)
	}()
	if !complete {
		p.counts.unsettled.Add(uint64(len(evs)))
	}
	for i, he := range evs {
		if p.stopping() {
			if complete {
				p.counts.unsettled.Add(uint64(len(evs) - i))
			}
			p.log.Warn("site: proxy closed; events held dropped", "proxy", p.cfg.Name, "type", t, "events", len(evs)-i)
			return
		}
		if err := p.publishHeld(he); err != nil {
			if complete {
				p.counts.unsettled.Add(1)
			}
			if !errors.Is(err, sion.ErrClosed) {
				p.log.Warn("site: event held not published", "proxy", p.cfg.Name, "type", t, "event", he.ev.ID, "err", err)
			}
		}
	}
}

// stopping reports whether the proxy is closing.
func (p *Proxy) stopping() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// publishHeld publishes he where the proxy's publishes of its type go
// now.
func (p *Proxy) publishHeld(he heldEvent) error {
	ctx, cancel := p.context(p.cfg.RequestTimeout)
	defer cancel()
	at, err := p.publishSite(ctx, he.ev.Type)
	if err != nil {
		return err
	}
	return p.forward(ctx, he.from, at, he.ev)
}

package site

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
)

// representative is a proxy's part as its site's representative proxy
// (S4): the broker management information, and the publishes it spread.
type representative struct {
	// brokers is the broker management information (S4 Fig. 13): for
	// each switch of the site, the event types spread there; each entry's
	// channel closes once the subscriptions of other sites' proxies that
	// need the type are placed at the switch.
	brokers map[string]map[string]chan struct{}
}

func newRepresentative() representative {
	return representative{brokers: map[string]map[string]chan struct{}{}}
}

// spread publishes ev at one switch of site at — the one this proxy has
// spread the fewest publishes to, so that the counts per switch differ by
// at most one — skipping switches whose connection is down (a switch that
// died is out of the spread until its session is back). Before a switch
// receives its first event of a type, the subscriptions of other sites'
// proxies that need the type are placed there (S4 Fig. 17 S1703).
func (p *Proxy) spread(ctx context.Context, at siteEntry, ev *sion.Event) error {
	tried := map[string]bool{}
	var errs []error
	for {
		addr := p.pick(at.Switches, tried)
		if addr == "" {
			if len(errs) == 0 {
				return fmt.Errorf("%w: site %q lists no switch", ErrNoSwitch, at.ID)
			}
			return fmt.Errorf("site: no switch of site %q took the publish: %w", at.ID, errors.Join(errs...))
		}
		tried[addr] = true
		if err := p.carry(ctx, addr, ev.Type); err != nil {
			p.unpick(addr)
			errs = append(errs, err)
			continue
		}
		// A switch that has just died holds its session's Publish until
		// the session is back or ctx ends: each attempt gets a part of
		// RequestTimeout, and the next switch is tried. Should the first
		// attempt be delivered after all, the event keeps its ID, and
		// every front drops the second copy. An attempt that was sent
		// keeps its count (the switch may well have taken it: on a loaded
		// machine it mostly has, and counts it in its EventsIn); one that
		// was not sent gives it back.
		actx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout/4)
		err := p.pool.publish(actx, addr, false, ev)
		cancel()
		if err != nil {
			if !errors.Is(err, errUnanswered) {
				p.unpick(addr)
			}
			p.counts.spreadFailures.Add(1)
			errs = append(errs, err)
			if ctx.Err() != nil {
				return errors.Join(errs...)
			}
			continue
		}
		return nil
	}
}

// pick returns the switch of addrs, not tried and not down, with the
// fewest publishes spread to it (the first such in addrs on a tie), and
// counts one more for it; "" when none is left. A switch that was down
// (or new) counts from the fewest of the others when it is back, so that
// it does not take every publish until it has caught up.
func (p *Proxy) pick(addrs []string, tried map[string]bool) string {
	c := &p.counts
	c.spreadMu.Lock()
	defer c.spreadMu.Unlock()
	if c.spread == nil {
		c.spread, c.lead, c.out = map[string]uint64{}, map[string]uint64{}, map[string]bool{}
	}
	load := func(a string) uint64 { return c.spread[a] + c.lead[a] }
	var up []string
	for _, a := range addrs {
		if p.pool.isDown(a) {
			c.out[a] = true
		} else {
			up = append(up, a)
		}
	}
	least, some := uint64(0), false
	for _, a := range up {
		if _, known := c.spread[a]; known && !c.out[a] && (!some || load(a) < least) {
			least, some = load(a), true
		}
	}
	for _, a := range up {
		_, known := c.spread[a]
		if known && !c.out[a] {
			continue
		}
		if !known {
			c.spread[a] = 0
		}
		delete(c.out, a)
		if some && load(a) < least {
			c.lead[a] += least - load(a)
		}
	}
	best := ""
	for _, a := range up {
		if !tried[a] && (best == "" || load(a) < load(best)) {
			best = a
		}
	}
	if best != "" {
		c.spread[best]++
	}
	return best
}

// unpick takes back the count pick gave addr.
func (p *Proxy) unpick(addr string) {
	c := &p.counts
	c.spreadMu.Lock()
	c.spread[addr]--
	c.spreadMu.Unlock()
}

// carry records that switch addr carries event type t (the broker
// management information) and, the first time, places there the
// subscriptions of other sites' proxies that need t; callers that come
// meanwhile wait for it.
func (p *Proxy) carry(ctx context.Context, addr, t string) error {
	p.mu.Lock()
	types := p.rep.brokers[addr]
	if types == nil {
		types = map[string]chan struct{}{}
		p.rep.brokers[addr] = types
	}
	ready, ok := types[t]
	if ok {
		p.mu.Unlock()
		select {
		case <-ready:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ready = make(chan struct{})
	types[t] = ready
	var need []*frontSub
	for _, fs := range p.subs {
		if fs.remote != "" && needs(fs, t) {
			need = append(need, fs)
		}
	}
	p.mu.Unlock()
	defer close(ready)
	var errs []error
	for _, fs := range need {
		if err := p.placeAt(ctx, fs, destination{addr: addr}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		p.mu.Lock()
		if p.rep.brokers[addr][t] == ready {
			delete(p.rep.brokers[addr], t) // the next publish tries again
		}
		p.mu.Unlock()
		return fmt.Errorf("site: subscriptions of other sites not placed at %s: %w", addr, errors.Join(errs...))
	}
	return nil
}

// needs reports whether fs needs events of type t.
func needs(fs *frontSub, t string) bool {
	return slices.Contains(fs.types, t) || slices.Contains(fs.types, filter.AnyType)
}

// placeRemote places fs — the subscription of another site's proxy,
// taken as representative — at the switches of the site that carry one
// of its types (S4 Fig. 19): those the broker management information
// lists, or the site's only switch. A switch that comes to carry a type
// later gets it before its first event of the type (carry).
func (p *Proxy) placeRemote(ctx context.Context, fs *frontSub) error {
	p.mu.Lock()
	var dests []destination
	for _, addr := range p.dir.own.Switches {
		if p.carriesLocked(fs, addr) {
			dests = append(dests, destination{addr: addr})
		}
	}
	p.mu.Unlock()
	return p.moveTo(ctx, fs, dests)
}

// carriesLocked reports whether fs — the subscription of another site's
// proxy — belongs at switch addr of the proxy's site: the site's only
// switch, or one the broker management information says carries one of
// its types; mu must be held.
func (p *Proxy) carriesLocked(fs *frontSub, addr string) bool {
	own := p.dir.own.Switches
	if !slices.Contains(own, addr) {
		return false
	}
	if len(own) == 1 {
		return true
	}
	for t := range p.rep.brokers[addr] {
		if needs(fs, t) {
			return true
		}
	}
	return false
}

// Brokers returns the broker management information of the proxy (S4
// Fig. 13): for each switch of its site, the event types it has spread
// there, sorted. It is empty for a proxy that has never spread a publish.
func (p *Proxy) Brokers() map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]string{}
	for addr, types := range p.rep.brokers {
		out[addr] = slices.Sorted(maps.Keys(types))
	}
	return out
}

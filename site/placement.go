package site

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sion-go/sion/filter"
)

// destination is where a subscription is placed: an address, and whether
// it is a proxy's front.
type destination struct {
	addr  string
	proxy bool
}

// destinations returns where fs goes — its own site's switches directly,
// each remote site's representative proxy (or, Direct, its switches) —
// asking the site manager about the types it has not asked about and
// those newly needed (newly: so that the manager knows before Subscribe
// returns, and holds a first publish of them for it); known is
// false when the manager did not answer and the proxy had no cached
// answer.
func (p *Proxy) destinations(ctx context.Context, fs *frontSub, newly []string) ([]destination, bool) {
	p.mu.Lock()
	ask := slices.Clone(newly)
	for _, t := range fs.types {
		if _, ok := p.dir.sites[t]; !ok && !slices.Contains(ask, t) {
			ask = append(ask, t)
		}
	}
	p.mu.Unlock()
	known := true
	if len(ask) > 0 {
		// The answer goes into the cache as it is applied (apply), with
		// the changes received since it was made laid over it.
		a, err := p.mgr.request(ctx, kindSubscribe, ask)
		known = err == nil && a.Error == ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.destinationsLocked(fs), known
}

// destinationsLocked computes fs's destinations from the directory; mu
// must be held.
func (p *Proxy) destinationsLocked(fs *frontSub) []destination {
	sites := map[string]siteEntry{}
	for _, t := range fs.types {
		for _, e := range p.dir.sites[t] {
			sites[e.ID] = e
		}
	}
	if t := fs.types; len(t) == 1 && t[0] == filter.AnyType {
		for _, es := range p.dir.sites {
			for _, e := range es {
				sites[e.ID] = e
			}
		}
	}
	seen := map[string]bool{}
	var out []destination
	add := func(addr string, proxy bool) {
		if !seen[addr] {
			seen[addr] = true
			out = append(out, destination{addr, proxy})
		}
	}
	// The own site's switches always: its publishes of a type new there
	// reach them first (S4 S1803 delivers to the site's brokers).
	for _, a := range p.dir.own.Switches {
		add(a, false)
	}
	for _, id := range slices.Sorted(maps.Keys(sites)) {
		e := sites[id]
		switch {
		case id == p.cfg.Site:
		case p.cfg.Direct || e.Representative == "" || len(e.Switches) <= 1 || p.pool.isDown(e.Representative):
			// Direct (S4 Fig. 9); a site without a representative proxy
			// now, or whose representative's session is down (until the
			// manager names another: no event of the site is lost
			// meanwhile); a site of one switch, where one message goes
			// either way and this way saves a hop.
			for _, a := range e.Switches {
				add(a, false)
			}
		default:
			add(e.Representative, true)
		}
	}
	return out
}

func withoutTypes(e siteEntry) siteEntry { e.Types = nil; return e }

// moveTo places fs at dests and then releases it where it is no longer
// wanted; it returns the first placement's error, if any, with what it
// did placed (a later replace tries again).
func (p *Proxy) moveTo(ctx context.Context, fs *frontSub, dests []destination) error {
	want := map[string]bool{}
	errc := make([]error, len(dests))
	var wg sync.WaitGroup
	for i, d := range dests {
		want[d.addr] = true
		// At every destination at once: Subscribe waits for the slowest,
		// not for the sum.
		wg.Go(func() {
			if err := p.placeAt(ctx, fs, d); err != nil {
				if d.proxy {
					p.mgr.unreachable(d.addr)
				}
				errc[i] = err
			}
		})
	}
	wg.Wait()
	var errs []error
	for _, err := range errc {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		// Make before break: what is placed stays until every new
		// destination has it (a representative proxy that cannot be
		// reached keeps the subscription at its site's switches).
		p.log.Warn("site: subscription placed in part", "proxy", p.cfg.Name, "filter", fs.f, "err", errors.Join(errs...))
		p.retry()
		if len(errs) == len(dests) {
			return errors.Join(errs...)
		}
		return nil
	}
	if p.young.Load() {
		// A manager that has just started may not know yet what the
		// proxies will register again: keep every place until it does.
		return nil
	}
	p.mu.Lock()
	var drop []string
	for a := range fs.at {
		// A switch that came to carry one of a remote subscription's
		// types meanwhile had it placed there by carry: it stays.
		if !want[a] && (fs.remote == "" || !p.carriesLocked(fs, a)) {
			drop = append(drop, a)
			delete(fs.at, a)
		}
	}
	p.mu.Unlock()
	for _, a := range drop {
		p.pool.release(a, fs.f)
	}
	return nil
}

// placeAt places fs at d unless it is there already or has ended.
func (p *Proxy) placeAt(ctx context.Context, fs *frontSub, d destination) error {
	p.mu.Lock()
	done, live := fs.at[d.addr], p.subs[fs.id] == fs
	p.mu.Unlock()
	if done || !live {
		return nil
	}
	if err := p.pool.place(ctx, d.addr, d.proxy, fs.f); err != nil {
		return err
	}
	p.mu.Lock()
	extra := p.subs[fs.id] != fs || fs.at[d.addr] // ended, or placed there meanwhile
	if !extra {
		fs.at[d.addr] = true
	}
	p.mu.Unlock()
	if extra {
		p.pool.release(d.addr, fs.f)
	}
	return nil
}

// kick asks replaceLoop to place every subscription again.
func (p *Proxy) kick() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// retry asks replaceLoop to place every subscription again, Refresh
// from now: a placement failed, and trying again at once would fail
// again, over and over (a destination cut off refuses at once).
func (p *Proxy) retry() {
	select {
	case p.failed <- struct{}{}:
	default:
	}
}

// replaceLoop places the subscriptions again when the directory changes
// (a site's representative proxy or switches, a type newly published
// somewhere) or, Refresh later, when a placement failed.
func (p *Proxy) replaceLoop() {
	var again <-chan time.Time // set while a retry waits
	for {
		select {
		case <-p.stop:
			return
		case <-p.failed:
			if again == nil {
				again = time.After(p.cfg.Refresh)
			}
			continue
		case <-again:
			again = nil
		case <-p.changed:
		}
		epoch, acks := p.mgr.takeAcks()
		failed := p.replaceAll()
		p.pool.sweep()
		var done []int64
		for c, addrs := range acks {
			if slices.ContainsFunc(addrs, func(a string) bool { return failed[a] }) {
				// Not acknowledged until the subscriptions are placed
				// at the change's site: the first events of its types
				// are held for them meanwhile (a failed placement is
				// retried after Refresh).
				p.mgr.keepAck(epoch, c, addrs)
				continue
			}
			done = append(done, c)
		}
		if len(done) > 0 {
			slices.Sort(done)
			ctx, cancel := p.context(p.cfg.RequestTimeout)
			p.mgr.acknowledge(ctx, epoch, done, acks)
			cancel()
		}
	}
}

// replaceAll moves every subscription to where the directory says it
// goes now, and returns the destinations where one of its applications'
// subscriptions is not placed.
func (p *Proxy) replaceAll() map[string]bool {
	ctx, cancel := p.context(p.cfg.RequestTimeout)
	defer cancel()
	p.mu.Lock()
	subs := slices.Collect(maps.Values(p.subs))
	p.mu.Unlock()
	slices.SortFunc(subs, func(a, b *frontSub) int { return cmp.Compare(a.id, b.id) })
	failed := map[string]bool{}
	for _, fs := range subs {
		if fs.remote != "" {
			if err := p.placeRemote(ctx, fs); err != nil {
				p.log.Warn("site: remote subscription not placed", "proxy", p.cfg.Name, "filter", fs.f, "err", err)
			}
			continue
		}
		p.mu.Lock()
		fresh := fs.fresh
		p.mu.Unlock()
		var dests []destination
		if fresh {
			d, known := p.destinations(ctx, fs, nil)
			p.mu.Lock()
			fs.fresh = !known
			p.mu.Unlock()
			dests = d
		} else {
			p.mu.Lock()
			dests = p.destinationsLocked(fs)
			p.mu.Unlock()
		}
		if err := p.moveTo(ctx, fs, dests); err != nil {
			p.log.Warn("site: subscription not placed", "proxy", p.cfg.Name, "filter", fs.f, "err", err)
		}
		p.notPlaced(fs, dests, failed)
	}
	return failed
}

// notPlaced adds to failed those of dests where fs, not ended, is not
// placed.
func (p *Proxy) notPlaced(fs *frontSub, dests []destination, failed map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.subs[fs.id] != fs {
		return
	}
	for _, d := range dests {
		if !fs.at[d.addr] {
			failed[d.addr] = true
		}
	}
}

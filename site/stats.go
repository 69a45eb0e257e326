package site

import (
	"maps"
	"sync"
	"sync/atomic"
)

// ProxyStats are a proxy's counters over its life (they never decrease)
// and its role now.
type ProxyStats struct {
	// Representative reports whether the proxy is its site's
	// representative proxy now.
	Representative bool
	// Published counts the events its front's sessions published — at a
	// representative proxy, those its site's other proxies handed to it
	// too, so a sum over proxies counts those twice; Direct those it
	// published at a site's only switch; ToRepresentative those it handed
	// to its site's representative proxy; Spread those it spread over its
	// site's switches itself (as representative, or while the
	// representative was unreachable), per switch address (a switch never
	// spread to counts 0 once seen). SpreadFailures counts the attempts
	// of those at a switch that failed, or were not answered within a
	// quarter of ProxyConfig.RequestTimeout; the publish then went to the
	// next switch. One not answered may have been taken all the same (on
	// a loaded machine it mostly has): it counts in Spread at its switch,
	// the next switch's count too, and so the switches' EventsIn may sum
	// to more than the publishes spread.
	Published, Direct, ToRepresentative uint64
	Spread                              map[string]uint64
	SpreadFailures                      uint64
	// LocalSubscribes counts the subscriptions it placed at its own
	// site's switches, for its applications and — as representative — for
	// other sites' proxies; InterSiteSubscribes those it sent to other
	// sites (their representative proxies; their switches with Direct, or
	// while a representative is unreachable) — S4's inter-site subscribe
	// messages. FannedOut counts the subscriptions of other sites' proxies
	// it took as representative. Each counts a message sent: one
	// subscription per distinct filter and destination.
	LocalSubscribes, InterSiteSubscribes, FannedOut uint64
	// InterSiteEvents counts the events that reached it from other sites.
	InterSiteEvents uint64
	// ManagerRequests counts its requests to the site manager;
	// ManagerFailures those not answered (the proxy used its cache);
	// ManagerRefusals those answered with a refusal (the error the proxy
	// returned, or logged).
	ManagerRequests, ManagerFailures, ManagerRefusals uint64
	// Dropped counts the events lost on the subscriptions the proxy holds
	// at switches and other proxies, those ended included: their queues
	// overflowed (ProxyConfig.Queue).
	Dropped uint64
	// Held counts the events the proxy held — of a type new at the site
	// where it publishes, until the proxies whose subscriptions need it
	// had placed them (the package doc, "Publishing") — and published
	// then. Unsettled counts the events that may have missed subscribers
	// because their subscriptions were not placed everywhere yet: held
	// and published when the site manager gave up on a proxy
	// (ManagerConfig.HoldTimeout), or after one went unreachable, or
	// without word from the manager in time, or when it restarted;
	// published at once because the hold was full (ProxyConfig.MaxHeld),
	// or while the manager had not registered their type (it did not
	// answer); spread by the proxy itself because its site's
	// representative proxy did not take them (the other sites'
	// subscriptions are placed at switches through the representative);
	// and held and then lost: the proxy closed first, or their publish
	// failed.
	Held, Unsettled uint64
	// Subscriptions is the number of its front's subscriptions now
	// (applications' and other sites' proxies'); Placed the number of
	// subscriptions it holds now at switches and other proxies (one per
	// distinct filter and destination).
	Subscriptions, Placed int
}

// counters are a proxy's counters.
type counters struct {
	published, direct, toRepresentative  atomic.Uint64
	localSubscribes, interSiteSubscribes atomic.Uint64
	fannedOut, interSiteEvents           atomic.Uint64
	managerRequests, managerFailures     atomic.Uint64
	managerRefusals, dropped             atomic.Uint64
	spreadFailures                       atomic.Uint64
	held, unsettled                      atomic.Uint64
	spreadMu                             sync.Mutex
	spread                               map[string]uint64 // spreadMu; publishes spread, per switch
	lead                                 map[string]uint64 // spreadMu; what a switch that was down counts from
	out                                  map[string]bool   // spreadMu; switches down (or not seen) at the last pick
}

// subscribe counts a subscription sent to addr.
func (c *counters) subscribe(p *Proxy, addr string) {
	if p.isLocal(addr) {
		c.localSubscribes.Add(1)
	} else {
		c.interSiteSubscribes.Add(1)
	}
}

// Stats returns the proxy's counters and role.
func (p *Proxy) Stats() ProxyStats {
	c := &p.counts
	st := ProxyStats{
		Representative: p.isRepresentative(),
		Published:      c.published.Load(), Direct: c.direct.Load(), ToRepresentative: c.toRepresentative.Load(),
		SpreadFailures:  c.spreadFailures.Load(),
		LocalSubscribes: c.localSubscribes.Load(), InterSiteSubscribes: c.interSiteSubscribes.Load(), FannedOut: c.fannedOut.Load(),
		InterSiteEvents: c.interSiteEvents.Load(),
		ManagerRequests: c.managerRequests.Load(), ManagerFailures: c.managerFailures.Load(), ManagerRefusals: c.managerRefusals.Load(),
		Dropped: c.dropped.Load(),
		Held:    c.held.Load(), Unsettled: c.unsettled.Load(),
	}
	c.spreadMu.Lock()
	st.Spread = maps.Clone(c.spread)
	c.spreadMu.Unlock()
	p.mu.Lock()
	st.Subscriptions = len(p.subs)
	p.mu.Unlock()
	var dropped uint64
	st.Placed, dropped = p.pool.placed()
	st.Dropped += dropped // those of subscriptions ended are in counts.dropped
	return st
}

package sion

import (
	"slices"
	"sync/atomic"
	"time"
)

// dropReason says why a subscription lost an event (Stats.Drops).
type dropReason int

const (
	dropQueueFull dropReason = iota // its queue was full: DropNewest, or Block's wait ended
	dropEvicted                     // DropOldest evicted it from its queue
	dropSpool                       // the look-in spool evicted it: full or expired
	dropStream                      // a remote session's stream: full, or ended unconfirmed
	numDropReasons
)

// DropCounts breaks Stats.Dropped down by reason; the four sum to it.
type DropCounts struct {
	// QueueFull counts the events a full subscription queue refused
	// (DropNewest; Block when its wait ended); Evicted those DropOldest
	// evicted from a queue; Spool those a look-in spool evicted (full or
	// expired); Stream those a remote session's stream dropped (full, too
	// large for a frame, or ended before the entity confirmed them).
	QueueFull, Evicted, Spool, Stream uint64
}

// Histogram is a snapshot of a distribution of durations, in buckets
// with fixed upper bounds (Prometheus' layout, non-cumulative).
type Histogram struct {
	// Bounds are the buckets' upper bounds, ascending (inclusive: a
	// duration equal to a bound counts in its bucket).
	Bounds []time.Duration
	// Counts has one count per bucket of Bounds, then one for the
	// durations above the last bound: len(Bounds)+1 entries.
	Counts []uint64
	// Count is the number of durations observed, Sum their total.
	Count uint64
	Sum   time.Duration
}

// matchBounds are the buckets of Switch.MatchTime: 250 ns to 10 ms, about
// ×2.5 apart. A match takes about 100 ns with a few filters and tens of
// µs at a million (bench/).
var matchBounds = []time.Duration{
	250 * time.Nanosecond, 500 * time.Nanosecond,
	time.Microsecond, 2500 * time.Nanosecond, 5 * time.Microsecond,
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 10 * time.Millisecond,
}

// MatchTime returns the distribution of the filter index's match times
// over the switch's life, sampled: one event in 8 that the switch matched
// (published here or arrived over a link or gateway) is timed, so its
// Count is about Stats.EventsIn/8. Timing one match costs about 140 ns on
// the 2-core test machine (BenchmarkMatchTiming), 17 ns per event once
// sampled. Safe for concurrent use.
func (sw *Switch) MatchTime() Histogram { return sw.matchTime.snapshot() }

// matchSampling is how many events the switch matches per match it times
// (Switch.MatchTime).
const matchSampling = 8

// durations is a histogram of durations over matchBounds, updated with
// atomic operations: an observation costs a search of 14 bounds and two
// atomic adds.
type durations struct {
	counts [15]atomic.Uint64 // len(matchBounds)+1
	sum    atomic.Int64      // nanoseconds
}

func (h *durations) observe(d time.Duration) {
	i := 0
	for i < len(matchBounds) && d > matchBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// snapshot returns the histogram. Its buckets are read one by one while
// observations go on, so Count is their sum as read, and Sum may include
// an observation or two that the buckets do not.
func (h *durations) snapshot() Histogram {
	out := Histogram{Bounds: slices.Clone(matchBounds), Counts: make([]uint64, len(h.counts)), Sum: time.Duration(h.sum.Load())}
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
		out.Count += out.Counts[i]
	}
	return out
}

// Stats is a snapshot of a switch's counters.
type Stats struct {
	// Sessions and Subscriptions open now; Filters in the switch's
	// filter.Index (equal to Subscriptions when no call is in progress).
	// They include the routers' sessions and the proxy filters peers
	// registered over shared links, and remote sessions kept while their
	// entities are away (see ReconnectPolicy). A subscription with several
	// filters (Session.SubscribeFilters) counts once per filter here.
	Sessions, Subscriptions, Filters int
	// The counters below count over the switch's life: they never
	// decrease. EventsIn counts the events published on the switch or
	// arrived over its links, of which Published those its sessions
	// (local and remote) published and the place admitted; Fires the
	// sessions fired (one per session and event, routers' included);
	// Matched the matches of entities' subscriptions, once per
	// subscription and event (SubscriptionStats.Matched, summed; a link's
	// proxy filters are not counted here but in the link's EventsSent).
	EventsIn, Published, Fires, Matched uint64
	// Deliveries counts, per subscription, the events handed over: put
	// in its queue or passed to its handler, put in its session's
	// look-in spool (a look-in subscription), or — for a remote session —
	// confirmed received by the entity (SubscriptionStats.Delivered,
	// summed). An event dropped on the way is not counted here (a spilled
	// one is counted in SubscriptionStats.Spilled); one a DropOldest
	// queue or a full spool evicts after it was handed over counts here
	// and in Dropped.
	Deliveries uint64
	// Dropped counts, per subscription, the events it matched and lost:
	// a full queue (DropNewest, Block's wait ending, DropOldest's
	// evictions), spool evictions (full, expired), a remote session's
	// stream full or ended unconfirmed (see Dial). Drops breaks it down
	// by reason. Spilled counts the events the Spill policy put in a
	// look-in spool instead of a full queue (SubscriptionStats.Spilled,
	// summed); they are not dropped.
	Dropped uint64
	Drops   DropCounts
	Spilled uint64
	// Refused counts sessions and shared links the place refused
	// (admission hook, shared key, tree rule); handshakes that fail
	// before a session is named (no hello, a timeout, an eviction) are
	// not counted here, only logged.
	Refused uint64
	// RetainedBytes is the bytes of deliveries remote sessions' streams
	// hold now, unconfirmed or waiting for their entities to return; at
	// most SwitchConfig.MaxRetentionTotalBytes.
	RetainedBytes int64
	// Away is the number of remote sessions whose entity is away now:
	// their connection ended (its reader and writer have stopped) and the
	// switch keeps them for their retention, holding their events until
	// they return (see ReconnectPolicy). Disconnects counts such
	// departures over the switch's life: each time a remote session's
	// connection ended and the session was kept, once per connection,
	// whether the switch saw the connection end or its entity came back
	// on a new one first (it never decreases).
	Away        int
	Disconnects uint64
	// Duplicates counts the events the switch dropped because it had
	// seen their ID already (over its life): published again with a
	// caller-set Event.ID, or brought back twice by its relay
	// (RelayPort.Deliver). Duplicates that arrive over a link are counted
	// in that link's LinkInfo.Duplicates and in Links.
	Duplicates uint64
	// Links sums the counters of the switch's shared links over their
	// lifetimes, the links that have ended included (Switch.Links shows
	// the links up now).
	Links LinkTotals
	// AgentSent and AgentReceived count the messages the switch sent to
	// and received from its place's agent (S2, a place routed by
	// RouteManaged), over the switch's life: reports, Deploy, Detected and
	// Verdict messages on the agent's own connection, which is not a link.
	AgentSent, AgentReceived uint64
}

// LinkTotals sums shared-link counters; see LinkInfo for each.
type LinkTotals struct {
	EventsSent, EventsReceived, ControlSent, ControlReceived uint64
	Dropped, Expired, Duplicates, Refused                    uint64
	FramesSent, FramesReceived, BytesSent, BytesReceived     uint64
}

func (t *LinkTotals) add(r *router) {
	t.EventsSent += r.eventsSent.Load()
	t.EventsReceived += r.eventsRecv.Load()
	t.ControlSent += r.ctlSent.Load()
	t.ControlReceived += r.ctlRecv.Load()
	t.Dropped += r.dropped.Load()
	t.Expired += r.expired.Load()
	t.Duplicates += r.duplicates.Load()
	t.Refused += r.refused.Load()
	t.FramesSent += r.framesSent.Load()
	t.FramesReceived += r.framesRecv.Load()
	t.BytesSent += r.bytesSent.Load()
	t.BytesReceived += r.bytesRecv.Load()
}

// Stats returns the switch's counters.
func (sw *Switch) Stats() Stats {
	sw.mu.RLock()
	st := Stats{Sessions: len(sw.sessions), Subscriptions: len(sw.subs)}
	for _, re := range sw.remotes { // Switch.mu before remoteEnd.mu
		if re.isAway() {
			st.Away++
		}
	}
	sw.mu.RUnlock()
	st.Filters = sw.index.Len()
	sw.routeMu.Lock()
	st.Links = sw.ended
	for _, r := range append(slices.Clone(sw.routers), sw.ending...) {
		if r.end.inPlace() { // a gateway's counters are its own (Gateways)
			st.Links.add(r)
		}
	}
	sw.routeMu.Unlock()
	st.EventsIn, st.Fires, st.Deliveries, st.Refused = sw.eventsIn.Load(), sw.fires.Load(), sw.deliveries.Load(), sw.refused.Load()
	st.Dropped, st.RetainedBytes, st.Disconnects = sw.dropped.Load(), sw.held.Load(), sw.disconnects.Load()
	st.Duplicates = sw.duplicates.Load()
	st.Published, st.Matched, st.Spilled = sw.published.Load(), sw.matched.Load(), sw.spilled.Load()
	st.Drops = DropCounts{
		QueueFull: sw.drops[dropQueueFull].Load(), Evicted: sw.drops[dropEvicted].Load(),
		Spool: sw.drops[dropSpool].Load(), Stream: sw.drops[dropStream].Load(),
	}
	st.AgentSent, st.AgentReceived = sw.agentSent.Load(), sw.agentReceived.Load()
	return st
}

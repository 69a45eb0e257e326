package metrics

import (
	"fmt"
	"slices"
	"sync"
	"time"
	"weak"

	"github.com/sion-go/sion"
)

// histFunc receives a histogram series; lv as for emitFunc.
type histFunc func(f *family, lv []string, h sion.Histogram)

// emitFunc receives one series' value; lv (switch and place first) is
// valid only during the call.
type emitFunc func(f *family, lv []string, v float64)

// monoKey names one counter series.
type monoKey struct {
	f  *family
	lv [maxLabels]string
}

// monoVal is what the collector remembers of a counter series: the
// switch it was last read from (weakly: a removed switch is not kept
// alive), the value read then, and the offset carried over from switches
// of the same name read before.
type monoVal struct {
	sw           weak.Pointer[sion.Switch]
	last, offset float64
	walk         uint64 // the walk that last read it
}

// switchKey is a switch's name and place: the labels every series of it
// has first.
type switchKey struct{ name, place string }

func keyOf(sw *sion.Switch) switchKey { return switchKey{sw.Name(), sw.Place().Name()} }

// state is what a Collector reads and remembers; shared by its
// Prometheus and OpenTelemetry sides.
type state struct {
	mu      sync.Mutex
	sws     []*sion.Switch
	mono    map[monoKey]monoVal
	walks   uint64                     // walks so far
	started map[*sion.Switch]time.Time // Producer's StartTimes
}

// add adds sws, leaving out nil and those state has already. It adds
// none and returns an error naming the switch when one has the name and
// place of another held (a closed one excepted) or given: their series
// would be one.
func (st *state) add(sws ...*sion.Switch) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.prune()
	held := map[switchKey]*sion.Switch{}
	for _, sw := range st.sws {
		held[keyOf(sw)] = sw
	}
	var added []*sion.Switch
	for _, sw := range sws {
		if sw == nil || slices.Contains(st.sws, sw) || slices.Contains(added, sw) {
			continue
		}
		k := keyOf(sw)
		if other := held[k]; other != nil {
			return fmt.Errorf("metrics: switch %q of place %q: the Collector holds another switch of that name and place, and their series would be one (sion_…{switch=%q,place=%q}); give each switch its own name, or Remove the other first", k.name, k.place, k.name, k.place)
		}
		held[k] = sw
		added = append(added, sw)
	}
	st.sws = append(st.sws, added...)
	return nil
}

// prune drops the switches that are closed (Switch.State is NonExistent):
// it reads their counters a last time, so that a switch of the same name
// and place added later continues them, and exports nothing of them. mu
// must be held.
func (st *state) prune() {
	st.sws = slices.DeleteFunc(st.sws, func(sw *sion.Switch) bool {
		if sw.State() != sion.NonExistent {
			return false
		}
		st.walkSwitch(sw, func(*family, []string, float64) {}, nil)
		delete(st.started, sw)
		return true
	})
}

// forget drops what st remembers of the counter series of the switches
// it holds that the last walk did not read: a link's peer that
// LinkTotals no longer keeps, a gateway gone. The series of switches no
// longer held (removed or closed) are kept, for a switch of the same
// name and place to continue them. mu must be held.
func (st *state) forget() {
	held := make(map[switchKey]bool, len(st.sws))
	for _, sw := range st.sws {
		held[keyOf(sw)] = true
	}
	for k, m := range st.mono {
		if m.walk != st.walks && held[switchKey{k.lv[0], k.lv[1]}] {
			delete(st.mono, k)
		}
	}
}

// remove removes sw, reading its counters a last time; their memory
// stays (see Collector.Remove).
func (st *state) remove(sw *sion.Switch) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !slices.Contains(st.sws, sw) {
		return
	}
	st.walkSwitch(sw, func(*family, []string, float64) {}, nil)
	st.sws = slices.DeleteFunc(st.sws, func(x *sion.Switch) bool { return x == sw })
	delete(st.started, sw)
}

// count returns counter f's value for series lv given the core's raw
// value now, read from sw, so that what is exported never decreases:
// when the series was last read from another switch (one of the same
// name and place, removed), the last value read is carried over as an
// offset (the new switch counts from zero); a value lower than the last
// from the same switch (a restart the core could not avoid, see the
// package doc) is held at the last until the core passes it again. mu
// must be held.
func (st *state) count(f *family, lv []string, sw weak.Pointer[sion.Switch], raw uint64) float64 {
	k := monoKey{f: f}
	copy(k.lv[:], lv)
	m, seen := st.mono[k]
	v := float64(raw)
	switch {
	case seen && m.sw != sw:
		m.offset += m.last
		m.sw, m.last = sw, v
	case !seen || v > m.last:
		m.sw, m.last = sw, v
	}
	m.walk = st.walks
	if st.mono == nil {
		st.mono = map[monoKey]monoVal{}
	}
	st.mono[k] = m
	return m.offset + m.last
}

// sessionKinds are the values of the kind label, in order.
var sessionKinds = []sion.SessionKind{sion.SessionLocal, sion.SessionRemote, sion.SessionLink, sion.SessionOverlay, sion.SessionGateway}

// walk reads every switch's snapshots and emits each series once, the
// match-time histogram through emitHist (left out when nil); it leaves
// out (and drops) closed switches and then forgets the series that are
// gone. mu must be held.
func (st *state) walk(emit emitFunc, emitHist histFunc) {
	st.walks++
	st.prune()
	for _, sw := range st.sws {
		st.walkSwitch(sw, emit, emitHist)
	}
	st.forget()
}

// walkSwitch emits sw's series. mu must be held.
func (st *state) walkSwitch(sw *sion.Switch, emit emitFunc, emitHist histFunc) {
	var buf [maxLabels]string
	buf[0], buf[1] = sw.Name(), sw.Place().Name()
	lv := func(extra ...string) []string {
		n := copy(buf[2:], extra)
		return buf[:2+n]
	}
	id := weak.Make(sw)
	c := func(f *family, raw uint64, extra ...string) {
		l := lv(extra...)
		emit(f, l, st.count(f, l, id, raw))
	}
	n := func(f *family, v int, extra ...string) { emit(f, lv(extra...), float64(v)) }

	s := sw.Stats()
	c(fEventsIn, s.EventsIn)
	c(fPublished, s.Published)
	c(fMatched, s.Matched)
	c(fFires, s.Fires)
	c(fDelivered, s.Deliveries)
	c(fDropped, s.Drops.QueueFull, "queue_full")
	c(fDropped, s.Drops.Evicted, "evicted")
	c(fDropped, s.Drops.Spool, "spool")
	c(fDropped, s.Drops.Stream, "stream")
	c(fSpilled, s.Spilled)
	c(fDuplicates, s.Duplicates)
	c(fRefused, s.Refused)
	c(fDisconnects, s.Disconnects)
	c(fAgentSent, s.AgentSent)
	c(fAgentReceived, s.AgentReceived)

	kinds := sw.SessionCounts()
	for _, k := range sessionKinds {
		n(fSessions, kinds[k], string(k))
	}
	n(fAway, s.Away)
	n(fSubscriptions, s.Subscriptions)
	n(fFilters, s.Filters)
	n(fRetained, int(s.RetainedBytes))

	if emitHist != nil {
		emitHist(fMatchDuration, lv(), sw.MatchTime())
	}

	for p, t := range sw.LinkTotals() { // over the switch's life
		c(fLinkEventsSent, t.EventsSent, p)
		c(fLinkEventsReceived, t.EventsReceived, p)
		c(fLinkControlSent, t.ControlSent, p)
		c(fLinkControlReceived, t.ControlReceived, p)
		c(fLinkFramesSent, t.FramesSent, p)
		c(fLinkFramesReceived, t.FramesReceived, p)
		c(fLinkBytesSent, t.BytesSent, p)
		c(fLinkBytesReceived, t.BytesReceived, p)
		c(fLinkDropped, t.Dropped, p, "queue_full")
		c(fLinkDropped, t.Expired, p, "expired")
		c(fLinkDropped, t.Duplicates, p, "duplicate")
		c(fLinkDropped, t.Refused, p, "refused")
	}
	for _, li := range sw.Links() {
		p := li.Peer
		n(fLinkUp, up(li.State), p)
		n(fLinkQueued, li.Queued, p)
		n(fLinkQueuedBytes, li.QueuedBytes, p)
		n(fLinkRoutes, li.Routes, p)
		n(fLinkProxies, li.Proxies, p)
	}

	for _, gi := range sw.Gateways() {
		g := gi.Name // counters over the gateway's life on sw, at both ends
		for _, d := range []struct {
			name string
			c    sion.GatewayCounters
		}{{"import", gi.Import}, {"export", gi.Export}} {
			c(fGatewayForwarded, d.c.Forwarded, g, d.name)
			c(fGatewayConverted, d.c.Converted, g, d.name)
			c(fGatewayStopped, d.c.Filtered, g, d.name, "filtered")
			c(fGatewayStopped, d.c.Unmapped, g, d.name, "unmapped")
			c(fGatewayStopped, d.c.Refused, g, d.name, "refused")
			c(fGatewayStopped, d.c.Expired, g, d.name, "expired")
			c(fGatewayStopped, d.c.Looped, g, d.name, "looped")
			c(fGatewayStopped, d.c.Duplicates, g, d.name, "duplicate")
			c(fGatewayStopped, d.c.Dropped, g, d.name, "queue_full")
		}
		n(fGatewayUp, up(gi.State), g)
		n(fGatewayRoutes, gi.Routes, g)
		n(fGatewayProxies, gi.Proxies, g)
	}
}

// up is 1 for sion.LinkUp, 0 for any other state.
func up(s sion.LinkState) int {
	if s == sion.LinkUp {
		return 1
	}
	return 0
}

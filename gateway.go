package sion

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
)

// A gateway (S1 SI-GW) federates two event places. It is a link between a
// switch of each place whose two ends are routers like a shared link's, so
// that each place sees the gateway as one ordinary entity: a session on
// one of its switches that subscribes with filters and publishes what it
// carries. The switch that requested the federation holds the conversion
// tables (ontology.Mapping) and firewall filters of both directions and
// does every conversion; the other end forwards and installs verbatim.
//
// Per direction, from the place events leave (source) to the one they
// enter (target):
//   - interest: each filter the target place propagates to the gateway
//     is converted backwards through the direction's Mapping into filters
//     over the source ontology (filter.Derive), intersected with the
//     firewall filters (filter.Conjoin), and registered in the source
//     place, so only events someone in the target place wants cross;
//   - events: what fires there is checked against the firewall, converted
//     by the Mapping, and published in the target place with the same ID,
//     PlaceTTL one lower, PlaceHops one higher and the target appended to
//     Control.Path.
//
// Bounds: an event never enters a place on its Control.Path and crosses at
// most PlaceTTL gateways; interest likewise never returns to a place it
// came through (Subscription.places), so cycles of places and redundant
// gateways neither loop events nor keep interest alive by themselves. An
// event that reaches a place twice over redundant gateways keeps its ID
// and the second copy is dropped where it enters (counted as Duplicates).

// GatewayDirection names a direction of a gateway as the switch that
// requested it sees it.
type GatewayDirection int

const (
	// Import carries events of the remote place into this switch's place
	// (S1: SI-GW_{A,B}, made on A's request, carries B's events to A).
	Import GatewayDirection = iota
	// Export carries events of this switch's place into the remote place.
	Export
)

// String returns "import" or "export".
func (d GatewayDirection) String() string {
	switch d {
	case Import:
		return "import"
	case Export:
		return "export"
	}
	return fmt.Sprintf("GatewayDirection(%d)", int(d))
}

// DirectionConfig configures one direction of a gateway (S1 SI-GW: the
// conversion table and the firewall filters).
type DirectionConfig struct {
	// Mapping converts events of the source place's ontology into the
	// target place's (event types, attribute names, units, value tables;
	// see ontology.Mapping); events of types it does not convert do not
	// cross. For Export its source ontology must be this switch's place's
	// (the same *Ontology); for Import its target must be. nil passes
	// events and filters unchanged, for places that share an ontology
	// (which Federate cannot check: it never sees the other place's):
	// the other place then refuses (and counts) the events its ontology
	// does not know, and filters naming types this place does not know
	// are not derived (logged).
	Mapping *ontology.Mapping
	// Firewall lists filters over the source place's ontology (filter
	// syntax, see filter/SYNTAX.md): an event crosses only if one of them
	// matches it — all types ("{}"), some types ("{type ⊑ Alarm}") or
	// content conditions. nil lets every event the Mapping converts
	// cross, as far as the target place's interest asks for it; an empty,
	// non-nil list lets nothing cross.
	Firewall []string
}

// GatewayConfig configures a gateway that a switch requests to another
// place (Switch.Federate). At least one of Import and Export must be set;
// both make a two-way gateway.
type GatewayConfig struct {
	// Name identifies the gateway on both switches; default
	// "<switch>→<address>". At most MaxNameBytes.
	Name string
	// Import and Export configure the two directions; nil turns one off.
	Import, Export *DirectionConfig
	// SharedKey is the remote place's PlaceConfig.SharedKey, when it has
	// one (admission, S1 security assurance unit).
	SharedKey []byte
	// RetryMin and RetryMax bound the wait between attempts to
	// re-establish the gateway after its link fails (defaults 50 ms and
	// 2 s); HandshakeTimeout bounds each attempt (default 10 s).
	RetryMin, RetryMax, HandshakeTimeout time.Duration
}

// FederationRequest is what PlaceConfig.Federation is asked about: a
// switch of another place asks for a gateway to this place.
type FederationRequest struct {
	// Place and Switch name the requesting place and switch; Gateway is
	// the gateway's name.
	Place, Switch, Gateway string
	// Import: events of this place are to cross into the requesting
	// place; Export: events of the requesting place are to cross into
	// this one.
	Import, Export bool
	// Remote and TLS are as in AdmissionRequest.
	Remote net.Addr
	TLS    *tls.ConnectionState
}

// GatewayCounters counts what one direction of a gateway did with the
// events that reached it (S1 SI-GW statistics). Each event is counted
// once, under the first reason it did not cross, or as Forwarded. Each
// end counts what it does: the requesting end checks the firewall and
// converts (Filtered, Unmapped, Converted are counted there); the other
// end only forwards and delivers. A copy that arrives over a redundant
// gateway crosses and is dropped where it enters (Duplicates).
type GatewayCounters struct {
	// Forwarded: events that crossed (sent by the source side, delivered
	// into the place by the target side); Converted: of those, the ones
	// the Mapping converted.
	Forwarded, Converted uint64
	// Filtered: refused by the firewall filters. Unmapped: their type has
	// no counterpart in the Mapping. Refused: conversion failed, or the
	// target place refused the converted event (logged at Warn).
	Filtered, Unmapped, Refused uint64
	// Expired: their PlaceTTL was spent. Looped: they had been in the
	// place they would enter. Duplicates: they had entered the place
	// already (redundant gateways). Dropped: the gateway's queue was full.
	Expired, Looped, Duplicates, Dropped uint64
}

type gwCounters struct {
	forwarded, converted, filtered, unmapped, refused, expired, looped, duplicates, dropped atomic.Uint64
}

func (c *gwCounters) snapshot() GatewayCounters {
	return GatewayCounters{
		Forwarded: c.forwarded.Load(), Converted: c.converted.Load(),
		Filtered: c.filtered.Load(), Unmapped: c.unmapped.Load(), Refused: c.refused.Load(),
		Expired: c.expired.Load(), Looped: c.looped.Load(), Duplicates: c.duplicates.Load(), Dropped: c.dropped.Load(),
	}
}

// GatewayInfo describes a gateway of a switch (Switch.Gateways).
type GatewayInfo struct {
	// Name is the gateway's name; Peer and PeerPlace name the switch and
	// place at its other end; Requested reports whether this switch
	// requested it (and holds its Mappings).
	Name, Peer, PeerPlace string
	Requested             bool
	State                 LinkState
	// Since is when it came up (zero while it is not up).
	Since time.Time
	// Import counts the events that entered this switch's place through
	// it, Export those that left; a direction that is off counts nothing.
	Import, Export GatewayCounters
	// Routes is the number of filters registered in the other place for
	// this place's interest; Proxies the number installed here for the
	// other place's.
	Routes, Proxies int
	// Filters are the filters the gateway holds in this place for the
	// other place's interest — converted through the Export Mapping and
	// intersected with the firewall at the requesting end — sorted, in
	// this place's ontology. Only events they match leave through it.
	Filters []string
}

// gatewayTTL is the TTL a gateway registers filters with in the other
// place: the receiving switch lowers it to its place's TTL.
const gatewayTTL = 65535

// maxInterestPlaces bounds how many places interest may come through: no
// event crosses more than DefaultTTL gateways (Control.PlaceTTL).
const maxInterestPlaces = DefaultTTL + 1

// gwConv is one direction's conversion: immutable, replaced whole.
type gwConv struct {
	mapping  *ontology.Mapping
	src      *ontology.Ontology // the source place's ontology
	firewall []*filter.Filter   // resolved against src; nil: all
	index    *filter.Index      // the firewall filters; nil: all
}

// newConv checks one direction's configuration for a gateway of place
// here (whose ontology is local).
func newConv(d GatewayDirection, local *ontology.Ontology, m *ontology.Mapping, firewall []string) (*gwConv, error) {
	c := &gwConv{mapping: m, src: local}
	if m != nil {
		switch {
		case d == Export && m.From() != local:
			return nil, fmt.Errorf("%w: the %v Mapping's source ontology is not this place's", ErrInvalidConfig, d)
		case d == Import && m.To() != local:
			return nil, fmt.Errorf("%w: the %v Mapping's target ontology is not this place's", ErrInvalidConfig, d)
		case d == Import:
			c.src = m.From()
		}
	}
	if firewall == nil {
		return c, nil
	}
	c.index = filter.NewIndex(c.src)
	for i, src := range firewall {
		f, err := filter.Compile(src)
		if err == nil {
			f, err = filter.Resolve(c.src, f)
		}
		if err == nil {
			err = c.index.Add(uint64(i), f)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v firewall filter %d %q: %w", ErrInvalidFilter, d, i, src, err)
		}
		c.firewall = append(c.firewall, f)
	}
	return c, nil
}

// pass reports whether the firewall lets e (over the source ontology)
// cross.
func (c *gwConv) pass(e filter.Event) bool {
	if c.index == nil {
		return true
	}
	ok := false
	c.index.Match(e, func(uint64, float64) { ok = true })
	return ok
}

// derive converts the text of a filter of the target place into the
// filters over the source ontology that select the events whose
// conversion it matches, intersected with the firewall (canonical texts,
// sorted, no duplicates).
func (c *gwConv) derive(text string) ([]string, error) {
	f, err := filter.Compile(text)
	if err != nil {
		return nil, err
	}
	var fs []*filter.Filter
	if c.mapping == nil {
		if f, err = filter.Resolve(c.src, f); err != nil {
			return nil, err
		}
		fs = []*filter.Filter{f}
	} else if fs, err = filter.Derive(f, c.mapping); err != nil {
		return nil, err
	}
	if c.firewall != nil {
		var both []*filter.Filter
		for _, d := range fs {
			for _, w := range c.firewall {
				out, _ := filter.Conjoin(d, w, c.src) // not exact: the firewall is checked again as events cross
				both = append(both, out...)
			}
		}
		fs = both
	}
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.String())
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// convert converts e (canonical over the source ontology) for the target
// place; it counts and returns false when e does not cross.
func (c *gwConv) convert(e *Event, cnt *gwCounters) (typ string, attrs []ontology.Attr, err error, ok bool) {
	if !c.pass(e) {
		cnt.filtered.Add(1)
		return "", nil, nil, false
	}
	if c.mapping == nil {
		return e.Type, e.Attrs, nil, true
	}
	typ, attrs, ok, err = c.mapping.Apply(e.Type, e.Attrs)
	switch {
	case err != nil:
		cnt.refused.Add(1)
		return "", nil, err, false
	case !ok:
		cnt.unmapped.Add(1)
		return "", nil, nil, false
	}
	return typ, attrs, nil, true
}

// Gateway is the handle of a gateway this switch requested (Switch.Federate;
// S1 SI-GW). It re-establishes itself when its link fails, until Close or
// until the other place ends the federation. A Gateway is safe for
// concurrent use.
type Gateway struct {
	sw   *Switch
	addr string
	cfg  GatewayConfig
	id   int64
	q    *requester

	conv [2]atomic.Pointer[gwConv] // by GatewayDirection; nil: off
	cnt  [2]gwCounters             // by GatewayDirection, over the gateway's life
	reMu sync.Mutex                // serializes SetMapping and SetFirewall

	mu        sync.Mutex
	cur       *router // mu; nil while down
	ups       int     // mu
	err       error   // mu; the last failure
	peer      string  // mu
	peerPlace string  // mu
	released  bool    // mu; the other place ended the federation
}

// Federate makes this switch's place a federation request to the place
// of the switch serving at addr over tr (S1 SI-GW; see Switch.Serve), and
// returns once the gateway is up: each side has installed the other's
// interest, so an event published afterwards in a source place that some
// subscriber in the target place wants, and that the firewall lets
// through, reaches that subscriber converted.
//
// The other place must approve: its switch checks admission (SharedKey in
// cfg, PlaceConfig.Admit with AdmissionRequest.Gateway) and then asks its
// PlaceConfig.Federation; a refusal wraps ErrNotAdmitted. A request to a
// switch of this switch's own place, a second gateway of the same name on
// this switch, or a bad cfg (no direction, a Mapping between the wrong
// ontologies, a firewall filter that does not compile over its source
// ontology) returns an error wrapping ErrLinkRefused, ErrInvalidConfig or
// ErrInvalidFilter.
//
// When the link fails later the gateway is re-established in the
// background (both sides re-send their interest); events published
// meanwhile do not cross. Close ends it (unfederate), as does the other
// switch's Unfederate. Safe for concurrent use.
func (sw *Switch) Federate(ctx context.Context, tr transport.Transport, addr string, cfg GatewayConfig) (*Gateway, error) {
	switch {
	case tr == nil:
		return nil, fmt.Errorf("%w: Federate with a nil transport", ErrInvalidConfig)
	case cfg.Import == nil && cfg.Export == nil:
		return nil, fmt.Errorf("%w: GatewayConfig has neither Import nor Export", ErrInvalidConfig)
	case cfg.RetryMin < 0 || cfg.RetryMax < 0 || cfg.HandshakeTimeout < 0:
		return nil, fmt.Errorf("%w: GatewayConfig durations must not be negative", ErrInvalidConfig)
	case cfg.RetryMax != 0 && cfg.RetryMin > cfg.RetryMax:
		return nil, fmt.Errorf("%w: GatewayConfig.RetryMin %v exceeds RetryMax %v", ErrInvalidConfig, cfg.RetryMin, cfg.RetryMax)
	case len(cfg.Name) > MaxNameBytes:
		return nil, fmt.Errorf("%w: GatewayConfig.Name has %d bytes, at most %d", ErrInvalidConfig, len(cfg.Name), MaxNameBytes)
	case cfg.SharedKey != nil && checkKey("GatewayConfig.SharedKey", cfg.SharedKey) != nil:
		return nil, checkKey("GatewayConfig.SharedKey", cfg.SharedKey)
	}
	cfg.Name = cmp.Or(cfg.Name, sw.cfg.Name+"→"+addr)
	cfg.HandshakeTimeout = cmp.Or(cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	cfg.RetryMin = cmp.Or(cfg.RetryMin, 50*time.Millisecond)
	cfg.RetryMax = max(cmp.Or(cfg.RetryMax, 2*time.Second), cfg.RetryMin)
	g := &Gateway{sw: sw, addr: addr, cfg: cfg, id: randomLinkID()}
	for d, dc := range []*DirectionConfig{Import: cfg.Import, Export: cfg.Export} {
		if dc == nil {
			continue
		}
		c, err := newConv(GatewayDirection(d), sw.place.Ontology(), dc.Mapping, dc.Firewall)
		if err != nil {
			return nil, err
		}
		g.conv[d].Store(c)
	}
	q, life := sw.newRequester(tr, g, cfg.Name, cfg.SharedKey, requestTimes{cfg.HandshakeTimeout, cfg.RetryMin, cfg.RetryMax})
	g.q = q
	sw.mu.Lock()
	switch {
	case sw.closed:
		sw.mu.Unlock()
		q.cancel()
		return nil, fmt.Errorf("%w: switch %q", ErrClosed, sw.cfg.Name)
	case sw.gateways[cfg.Name] != nil:
		sw.mu.Unlock()
		q.cancel()
		return nil, fmt.Errorf("%w: switch %q has a gateway named %q already", ErrInvalidConfig, sw.cfg.Name, cfg.Name)
	}
	if sw.gateways == nil {
		sw.gateways = map[string]*Gateway{}
	}
	sw.gateways[cfg.Name] = g
	sw.linkers.Add(1)
	sw.mu.Unlock()
	r, linkCtx, err := q.connect(ctx, life, addr)
	if sw.isClosed() && (err == nil || life.Err() != nil) {
		err = fmt.Errorf("%w: switch %q closed while it federated: %v", ErrClosed, sw.cfg.Name, err)
	}
	if err != nil {
		if r != nil {
			r.close()
			<-r.finished
		}
		q.cancel()
		close(q.done)
		sw.mu.Lock()
		delete(sw.gateways, cfg.Name)
		sw.mu.Unlock()
		sw.linkers.Done()
		return nil, err
	}
	go func() {
		defer sw.linkers.Done()
		q.supervise(life, linkCtx, r)
	}()
	return g, nil
}

// The gateway's part of its requester (linkRequest).

func (g *Gateway) describe(addr string) string {
	return fmt.Sprintf("gateway %q from %q to %s", g.cfg.Name, g.sw.cfg.Name, addr)
}

// request refuses a switch of this switch's own place, and asks for the
// federation.
func (g *Gateway) request(_ transport.Conn, w *wire.Welcome) (linkctl.Message, error) {
	sw := g.sw
	if w.Place == sw.place.Name() {
		return nil, fmt.Errorf("%w: switch %q is in this switch's place %q; a gateway joins two places (Switch.Link links switches of one)", ErrLinkRefused, w.Switch, w.Place)
	}
	return &linkctl.Federate{Switch: sw.cfg.Name, Place: sw.place.Name(), Gateway: g.cfg.Name, Link: g.id,
		Import: g.conv[Import].Load() != nil, Export: g.conv[Export].Load() != nil}, nil
}

// accepted opens the router's session ("gateway:<name>") and makes the
// requesting end, which converts both ways.
func (g *Gateway) accepted(a linkAccept) (*Session, bool, linkEnd, error) {
	if a.place == "" {
		return nil, false, nil, fmt.Errorf("%w: the federation accept names no place", ErrProtocol)
	}
	sess, err := g.sw.openRouterSession("gateway:" + g.cfg.Name)
	end := &gatewayEnd{name: g.cfg.Name, peerPlace: a.place, g: g, in: g.conv[Import].Load() != nil, out: g.conv[Export].Load() != nil, cnt: &g.cnt}
	return sess, false, end, err
}

func (g *Gateway) up(r *router, _ string) {
	g.mu.Lock()
	g.cur, g.peer, g.peerPlace = r, r.peer, gatewayOf(r).peerPlace
	g.ups++
	g.mu.Unlock()
	g.sw.log.Info("sion: gateway up", "switch", g.sw.cfg.Name, "gateway", g.cfg.Name, "peer", r.peer, "place", g.peerPlace)
}

func (g *Gateway) watch(ctx, _ context.Context, r *router) { awaitEnd(ctx, r) }

// down records the failure; the gateway is re-established unless the
// other place ended the federation.
func (g *Gateway) down(_ *router, err error) ([]string, bool) {
	g.mu.Lock()
	g.cur, g.err = nil, err
	released := g.released
	g.mu.Unlock()
	switch {
	case chanClosed(g.q.quit):
		return nil, false
	case released:
		g.sw.log.Info("sion: the other place ended the federation", "switch", g.sw.cfg.Name, "gateway", g.cfg.Name)
		return nil, false
	}
	g.sw.log.Warn("sion: gateway down, re-establishing", "switch", g.sw.cfg.Name, "gateway", g.cfg.Name, "err", err)
	return nil, true
}

func (g *Gateway) candidates() []string { return []string{g.addr} }

func (g *Gateway) failed(err error) {
	g.mu.Lock()
	g.err = err
	g.mu.Unlock()
}

// Name returns the gateway's name.
func (g *Gateway) Name() string { return g.cfg.Name }

// State returns the gateway's state now (LinkClosed after Close or when
// the other place ended the federation) and its last failure.
func (g *Gateway) State() (LinkState, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.released || chanClosed(g.q.quit):
		return LinkClosed, g.err
	case g.cur != nil:
		return *g.cur.state.Load(), g.err
	}
	return LinkDown, g.err
}

// Establishments returns how many times the gateway has come up.
func (g *Gateway) Establishments() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ups
}

// Info returns the gateway's description and counters (see GatewayInfo).
func (g *Gateway) Info() GatewayInfo {
	g.mu.Lock()
	r := g.cur
	info := GatewayInfo{Name: g.cfg.Name, Peer: g.peer, PeerPlace: g.peerPlace, Requested: true}
	g.mu.Unlock()
	info.State, _ = g.State()
	if r != nil {
		gatewayOf(r).fill(r, &info)
	}
	info.Import, info.Export = g.cnt[Import].snapshot(), g.cnt[Export].snapshot()
	return info
}

// SetMapping replaces the Mapping of direction d at run time and
// re-derives the interest that crosses the gateway: afterwards events the
// new Mapping converts (and the firewall allows) cross as far as the
// target place's subscribers want them, and events it no longer converts
// stop; no subscriber has to subscribe again. New interest is registered
// before the old is released, so events both Mappings cover keep
// crossing. It returns when the source place has acknowledged the new
// interest (S2), or ctx's error. Errors: d is off, or m converts between
// the wrong ontologies (ErrInvalidConfig). Safe for concurrent use.
func (g *Gateway) SetMapping(ctx context.Context, d GatewayDirection, m *ontology.Mapping) error {
	return g.reconfigure(ctx, d, func(old *gwConv) (*gwConv, error) {
		fw := make([]string, len(old.firewall))
		for i, f := range old.firewall {
			fw[i] = f.String()
		}
		if old.firewall == nil {
			fw = nil
		}
		return newConv(d, g.sw.place.Ontology(), m, fw)
	})
}

// SetFirewall replaces the firewall filters of direction d at run time,
// like SetMapping (nil lets everything the Mapping converts cross).
// Errors: d is off (ErrInvalidConfig), a filter does not compile over the
// source ontology (ErrInvalidFilter).
func (g *Gateway) SetFirewall(ctx context.Context, d GatewayDirection, firewall []string) error {
	return g.reconfigure(ctx, d, func(old *gwConv) (*gwConv, error) {
		return newConv(d, g.sw.place.Ontology(), old.mapping, firewall)
	})
}

func (g *Gateway) reconfigure(ctx context.Context, d GatewayDirection, next func(*gwConv) (*gwConv, error)) error {
	if d != Import && d != Export {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, d)
	}
	g.reMu.Lock()
	defer g.reMu.Unlock()
	old := g.conv[d].Load()
	if old == nil {
		return fmt.Errorf("%w: gateway %q has no %v direction", ErrInvalidConfig, g.cfg.Name, d)
	}
	c, err := next(old)
	if err != nil {
		return err
	}
	if d == Import && c.src != old.src {
		return fmt.Errorf("%w: the new Import Mapping's source ontology is not the one the gateway was made with", ErrInvalidConfig)
	}
	g.conv[d].Store(c)
	g.mu.Lock()
	r := g.cur
	g.mu.Unlock()
	if r == nil {
		return nil // the next establishment derives from the new conversion
	}
	var waits []*linkAck
	if d == Import {
		waits = gatewayOf(r).rederiveRoutes(r)
	} else {
		waits = gatewayOf(r).rederiveProxies(r)
	}
	t := time.NewTimer(g.sw.place.cfg.ContractTimeout)
	defer t.Stop()
	for _, a := range waits {
		select {
		case <-a.done:
			if a.err != nil {
				return fmt.Errorf("%w: gateway %q: %w", ErrNotGranted, g.cfg.Name, a.err)
			}
		case <-t.C:
			return fmt.Errorf("%w: gateway %q: the new interest is not acknowledged within %v", ErrNotGranted, g.cfg.Name, g.sw.place.cfg.ContractTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close ends the federation (unfederate): the other switch is told, both
// places withdraw the interest the gateway carried, and the gateway is not
// re-established. It waits for the gateway's goroutines and is idempotent.
func (g *Gateway) Close() error {
	g.mu.Lock()
	r := g.cur
	g.mu.Unlock()
	if r != nil && !chanClosed(g.q.quit) {
		sendLeave(r)
	}
	g.q.cancel()
	<-g.q.done
	g.sw.mu.Lock()
	if g.sw.gateways[g.cfg.Name] == g {
		delete(g.sw.gateways, g.cfg.Name)
	}
	g.sw.mu.Unlock()
	return nil
}

// sendLeave tells the other end of gateway r that the federation ends,
// and gives the Leave a moment (a marker's round trip, at most
// probeTimeout) to arrive before the link closes.
func sendLeave(r *router) {
	r.sendControl(&linkctl.Leave{})
	a := r.marker(0, 0)
	t := time.NewTimer(probeTimeout)
	defer t.Stop()
	select {
	case <-a.done:
	case <-t.C:
	}
}

// Unfederate ends the gateway named name on this switch, from either end:
// the one it requested (as Gateway.Close) or one another place requested
// to it, which is then not re-established. It returns an error wrapping
// ErrInvalidConfig when the switch has no such gateway.
func (sw *Switch) Unfederate(name string) error {
	sw.mu.RLock()
	g := sw.gateways[name]
	sw.mu.RUnlock()
	if g != nil {
		return g.Close()
	}
	for _, r := range sw.gatewayRouters() {
		if ge := gatewayOf(r); !ge.requested() && ge.name == name {
			sendLeave(r)
			r.close()
			<-r.finished
			return nil
		}
	}
	return fmt.Errorf("%w: switch %q has no gateway named %q", ErrInvalidConfig, sw.cfg.Name, name)
}

// Gateways returns the switch's gateways — those it requested, up or
// not, and those other places requested to it that are connected —
// sorted by name. Safe for concurrent use.
func (sw *Switch) Gateways() []GatewayInfo {
	sw.mu.RLock()
	requested := make([]*Gateway, 0, len(sw.gateways))
	for _, g := range sw.gateways {
		requested = append(requested, g)
	}
	sw.mu.RUnlock()
	var out []GatewayInfo
	for _, g := range requested {
		out = append(out, g.Info())
	}
	for _, r := range sw.gatewayRouters() {
		ge := gatewayOf(r)
		if ge.requested() {
			continue
		}
		info := GatewayInfo{Name: ge.name, Peer: r.peer, PeerPlace: ge.peerPlace, State: *r.state.Load()}
		ge.fill(r, &info)
		info.Import, info.Export = ge.cnt[Import].snapshot(), ge.cnt[Export].snapshot()
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b GatewayInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// gatewayRouters returns the routers of the switch's gateways.
func (sw *Switch) gatewayRouters() []*router {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	var out []*router
	for _, r := range sw.routers {
		if gatewayOf(r) != nil {
			out = append(out, r)
		}
	}
	return out
}

// gatewayOf returns the gateway end of r, or nil when r is not a
// gateway's.
func gatewayOf(r *router) *gatewayEnd {
	ge, _ := r.end.(*gatewayEnd)
	return ge
}

// acceptGateway serves a federation request that arrived on a connection
// Serve accepted, as the first request of session sess: it checks
// admission and the place's consent, answers, and runs this end of the
// gateway until it ends.
func (sw *Switch) acceptGateway(ctx context.Context, conn transport.Conn, sess *Session, req *linkctl.Federate) {
	refuse := func(code uint16, err error) { sw.refuseRequest(ctx, conn, "sion: federation refused", code, err) }
	peer, place, name := req.Switch, req.Place, req.Gateway
	fr := FederationRequest{Place: place, Switch: peer, Gateway: name, Import: req.Import, Export: req.Export, Remote: conn.RemoteAddr(), TLS: tlsState(conn)}
	switch {
	case place == sw.place.Name():
		refuse(codeLinkRefused, fmt.Errorf("%w: the federation request came from this switch's own place %q", ErrLinkRefused, place))
		return
	case !fr.Import && !fr.Export:
		refuse(codeProtocol, fmt.Errorf("%w: a federation request with neither direction", ErrProtocol))
		return
	}
	if admit := sw.place.cfg.Admit; admit != nil {
		ar := AdmissionRequest{Place: sw.place.Name(), Switch: sw.cfg.Name, Session: name, Gateway: true, Remote: fr.Remote, TLS: fr.TLS}
		if err := admit(ctx, ar); err != nil {
			refuse(codeNotAdmitted, fmt.Errorf("%w: gateway %q from place %q: %w", ErrNotAdmitted, name, place, err))
			return
		}
	}
	approve := sw.place.cfg.Federation
	if approve == nil {
		refuse(codeNotAdmitted, fmt.Errorf("%w: place %q accepts no federation requests (PlaceConfig.Federation is nil); gateway %q from place %q", ErrNotAdmitted, sw.place.Name(), name, place))
		return
	}
	if err := approve(ctx, fr); err != nil {
		refuse(codeNotAdmitted, fmt.Errorf("%w: place %q refused gateway %q from place %q: %w", ErrNotAdmitted, sw.place.Name(), name, place, err))
		return
	}
	// A gateway re-established after a failure this side has not noticed
	// yet replaces its stale end.
	for _, r := range sw.gatewayRouters() {
		if ge := gatewayOf(r); !ge.requested() && ge.name == name && ge.peerPlace == place {
			r.close()
			<-r.finished
		}
	}
	end := &gatewayEnd{name: name, peerPlace: place, in: fr.Export, out: fr.Import}
	end.cnt = &end.own
	r, linkCtx := sw.newRouter(ctx, conn, peer, false, sess, end)
	r.sendControl(&linkctl.LinkAccept{Switch: sw.cfg.Name, Place: sw.place.Name()})
	if sw.isClosed() {
		r.close()
		return
	}
	r.start(linkCtx)
	sw.log.Info("sion: gateway accepted", "switch", sw.cfg.Name, "gateway", name, "place", place, "remote", conn.RemoteAddr())
	<-r.finished
}

// gatewayEnd is what makes a router one end of a gateway. in: events
// enter this switch's place through it (this end registers the place's
// interest at the other end); out: events leave through it (this end
// installs the other place's interest). The requesting end (g set)
// converts both ways; the other end passes filters and events verbatim.
type gatewayEnd struct {
	name      string
	peerPlace string
	g         *Gateway // the requesting end's handle; nil at the other end
	in, out   bool
	cnt       *[2]gwCounters // by GatewayDirection: Import = into this place
	own       [2]gwCounters  // the counters of an end this switch did not request

	routeMu sync.Mutex            // taken under the switch's routeMu, before the router's mu
	routes  map[routeKey]*gwRoute // routeMu; this place's keys → the keys registered at the peer

	proxyMu sync.Mutex          // never taken under the switch's routeMu
	proxies map[uint64]*gwProxy // proxyMu; the peer's keys → subscriptions installed here
}

// gwRoute is one key of this place's interest and the keys it became at
// the peer.
type gwRoute struct {
	refs int
	keys []routeKey
}

// gwProxy is one key of the other place's interest and the subscriptions
// it became here.
type gwProxy struct {
	text   string
	places []string
	subs   []*Subscription
}

func (e *gatewayEnd) requested() bool { return e.g != nil }

// conv returns the conversion of direction d, or nil at the other end.
func (e *gatewayEnd) conv(d GatewayDirection) *gwConv {
	if e.g == nil {
		return nil
	}
	return e.g.conv[d].Load()
}

func (e *gatewayEnd) fill(r *router, info *GatewayInfo) {
	info.State = *r.state.Load()
	r.mu.Lock()
	info.Since, info.Routes = r.upAt, len(r.routes)
	r.mu.Unlock()
	r.sess.mu.Lock()
	info.Proxies = len(r.sess.subs)
	for _, sub := range r.sess.subs {
		info.Filters = append(info.Filters, sub.f.String())
	}
	r.sess.mu.Unlock()
	slices.Sort(info.Filters)
}

// interestPath returns the places the interest of key came through, this
// place last, and whether it may cross to the peer's place.
func (e *gatewayEnd) interestPath(here string, places []string) ([]string, bool) {
	if places == nil {
		places = []string{here}
	}
	return places, !slices.Contains(places, e.peerPlace) && len(places) < maxInterestPlaces
}

// deriveKeys returns the keys this place's interest text becomes at the
// peer.
func (e *gatewayEnd) deriveKeys(r *router, text string, path []string) []routeKey {
	texts := []string{text}
	if c := e.conv(Import); c != nil {
		var err error
		if texts, err = c.derive(text); err != nil {
			r.sw.log.Warn("sion: gateway cannot convert a filter; the events it selects do not cross", "switch", r.sw.cfg.Name, "gateway", e.name, "filter", text, "err", err)
			return nil
		}
	}
	keys := make([]routeKey, len(texts))
	for i, t := range texts {
		keys[i] = newRouteKey(t, path)
	}
	return keys
}

// addRoute registers at the peer the filters this place's interest key
// becomes there.
func (e *gatewayEnd) addRoute(r *router, key routeKey, _ int) []*linkAck {
	if !e.in {
		return nil
	}
	path, ok := e.interestPath(r.sw.place.Name(), key.placeList())
	if !ok || isDiscoveryKey(key.filter) {
		return nil
	}
	e.routeMu.Lock()
	defer e.routeMu.Unlock()
	if e.routes == nil {
		e.routes = map[routeKey]*gwRoute{}
	}
	rt := e.routes[key]
	if rt == nil {
		rt = &gwRoute{keys: e.deriveKeys(r, key.filter, path)}
		e.routes[key] = rt
	}
	rt.refs++
	out := make([]*linkAck, 0, len(rt.keys))
	for _, k := range rt.keys {
		out = append(out, r.register(k, gatewayTTL))
	}
	return out
}

// removeRoute undoes one addRoute.
func (e *gatewayEnd) removeRoute(r *router, key routeKey, _ int) {
	e.routeMu.Lock()
	defer e.routeMu.Unlock()
	rt := e.routes[key]
	if rt == nil {
		return
	}
	for _, k := range rt.keys {
		r.release(k, gatewayTTL)
	}
	if rt.refs--; rt.refs == 0 {
		delete(e.routes, key)
	}
}

// rederiveRoutes converts this place's interest again after the Import
// conversion changed: new keys are registered before old ones are
// released. It returns the new registers' acknowledgements.
func (e *gatewayEnd) rederiveRoutes(r *router) []*linkAck {
	r.sw.routeMu.Lock()
	defer r.sw.routeMu.Unlock()
	e.routeMu.Lock()
	defer e.routeMu.Unlock()
	var waits []*linkAck
	for key, rt := range e.routes {
		path, _ := e.interestPath(r.sw.place.Name(), key.placeList())
		keys := e.deriveKeys(r, key.filter, path)
		for _, k := range keys {
			if !slices.Contains(rt.keys, k) {
				for range rt.refs {
					waits = append(waits, r.register(k, gatewayTTL))
				}
			}
		}
		for _, k := range rt.keys {
			if !slices.Contains(keys, k) {
				for range rt.refs {
					r.release(k, gatewayTTL)
				}
			}
		}
		rt.keys = keys
	}
	return waits
}

// deriveProxies returns the filters the other place's interest text
// becomes here.
func (e *gatewayEnd) deriveProxies(r *router, text string) ([]*filter.Filter, error) {
	if c := e.conv(Export); c != nil {
		texts, err := c.derive(text)
		if err != nil {
			return nil, err
		}
		out := make([]*filter.Filter, 0, len(texts))
		for _, t := range texts {
			f, err := filter.Compile(t)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
		return out, nil
	}
	f, err := filter.Compile(text)
	if err != nil {
		return nil, err
	}
	return []*filter.Filter{f}, nil
}

// installProxies installs the subscriptions for the other place's
// interest text with places; it returns them and the acknowledgements of
// their propagation in this place.
func (e *gatewayEnd) installProxies(r *router, text string, places []string) ([]*Subscription, []*linkAck, error) {
	fs, err := e.deriveProxies(r, text)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	here := append(slices.Clone(places), r.sw.place.Name())
	var subs []*Subscription
	var waits []*linkAck
	for _, f := range fs {
		sub := newSubscription(r.sess, f, subConfig{ttl: r.sw.place.cfg.TTL}, 0, here)
		r.sess.mu.Lock()
		r.sess.subs[sub.id] = sub
		r.sess.mu.Unlock()
		w, err := r.sw.install(sub)
		if err != nil {
			r.sess.forget(sub)
			for _, s := range subs {
				r.sess.forget(s)
				s.cancel()
			}
			return nil, nil, err
		}
		subs = append(subs, sub)
		waits = append(waits, w...)
	}
	return subs, waits, nil
}

// install handles the peer's register: the other place's interest,
// installed here as proxy subscriptions (converted at the requesting
// end), acknowledged once this place has them (S2).
func (e *gatewayEnd) install(r *router, m *linkctl.Register) error {
	key, text, n, places := m.Key, m.Filter, m.Ack, m.Places
	var subs []*Subscription
	var waits []*linkAck
	var err error
	if e.out && !slices.Contains(places, r.sw.place.Name()) && len(places) < maxInterestPlaces {
		subs, waits, err = e.installProxies(r, text, places)
	}
	e.proxyMu.Lock()
	if e.proxies == nil {
		e.proxies = map[uint64]*gwProxy{}
	}
	old := e.proxies[key]
	e.proxies[key] = &gwProxy{text: text, places: places, subs: subs}
	e.proxyMu.Unlock()
	if old != nil {
		cancelAll(r, old.subs)
	}
	msg := ""
	if err != nil {
		msg = fmt.Sprintf("gateway %q at switch %q: %v", e.name, r.sw.cfg.Name, err)
	}
	r.ackAfter(n, msg, waits)
	return nil
}

// release handles the peer's release of key.
func (e *gatewayEnd) release(r *router, key uint64) error {
	e.proxyMu.Lock()
	p, ok := e.proxies[key]
	delete(e.proxies, key)
	e.proxyMu.Unlock()
	if !ok {
		return fmt.Errorf("release of key %d, which is not registered", key)
	}
	cancelAll(r, p.subs)
	return nil
}

func cancelAll(r *router, subs []*Subscription) {
	for _, s := range subs {
		r.sess.forget(s)
		s.cancel()
	}
}

// rederiveProxies converts the other place's interest again after the
// Export conversion changed: the new subscriptions go in before the old
// come out. It returns their acknowledgements.
func (e *gatewayEnd) rederiveProxies(r *router) []*linkAck {
	e.proxyMu.Lock()
	defer e.proxyMu.Unlock()
	var waits []*linkAck
	for _, p := range e.proxies {
		if !e.out || slices.Contains(p.places, r.sw.place.Name()) {
			continue
		}
		subs, w, err := e.installProxies(r, p.text, p.places)
		if err != nil {
			r.sw.log.Warn("sion: gateway cannot convert a filter; the events it selects do not cross", "switch", r.sw.cfg.Name, "gateway", e.name, "filter", p.text, "err", err)
		}
		cancelAll(r, p.subs)
		p.subs = subs
		waits = append(waits, w...)
	}
	return waits
}

// forward sends event e, which this end's proxies fired for, into the
// other place: checked against the firewall and converted at the
// requesting end, with PlaceTTL lowered and PlaceHops raised.
func (e *gatewayEnd) forward(r *router, ev *Event, _ *lazyDeliver) {
	cnt := &e.cnt[Export]
	switch {
	case !e.out:
		return
	case ev.Control.PlaceTTL <= 0 || len(ev.Control.Path) >= wire.MaxPath:
		cnt.expired.Add(1)
		return
	case slices.Contains(ev.Control.Path, e.peerPlace):
		cnt.looped.Add(1)
		return
	case ontology.IsRouted(ev.Type):
		return // discovery stays in its place: a search joins places instead (S1)
	}
	w := toWireEvent(ev)
	converted := false
	if c := e.conv(Export); c != nil {
		typ, attrs, err, ok := c.convert(ev, cnt)
		if err != nil {
			r.sw.log.Warn("sion: gateway cannot convert an event", "switch", r.sw.cfg.Name, "gateway", e.name, "event", ev, "err", err)
		}
		if !ok {
			return
		}
		converted = c.mapping != nil
		w.Type, w.Attrs = typ, attrs
	}
	w.PlaceTTL--
	w.PlaceHops++
	f, err := wire.EncodeLimits(nil, &wire.Forward{Event: w}, r.lim)
	if err != nil {
		cnt.refused.Add(1)
		r.sw.log.Warn("sion: event does not fit the gateway's frames", "switch", r.sw.cfg.Name, "gateway", e.name, "event", ev.ID, "err", err)
		return
	}
	if !r.sendData(f) {
		cnt.dropped.Add(1)
		return
	}
	cnt.forwarded.Add(1)
	if converted {
		cnt.converted.Add(1)
	}
}

// receive publishes an event from the other place in this one: checked
// against the firewall and converted at the requesting end, admitted as
// Publish would, with this place's TTL and this place appended to its
// path. An event that has been in this place, or entered it already, is
// dropped.
func (e *gatewayEnd) receive(ctx context.Context, r *router, w *wire.Event) {
	cnt := &e.cnt[Import]
	sw := r.sw
	here := sw.place.Name()
	switch {
	case !e.in:
		cnt.refused.Add(1)
		return
	case slices.Contains(w.Path, here):
		cnt.looped.Add(1)
		return
	case w.PlaceTTL < 0 || w.PlaceHops < 0 || len(w.Path) >= wire.MaxPath:
		cnt.expired.Add(1)
		return
	}
	in, err := fromWireEvent(w)
	if err == nil && in.ID.IsZero() {
		err = fmt.Errorf("%w: event without an ID", ErrInvalidEvent)
	}
	if err != nil {
		cnt.refused.Add(1)
		sw.log.Warn("sion: event from gateway refused", "switch", sw.cfg.Name, "gateway", e.name, "err", err)
		return
	}
	converted := false
	if c := e.conv(Import); c != nil {
		typ, attrs, err, ok := c.convert(in, cnt)
		if err != nil {
			sw.log.Warn("sion: gateway cannot convert an event", "switch", sw.cfg.Name, "gateway", e.name, "event", in, "err", err)
		}
		if !ok {
			return
		}
		converted = c.mapping != nil
		in.Type, in.Attrs = typ, attrs
	}
	ev, err := sw.place.admit(in, admitConverted)
	if err != nil {
		cnt.refused.Add(1)
		sw.log.Warn("sion: event from gateway refused", "switch", sw.cfg.Name, "gateway", e.name, "event", in.ID, "err", err)
		return
	}
	ev.ID = in.ID
	ev.Control = Control{
		TTL: sw.place.cfg.TTL, PlaceTTL: int(w.PlaceTTL), PlaceHops: int(w.PlaceHops),
		Origin: w.Origin, Place: w.Place, Path: append(slices.Clip(w.Path), here),
	}
	if sw.seen.add(ev.ID) {
		cnt.duplicates.Add(1)
		r.duplicates.Add(1)
		return
	}
	cnt.forwarded.Add(1)
	if converted {
		cnt.converted.Add(1)
	}
	if err := sw.deliver(ctx, ctx.Done(), r.sess, ev); err != nil && ctx.Err() == nil {
		sw.log.Warn("sion: event from gateway not delivered everywhere", "switch", sw.cfg.Name, "gateway", e.name, "event", ev.ID, "err", err)
	}
}

func (*gatewayEnd) inPlace() bool { return false }

func (e *gatewayEnd) via() string { return e.name }

// marker passes a marker on into the other place while it may still
// cross gateways (Switch.Flush: places and gateways may form cycles).
func (*gatewayEnd) marker(r *router, ttl, gateways int) *linkAck {
	if gateways <= 0 {
		return nil
	}
	return r.marker(ttl, gateways-1)
}

// leave handles the other end's Leave: the federation ends and is not
// re-established.
func (e *gatewayEnd) leave(r *router, _ string) {
	if e.g != nil {
		e.g.mu.Lock()
		e.g.released = true
		e.g.mu.Unlock()
	}
	r.close()
}

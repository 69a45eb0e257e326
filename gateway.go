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
	// They count over the gateway's life on this switch: across its
	// re-establishments, at both ends.
	Import, Export GatewayCounters
	// Routes is the number of filters registered in the other place for
	// this place's interest; Proxies the number installed here for the
	// other place's: in the filter index, events match them (a register
	// still being installed is not counted, nor listed in Filters).
	Routes, Proxies int
	// Filters are the filters the gateway holds in this place for the
	// other place's interest — converted through the Export Mapping and
	// intersected with the firewall at the requesting end — sorted, in
	// this place's ontology. Only events they match leave through it.
	Filters []string
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
	peer      string // mu
	peerPlace string // mu
	released  bool   // mu; the other place ended the federation
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
	if why := sw.front.linking(); why != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, why)
	}
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
	g.peer, g.peerPlace = r.peer, gatewayOf(r).peerPlace
	g.mu.Unlock()
	g.sw.log.Info("sion: gateway up", "switch", g.sw.cfg.Name, "gateway", g.cfg.Name, "peer", r.peer, "place", g.peerPlace)
}

func (g *Gateway) watch(ctx, _ context.Context, r *router) { awaitEnd(ctx, r) }

// down decides, once the link has failed: the gateway is re-established
// unless it is closing or the other place ended the federation.
func (g *Gateway) down(_ *router, err error) ([]string, bool) {
	g.mu.Lock()
	released := g.released
	g.mu.Unlock()
	switch {
	case g.q.ending():
		return nil, false
	case released:
		g.sw.log.Info("sion: the other place ended the federation", "switch", g.sw.cfg.Name, "gateway", g.cfg.Name)
		return nil, false
	}
	g.sw.log.Warn("sion: gateway down, re-establishing", "switch", g.sw.cfg.Name, "gateway", g.cfg.Name, "err", err)
	return nil, true
}

func (g *Gateway) candidates() []string { return []string{g.addr} }

// Name returns the gateway's name.
func (g *Gateway) Name() string { return g.cfg.Name }

// State returns the gateway's state now (LinkClosed after Close or when
// the other place ended the federation) and its last failure.
func (g *Gateway) State() (LinkState, error) {
	g.mu.Lock()
	released := g.released
	g.mu.Unlock()
	return g.q.state(released)
}

// Establishments returns how many times the gateway has come up.
func (g *Gateway) Establishments() int { return g.q.establishments() }

// Info returns the gateway's description and counters (see GatewayInfo).
func (g *Gateway) Info() GatewayInfo {
	g.mu.Lock()
	info := GatewayInfo{Name: g.cfg.Name, Peer: g.peer, PeerPlace: g.peerPlace, Requested: true}
	released := g.released
	g.mu.Unlock()
	r, st, _ := g.q.link(released)
	info.State = st
	if r != nil { // its state and Since, read together
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
	r := g.q.current()
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
// re-established. Once Close has begun the gateway makes no attempt to
// re-establish itself: the end of its link that follows (the other
// switch closes it on being told) or any other failure ends it for good,
// and an attempt in progress is abandoned. Close returns once the
// gateway's goroutines have returned; it is idempotent.
func (g *Gateway) Close() error {
	g.q.stop() // before the Leave: the other end closes the link on it
	r := g.q.current()
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
// the one it requested (as Gateway.Close: it is not re-established once
// Unfederate has begun) or one another place requested to it, which the
// other end then does not re-establish. It returns an error wrapping
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

package sion

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
)

// State is the S1 life-cycle state ("state transition of an entity" and
// "of SI-SW") of an Entity (see Entity.State) and of a Switch in its
// place's network (see Switch.State). Local sessions work in every state
// of their switch but NonExistent.
type State int

const (
	// Suspended: a switch belongs to no network of its place: it has no
	// shared link and serves no listener, or it has left (Leave). An
	// entity runs but is not part of the network yet: it is looking for
	// an entry point (discovery).
	Suspended State = iota
	// Active: a switch is a member of its place's network: it serves
	// link requests or has a shared link. An entity is a member of its
	// base event place, answers probes and advertises its properties.
	Active
	// NonExistent: the switch or entity is closed (or not made yet).
	NonExistent
)

// String returns the state's name.
func (s State) String() string {
	switch s {
	case Suspended:
		return "suspended"
	case Active:
		return "active"
	case NonExistent:
		return "non-existent"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// State returns the switch's membership state now.
func (sw *Switch) State() State {
	sw.mu.RLock()
	closed, left, serving, parent := sw.closed, sw.left, len(sw.addrs) > 0, sw.parent != nil
	sw.mu.RUnlock()
	sw.routeMu.Lock()
	linked := len(sw.routers) > 0
	sw.routeMu.Unlock()
	switch {
	case closed:
		return NonExistent
	case left:
		return Suspended
	case serving || parent || linked:
		return Active
	}
	return Suspended
}

// addr returns the first address the switch serves on, or "".
func (sw *Switch) addr() string {
	sw.mu.RLock()
	defer sw.mu.RUnlock()
	if len(sw.addrs) == 0 {
		return ""
	}
	return sw.addrs[0]
}

// addrFor returns the address the switch gives the peer at the other end
// of conn: its first served address, with an unspecified host (a listener
// on 0.0.0.0 or ::) replaced by conn's local address — the interface that
// faces that peer. A peer is never told 0.0.0.0, which it could not dial
// (on a multi-homed host each peer gets the address it can reach).
func (sw *Switch) addrFor(conn transport.Conn) string {
	return concreteAddr(sw.addr(), conn.LocalAddr())
}

// concreteAddr returns addr ("host:port") with an empty or unspecified
// host replaced by local's host; any other addr, or one that is not
// host:port (mem), as it is.
func concreteAddr(addr string, local net.Addr) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || local == nil {
		return addr
	}
	if ip, err := netip.ParseAddr(host); host != "" && (err != nil || !ip.IsUnspecified()) {
		return addr
	}
	lh, _, err := net.SplitHostPort(local.String())
	if err != nil {
		return addr
	}
	return net.JoinHostPort(lh, port)
}

// HopDirection restricts which shared links an n-hop probe follows (S1
// hop attribute).
type HopDirection int

const (
	// TowardParents follows only links to the switch's parent: the probe
	// reaches its ancestors.
	TowardParents HopDirection = iota
	// TowardChildren follows only links to children.
	TowardChildren
	// AllDirections follows every link.
	AllDirections
)

// ProbeResult is one switch that answered a probe.
type ProbeResult struct {
	// Switch is its name and Addr the address it serves link requests
	// on ("" if it serves none: it cannot be linked to).
	Switch, Addr string
	// Hops is its distance from the prober, in shared links.
	Hops int
}

type probeReply struct {
	res     ProbeResult
	end     bool // the probe went no further from the replying switch
	pending bool // the replying switch's own parent link is being set up
	path    []string
}

// Probe sends an n-hop probe along the switch's shared links in the given
// direction (S1: each switch learns the alternatives it can re-link to
// should its parent fail) and returns the switches that answered within
// hops links, nearest first. TowardParents, it returns once the last
// ancestor within hops has answered; in the other directions it waits
// until ctx ends. It returns what arrived, and ctx's error only if
// nothing did.
// Cost: one control message per link crossed each way.
func (sw *Switch) Probe(ctx context.Context, hops int, dir HopDirection) ([]ProbeResult, error) {
	if hops < 1 || hops > linkctl.MaxHops || dir < TowardParents || dir > AllDirections {
		return nil, fmt.Errorf("%w: probe of %d hops (1 to %d) in direction %d", ErrInvalidConfig, hops, linkctl.MaxHops, dir)
	}
	if sw.isClosed() {
		return nil, fmt.Errorf("%w: switch %q", ErrClosed, sw.cfg.Name)
	}
	out, complete := sw.probe(ctx, hops, dir, 0)
	if len(out) == 0 && !complete && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, nil
}

// probe is Probe that also returns once want switches have answered
// (want > 0); complete reports that, toward the parents, the whole chain
// answered (or that there was nobody to ask).
func (sw *Switch) probe(ctx context.Context, hops int, dir HopDirection, want int) (out []ProbeResult, complete bool) {
	ch := make(chan probeReply, 64)
	var id uint64
	sw.probeMu.Lock()
	for id == 0 || sw.probes[id] != nil { // random: a peer cannot guess it to forge replies
		var b [8]byte
		rand.Read(b[:])
		id = binary.LittleEndian.Uint64(b[:])
	}
	sw.probes[id] = ch
	sw.probeMu.Unlock()
	defer func() {
		sw.probeMu.Lock()
		delete(sw.probes, id)
		sw.probeMu.Unlock()
	}()
	sent := sw.forwardProbe(nil, id, []string{sw.cfg.Name}, hops, dir)
	seen := map[string]bool{}
	ends := 0
	uncertain := false
	for done := sent == 0; !done; {
		select {
		case r := <-ch:
			if !seen[r.res.Switch] {
				seen[r.res.Switch] = true
				out = append(out, r.res)
			}
			// Replies may overtake one another on the way back: the
			// chain is complete when its end and every nearer switch
			// have answered.
			if r.end {
				ends = max(ends, r.res.Hops)
			}
			uncertain = uncertain || r.pending
			complete = dir == TowardParents && ends > 0 && len(out) >= ends
			done = complete || want > 0 && len(out) >= want
		case <-ctx.Done():
			done = true
		}
	}
	slices.SortStableFunc(out, func(a, b ProbeResult) int { return cmp.Compare(a.Hops, b.Hops) })
	return out, (complete && !uncertain) || sent == 0
}

// forwardProbe sends probe id with path on the switch's links in dir,
// except on from; it returns how many it sent.
func (sw *Switch) forwardProbe(from *router, id uint64, path []string, hops int, dir HopDirection) int {
	sw.routeMu.Lock()
	routers := slices.Clone(sw.routers)
	sw.routeMu.Unlock()
	n := 0
	for _, r := range routers {
		if r == from || !r.end.tree() || dir == TowardParents && !r.parent || dir == TowardChildren && r.parent {
			continue // a probe stays in its place: gateways do not carry it
		}
		r.sendControl(&linkctl.Probe{ID: id, Hops: hops, Dir: int(dir), Path: path})
		n++
	}
	return n
}

// handleProbe answers a probe that arrived on r and passes it on. A path
// too long to answer or extend is the sender's error: it ends that link
// (the others are not touched).
func (r *router) handleProbe(m *linkctl.Probe) error {
	path := m.Path
	if len(path) == 0 || len(path) >= linkctl.MaxHops {
		return fmt.Errorf("a probe with a path of %d switches (1 to %d)", len(path), linkctl.MaxHops-1)
	}
	if slices.Contains(path, r.sw.cfg.Name) { // a loop: do not answer twice
		return nil
	}
	dir := HopDirection(m.Dir)
	further := m.Hops > 1 && r.sw.probeLinks(r, dir) > 0
	// A switch whose own parent link is being set up cannot tell who its
	// ancestors will be: a loop check must not rely on its answer.
	r.sw.mu.RLock()
	parent := r.sw.parent
	r.sw.mu.RUnlock()
	pending := dir == TowardParents && !further && parent != nil && parent.target() == "" && !parent.released()
	r.sendControl(&linkctl.ProbeReply{ID: m.ID, Hops: len(path), Path: path, Switch: r.sw.cfg.Name,
		Addr: r.sw.addrFor(r.conn), End: !further, Pending: pending})
	if further {
		r.sw.forwardProbe(r, m.ID, append(slices.Clip(path), r.sw.cfg.Name), m.Hops-1, dir)
	}
	return nil
}

// probeLinks counts the links a probe in dir would go on, except from.
func (sw *Switch) probeLinks(from *router, dir HopDirection) int {
	sw.routeMu.Lock()
	defer sw.routeMu.Unlock()
	n := 0
	for _, r := range sw.routers {
		if r != from && r.end.tree() && !(dir == TowardParents && !r.parent) && !(dir == TowardChildren && r.parent) {
			n++
		}
	}
	return n
}

// handleProbeReply hands a reply to the waiting Probe, or relays it one
// link back along its path. A reply that does not come from where its
// path says the next switch toward the replier is (a forgery, or a link
// re-formed meanwhile) is dropped.
func (r *router) handleProbeReply(m *linkctl.ProbeReply) {
	sw := r.sw
	i := slices.Index(m.Path, sw.cfg.Name)
	if i < 0 {
		return // not on the path: drop
	}
	from := m.Switch // the replier, when this switch is the last on the path
	if i+1 < len(m.Path) {
		from = m.Path[i+1]
	}
	if r.peer != from {
		return
	}
	if i == 0 {
		sw.probeMu.Lock()
		ch := sw.probes[m.ID]
		sw.probeMu.Unlock()
		if ch != nil {
			select {
			case ch <- probeReply{res: ProbeResult{Switch: m.Switch, Addr: m.Addr, Hops: m.Hops}, end: m.End, pending: m.Pending, path: m.Path}:
			default: // the prober has more answers than it can use
			}
		}
		return
	}
	sw.routeMu.Lock()
	routers := slices.Clone(sw.routers)
	sw.routeMu.Unlock()
	for _, back := range routers {
		if back.end.tree() && back.peer == m.Path[i-1] {
			back.sendControl(m)
			break
		}
	}
}

// Leave takes the switch out of its place's network (S1 release and
// re-establishment of shared links): it tells its children to link to its
// parent — or, when it has none, elects one child (the first by name that
// serves an address) as the new root and tells the others to link to it —
// waits until they have let go, releases its own link, and becomes
// Suspended: it refuses link requests until its next Link. Events
// published while the links re-form do not cross the gap. Local sessions
// keep working. It returns ctx's error if the children have not let go
// when ctx ends (their links are then closed).
//
// In a place routed by rendezvous (S3) the switch also leaves the overlay:
// it tells every overlay neighbour, handing its leaf set to them, and
// closes its overlay links; the subscriptions and advertisements whose
// paths crossed it move to the switches that take its keys.
func (sw *Switch) Leave(ctx context.Context) error {
	sw.mu.Lock()
	if sw.closed {
		sw.mu.Unlock()
		return fmt.Errorf("%w: switch %q", ErrClosed, sw.cfg.Name)
	}
	sw.left = true
	parent := sw.parent
	kids := make([]*childLink, 0, len(sw.children))
	for _, c := range sw.children {
		kids = append(kids, c)
	}
	sw.mu.Unlock()
	slices.SortFunc(kids, func(a, b *childLink) int { return cmp.Compare(a.r.peer, b.r.peer) })

	target := ""
	if parent != nil {
		target = parent.target()
	}
	var elected *childLink
	if target == "" && len(kids) > 0 {
		// Ask the children where they serve now (a one-hop probe): one
		// that serves nowhere cannot be linked to.
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		found, _ := sw.probe(pctx, 1, TowardChildren, len(kids))
		cancel()
		addrs := map[string]string{}
		for _, f := range found {
			addrs[f.Switch] = f.Addr
		}
		for _, c := range kids {
			if a := addrs[c.r.peer]; a != "" {
				elected, c.addr = c, a
				break
			}
		}
	}
	if elected != nil {
		target = elected.addr
		elected.r.sendControl(&linkctl.Leave{Parent: ""})
	}
	for _, c := range kids {
		if c != elected {
			c.r.sendControl(&linkctl.Leave{Parent: target})
		}
	}
	var err error
	for _, c := range kids {
		select {
		case <-c.r.finished:
		case <-ctx.Done():
			err = ctx.Err()
			c.r.close()
			<-c.r.finished
		}
	}
	if parent != nil {
		parent.Close()
	}
	if e := sw.routing.leave(ctx); err == nil {
		err = e
	}
	sw.log.Info("sion: switch left its place", "switch", sw.cfg.Name, "place", sw.place.Name(), "children", len(kids), "new parent", target)
	return err
}

// parentLeaves handles the parent's Leave: re-link to addr, or become a
// root when addr is "".
func (sw *Switch) parentLeaves(addr string) {
	sw.mu.RLock()
	sl := sw.parent
	sw.mu.RUnlock()
	if sl != nil {
		sl.moveTo(addr)
	}
}

// Absorb asks the switch serving at addr over tr, which must have no
// parent link, to request a shared link to this switch (S1 absorption:
// the place takes a switch in). It returns once that link is up. The
// other switch needs SwitchConfig.Transport to dial back, and this switch
// must serve an address. Errors wrap ErrLinkRefused (the other switch
// has a parent, cannot dial, or another place) or ErrNotAdmitted.
func (sw *Switch) Absorb(ctx context.Context, tr transport.Transport, addr string) error {
	if why := sw.front.linking(); why != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, why)
	}
	if tr == nil {
		return fmt.Errorf("%w: Absorb with a nil transport", ErrInvalidConfig)
	}
	self := sw.addr()
	if self == "" {
		return fmt.Errorf("%w: switch %q serves no address to be linked to", ErrInvalidConfig, sw.cfg.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultHandshakeTimeout)
	defer cancel()
	conn, err := tr.Dial(ctx, addr)
	if err != nil {
		return fmt.Errorf("sion: absorb %s: %w", addr, err)
	}
	defer conn.Close()
	lim := wire.DefaultLimits()
	lim.MaxFrameBytes = conn.MaxFrameBytes()
	if _, err := clientHandshake(ctx, conn, lim, &wire.Hello{Version: protocolVersion, Session: sw.cfg.Name}, sw.place.cfg.SharedKey); err != nil {
		return fmt.Errorf("sion: absorb %s: %w", addr, err)
	}
	req := &linkctl.LinkRequest{Switch: sw.cfg.Name, Place: sw.place.Name(), Absorb: concreteAddr(self, conn.LocalAddr())}
	if _, err := requestLink(ctx, conn, lim, req); err != nil {
		return fmt.Errorf("sion: absorb %s: %w", addr, err)
	}
	return nil
}

// absorbed serves an absorb request: this switch requests a link to the
// absorbing switch at addr.
func (sw *Switch) absorbed(ctx context.Context, conn transport.Conn, peer, addr string) error {
	if sw.cfg.Transport == nil {
		return fmt.Errorf("%w: switch %q has no SwitchConfig.Transport to link to %q with", ErrLinkRefused, sw.cfg.Name, peer)
	}
	if _, err := sw.Link(ctx, sw.cfg.Transport, addr, LinkConfig{}); err != nil {
		return err
	}
	f, err := linkctl.Encode(&linkctl.LinkAccept{Switch: sw.cfg.Name}, wire.DefaultLimits())
	if err == nil {
		err = conn.Send(ctx, f)
	}
	return err
}

package sion

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/overlay"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
)

// The overlay of a place routed by rendezvous (S3): membership — join
// through any member, graceful leave, repair after a death — and the
// overlay links between neighbours. The routing table and leaf set are
// internal/overlay's Table; this file carries its messages between
// switches (internal/linkctl: OverlayLink, Join, JoinReply, Announce,
// LeafSetRequest, LeafSetReply).

// overlayTomb is how long a switch found dead is not learned again from
// other switches' tables (which may not have noticed yet: re-learning it
// would route keys into the void, internal/overlay's doc). A link the
// switch itself makes or accepts proves it alive and ends the tombstone.
const overlayTomb = 10 * time.Second

// maxJoinHops bounds the overlay hops of a Join: far above any route
// (⌈log₁₆ N⌉ + 2), it ends a route only if tables are corrupt.
const maxJoinHops = 64

// Bounds of what a switch spends on the overlay whatever its neighbours
// tell it: maxOverlayDials links being dialled at once (a table holds
// about 50 nodes at 10,000 switches; a newcomer's answer is dialled once
// its link is up), and maxTombs dead nodes remembered (expired ones are
// forgotten first, then the oldest).
const (
	maxOverlayDials = 64
	maxTombs        = 4096
	maxAsked        = 4 // leaf-set requests outstanding per neighbour
)

// Join makes the switch a member of its place's overlay (S3, rendezvous
// routing; see RouteByRendezvous), through the member serving at addr over
// tr, or, with addr "", as the first member. The switch must be serving
// (Serve) so that its overlay neighbours can link to it; Join waits up to a
// second for a Serve started just before it to listen. Join routes a
// join message toward the switch's own ID; the switches on the route hand
// it their routing-table rows and the switch closest to the ID its leaf
// set; the switch then links to every node of its new table, and the
// subscriptions and advertisements whose rendezvous switch it now is, or
// whose path it now lies on, move to it. It returns once those links are
// up or have failed, or ctx ends (the links made so far stay).
//
// Errors: ErrInvalidConfig when the place is not routed by rendezvous, the
// transport is nil or the switch serves nowhere; ErrLinkRefused and
// ErrNotAdmitted as for Link; ErrClosed. Tr is kept: the switch dials its
// later neighbours (repairs, newcomers) with it.
func (sw *Switch) Join(ctx context.Context, tr transport.Transport, addr string) error {
	if why := sw.front.linking(); why != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, why)
	}
	if tr == nil {
		return fmt.Errorf("%w: Join with a nil transport", ErrInvalidConfig)
	}
	return sw.routing.join(ctx, tr, addr)
}

// join is Switch.Join for a place routed by rendezvous.
func (s *rvSwitch) join(ctx context.Context, tr transport.Transport, seed string) error {
	sw := s.sw
	self := sw.addr()
	for deadline := time.Now().Add(time.Second); self == "" && time.Now().Before(deadline) && ctx.Err() == nil; self = sw.addr() {
		time.Sleep(5 * time.Millisecond) // a Serve started just before has not listened yet
	}
	s.mu.Lock()
	switch {
	case s.left || sw.isClosed():
		s.mu.Unlock()
		return fmt.Errorf("%w: switch %q", ErrClosed, sw.cfg.Name)
	case s.tr != nil:
		s.mu.Unlock()
		return fmt.Errorf("%w: switch %q has joined the overlay already", ErrInvalidConfig, sw.cfg.Name)
	case self == "":
		s.mu.Unlock()
		return fmt.Errorf("%w: switch %q serves nowhere; Serve before Join so that overlay neighbours can link to it", ErrInvalidConfig, sw.cfg.Name)
	}
	known := s.table.Nodes()
	s.table = overlay.NewTable(overlay.Node{ID: s.table.Self().ID, Addr: self}, s.rv.cfg.Leaves)
	s.table.Learn(known)
	s.tr = tr
	replies := make(chan []overlay.Node, 1)
	s.replies = replies
	s.startRerouter()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.replies == replies {
			s.replies = nil
		}
		s.mu.Unlock()
	}()
	if seed == "" {
		s.markJoined()
		return nil
	}
	r, err := s.dialWait(ctx, overlay.Node{Addr: seed})
	if err != nil {
		return err
	}
	me := s.selfNode()
	r.sendControl(&linkctl.Join{Key: me.ID, Joiner: me.ID, JoinerAddr: me.Addr})
	var nodes []overlay.Node
	select {
	case nodes = <-replies:
	case <-ctx.Done():
		return fmt.Errorf("sion: switch %q joining the overlay through %s: no answer to its join: %w", sw.cfg.Name, seed, ctx.Err())
	}
	s.markJoined()
	s.learnWait(ctx, nodes)
	s.kick()
	return nil
}

// markJoined records that the switch is a member.
func (s *rvSwitch) markJoined() {
	s.mu.Lock()
	s.joined = true
	s.mu.Unlock()
}

// selfNode returns this switch's overlay node.
func (s *rvSwitch) selfNode() overlay.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table.Self()
}

// learnWait learns nodes and waits until the links to those that entered
// the table are up or have failed, or ctx ends.
func (s *rvSwitch) learnWait(ctx context.Context, nodes []overlay.Node) {
	for _, ol := range s.learn(nodes) {
		select {
		case <-ol.done:
		case <-ctx.Done():
			return
		}
	}
}

// learn dials the nodes the table would take in — not self, not those
// found dead lately — and returns the dials. A node enters the table only
// once its link is up and it has proved its ID (linkUp): until then keys
// keep their old routes, so a node someone names that does not answer, or
// answers as another switch, takes nothing away.
func (s *rvSwitch) learn(nodes []overlay.Node) []*overlayLink {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left {
		return nil
	}
	now := time.Now()
	// What the table will be once the links being dialled are up: a node
	// is wanted only if it would still take a place then.
	will := s.table.Clone()
	for _, ol := range s.dialing {
		will.Add(ol.node)
	}
	var out []*overlayLink
	for _, n := range nodes {
		if t, ok := s.tombs[n.ID]; ok {
			if now.Before(t) {
				continue
			}
			delete(s.tombs, n.ID)
		}
		if n.Addr == "" || s.peers[n.ID] != nil || !s.wants(will, n) {
			continue // linked already, or not wanted
		}
		if ol := s.dialLocked(n); ol != nil {
			out = append(out, ol)
			will.Add(n)
		}
	}
	return out
}

// overlayLink is a link to an overlay neighbour that this switch dials,
// as its requester sees it (linkRequest): dialled once, never
// re-established — a neighbour whose link fails is dead to the overlay
// until it links again.
type overlayLink struct {
	s    *rvSwitch
	key  overlay.ID    // its key in rvSwitch.dialing: the node's ID as dialled
	node overlay.Node  // the neighbour; its ID is zero while only its address is known (Join's seed)
	done chan struct{} // closed when the dial has ended, up or failed
	r    *router       // set before done closes when the link came up
	err  error         // set before done closes when it did not
}

// dialLocked starts dialling n unless a link to it is up or being made;
// it returns the dial, or nil. mu must be held.
func (s *rvSwitch) dialLocked(n overlay.Node) *overlayLink {
	if s.peers[n.ID] != nil || s.tr == nil || s.left {
		return nil
	}
	if ol := s.dialing[n.ID]; ol != nil {
		return ol
	}
	if len(s.dialing) >= maxOverlayDials {
		s.sw.refusal("overlay", "sion: overlay dials at their bound; node not dialled", "node", n.ID.String(), "addr", n.Addr)
		return nil
	}
	ol := &overlayLink{s: s, key: n.ID, node: n, done: make(chan struct{})}
	s.dialing[n.ID] = ol
	q, life := s.sw.newRequester(s.tr, ol, s.sw.cfg.Name, s.sw.place.cfg.SharedKey, requestTimes{handshake: s.sw.cfg.HandshakeTimeout})
	s.reqs[q] = struct{}{}
	s.wg.Go(func() { ol.run(q, life) })
	return ol
}

// dialWait returns the link to n, dialling it and waiting for it (or
// ctx) if there is none.
func (s *rvSwitch) dialWait(ctx context.Context, n overlay.Node) (*router, error) {
	s.mu.Lock()
	if r := s.peers[n.ID]; r != nil && n.ID != (overlay.ID{}) {
		s.mu.Unlock()
		return r, nil
	}
	ol := s.dialLocked(n)
	leaving := s.left || s.tr == nil
	s.mu.Unlock()
	switch {
	case ol == nil && leaving:
		return nil, fmt.Errorf("%w: switch %q is leaving the overlay", ErrClosed, s.sw.cfg.Name)
	case ol == nil:
		return nil, fmt.Errorf("sion: switch %q is dialling %d overlay links, its bound; retry", s.sw.cfg.Name, maxOverlayDials)
	}
	select {
	case <-ol.done:
		return ol.r, ol.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run makes the link and supervises it until it ends, then forgets the
// requester; a failed dial makes the neighbour dead to the overlay,
// unless a link to it is up (the neighbour's own, accepted meanwhile).
func (ol *overlayLink) run(q *requester, life context.Context) {
	s := ol.s
	r, linkCtx, err := q.connect(life, life, ol.node.Addr)
	s.mu.Lock()
	if s.dialing[ol.key] == ol {
		delete(s.dialing, ol.key)
	}
	s.mu.Unlock()
	if err != nil {
		ol.err = err
		close(ol.done)
		close(q.done)
		q.cancel()
		s.sw.log.Warn("sion: overlay link failed", "switch", s.sw.cfg.Name, "addr", ol.node.Addr, "err", err)
		if ol.node.ID != (overlay.ID{}) {
			s.dead(ol.node.ID)
		}
	} else {
		ol.r = r
		close(ol.done)
		q.supervise(life, linkCtx, r)
	}
	s.mu.Lock()
	delete(s.reqs, q)
	s.mu.Unlock()
}

func (ol *overlayLink) describe(addr string) string {
	return fmt.Sprintf("overlay link from %q to %s", ol.s.sw.cfg.Name, addr)
}

func (ol *overlayLink) request(transport.Conn, *wire.Welcome) (linkctl.Message, error) {
	sw := ol.s.sw
	me := ol.s.selfNode()
	return &linkctl.OverlayLink{Switch: sw.cfg.Name, Place: sw.place.Name(), Node: linkctl.OverlayNode{ID: me.ID, Addr: me.Addr}}, nil
}

// accepted checks that the peer is the node dialled (its name's ID) in
// this place, and opens the router's session.
func (ol *overlayLink) accepted(a linkAccept) (*Session, bool, linkEnd, error) {
	s := ol.s
	if a.place != s.sw.place.Name() {
		return nil, false, nil, fmt.Errorf("%w: switch %q is in place %q, not %q", ErrLinkRefused, a.peer, a.place, s.sw.place.Name())
	}
	id := s.rv.idOf(a.peer)
	if ol.node.ID != (overlay.ID{}) && id != ol.node.ID {
		return nil, false, nil, fmt.Errorf("%w: the switch at %s is %q, whose overlay ID %s is not the %s dialled", ErrLinkRefused, ol.node.Addr, a.peer, id, ol.node.ID)
	}
	s.mu.Lock() // learn reads the nodes being dialled under mu
	ol.node.ID = id
	node := ol.node
	s.mu.Unlock()
	sess, err := s.sw.openRouterSession(a.peer)
	return sess, true, &overlayEnd{sharedEnd: newSharedEnd(), s: s, node: node}, err
}

func (ol *overlayLink) up(r *router, addr string) {
	ol.s.sw.log.Info("sion: overlay link up", "switch", ol.s.sw.cfg.Name, "peer", r.peer, "addr", addr)
}

func (ol *overlayLink) watch(ctx, _ context.Context, r *router) { awaitEnd(ctx, r) }

func (ol *overlayLink) down(*router, error) ([]string, bool) { return nil, false }

func (ol *overlayLink) candidates() []string { return nil }

// acceptOverlay serves an overlay link request that arrived on a
// connection Serve accepted, as the first request of session sess: it
// checks the requester (this place, a name whose ID is the node's,
// admission), answers, and runs the link until it ends.
func (s *rvSwitch) acceptOverlay(ctx context.Context, conn transport.Conn, sess *Session, req *linkctl.OverlayLink) {
	sw := s.sw
	refuse := func(code uint16, err error) { sw.refuseRequest(ctx, conn, "sion: overlay link refused", code, err) }
	node := overlay.Node{ID: req.Node.ID, Addr: req.Node.Addr}
	s.mu.Lock()
	member := s.tr != nil && !s.left
	s.mu.Unlock()
	switch {
	case req.Place != sw.place.Name():
		refuse(codeLinkRefused, fmt.Errorf("%w: switch %q is in place %q, the overlay link request came from place %q", ErrLinkRefused, sw.cfg.Name, sw.place.Name(), req.Place))
		return
	case req.Switch == sw.cfg.Name:
		refuse(codeLinkRefused, fmt.Errorf("%w: the requesting switch has this switch's name %q", ErrLinkRefused, req.Switch))
		return
	case node.ID != s.rv.idOf(req.Switch):
		refuse(codeLinkRefused, fmt.Errorf("%w: switch %q claims overlay ID %s; its name's is %s", ErrLinkRefused, req.Switch, node.ID, s.rv.idOf(req.Switch)))
		return
	case !member:
		refuse(codeLinkRefused, fmt.Errorf("%w: switch %q is not a member of place %q's overlay (Join)", ErrLinkRefused, sw.cfg.Name, sw.place.Name()))
		return
	}
	if admit := sw.place.cfg.Admit; admit != nil {
		ar := AdmissionRequest{Place: sw.place.Name(), Switch: sw.cfg.Name, Session: req.Switch, Link: true, Remote: conn.RemoteAddr(), TLS: tlsState(conn)}
		if err := admit(ctx, ar); err != nil {
			refuse(codeNotAdmitted, fmt.Errorf("%w: overlay link from switch %q: %w", ErrNotAdmitted, req.Switch, err))
			return
		}
	}
	sess.mu.Lock()
	noSubs := len(sess.subs) == 0
	sess.mu.Unlock()
	if !noSubs {
		refuse(codeProtocol, fmt.Errorf("%w: an overlay link request must be the session's first request", ErrProtocol))
		return
	}
	s.mu.Lock()
	delete(s.tombs, node.ID) // it links: it lives
	s.mu.Unlock()
	r, linkCtx := sw.newRouter(ctx, conn, req.Switch, false, sess, &overlayEnd{sharedEnd: newSharedEnd(), s: s, node: node})
	r.sendAccept()
	if sw.isClosed() {
		r.close()
		return
	}
	r.start(linkCtx)
	sw.log.Info("sion: overlay link accepted", "switch", sw.cfg.Name, "peer", req.Switch, "remote", conn.RemoteAddr())
	<-r.finished
}

// linkUp records overlay link r as it comes up (Switch.addRouter, under
// routeMu): its peer enters the table, and the link becomes the way to it
// if there was none. The subscriptions' initial registers over r follow;
// those over other links are moved by the rerouter.
func (s *rvSwitch) linkUp(r *router) ([]routeKey, []*linkAck) {
	oe, ok := r.end.(*overlayEnd)
	if !ok {
		return nil, nil
	}
	s.mu.Lock()
	s.links[r] = oe.node
	delete(s.tombs, oe.node.ID)
	if s.peers[oe.node.ID] == nil {
		s.peers[oe.node.ID] = r
	}
	s.tableAdd(oe.node)
	s.mu.Unlock()
	s.kick()
	return nil, nil
}

// linkDown forgets overlay link r as it ends (Switch.removeRouter, under
// routeMu): another link to its peer takes its place, or the peer is dead
// to the overlay, and the leaf set is repaired. Either way the rerouter
// runs: what the subscriptions registered over r, and the advertisements
// that went on over it, are gone with it (removeRouter, dropSources), and
// only the rerouter registers and sends them again — over the link that
// took r's place, or toward the node that takes its peer's.
func (s *rvSwitch) linkDown(r *router) {
	s.mu.Lock()
	node, ok := s.links[r]
	if !ok {
		s.mu.Unlock()
		return
	}
	delete(s.links, r)
	delete(s.asked, r)
	if s.peers[node.ID] == r {
		delete(s.peers, node.ID)
		for o, n := range s.links {
			if n.ID == node.ID {
				s.peers[node.ID] = o
				break
			}
		}
	}
	gone := s.peers[node.ID] == nil
	s.bypassLinkDown(r)
	s.mu.Unlock()
	s.dropSources(r)
	if gone {
		s.dead(node.ID) // kicks
		return
	}
	s.kick()
}

// dead removes node id from the table, keeps it out for overlayTomb, and
// asks the neighbours that can for their leaf sets (S3 overlay repair),
// unless a link to id is up.
func (s *rvSwitch) dead(id overlay.ID) {
	s.mu.Lock()
	if s.left || s.peers[id] != nil {
		// A node with a link up is alive, whatever a dial to it or
		// another link to it says: a dial that fails while the node's
		// own link to this switch came up must not take it out of the
		// table (this switch would then hold keys it is not the
		// rendezvous switch of).
		s.mu.Unlock()
		return
	}
	s.tomb(id)
	if s.table.Remove(id) {
		s.askLeafSets()
	}
	s.mu.Unlock()
	s.kick()
}

// wants reports whether table t would take n in (overlay.Table.Wants)
// and RendezvousConfig.Neighbours allows it. mu must be held.
func (s *rvSwitch) wants(t *overlay.Table, n overlay.Node) bool {
	if s.rv.allow != nil && !s.rv.allow(s.table.Self().ID, n.ID) {
		return false
	}
	return t.Wants(n)
}

// tomb keeps node id out of the table for overlayTomb, within maxTombs.
// mu must be held.
func (s *rvSwitch) tomb(id overlay.ID) {
	now := time.Now()
	if len(s.tombs) >= maxTombs {
		oldest, first := overlay.ID{}, true
		for t, until := range s.tombs {
			if now.After(until) {
				delete(s.tombs, t)
			} else if first || until.Before(s.tombs[oldest]) {
				oldest, first = t, false
			}
		}
		if len(s.tombs) >= maxTombs {
			delete(s.tombs, oldest)
		}
	}
	s.tombs[id] = now.Add(overlayTomb)
}

// askLeafSets sends a LeafSetRequest to the nodes RepairContacts names.
// mu must be held.
func (s *rvSwitch) askLeafSets() {
	for _, n := range s.table.RepairContacts() {
		if r := s.peers[n.ID]; r != nil && s.asked[r] < maxAsked {
			s.asked[r]++
			r.sendControl(&linkctl.LeafSetRequest{})
		}
	}
}

// leave tells every overlay neighbour that this switch leaves, with its
// leaf set for their repair (S3 overlay leave), and closes its overlay
// links. ctx bounds the wait for them to close.
func (s *rvSwitch) leave(ctx context.Context) error {
	s.mu.Lock()
	if s.left || s.tr == nil {
		s.mu.Unlock()
		return nil
	}
	s.left = true
	me := s.table.Self()
	links := make([]*router, 0, len(s.links))
	for r := range s.links {
		links = append(links, r)
	}
	leaves := nodesOut(s.table.Leaves())
	reqs := make([]*requester, 0, len(s.reqs))
	for q := range s.reqs {
		reqs = append(reqs, q)
	}
	s.mu.Unlock()
	for _, r := range links {
		r.sendControl(&linkctl.Announce{Node: nodeOut(me), Leaving: true, Leaves: leaves})
	}
	// The announcements leave before the links close: a marker behind
	// them returns once each neighbour has handled them.
	for _, r := range links {
		a := r.marker(0, 0)
		select {
		case <-a.done:
		case <-ctx.Done():
		}
	}
	for _, q := range reqs {
		q.cancel()
	}
	var err error
	for _, r := range links {
		r.close()
		select {
		case <-r.finished:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	s.sw.log.Info("sion: switch left the overlay", "switch", s.sw.cfg.Name, "neighbours", len(links))
	return err
}

// overlay control: the messages of joins, leaves and repairs.

// handleJoin routes a newcomer's Join on toward its ID, adding this
// switch's rows, or, at the root, answers the newcomer with JoinReply.
func (s *rvSwitch) handleJoin(r *router, m *linkctl.Join) error {
	joiner := overlay.Node{ID: m.Joiner, Addr: m.JoinerAddr}
	s.mu.Lock()
	from := s.links[r]
	if m.Hops == 0 && from.ID != joiner.ID {
		s.mu.Unlock()
		return fmt.Errorf("a join of %s, not of the peer %s, on its first hop", joiner.ID, from.ID)
	}
	// The newcomer may be in the table already (it linked here): route as
	// if it were not, toward the switch closest to it among the others.
	had := s.table.Remove(joiner.ID)
	rows := s.table.JoinRows(m.Key)
	next, ok := s.table.NextHop(m.Key)
	var leaves []overlay.Node
	if !ok || s.peers[next.ID] == nil || m.Hops >= maxJoinHops {
		ok = false
		leaves = s.table.LeafSetFor(joiner.ID)
	}
	if had {
		s.tableAdd(joiner)
	}
	nextR := s.peers[next.ID]
	s.mu.Unlock()
	m.Rows = appendNodes(m.Rows, rows)
	if ok {
		m.Hops++
		return sendOrLog(nextR, m)
	}
	reply := &linkctl.JoinReply{Joiner: m.Joiner, Rows: m.Rows, Leaves: appendNodes(nil, leaves)}
	s.sendTo(joiner, reply)
	return nil
}

// handleJoinReply hands the answer to this switch's own Join to it.
func (s *rvSwitch) handleJoinReply(m *linkctl.JoinReply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Joiner != s.table.Self().ID || s.replies == nil {
		return
	}
	nodes := append(nodesIn(m.Leaves), nodesIn(m.Rows)...) // the leaf set first: routing's correctness rests on it
	select {
	case s.replies <- nodes:
	default: // a second answer
	}
}

// handleAnnounce learns that the sender leaves (and its leaf set) or is
// here.
func (s *rvSwitch) handleAnnounce(r *router, m *linkctl.Announce) error {
	s.mu.Lock()
	from := s.links[r]
	s.mu.Unlock()
	if m.Node.ID != from.ID {
		return fmt.Errorf("an announcement of %x, not of the peer %s", m.Node.ID, from.ID)
	}
	if m.Leaving {
		s.mu.Lock()
		s.tomb(from.ID)
		s.table.Remove(from.ID)
		s.mu.Unlock()
		s.learn(nodesIn(m.Leaves))
		s.kick()
		return nil
	}
	s.learn([]overlay.Node{from})
	return nil
}

// handleLeafSetRequest answers with this switch's leaf set.
func (s *rvSwitch) handleLeafSetRequest(r *router) error {
	s.mu.Lock()
	leaves := s.table.LeafSetFor(s.links[r].ID)
	s.mu.Unlock()
	return sendOrLog(r, &linkctl.LeafSetReply{Leaves: appendNodes(nil, leaves)})
}

// handleLeafSetReply learns the leaf set of a neighbour this switch asked
// (an answer nobody asked for is dropped), and asks again once the links
// to the nodes it named are up, while that changes the table
// (internal/overlay: repair).
func (s *rvSwitch) handleLeafSetReply(r *router, m *linkctl.LeafSetReply) {
	s.mu.Lock()
	if s.asked[r] == 0 {
		s.mu.Unlock()
		return
	}
	if s.asked[r]--; s.asked[r] == 0 {
		delete(s.asked, r)
	}
	s.mu.Unlock()
	dials := s.learn(nodesIn(m.Leaves))
	if len(dials) == 0 {
		return
	}
	s.wg.Go(func() {
		up := 0
		for _, ol := range dials {
			<-ol.done
			if ol.r != nil {
				up++
			}
		}
		if up > 0 {
			s.mu.Lock()
			s.askLeafSets()
			s.mu.Unlock()
		}
	})
}

// sendTo sends m to node n over the link to it, dialling it first if
// there is none (a newcomer's root answering it).
func (s *rvSwitch) sendTo(n overlay.Node, m linkctl.Message) {
	s.mu.Lock()
	r := s.peers[n.ID]
	var ol *overlayLink
	if r == nil {
		ol = s.dialLocked(n)
	}
	s.mu.Unlock()
	if r != nil {
		sendOrLog(r, m)
		return
	}
	if ol == nil {
		return
	}
	s.wg.Go(func() {
		<-ol.done
		if ol.r != nil {
			sendOrLog(ol.r, m)
		}
	})
}

// sendOrLog sends m over r; a message that does not fit is logged there
// (sendControl) and dropped.
func sendOrLog(r *router, m linkctl.Message) error {
	r.sendControl(m)
	return nil
}

// kick asks the rerouter to move what the routing's answers changed for.
func (s *rvSwitch) kick() {
	select {
	case s.kicks <- struct{}{}:
	default:
	}
}

// startRerouter starts the goroutine that moves subscriptions and
// advertisements when the overlay changes (Switch.reroute, rerouteAdverts),
// once per burst of changes. It ends with the overlay (close). mu must be
// held.
func (s *rvSwitch) startRerouter() {
	if s.kicks != nil {
		return
	}
	s.kicks = make(chan struct{}, 1)
	s.stop = make(chan struct{})
	tick := time.NewTicker(cmp.Or(s.rv.cfg.Window, DefaultTrafficWindow) / 10)
	s.wg.Go(func() {
		defer tick.Stop()
		for {
			select {
			case <-s.kicks:
				s.sw.reroute()
				s.rerouteAdverts()
			case <-tick.C:
				s.balance(s.now())
			case <-s.stop:
				return
			}
		}
	})
}

// nodeOut and nodesOut convert overlay nodes for the messages; nodesIn
// converts them back, appendNodes appends, within linkctl.MaxNames.
func nodeOut(n overlay.Node) linkctl.OverlayNode {
	return linkctl.OverlayNode{ID: n.ID, Addr: n.Addr}
}

func nodesOut(ns []overlay.Node) []linkctl.OverlayNode { return appendNodes(nil, ns) }

func appendNodes(out []linkctl.OverlayNode, ns []overlay.Node) []linkctl.OverlayNode {
	for _, n := range ns {
		if len(out) >= linkctl.MaxNames {
			break
		}
		if !slices.ContainsFunc(out, func(o linkctl.OverlayNode) bool { return o.ID == n.ID }) {
			out = append(out, nodeOut(n))
		}
	}
	return out
}

func nodesIn(ns []linkctl.OverlayNode) []overlay.Node {
	out := make([]overlay.Node, len(ns))
	for i, n := range ns {
		out[i] = overlay.Node{ID: n.ID, Addr: n.Addr}
	}
	return out
}

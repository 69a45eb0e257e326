package sion

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
)

// Bounds of a router's outgoing queue for data events; control messages are
// never dropped (their number is bounded by the filters). The bytes bound
// the memory; the count is high enough that a burst of small events (ten
// thousand from many goroutines, as watermill's universal suite
// publishes) waits for the writer rather than being dropped.
const (
	routerQueue      = 1 << 16  // data frames
	routerQueueBytes = 64 << 20 // and their bytes
)

// router is this switch's end of one link — a shared link or a gateway,
// as its linkEnd says (S1 SI-R): it holds a session on the switch whose
// subscriptions are the peer's proxy filters — what fires there is
// forwarded to the peer — and it registers at the peer proxy filters for
// what this switch needs, with a reference count per propagated key. Its
// control traffic is link-local: typed messages (internal/linkctl) in
// Control frames, in the same ordered stream as the data events in
// Forward frames (DESIGN.md "One mechanism").
type router struct {
	sw     *Switch
	conn   transport.Conn
	lim    wire.Limits
	peer   string  // the peer switch's name
	parent bool    // the peer is this switch's parent: this switch requested the link
	end    linkEnd // what kind of link it is: a shared link's end or a gateway's
	sess   *Session
	cancel context.CancelFunc // ends the link's context (newRouter)
	done   <-chan struct{}    // closed when the link's context ends
	totals *string            // Switch.routeMu; the key its counters add up under in LinkTotals, once it is in the switch's table (addRouter)

	up       chan struct{} // closed when both sides' initial filters are installed
	synced   chan struct{} // closed when the peer's Synced arrives
	finished chan struct{} // closed when the router has shut down
	wg       sync.WaitGroup

	qmu      sync.Mutex
	q        frameQueue[linkFrame] // qmu; frames for the writer, in order
	wake     chan struct{}
	dropping atomic.Bool // a drop episode is going on (logged once)

	mu     sync.Mutex
	closed bool                      // mu
	routes map[routeKey]*route       // mu; propagated to the peer
	covers map[coverSlot][]*route    // mu; registered routes that may cover others (PlaceConfig.Covering)
	nCover int                       // mu; routes counted under another (not registered themselves)
	acks   map[uint64]*linkAck       // mu; registers and markers sent, not yet acknowledged
	next   uint64                    // mu; the last key or ack number given out
	err    error                     // mu; why the link ended
	upAt   time.Time                 // mu
	state  atomic.Pointer[LinkState] // stored under mu (read without it too): LinkUp once, only before LinkDown

	eventsSent, eventsRecv, ctlSent, ctlRecv     atomic.Uint64
	dropped, duplicates, expired, refused        atomic.Uint64
	framesSent, framesRecv, bytesSent, bytesRecv atomic.Uint64 // as the transport carried them
}

// linkEnd is what one end of a link does that depends on the kind of
// link (the link-end seam, DESIGN.md "Seams"): a shared link between two
// switches of a place (sharedEnd) or a gateway between two places
// (gatewayEnd). The router does what every link does — its session on
// the switch, whose subscriptions are the peer's proxy filters; the
// ordered stream of frames with its bounded queue; reference-counted
// registers and releases; acknowledgements and markers (S2) — and calls
// its end for the rest, never asking which end it has. A new kind of link
// (S3's bypass between a merge point and a branch point, a link over
// another network) is a new implementation.
//
// The router calls addRoute and removeRoute under Switch.routeMu;
// install, release, receive and control from its reader goroutine, one at a
// time, in the order the peer sent them; forward from whatever goroutine
// delivers the event (many at once); marker from any goroutine.
type linkEnd interface {
	// addRoute registers at the peer what this switch's interest key,
	// needed with ttl, becomes over this link, and returns the
	// acknowledgements a subscription's contract waits on (S2);
	// removeRoute undoes one addRoute.
	addRoute(r *router, key routeKey, ttl int) []*linkAck
	removeRoute(r *router, key routeKey, ttl int)
	// install handles the peer's register: it installs what the peer's
	// interest becomes here as subscriptions of r.sess and acknowledges
	// it (r.ackAfter, r.sendAck) once they are active. release handles
	// the peer's release of a key. An error ends the link (ErrProtocol).
	install(r *router, m *linkctl.Register) error
	release(r *router, key uint64) error
	// forward sends event e, which r.sess fired for, to the peer (queued:
	// r.sendData); hits are the proxy filters it matched (one or more, in
	// ID order); shared holds the event's encodings, made once per event
	// for all links.
	forward(r *router, e *Event, hits []hitSub, shared *eventFrames)
	// receive handles a data event from the peer; ctx is the link's.
	receive(ctx context.Context, r *router, w *wire.Event)
	// control handles a control message that this kind of link carries
	// and the router does not (the router handles what every link does:
	// Register and Release through install and release, Ack, Marker,
	// Synced): a shared link's probes and Leave, a gateway's Leave (the
	// end of the federation), a new link's own protocol. It reports false
	// for a message the link does not carry, which ends the link
	// (ErrProtocol), as does an error.
	control(r *router, m linkctl.Message) (bool, error)
	// marker passes a marker with ttl on over the link and returns its
	// acknowledgement, or nil when the marker does not cross it; gateways
	// is how many more gateways the marker may cross (Switch.Flush).
	marker(r *router, ttl, gateways int) *linkAck
	// inPlace reports whether the link joins two switches of one place:
	// it is one of the switch's shared links (Links, Stats.Links).
	inPlace() bool
	// tree reports whether the link is one of the place's tree (S1): the
	// tree's control — probes, Leave — travels over it. An S3 overlay
	// link is in the place but not in a tree.
	tree() bool
	// via names the gateway the link is ("" for a shared link), as
	// RouteInfo.Gateway shows it.
	via() string
	// sessionKind is what the router's session is (SessionInfo.Kind).
	sessionKind() SessionKind
}

// route is one key propagated to the peer — a proxy filter's text: a
// subscription's filter, or its event type's, by the routing — with the
// subscriptions of this switch (local, or proxies of its other links)
// that need it and the TTLs they need it to have at the peer. The key is
// registered with the largest TTL asked for: again, under the same ID,
// when a larger one is asked for; never lowered until it is released.
// Under PlaceConfig.Covering a key may instead be counted under another
// route that covers it (routes_cover.go).
type route struct {
	id   uint64      // the key's ID at the peer
	key  routeKey    // the proxy filter's text and places
	refs int         // subscriptions that need it
	ttls map[int]int // of those, how many need each TTL
	sent int         // the TTL registered at the peer; -1: not registered
	last *linkAck    // the acknowledgement of the last register; nil while covered and never registered

	// Covering (routes_cover.go); zero without it.
	f       *filter.Filter      // the key's filter, compiled and resolved once; nil: it takes no part
	slot    coverSlot           // its place in router.covers
	pos     int                 // its index in router.covers[slot]; -1: not there
	cover   *route              // the registered route it is counted under; nil: none
	covered map[*route]struct{} // the routes counted under it
}

// linkAck is an acknowledgement a router waits for: of a register (S2
// contract) or of a marker (Flush, liveness probes).
type linkAck struct {
	done chan struct{} // closed when the peer acknowledges, or the link ends
	ok   bool          // set before done closes: the peer answered
	err  error         // set before done closes: the peer refused
	peer string
}

// newRouter returns the router of a link over conn to peer, of the kind
// end says, holding session sess on this switch. It returns the link's
// context too — a child of parent that ends when the link does — for the
// caller to pass to start (a context is not kept in a struct).
func (sw *Switch) newRouter(parent context.Context, conn transport.Conn, peer string, isParent bool, sess *Session, end linkEnd) (*router, context.Context) {
	r := &router{
		sw: sw, conn: conn, peer: peer, parent: isParent, sess: sess, end: end,
		up: make(chan struct{}), synced: make(chan struct{}), finished: make(chan struct{}),
		wake:   make(chan struct{}, 1),
		routes: map[routeKey]*route{}, acks: map[uint64]*linkAck{},
	}
	r.q = frameQueue[linkFrame]{policy: dropNewest, maxData: routerQueue, maxBytes: routerQueueBytes, lost: r.lostData}
	r.lim = wire.DefaultLimits()
	r.lim.MaxFrameBytes = conn.MaxFrameBytes()
	ctx, cancel := context.WithCancel(parent)
	r.cancel, r.done = cancel, ctx.Done()
	st := LinkConnecting
	r.state.Store(&st)
	sess.sink = r
	return r, ctx
}

// openRouterSession opens the session a router holds on this switch: its
// subscriptions are the peer's proxy filters. Its sink is the router,
// which newRouter sets.
func (sw *Switch) openRouterSession(peer string) (*Session, error) {
	s := newSession(sw, sw, sw.nextSession.Add(1), "router:"+peer, []ontology.Attr{}, newSpool(1, 0), nil)
	if err := sw.addSession(s); err != nil {
		return nil, err
	}
	return s, nil
}

// start puts the router into the switch's table, queues its initial
// registers, and starts its goroutines: the writer, the reader (which
// shuts the router down when the connection ends), the sender of the
// Synced when it must wait (addRouter), and a watcher that closes up
// once the initial exchange is acknowledged and the peer's Synced has
// arrived. ctx is the link's context newRouter returned.
func (r *router) start(ctx context.Context) {
	initial, before := r.sw.addRouter(r)
	r.wg.Go(func() { r.write(ctx) })
	if len(before) > 0 {
		r.wg.Go(func() {
			for _, a := range before {
				select {
				case <-a.done:
				case <-r.done:
					return
				}
			}
			r.sendControl(&linkctl.Synced{})
		})
	}
	r.wg.Go(func() {
		for _, a := range initial {
			select {
			case <-a.done:
			case <-r.done:
				return
			}
		}
		select {
		case <-r.synced:
		case <-r.done:
			return
		}
		r.mu.Lock()
		if *r.state.Load() == LinkDown { // shutdown began: the link never came up
			r.mu.Unlock()
			return
		}
		st := LinkUp
		r.upAt = time.Now()
		r.state.Store(&st)
		r.mu.Unlock()
		close(r.up)
	})
	go func() {
		err := r.read(ctx)
		r.shutdown(err)
	}()
}

// awaitUp waits until the link is up, the router shuts down (its error),
// or ctx ends.
func (r *router) awaitUp(ctx context.Context) error {
	select {
	case <-r.up:
		return nil
	case <-r.finished:
		return r.linkErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// upSince returns the link's state and, while it is up, when it came up
// (else the zero time), read together. mu must be held.
func (r *router) upSince() (LinkState, time.Time) {
	st := *r.state.Load()
	if st != LinkUp {
		return st, time.Time{}
	}
	return st, r.upAt
}

func (r *router) linkErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		return fmt.Errorf("%w: link to %q closed", ErrClosed, r.peer)
	}
	return r.err
}

// close ends the link; the reader shuts the router down.
func (r *router) close() {
	r.cancel()
	r.conn.Close()
}

// shutdown takes the router out of the switch, releases everything that
// waits on it, removes the peer's proxy filters (which releases what
// they propagated over other links) and waits for its goroutines.
func (r *router) shutdown(err error) {
	// Down first: from here on nothing shows the link up — not Links,
	// which no longer finds it in the switch's table, nor its requester,
	// which holds it until it has finished — and it does not come up.
	down := LinkDown
	r.mu.Lock()
	r.state.Store(&down)
	r.mu.Unlock()
	r.sw.removeRouter(r)
	r.cancel()
	r.conn.Close()
	r.mu.Lock()
	r.closed = true
	if r.err == nil {
		if err == nil || errors.Is(err, context.Canceled) {
			err = transport.ErrClosed
		}
		r.err = fmt.Errorf("%w: link to %q: %w", ErrClosed, r.peer, err)
	}
	for n, a := range r.acks {
		close(a.done) // the part of the network behind the link is gone
		delete(r.acks, n)
	}
	r.mu.Unlock()
	r.qmu.Lock()
	lost := r.q.clear() // data events queued but never handed to the transport: lostData counts them
	r.qmu.Unlock()
	if lost > 0 {
		r.sw.log.Warn("sion: link ended with events queued; they are lost", "switch", r.sw.cfg.Name, "peer", r.peer, "events", lost)
	}
	r.sess.Close()
	r.wg.Wait()
	r.sw.endRouter(r)
	close(r.finished)
}

// write sends the queued frames in order until the link ends.
func (r *router) write(ctx context.Context) {
	var batch []linkFrame
	for {
		select {
		case <-r.wake:
		case <-ctx.Done():
			return
		}
		r.qmu.Lock()
		batch = r.q.takeAll(batch)
		r.qmu.Unlock()
		for _, it := range batch {
			if err := r.conn.Send(ctx, it.f); err != nil {
				r.conn.Close() // the reader sees it and shuts the router down
				return
			}
			if it.isData { // counted once the transport has it: the counters never go back
				r.eventsSent.Add(1)
			}
			if !it.accept {
				r.framesSent.Add(1)
				r.bytesSent.Add(uint64(len(it.f)))
			}
		}
	}
}

// enqueue queues frame f for the writer. A data frame is dropped (and
// false returned; lostData counts it) when the queue is over its bounds;
// control frames are always queued.
func (r *router) enqueue(f []byte, data bool) bool {
	return r.enqueueFrame(linkFrame{f: f, isData: data})
}

func (r *router) enqueueFrame(it linkFrame) bool {
	r.qmu.Lock()
	ok, _ := r.q.push(it)
	r.qmu.Unlock()
	if !ok {
		return false
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return true
}

// sendControl queues control message m, or returns why it cannot: it
// does not fit the link's frames (a filter or a probe's path too long for
// them, which another link or a peer may have handed on). Nothing is sent
// then, and the link stays: what m carried is refused where it is used
// (a register's acknowledgement fails) or dropped (a probe, logged at
// most once per peer and interval, like refusals).
func (r *router) sendControl(m linkctl.Message) error {
	f, err := linkctl.Encode(m, r.lim)
	if err != nil {
		r.sw.refusal("link:"+r.peer, "sion: control message does not fit the link; not sent", "kind", m.Kind().String(), "err", err)
		return fmt.Errorf("sion: a %v to %q does not fit the link's frames: %w", m.Kind(), r.peer, err)
	}
	r.ctlSent.Add(1)
	r.enqueue(f, false)
	return nil
}

// sendAccept queues the LinkAccept that ends the handshake of a link
// this switch accepted. It counts as a control message sent, not as one
// of the link's frames: the requester reads it in its handshake, before
// its router counts frames (LinkInfo.FramesSent).
func (r *router) sendAccept() {
	f, err := linkctl.Encode(&linkctl.LinkAccept{Switch: r.sw.cfg.Name, Place: r.sw.place.Name()}, r.lim)
	if err != nil {
		panic("sion: a LinkAccept does not fit a frame: " + err.Error()) // names are bounded (MaxNameBytes)
	}
	r.ctlSent.Add(1)
	r.enqueueFrame(linkFrame{f: f, accept: true})
}

// sendData queues data frame f and counts it as sent, or, when the queue
// is full, as dropped (lostData; logged once per episode of drops) and
// returns false.
func (r *router) sendData(f []byte) bool {
	if !r.enqueue(f, true) {
		if !r.dropping.Swap(true) {
			r.sw.log.Warn("sion: shared link or gateway is full, dropping events", "switch", r.sw.cfg.Name, "peer", r.peer)
		}
		return false
	}
	if r.dropping.Load() { // the episode ended: a read per event, a write per episode
		r.dropping.Store(false)
	}
	return true
}

// unfit counts a data event that could not be encoded into a frame for
// the link (too large for its frames), through the queue's one drop
// accounting.
func (r *router) unfit() {
	r.qmu.Lock()
	r.q.discard(linkFrame{isData: true})
	r.qmu.Unlock()
}

// lostData counts a data frame the queue dropped (LinkInfo.Dropped): one
// it had no room for, or one queued and never handed to the transport
// when the router shuts down. qmu must be held.
func (r *router) lostData(linkFrame, dropCause) { r.dropped.Add(1) }

// read handles the peer's frames until the connection ends; ctx is the
// link's.
func (r *router) read(ctx context.Context) error {
	var fwd wire.Forward // each event's, in turn: nothing keeps it once handled
	for {
		f, err := r.conn.Recv(ctx)
		if err != nil {
			return err
		}
		r.framesRecv.Add(1)
		r.bytesRecv.Add(uint64(len(f)))
		m, err := wire.DecodeReusing(f, r.lim, &fwd)
		if err != nil {
			return r.protocolError(ctx, err)
		}
		switch m := m.(type) {
		case *wire.Control:
			r.ctlRecv.Add(1)
			c, err := linkctl.Decode(m)
			if err == nil {
				err = r.control(c)
			}
			if err != nil {
				return r.protocolError(ctx, err)
			}
		case *wire.Forward:
			r.eventsRecv.Add(1)
			r.end.receive(ctx, r, &m.Event)
		case *wire.Bye:
			return nil
		case *wire.Error:
			return fromWireError(m)
		default:
			return r.protocolError(ctx, fmt.Errorf("a shared link does not carry %v frames", m.Kind()))
		}
	}
}

// protocolError tells the peer why the link closes and returns the error.
func (r *router) protocolError(ctx context.Context, err error) error {
	err = fmt.Errorf("%w: link from %q: %w", ErrProtocol, r.peer, err)
	if f, e := wire.Encode(nil, &wire.Error{Code: codeProtocol, Message: err.Error()}); e == nil {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		r.conn.Send(ctx, f)
		cancel()
	}
	return err
}

// control handles one control message from the peer.
func (r *router) control(m linkctl.Message) error {
	switch m := m.(type) {
	case *linkctl.Register:
		return r.end.install(r, m)
	case *linkctl.Release:
		return r.end.release(r, m.Key)
	case *linkctl.Ack:
		r.acked(m.Ack, m.Error)
	case *linkctl.Marker:
		// Everything the peer sent before the marker has been delivered
		// here and queued on the other links: pass the marker on and
		// acknowledge once they have.
		var waits []*linkAck
		if m.TTL > 0 {
			waits = r.sw.sendMarkers(r, m.TTL-1, m.Gateways)
		}
		r.ackAfter(m.Ack, "", waits)
	case *linkctl.Synced:
		select {
		case <-r.synced:
			return errors.New("a second Synced")
		default:
			close(r.synced)
		}
	default:
		if ok, err := r.end.control(r, m); ok || err != nil {
			return err
		}
		return fmt.Errorf("unexpected %v message on an established link", m.Kind())
	}
	return nil
}

// ackAfter acknowledges the peer's register or marker n once every one of
// waits is acknowledged (S2: after the links it went on have), with msg,
// or else the first error among them; nothing if the link ends first.
func (r *router) ackAfter(n uint64, msg string, waits []*linkAck) {
	if len(waits) == 0 {
		r.sendAck(n, msg)
		return
	}
	r.wg.Go(func() {
		for _, a := range waits {
			select {
			case <-a.done:
				if a.err != nil && msg == "" {
					msg = a.err.Error()
				}
			case <-r.done:
				return
			}
		}
		r.sendAck(n, msg)
	})
}

// sendAck acknowledges the peer's register or marker n; msg is "" or why
// it failed.
func (r *router) sendAck(n uint64, msg string) {
	if len(msg) > maxAckError { // it may quote a peer's input: it must fit any link
		msg = strings.ToValidUTF8(msg[:maxAckError], "") + "…"
	}
	r.sendControl(&linkctl.Ack{Ack: n, Error: msg})
}

// maxAckError bounds the text of a failed acknowledgement, in bytes.
const maxAckError = 4 << 10

// acked handles the peer's Ack of a register or a marker.
func (r *router) acked(n uint64, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.acks[n]
	if a == nil {
		return // the register was superseded, or a marker's waiter left
	}
	delete(r.acks, n)
	if msg != "" {
		a.err = errors.New(msg)
	}
	a.ok = true
	close(a.done)
}

// newAck returns a fresh acknowledgement number and what waits for it.
// mu must be held.
func (r *router) newAck() (uint64, *linkAck) {
	r.next++
	a := &linkAck{done: make(chan struct{}), peer: r.peer}
	r.acks[r.next] = a
	return r.next, a
}

// closedAck is the acknowledgement of what a closed link cannot carry.
func closedAck(peer string) *linkAck {
	a := &linkAck{done: make(chan struct{}), peer: peer}
	close(a.done)
	return a
}

// addRoute counts one more subscription needing key at the peer with ttl
// and returns the acknowledgements the subscription's contract waits on;
// the link's end decides what it registers (a gateway converts the key
// first). Switch.routeMu must be held.
func (r *router) addRoute(key routeKey, ttl int) []*linkAck { return r.end.addRoute(r, key, ttl) }

// removeRoute undoes one addRoute. Switch.routeMu must be held.
func (r *router) removeRoute(key routeKey, ttl int) { r.end.removeRoute(r, key, ttl) }

// pendingRoutes returns the acknowledgements still awaited of the keys
// registered at the peer.
func (r *router) pendingRoutes() []*linkAck {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*linkAck
	for _, rt := range r.routes {
		if rt.last != nil && !chanClosed(rt.last.done) {
			out = append(out, rt.last)
		}
	}
	return out
}

// register counts one more subscription needing key at the peer with ttl
// and registers it there on 0→1, or again when ttl is larger than the
// one registered. It returns the acknowledgement the subscription's
// contract waits on: of the register it caused, or of the last one.
func (r *router) register(key routeKey, ttl int) *linkAck {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return closedAck(r.peer)
	}
	rt := r.routes[key]
	if rt == nil {
		rt = r.newRoute(key)
	}
	rt.refs++
	rt.ttls[ttl]++
	if ttl > rt.sent {
		return r.registerAt(rt, ttl)
	}
	return rt.last
}

// newRoute puts a route for key, with no subscription yet, into the
// table. mu must be held.
func (r *router) newRoute(key routeKey) *route {
	r.next++
	rt := &route{id: r.next, key: key, ttls: map[int]int{}, sent: -1, pos: -1}
	r.routes[key] = rt
	return rt
}

// registerAt registers rt's key at the peer with ttl — again, under the
// same ID, when it is registered with less — and returns the
// acknowledgement. mu must be held: registers and releases of one key
// leave in the order of their reference-count changes.
func (r *router) registerAt(rt *route, ttl int) *linkAck {
	n, a := r.newAck()
	if err := r.sendControl(&linkctl.Register{Key: rt.id, Ack: n, Filter: rt.key.filter, TTL: ttl, Places: rt.key.placeList()}); err != nil {
		// Not registered (at this TTL): the contract that waits on it
		// fails with err, and the key's release sends nothing the peer
		// has not had.
		delete(r.acks, n)
		a.err = err
		close(a.done)
		if rt.last == nil {
			rt.last = a
		}
		return a
	}
	rt.sent, rt.last = ttl, a
	return a
}

// unref counts one subscription fewer needing key with ttl and, on 1→0,
// takes the key's route out of the table and returns it; nil while
// others need it (or the link is closed). mu must be held.
func (r *router) unref(key routeKey, ttl int) *route {
	rt := r.routes[key]
	if rt == nil || r.closed {
		return nil
	}
	rt.refs--
	if rt.ttls[ttl]--; rt.ttls[ttl] <= 0 {
		delete(rt.ttls, ttl)
	}
	if rt.refs > 0 {
		return nil
	}
	delete(r.routes, key)
	return rt
}

// release counts one subscription fewer needing key with ttl and
// releases the key at the peer on 1→0.
func (r *router) release(key routeKey, ttl int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.unref(key, ttl)
	if rt == nil {
		return
	}
	if rt.sent >= 0 { // the peer has it
		r.sendControl(&linkctl.Release{Key: rt.id})
	}
}

// marker sends a marker with ttl and returns its acknowledgement; ok is
// false when the link ended first.
func (r *router) marker(ttl, gateways int) *linkAck {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return closedAck(r.peer)
	}
	n, a := r.newAck()
	r.sendControl(&linkctl.Marker{Ack: n, TTL: ttl, Gateways: gateways})
	return a
}

// LinkState is the state of a shared link (S1 shared-link control).
type LinkState int

// String returns the state's name.
func (s LinkState) String() string {
	switch s {
	case LinkConnecting:
		return "connecting"
	case LinkUp:
		return "up"
	case LinkDown:
		return "down"
	case LinkClosed:
		return "closed"
	}
	return fmt.Sprintf("LinkState(%d)", int(s))
}

const (
	// LinkConnecting: the link is being established, or its initial
	// filters are being exchanged.
	LinkConnecting LinkState = iota
	// LinkUp: both switches have installed each other's filters.
	LinkUp
	// LinkDown: the link failed or closed; a link the switch requested is
	// being re-established.
	LinkDown
	// LinkClosed: a requested link that is not re-established any more:
	// SharedLink.Close or Switch.Close ran, or its parent left (Leave)
	// and made this switch a root.
	LinkClosed
)

// probeTimeout bounds the wait for a link to answer a probe marker, and
// for the ancestors to answer the loop check; linkWait how long a link
// request waits for the acceptor's own link to come up.
const (
	probeTimeout = 2 * time.Second
	linkWait     = 2 * time.Second
)

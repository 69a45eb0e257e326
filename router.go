package sion

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
)

// Control traffic of shared links travels as events of reserved types (DESIGN.md
// "One mechanism"), in Forward frames, in order with the data events. These are
// consumed by the router at the other end of the link.
const (
	typeLinkRequest  = ontology.LinkRequestType // switch, place, link: a shared-link establishment request (S1)
	typeLinkAccept   = ontology.LinkAcceptType  // switch, place: the request is accepted
	typeLinkRegister = ontology.RegisterType    // key, filter, ttl: install a proxy filter; answered by Ack
	typeLinkRelease  = ontology.ReleaseType     // key: remove the proxy filter key
	typeLinkMarker   = ontology.MarkerType      // key, ttl: a barrier (Switch.Flush); answered by Ack
	typeLinkAck      = ontology.AckType         // key, error: a Register or Marker is done downstream (S2)
	typeLinkSynced   = ontology.SyncedType      // the sender's initial registers precede it
)

// Bounds of a router's outgoing queue for data events; control events are
// never dropped (their number is bounded by the filters).
const (
	routerQueue      = 4096     // data frames
	routerQueueBytes = 64 << 20 // and their bytes
)

// router is this switch's end of one shared link (S1 SI-R): it holds a
// session on the switch whose subscriptions are the peer's proxy filters —
// what fires there is forwarded to the peer — and it registers at the
// peer, through control events, proxy filters for what this switch needs,
// with a reference count per propagated key.
type router struct {
	sw     *Switch
	conn   transport.Conn
	lim    wire.Limits
	peer   string      // the peer switch's name
	parent bool        // the peer is this switch's parent: this switch requested the link
	gw     *gatewayEnd // set when the link is a gateway's, between two places
	sess   *Session
	mode   RoutingMode
	ctx    context.Context // ends when the link does
	cancel context.CancelFunc

	up       chan struct{} // closed when both sides' initial filters are installed
	synced   chan struct{} // closed when the peer's Synced arrives
	finished chan struct{} // closed when the router has shut down
	wg       sync.WaitGroup

	qmu      sync.Mutex
	q        frameQueue[linkFrame] // qmu; frames for the writer, in order
	wake     chan struct{}
	dropping atomic.Bool // a drop episode is going on (logged once)

	mu      sync.Mutex
	closed  bool                      // mu
	routes  map[string]*route         // mu; propagated to the peer, by proxy filter text
	acks    map[uint64]*linkAck       // mu; registers and markers sent, not yet acknowledged
	next    uint64                    // mu; the last key or ack number given out
	proxies map[uint64]*Subscription  // reader only; the peer's keys installed here
	err     error                     // mu; why the link ended
	upAt    time.Time                 // mu
	state   atomic.Pointer[LinkState] // for Links

	eventsSent, eventsRecv, ctlSent, ctlRecv atomic.Uint64
	dropped, duplicates, expired, refused    atomic.Uint64
}

// route is one key propagated to the peer — a proxy filter's text: a
// subscription's filter, or its event type's, by mode — with the
// subscriptions of this switch (local, or proxies of its other links)
// that need it and the TTLs they need it to have at the peer. The key is
// registered with the largest TTL asked for: again, under the same ID,
// when a larger one is asked for; never lowered until it is released.
type route struct {
	id   uint64      // the key's ID at the peer
	key  string      // the proxy filter's text
	refs int         // subscriptions that need it
	ttls map[int]int // of those, how many need each TTL
	sent int         // the TTL registered at the peer
	last *linkAck    // the acknowledgement of the last register
}

// linkAck is an acknowledgement a router waits for: of a register (S2
// contract) or of a marker (Flush, liveness probes).
type linkAck struct {
	done chan struct{} // closed when the peer acknowledges, or the link ends
	ok   bool          // set before done closes: the peer answered
	err  error         // set before done closes: the peer refused
	peer string
}

func (sw *Switch) newRouter(ctx context.Context, conn transport.Conn, peer string, parent bool, sess *Session) *router {
	r := &router{
		sw: sw, conn: conn, peer: peer, parent: parent, sess: sess, mode: sw.place.cfg.Routing,
		up: make(chan struct{}), synced: make(chan struct{}), finished: make(chan struct{}),
		wake:   make(chan struct{}, 1),
		routes: map[string]*route{}, acks: map[uint64]*linkAck{},
		proxies: map[uint64]*Subscription{},
	}
	r.q = frameQueue[linkFrame]{policy: dropNewest, maxData: routerQueue, maxBytes: routerQueueBytes, lost: r.lostData}
	r.lim = wire.DefaultLimits()
	r.lim.MaxFrameBytes = conn.MaxFrameBytes()
	r.ctx, r.cancel = context.WithCancel(ctx)
	st := LinkConnecting
	r.state.Store(&st)
	sess.sink = r
	return r
}

// start puts the router into the switch's table, queues its initial
// registers, and starts its goroutines: the writer, the reader (which
// shuts the router down when the connection ends) and a watcher that
// closes up once the initial exchange is acknowledged.
func (r *router) start() {
	initial := r.sw.addRouter(r)
	r.wg.Go(r.write)
	r.wg.Go(func() {
		for _, a := range initial {
			select {
			case <-a.done:
			case <-r.ctx.Done():
				return
			}
		}
		select {
		case <-r.synced:
		case <-r.ctx.Done():
			return
		}
		st := LinkUp
		r.mu.Lock()
		r.upAt = time.Now()
		r.mu.Unlock()
		r.state.Store(&st)
		close(r.up)
	})
	go func() {
		err := r.read()
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
		r.sw.log.Warn("sion: shared link ended with events queued; they are lost", "switch", r.sw.cfg.Name, "peer", r.peer, "events", lost)
	}
	st := LinkDown
	r.state.Store(&st)
	r.sess.Close()
	r.wg.Wait()
	r.sw.endRouter(r)
	close(r.finished)
}

// write sends the queued frames in order until the link ends.
func (r *router) write() {
	for {
		select {
		case <-r.wake:
		case <-r.ctx.Done():
			return
		}
		r.qmu.Lock()
		batch := r.q.takeAll()
		r.qmu.Unlock()
		for _, it := range batch {
			if err := r.conn.Send(r.ctx, it.f); err != nil {
				r.conn.Close() // the reader sees it and shuts the router down
				return
			}
		}
	}
}

// enqueue queues frame f for the writer. A data frame is dropped (and
// false returned; lostData counts it) when the queue is over its bounds;
// control frames are always queued.
func (r *router) enqueue(f []byte, data bool) bool {
	r.qmu.Lock()
	ok, _ := r.q.push(linkFrame{f: f, isData: data})
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

// sendControl queues a control event of type typ with attrs.
func (r *router) sendControl(typ string, attrs ...ontology.Attr) {
	f, err := wire.EncodeLimits(nil, &wire.Forward{Event: wire.Event{Type: typ, Attrs: attrs}}, r.lim)
	if err != nil { // a filter too long for the link's frames: the peer never installs it
		r.sw.log.Warn("sion: control event does not fit the link", "switch", r.sw.cfg.Name, "peer", r.peer, "type", typ, "err", err)
		r.close()
		return
	}
	r.ctlSent.Add(1)
	r.enqueue(f, false)
}

// forward sends event e, which the router's session fired for, to the
// peer: one Forward frame with TTL lowered and Hops raised, encoded once
// per event for all routers of the switch.
func (r *router) forward(e *Event, shared *lazyDeliver) {
	if r.gw != nil {
		r.gw.forward(r, e)
		return
	}
	if e.Control.TTL <= 0 {
		r.expired.Add(1)
		return
	}
	f, err := shared.forward(r.sw, e)
	if err == nil && len(f) > r.lim.MaxFrameBytes {
		err = fmt.Errorf("%w: frame of %d bytes over the link's limit of %d", wire.ErrTooLarge, len(f), r.lim.MaxFrameBytes)
	}
	if err != nil {
		r.dropped.Add(1)
		r.sw.log.Warn("sion: event not forwarded", "switch", r.sw.cfg.Name, "peer", r.peer, "event", e.ID, "err", err)
		return
	}
	r.sendData(f)
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
	r.eventsSent.Add(1)
	return true
}

// lostData counts a data frame the queue dropped (LinkInfo.Dropped): one
// it had no room for, or one queued and never handed to the transport
// when the router shuts down, which sendData had counted sent. qmu must
// be held.
func (r *router) lostData(_ linkFrame, why dropCause) {
	r.dropped.Add(1)
	if why == dropEnded {
		r.eventsSent.Add(^uint64(0))
	}
}

// read handles the peer's frames until the connection ends.
func (r *router) read() error {
	for {
		f, err := r.conn.Recv(r.ctx)
		if err != nil {
			return err
		}
		m, err := wire.Decode(f, r.lim)
		if err != nil {
			return r.protocolError(err)
		}
		switch m := m.(type) {
		case *wire.Forward:
			if ontology.IsReserved(m.Event.Type) && !ontology.IsRouted(m.Event.Type) {
				r.ctlRecv.Add(1)
				if err := r.control(&m.Event); err != nil {
					return r.protocolError(err)
				}
				continue
			}
			r.eventsRecv.Add(1)
			if r.gw != nil {
				r.gw.receive(r, &m.Event)
				continue
			}
			r.receive(&m.Event)
		case *wire.Bye:
			return nil
		case *wire.Error:
			return fromWireError(m)
		default:
			return r.protocolError(fmt.Errorf("a shared link does not carry %v frames", m.Kind()))
		}
	}
}

// protocolError tells the peer why the link closes and returns the error.
func (r *router) protocolError(err error) error {
	err = fmt.Errorf("%w: link from %q: %w", ErrProtocol, r.peer, err)
	if f, e := wire.Encode(nil, &wire.Error{Code: codeProtocol, Message: err.Error()}); e == nil {
		ctx, cancel := context.WithTimeout(r.ctx, time.Second)
		r.conn.Send(ctx, f)
		cancel()
	}
	return err
}

// receive delivers a data event from the peer on this switch: to local
// subscriptions and to the other links whose proxy filters match, never
// back to the peer. An event seen before is dropped.
func (r *router) receive(w *wire.Event) {
	e, err := r.sw.readmit(w)
	if err != nil {
		r.refused.Add(1)
		r.sw.log.Warn("sion: event from shared link refused", "switch", r.sw.cfg.Name, "peer", r.peer, "err", err)
		return
	}
	if r.sw.seen.add(e.ID) {
		r.duplicates.Add(1)
		return
	}
	if err := r.sw.deliver(r.ctx, r.ctx.Done(), r.sess, e); err != nil && r.ctx.Err() == nil {
		r.sw.log.Warn("sion: event from shared link not delivered everywhere", "switch", r.sw.cfg.Name, "peer", r.peer, "event", e.ID, "err", err)
	}
}

// control handles one control event from the peer.
func (r *router) control(w *wire.Event) error {
	c := controlAttrs(w.Attrs)
	switch w.Type {
	case typeLinkRegister:
		if r.gw != nil {
			return r.gw.install(r, c)
		}
		return r.install(c)
	case typeLinkRelease:
		key, err := c.uint("key")
		if err != nil {
			return err
		}
		if r.gw != nil {
			return r.gw.release(r, key)
		}
		sub, ok := r.proxies[key]
		if !ok {
			return fmt.Errorf("release of key %d, which is not registered", key)
		}
		delete(r.proxies, key)
		if sub != nil { // nil: it could not be installed here
			r.sess.forget(sub)
			sub.cancel()
		}
	case typeLinkAck:
		n, err := c.uint("ack")
		if err != nil {
			return err
		}
		msg, _ := c.str("error")
		r.acked(n, msg)
	case typeLinkMarker:
		n, err := c.uint("ack")
		if err != nil {
			return err
		}
		ttl, err := c.int("ttl")
		if err != nil {
			return err
		}
		// Everything the peer sent before the marker has been delivered
		// here and queued on the other links: pass the marker on and
		// acknowledge once they have.
		gateways, _ := c.int("gateways") // missing: 0
		var waits []*linkAck
		if ttl > 0 {
			waits = r.sw.sendMarkers(r, int(ttl)-1, int(gateways))
		}
		r.ackAfter(n, "", waits)
	case ontology.ProbeType:
		return r.handleProbe(c)
	case ontology.ProbeReplyType:
		return r.handleProbeReply(c)
	case ontology.LeaveType:
		if r.gw != nil { // the other place ends the federation
			r.gw.unfederated(r)
			return nil
		}
		to, err := c.str("parent")
		if err != nil {
			return err
		}
		if r.parent { // from a child it means nothing: the link just ends
			r.sw.parentLeaves(to)
		}
	case typeLinkSynced:
		select {
		case <-r.synced:
			return errors.New("a second Synced")
		default:
			close(r.synced)
		}
	default:
		return fmt.Errorf("unexpected control event %q", w.Type)
	}
	return nil
}

// install registers the peer's proxy filter on this switch, propagates it
// further, and acknowledges it once every link it went on has (S2).
func (r *router) install(c controlAttrs) error {
	key, err := c.uint("key")
	if err != nil {
		return err
	}
	src, err := c.str("filter")
	if err != nil {
		return err
	}
	ttl, err := c.int("ttl")
	if err != nil {
		return err
	}
	n, err := c.uint("ack")
	if err != nil {
		return err
	}
	var places []string
	if p, err := c.str("places"); err == nil {
		places = strings.Split(p, "\n")
	}
	ack := func(err error) {
		msg := ""
		if err != nil {
			msg = fmt.Sprintf("switch %q: %v", r.sw.cfg.Name, err)
		}
		r.sendAck(n, msg)
	}
	// A register of a key already installed raises its TTL: the new
	// proxy goes in before the old one comes out, so nothing is missed.
	old, again := r.proxies[key]
	f, err := filter.Compile(src)
	if err != nil {
		if !again {
			r.proxies[key] = nil
		}
		ack(fmt.Errorf("%w: %w", ErrInvalidFilter, err))
		return nil
	}
	sub := newSubscription(r.sess, f, subConfig{ttl: int(ttl)}, 0, places)
	r.sess.mu.Lock()
	r.sess.subs[sub.id] = sub
	r.sess.mu.Unlock()
	waits, err := r.sw.install(sub)
	if err != nil {
		r.sess.forget(sub)
		if !again {
			r.proxies[key] = nil
		}
		ack(err) // the subscriber's contract fails with this error
		return nil
	}
	r.proxies[key] = sub
	if old != nil {
		r.sess.forget(old)
		old.cancel()
	}
	r.ackAfter(n, "", waits)
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
			case <-r.ctx.Done():
				return
			}
		}
		r.sendAck(n, msg)
	})
}

// sendAck acknowledges the peer's register or marker n; msg is "" or why
// it failed.
func (r *router) sendAck(n uint64, msg string) {
	r.sendControl(typeLinkAck, ontology.Attr{Name: "ack", Value: ontology.Int(int64(n))}, ontology.Attr{Name: "error", Value: ontology.String(msg)})
}

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
// and returns the acknowledgements the subscription's contract waits on.
// A gateway converts the key first (gatewayEnd.addRoute).
func (r *router) addRoute(key string, ttl int) []*linkAck {
	if r.gw != nil {
		return r.gw.addRoute(r, key)
	}
	return []*linkAck{r.register(key, ttl)}
}

// removeRoute undoes one addRoute.
func (r *router) removeRoute(key string, ttl int) {
	if r.gw != nil {
		r.gw.removeRoute(r, key)
		return
	}
	r.release(key, ttl)
}

// register counts one more subscription needing key at the peer with ttl
// and registers it there on 0→1, or again when ttl is larger than the
// one registered. It returns the acknowledgement the subscription's
// contract waits on: of the register it caused, or of the last one.
func (r *router) register(key string, ttl int) *linkAck {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return closedAck(r.peer)
	}
	rt := r.routes[key]
	if rt == nil {
		r.next++
		rt = &route{id: r.next, key: key, ttls: map[int]int{}, sent: -1}
		r.routes[key] = rt
	}
	rt.refs++
	rt.ttls[ttl]++
	if ttl > rt.sent {
		n, a := r.newAck()
		rt.sent, rt.last = ttl, a
		// Under mu: registers and releases of one key leave in the order
		// of their reference-count changes.
		text, places := splitRouteKey(key)
		attrs := []ontology.Attr{
			{Name: "ack", Value: ontology.Int(int64(n))},
			{Name: "filter", Value: ontology.String(text)},
			{Name: "key", Value: ontology.Int(int64(rt.id))},
			{Name: "ttl", Value: ontology.Int(int64(ttl))},
		}
		if places != nil {
			attrs = append(attrs, ontology.Attr{Name: "places", Value: ontology.String(strings.Join(places, "\n"))})
		}
		r.sendControl(typeLinkRegister, attrs...)
	}
	return rt.last
}

// release counts one subscription fewer needing key with ttl and
// releases the key at the peer on 1→0.
func (r *router) release(key string, ttl int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.routes[key]
	if rt == nil || r.closed {
		return
	}
	rt.refs--
	if rt.ttls[ttl]--; rt.ttls[ttl] <= 0 {
		delete(rt.ttls, ttl)
	}
	if rt.refs > 0 {
		return
	}
	delete(r.routes, key)
	r.sendControl(typeLinkRelease, ontology.Attr{Name: "key", Value: ontology.Int(int64(rt.id))})
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
	r.sendControl(typeLinkMarker, ontology.Attr{Name: "ack", Value: ontology.Int(int64(n))},
		ontology.Attr{Name: "gateways", Value: ontology.Int(int64(gateways))}, ontology.Attr{Name: "ttl", Value: ontology.Int(int64(ttl))})
	return a
}

// controlAttrs reads a control event's attributes.
type controlAttrs []ontology.Attr

func (c controlAttrs) get(name string, kind ontology.Kind) (ontology.Value, error) {
	for _, a := range c {
		if a.Name == name {
			if a.Value.Kind() != kind {
				return ontology.Value{}, fmt.Errorf("control attribute %q is %s, want %s", name, a.Value.Kind(), kind)
			}
			return a.Value, nil
		}
	}
	return ontology.Value{}, fmt.Errorf("control attribute %q is missing", name)
}

func (c controlAttrs) int(name string) (int64, error) {
	v, err := c.get(name, ontology.KindInt)
	if err != nil {
		return 0, err
	}
	if v.Int() < 0 || v.Int() > math.MaxInt32 {
		return 0, fmt.Errorf("control attribute %q is %d, out of range", name, v.Int())
	}
	return v.Int(), nil
}

func (c controlAttrs) uint(name string) (uint64, error) {
	n, err := c.int(name)
	return uint64(n), err
}

func (c controlAttrs) str(name string) (string, error) {
	v, err := c.get(name, ontology.KindString)
	return v.Str(), err
}

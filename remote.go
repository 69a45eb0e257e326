package sion

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
)

// Timing of a remote session's side of its stream.
const (
	byeTimeout = time.Second           // bounds the goodbye a closing remote session sends
	ackEvery   = 64                    // frames received before they are confirmed at once
	ackDelay   = 10 * time.Millisecond // fewer are confirmed this long after the first arrived
)

// Dial connects to a switch that serves remote sessions (Switch.Serve) at
// addr over tr, and returns a remote Session: the same type and API as a
// local one. The switch's admission hook decides whether it may open;
// Dial returns an error wrapping ErrNotAdmitted when it refuses, one
// wrapping ErrInvalidConfig for a configuration it cannot use (a profile
// that makes the Hello longer than MaxHandshakeFrameBytes), and transport
// errors as they are.
//
// On a remote session, Publish, Subscribe, Unsubscribe, SetProfile,
// Advertise and Pull are requests the switch answers, so they return the
// switch's errors, which wrap the same sentinels as on a local session; a
// call whose ctx ends returns an error wrapping ctx's error, and the
// session stays usable. Publish checks the place's payload limit
// (PlaceConfig.MaxPayloadBytes, which the switch tells) before the event
// travels. Each subscription keeps its queue, overflow policy and handler
// on this side; WithOverflow(Block) is refused (ErrInvalidConfig), since
// one subscription would hold up the session's others. The switch sends
// one frame per event for all of the session's subscriptions that matched,
// in order. The look-in spool stays on the switch (with the session's
// SpoolSize and SpoolRetention), so events wait there while the entity
// pulls; events the Spill policy moves out of a full queue wait on this
// side, and Pull returns them first, so an event both spilled and
// looked-in can come twice through Pull, once per side. Stats reports this
// side's spool. Publish returns once the switch has delivered the event to
// the switch's own queues and links; a subscriber on another remote
// session receives it when that link's frames arrive (see Session.Sync).
//
// If the connection fails, the session reconnects (cfg.Reconnect): calls
// made meanwhile wait for the connection or their ctx, and the switch
// keeps the session and its events for the retention, so a session that
// returns in time misses nothing and receives nothing twice — beyond
// NATS's at-most-once reconnect. The entity confirms what it receives, so
// that an event the switch matched for the session is either received
// or counted as dropped (SubscriptionStats.Dropped, on both sides). A
// session that cannot reconnect ends: Done closes, Err and its
// subscriptions' Next return the cause.
func Dial(ctx context.Context, tr transport.Transport, addr string, cfg SessionConfig) (*Session, error) {
	if tr == nil {
		return nil, fmt.Errorf("%w: Dial with a nil transport", ErrInvalidConfig)
	}
	if err := checkKey("SessionConfig.SharedKey", cfg.SharedKey); err != nil {
		return nil, err
	}
	if cfg.SpoolSize < 0 || cfg.SpoolRetention < 0 || cfg.SpoolSize > 1<<32-1 {
		return nil, fmt.Errorf("%w: SessionConfig.SpoolSize %d and SpoolRetention %v must not be negative", ErrInvalidConfig, cfg.SpoolSize, cfg.SpoolRetention)
	}
	if err := cfg.Reconnect.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	rc := &remoteClient{
		tr: tr, addrs: append([]string{addr}, cfg.Reconnect.Addrs...), key: cfg.SharedKey,
		policy: cfg.Reconnect.withDefaults(), log: log,
		pending: map[uint64]*request{}, subs: map[uint64]*Subscription{},
		done: make(chan struct{}), runDone: make(chan struct{}), ackWake: make(chan struct{}, 1), ackDone: make(chan struct{}),
	}
	rc.hello = wire.Hello{
		Version: protocolVersion, Session: cfg.Name, Profile: cfg.Profile,
		RetentionMillis: uint64(rc.policy.Retention / time.Millisecond), RetentionBytes: uint64(rc.policy.RetentionBytes),
		SpoolSize: uint32(cfg.SpoolSize), SpoolRetentionMillis: uint64(cfg.SpoolRetention / time.Millisecond),
	}
	probe := rc.hello
	probe.Token, probe.Resume = make([]byte, nonceBytes), make([]byte, 16)
	if f, err := wire.Encode(nil, &probe); err != nil || len(f) > MaxHandshakeFrameBytes {
		return nil, fmt.Errorf("%w: SessionConfig.Profile makes a hello of %d bytes, more than MaxHandshakeFrameBytes (%d) (%v)", ErrInvalidConfig, len(f), MaxHandshakeFrameBytes, err)
	}
	hello := rc.hello
	conn, welcome, err := rc.connect(ctx, addr, &hello)
	if err != nil {
		return nil, err
	}
	s := newSession(rc, nil, 0, cfg.Name, slices.Clone(cfg.Profile), newSpool(0, 0), nil)
	rc.sess = s
	rc.adopt(conn, welcome, addr)
	rc.token = welcome.Token
	rc.conn = conn
	runCtx, stop := context.WithCancel(context.Background())
	rc.stop = stop
	go rc.run(runCtx, conn)
	go rc.ackLoop()
	return s, nil
}

// remoteClient is the backend of a remote session: the entity's side of
// its connection to a switch, reconnected when it fails.
type remoteClient struct {
	tr      transport.Transport
	addrs   []string // Dial's address, then ReconnectPolicy.Addrs
	key     []byte
	hello   wire.Hello // the fields of every Hello but Profile, Token, Resume, Received
	policy  ReconnectPolicy
	log     *slog.Logger
	sess    *Session
	stop    context.CancelFunc // ends run's context: Close
	runDone chan struct{}      // closed when run returns
	ackWake chan struct{}      // a frame arrived with none unconfirmed before
	ackDone chan struct{}      // closed when ackLoop returns

	seq, subSeq atomic.Uint64
	received    atomic.Uint64 // frames of the current stream received
	acked       atomic.Uint64 // the count last confirmed

	// sendMu orders requests on the wire by Seq: it is held while a
	// request gets its number and is sent, and while requests are sent
	// again after a reconnect.
	sendMu sync.Mutex

	mu         sync.Mutex
	conn       transport.Conn // mu; nil while disconnected
	addr       string         // mu; the address of conn, or of the last one
	lim        wire.Limits    // mu; of conn
	token      []byte         // mu; names the session for a resume
	switchName string         // mu
	maxPayload int            // mu; the place's PlaceConfig.MaxPayloadBytes
	// retentionBytes is the stream's bound the switch granted: the
	// entity confirms at least every quarter of it, so that a small bound
	// does not drop what a fast entity has received. mu.
	retentionBytes int
	pending        map[uint64]*request // mu; requests not yet answered, by Seq
	// reregistering counts the subscriptions and advertisements
	// registered again after a reconnect, not yet answered; reconnected
	// is the event reported once they are. mu.
	reregistering int
	reconnected   *ConnectionEvent
	subs          map[uint64]*Subscription // mu
	// release holds the IDs of filters the switch may still hold for a
	// subscription ended by endSub, for ackLoop to release. mu.
	release []uint64
	closed  bool          // mu
	done    chan struct{} // closed when closed is set

	pullMu   sync.Mutex
	pullWait chan wire.Message // pullMu; the reply of a pull whose caller gave up
	late     []Delivery        // pullMu; pulled events not yet returned
}

// request is a request sent, or to send once connected, and not yet
// answered.
type request struct {
	frame []byte
	kind  wire.Kind
	again bool              // an Advertise sent again after a reconnect (resumed); beside kind, in its padding
	ch    chan wire.Message // where the answer goes; nil when nobody waits
	sub   *Subscription     // for Subscribe: the subscription; ended if the answer is an error and nobody waits
}

// connect dials addr and runs the handshake with hello.
func (rc *remoteClient) connect(ctx context.Context, addr string, hello *wire.Hello) (transport.Conn, *wire.Welcome, error) {
	conn, err := rc.tr.Dial(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	lim := wire.DefaultLimits()
	lim.MaxFrameBytes = conn.MaxFrameBytes()
	welcome, err := clientHandshake(ctx, conn, lim, hello, rc.key)
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("sion: dial %s: %w", addr, err)
	}
	return conn, welcome, nil
}

// adopt takes the connection's parameters from welcome. mu must be held,
// or the client not yet shared.
func (rc *remoteClient) adopt(conn transport.Conn, w *wire.Welcome, addr string) {
	rc.lim = wire.DefaultLimits()
	rc.lim.MaxFrameBytes = conn.MaxFrameBytes()
	rc.switchName, rc.addr = w.Switch, addr
	rc.maxPayload = int(min(w.MaxPayloadBytes, 1<<31-1))
	rc.retentionBytes = int(min(w.RetentionBytes, 1<<31-1))
}

func (rc *remoteClient) encode(m wire.Message) ([]byte, error) {
	rc.mu.Lock()
	lim := rc.lim
	rc.mu.Unlock()
	f, err := wire.EncodeLimits(nil, m, lim)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	return f, nil
}

// call sends a request with a fresh sequence number (set by seq) and
// waits for its answer.
func (rc *remoteClient) call(ctx context.Context, m wire.Message, seq func(uint64)) (wire.Message, error) {
	n, ch, err := rc.start(ctx, m, seq, nil, true)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		rc.forget(n)
		return nil, fmt.Errorf("sion: session %q: %v request: %w", rc.sess.name, m.Kind(), ctx.Err())
	case <-rc.done:
		return nil, rc.closedErr()
	}
}

// start gives a request the next sequence number (set by seq) and sends
// it, or, while the session is disconnected, keeps it to send once it is
// connected again. With wait, it returns the channel its answer will
// arrive on.
func (rc *remoteClient) start(ctx context.Context, m wire.Message, seq func(uint64), sub *Subscription, wait bool) (uint64, chan wire.Message, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, fmt.Errorf("sion: session %q: %v request: %w", rc.sess.name, m.Kind(), err)
	}
	rc.sendMu.Lock()
	defer rc.sendMu.Unlock()
	n := rc.seq.Add(1)
	seq(n)
	f, err := rc.encode(m)
	if err != nil {
		return 0, nil, err
	}
	r := &request{frame: f, kind: m.Kind(), sub: sub}
	if wait {
		r.ch = make(chan wire.Message, 1)
	}
	rc.mu.Lock()
	if rc.closed {
		rc.mu.Unlock()
		return 0, nil, rc.closedErr()
	}
	rc.pending[n] = r
	conn := rc.conn
	rc.mu.Unlock()
	if conn == nil {
		return n, r.ch, nil // sent once connected
	}
	if err := conn.Send(ctx, f); err != nil {
		switch {
		case ctx.Err() != nil:
			rc.forget(n)
			return 0, nil, fmt.Errorf("sion: session %q: %v request: %w", rc.sess.name, m.Kind(), ctx.Err())
		case errors.Is(err, transport.ErrFrameTooLarge):
			rc.forget(n)
			return 0, nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
		}
		// The connection failed: the request is sent again once the
		// session is connected again.
	}
	return n, r.ch, nil
}

// forget drops a request nobody waits for any more.
func (rc *remoteClient) forget(n uint64) {
	rc.mu.Lock()
	delete(rc.pending, n)
	rc.mu.Unlock()
}

func (rc *remoteClient) closedErr() error {
	if err := rc.sess.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: session %q", ErrClosed, rc.sess.name)
}

// ack turns an answer into the error it carries.
func ack(r wire.Message) error {
	switch r := r.(type) {
	case *wire.Ack:
		return nil
	case *wire.Error:
		return fromWireError(r)
	}
	return fmt.Errorf("%w: reply of kind %v", ErrProtocol, r.Kind())
}

// reply hands the answer m to the request seq.
func (rc *remoteClient) reply(seq uint64, m wire.Message) {
	rc.mu.Lock()
	r := rc.pending[seq]
	delete(rc.pending, seq)
	rc.mu.Unlock()
	switch {
	case r == nil:
	case r.ch != nil:
		r.ch <- m
	case r.sub != nil || r.again: // a subscription or advertisement registered again after a reconnect
		if e, ok := m.(*wire.Error); ok {
			if r.sub != nil {
				rc.endSub(r.sub, fmt.Errorf("registering it again after a reconnect failed: %w", fromWireError(e)))
			} else {
				rc.log.Warn("sion: advertising again after a reconnect failed", "session", rc.sess.name, "err", fromWireError(e))
			}
		}
		rc.mu.Lock()
		rc.reregistering--
		var ev *ConnectionEvent
		if rc.reregistering == 0 {
			ev, rc.reconnected = rc.reconnected, nil
		}
		rc.mu.Unlock()
		if ev != nil {
			rc.notify(*ev)
		}
	}
}

func (rc *remoteClient) deliver(m *wire.Deliver) {
	ev, err := fromWireEvent(&m.Event)
	if err != nil {
		rc.log.Warn("sion: undeliverable event from the switch", "session", rc.sess.name, "err", err)
		return
	}
	d := Delivery{Event: ev}
	var subs []*Subscription
	d.Matched, subs = rc.regroup(fromWireMatches(m.Matched))
	var spilled []*Subscription
	for _, sub := range subs {
		if !sub.cfg.lookIn {
			if spill, _ := sub.enqueue(context.Background(), nil, d); spill {
				spilled = append(spilled, sub)
			}
		}
	}
	if len(spilled) > 0 { // Spill policy: this side's spool, which Pull reads first
		rc.sess.spool.put(d, spilled...)
	}
}

// regroup returns ms, matches of this side's subscriptions as the switch
// lists them, with each member (see Subscription.group) replaced by its
// group, each subscription once with its best score, in ID order; and the
// subscriptions of this side they name. A match naming no subscription of
// this side (cancelled meanwhile) stays as it is. ms may be reused.
func (rc *remoteClient) regroup(ms []Match) ([]Match, []*Subscription) {
	subs := make([]*Subscription, 0, len(ms))
	out := ms[:0]
	grouped := false
	rc.mu.Lock()
	for _, mt := range ms {
		sub := rc.subs[mt.Subscription]
		if sub == nil {
			out = append(out, mt)
			continue
		}
		g := sub.owner()
		grouped = grouped || g != sub
		if i := slices.Index(subs, g); i >= 0 {
			for j := range out {
				if out[j].Subscription == g.id {
					out[j].Score = max(out[j].Score, mt.Score)
				}
			}
			continue
		}
		subs = append(subs, g)
		out = append(out, Match{Subscription: g.id, Score: mt.Score})
	}
	rc.mu.Unlock()
	if grouped {
		slices.SortFunc(out, func(a, b Match) int { return compareUint64(a.Subscription, b.Subscription) })
	}
	return out, subs
}

// The backend of remote sessions.

func (rc *remoteClient) publish(ctx context.Context, _ *Session, ev *Event) error {
	if ev == nil {
		return fmt.Errorf("%w: nil event", ErrInvalidEvent)
	}
	rc.mu.Lock()
	limit := rc.maxPayload
	rc.mu.Unlock()
	if err := checkPayloadSize(len(ev.Data), limit); err != nil {
		return err
	}
	p := &wire.Publish{Event: toWireEvent(ev)}
	r, err := rc.call(ctx, p, func(n uint64) { p.Seq = n })
	if err != nil {
		return err
	}
	return ack(r)
}

func (rc *remoteClient) nextSubID() uint64 { return rc.subSeq.Add(1) }

// subscribeMessage returns the Subscribe request for sub, without Seq.
func subscribeMessage(sub *Subscription) *wire.Subscribe {
	return &wire.Subscribe{Sub: sub.id, Filter: sub.f.String(), Queue: uint32(min(sub.cfg.queue, 1<<32-1)), Overflow: uint8(sub.cfg.overflow), LookIn: sub.cfg.lookIn, TTL: int32(sub.ttl)}
}

func (rc *remoteClient) register(ctx context.Context, sub *Subscription) error {
	if sub.cfg.overflow == Block {
		return errRemoteBlock
	}
	rc.mu.Lock()
	rc.subs[sub.id] = sub // before the request: a delivery may precede the answer
	rc.mu.Unlock()
	m := subscribeMessage(sub)
	n, ch, err := rc.start(ctx, m, func(n uint64) { m.Seq = n }, sub, true)
	if err == nil {
		select {
		case r := <-ch:
			err = ack(r)
		case <-ctx.Done():
			rc.forget(n)
			err = fmt.Errorf("sion: session %q: Subscribe request: %w", rc.sess.name, ctx.Err())
		case <-rc.done:
			err = rc.closedErr()
		}
	}
	if err != nil {
		rc.mu.Lock()
		delete(rc.subs, sub.id)
		rc.mu.Unlock()
		if ctx.Err() != nil { // the switch may have registered it: the release follows the request
			rc.unsubscribe(sub.id)
		}
	}
	return err
}

// unregister stops deliveries to subs at once, on this side, and asks
// the switch to drop the subscriptions without waiting for its answer.
func (rc *remoteClient) unregister(subs ...*Subscription) {
	for _, sub := range subs {
		rc.mu.Lock()
		_, ok := rc.subs[sub.id]
		delete(rc.subs, sub.id)
		closed := rc.closed
		rc.mu.Unlock()
		if ok && !closed {
			rc.unsubscribe(sub.id)
		}
	}
}

// unsubscribe asks the switch to drop subscription id, without waiting.
func (rc *remoteClient) unsubscribe(id uint64) {
	m := &wire.Unsubscribe{Sub: id}
	ctx, cancel := context.WithTimeout(context.Background(), byeTimeout)
	defer cancel()
	rc.start(ctx, m, func(n uint64) { m.Seq = n }, nil, false)
}

func (rc *remoteClient) setProfile(ctx context.Context, s *Session, profile []ontology.Attr) error {
	m := &wire.SetProfile{Profile: profile}
	r, err := rc.call(ctx, m, func(n uint64) { m.Seq = n })
	if err == nil {
		err = ack(r)
	}
	if err != nil {
		return err
	}
	p := slices.Clone(profile)
	s.profile.Store(&p)
	return nil
}

// pull returns what the Spill policy put in this side's spool, else asks
// the switch for its spooled events. A reply that arrives after the caller
// gave up is kept for the next Pull, so that no pulled event is lost.
func (rc *remoteClient) pull(ctx context.Context, s *Session, limit int) ([]Delivery, error) {
	rc.pullMu.Lock()
	defer rc.pullMu.Unlock()
	take := func() []Delivery {
		n := len(rc.late)
		if limit > 0 && limit < n {
			n = limit
		}
		out := slices.Clone(rc.late[:n])
		rc.late = slices.Delete(rc.late, 0, n)
		return out
	}
	if ds := s.spool.take(limit); len(ds) > 0 {
		return ds, nil
	}
	if len(rc.late) > 0 {
		return take(), nil
	}
	if rc.pullWait == nil {
		m := &wire.Pull{Max: uint32(max(0, min(limit, 1<<32-1)))}
		_, ch, err := rc.start(ctx, m, func(n uint64) { m.Seq = n }, nil, true)
		if err != nil {
			return nil, err
		}
		rc.pullWait = ch
	}
	select {
	case r := <-rc.pullWait:
		rc.pullWait = nil
		switch r := r.(type) {
		case *wire.PullReply:
			for _, wd := range r.Deliveries {
				ev, err := fromWireEvent(&wd.Event)
				if err != nil {
					rc.log.Warn("sion: undeliverable pulled event", "session", s.name, "err", err)
					continue
				}
				matched, _ := rc.regroup(fromWireMatches(wd.Matched))
				rc.late = append(rc.late, Delivery{Event: ev, Matched: matched})
			}
			return take(), nil
		case *wire.Error:
			return nil, fromWireError(r)
		}
		return nil, fmt.Errorf("%w: pull reply of kind %v", ErrProtocol, r.Kind())
	case <-ctx.Done():
		return nil, fmt.Errorf("sion: session %q: Pull request: %w", s.name, ctx.Err()) // the reply, when it comes, waits in pullWait
	case <-rc.done:
		return nil, rc.closedErr()
	}
}

// sync waits until every delivery the switch queued for this session
// before the call has been handed to its subscriptions — a ping, answered
// after them — and then until the switch has heard that they arrived — a
// confirmation and a second ping — so that its counters say so too.
func (rc *remoteClient) sync(ctx context.Context) error {
	for i := range 2 {
		if i == 1 {
			rc.mu.Lock()
			conn, n := rc.conn, rc.received.Load()
			rc.mu.Unlock()
			if conn != nil {
				rc.confirm(conn, n)
			}
		}
		m := &wire.Ack{}
		r, err := rc.call(ctx, m, func(n uint64) { m.Seq = n })
		if err == nil {
			err = ack(r)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// closeSession says goodbye to the switch — the frames received
// confirmed first, so that the switch counts only the rest as dropped —
// and ends the session's goroutines. After a failure it only waits for
// them.
func (rc *remoteClient) closeSession() {
	rc.mu.Lock()
	closed := rc.closed
	rc.closed = true
	if !closed {
		close(rc.done)
	}
	rc.mu.Unlock()
	rc.stop()
	<-rc.runDone // no frame arrives any more: the count below is exact
	<-rc.ackDone
	rc.mu.Lock()
	conn := rc.conn
	rc.conn = nil
	rc.mu.Unlock()
	if conn == nil {
		return
	}
	if !closed {
		ctx, cancel := context.WithTimeout(context.Background(), byeTimeout)
		for _, m := range []wire.Message{&wire.Received{Frames: rc.received.Load()}, &wire.Bye{}} {
			if f, err := wire.Encode(nil, m); err == nil {
				conn.Send(ctx, f)
			}
		}
		// Until the switch ends the connection (it does on the Bye), read
		// and drop what it still sends: closing with frames unread would
		// reset the connection, and a reset may discard the Bye before the
		// switch reads it — the switch would then keep the session, away,
		// for its retention, holding what it matches.
		for {
			if _, err := conn.Recv(ctx); err != nil {
				break
			}
		}
		cancel()
	}
	conn.Close()
}

// sessionClosing says goodbye on Close (cause nil), and only then: a
// session that failed (fail) has ended its goroutines' work already, and
// waits for them on its Close.
func (rc *remoteClient) sessionClosing(_ *Session, cause error) {
	if cause == nil {
		rc.closeSession()
	}
}

func (rc *remoteClient) sessionClosed(*Session) {}

// The switch counts deliveries and drops; this side only its
// subscriptions'.
func (rc *remoteClient) countDeliveries(uint64)        {}
func (rc *remoteClient) countDrops(uint64, dropReason) {}
func (rc *remoteClient) countMatches(uint64)           {}
func (rc *remoteClient) countSpills(uint64)            {}

func (rc *remoteClient) logger() *slog.Logger { return rc.log }

func (rc *remoteClient) name() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.switchName
}

// advertise sends each advertisement to the switch as a request of its
// own, in order, and keeps on the session those the switch recorded: the
// ones it accepted, and one whose paths were not installed in time
// (ErrNotGranted), which the switch keeps too. It stops at the first
// error. A reconnect that opens the session anew sends them again
// (resumed).
func (rc *remoteClient) advertise(ctx context.Context, s *Session, ads []Advertisement) error {
	for _, ad := range ads {
		m := &wire.Advertise{Type: ad.Type, Attrs: ad.Attrs}
		r, err := rc.call(ctx, m, func(n uint64) { m.Seq = n })
		if err == nil {
			err = ack(r)
		}
		if err == nil || errors.Is(err, ErrNotGranted) {
			s.mu.Lock()
			s.ads = append(s.ads, Advertisement{Type: ad.Type, Attrs: slices.Clone(ad.Attrs)})
			s.mu.Unlock()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

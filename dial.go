package sion

import (
	"context"
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

// byeTimeout bounds the goodbye a closing remote session sends.
const byeTimeout = time.Second

// Dial connects to a switch that serves remote sessions (Switch.Serve) at
// addr over tr, and returns a remote Session: the same type and API as a
// local one. The switch's admission hook decides whether it may open;
// Dial returns an error wrapping ErrNotAdmitted when it refuses, and
// transport errors as they are.
//
// On a remote session, Publish, Subscribe, Unsubscribe, SetProfile and
// Pull are requests the switch answers, so they return the switch's
// errors, which wrap the same sentinels as on a local session. Each
// subscription keeps its queue, overflow policy and handler on this side;
// the switch sends one frame per event for all of the session's
// subscriptions that matched, in order. The look-in spool stays on the
// switch, so events wait there while the entity pulls (events the Spill
// policy moves out of a full queue wait on this side, and Pull returns
// them first, so an event both spilled and looked-in can come twice
// through Pull on a remote session, once per side); Stats reports its
// size as 0 here, and the spool has the switch's default size and
// retention (the hello frame does not carry SpoolSize and SpoolRetention
// yet). Publish returns once the switch has delivered the
// event to the switch's own queues and links; a subscriber on another
// remote session receives it when that link's frames arrive (see
// Session.Sync). If the connection fails, every call returns ErrClosed
// and the subscriptions' channels are closed; the session does not
// reconnect.
func Dial(ctx context.Context, tr transport.Transport, addr string, cfg SessionConfig) (*Session, error) {
	if tr == nil {
		return nil, fmt.Errorf("%w: Dial with a nil transport", ErrInvalidConfig)
	}
	if err := checkKey("SessionConfig.SharedKey", cfg.SharedKey); err != nil {
		return nil, err
	}
	if cfg.SpoolSize < 0 || cfg.SpoolRetention < 0 {
		return nil, fmt.Errorf("%w: SessionConfig.SpoolSize %d and SpoolRetention %v must not be negative", ErrInvalidConfig, cfg.SpoolSize, cfg.SpoolRetention)
	}
	conn, err := tr.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	rc := &remoteClient{conn: conn, log: log, pending: map[uint64]chan wire.Message{}, subs: map[uint64]*Subscription{}, done: make(chan struct{})}
	rc.lim = wire.DefaultLimits()
	rc.lim.MaxFrameBytes = conn.MaxFrameBytes()
	welcome, err := clientHandshake(ctx, conn, rc.lim, &wire.Hello{Version: protocolVersion, Session: cfg.Name, Profile: cfg.Profile}, cfg.SharedKey)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("sion: dial %s: %w", addr, err)
	}
	rc.switchName = welcome.Switch
	s := &Session{be: rc, name: cfg.Name, spool: newSpool(0, 0), subs: map[uint64]*Subscription{}, done: make(chan struct{})}
	profile := slices.Clone(cfg.Profile)
	s.profile.Store(&profile)
	rc.sess = s
	rc.ctx, rc.cancel = context.WithCancel(context.Background())
	rc.readerDone = make(chan struct{})
	go rc.read()
	return s, nil
}

// remoteClient is the backend of a remote session: the client side of a
// link to a switch.
type remoteClient struct {
	conn       transport.Conn
	lim        wire.Limits
	log        *slog.Logger
	switchName string
	sess       *Session
	ctx        context.Context // ends when the link does: bounds Block enqueues
	cancel     context.CancelFunc
	readerDone chan struct{}

	seq    atomic.Uint64
	subSeq atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]chan wire.Message // mu; replies awaited, by sequence number
	subs    map[uint64]*Subscription     // mu
	closed  bool                         // mu
	done    chan struct{}                // closed when the link ends
	err     error                        // mu; why it ended

	pullMu   sync.Mutex
	pullWait chan wire.Message // pullMu; the reply of a pull whose caller gave up
	pullSeq  uint64            // pullMu
	late     []Delivery        // pullMu; pulled events not yet returned
}

func (rc *remoteClient) encode(m wire.Message) ([]byte, error) {
	f, err := wire.EncodeLimits(nil, m, rc.lim)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	return f, nil
}

// call sends a request with a fresh sequence number (set by seq) and
// waits for its reply.
func (rc *remoteClient) call(ctx context.Context, m wire.Message, seq func(uint64)) (wire.Message, error) {
	n, ch, err := rc.start(ctx, m, seq)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		rc.mu.Lock()
		delete(rc.pending, n)
		rc.mu.Unlock()
		return nil, ctx.Err()
	case <-rc.done:
		return nil, rc.closedErr()
	}
}

// start sends a request and returns the channel its reply will arrive on.
func (rc *remoteClient) start(ctx context.Context, m wire.Message, seq func(uint64)) (uint64, chan wire.Message, error) {
	n := rc.seq.Add(1)
	seq(n)
	f, err := rc.encode(m)
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan wire.Message, 1)
	rc.mu.Lock()
	if rc.closed {
		rc.mu.Unlock()
		return 0, nil, rc.closedErr()
	}
	rc.pending[n] = ch
	rc.mu.Unlock()
	if err := rc.conn.Send(ctx, f); err != nil {
		rc.mu.Lock()
		delete(rc.pending, n)
		rc.mu.Unlock()
		return 0, nil, fmt.Errorf("%w: session %q: %w", ErrClosed, rc.sess.name, err)
	}
	return n, ch, nil
}

func (rc *remoteClient) closedErr() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.err != nil {
		return fmt.Errorf("%w: session %q: the link ended: %w", ErrClosed, rc.sess.name, rc.err)
	}
	return fmt.Errorf("%w: session %q", ErrClosed, rc.sess.name)
}

// ack turns a reply into the error it carries.
func ack(r wire.Message) error {
	switch r := r.(type) {
	case *wire.Ack:
		return nil
	case *wire.Error:
		return fromWireError(r)
	}
	return fmt.Errorf("%w: reply of kind %v", ErrProtocol, r.Kind())
}

// read dispatches the switch's frames until the link ends.
func (rc *remoteClient) read() {
	defer close(rc.readerDone)
	var err error
	for {
		var f []byte
		if f, err = rc.conn.Recv(rc.ctx); err != nil {
			break
		}
		var m wire.Message
		if m, err = wire.Decode(f, rc.lim); err != nil {
			err = fmt.Errorf("%w: %w", ErrProtocol, err)
			break
		}
		switch m := m.(type) {
		case *wire.Deliver:
			rc.deliver(m)
		case *wire.Ack:
			rc.reply(m.Seq, m)
		case *wire.Error:
			if m.Seq == 0 {
				err = fromWireError(m)
			} else {
				rc.reply(m.Seq, m)
			}
		case *wire.PullReply:
			rc.reply(m.Seq, m)
		default:
			err = fmt.Errorf("%w: the switch sent a %v frame", ErrProtocol, m.Kind())
		}
		if err != nil {
			break
		}
	}
	rc.end(err)
}

// end marks the link ended (err says why, nil for a Close) and closes the
// subscriptions' queues, so that their consumers see it.
func (rc *remoteClient) end(err error) {
	rc.mu.Lock()
	if !rc.closed {
		rc.closed = true
		if err != nil && !rc.sess.isClosed() {
			rc.err = err
			rc.log.Warn("sion: remote session's link ended", "session", rc.sess.name, "switch", rc.switchName, "err", err)
		}
		close(rc.done)
	}
	subs := make([]*Subscription, 0, len(rc.subs))
	for _, sub := range rc.subs {
		subs = append(subs, sub)
	}
	rc.mu.Unlock()
	rc.cancel()
	rc.conn.Close()
	for _, sub := range subs {
		sub.cancel()
	}
}

func (rc *remoteClient) reply(seq uint64, m wire.Message) {
	rc.mu.Lock()
	ch := rc.pending[seq]
	delete(rc.pending, seq)
	rc.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

func (rc *remoteClient) deliver(m *wire.Deliver) {
	ev, err := fromWireEvent(&m.Event)
	if err != nil {
		rc.log.Warn("sion: undeliverable event from the switch", "session", rc.sess.name, "err", err)
		return
	}
	d := Delivery{Event: ev, Matched: fromWireMatches(m.Matched)}
	var spilled []*Subscription
	for _, mt := range d.Matched {
		rc.mu.Lock()
		sub := rc.subs[mt.Subscription]
		rc.mu.Unlock()
		if sub != nil && !sub.cfg.lookIn {
			if spill, _ := sub.enqueue(rc.ctx, nil, d); spill {
				spilled = append(spilled, sub)
			}
		}
	}
	if len(spilled) > 0 { // Spill policy: this side's spool, which Pull reads first
		rc.sess.spool.put(d, spilled...)
	}
}

// The backend of remote sessions.

func (rc *remoteClient) publish(ctx context.Context, _ *Session, ev *Event) error {
	if ev == nil {
		return fmt.Errorf("%w: nil event", ErrInvalidEvent)
	}
	p := &wire.Publish{Event: toWireEvent(ev)}
	r, err := rc.call(ctx, p, func(n uint64) { p.Seq = n })
	if err != nil {
		return err
	}
	return ack(r)
}

func (rc *remoteClient) nextSubID() uint64 { return rc.subSeq.Add(1) }

func (rc *remoteClient) register(ctx context.Context, sub *Subscription) error {
	rc.mu.Lock()
	rc.subs[sub.id] = sub // before the request: a delivery may precede the ack
	rc.mu.Unlock()
	m := &wire.Subscribe{Sub: sub.id, Filter: sub.f.String(), Queue: uint32(min(sub.cfg.queue, 1<<32-1)), Overflow: uint8(sub.cfg.overflow), LookIn: sub.cfg.lookIn, TTL: int32(sub.ttl)}
	r, err := rc.call(ctx, m, func(n uint64) { m.Seq = n })
	if err == nil {
		err = ack(r)
	}
	if err != nil {
		rc.mu.Lock()
		delete(rc.subs, sub.id)
		rc.mu.Unlock()
		if ctx.Err() != nil { // the switch may have registered it: release it
			rc.unsubscribe(sub.id)
		}
	}
	return err
}

// unregister stops deliveries to sub at once, on this side, and asks the
// switch to drop the subscription without waiting for its answer.
func (rc *remoteClient) unregister(sub *Subscription) {
	rc.mu.Lock()
	_, ok := rc.subs[sub.id]
	delete(rc.subs, sub.id)
	closed := rc.closed
	rc.mu.Unlock()
	if ok && !closed {
		rc.unsubscribe(sub.id)
	}
}

func (rc *remoteClient) unsubscribe(id uint64) {
	if f, err := rc.encode(&wire.Unsubscribe{Sub: id}); err == nil { // Seq 0: nobody waits for the ack
		ctx, cancel := context.WithTimeout(rc.ctx, byeTimeout)
		rc.conn.Send(ctx, f)
		cancel()
	}
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
		n, ch, err := rc.start(ctx, m, func(n uint64) { m.Seq = n })
		if err != nil {
			return nil, err
		}
		rc.pullWait, rc.pullSeq = ch, n
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
				rc.late = append(rc.late, Delivery{Event: ev, Matched: fromWireMatches(wd.Matched)})
			}
			return take(), nil
		case *wire.Error:
			return nil, fromWireError(r)
		}
		return nil, fmt.Errorf("%w: pull reply of kind %v", ErrProtocol, r.Kind())
	case <-ctx.Done():
		return nil, ctx.Err() // the reply, when it comes, waits in pullWait
	case <-rc.done:
		return nil, rc.closedErr()
	}
}

// sync waits until every delivery the switch queued for this session
// before the call has been handed to its subscriptions.
func (rc *remoteClient) sync(ctx context.Context) error {
	m := &wire.Ack{}
	r, err := rc.call(ctx, m, func(n uint64) { m.Seq = n })
	if err != nil {
		return err
	}
	return ack(r)
}

func (rc *remoteClient) closeSession(*Session) {
	rc.mu.Lock()
	closed := rc.closed
	rc.mu.Unlock()
	if !closed {
		if f, err := rc.encode(&wire.Bye{}); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), byeTimeout)
			rc.conn.Send(ctx, f)
			cancel()
		}
	}
	rc.end(nil)
	<-rc.readerDone
}

func (rc *remoteClient) logger() *slog.Logger { return rc.log }

func (rc *remoteClient) name() string { return rc.switchName }

package sion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
)

// Link limits on the switch's side.
const (
	linkQueue        = 4096             // frames waiting to be sent to one remote session
	linkQueueBytes   = 64 << 20         // and their bytes: a slow link holds at most this much
	handshakeTimeout = 10 * time.Second // for the Hello frame
)

// Serve accepts remote sessions (see Dial) on l: for each connection it
// reads the entity's Hello, asks the place's admission hook, opens a
// session on the switch for it, and then carries its requests and
// deliveries over the connection with the wire codec, one frame per
// message. A session fires once per event: one Deliver frame lists all
// its subscriptions that matched. A malformed or unexpected frame closes
// that connection only (its session closes, nothing else is harmed);
// admission refusals are answered with an error frame and logged.
//
// Serve blocks until ctx ends, l is closed or the switch closes; it then
// closes l and returns nil (the connections it accepted end with ctx or
// the switch's Close, which waits for them) (ErrClosed if the switch was closed before Serve began;
// an Accept error other than a close is returned as is). Serve may be
// called for several listeners at once. While it runs the switch is
// Active (see State), and the first listener's address is the one the
// switch gives its peers (link requests, probe replies, Leave).
func (sw *Switch) Serve(ctx context.Context, l transport.Listener) error {
	if l == nil {
		return fmt.Errorf("%w: Serve with a nil listener", ErrInvalidConfig)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sw.mu.Lock()
	if sw.closed {
		sw.mu.Unlock()
		l.Close()
		return fmt.Errorf("%w: switch %q", ErrClosed, sw.cfg.Name)
	}
	sw.serving = append(sw.serving, cancel)
	sw.servers.Add(1)
	defer sw.servers.Done() // last: Close waits until the listener is closed
	addr := l.Addr().String()
	sw.addrs = append(sw.addrs, addr)
	sw.mu.Unlock()
	defer func() {
		sw.mu.Lock()
		if i := slices.Index(sw.addrs, addr); i >= 0 {
			sw.addrs = slices.Delete(sw.addrs, i, i+1)
		}
		sw.mu.Unlock()
	}()

	defer l.Close()
	go func() {
		<-ctx.Done()
		l.Close() // unblocks Accept
	}()
	for {
		conn, err := l.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, transport.ErrClosed) {
				return nil
			}
			return err
		}
		sw.mu.Lock()
		if sw.closed { // Close is waiting for the links: add none
			sw.mu.Unlock()
			conn.Close()
			return nil
		}
		sw.conns.Add(1)
		sw.mu.Unlock()
		go func() {
			defer sw.conns.Done()
			sw.serveConn(ctx, conn)
		}()
	}
}

// sessionLink is the switch's side of one remote session.
type sessionLink struct {
	sw     *Switch
	conn   transport.Conn
	lim    wire.Limits
	sess   *Session
	out    chan []byte   // frames for the writer
	queued atomic.Int64  // bytes of the Deliver frames in out
	flush  chan struct{} // closed when the reader ends: the writer sends what is queued, then returns
	done   chan struct{} // closed when the link ends

	mu   sync.Mutex
	subs map[uint64]*Subscription // mu; by the remote session's subscription ID
}

func (sw *Switch) serveConn(ctx context.Context, conn transport.Conn) {
	defer conn.Close()
	lim := wire.DefaultLimits()
	lim.MaxFrameBytes = conn.MaxFrameBytes()
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	frame, err := conn.Recv(hctx)
	cancel()
	if err != nil {
		sw.log.Warn("sion: link handshake failed", "switch", sw.cfg.Name, "remote", conn.RemoteAddr(), "err", err)
		return
	}
	sendNow := func(m wire.Message) {
		if f, err := wire.Encode(nil, m); err == nil {
			sctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
			conn.Send(sctx, f)
			cancel()
		}
	}
	m, err := wire.Decode(frame, lim)
	hello, ok := m.(*wire.Hello)
	if err != nil || !ok {
		sw.log.Warn("sion: link refused: no hello", "switch", sw.cfg.Name, "remote", conn.RemoteAddr(), "err", err)
		sendNow(&wire.Error{Code: codeProtocol, Message: fmt.Sprintf("sion: protocol error: the first frame must be a hello (%v)", err)})
		return
	}
	if hello.Version != protocolVersion {
		sendNow(&wire.Error{Code: codeProtocol, Message: fmt.Sprintf("sion: protocol error: session protocol version %d, this switch speaks %d", hello.Version, protocolVersion)})
		return
	}
	if len(sw.place.cfg.SharedKey) > 0 {
		if err := sw.challenge(ctx, conn, lim, hello); err != nil {
			sw.log.Warn("sion: session refused", "switch", sw.cfg.Name, "place", sw.place.Name(), "session", hello.Session, "remote", conn.RemoteAddr(), "err", err) // before the count: who sees the count sees the record
			sw.refused.Add(1)
			sendNow(&wire.Error{Code: codeNotAdmitted, Message: err.Error()})
			return
		}
	}
	sess, err := sw.open(ctx, SessionConfig{Name: hello.Session, Profile: hello.Profile}, conn)
	if err != nil {
		sendNow(&wire.Error{Code: errorCode(err), Message: err.Error()})
		return
	}
	sendNow(&wire.Welcome{Version: protocolVersion, Switch: sw.cfg.Name, Place: sw.place.Name()})

	// The first request tells a remote session from a router asking for
	// a shared link.
	frame, err = conn.Recv(ctx)
	if err != nil {
		sess.Close()
		return
	}
	first, err := wire.Decode(frame, lim)
	if fw, ok := first.(*wire.Forward); ok && err == nil && fw.Event.Type == typeLinkRequest {
		sw.acceptLink(ctx, conn, sess, &fw.Event)
		sess.Close()
		return
	}
	if fw, ok := first.(*wire.Forward); ok && err == nil && fw.Event.Type == ontology.FederateType {
		sw.acceptGateway(ctx, conn, sess, &fw.Event)
		sess.Close()
		return
	}
	lk := &sessionLink{sw: sw, conn: conn, lim: lim, sess: sess, out: make(chan []byte, linkQueue), flush: make(chan struct{}), done: make(chan struct{}), subs: map[uint64]*Subscription{}}
	sess.link = lk

	lctx, stop := context.WithCancel(ctx)
	var wg, writer sync.WaitGroup
	writer.Go(func() { lk.write(lctx) })
	err = lk.read(lctx, &wg, first, err)
	if err != nil && lctx.Err() == nil {
		sw.log.Warn("sion: link closed", "switch", sw.cfg.Name, "session", sess.name, "remote", conn.RemoteAddr(), "err", err)
	}
	close(lk.flush) // the last frames (an error saying why) still go out
	writer.Wait()
	close(lk.done)
	stop()
	conn.Close()
	sess.Close()
	wg.Wait()
}

// write sends the link's frames in order until the reader ends, and then
// what is still queued, each within handshakeTimeout.
func (lk *sessionLink) write(ctx context.Context) {
	for {
		select {
		case f := <-lk.out:
			lk.sent(f)
			if err := lk.conn.Send(ctx, f); err != nil {
				lk.conn.Close() // the reader sees it and ends the link
				return
			}
		case <-lk.flush:
			for {
				select {
				case f := <-lk.out:
					lk.sent(f)
					sctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
					err := lk.conn.Send(sctx, f)
					cancel()
					if err != nil {
						return
					}
				default:
					return
				}
			}
		}
	}
}

// send queues m for the writer, waiting while the queue is full.
func (lk *sessionLink) send(m wire.Message) {
	f, err := wire.EncodeLimits(nil, m, lk.lim)
	if err != nil {
		f, _ = wire.Encode(nil, &wire.Error{Code: codeInternal, Message: "sion: reply does not fit a frame: " + err.Error()})
	}
	select {
	case lk.out <- f:
	case <-lk.done:
	}
}

func (lk *sessionLink) replyErr(seq uint64, err error) {
	if err == nil {
		lk.send(&wire.Ack{Seq: seq})
		return
	}
	lk.send(&wire.Error{Seq: seq, Code: errorCode(err), Message: err.Error()})
}

// read serves the remote session's requests until the connection ends,
// starting with first, the first frame decoded (or its decoding error).
func (lk *sessionLink) read(ctx context.Context, wg *sync.WaitGroup, first wire.Message, err error) error {
	s := lk.sess
	for m := first; ; m = nil {
		if m == nil && err == nil {
			var frame []byte
			if frame, err = lk.conn.Recv(ctx); err != nil {
				return err
			}
			m, err = wire.Decode(frame, lk.lim)
		}
		if err != nil {
			lk.send(&wire.Error{Code: codeProtocol, Message: fmt.Sprintf("%v: %v", ErrProtocol, err)})
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		switch m := m.(type) {
		case *wire.Publish:
			ev, err := fromWireEvent(&m.Event)
			if err == nil {
				err = s.Publish(ctx, ev)
			}
			lk.replyErr(m.Seq, err)
		case *wire.Subscribe: // it may wait for the subscription contract (S2)
			wg.Go(func() { lk.replyErr(m.Seq, lk.subscribe(ctx, m)) })
		case *wire.Unsubscribe:
			lk.mu.Lock()
			sub := lk.subs[m.Sub]
			delete(lk.subs, m.Sub)
			lk.mu.Unlock()
			if sub != nil {
				s.forget(sub)
				sub.cancel()
			}
			lk.replyErr(m.Seq, nil)
		case *wire.SetProfile:
			lk.replyErr(m.Seq, s.SetProfile(m.Profile))
		case *wire.Pull:
			wg.Go(func() {
				ds, err := s.spool.pull(ctx, int(m.Max), s.done)
				if err != nil {
					lk.replyErr(m.Seq, err)
					return
				}
				r := &wire.PullReply{Seq: m.Seq, Deliveries: make([]wire.Delivery, len(ds))}
				for i, d := range ds {
					r.Deliveries[i] = wire.Delivery{Event: toWireEvent(d.Event), Matched: toWireMatches(d.Matched)}
				}
				lk.send(r)
			})
		case *wire.Ack: // a ping: answered in order, after the deliveries queued before it
			lk.send(&wire.Ack{Seq: m.Seq})
		case *wire.Bye:
			return nil
		default:
			err := fmt.Errorf("%w: a remote session does not send %v frames", ErrProtocol, m.Kind())
			lk.send(&wire.Error{Code: codeProtocol, Message: err.Error()})
			return err
		}
	}
}

// subscribe registers a remote session's subscription on the switch: a
// subscription without a queue, whose events go into the link's Deliver
// frames (or, for look-in, the session's spool).
func (lk *sessionLink) subscribe(ctx context.Context, m *wire.Subscribe) error {
	if m.Sub == 0 {
		return fmt.Errorf("%w: subscription ID 0", ErrProtocol)
	}
	f, err := filter.Compile(m.Filter)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	o := Overflow(m.Overflow)
	if o < DropNewest || o > Block {
		return fmt.Errorf("%w: overflow policy %v", ErrInvalidConfig, o)
	}
	s := lk.sess
	sub := &Subscription{id: lk.sw.nextSubID(), sess: s, f: f, cfg: subConfig{queue: int(m.Queue), overflow: o, lookIn: m.LookIn}, done: make(chan struct{}), remote: m.Sub, ttl: min(65535, max(-1, int(m.TTL)))}
	lk.mu.Lock()
	if _, dup := lk.subs[m.Sub]; dup {
		lk.mu.Unlock()
		return fmt.Errorf("%w: subscription ID %d is in use", ErrProtocol, m.Sub)
	}
	lk.subs[m.Sub] = sub
	lk.mu.Unlock()
	s.mu.Lock()
	s.subs[sub.id] = sub
	s.mu.Unlock()
	if err := lk.sw.register(ctx, sub); err != nil {
		lk.mu.Lock()
		delete(lk.subs, m.Sub)
		lk.mu.Unlock()
		s.forget(sub)
		return err
	}
	return nil
}

// fire sends one delivery of a remote session to its link: one Deliver
// frame for its push subscriptions, the spool for its look-in ones. When
// the link's queue is full, the event is dropped for the session's push
// subscriptions (counted) unless one of them blocks the publisher.
func (lk *sessionLink) fire(ctx context.Context, stop <-chan struct{}, s *Session, d Delivery, hits []hitSub, shared *lazyDeliver) error {
	var lookIn, push []*Subscription
	block := false
	for _, h := range hits {
		h.sub.matched.Add(1)
		if h.sub.cfg.lookIn {
			lookIn = append(lookIn, h.sub)
		} else {
			push = append(push, h.sub)
			block = block || h.sub.cfg.overflow == Block
		}
		h.sub.delivered.Add(1)
	}
	if len(lookIn) > 0 {
		lk.sw.deliveries.Add(1)
		s.spool.put(d, lookIn...)
	}
	if len(push) == 0 {
		return nil
	}
	sd, err := shared.get(d.Event)
	var f []byte
	if err == nil {
		f, err = sd.Frame(toWireMatches(d.Matched))
	}
	if err == nil && len(f) > lk.lim.MaxFrameBytes {
		err = fmt.Errorf("%w: frame of %d bytes over the link's limit of %d", wire.ErrTooLarge, len(f), lk.lim.MaxFrameBytes)
	}
	if err != nil {
		err = fmt.Errorf("sion: event %s does not fit a frame to session %q: %w", d.Event.ID, s.name, err)
		lk.drop(push)
		return err
	}
	if lk.queued.Add(int64(len(f))) <= linkQueueBytes {
		select {
		case lk.out <- f:
			lk.sw.deliveries.Add(uint64(len(push)))
			return nil
		default:
		}
	}
	if block {
		select {
		case lk.out <- f:
			lk.sw.deliveries.Add(uint64(len(push)))
			return nil
		case <-lk.done:
			lk.queued.Add(-int64(len(f)))
			return nil
		case <-stop:
			lk.queued.Add(-int64(len(f)))
			lk.drop(push)
			return fmt.Errorf("%w: the publishing session closed while the link to session %q was full", ErrClosed, s.name)
		case <-ctx.Done():
			lk.queued.Add(-int64(len(f)))
			lk.drop(push)
			return fmt.Errorf("sion: the link to session %q stayed full until the publisher's context ended: %w", s.name, ctx.Err())
		}
	}
	lk.queued.Add(-int64(len(f)))
	lk.drop(push)
	return nil
}

// sent accounts for a frame leaving the queue: Deliver frames count
// against linkQueueBytes.
func (lk *sessionLink) sent(f []byte) {
	if len(f) > 1 && wire.Kind(f[1]) == wire.KindDeliver {
		lk.queued.Add(-int64(len(f)))
	}
}

// drop counts a delivery lost for subs.
func (lk *sessionLink) drop(subs []*Subscription) {
	for _, sub := range subs {
		sub.delivered.Add(^uint64(0))
		sub.dropped.Add(1)
		if !sub.slow.Swap(true) {
			sub.reportSlow()
		}
	}
}

// lazyDeliver encodes an event for Deliver frames once, when the first
// remote session it goes to needs it, and shares the bytes with the others.
type lazyDeliver struct {
	sd  *wire.SharedDeliver
	err error

	fwd     []byte // the Forward frame for shared links
	fwdErr  error
	fwdDone bool
	seen    bool // the event's ID is recorded as seen already
}

// forward returns e's Forward frame for the next switch, TTL lowered and
// Hops raised, encoded on the first call; that call also records e's ID
// as seen.
func (l *lazyDeliver) forward(sw *Switch, e *Event) ([]byte, error) {
	if !l.fwdDone {
		l.fwdDone = true
		if !l.seen {
			sw.seen.add(e.ID)
		}
		w := toWireEvent(e)
		w.TTL--
		w.Hops++
		l.fwd, l.fwdErr = wire.EncodeLimits(nil, &wire.Forward{Event: w}, wire.Limits{MaxFrameBytes: 1<<31 - 1, MaxDataBytes: 1<<31 - 1})
	}
	return l.fwd, l.fwdErr
}

func (l *lazyDeliver) get(e *Event) (*wire.SharedDeliver, error) {
	if l.sd == nil && l.err == nil {
		w := toWireEvent(e)
		l.sd, l.err = wire.NewSharedDeliver(&w, wire.Limits{})
	}
	return l.sd, l.err
}

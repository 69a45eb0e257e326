package sion

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
)

// Defaults of the switch's bounds on remote sessions (SwitchConfig).
const (
	// DefaultMaxRetention caps the retention a remote session may ask
	// for (ReconnectPolicy.Retention).
	DefaultMaxRetention = 10 * time.Minute
	// DefaultMaxRetentionBytes caps the bytes of deliveries a switch holds
	// for one remote session (ReconnectPolicy.RetentionBytes).
	DefaultMaxRetentionBytes = 64 << 20
	// DefaultMaxRetentionTotalBytes caps them over all of a switch's
	// remote sessions (SwitchConfig.MaxRetentionTotalBytes): 1 GiB.
	DefaultMaxRetentionTotalBytes = 1 << 30
	// DefaultMaxSpoolSize caps the look-in spool of a remote session, in
	// events (SwitchConfig.MaxSpoolSize).
	DefaultMaxSpoolSize = 1 << 16
	// DefaultMaxSessionFilters caps the filters of a remote session
	// (SwitchConfig.MaxSessionFilters).
	DefaultMaxSessionFilters = 1 << 16
	// goodbyeTimeout bounds how long Switch.Close waits for its connected
	// remote sessions to confirm the end of their streams.
	goodbyeTimeout = time.Second
	// tombstones bounds how many ended remote sessions a switch remembers,
	// and tombstoneAge for how long, so that an entity returning after its
	// retention learns what it lost.
	tombstones   = 4096
	tombstoneAge = time.Hour
)

// errBye ends a remote session's connection when the entity says goodbye.
var errBye = errors.New("sion: the session said goodbye")

// remoteEnd is the switch's side of a remote session (see Dial): the
// session's stream (an outbox), its subscriptions by the IDs the entity
// gave them, and the connection that serves it now — none while the
// entity is away, for at most the retention it asked for; then the session
// ends and a tombstone records what it lost.
type remoteEnd struct {
	sw        *Switch
	sess      *Session
	token     string
	retention time.Duration
	out       *outbox
	reqs      sync.WaitGroup // requests served in goroutines (Subscribe, Advertise, Pull); they end with the session

	mu        sync.Mutex
	subs      map[uint64]*remoteSub         // by the entity's subscription ID; mu
	lastReq   uint64                        // the highest request Seq received; mu
	conn      *attachment                   // the connection serving the session; nil while away; mu
	attaching bool                          // a connection is taking the session on: its first, until its first request, or a reconnecting entity's; mu
	addr      string                        // the address of the entity's latest connection; mu
	away      uint64                        // counts the times the entity went away; mu
	awayStop  chan struct{}                 // closed when the entity returns in time; mu
	pulls     map[uint64]context.CancelFunc // pulls waiting, by Seq; mu
	adverts   map[uint64]context.CancelFunc // advertisements being installed, by Seq; mu
	ended     bool                          // mu
}

// remoteSub is one of a remote session's subscriptions, from Subscribe on.
type remoteSub struct {
	sub       *Subscription
	cancel    context.CancelFunc // ends its registration
	active    bool               // registered
	cancelled bool               // Unsubscribe came while it was being registered
}

// attachment is one connection serving a remote session.
type attachment struct {
	conn   transport.Conn
	cancel context.CancelFunc // ends its reader and writer
	done   chan struct{}      // closed once both have returned
}

// tombstone is what a switch remembers of a remote session that ended
// while its entity was away.
type tombstone struct {
	name     string
	requests uint64
	lost     []wire.Count
	at       time.Time
}

// newRemoteEnd makes the switch's side of a remote session whose first
// connection, from addr, has been admitted: the session is attaching, not
// away, until that connection serves it (serve) or ends it.
func (sw *Switch) newRemoteEnd(s *Session, token, addr string, retention time.Duration, retentionBytes int) *remoteEnd {
	return &remoteEnd{sw: sw, sess: s, token: token, retention: retention, out: newOutbox(s, retentionBytes),
		attaching: true, addr: addr,
		subs: map[uint64]*remoteSub{}, pulls: map[uint64]context.CancelFunc{}, adverts: map[uint64]context.CancelFunc{}}
}

// addrOf returns conn's remote address as text, "" if it has none.
func addrOf(conn transport.Conn) string {
	if a := conn.RemoteAddr(); a != nil {
		return a.String()
	}
	return ""
}

// serve carries the session over conn until the connection ends: its
// reader serves requests (starting with first, already decoded, or its
// decoding error), its writer sends the stream. Then the session waits
// for its entity to return, or ends.
func (re *remoteEnd) serve(ctx context.Context, conn transport.Conn, lim wire.Limits, first wire.Message, firstErr error) {
	ctx, cancel := context.WithCancel(ctx)
	at := &attachment{conn: conn, cancel: cancel, done: make(chan struct{})}
	re.mu.Lock()
	if re.ended {
		re.mu.Unlock()
		cancel()
		return
	}
	re.conn, re.attaching = at, false
	re.addr = addrOf(conn)
	re.mu.Unlock()
	re.sw.mu.Lock()
	re.sw.remotes[re.token] = re
	re.sw.mu.Unlock()

	var writer sync.WaitGroup
	writer.Go(func() { re.write(ctx, at) })
	err := re.read(ctx, at, lim, first, firstErr)
	cancel()
	conn.Close()
	writer.Wait()
	close(at.done)
	re.detach(at, err)
}

// write sends the stream's frames in order until the connection ends.
func (re *remoteEnd) write(ctx context.Context, at *attachment) {
	for {
		f, ok := re.out.next(ctx.Done())
		if !ok {
			return
		}
		if err := at.conn.Send(ctx, f); err != nil {
			// The peer closed: what it sent before — its goodbye among
			// it — is still to be read, and the reader ends at its end.
			// Any other failure: close, which the reader sees.
			if !errors.Is(err, transport.ErrClosed) {
				at.conn.Close()
			}
			return
		}
	}
}

// read serves the entity's requests until the connection ends, starting
// with first (or its decoding error err). It returns errBye when the
// entity says goodbye, an error wrapping ErrProtocol for a frame it
// refuses, and the connection's error otherwise.
func (re *remoteEnd) read(ctx context.Context, at *attachment, lim wire.Limits, first wire.Message, err error) error {
	s := re.sess
	for m := first; ; m = nil {
		if m == nil && err == nil {
			var frame []byte
			if frame, err = at.conn.Recv(ctx); err != nil {
				return err
			}
			m, err = wire.Decode(frame, lim)
		}
		if err != nil {
			return re.refuse(ctx, at, fmt.Errorf("%w: %w", ErrProtocol, err))
		}
		switch m := m.(type) {
		case *wire.Received:
			if err := re.out.confirm(m.Frames); err != nil {
				return re.refuse(ctx, at, err)
			}
			continue
		case *wire.Bye:
			return errBye
		}
		seq, ok := requestSeq(m)
		if !ok {
			return re.refuse(ctx, at, fmt.Errorf("%w: a remote session does not send %v frames", ErrProtocol, m.Kind()))
		}
		re.mu.Lock()
		last := re.lastReq
		if seq > last {
			re.lastReq = seq
		}
		re.mu.Unlock()
		if seq <= last {
			return re.refuse(ctx, at, fmt.Errorf("%w: request %d after request %d: requests are numbered in increasing order", ErrProtocol, seq, last))
		}
		if !re.out.roomForReplies(ctx.Done()) {
			return ctx.Err()
		}
		switch m := m.(type) {
		case *wire.Publish:
			ev, err := fromWireEvent(&m.Event)
			if err == nil {
				err = s.Publish(ctx, ev)
			}
			re.reply(seq, err)
		case *wire.Subscribe: // it may wait for the subscription contract (S2)
			re.subscribe(m)
		case *wire.Unsubscribe:
			re.unsubscribe(m.Sub)
			re.reply(seq, nil)
		case *wire.SetProfile:
			re.reply(seq, s.SetProfile(m.Profile))
		case *wire.Advertise: // it may wait for acknowledgements along the overlay (S3)
			re.advertise(m)
		case *wire.Pull:
			re.pull(m)
		case *wire.Ack: // a ping: answered in order, after the deliveries before it
			re.reply(seq, nil)
		}
	}
}

// refuse answers err (Seq 0: the session fails) on the connection and
// returns it.
func (re *remoteEnd) refuse(ctx context.Context, at *attachment, err error) error {
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	sendFrame(sctx, at.conn, &wire.Error{Code: errorCode(err), Message: err.Error()})
	return err
}

// requestSeq returns the Seq of a request frame.
func requestSeq(m wire.Message) (uint64, bool) {
	var seq uint64
	switch m := m.(type) {
	case *wire.Publish:
		seq = m.Seq
	case *wire.Subscribe:
		seq = m.Seq
	case *wire.Unsubscribe:
		seq = m.Seq
	case *wire.SetProfile:
		seq = m.Seq
	case *wire.Advertise:
		seq = m.Seq
	case *wire.Pull:
		seq = m.Seq
	case *wire.Ack:
		seq = m.Seq
	default:
		return 0, false
	}
	return seq, true
}

// reply appends the answer to request seq to the stream: Ack, or Error
// with err.
func (re *remoteEnd) reply(seq uint64, err error) {
	var m wire.Message = &wire.Ack{Seq: seq}
	if err != nil {
		m = &wire.Error{Seq: seq, Code: errorCode(err), Message: err.Error()}
	}
	re.send(m)
}

// send encodes m and appends it to the stream.
func (re *remoteEnd) send(m wire.Message) {
	f, err := wire.Encode(nil, m)
	if err != nil {
		f, _ = wire.Encode(nil, &wire.Error{Code: codeInternal, Message: "sion: reply does not fit a frame: " + err.Error()})
	}
	re.out.reply(f)
}

// subscribe starts registering a remote session's subscription: a
// subscription without a queue, whose events go into the session's stream
// (or, for look-in, its spool). Its record exists before the request's
// next frame is read, so that an Unsubscribe that follows finds it; the
// registration, which may wait for the subscription contract (S2), runs in
// a goroutine and answers when it is done.
func (re *remoteEnd) subscribe(m *wire.Subscribe) {
	sub, err := re.newSub(m)
	if err != nil {
		re.reply(m.Seq, err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	rs := &remoteSub{sub: sub, cancel: cancel}
	re.mu.Lock()
	_, dup := re.subs[m.Sub]
	switch {
	case dup:
		err = fmt.Errorf("%w: subscription ID %d is in use", ErrProtocol, m.Sub)
	case re.ended:
		err = fmt.Errorf("%w: session %q", ErrClosed, re.sess.name)
	case len(re.subs) >= re.sw.cfg.MaxSessionFilters:
		err = fmt.Errorf("%w: session %q holds %d filters, the most its switch %q allows (SwitchConfig.MaxSessionFilters)", ErrNotGranted, re.sess.name, len(re.subs), re.sw.cfg.Name)
	}
	if err != nil {
		re.mu.Unlock()
		cancel()
		re.reply(m.Seq, err)
		return
	}
	re.subs[m.Sub] = rs
	re.reqs.Add(1)
	re.mu.Unlock()
	s := re.sess
	s.mu.Lock()
	s.subs[sub.id] = sub
	s.mu.Unlock()
	go func() {
		defer re.reqs.Done()
		defer cancel()
		err := re.sw.register(ctx, sub)
		re.mu.Lock()
		gone := rs.cancelled || re.ended
		if err == nil && !gone {
			rs.active = true
		}
		if err != nil || gone {
			if re.subs[m.Sub] == rs {
				delete(re.subs, m.Sub)
			}
		}
		re.mu.Unlock()
		if err == nil && gone {
			err = fmt.Errorf("sion: subscription %d was cancelled by its session while it was being made: %w", m.Sub, context.Canceled)
		}
		if err != nil {
			s.forget(sub)
			sub.cancel()
		}
		re.reply(m.Seq, err)
	}()
}

// advertise enters a remote session's advertisement (Session.Advertise):
// it is checked and kept on the session before the request's next frame
// is read, so that a Publish that follows finds it (as after a reconnect
// that opened the session anew, which sends both without waiting); its
// installation along the paths to the rendezvous switches (S3), which may
// wait for their acknowledgements up to the place's ContractTimeout, runs
// in a goroutine and answers when it is done. The session's end cancels
// the wait; the routing withdraws the advertisement once the goroutine
// has returned (Switch.sessionClosed follows ending).
func (re *remoteEnd) advertise(m *wire.Advertise) {
	s := re.sess
	ads, err := re.sw.keepAdvertisements(s, []Advertisement{{Type: m.Type, Attrs: m.Attrs}})
	if err != nil {
		re.reply(m.Seq, err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	re.mu.Lock()
	if re.ended {
		re.mu.Unlock()
		cancel()
		re.reply(m.Seq, fmt.Errorf("%w: session %q", ErrClosed, s.name))
		return
	}
	re.adverts[m.Seq] = cancel
	re.reqs.Add(1)
	re.mu.Unlock()
	go func() {
		defer re.reqs.Done()
		defer cancel()
		err := re.sw.routing.advertise(ctx, s, ads)
		re.mu.Lock()
		delete(re.adverts, m.Seq)
		gone := re.ended
		re.mu.Unlock()
		if err == nil && gone {
			err = fmt.Errorf("%w: session %q ended while its advertisement of %q was being installed", ErrClosed, s.name, m.Type)
		}
		re.reply(m.Seq, err)
	}()
}

// newSub checks a remote Subscribe and returns its subscription.
func (re *remoteEnd) newSub(m *wire.Subscribe) (*Subscription, error) {
	if m.Sub == 0 {
		return nil, fmt.Errorf("%w: subscription ID 0", ErrProtocol)
	}
	f, err := filter.Compile(m.Filter)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	o := Overflow(m.Overflow)
	switch {
	case o < DropNewest || o > Block:
		return nil, fmt.Errorf("%w: overflow policy %v", ErrInvalidConfig, o)
	case o == Block:
		return nil, errRemoteBlock
	}
	cfg := subConfig{queue: int(m.Queue), overflow: o, lookIn: m.LookIn, ttl: min(65535, max(-1, int(m.TTL)))}
	return newSubscription(re.sess, f, cfg, m.Sub, nil), nil
}

// errRemoteBlock refuses WithOverflow(Block) for a remote session.
var errRemoteBlock = fmt.Errorf("%w: WithOverflow(Block) is for local sessions: a remote session's events reach it over one connection, which a blocked subscription would hold up for the session's other subscriptions and the switch's publishers; use a longer queue (WithQueue), DropOldest, or Spill (events wait in the session's spool on the entity's side)", ErrInvalidConfig)

// unsubscribe cancels the subscription the entity calls id: at once if it
// is registered, or as soon as its registration ends.
func (re *remoteEnd) unsubscribe(id uint64) {
	re.mu.Lock()
	rs := re.subs[id]
	delete(re.subs, id)
	if rs != nil && !rs.active {
		rs.cancelled = true
	}
	re.mu.Unlock()
	switch {
	case rs == nil:
	case rs.active:
		re.sess.forget(rs.sub)
		rs.sub.cancel()
	default:
		rs.cancel() // the registration ends, undoes itself and answers
	}
}

// pull answers a look-in Pull with spooled deliveries, at most what fits
// one frame; it waits in a goroutine until the spool has some. A session
// has one Pull waiting at most (the entity's side never sends another):
// a second is refused, so that Pulls cannot pile up goroutines.
func (re *remoteEnd) pull(m *wire.Pull) {
	ctx, cancel := context.WithCancel(context.Background())
	re.mu.Lock()
	if re.ended || len(re.pulls) > 0 {
		waiting := len(re.pulls) > 0
		re.mu.Unlock()
		cancel()
		if waiting {
			re.reply(m.Seq, fmt.Errorf("%w: session %q has a Pull waiting already; one at a time", ErrProtocol, re.sess.name))
		} else {
			re.reply(m.Seq, fmt.Errorf("%w: session %q", ErrClosed, re.sess.name))
		}
		return
	}
	re.pulls[m.Seq] = cancel
	re.reqs.Add(1)
	re.mu.Unlock()
	go func() {
		defer re.reqs.Done()
		limit := wire.DefaultLimits().MaxDeliveries
		if m.Max > 0 {
			limit = min(limit, int(m.Max))
		}
		s := re.sess
		ds, err := s.spool.pull(ctx, limit, s.done)
		re.mu.Lock() // before the answer: the entity may send its next Pull as soon as it has it
		delete(re.pulls, m.Seq)
		re.mu.Unlock()
		cancel()
		if err != nil {
			re.reply(m.Seq, err)
			return
		}
		for {
			r := &wire.PullReply{Seq: m.Seq, Deliveries: make([]wire.Delivery, len(ds))}
			for i, d := range ds {
				r.Deliveries[i] = wire.Delivery{Event: toWireEvent(d.Event), Matched: toWireMatches(d.Matched)}
			}
			f, err := wire.Encode(nil, r)
			if err == nil || len(ds) == 1 {
				if err != nil { // one event that does not fit a frame: lost, and said so
					s.spool.lose(ds)
					re.reply(m.Seq, fmt.Errorf("%w: spooled event %s does not fit a frame: %w", ErrInvalidEvent, ds[0].Event.ID, err))
					return
				}
				re.out.reply(f)
				return
			}
			half := len(ds) / 2 // too many for one frame: the rest waits for the next Pull
			s.spool.unshift(ds[half:])
			ds = ds[:half]
		}
	}()
}

// The switch's side of a remote session as a sink: its events go into the
// session's stream, or its spool for look-in subscriptions.

var _ sink = (*remoteEnd)(nil)

// patron checks e's patronage condition against the entity's profile.
func (re *remoteEnd) patron(s *Session, e *Event) bool { return patronOf(s, e) }

// queues is false: the subscriptions' queues are on the entity's side.
func (re *remoteEnd) queues() bool { return false }

// installsWhileClosing is false: a closing switch takes no new
// subscriptions from entities.
func (re *remoteEnd) installsWhileClosing() bool { return false }

// fire hands one delivery of the session to its stream (push
// subscriptions) and its spool (look-in ones). A delivery the stream has
// no room for is dropped for its push subscriptions, counted, and reported
// to the entity in the stream.
func (re *remoteEnd) fire(_ context.Context, _ <-chan struct{}, s *Session, e *Event, hits []hitSub, shared *eventFrames) error {
	d := newDelivery(e, hits)
	var lookIn, push []*Subscription
	for _, h := range hits {
		h.sub.match()
		if h.sub.cfg.lookIn {
			lookIn = append(lookIn, h.sub)
			h.sub.placed()
		} else {
			push = append(push, h.sub)
		}
	}
	if len(lookIn) > 0 {
		s.spool.put(d, lookIn...)
	}
	if len(push) == 0 {
		return nil
	}
	sd, err := shared.deliverFrame(d.Event)
	var f []byte
	if err == nil {
		f, err = sd.Frame(toWireMatches(d.Matched))
	}
	if err != nil {
		re.out.unfit(push)
		return fmt.Errorf("sion: event %s does not fit a frame to session %q: %w", d.Event.ID, s.name, err)
	}
	re.out.deliver(f, push)
	return nil
}

// detach notes that the connection at ended with err. A session whose
// entity said goodbye, broke the protocol or asked for no retention ends
// now; otherwise it waits for its entity to return, for at most its
// retention. It must be called from a goroutine Switch.Close waits for
// (Serve's).
func (re *remoteEnd) detach(at *attachment, err error) {
	re.mu.Lock()
	if at != nil && re.conn != at { // taken over by a reconnecting entity
		re.mu.Unlock()
		return
	}
	re.conn = nil
	keep := !re.ended && re.retention > 0 && !errors.Is(err, errBye) && !errors.Is(err, ErrProtocol) && !chanClosed(re.sw.stopping)
	if !keep {
		re.mu.Unlock()
		re.sess.Close()
		return
	}
	re.away++
	gen, stop := re.away, make(chan struct{})
	re.awayStop = stop
	re.mu.Unlock()
	re.sw.disconnects.Add(1)
	re.sw.log.Info("sion: remote session disconnected; kept for its retention", "switch", re.sw.cfg.Name, "session", re.sess.name, "retention", re.retention, "err", err)
	re.sw.conns.Add(1) // Serve's goroutine holds a count, so Close has not begun waiting
	go func() {
		defer re.sw.conns.Done()
		t := time.NewTimer(re.retention)
		defer t.Stop()
		select {
		case <-t.C:
			re.expire(gen)
		case <-stop:
		case <-re.sess.done:
		case <-re.sw.stopping:
		}
	}()
}

// isAway reports whether the session's entity is away: no connection
// serves it or is taking it over, and it has not ended.
func (re *remoteEnd) isAway() bool {
	re.mu.Lock()
	defer re.mu.Unlock()
	return re.awayNow()
}

// awayNow reports whether the entity is away: no connection serves the
// session, none is taking it on, and it has not ended. mu must be held.
func (re *remoteEnd) awayNow() bool { return re.conn == nil && !re.attaching && !re.ended }

// expire ends the session if its entity is still away since the time
// gen counts.
func (re *remoteEnd) expire(gen uint64) {
	re.mu.Lock()
	away := re.awayNow() && re.away == gen
	re.mu.Unlock()
	if away {
		re.sw.log.Info("sion: remote session away longer than its retention; it ends", "switch", re.sw.cfg.Name, "session", re.sess.name, "retention", re.retention)
		re.sess.Close()
	}
}

// takeOver hands the session to an entity that reconnects and has
// received the first received frames of its stream: the connection still
// serving it, if any, ends first. It reports false when the session ended
// meanwhile, and refuses while another connection is taking it over. On
// success the caller must serve the session (serve) or abandon it.
func (re *remoteEnd) takeOver(ctx context.Context, received uint64) (bool, error) {
	re.mu.Lock()
	if re.ended {
		re.mu.Unlock()
		return false, nil
	}
	if re.attaching {
		re.mu.Unlock()
		return false, fmt.Errorf("sion: session %q is being resumed on another connection; try again", re.sess.name)
	}
	old := re.conn
	re.conn, re.attaching = nil, true
	if re.awayStop != nil {
		close(re.awayStop)
		re.awayStop = nil
	}
	re.mu.Unlock()
	fail := func(err error) (bool, error) {
		re.abandon(err)
		return false, err
	}
	if old != nil {
		// The entity left that connection (it came back on this one)
		// before the switch noticed: a disconnect all the same, which
		// old's detach, finding the session taken over, does not count.
		re.sw.disconnects.Add(1)
		old.cancel()
		old.conn.Close()
		select {
		case <-old.done:
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	if err := re.out.rewind(received); err != nil {
		return fail(err)
	}
	return true, nil
}

// abandon notes that a takeover failed with err: the entity is away
// again, for a new retention.
func (re *remoteEnd) abandon(err error) {
	re.mu.Lock()
	re.attaching = false
	re.mu.Unlock()
	re.detach(nil, err)
}

// resume looks up the session a reconnecting entity's Hello names, takes
// it over and fills in welcome. It returns nil and no error for a session
// this switch does not hold; welcome then says whether it ended while its
// entity was away (Expired) and what it lost.
func (sw *Switch) resume(ctx context.Context, hello *wire.Hello, welcome *wire.Welcome) (*remoteEnd, error) {
	token := string(hello.Resume)
	sw.mu.RLock()
	re := sw.remotes[token]
	sw.mu.RUnlock()
	if re != nil && re.sess.name == hello.Session {
		ok, err := re.takeOver(ctx, hello.Received)
		if err != nil {
			return nil, err
		}
		if ok {
			re.mu.Lock()
			welcome.Requests = re.lastReq
			re.mu.Unlock()
			welcome.Token, welcome.Resumed, welcome.Lost = hello.Resume, true, re.out.unreported()
			welcome.RetentionMillis, welcome.RetentionBytes = uint64(re.retention/time.Millisecond), uint64(re.out.limit)
			return re, nil
		}
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if tomb, ok := sw.tombs[token]; ok && tomb.name == hello.Session {
		delete(sw.tombs, token)
		welcome.Expired, welcome.Requests, welcome.Lost = true, tomb.requests, tomb.lost
	}
	return nil, nil
}

// ending ends the session's connection, its requests and its stream
// when the session begins to end (sink).
func (re *remoteEnd) ending() { re.end() }

// end ends the switch's side of a remote session that closes: its
// connection, the requests it was serving and its stream, and records a
// tombstone for an entity that may still return.
func (re *remoteEnd) end() {
	re.mu.Lock()
	if re.ended {
		re.mu.Unlock()
		return
	}
	re.ended = true
	at := re.conn
	if re.awayStop != nil {
		close(re.awayStop)
		re.awayStop = nil
	}
	for _, rs := range re.subs {
		if !rs.active {
			rs.cancel()
		}
	}
	for _, cancel := range re.pulls {
		cancel()
	}
	for _, cancel := range re.adverts {
		cancel()
	}
	requests := re.lastReq
	re.mu.Unlock()
	if at != nil {
		at.cancel()
		at.conn.Close()
	}
	re.reqs.Wait()
	lost := re.out.end()
	sw := re.sw
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.remotes[re.token] == re {
		delete(sw.remotes, re.token)
	}
	if at == nil && re.retention > 0 { // away: the entity may still come back
		sw.bury(re.token, tombstone{name: re.sess.name, requests: requests, lost: lost, at: time.Now()})
	}
}

// goodbye tells each connected remote session that the switch closes, at
// the end of its stream, and waits up to goodbyeTimeout for them to
// confirm what they received.
func (sw *Switch) goodbye() {
	sw.mu.RLock()
	var outs []*outbox
	for _, re := range sw.remotes {
		re.mu.Lock()
		if re.conn != nil {
			outs = append(outs, re.out)
		}
		re.mu.Unlock()
	}
	sw.mu.RUnlock()
	ends := make([]uint64, len(outs))
	for i, ob := range outs {
		ends[i] = ob.goodbye()
	}
	ctx, cancel := context.WithTimeout(context.Background(), goodbyeTimeout)
	defer cancel()
	for i, ob := range outs {
		if !ob.waitConfirmed(ends[i], ctx.Done()) {
			return
		}
	}
}

// bury records a tombstone, forgetting the oldest past tombstones or
// older than tombstoneAge. sw.mu must be held.
func (sw *Switch) bury(token string, t tombstone) {
	for len(sw.tombOrder) > 0 {
		oldest := sw.tombOrder[0]
		old, ok := sw.tombs[oldest]
		if ok && len(sw.tombs) < tombstones && t.at.Sub(old.at) < tombstoneAge {
			break
		}
		delete(sw.tombs, oldest)
		sw.tombOrder = sw.tombOrder[1:]
	}
	sw.tombs[token] = t
	sw.tombOrder = append(sw.tombOrder, token)
}

// deliverFrame returns e's Deliver frame for remote sessions, encoded on
// the first call for all of them.
func (l *eventFrames) deliverFrame(e *Event) (*wire.SharedDeliver, error) {
	if l.sd == nil && l.err == nil {
		w := toWireEvent(e)
		l.sd, l.err = wire.NewSharedDeliver(&w, wire.Limits{})
	}
	return l.sd, l.err
}

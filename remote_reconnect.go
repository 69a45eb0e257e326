package sion

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
)

// Defaults of ReconnectPolicy.
const (
	// DefaultMinBackoff is ReconnectPolicy.MinBackoff when zero.
	DefaultMinBackoff = 50 * time.Millisecond
	// DefaultMaxBackoff is ReconnectPolicy.MaxBackoff when zero.
	DefaultMaxBackoff = 5 * time.Second
	// DefaultRetention is ReconnectPolicy.Retention when zero.
	DefaultRetention = time.Minute
	// DefaultRetentionBytes is ReconnectPolicy.RetentionBytes when zero:
	// 8 MiB.
	DefaultRetentionBytes = 8 << 20
)

// ReconnectPolicy says how a remote session (Dial) returns after its
// connection fails. The zero value reconnects, with backoff and jitter,
// until Close, and asks the switch to keep the session for
// DefaultRetention.
//
// While the entity is away the switch keeps the session: its
// subscriptions keep matching, and their events wait in the session's
// stream, up to RetentionBytes. A session that returns within Retention
// resumes: it receives every event matched while it was away, once and in
// order per publisher, and the requests it had sent are answered once.
// Past the retention the switch ends the session; one that returns later
// is opened anew with its profile, advertisements and subscriptions, and
// ConnectionEvent.Lost tells how many matched events it lost (events
// published between the end and the return were not matched for it).
type ReconnectPolicy struct {
	// Disabled ends the session at the first failure of its connection:
	// the switch ends its side at once, counting the events it could not
	// deliver as dropped, and the session's Done closes.
	Disabled bool
	// Addrs are more addresses of the switch to try, in turn after Dial's
	// own: a switch reachable at several addresses. A session resumes
	// only on the switch that holds it; another switch at one of these
	// addresses opens it anew (like a session whose retention passed).
	Addrs []string
	// MinBackoff and MaxBackoff bound the wait before each attempt: the
	// n-th waits a random time between 0 and min(MaxBackoff,
	// MinBackoff·2ⁿ⁻¹) ("full jitter"). 0 means DefaultMinBackoff and
	// DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// MaxAttempts is how many attempts follow a failure before the
	// session ends with the last attempt's error; 0 means no limit (until
	// Close). A refusal by the switch's admission (ErrNotAdmitted) ends
	// it at once.
	MaxAttempts int
	// Retention is how long the switch keeps the session while its
	// entity is away; 0 means DefaultRetention. The switch caps it
	// (SwitchConfig.MaxRetention).
	Retention time.Duration
	// RetentionBytes bounds the bytes of deliveries the switch holds for
	// the session: sent and not yet confirmed, or waiting to be sent (the
	// entity is away, or slow). A delivery that does not fit pushes out
	// the oldest one not yet sent — an entity away for long receives the
	// newest events — or, when all are sent and wait for confirmation, is
	// dropped itself. Each drop is counted for its subscriptions
	// (SubscriptionStats.Dropped, on this side too, and WithSlowConsumer's
	// callback) and reported: in the stream where the gap is, or in the
	// reconnect's ConnectionEvent.Lost. 0 means DefaultRetentionBytes; the
	// switch caps it (SwitchConfig.MaxRetentionBytes).
	RetentionBytes int
	// OnChange, when set, is called when the connection fails and when
	// the session is connected again, and once more when the session
	// ends because it could not reconnect; calls come one at a time, in
	// order, from the session's reader, so OnChange must return quickly
	// and must not call Close.
	OnChange func(ConnectionEvent)
}

// ConnectionEvent reports a change of a remote session's connection to
// its OnChange callback (see ReconnectPolicy).
type ConnectionEvent struct {
	// Connected is false when the connection failed (Err says why) and
	// true when the session is connected again.
	Connected bool
	// Addr is the switch's address the session was or is connected to.
	Addr string
	// Err is why the connection failed; with Ended, why the session ends.
	Err error
	// Ended reports that the session ends: it could not reconnect.
	Ended bool
	// Attempts is how many attempts reconnecting took.
	Attempts int
	// Resumed reports that the switch still held the session: nothing
	// matched while it was away is lost but what Lost counts. When false,
	// the session was opened anew, its advertisements and subscriptions
	// registered again; events published in between were not matched for
	// it.
	Resumed bool
	// Expired reports, when Resumed is false, that the switch ended the
	// session because its retention passed: Lost is then exactly what it
	// held. When both are false the switch did not know the session —
	// another switch, or one that restarted: if the old one closed in
	// good order (Switch.Close), the entity had received everything it
	// matched; if it failed, what it held is unknown here.
	Expired bool
	// Lost counts the events matched for the session that it will not
	// receive: dropped while it was away (RetentionBytes) or, when the
	// session was opened anew, held when the old one ended. Each is also
	// counted in its subscription's Dropped.
	Lost uint64
}

func (p ReconnectPolicy) withDefaults() ReconnectPolicy {
	p.MinBackoff = cmp.Or(p.MinBackoff, DefaultMinBackoff)
	p.MaxBackoff = cmp.Or(p.MaxBackoff, DefaultMaxBackoff)
	p.Retention = cmp.Or(p.Retention, DefaultRetention)
	p.RetentionBytes = cmp.Or(p.RetentionBytes, DefaultRetentionBytes)
	if p.Disabled {
		p.Retention = 0
	}
	return p
}

func (p ReconnectPolicy) validate() error {
	switch {
	case p.MinBackoff < 0 || p.MaxBackoff < 0 || p.Retention < 0:
		return fmt.Errorf("%w: ReconnectPolicy.MinBackoff %v, MaxBackoff %v and Retention %v must not be negative", ErrInvalidConfig, p.MinBackoff, p.MaxBackoff, p.Retention)
	case p.MaxAttempts < 0 || p.RetentionBytes < 0:
		return fmt.Errorf("%w: ReconnectPolicy.MaxAttempts %d and RetentionBytes %d must not be negative", ErrInvalidConfig, p.MaxAttempts, p.RetentionBytes)
	case p.MaxBackoff > 0 && p.MinBackoff > p.MaxBackoff:
		return fmt.Errorf("%w: ReconnectPolicy.MinBackoff %v is above MaxBackoff %v", ErrInvalidConfig, p.MinBackoff, p.MaxBackoff)
	case slices.Contains(p.Addrs, ""):
		return fmt.Errorf("%w: ReconnectPolicy.Addrs has an empty address", ErrInvalidConfig)
	}
	return nil
}

// backoff returns the wait before the attempt-th attempt.
func (p ReconnectPolicy) backoff(attempt int) time.Duration {
	d := p.MaxBackoff
	if shift := attempt - 1; shift < 32 && p.MinBackoff<<shift > 0 && p.MinBackoff<<shift < d {
		d = p.MinBackoff << shift
	}
	return rand.N(d + 1)
}

// run reads the connection's frames and, when it fails, reconnects, until
// Close or a failure for good.
func (rc *remoteClient) run(ctx context.Context, conn transport.Conn) {
	defer close(rc.runDone)
	for {
		err := rc.read(ctx, conn)
		if ctx.Err() != nil { // Close, which says goodbye on conn
			return
		}
		conn.Close()
		rc.mu.Lock()
		rc.conn = nil
		addr := rc.addr
		rc.mu.Unlock()
		if rc.policy.Disabled || errors.Is(err, errEnded) || errors.Is(err, ErrProtocol) {
			rc.fail(addr, err, 0)
			return
		}
		rc.log.Warn("sion: remote session disconnected; reconnecting", "session", rc.sess.name, "addr", addr, "err", err)
		rc.notify(ConnectionEvent{Addr: addr, Err: err})
		var attempts int
		if conn, attempts, err = rc.reconnect(ctx); err != nil {
			if ctx.Err() == nil {
				rc.fail(addr, err, attempts)
			}
			return
		}
	}
}

// errEnded marks the end of a session the switch announced (an Error
// frame with Seq 0).
var errEnded = errors.New("the switch ended the session")

// errSwitchClosed ends a connection whose switch said goodbye (a Bye at
// the end of the stream: Switch.Close); the session reconnects, if it
// may, having received everything.
var errSwitchClosed = errors.New("the switch closed")

// read dispatches the frames of conn until it fails, confirming them.
func (rc *remoteClient) read(ctx context.Context, conn transport.Conn) error {
	rc.mu.Lock()
	lim, ackBytes := rc.lim, max(1, rc.retentionBytes/4)
	rc.mu.Unlock()
	bytes := 0 // received since the last confirmation this loop sent
	for {
		f, err := conn.Recv(ctx)
		if err != nil {
			return err
		}
		m, err := wire.Decode(f, lim)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		switch m := m.(type) {
		case *wire.Deliver:
			rc.deliver(m)
		case *wire.Ack:
			rc.reply(m.Seq, m)
		case *wire.Error:
			if m.Seq == 0 {
				return fmt.Errorf("%w: %w", errEnded, fromWireError(m))
			}
			rc.reply(m.Seq, m)
		case *wire.PullReply:
			rc.reply(m.Seq, m)
		case *wire.Lost:
			_, slow := rc.lost(m.Lost)
			reportSlowConsumers(slow)
		case *wire.Bye: // the switch closes: this is its last frame, and all before it arrived
			rc.confirm(conn, rc.received.Add(1))
			return errSwitchClosed
		default:
			return fmt.Errorf("%w: the switch sent a %v frame", ErrProtocol, m.Kind())
		}
		n := rc.received.Add(1)
		bytes += len(f)
		switch acked := rc.acked.Load(); {
		case n-acked >= ackEvery || bytes >= ackBytes:
			rc.confirm(conn, n)
			bytes = 0
		case n == acked+1:
			select {
			case rc.ackWake <- struct{}{}:
			default:
			}
		}
	}
}

// confirm tells the switch that n frames of the stream arrived.
func (rc *remoteClient) confirm(conn transport.Conn, n uint64) {
	f, err := wire.Encode(nil, &wire.Received{Frames: n})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), byeTimeout)
	defer cancel()
	if conn.Send(ctx, f) == nil {
		rc.acked.Store(n)
	}
}

// ackLoop confirms the frames that arrived ackDelay after the first one
// not yet confirmed, so that a quiet stream is confirmed too.
func (rc *remoteClient) ackLoop() {
	defer close(rc.ackDone)
	t := time.NewTimer(ackDelay)
	t.Stop()
	for {
		select {
		case <-rc.ackWake:
		case <-rc.done:
			return
		}
		t.Reset(ackDelay)
		select {
		case <-t.C:
		case <-rc.done:
			t.Stop()
			return
		}
		rc.mu.Lock()
		conn, n := rc.conn, rc.received.Load()
		release := rc.release
		rc.release = nil
		rc.mu.Unlock()
		if conn != nil && n > rc.acked.Load() {
			rc.confirm(conn, n)
		}
		for _, id := range release {
			rc.unsubscribe(id)
		}
	}
}

// reconnect dials the switch's addresses in turn, with backoff, until
// the session is connected again, ctx ends, the switch refuses it or
// MaxAttempts attempts failed.
func (rc *remoteClient) reconnect(ctx context.Context) (transport.Conn, int, error) {
	var last error
	attempt := 1
	for ; rc.policy.MaxAttempts == 0 || attempt <= rc.policy.MaxAttempts; attempt++ {
		t := time.NewTimer(rc.policy.backoff(attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, attempt - 1, ctx.Err()
		}
		addr := rc.addrs[(attempt-1)%len(rc.addrs)]
		hello := rc.hello
		hello.Profile = *rc.sess.profile.Load()
		rc.mu.Lock()
		hello.Resume, hello.Received = rc.token, rc.received.Load()
		rc.mu.Unlock()
		actx, cancel := context.WithTimeout(ctx, DefaultHandshakeTimeout)
		conn, welcome, err := rc.connect(actx, addr, &hello)
		cancel()
		if err == nil {
			rc.resumed(conn, welcome, addr, attempt)
			return conn, attempt, nil
		}
		if ctx.Err() != nil {
			return nil, attempt, ctx.Err()
		}
		if errors.Is(err, ErrNotAdmitted) {
			return nil, attempt, err
		}
		last = err
		rc.log.Debug("sion: remote session cannot reconnect yet", "session", rc.sess.name, "addr", addr, "attempt", attempt, "err", err)
	}
	return nil, attempt - 1, fmt.Errorf("sion: gave up reconnecting after %d attempts: %w", rc.policy.MaxAttempts, last)
}

// resumed carries on over conn, whose handshake welcome answered after
// attempts attempts: the requests the switch did not receive are sent
// again; a session the switch no longer held advertises again what it
// had advertised and registers its subscriptions again. The session is
// reported connected (OnChange) once they are registered, when their
// answers arrive. The callbacks it runs (a
// subscription's WithSlowConsumer for events lost, OnChange) run after
// sendMu is released: they may make requests.
func (rc *remoteClient) resumed(conn transport.Conn, w *wire.Welcome, addr string, attempts int) {
	rc.sendMu.Lock()
	rc.mu.Lock()
	rc.adopt(conn, w, addr)
	if !w.Resumed {
		rc.token = w.Token
		rc.received.Store(0)
		rc.acked.Store(0)
	}
	seqs := make([]uint64, 0, len(rc.pending))
	for n := range rc.pending {
		seqs = append(seqs, n)
	}
	slices.Sort(seqs)
	reqs := make([]*request, len(seqs))
	for i, n := range seqs {
		reqs[i] = rc.pending[n]
	}
	subs := make([]*Subscription, 0, len(rc.subs))
	for _, sub := range rc.subs {
		subs = append(subs, sub)
	}
	rc.mu.Unlock()
	lost, slow := rc.lost(w.Lost)
	ev := ConnectionEvent{Connected: true, Addr: addr, Attempts: attempts, Resumed: w.Resumed, Expired: w.Expired, Lost: lost}
	rc.log.Info("sion: remote session reconnected", "session", rc.sess.name, "addr", addr, "resumed", ev.Resumed, "lost", ev.Lost, "attempts", attempts)

	ctx, cancel := context.WithTimeout(context.Background(), DefaultHandshakeTimeout)
	defer cancel()
	pendingSubs := map[*Subscription]bool{}
	for i, r := range reqs {
		n := seqs[i]
		if r.sub != nil {
			pendingSubs[r.sub] = true
		}
		switch {
		case w.Resumed && n <= w.Requests: // the switch has it; its answer is in the stream
			continue
		case !w.Resumed && r.kind == wire.KindPublish && (!w.Expired || n <= w.Requests):
			err := fmt.Errorf("%w: session %q: the connection failed while the event was on its way, and the switch no longer held the session when it reconnected: it may or may not have been published", ErrSessionExpired, rc.sess.name)
			rc.reply(n, &wire.Error{Seq: n, Code: codeSessionExpired, Message: err.Error()})
			continue
		}
		conn.Send(ctx, r.frame) // a failure shows in the reader, which reconnects again
	}
	if !w.Resumed {
		rc.sess.mu.Lock()
		ads := slices.Clone(rc.sess.ads)
		rc.sess.mu.Unlock()
		for _, ad := range ads {
			m := &wire.Advertise{Seq: rc.seq.Add(1), Type: ad.Type, Attrs: ad.Attrs}
			f, err := rc.encode(m)
			if err != nil { // it fit the connection it was first sent on, not this one
				rc.log.Warn("sion: cannot advertise again after a reconnect", "session", rc.sess.name, "type", ad.Type, "err", err)
				continue
			}
			rc.mu.Lock()
			rc.pending[m.Seq] = &request{frame: f, kind: wire.KindAdvertise, again: true}
			rc.reregistering++
			rc.mu.Unlock()
			conn.Send(ctx, f)
		}
		slices.SortFunc(subs, func(a, b *Subscription) int { return cmp.Compare(a.id, b.id) })
		for _, sub := range subs {
			if pendingSubs[sub] {
				continue
			}
			m := subscribeMessage(sub)
			m.Seq = rc.seq.Add(1)
			f, err := rc.encode(m)
			if err != nil {
				rc.endSub(sub, err)
				continue
			}
			rc.mu.Lock()
			rc.pending[m.Seq] = &request{frame: f, kind: wire.KindSubscribe, sub: sub}
			rc.reregistering++
			rc.mu.Unlock()
			conn.Send(ctx, f)
		}
	}
	rc.mu.Lock()
	rc.conn = conn
	later := rc.reregistering > 0
	if later {
		rc.reconnected = &ev
	}
	rc.mu.Unlock()
	rc.sendMu.Unlock()
	reportSlowConsumers(slow)
	if !later {
		rc.notify(ev)
	}
}

// fail ends the session for good: the connection at addr failed with err
// and the session could not reconnect in attempts attempts.
func (rc *remoteClient) fail(addr string, err error, attempts int) {
	rc.mu.Lock()
	if rc.closed {
		rc.mu.Unlock()
		return
	}
	rc.closed = true
	close(rc.done)
	rc.mu.Unlock()
	cause := fmt.Errorf("the connection to switch %q at %s failed: %w", rc.name(), addr, err)
	rc.log.Warn("sion: remote session ends", "session", rc.sess.name, "addr", addr, "err", err)
	rc.notify(ConnectionEvent{Addr: addr, Err: err, Ended: true, Attempts: attempts})
	rc.sess.shut(cause)
}

func (rc *remoteClient) notify(ev ConnectionEvent) {
	if rc.policy.OnChange != nil {
		rc.policy.OnChange(ev)
	}
}

// endSub ends a subscription the switch refused after a reconnect: the
// subscription sub is, or, for a member, its whole group. The group's
// other filters the switch may hold are released by ackLoop (endSub may
// run with sendMu held).
func (rc *remoteClient) endSub(refused *Subscription, err error) {
	sub := refused.owner()
	rc.mu.Lock()
	for _, r := range sub.registrations() {
		if _, ok := rc.subs[r.id]; ok {
			delete(rc.subs, r.id)
			if r != refused {
				rc.release = append(rc.release, r.id)
			}
		}
	}
	rc.mu.Unlock()
	if len(sub.members) > 0 {
		select {
		case rc.ackWake <- struct{}{}:
		default:
		}
	}
	s := rc.sess
	s.mu.Lock()
	delete(s.subs, sub.id)
	s.mu.Unlock()
	rc.log.Warn("sion: subscription ended", "session", s.name, "subscription", sub.id, "err", err)
	sub.end(err)
}

// lost counts deliveries the switch dropped for the session's
// subscriptions, and returns how many in all and the subscriptions that
// lost some, for reportSlowConsumers.
func (rc *remoteClient) lost(cs []wire.Count) (uint64, []*Subscription) {
	var total uint64
	var slow []*Subscription
	for _, c := range cs {
		total += c.N
		rc.mu.Lock()
		sub := rc.subs[c.Sub]
		rc.mu.Unlock()
		if sub != nil { // matched on the switch, lost there
			sub = sub.owner()
			sub.matched.Add(c.N)
			sub.drop(c.N, dropStream)
			slow = append(slow, sub)
		}
	}
	return total, slow
}

// reportSlowConsumers reports each of subs as a slow consumer, running
// its WithSlowConsumer callback. No lock may be held: the callback may
// make requests (Cancel).
func reportSlowConsumers(subs []*Subscription) {
	for _, sub := range subs {
		sub.reportSlow()
	}
}

package site

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
)

// pool holds the proxy's remote sessions — one per address: a switch of
// a site, or another proxy's front — and, on each, the subscriptions the
// proxy placed there, one per distinct filter, reference-counted: the
// first front subscription with a filter subscribes, the last one to go
// cancels.
type pool struct {
	p *Proxy

	mu     sync.Mutex
	conns  map[string]*conn     // mu; by address
	failed map[string]dialError // mu; addresses whose last dial failed, until when it is not tried again
	closed bool                 // mu
}

// dialError is a failed dial, remembered for a while: a destination that
// does not answer (a dead representative proxy, or one a hostile entity
// named) costs one RequestTimeout per Refresh, not one per Subscribe.
type dialError struct {
	err   error
	until time.Time
	fails int // dials failed in a row: each doubles the wait, from Refresh up to maxDialBackoff
}

// maxDialBackoff bounds how long a failed destination is left untried
// (CASES-2 B27: a partition that heals is found within seconds).
const maxDialBackoff = 10 * time.Second

// conn is the proxy's session at one address.
type conn struct {
	addr  string
	proxy bool          // another proxy's front (else a switch)
	ready chan struct{} // closed when the dial has ended
	sess  *sion.Session // set before ready closes when the dial succeeded
	err   error         // set before ready closes when it failed
	down  atomic.Bool   // its connection failed and has not come back

	subs map[string]*placed // pool.mu; by the filter's canonical text
}

// placed is one subscription the proxy holds on a conn.
type placed struct {
	refs  int
	ready chan struct{}      // closed when Subscribe has returned
	sub   *sion.Subscription // set before ready closes when it succeeded
	err   error              // set before ready closes when it failed

	handled  atomic.Uint64 // deliveries its handler has brought back
	progress chan struct{} // 1-buffered: handled grew
}

func newPool(p *Proxy) *pool {
	return &pool{p: p, conns: map[string]*conn{}, failed: map[string]dialError{}}
}

// get returns the session at addr, dialling it once for all callers.
func (pl *pool) get(ctx context.Context, addr string, proxy bool) (*conn, error) {
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		return nil, fmt.Errorf("%w: proxy %q", sion.ErrClosed, pl.p.cfg.Name)
	}
	c := pl.conns[addr]
	if f, ok := pl.failed[addr]; c == nil && ok && time.Now().Before(f.until) {
		pl.mu.Unlock()
		return nil, f.err
	}
	if c == nil {
		c = &conn{addr: addr, proxy: proxy, ready: make(chan struct{}), subs: map[string]*placed{}}
		pl.conns[addr] = c
		pl.p.wg.Go(func() { pl.dial(c) })
	}
	pl.mu.Unlock()
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
}

// dial opens c's session; a failed dial forgets c, so that the next get
// dials again.
func (pl *pool) dial(c *conn) {
	p := pl.p
	ctx, cancel := p.context(p.cfg.RequestTimeout)
	defer cancel()
	name, key := p.cfg.Name, p.cfg.SwitchKey
	if c.proxy {
		name, key = proxySessionPrefix+p.cfg.Site+"/"+p.cfg.Name, p.cfg.Place.SharedKey
	}
	sess, err := sion.Dial(ctx, p.cfg.Transport, c.addr, sion.SessionConfig{
		Name: name, SharedKey: key, Logger: p.log,
		Reconnect: sion.ReconnectPolicy{OnChange: func(ev sion.ConnectionEvent) {
			c.down.Store(!ev.Connected)
			if ev.Connected && !ev.Resumed {
				p.log.Info("site: session opened anew", "proxy", p.cfg.Name, "addr", c.addr)
			}
			if !ev.Connected && c.proxy {
				p.mgr.unreachable(c.addr) // a representative proxy: the manager may replace it
			}
			p.kick() // subscriptions at a representative that is down go to its site's switches meanwhile
		}},
	})
	pl.mu.Lock()
	if err == nil && pl.closed {
		sess.Close()
		err = fmt.Errorf("%w: proxy %q", sion.ErrClosed, p.cfg.Name)
	}
	if err != nil {
		if pl.conns[c.addr] == c {
			delete(pl.conns, c.addr)
		}
		c.err = fmt.Errorf("site: proxy %q cannot reach %s: %w", p.cfg.Name, c.addr, err)
		if len(pl.failed) >= maxFailedDials {
			clear(pl.failed)
		}
		n := pl.failed[c.addr].fails + 1
		pl.failed[c.addr] = dialError{c.err, time.Now().Add(min(p.cfg.Refresh<<min(n-1, 16), maxDialBackoff)), n}
	} else {
		c.sess = sess
		delete(pl.failed, c.addr)
	}
	pl.mu.Unlock()
	close(c.ready)
}

// place subscribes f at addr once for every front subscription that
// places it there; it returns when the subscription is granted there
// (the switch's or the representative proxy's contract).
func (pl *pool) place(ctx context.Context, addr string, proxy bool, f *filter.Filter) error {
	c, err := pl.get(ctx, addr, proxy)
	if err != nil {
		return err
	}
	if c.down.Load() {
		return fmt.Errorf("%w: site: cannot subscribe at %s", errDown, addr)
	}
	key := f.String()
	pl.mu.Lock()
	ps := c.subs[key]
	first := ps == nil
	if first {
		ps = &placed{ready: make(chan struct{}), progress: make(chan struct{}, 1)}
		c.subs[key] = ps
	}
	ps.refs++
	pl.mu.Unlock()
	if first {
		pl.p.counts.subscribe(pl.p, addr)
		bring := pl.p.bringBack(addr)
		handler := func(d sion.Delivery) {
			bring(d)
			ps.handled.Add(1)
			select {
			case ps.progress <- struct{}{}:
			default:
			}
		}
		ps.sub, ps.err = c.sess.SubscribeFilter(ctx, f, sion.WithQueue(pl.p.cfg.Queue), sion.WithHandler(handler))
		if ps.err != nil {
			pl.mu.Lock()
			if c.subs[key] == ps {
				delete(c.subs, key)
			}
			pl.mu.Unlock()
		}
		close(ps.ready)
	} else {
		select {
		case <-ps.ready:
		case <-ctx.Done():
			pl.release(addr, f)
			return ctx.Err()
		}
	}
	if ps.err != nil {
		return fmt.Errorf("site: subscribe at %s: %w", addr, ps.err)
	}
	return nil
}

// release drops one reference to f at addr, cancelling the subscription
// with the last — once it has brought back what it matched before (see
// drain): release follows the placement that replaces it (make before
// break), and the events matched here just before that one was granted
// may not have arrived yet.
func (pl *pool) release(addr string, f *filter.Filter) {
	key := f.String()
	pl.mu.Lock()
	c := pl.conns[addr]
	var ps *placed
	if c != nil {
		ps = c.subs[key]
	}
	if ps == nil {
		pl.mu.Unlock()
		return
	}
	ps.refs--
	last := ps.refs == 0
	var counted uint64 // its drops, moved to the proxy's counter under mu: ProxyStats.Dropped never goes down
	if last {
		delete(c.subs, key)
		select {
		case <-ps.ready:
			if ps.sub != nil {
				counted = ps.sub.Stats().Dropped
				pl.p.counts.dropped.Add(counted)
			}
		default:
		}
	}
	pl.mu.Unlock()
	if !last {
		return
	}
	pl.p.wg.Go(func() {
		<-ps.ready
		if ps.sub != nil {
			pl.drain(c, ps)
			ps.sub.Cancel() // does not wait for the switch
			pl.p.counts.dropped.Add(ps.sub.Stats().Dropped - counted)
		}
	})
}

// drain waits until ps, placed on c, has brought back every event the
// switch (or representative proxy) at c matched for it before the call:
// a Sync round trip puts them in its queue, and its handler takes them
// from there. Cancel would drop them — a handler gets no call that starts
// after Cancel returns — and the placement that replaces ps was granted
// after they were published, so nothing else brings them. It gives up
// after RequestTimeout, when the proxy closes, or at once when c's
// connection is down (nothing arrives until it is back). At a
// representative proxy, Sync covers what it has handed to its front;
// events still on their way to it from its switches are not waited for.
func (pl *pool) drain(c *conn, ps *placed) {
	if c.down.Load() {
		return
	}
	p := pl.p
	ctx, cancel := p.context(p.cfg.RequestTimeout)
	defer cancel()
	if err := c.sess.Sync(ctx); err != nil {
		return
	}
	queued := ps.sub.Stats().Delivered
	for ps.handled.Load() < queued {
		select {
		case <-ps.progress:
		case <-ctx.Done():
			return
		}
	}
}

// publish publishes ev at addr, keeping its ID. An error wrapping
// errUnanswered means the request was sent and ctx ended before its
// answer: the switch (or proxy) may have taken ev all the same.
//
// Only the session says whether its connection is down (OnChange, or
// ErrClosed once it has ended): a request that ctx ended is no sign of
// it — on a loaded machine an answer comes late while the connection is
// fine — and nothing would ever take such a guess back (no OnChange
// follows for a connection that never failed), leaving a live switch out
// of the spread and of placements for good.
func (pl *pool) publish(ctx context.Context, addr string, proxy bool, ev *sion.Event) error {
	c, err := pl.get(ctx, addr, proxy)
	if err != nil {
		return err
	}
	if c.down.Load() {
		return fmt.Errorf("%w: site: the connection to %s is down", errDown, addr)
	}
	if err := c.sess.Publish(ctx, ev); err != nil {
		switch {
		case errors.Is(err, sion.ErrClosed):
			c.down.Store(true) // the session has ended: it does not come back
		case ctx.Err() != nil:
			err = fmt.Errorf("%w: %w", errUnanswered, err)
		}
		return fmt.Errorf("site: publish at %s: %w", addr, err)
	}
	return nil
}

// placed returns the number of subscriptions the pool holds, and the
// events they have dropped.
func (pl *pool) placed() (n int, dropped uint64) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, c := range pl.conns {
		n += len(c.subs)
		for _, ps := range c.subs {
			select {
			case <-ps.ready:
				if ps.sub != nil {
					dropped += ps.sub.Stats().Dropped
				}
			default:
			}
		}
	}
	return n, dropped
}

// isDown reports whether the session at addr is known to be down, or its
// last dial failed lately.
func (pl *pool) isDown(addr string) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if c := pl.conns[addr]; c != nil {
		return c.down.Load()
	}
	f, ok := pl.failed[addr]
	return ok && time.Now().Before(f.until)
}

// maxFailedDials bounds the failed dials a pool remembers.
const maxFailedDials = 4096

// errDown marks a publish refused because the session's connection is
// down (the caller tries elsewhere).
var errDown = errors.New("site: connection down")

// errUnanswered marks a publish whose context ended after it was sent,
// before its answer: it may have been taken (pool.publish).
var errUnanswered = errors.New("site: publish sent, not answered in time")

// sweep closes the sessions that are down and hold no subscription: a
// representative proxy or a switch that died is not dialled for ever.
func (pl *pool) sweep() {
	pl.mu.Lock()
	var idle []*conn
	for addr, c := range pl.conns {
		select {
		case <-c.ready:
		default:
			continue
		}
		if c.sess != nil && c.down.Load() && len(c.subs) == 0 {
			idle = append(idle, c)
			delete(pl.conns, addr)
			// Still down as far as anyone asks, until it is tried again.
			pl.failed[addr] = dialError{fmt.Errorf("%w: site: the session at %s was down", errDown, addr), time.Now().Add(pl.p.cfg.Refresh), 1}
		}
	}
	pl.mu.Unlock()
	for _, c := range idle {
		c.sess.Close()
	}
}

// close ends every session and waits for them.
func (pl *pool) close() {
	pl.mu.Lock()
	pl.closed = true
	conns := pl.conns
	pl.conns = map[string]*conn{}
	pl.mu.Unlock()
	for _, c := range conns {
		<-c.ready
		if c.sess != nil {
			c.sess.Close()
		}
	}
}

package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sion-go/sion/transport"
)

// Backoff of the accept loop after an error of the socket other than its
// close (out of file descriptors, typically), as net/http's.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// Listener is a TCP listener; it implements transport.Listener. Listen
// returns a *Listener as a transport.Listener.
//
// A Listener runs an accept goroutine, which takes in connections as they
// come, and one goroutine per connection in its handshake (TLS and
// preamble), so that a slow or failing handshake delays no other. Accept
// returns only established connections; those whose handshake fails are
// closed and never returned. At most Config.BacklogConns connections are
// in their handshake or established and waiting for Accept. Close stops
// every goroutine of the Listener, and of its connections not yet
// accepted, before it returns.
//
// A Listener is safe for concurrent use by multiple goroutines.
type Listener struct {
	nl  net.Listener
	cfg Config

	ctx    context.Context // done when Close starts; ends handshakes
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept goroutine and the handshakes

	slots   chan struct{} // one per connection taken in and not yet returned by Accept
	backlog chan *Conn    // established connections, waiting for Accept
	once    sync.Once

	// mu orders Close after the handshakes that may still put a Conn in
	// backlog: a handshake holds it shared from its check of ctx on, and
	// Close drains backlog holding it, after cancelling ctx.
	mu sync.RWMutex
}

var _ transport.Listener = (*Listener)(nil)

// newListener returns a Listener taking connections from nl, and starts
// its accept goroutine.
func newListener(nl net.Listener, cfg Config) *Listener {
	l := &Listener{
		nl:      nl,
		cfg:     cfg,
		slots:   make(chan struct{}, cfg.BacklogConns),
		backlog: make(chan *Conn, cfg.BacklogConns),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

// Accept returns the next established connection, a *Conn. It blocks
// until one is established, ctx is done (ctx.Err(); the Listener stays
// usable) or the Listener is closed (an error wrapping
// transport.ErrClosed). See transport.Listener.
func (l *Listener) Accept(ctx context.Context) (transport.Conn, error) {
	if l.ctx.Err() != nil {
		return nil, l.closedErr()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case c := <-l.backlog:
		if l.ctx.Err() != nil {
			// Close started while c was taken: Close's drain missed it.
			c.abort()
			<-c.Done()
			return nil, l.closedErr()
		}
		<-l.slots
		return c, nil
	case <-l.ctx.Done():
		return nil, l.closedErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops listening and frees the address, fails pending and later
// Accepts with errors wrapping transport.ErrClosed, and closes the
// connections not yet accepted, at once, without a flush. It waits for
// the goroutines of the Listener and of those connections, which end
// promptly. Conns already accepted are not affected. Close is idempotent
// and returns nil.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.cancel()
		l.nl.Close()
		l.mu.Lock() // once handshakes that may still add to backlog are done
		var dropped []*Conn
		for len(l.backlog) > 0 {
			c := <-l.backlog
			c.abort()
			dropped = append(dropped, c)
		}
		l.mu.Unlock()
		l.wg.Wait()
		for _, c := range dropped {
			<-c.Done()
		}
	})
	return nil
}

// Addr returns the address the Listener is bound to, a *net.TCPAddr.
func (l *Listener) Addr() net.Addr { return l.nl.Addr() }

// acceptLoop is the accept goroutine: it takes in a socket whenever a
// slot is free, and starts its handshake.
func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	backoff := time.Duration(0)
	for {
		select {
		case l.slots <- struct{}{}:
		case <-l.ctx.Done():
			return
		}
		raw, err := l.nl.Accept()
		if err != nil {
			<-l.slots
			if l.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, minAcceptBackoff), maxAcceptBackoff)
			if !sleep(l.ctx, backoff) {
				return
			}
			continue
		}
		backoff = 0
		l.wg.Add(1)
		go l.handshake(raw)
	}
}

// handshake establishes the connection of raw and puts it in the
// backlog, or closes it if its handshake fails or the Listener closes.
func (l *Listener) handshake(raw net.Conn) {
	defer l.wg.Done()
	c, err := establish(l.ctx, raw, l.cfg.TLS, true, l.cfg)
	if err != nil {
		if l.cfg.Logger != nil && l.ctx.Err() == nil {
			l.cfg.Logger.Warn("tcp: connection refused in its handshake", "listener", l.Addr().String(), "remote", raw.RemoteAddr().String(), "err", err)
		}
		<-l.slots
		return
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ctx.Err() != nil {
		c.abort()
		<-c.Done()
		return
	}
	// Never blocks: backlog has room for every slot.
	l.backlog <- c
}

func (l *Listener) closedErr() error {
	return fmt.Errorf("tcp: accept on closed listener %v: %w", l.Addr(), transport.ErrClosed)
}

// sleep waits for d, or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

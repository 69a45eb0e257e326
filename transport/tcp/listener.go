package tcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/sion-go/sion/internal/guard"
	"github.com/sion-go/sion/transport"
)

// Backoff of the accept loop after an error of the socket other than its
// close (out of file descriptors, typically), as net/http's.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// The rate limit of a Listener's log records: at most one per source and
// kind per logInterval, for up to logSources sources at once.
const (
	logInterval = 10 * time.Second
	logSources  = 4096
	logRecords  = 64 // per logInterval, over all sources and kinds
)

// errEvicted is the cause of a handshake's end when the table of
// handshakes evicts it.
var errEvicted = errors.New("tcp: handshake evicted")

// Listener is a TCP listener; it implements transport.Listener. Listen
// returns a *Listener as a transport.Listener.
//
// A Listener runs an accept goroutine, which takes in connections as they
// come, and one goroutine per connection in its handshake (TLS and
// preamble), so that a slow or failing handshake delays no other. Accept
// returns only established connections; those whose handshake fails are
// closed and never returned. At most Config.MaxHandshakes connections are
// in their handshake: when a socket arrives with that many, the Listener
// closes the oldest handshake of the source that holds the most, so it
// never stops taking sockets because of handshakes. It stops while
// Config.BacklogConns established connections wait for Accept (the
// handshakes then in progress may still add up to MaxHandshakes more).
// The Conns it establishes hold their peer to Config.PendingReadBytes
// until Admit. See the package doc, "Listener" and "Bounds for unadmitted
// peers". Close stops every goroutine of the Listener, and of its
// connections not yet accepted, before it returns.
//
// A Listener is safe for concurrent use by multiple goroutines.
type Listener struct {
	nl  net.Listener
	cfg Config

	ctx    context.Context // done when Close starts; ends handshakes
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept goroutine and the handshakes

	handshakes *guard.Handshakes // the connections in their handshake
	logs       *guard.Every      // rate of log records, per kind and source
	logsAll    *guard.Window     // and over all sources

	backlog chan *Conn    // established connections, waiting for Accept
	room    chan struct{} // signalled when Accept takes from backlog
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
		nl:         nl,
		cfg:        cfg,
		handshakes: guard.NewHandshakes(cfg.MaxHandshakes),
		logs:       guard.NewEvery(logInterval, logSources),
		logsAll:    guard.NewWindow(logRecords, logInterval),
		// Room for every connection established while the accept loop
		// has not yet stopped, so that a handshake rarely waits.
		backlog: make(chan *Conn, cfg.BacklogConns+cfg.MaxHandshakes),
		room:    make(chan struct{}, 1),
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
		select {
		case l.room <- struct{}{}:
		default: // the accept loop has a signal already
		}
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

// acceptLoop is the accept goroutine: it takes in a socket whenever fewer
// than BacklogConns established connections wait for Accept, and starts
// its handshake.
func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	backoff := time.Duration(0)
	for {
		if !l.waitRoom() {
			return
		}
		raw, err := l.nl.Accept()
		if err != nil {
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
		// The backlog may have filled while the loop waited for raw.
		if !l.waitRoom() {
			raw.Close()
			return
		}
		arrived := time.Now()
		ctx, cancel := context.WithCancelCause(l.ctx)
		done, victim, evicted := l.handshakes.Start(guard.Source(raw.RemoteAddr()), func() { cancel(errEvicted) })
		if evicted {
			l.warn(time.Now(), "evicted", victim, "tcp: handshake evicted: too many connections in their handshake",
				slog.String("source", victim), slog.Int("max_handshakes", l.cfg.MaxHandshakes))
		}
		l.wg.Add(1)
		go l.handshake(ctx, cancel, done, raw, arrived)
	}
}

// waitRoom waits until fewer than BacklogConns established connections
// wait for Accept; it reports false if the Listener closes first.
func (l *Listener) waitRoom() bool {
	for len(l.backlog) >= l.cfg.BacklogConns {
		select {
		case <-l.room:
		case <-l.ctx.Done():
			return false
		}
	}
	return true
}

// handshake establishes the connection of raw, which the accept loop took
// in at arrived, and puts it in the backlog, or closes it if its handshake fails, is evicted (ctx's cause
// is errEvicted) or the Listener closes. It calls done when the
// handshake ends, and cancel when it returns.
func (l *Listener) handshake(ctx context.Context, cancel context.CancelCauseFunc, done func(), raw net.Conn, arrived time.Time) {
	defer l.wg.Done()
	defer cancel(nil)
	c, err := establish(ctx, raw, l.cfg.TLS, true, l.cfg)
	done()
	if c != nil {
		c.arrived = arrived
	}
	if err != nil {
		if l.ctx.Err() == nil && context.Cause(ctx) != errEvicted {
			l.warn(time.Now(), "refused", guard.Source(raw.RemoteAddr()), "tcp: connection refused in its handshake",
				slog.String("remote", raw.RemoteAddr().String()), slog.Any("err", err))
		}
		return
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ctx.Err() == nil { // else Close may have drained the backlog already: c would stay there
		select {
		case <-l.ctx.Done():
		case l.backlog <- c: // waits only in a rare race with an eviction
			return
		}
	}
	c.abort()
	<-c.Done()
}

// warn logs, at now, a Warn record of kind about source, with attrs,
// unless one was logged for them within logInterval or logRecords were
// logged in all; the record counts those suppressed since the last.
func (l *Listener) warn(now time.Time, kind, source, msg string, attrs ...slog.Attr) {
	if l.cfg.Logger == nil {
		return
	}
	ok, suppressed := l.logs.Allow(kind+" "+source, now)
	if !ok {
		return
	}
	ok, suppressedAll := l.logsAll.Allow(now)
	if !ok {
		return
	}
	attrs = append([]slog.Attr{slog.String("listener", l.Addr().String())}, attrs...)
	attrs = append(attrs, slog.Uint64("suppressed", suppressed))
	if suppressedAll > 0 {
		attrs = append(attrs, slog.Uint64("suppressed_all_sources", suppressedAll))
	}
	l.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
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

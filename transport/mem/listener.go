package mem

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/sion-go/sion/transport"
)

// listener is a Listener of a Network. Dialed connections wait in backlog
// until accepted.
type listener struct {
	n    *Network
	addr Addr

	backlog chan *conn    // server ends of dialed, unaccepted connections
	done    chan struct{} // closed when Close starts
	once    sync.Once

	// mu orders Close after the queue calls that may still put a conn in
	// backlog: queue holds it shared from its check of done on, and Close
	// drains backlog holding it, after closing done.
	mu sync.RWMutex
}

var _ transport.Listener = (*listener)(nil)

// Accept returns the next dialed connection, in the order they were
// queued; see transport.Listener.
func (l *listener) Accept(ctx context.Context) (transport.Conn, error) {
	if isDone(l.done) {
		return nil, l.closedErr()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case s := <-l.backlog:
		if isDone(l.done) {
			// Close started while s was taken: Close's drain missed it.
			s.Close()
			return nil, l.closedErr()
		}
		return s, nil
	case <-l.done:
		return nil, l.closedErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close frees the address, fails pending Accepts and closes the
// connections not yet accepted; see transport.Listener.
func (l *listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.n.remove(l)
		l.mu.Lock() // once queue calls that may still add to backlog are done
		defer l.mu.Unlock()
		for {
			select {
			case s := <-l.backlog:
				s.Close()
			default:
				return
			}
		}
	})
	return nil
}

// Addr returns the address the listener holds, as an Addr.
func (l *listener) Addr() net.Addr { return l.addr }

// queue puts s, the server end of a dialed connection, in the backlog. It
// blocks while the backlog is full, until ctx is done or l closes.
func (l *listener) queue(ctx context.Context, s *conn) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if isDone(l.done) {
		return l.noListenerErr()
	}
	select {
	case l.backlog <- s:
		return nil
	case <-l.done:
		return l.noListenerErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *listener) closedErr() error {
	return fmt.Errorf("mem: accept on closed listener %q: %w", string(l.addr), transport.ErrClosed)
}

func (l *listener) noListenerErr() error {
	return fmt.Errorf("mem: dial %q: listener closed: %w", string(l.addr), transport.ErrNoListener)
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

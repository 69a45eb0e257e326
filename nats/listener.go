package nats

import (
	"context"
	"fmt"
	"net"
	"sync"

	natsgo "github.com/nats-io/nats.go"

	"github.com/sion-go/sion/transport"
)

// listener is a transport.Listener on a NATS subject. Its subscription's
// handler (NATS's goroutine) answers Dials: it makes the accepted end of
// each connection and queues it for Accept.
type listener struct {
	t       *Transport
	name    string
	subject string
	sub     *natsgo.Subscription
	subDone chan struct{} // closed by the subscription's closed handler
	backlog chan *conn    // connections not yet accepted
	done    chan struct{} // closed by Close

	closeOnce sync.Once
	mu        sync.Mutex // held by the handler while it queues, and by Close
	closed    bool       // mu
}

var _ transport.Listener = (*listener)(nil)

// Accept waits for the next connection dialed to the Listener and returns
// its accepted end. It blocks until one arrives, ctx is done (ctx.Err();
// the Listener stays usable) or the Listener is closed (an error wrapping
// transport.ErrClosed). A connection whose dialer gave up meanwhile is
// returned all the same; its Recv reports the abort.
func (l *listener) Accept(ctx context.Context) (transport.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case c := <-l.backlog:
		return c, nil
	case <-l.done:
		return nil, fmt.Errorf("nats: accept on %s: %w", l.name, transport.ErrClosed)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close unsubscribes, so that Dials to the name fail with
// transport.ErrNoListener, aborts the connections not yet accepted (their
// dialers' Recv fails with transport.ErrClosed), fails pending and later
// Accepts, and waits for the subscription's handler to end. Conns already
// accepted are not affected. Close is idempotent and returns nil.
func (l *listener) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		close(l.done)
		if l.sub.Unsubscribe() == nil {
			<-l.subDone
		}
		l.t.unlisten(l.subject)
		for {
			select {
			case c := <-l.backlog:
				c.abort()
			default:
				return
			}
		}
	})
	return nil
}

// Addr returns the name the Listener listens on, an Addr.
func (l *listener) Addr() net.Addr { return Addr(l.name) }

// handle answers a request on the Listener's subject: a probe from
// Listen, or a Dial's hello. It never blocks.
func (l *listener) handle(m *natsgo.Msg) {
	if len(m.Data) == 1 && m.Data[0] == kindProbe {
		m.Respond([]byte{kindInUse})
		return
	}
	id, peer, err := decodeHello(m.Data)
	if err != nil || m.Reply == "" {
		return // not of this protocol: the dialer gets no reply
	}
	t := l.t
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if len(l.backlog) == cap(l.backlog) {
		m.Respond([]byte{kindBusy})
		return
	}
	recv := t.connSubject(id, "a")
	c := newConn(t.cfg.Conn, t.cfg, Addr(l.name), Addr(t.connSubject(id, "d")), t.connSubject(id, "d"), true)
	if err := c.subscribe(recv); err != nil {
		return
	}
	c.start(peer)
	l.backlog <- c
	m.Respond(encodeAccept(c.own))
}

package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/sion-go/sion/transport"
)

// Network is the network name of every Addr: "nats".
const Network = "nats"

// ListenProbeTimeout bounds how long Listen waits for another Listener
// on the same subject to answer its probe: 1 s. A subscription that its
// NATS connection is tearing down may take the probe without answering;
// Listen then goes on after this wait.
const ListenProbeTimeout = time.Second

// NoRespondersGrace is how long Dial keeps asking while NATS answers
// that nobody subscribes to the Listener's subject, before it returns
// transport.ErrNoListener: 500 ms (or Config.HandshakeTimeout, if
// shorter). A Listener's subscription reaches the other servers of a
// cluster a moment after Listen returns.
const NoRespondersGrace = 500 * time.Millisecond

// Addr is the address of a Listener or of one end of a Conn: a name in the
// subject space of the Transport's Config.SubjectPrefix. A Listener's Addr,
// and the accepted end's LocalAddr, is the name given to Listen; a dialed
// end's LocalAddr is the subject it receives on. Addr implements net.Addr.
type Addr string

// Network returns "nats".
func (a Addr) Network() string { return Network }

// String returns the name.
func (a Addr) String() string { return string(a) }

// Transport is a transport.Transport whose connections ride a NATS
// connection (S1 shared links over NATS; issue 19, "NATS as the engine
// when a place outgrows its own links"). Make one with New.
//
// A Transport is safe for concurrent use by multiple goroutines. It
// starts no goroutine and needs no Close; its Listeners and Conns have
// their own Close.
type Transport struct {
	cfg Config

	mu        sync.Mutex
	listening map[string]bool // subjects of this Transport's open Listeners; mu
}

var _ transport.Transport = (*Transport)(nil)

// New returns a Transport over cfg.Conn configured by cfg. It returns an
// error if Conn is nil, a field is negative (or over 2^31-1 for the
// sizes), SubjectPrefix is not a subject of literal tokens, or DeadAfter
// does not exceed PingInterval.
func New(cfg Config) (*Transport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Transport{cfg: cfg.withDefaults(), listening: make(map[string]bool)}, nil
}

// MaxFrameBytes returns the frame size limit, in bytes, that t announces
// when it connects: Config.MaxFrameBytes or its default. A Conn's limit
// may be smaller, if the peer announces less.
func (t *Transport) MaxFrameBytes() int { return t.cfg.MaxFrameBytes }

func (t *Transport) listenSubject(name string) string {
	return t.cfg.SubjectPrefix + ".listen." + name
}

func (t *Transport) connSubject(id, end string) string {
	return t.cfg.SubjectPrefix + ".conn." + id + "." + end
}

// checkPayload returns an error if the NATS server's max_payload is too
// small for this protocol.
func (t *Transport) checkPayload() error {
	if mp := t.cfg.Conn.MaxPayload(); mp < MinPayloadBytes && t.cfg.Conn.IsConnected() {
		return fmt.Errorf("nats: the server's max_payload is %d bytes, want at least %d", mp, MinPayloadBytes)
	}
	return nil
}

// Listen listens on name, a subject of literal tokens (see
// Config.SubjectPrefix), and returns a Listener whose Addr is name: it
// subscribes to SubjectPrefix + ".listen." + name. name "" means a fresh
// name the Transport picks (a NUID). Listen returns an error wrapping
// transport.ErrAddrInUse when a Listener of this Transport holds name, or
// when a Listener elsewhere answers the question Listen asks on that
// subject within ListenProbeTimeout (or Config.HandshakeTimeout, if
// shorter). Two Listens at once in two processes may both succeed, as
// may a Listen while the other Listener is too slow to answer; Dials
// then reach one of them at random. It returns an error wrapping ErrConnLost when the NATS
// connection is closed.
func (t *Transport) Listen(name string) (transport.Listener, error) {
	if name == "" {
		name = nuid.Next()
	}
	if err := checkSubject(name); err != nil {
		return nil, fmt.Errorf("nats: listen %q: %w", name, err)
	}
	if err := t.checkPayload(); err != nil {
		return nil, err
	}
	subject := t.listenSubject(name)
	t.mu.Lock()
	if t.listening[subject] {
		t.mu.Unlock()
		return nil, fmt.Errorf("nats: listen %s: %w", name, transport.ErrAddrInUse)
	}
	t.listening[subject] = true
	t.mu.Unlock()
	l, err := t.listen(name, subject)
	if err != nil {
		t.unlisten(subject)
		return nil, err
	}
	return l, nil
}

func (t *Transport) listen(name, subject string) (*listener, error) {
	nc := t.cfg.Conn
	if nc.HeadersSupported() {
		ctx, cancel := context.WithTimeout(context.Background(), min(t.cfg.HandshakeTimeout, ListenProbeTimeout))
		_, err := nc.RequestWithContext(ctx, subject, []byte{kindProbe})
		cancel()
		switch {
		case err == nil:
			return nil, fmt.Errorf("nats: listen %s: %w (a Listener elsewhere answers on %s)", name, transport.ErrAddrInUse, subject)
		case errors.Is(err, natsgo.ErrConnectionClosed):
			return nil, fmt.Errorf("nats: listen %s: %w: %w", name, ErrConnLost, err)
		}
	}
	l := &listener{t: t, name: name, subject: subject, backlog: make(chan *conn, t.cfg.BacklogConns),
		done: make(chan struct{}), subDone: make(chan struct{})}
	sub, err := nc.Subscribe(subject, l.handle)
	if err != nil {
		return nil, fmt.Errorf("nats: listen %s: %w", name, connErr(err))
	}
	sub.SetClosedHandler(func(string) { close(l.subDone) })
	l.sub = sub
	// Make the server take the subscription before Listen returns, so
	// that a Dial or a probe after it finds the Listener (on this server
	// at once; on others of the cluster a moment later). While the NATS
	// client reconnects, it re-subscribes when it is back.
	nc.FlushTimeout(t.cfg.HandshakeTimeout)
	return l, nil
}

func (t *Transport) unlisten(subject string) {
	t.mu.Lock()
	delete(t.listening, subject)
	t.mu.Unlock()
}

// Dial connects to the Listener at addr, a name given to Listen, and
// returns the local end of a new Conn. It subscribes to the Conn's own
// subject, sends a request to the Listener's subject and returns once the
// Listener has replied that it holds the connection for Accept. While the
// Listener holds Config.BacklogConns connections not yet accepted, it
// replies "busy" and Dial tries again, waiting 10 ms, then twice as long
// each time up to 500 ms. Config.HandshakeTimeout bounds the whole, and
// ctx unblocks Dial, which then returns ctx's error, wrapped; ctx does
// not limit the Conn. A Dial that gives up after the Listener took the
// connection tells it so, and Accept skips it or its Recv fails.
//
// Dial returns an error wrapping transport.ErrNoListener when nobody
// subscribes to the Listener's subject (NATS's "no responders"), or when
// nothing replies within HandshakeTimeout; an error wrapping ErrProtocol
// when the reply is not of this protocol; and one wrapping ErrConnLost
// when the NATS connection is closed.
func (t *Transport) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("nats: dial %s: %w", addr, err)
	}
	if err := checkSubject(addr); err != nil {
		return nil, fmt.Errorf("nats: dial %q: %w: %w", addr, transport.ErrNoListener, err)
	}
	if err := t.checkPayload(); err != nil {
		return nil, err
	}
	nc := t.cfg.Conn
	id := nuid.Next()
	recv := t.connSubject(id, "d")
	c := newConn(nc, t.cfg, Addr(recv), Addr(addr), t.connSubject(id, "a"), false)
	if err := c.subscribe(recv); err != nil {
		return nil, fmt.Errorf("nats: dial %s: %w", addr, connErr(err))
	}
	peer, err := t.request(ctx, addr, encodeHello(id, c.own))
	if err != nil {
		if !errors.Is(err, transport.ErrNoListener) {
			// The Listener may have taken the connection: tell it.
			nc.Publish(c.sendSubject, []byte{kindAbort})
		}
		if c.sub.Unsubscribe() == nil {
			<-c.subDone
		}
		return nil, fmt.Errorf("nats: dial %s: %w", addr, err)
	}
	c.start(peer)
	return c, nil
}

// request sends hello to the Listener at addr until it accepts, and
// returns its parameters. HandshakeTimeout bounds it, and ctx.
func (t *Transport) request(ctx context.Context, addr string, hello []byte) (params, error) {
	hctx, cancel := context.WithTimeout(ctx, t.cfg.HandshakeTimeout)
	defer cancel()
	subject := t.listenSubject(addr)
	gaveUp := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: no reply on %s within HandshakeTimeout %v", transport.ErrNoListener, subject, t.cfg.HandshakeTimeout)
	}
	wait, start := 10*time.Millisecond, time.Now()
	for {
		reply, err := t.cfg.Conn.RequestWithContext(hctx, subject, hello)
		switch {
		case errors.Is(err, natsgo.ErrNoResponders) && time.Since(start) >= NoRespondersGrace:
			return params{}, fmt.Errorf("%w (no responders on %s)", transport.ErrNoListener, subject)
		case errors.Is(err, natsgo.ErrNoResponders):
			// The Listener's interest may not have reached this server
			// of the cluster yet: wait and ask again.
		case err != nil && hctx.Err() != nil:
			return params{}, gaveUp()
		case err != nil:
			return params{}, connErr(err)
		}
		if err != nil {
			if !sleep(hctx, &wait) {
				return params{}, gaveUp()
			}
			continue
		}
		switch b := reply.Data; {
		case len(b) == accBytes && b[0] == kindAcc:
			return getParams(b[1:])
		case len(b) == 1 && b[0] == kindBusy:
		default:
			return params{}, fmt.Errorf("%w: reply of %d bytes to a dial request", ErrProtocol, len(b))
		}
		if !sleep(hctx, &wait) {
			return params{}, gaveUp()
		}
	}
}

// sleep waits *wait, or until ctx is done (it then returns false), and
// doubles *wait up to 500 ms.
func sleep(ctx context.Context, wait *time.Duration) bool {
	timer := time.NewTimer(*wait)
	defer timer.Stop()
	*wait = min(2**wait, 500*time.Millisecond)
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// connErr wraps an error of the NATS client: with ErrConnLost when the
// connection is closed.
func connErr(err error) error {
	if errors.Is(err, natsgo.ErrConnectionClosed) {
		return fmt.Errorf("%w: %w", ErrConnLost, err)
	}
	return err
}

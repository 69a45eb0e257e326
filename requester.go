package sion

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
)

// requester is the requesting side of a link — a shared link to a parent
// (SharedLink, S1) or a gateway to another place (Gateway, S1 SI-GW):
// one way to dial, run the handshake, send the request, read the accept,
// start the router and wait for the initial exchange of interest; then to
// supervise the link, re-establishing it when it fails, with a wait that
// doubles between rounds of attempts, until it is closed or told to stop.
// What differs by kind of link is its linkRequest.
//
// The requester's life is a context made by newRequester: its cancel
// (Close) ends the supervisor and any attempt in progress, and quit is
// that context's Done channel. stop ends re-establishment without ending
// the link, for a Close that still has something to say over it (a
// gateway's Leave): from then on the supervisor returns when the link
// ends, starts no attempt and keeps none that completes. A requester is
// safe for concurrent use.
type requester struct {
	sw     *Switch
	tr     transport.Transport
	kind   linkRequest
	hello  string // the session name of the link's handshake
	key    []byte // the other place's shared key, for the handshake
	cfg    requestTimes
	cancel context.CancelFunc
	quit   <-chan struct{} // closed by cancel
	done   chan struct{}   // closed when the supervisor returns (or when the first attempt fails)
	halt   chan struct{}   // closed by stop, under mu

	mu  sync.Mutex
	cur *router // mu; the link's router while it is up, else nil
	ups int     // mu; establishments
	err error   // mu; the last failure
}

// requestTimes bounds a requester's attempts.
type requestTimes struct {
	handshake, retryMin, retryMax time.Duration
}

// linkRequest is what a kind of requested link adds to the requester.
// The requester calls request, accepted and up from the goroutine of an
// attempt (Link or Federate, then the supervisor), the rest from the
// supervisor.
type linkRequest interface {
	// describe names the link to addr in errors ("link from … to …").
	describe(addr string) string
	// request returns the request to send over conn once the handshake
	// gave w, or why the link cannot be made there.
	request(conn transport.Conn, w *wire.Welcome) (linkctl.Message, error)
	// accepted returns, for the peer's accept, the session the link's
	// router holds on this switch, whether the peer is this switch's
	// parent, and the link's end.
	accepted(a linkAccept) (*Session, bool, linkEnd, error)
	// up records that the link to addr is up as r (the requester has
	// recorded it: current returns r).
	up(r *router, addr string)
	// watch returns when r has ended; when the requester's life (ctx)
	// ends first, it closes r and waits for it. linkCtx is r's context.
	watch(ctx, linkCtx context.Context, r *router)
	// down is told that r ended with err (the requester has recorded
	// it) and returns the addresses to try first, and false when the link
	// is not to be re-established.
	down(r *router, err error) ([]string, bool)
	// candidates returns the addresses to try in a round of attempts.
	candidates() []string
}

// linkAccept is a peer's accept of a link request.
type linkAccept struct {
	peer, place string
}

// newRequester returns a requester for a link of kind over tr and the
// context of its life, to pass to connect and supervise.
func (sw *Switch) newRequester(tr transport.Transport, kind linkRequest, hello string, key []byte, t requestTimes) (*requester, context.Context) {
	life, cancel := context.WithCancel(context.Background())
	return &requester{sw: sw, tr: tr, kind: kind, hello: hello, key: key, cfg: t,
		cancel: cancel, quit: life.Done(), done: make(chan struct{}), halt: make(chan struct{})}, life
}

// stop ends re-establishment: the link, if up, stays up until cancel or
// its end, and is then not re-established; an attempt that completes
// afterwards is closed, not recorded. Idempotent.
func (q *requester) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !chanClosed(q.halt) {
		close(q.halt)
	}
}

// ending reports whether the link is not to be re-established: stop or
// cancel was called.
func (q *requester) ending() bool {
	return chanClosed(q.halt) || chanClosed(q.quit)
}

// connect establishes the link to addr once: dial, handshake (and the
// shared-key challenge), request, accept, then the exchange of interest.
// ctx bounds the attempt (with the handshake timeout), life is the
// requester's: its end aborts the attempt, and it is the parent of the
// link's context, returned with the router.
func (q *requester) connect(ctx, life context.Context, addr string) (*router, context.Context, error) {
	ctx, cancel := context.WithTimeout(ctx, q.cfg.handshake)
	defer cancel()
	stop := context.AfterFunc(life, cancel)
	defer stop()
	fail := func(err error) (*router, context.Context, error) {
		return nil, nil, fmt.Errorf("sion: %s: %w", q.kind.describe(addr), err)
	}
	conn, err := q.tr.Dial(ctx, addr)
	if err != nil {
		return fail(err)
	}
	lim := wire.DefaultLimits()
	lim.MaxFrameBytes = conn.MaxFrameBytes()
	a, err := q.handshake(ctx, conn, lim)
	if err != nil {
		conn.Close()
		return fail(err)
	}
	sess, isParent, end, err := q.kind.accepted(a)
	if err != nil {
		conn.Close()
		return fail(err)
	}
	r, linkCtx := q.sw.newRouter(life, conn, a.peer, isParent, sess, end)
	r.start(linkCtx)
	if err := r.awaitUp(ctx); err != nil {
		r.close()
		<-r.finished
		return fail(err)
	}
	q.mu.Lock()
	if chanClosed(q.halt) {
		q.mu.Unlock()
		r.close()
		<-r.finished
		return fail(fmt.Errorf("%w: the link is being closed", ErrClosed))
	}
	q.cur = r
	q.ups++
	q.mu.Unlock()
	q.kind.up(r, addr)
	return r, linkCtx, nil
}

// current returns the link's router while it is up, else nil.
func (q *requester) current() *router {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.cur
}

// state returns the link's state — LinkClosed when closed (the
// requester's Close, or its kind ended it for good) — and its last
// failure (nil if it never failed).
func (q *requester) state(closed bool) (LinkState, error) {
	r, st, err := q.link(closed)
	if r != nil {
		st = *r.state.Load()
	}
	return st, err
}

// link returns, read at once, the router the requester holds — the
// link's since it came up, until its end is recorded (failed); nil when
// closed or down —, else the state — LinkClosed or LinkDown —, and the
// last failure. A caller that describes the link describes that router,
// by its own state (LinkDown once it has begun to shut down), or none.
func (q *requester) link(closed bool) (*router, LinkState, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case closed || chanClosed(q.quit):
		return nil, LinkClosed, q.err
	case q.cur != nil:
		return q.cur, LinkUp, q.err
	}
	return nil, LinkDown, q.err
}

// establishments returns how many times the link has come up.
func (q *requester) establishments() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ups
}

// failed records the failure of the link or of an attempt to make it.
func (q *requester) failed(err error) {
	q.mu.Lock()
	q.cur, q.err = nil, err
	q.mu.Unlock()
}

// handshake opens the router's session on the peer and makes the request.
func (q *requester) handshake(ctx context.Context, conn transport.Conn, lim wire.Limits) (linkAccept, error) {
	w, err := clientHandshake(ctx, conn, lim, &wire.Hello{Version: protocolVersion, Session: q.hello}, q.key)
	if err != nil {
		return linkAccept{}, err
	}
	req, err := q.kind.request(conn, w)
	if err != nil {
		return linkAccept{}, err
	}
	a, err := requestLink(ctx, conn, lim, req)
	if err != nil {
		return linkAccept{}, err
	}
	return linkAccept{peer: a.Switch, place: a.Place}, nil
}

// requestLink sends request req on conn and returns the peer's accept;
// a refusal (an Error frame) is the error it carries.
func requestLink(ctx context.Context, conn transport.Conn, lim wire.Limits, req linkctl.Message) (*linkctl.LinkAccept, error) {
	f, err := linkctl.Encode(req, lim)
	if err != nil {
		return nil, err
	}
	reply, err := exchangeFrame(ctx, conn, lim, f)
	if err != nil {
		return nil, err
	}
	c, ok := reply.(*wire.Control)
	if !ok {
		return nil, fmt.Errorf("%w: the switch answered the %v with a %v frame", ErrProtocol, req.Kind(), reply.Kind())
	}
	m, err := linkctl.Decode(c)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	a, ok := m.(*linkctl.LinkAccept)
	if !ok {
		return nil, fmt.Errorf("%w: the switch answered the %v with a %v", ErrProtocol, req.Kind(), m.Kind())
	}
	if err := checkEndNames(a); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return a, nil
}

// supervise keeps the link up until the requester's life ends, stop is
// called or its kind says not to re-establish it: when r ends it tries
// the addresses the kind gives, in rounds with a growing wait between
// them. A link that ends after stop (the peer closing it on a Leave, say)
// is not the kind's to judge: it ended for good. It closes done when it
// returns.
func (q *requester) supervise(life, linkCtx context.Context, r *router) {
	defer close(q.done)
	for {
		q.kind.watch(life, linkCtx, r)
		err := r.linkErr()
		q.failed(err)
		if q.ending() {
			return
		}
		first, again := q.kind.down(r, err)
		if life.Err() != nil || !again {
			return
		}
		wait := q.cfg.retryMin
		for r = nil; r == nil; {
			addrs := first
			if len(addrs) == 0 {
				addrs = q.kind.candidates()
			}
			first = nil
			for _, addr := range addrs {
				if q.ending() {
					return
				}
				var err error
				if r, linkCtx, err = q.connect(life, life, addr); err == nil {
					break
				}
				q.failed(err)
				if q.ending() {
					return
				}
			}
			if r != nil {
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-q.quit:
				t.Stop()
				return
			case <-q.halt:
				t.Stop()
				return
			}
			wait = min(2*wait, q.cfg.retryMax)
		}
	}
}

// awaitEnd returns when r has ended; when ctx ends first, it closes r and
// waits for it.
func awaitEnd(ctx context.Context, r *router) {
	select {
	case <-r.finished:
	case <-ctx.Done():
		r.close()
		<-r.finished
	}
}

package sion

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
)

// LinkConfig configures a shared link that a switch requests (Switch.Link;
// S1 shared link, release and re-establishment). The zero value means the
// defaults.
type LinkConfig struct {
	// RetryMin and RetryMax bound the wait between rounds of attempts to
	// re-establish the link after it fails; it doubles from RetryMin up
	// to RetryMax. Defaults 50 ms and 2 s.
	RetryMin, RetryMax time.Duration
	// HandshakeTimeout bounds each attempt to establish the link (dial,
	// admission, request, filter exchange); default 10 s.
	HandshakeTimeout time.Duration
	// ProbeHops is how far, in links toward the root, the switch probes
	// for alternative parents each time the link comes up and every
	// ProbeInterval (S1 n-hop probe); when the parent fails it tries them,
	// nearest first, after the parent itself. Default 3; 0 takes the
	// default, a negative value disables probing.
	ProbeHops int
	// ProbeInterval is how often the probe is repeated while the link is
	// up; default 10 s.
	ProbeInterval time.Duration
	// Merge allows a link to a switch of another event place (S1
	// combination of places): events then spread over both places, whose
	// switches must know the same event types. Without it, a request to
	// another place is refused.
	Merge bool
}

// LinkState is the state of a shared link (S1 shared-link control).
type LinkState int

const (
	// LinkConnecting: the link is being established, or its initial
	// filters are being exchanged.
	LinkConnecting LinkState = iota
	// LinkUp: both switches have installed each other's filters.
	LinkUp
	// LinkDown: the link failed or closed; a link the switch requested is
	// being re-established.
	LinkDown
	// LinkClosed: a requested link that is not re-established any more:
	// SharedLink.Close or Switch.Close ran, or its parent left (Leave)
	// and made this switch a root.
	LinkClosed
)

// String returns the state's name.
func (s LinkState) String() string {
	switch s {
	case LinkConnecting:
		return "connecting"
	case LinkUp:
		return "up"
	case LinkDown:
		return "down"
	case LinkClosed:
		return "closed"
	}
	return fmt.Sprintf("LinkState(%d)", int(s))
}

// SharedLink is the link a switch requested to its parent (S1 shared
// link; see Switch.Link). It re-establishes itself when it fails, until
// Close. A SharedLink is safe for concurrent use.
type SharedLink struct {
	sw     *Switch
	tr     transport.Transport
	addr   string
	cfg    LinkConfig
	id     int64 // the same for every re-establishment: the peer replaces a stale link
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the supervisor returns

	mu       sync.Mutex
	cur      *router       // mu; nil while down
	ups      int           // mu; establishments
	err      error         // mu; the last failure
	alts     []ProbeResult // mu; ancestors found by the last probe, nearest first
	next     string        // mu; where the parent told it to re-link (Leave)
	release  bool          // mu; the parent left and made this switch a root
	upSignal chan struct{} // mu; closed (and replaced) each time the link comes up
	peerName string        // mu; the parent's name when the link was last up
}

// Link makes this switch's shared-link establishment request (S1) to the
// switch serving at addr over tr (see Switch.Serve), and returns once the
// link is up: each side has installed the other's proxy filters, so an
// event published afterwards on either side reaches the matching
// subscribers of the other. The peer becomes this switch's parent.
//
// Tree rule (S1): a switch makes at most one establishment request and
// accepts any number, so the links of a place form a tree. A second Link
// while the first is open returns an error wrapping ErrLinkRefused, as
// does a peer that refuses (another place, the same name, a requester
// that is one of the peer's ancestors — the acceptor probes them, so no
// loop of any length forms —, a second request from one switch). An
// admission refusal wraps ErrNotAdmitted.
//
// When the link fails later (the connection ends, the peer dies), the
// switch re-establishes it in the background, waiting between attempts as
// cfg says; both sides then re-send their filters, so nothing subscribed
// or cancelled meanwhile is lost or left stale. Events published while it
// is down do not cross it. Close ends it; Switch.Close does too.
func (sw *Switch) Link(ctx context.Context, tr transport.Transport, addr string, cfg LinkConfig) (*SharedLink, error) {
	switch {
	case tr == nil:
		return nil, fmt.Errorf("%w: Link with a nil transport", ErrInvalidConfig)
	case cfg.RetryMin < 0 || cfg.RetryMax < 0 || cfg.HandshakeTimeout < 0 || cfg.ProbeInterval < 0:
		return nil, fmt.Errorf("%w: LinkConfig durations must not be negative (%+v)", ErrInvalidConfig, cfg)
	case cfg.RetryMax != 0 && cfg.RetryMin > cfg.RetryMax:
		return nil, fmt.Errorf("%w: LinkConfig.RetryMin %v exceeds RetryMax %v", ErrInvalidConfig, cfg.RetryMin, cfg.RetryMax)
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.ProbeHops == 0 {
		cfg.ProbeHops = 3
	}
	if cfg.ProbeInterval == 0 {
		cfg.ProbeInterval = 10 * time.Second
	}
	if cfg.RetryMin == 0 {
		cfg.RetryMin = 50 * time.Millisecond
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = 2 * time.Second
	}
	cfg.RetryMax = max(cfg.RetryMax, cfg.RetryMin)
	var idb [4]byte
	rand.Read(idb[:])
	sl := &SharedLink{sw: sw, tr: tr, addr: addr, cfg: cfg, id: int64(binary.BigEndian.Uint32(idb[:]) >> 1), done: make(chan struct{}), upSignal: make(chan struct{})}
	sl.ctx, sl.cancel = context.WithCancel(context.Background())
	sw.mu.Lock()
	switch {
	case sw.closed:
		sw.mu.Unlock()
		return nil, fmt.Errorf("%w: switch %q", ErrClosed, sw.cfg.Name)
	case sw.parent != nil:
		sw.mu.Unlock()
		return nil, fmt.Errorf("%w: switch %q already has a parent link to %s; a switch makes at most one establishment request (S1 tree rule)", ErrLinkRefused, sw.cfg.Name, sw.parent.addr)
	}
	sw.parent = sl
	sw.left = false
	sw.mu.Unlock()
	var r *router
	defer func() { // undo the registration even if the transport panics
		if r == nil && sl.done != nil {
			select {
			case <-sl.done:
			default:
				sw.mu.Lock()
				if sw.parent == sl {
					sw.parent = nil
				}
				sw.mu.Unlock()
				sl.cancel()
				close(sl.done)
			}
		}
	}()
	r, err := sl.connectTo(ctx, addr)
	sw.mu.Lock()
	if sw.closed && (err == nil || sl.ctx.Err() != nil) { // Close ran meanwhile and waits on sl.done
		err = fmt.Errorf("%w: switch %q closed while it linked: %v", ErrClosed, sw.cfg.Name, err)
	}
	if err != nil {
		if sw.parent == sl {
			sw.parent = nil
		}
		sw.mu.Unlock()
		if r != nil {
			r.close()
			<-r.finished
		}
		r = nil
		sl.cancel()
		close(sl.done) // a Close waiting on it returns
		return nil, err
	}
	sw.linkers.Add(1)
	sw.mu.Unlock()
	go func() {
		defer sw.linkers.Done()
		sl.supervise(r)
	}()
	return sl, nil
}

// connectTo establishes the link to addr once: hello (and the shared-key
// challenge), link request, accept, then the exchange of filters.
func (sl *SharedLink) connectTo(ctx context.Context, addr string) (*router, error) {
	sw := sl.sw
	ctx, cancel := context.WithTimeout(ctx, sl.cfg.HandshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(sl.ctx, cancel)
	defer stop()
	conn, err := sl.tr.Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("sion: link from %q to %s: %w", sw.cfg.Name, addr, err)
	}
	lim := wire.DefaultLimits()
	lim.MaxFrameBytes = conn.MaxFrameBytes()
	fail := func(err error) (*router, error) {
		conn.Close()
		return nil, fmt.Errorf("sion: link from %q to %s: %w", sw.cfg.Name, addr, err)
	}
	if _, err := clientHandshake(ctx, conn, lim, &wire.Hello{Version: protocolVersion, Session: sw.cfg.Name}, sw.place.cfg.SharedKey); err != nil {
		return fail(err)
	}
	reply, err := exchange(ctx, conn, lim, &wire.Forward{Event: wire.Event{Type: typeLinkRequest, Attrs: []ontology.Attr{
		{Name: "addr", Value: ontology.String(sw.addrFor(conn))},
		{Name: "link", Value: ontology.Int(sl.id)},
		{Name: "merge", Value: ontology.Bool(sl.cfg.Merge)},
		{Name: "place", Value: ontology.String(sw.place.Name())},
		{Name: "switch", Value: ontology.String(sw.cfg.Name)},
	}}})
	if err != nil {
		return fail(err)
	}
	fw, ok := reply.(*wire.Forward)
	if !ok || fw.Event.Type != typeLinkAccept {
		return fail(fmt.Errorf("%w: the switch answered the link request with a %v frame", ErrProtocol, reply.Kind()))
	}
	peer, err := controlAttrs(fw.Event.Attrs).str("switch")
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	// The router's session on this switch: the peer's proxy filters.
	sess, err := sw.openRouterSession(peer)
	if err != nil {
		return fail(err)
	}
	r := sw.newRouter(sl.ctx, conn, peer, true, sess)
	r.start()
	if err := r.awaitUp(ctx); err != nil {
		r.close()
		<-r.finished
		return nil, fmt.Errorf("sion: link from %q to %q: %w", sw.cfg.Name, peer, err)
	}
	sl.mu.Lock()
	sl.cur, sl.peerName = r, peer
	close(sl.upSignal)
	sl.upSignal = make(chan struct{})
	sl.ups++
	if addr != sl.addr {
		sw.log.Info("sion: re-linked to another parent", "switch", sw.cfg.Name, "parent", peer, "addr", addr, "was", sl.addr)
		sl.addr = addr
	}
	sl.mu.Unlock()
	sw.log.Info("sion: shared link up", "switch", sw.cfg.Name, "parent", peer, "addr", addr)
	return r, nil
}

// supervise keeps the link up until Close: it probes for alternative
// parents while the link is up, and when the link fails it tries the
// parent again and then the alternatives, nearest first, in rounds with a
// growing wait between them (S1 failure and n-hop probe). A Leave of the
// parent moves it to the address the parent gave, or ends it.
func (sl *SharedLink) supervise(r *router) {
	sw := sl.sw
	defer close(sl.done)
	defer func() {
		sw.mu.Lock()
		if sw.parent == sl && sl.released() {
			sw.parent = nil
		}
		sw.mu.Unlock()
	}()
	for {
		sl.watch(r)
		err := r.linkErr()
		sl.mu.Lock()
		sl.cur, sl.err = nil, err
		next, release := sl.next, sl.release
		sl.next = ""
		if next != "" { // the leaving parent named the new one: retries go there too
			sl.addr = next
		}
		sl.mu.Unlock()
		if sl.ctx.Err() != nil {
			return
		}
		if release {
			sw.log.Info("sion: parent left; this switch is a root now", "switch", sw.cfg.Name, "was", r.peer)
			return
		}
		var candidates []string
		if next != "" {
			sw.log.Info("sion: parent left; re-linking where it said", "switch", sw.cfg.Name, "was", r.peer, "addr", next)
			candidates = []string{next}
		} else {
			sw.log.Warn("sion: shared link down, re-establishing", "switch", sw.cfg.Name, "parent", r.peer, "err", err)
		}
		wait := sl.cfg.RetryMin
		for r = nil; r == nil; {
			if len(candidates) == 0 {
				candidates = sl.candidates()
			}
			for _, addr := range candidates {
				var err error
				if r, err = sl.connectTo(sl.ctx, addr); err == nil {
					break
				}
				sl.mu.Lock()
				sl.err = err
				sl.mu.Unlock()
				if sl.ctx.Err() != nil {
					return
				}
			}
			candidates = nil
			if r != nil {
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-sl.ctx.Done():
				t.Stop()
				return
			}
			wait = min(2*wait, sl.cfg.RetryMax)
		}
	}
}

// watch probes for alternative parents now and every ProbeInterval until
// r ends, or Close.
func (sl *SharedLink) watch(r *router) {
	tick := time.NewTicker(sl.cfg.ProbeInterval)
	defer tick.Stop()
	for {
		if sl.cfg.ProbeHops > 0 {
			ctx, cancel := context.WithTimeout(r.ctx, sl.cfg.HandshakeTimeout) // ends with the link
			found, err := sl.sw.Probe(ctx, sl.cfg.ProbeHops, TowardParents)
			cancel()
			if err == nil {
				sl.mu.Lock()
				sl.alts = slices.DeleteFunc(found, func(p ProbeResult) bool { return p.Addr == "" || p.Switch == r.peer })
				sl.mu.Unlock()
			}
		}
		select {
		case <-r.finished:
			return
		case <-sl.ctx.Done():
			r.close()
			<-r.finished
			return
		case <-tick.C:
		}
	}
}

// candidates returns the addresses to try, in order: the parent, then the
// alternatives found by the last probe.
func (sl *SharedLink) candidates() []string {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	out := []string{sl.addr}
	for _, a := range sl.alts {
		if !slices.Contains(out, a.Addr) {
			out = append(out, a.Addr)
		}
	}
	return out
}

// moveTo ends the current link because the parent leaves: the supervisor
// re-links to addr, or, for "", makes this switch a root.
func (sl *SharedLink) moveTo(addr string) {
	sl.mu.Lock()
	if addr == "" {
		sl.release = true
		close(sl.upSignal) // waitUp returns: the link will not come up
		sl.upSignal = make(chan struct{})
	} else {
		sl.next = addr
	}
	cur := sl.cur
	sl.mu.Unlock()
	if cur != nil {
		cur.close()
	}
}

func (sl *SharedLink) released() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.release
}

// target returns the parent's address while the link is up, else "".
func (sl *SharedLink) target() string {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.cur == nil {
		return ""
	}
	return sl.addr
}

// Alternatives returns the switches the last probe found that the link
// would try, after its parent, should the parent fail: its ancestors
// within LinkConfig.ProbeHops, nearest first.
func (sl *SharedLink) Alternatives() []ProbeResult {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return slices.Clone(sl.alts)
}

// Parent returns the address of the switch the link goes to now (it
// changes when the link re-forms at an alternative or a leaving parent
// sends it elsewhere).
func (sl *SharedLink) Parent() string {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.addr
}

// Close ends the link and stops re-establishing it; the switch may then
// make another establishment request. It waits for the link's goroutines
// and is idempotent.
func (sl *SharedLink) Close() error {
	sl.cancel()
	<-sl.done
	sl.sw.mu.Lock()
	if sl.sw.parent == sl {
		sl.sw.parent = nil
	}
	sl.sw.mu.Unlock()
	return nil
}

// State returns the link's state now, and the error of its last failure
// (nil if it never failed). Safe for concurrent use, like every method of
// SharedLink.
func (sl *SharedLink) State() (LinkState, error) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	switch {
	case sl.release || sl.ctx.Err() != nil:
		return LinkClosed, sl.err
	case sl.cur != nil:
		return *sl.cur.state.Load(), sl.err
	}
	return LinkDown, sl.err
}

// Establishments returns how many times the link has come up: 1 after
// Link, one more for each re-establishment.
func (sl *SharedLink) Establishments() int {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.ups
}

// openRouterSession opens the session a router holds on this switch. Its
// sink is the router, which newRouter sets.
func (sw *Switch) openRouterSession(peer string) (*Session, error) {
	s := newSession(sw, sw, sw.nextSession.Add(1), "router:"+peer, []ontology.Attr{}, newSpool(1, 0), nil)
	if err := sw.addSession(s); err != nil {
		return nil, err
	}
	return s, nil
}

// acceptLink serves a shared-link establishment request that arrived on a
// connection Serve accepted, as the first request of session sess: it
// checks the request, answers, and runs the link until it ends.
func (sw *Switch) acceptLink(ctx context.Context, conn transport.Conn, sess *Session, req *wire.Event) {
	c := controlAttrs(req.Attrs)
	refuse := func(code uint16, err error) {
		sw.log.Warn("sion: shared link refused", "switch", sw.cfg.Name, "remote", conn.RemoteAddr(), "err", err) // before the count: who sees the count sees the record
		sw.refused.Add(1)
		if f, e := wire.Encode(nil, &wire.Error{Code: code, Message: err.Error()}); e == nil {
			sctx, cancel := context.WithTimeout(ctx, DefaultHandshakeTimeout)
			conn.Send(sctx, f)
			cancel()
		}
	}
	peer, err1 := c.str("switch")
	place, err2 := c.str("place")
	id, err3 := c.int("link")
	if err := errors.Join(err1, err2, err3); err != nil {
		refuse(codeProtocol, fmt.Errorf("%w: link request: %w", ErrProtocol, err))
		return
	}
	addr, _ := c.str("addr")     // where the requester serves, "" if nowhere
	absorb, _ := c.str("absorb") // an absorb request: link to this address
	merge, _ := c.get("merge", ontology.KindBool)
	sw.mu.RLock()
	left := sw.left
	sw.mu.RUnlock()
	switch {
	case left && absorb == "":
		refuse(codeLinkRefused, fmt.Errorf("%w: switch %q has left place %q (suspended)", ErrLinkRefused, sw.cfg.Name, sw.place.Name()))
		return
	case place != sw.place.Name() && !(merge.IsValid() && merge.Bool()):
		refuse(codeLinkRefused, fmt.Errorf("%w: switch %q is in place %q, the request came from place %q (LinkConfig.Merge combines places)", ErrLinkRefused, sw.cfg.Name, sw.place.Name(), place))
		return
	case peer == sw.cfg.Name:
		refuse(codeLinkRefused, fmt.Errorf("%w: the requesting switch has this switch's name %q", ErrLinkRefused, peer))
		return
	}
	if admit := sw.place.cfg.Admit; admit != nil {
		req := AdmissionRequest{Place: sw.place.Name(), Switch: sw.cfg.Name, Session: peer, Link: true, Remote: conn.RemoteAddr(), TLS: tlsState(conn)}
		if err := admit(ctx, req); err != nil {
			refuse(codeNotAdmitted, fmt.Errorf("%w: shared link from switch %q in place %q: %w", ErrNotAdmitted, peer, place, err))
			return
		}
	}
	if absorb != "" {
		if err := sw.absorbed(ctx, conn, peer, absorb); err != nil {
			code := errorCode(err)
			if code == codeInternal {
				code = codeLinkRefused
			}
			refuse(code, fmt.Errorf("absorb into %q: %w", peer, err))
		}
		return
	}
	// Tree rule: one request per switch; a request of the same link
	// (re-established after a failure this side has not noticed yet)
	// replaces the stale one.
	sw.mu.Lock()
	if sw.parent != nil && sw.parent.peer() == peer {
		sw.mu.Unlock()
		refuse(codeLinkRefused, fmt.Errorf("%w: switch %q is the parent of %q; linking back would close a loop (S1 tree rule)", ErrLinkRefused, peer, sw.cfg.Name))
		return
	}
	stale := sw.children[peer]
	parent := sw.parent
	sw.mu.Unlock()
	if parent != nil {
		// This switch's own link must be up first: two switches asking
		// each other at once would otherwise both accept and close a
		// loop. Wait for it a while; refuse (retry later) if it does not
		// come up.
		wctx, cancel := context.WithTimeout(ctx, linkWait)
		up := parent.waitUp(wctx)
		cancel()
		sw.mu.RLock()
		still := sw.parent == parent
		sw.mu.RUnlock()
		if !up && still && !parent.released() {
			refuse(codeLinkRefused, fmt.Errorf("%w: switch %q is establishing its own shared link; retry", ErrLinkRefused, sw.cfg.Name))
			return
		}
		if !up {
			parent = nil // it became a root meanwhile
		}
	}
	if parent != nil {
		// A requester among this switch's ancestors would close a loop:
		// ask them (an n-hop probe toward the parents, S1).
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		ancestors, complete := sw.probe(pctx, sw.place.cfg.TTL, TowardParents, 0)
		cancel()
		for _, a := range ancestors {
			if a.Switch == peer {
				refuse(codeLinkRefused, fmt.Errorf("%w: switch %q is an ancestor of %q (%d links up); linking would close a loop (S1 tree rule)", ErrLinkRefused, peer, sw.cfg.Name, a.Hops))
				return
			}
		}
		if !complete {
			refuse(codeLinkRefused, fmt.Errorf("%w: switch %q could not check that the link would not close a loop: its ancestors did not all answer within %v, or one of them is still linking; retry", ErrLinkRefused, sw.cfg.Name, probeTimeout))
			return
		}
	}
	if stale != nil && stale.id != id && stale.alive(ctx) {
		refuse(codeLinkRefused, fmt.Errorf("%w: switch %q has a shared link to %q already; a switch makes at most one establishment request (S1 tree rule)", ErrLinkRefused, peer, sw.cfg.Name))
		return
	}
	if stale != nil {
		stale.r.close()
		<-stale.r.finished
	}
	sess.mu.Lock()
	noSubs := len(sess.subs) == 0
	sess.mu.Unlock()
	if !noSubs {
		refuse(codeProtocol, fmt.Errorf("%w: a link request must be the session's first request", ErrProtocol))
		return
	}
	r := sw.newRouter(ctx, conn, peer, false, sess)
	r.sendControl(typeLinkAccept,
		ontology.Attr{Name: "place", Value: ontology.String(sw.place.Name())},
		ontology.Attr{Name: "switch", Value: ontology.String(sw.cfg.Name)})
	child := &childLink{id: id, r: r, addr: addr}
	sw.mu.Lock()
	if sw.closed {
		sw.mu.Unlock()
		r.close()
		return
	}
	sw.children[peer] = child
	sw.mu.Unlock()
	r.start()
	sw.log.Info("sion: shared link accepted", "switch", sw.cfg.Name, "child", peer, "remote", conn.RemoteAddr())
	<-r.finished
	sw.mu.Lock()
	if sw.children[peer] == child {
		delete(sw.children, peer)
	}
	sw.mu.Unlock()
}

// childLink is a link another switch requested to this one.
type childLink struct {
	id   int64
	r    *router
	addr string // where the child serves link requests, "" if nowhere
}

// probeTimeout bounds the wait for a link to answer a probe marker, and
// for the ancestors to answer the loop check; linkWait how long a link
// request waits for the acceptor's own link to come up.
const (
	probeTimeout = 2 * time.Second
	linkWait     = 2 * time.Second
)

// waitUp waits until the link is up (true), or it ends for good or ctx
// ends (false).
func (sl *SharedLink) waitUp(ctx context.Context) bool {
	for {
		sl.mu.Lock()
		up, released, ch := sl.cur != nil, sl.release, sl.upSignal
		sl.mu.Unlock()
		if up {
			return true
		}
		if released {
			return false
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		case <-sl.ctx.Done():
			return false
		}
	}
}

// alive reports whether the link still answers: a second request from
// its switch is then refused (tree rule); a link that has ended or stays
// silent for probeTimeout is stale — its switch restarted — and the new
// request replaces it.
func (c *childLink) alive(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	a := c.r.marker(0, 0)
	select {
	case <-a.done:
		return a.ok
	case <-ctx.Done():
		return false
	}
}

// peer returns the name of the parent switch, or "" while down. mu of its
// switch may be held.
func (sl *SharedLink) peer() string {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.cur == nil {
		return ""
	}
	return sl.cur.peer
}

// LinkInfo describes one shared link of a switch (see Switch.Links): a
// snapshot of its router's counters (S1 SI-R).
type LinkInfo struct {
	// Peer is the other switch's name (for a requested link that has
	// never been up, the address it goes to); Parent reports whether it is
	// this switch's parent (this switch requested the link).
	Peer   string
	Parent bool
	State  LinkState
	// Since is when the link came up (zero while it is not up).
	Since time.Time
	// EventsSent and EventsReceived count the data events that crossed
	// the link; ControlSent and ControlReceived the control events (filter
	// registers and releases, markers, acknowledgements, the handshake's
	// request and accept).
	EventsSent, EventsReceived, ControlSent, ControlReceived uint64
	// Dropped counts events not forwarded because the link's queue was
	// full or the event did not fit a frame; Expired those not forwarded
	// because their TTL was spent; Duplicates the events received that
	// the switch had seen already; Refused those received that the place
	// refused (logged).
	Dropped, Expired, Duplicates, Refused uint64
	// Routes is the number of keys this switch has registered at the
	// peer; Proxies the number of the peer's keys installed here.
	Routes, Proxies int
}

// Links returns the switch's shared links that are connected or
// connecting, and its requested link while it is down, sorted by peer.
// Safe for concurrent use.
func (sw *Switch) Links() []LinkInfo {
	sw.routeMu.Lock()
	routers := slices.Clone(sw.routers)
	sw.routeMu.Unlock()
	var out []LinkInfo
	parentUp := false
	for _, r := range routers {
		if r.gw != nil {
			continue // see Gateways
		}
		r.mu.Lock()
		li := LinkInfo{
			Peer: r.peer, Parent: r.parent, State: *r.state.Load(), Since: r.upAt,
			EventsSent: r.eventsSent.Load(), EventsReceived: r.eventsRecv.Load(),
			ControlSent: r.ctlSent.Load(), ControlReceived: r.ctlRecv.Load(),
			Dropped: r.dropped.Load(), Expired: r.expired.Load(), Duplicates: r.duplicates.Load(), Refused: r.refused.Load(),
			Routes: len(r.routes), Proxies: r.sess.numSubs(),
		}
		r.mu.Unlock()
		parentUp = parentUp || r.parent
		out = append(out, li)
	}
	sw.mu.RLock()
	parent := sw.parent
	sw.mu.RUnlock()
	if parent != nil && !parentUp {
		st, _ := parent.State()
		parent.mu.Lock()
		peer := cmp.Or(parent.peerName, parent.addr)
		parent.mu.Unlock()
		out = append(out, LinkInfo{Peer: peer, Parent: true, State: st})
	}
	slices.SortFunc(out, func(a, b LinkInfo) int { return cmp.Compare(a.Peer, b.Peer) })
	return out
}

// RouteInfo is one key a switch has propagated over a shared link (see
// Switch.Routes): S1's event path with its reference count, and whether
// the S2 acknowledgement has arrived.
type RouteInfo struct {
	// Peer is the switch the key is registered at.
	Peer string
	// Filter is the proxy filter's text: a subscription's filter (routing
	// by filter), its event type's filter (by event type), or {} (flood).
	Filter string
	// TTL is how many links further the peer propagates it.
	TTL int
	// Refs is the number of this switch's subscriptions (its own and the
	// proxies of its other links) that need it.
	Refs int
	// Acknowledged reports whether the peer has acknowledged it (S2).
	Acknowledged bool
	// Places lists, for interest that came from other places through
	// gateways, the places it came through, this one last; nil for this
	// place's own interest.
	Places []string
	// Gateway names the gateway the key is registered over; "" for a
	// shared link. Over a gateway, Filter is in the other place's
	// ontology (converted by the gateway's Mapping).
	Gateway string
}

// Routes returns the keys the switch has propagated over its shared links
// with their reference counts, sorted by peer and filter. Safe for
// concurrent use.
func (sw *Switch) Routes() []RouteInfo {
	sw.routeMu.Lock()
	routers := slices.Clone(sw.routers)
	sw.routeMu.Unlock()
	var out []RouteInfo
	for _, r := range routers {
		r.mu.Lock()
		for k, rt := range r.routes {
			text, places := splitRouteKey(k)
			ri := RouteInfo{Peer: r.peer, Filter: text, Places: places, TTL: rt.sent, Refs: rt.refs, Acknowledged: rt.last.ok}
			if r.gw != nil {
				ri.Gateway = r.gw.name
			}
			out = append(out, ri)
		}
		r.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b RouteInfo) int {
		return cmp.Or(cmp.Compare(a.Gateway, b.Gateway), cmp.Compare(a.Peer, b.Peer), cmp.Compare(a.Filter, b.Filter), slices.Compare(a.Places, b.Places), cmp.Compare(a.TTL, b.TTL))
	})
	return out
}

package sion

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
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

// SharedLink is the link a switch requested to its parent (S1 shared
// link; see Switch.Link). It re-establishes itself when it fails, until
// Close. A SharedLink is safe for concurrent use.
type SharedLink struct {
	sw  *Switch
	cfg LinkConfig
	id  int64 // the same for every re-establishment: the peer replaces a stale link
	q   *requester

	mu       sync.Mutex
	addr     string        // mu; where the link goes (the parent's address)
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
	if why := sw.front.linking(); why != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, why)
	}
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
	sl := &SharedLink{sw: sw, addr: addr, cfg: cfg, id: randomLinkID(), upSignal: make(chan struct{})}
	q, life := sw.newRequester(tr, sl, sw.cfg.Name, sw.place.cfg.SharedKey, requestTimes{cfg.HandshakeTimeout, cfg.RetryMin, cfg.RetryMax})
	sl.q = q
	sw.mu.Lock()
	switch {
	case sw.closed:
		sw.mu.Unlock()
		q.cancel()
		return nil, fmt.Errorf("%w: switch %q", ErrClosed, sw.cfg.Name)
	case sw.parent != nil:
		sw.mu.Unlock()
		q.cancel()
		return nil, fmt.Errorf("%w: switch %q already has a parent link to %s; a switch makes at most one establishment request (S1 tree rule)", ErrLinkRefused, sw.cfg.Name, sw.parent.Parent())
	}
	sw.parent = sl
	sw.left = false
	sw.mu.Unlock()
	var r *router
	defer func() { // undo the registration even if the transport panics
		if r == nil && !chanClosed(q.done) {
			sw.mu.Lock()
			if sw.parent == sl {
				sw.parent = nil
			}
			sw.mu.Unlock()
			q.cancel()
			close(q.done)
		}
	}()
	r, linkCtx, err := q.connect(ctx, life, addr)
	sw.mu.Lock()
	if sw.closed && (err == nil || life.Err() != nil) { // Close ran meanwhile and waits on q.done
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
		q.cancel()
		close(q.done) // a Close waiting on it returns
		return nil, err
	}
	sw.linkers.Add(1)
	sw.mu.Unlock()
	go func() {
		defer sw.linkers.Done()
		q.supervise(life, linkCtx, r)
	}()
	return sl, nil
}

// randomLinkID returns a random positive ID for a requested link: the
// same for each of its re-establishments, so that the peer tells a link
// coming back from a second one.
func randomLinkID() int64 {
	var b [4]byte
	rand.Read(b[:])
	return int64(binary.BigEndian.Uint32(b[:]) >> 1)
}

// The shared link's part of its requester (linkRequest).

func (sl *SharedLink) describe(addr string) string {
	return fmt.Sprintf("link from %q to %s", sl.sw.cfg.Name, addr)
}

func (sl *SharedLink) request(conn transport.Conn, _ *wire.Welcome) (linkctl.Message, error) {
	sw := sl.sw
	return &linkctl.LinkRequest{Switch: sw.cfg.Name, Place: sw.place.Name(), Link: sl.id, Addr: sw.addrFor(conn), Merge: sl.cfg.Merge}, nil
}

// accepted opens the router's session on this switch (the peer's proxy
// filters); the peer is this switch's parent.
func (sl *SharedLink) accepted(a linkAccept) (*Session, bool, linkEnd, error) {
	sess, err := sl.sw.openRouterSession(a.peer)
	return sess, true, newSharedEnd(), err
}

func (sl *SharedLink) up(r *router, addr string) {
	sw := sl.sw
	sl.mu.Lock()
	sl.peerName = r.peer
	close(sl.upSignal)
	sl.upSignal = make(chan struct{})
	if addr != sl.addr {
		sw.log.Info("sion: re-linked to another parent", "switch", sw.cfg.Name, "parent", r.peer, "addr", addr, "was", sl.addr)
		sl.addr = addr
	}
	sl.mu.Unlock()
	sw.log.Info("sion: shared link up", "switch", sw.cfg.Name, "parent", r.peer, "addr", addr)
}

// watch probes for alternative parents now and every ProbeInterval until
// r ends, or Close (S1 n-hop probe).
func (sl *SharedLink) watch(ctx, linkCtx context.Context, r *router) {
	tick := time.NewTicker(sl.cfg.ProbeInterval)
	defer tick.Stop()
	for {
		if sl.cfg.ProbeHops > 0 {
			pctx, cancel := context.WithTimeout(linkCtx, sl.cfg.HandshakeTimeout) // ends with the link
			found, err := sl.sw.Probe(pctx, sl.cfg.ProbeHops, TowardParents)
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
		case <-ctx.Done():
			r.close()
			<-r.finished
			return
		case <-tick.C:
		}
	}
}

// down decides, once the link has failed, where it re-links: where a
// leaving parent said, or nowhere when the parent made this switch a
// root; else the candidates.
func (sl *SharedLink) down(r *router, err error) ([]string, bool) {
	sw := sl.sw
	sl.mu.Lock()
	next, release := sl.next, sl.release
	sl.next = ""
	if next != "" { // the leaving parent named the new one: retries go there too
		sl.addr = next
	}
	sl.mu.Unlock()
	switch {
	case chanClosed(sl.q.quit):
		return nil, false
	case release:
		sw.log.Info("sion: parent left; this switch is a root now", "switch", sw.cfg.Name, "was", r.peer)
		sw.mu.Lock()
		if sw.parent == sl {
			sw.parent = nil
		}
		sw.mu.Unlock()
		return nil, false
	case next != "":
		sw.log.Info("sion: parent left; re-linking where it said", "switch", sw.cfg.Name, "was", r.peer, "addr", next)
		return []string{next}, true
	}
	sw.log.Warn("sion: shared link down, re-establishing", "switch", sw.cfg.Name, "parent", r.peer, "err", err)
	return nil, true
}

// candidates returns the addresses to try, in order: the parent, then the
// alternatives found by the last probe (S1 failure and n-hop probe).
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
	sl.mu.Unlock()
	if cur := sl.q.current(); cur != nil {
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
	if sl.q.current() == nil {
		return ""
	}
	return sl.Parent()
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
	sl.q.cancel()
	<-sl.q.done
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
func (sl *SharedLink) State() (LinkState, error) { return sl.q.state(sl.released()) }

// Establishments returns how many times the link has come up: 1 after
// Link, one more for each re-establishment.
func (sl *SharedLink) Establishments() int { return sl.q.establishments() }

// waitUp waits until the link is up (true), or it ends for good or ctx
// ends (false).
func (sl *SharedLink) waitUp(ctx context.Context) bool {
	for {
		sl.mu.Lock()
		released, ch := sl.release, sl.upSignal // before current: up sets cur, then replaces upSignal
		sl.mu.Unlock()
		if sl.q.current() != nil {
			return true
		}
		if released {
			return false
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		case <-sl.q.quit:
			return false
		}
	}
}

// peer returns the name of the parent switch, or "" while down. mu of its
// switch may be held.
func (sl *SharedLink) peer() string {
	if r := sl.q.current(); r != nil {
		return r.peer
	}
	return ""
}

package sion

import (
	"bytes"
	"container/list"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/sion-go/sion/transport/udp"
)

// probeVersion is the version of the probe protocol's datagrams.
const probeVersion = 1

// probeBytes is the size, in bytes, that a probe is padded to with
// trailing spaces (JSON whitespace, which decoders ignore): the datagram
// limit of the probe sockets, so that every answer that can be sent at
// all is no longer than the probe it answers (QUIC pads its Initial
// packets likewise, RFC 9000 section 14.1).
const probeBytes = udp.DefaultMaxDatagramBytes

// ProbeAnswersPerSecond and ProbeAnswerBurst limit the answers an entity
// sends to one source address (an IP address: all of its ports are one
// source) with a token bucket: a source that probes in a burst gets at
// most ProbeAnswerBurst answers at once, and ProbeAnswersPerSecond answers
// a second after that; the probes beyond are not answered
// (EntityStats.ThrottledProbes). A prober sends one probe per round (4 a
// second with DefaultProbeWait) until it is answered, a root one per
// CheckInterval, and several entities of one host probe from one address,
// often together. Sources with a loopback address are not limited: no
// other host can send from one (RFC 1122 section 3.2.1.3), and every
// entity of the host probes from it.
const (
	ProbeAnswersPerSecond = 4
	ProbeAnswerBurst      = 16
)

// discoveryLogInterval is how often, at most, each kind of log record
// about a datagram of the probe protocol (a refusal, junk) is written per
// source address; the record carries the number suppressed since the
// last one.
const discoveryLogInterval = 10 * time.Second

// maxDiscoverySources is how many source addresses the answer rate limit
// and the log limit each remember; when full, they forget the one used
// longest ago.
const maxDiscoverySources = 1024

// probeMsg is one datagram of the probe protocol (S1 discovery by
// broadcast): a probe from a Suspended (or lone) entity, broadcast to the
// discovery port, or an answer sent back to the prober's own socket.
type probeMsg struct {
	V     int    `json:"v"`
	Kind  string `json:"kind"` // "probe" or "answer"
	ID    uint64 `json:"id,string"`
	Name  string `json:"name"`
	Base  string `json:"base"`
	Nonce uint64 `json:"nonce,string"`
	// Probes only: only roots answer (an Active root looking for others).
	Roots bool `json:"roots,omitempty"`
	// Answers only.
	Active bool   `json:"active,omitempty"`
	Root   bool   `json:"root,omitempty"` // Active, and its base switch has no parent link
	Addr   string `json:"addr,omitempty"` // the base switch, reachable from the prober
}

// probeAnswer is an answer as the prober keeps it.
type probeAnswer struct {
	probeMsg
	from netip.AddrPort
}

func random64() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:])
}

// decodeProbe decodes one datagram of the probe protocol: a JSON object,
// possibly followed by padding (JSON whitespace). It returns an error for
// anything that is not a probe or answer of probeVersion with an ID.
func decodeProbe(b []byte) (probeMsg, error) {
	var m probeMsg
	if err := json.Unmarshal(b, &m); err != nil {
		return m, err
	}
	if m.V != probeVersion || (m.Kind != "probe" && m.Kind != "answer") || m.ID == 0 {
		return m, fmt.Errorf("not a version %d probe or answer", probeVersion)
	}
	return m, nil
}

// answerProbes answers the probes broadcast to the discovery port until
// the entity closes. It never sends more bytes than the probe had, nor
// more answers to one source than answerLimit lets through, so the port
// cannot be used to reflect traffic at another address (a probe's source
// address can be forged), let alone amplify it.
func (e *Entity) answerProbes(ctx context.Context) {
	defer e.wg.Done()
	var recent [64][2]uint64 // the probes answered last: (prober ID, nonce)
	next := 0
	for {
		b, from, err := e.answerConn.Recv(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			e.stats.badDatagrams.Add(1)
			e.logDatagram(slog.LevelDebug, "sion: discovery port", from, "err", err)
			continue
		}
		m, err := decodeProbe(b)
		if err != nil || m.Kind != "probe" {
			e.stats.badDatagrams.Add(1)
			e.logDatagram(slog.LevelDebug, "sion: not a probe on the discovery port", from, "err", err)
			continue
		}
		if m.ID == e.id {
			e.stats.ownProbes.Add(1)
			continue // its own broadcast: never answer, nor link to, itself
		}
		// Active members of the place the prober looks for answer with an
		// address; Suspended entities of the same base place answer too
		// (not to roots' probes), so that entities starting together can
		// elect who founds.
		st, place := e.State(), e.member(m.Base)
		if place == nil || (st != Active && (m.Base != e.cfg.BasePlace || m.Roots)) {
			continue
		}
		if slices.Contains(recent[:], [2]uint64{m.ID, m.Nonce}) {
			continue // answered already: the same probe over another interface (loopback and eth0 broadcasts both reach this host)
		}
		e.stats.probesReceived.Add(1)
		a := probeMsg{V: probeVersion, Kind: "answer", ID: e.id, Name: e.cfg.Name, Base: m.Base, Nonce: m.Nonce}
		if st == Active {
			a.Active, a.Root = true, place.requested() == nil
			a.Addr = e.reachableAddr(place.l.Addr().String(), from.Addr())
			if m.Roots && !a.Root {
				continue
			}
			if a.Addr == "" {
				e.logDatagram(slog.LevelDebug, "sion: no address reachable from the prober over this interface; not answering", from)
				continue
			}
		}
		out, _ := json.Marshal(a)
		if len(out) > len(b) {
			e.stats.shortProbes.Add(1)
			e.logDatagram(slog.LevelInfo, "sion: probe shorter than its answer (not padded); not answering", from, "probe_bytes", len(b), "answer_bytes", len(out))
			continue
		}
		if !from.Addr().IsLoopback() && !e.answerLimit.allow(from.Addr(), time.Now()) {
			e.stats.throttledProbes.Add(1)
			e.logDatagram(slog.LevelInfo, "sion: probes from this source over the answer rate; not answering", from, "answers_per_second", ProbeAnswersPerSecond, "burst", ProbeAnswerBurst)
			continue
		}
		if err := e.answerConn.Send(ctx, out, from); err != nil {
			e.logDatagram(slog.LevelDebug, "sion: probe answer not sent", from, "err", err)
			continue
		}
		recent[next%len(recent)], next = [2]uint64{m.ID, m.Nonce}, next+1
		e.stats.probeAnswersSent.Add(1)
	}
}

// logDatagram logs a record about a datagram from from, at level, at most
// once per discoveryLogInterval for each msg and source address, with the
// number of those records suppressed since the last one ("suppressed"),
// so that a flood of datagrams cannot flood the log. args follow "entity"
// and "from".
func (e *Entity) logDatagram(level slog.Level, msg string, from netip.AddrPort, args ...any) {
	e.logDatagramAt(time.Now(), level, msg, from, args...)
}

// logDatagramAt is logDatagram at now.
func (e *Entity) logDatagramAt(now time.Time, level slog.Level, msg string, from netip.AddrPort, args ...any) {
	if !e.log.Enabled(context.Background(), level) {
		return
	}
	ok, suppressed := e.logLimit.Allow(msg+"\x00"+from.Addr().String(), now)
	if !ok {
		return
	}
	ok, suppressedAll := e.logAll.Allow(now)
	if !ok {
		return
	}
	args = append([]any{"entity", e.cfg.Name, "from", from}, args...)
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	if suppressedAll > 0 {
		args = append(args, "suppressed_all_sources", suppressedAll)
	}
	e.log.Log(context.Background(), level, msg, args...)
}

// answerLimit is a token bucket per source address: each source may be
// sent ProbeAnswerBurst answers at once, and its bucket refills at
// ProbeAnswersPerSecond. It remembers at most max sources and forgets the
// one used longest ago when full (which then may have a full burst
// again). It is used by answerProbes alone, so it has no lock.
type answerLimit struct {
	rate, burst float64 // tokens per second; tokens
	max         int
	buckets     map[netip.Addr]*list.Element // of *answerBucket
	lru         *list.List                   // of *answerBucket, least recently used first
}

type answerBucket struct {
	src    netip.Addr
	tokens float64
	at     time.Time // when tokens was counted
}

func newAnswerLimit(perSecond, burst, max int) *answerLimit {
	return &answerLimit{rate: float64(perSecond), burst: float64(burst), max: max, buckets: map[netip.Addr]*list.Element{}, lru: list.New()}
}

// allow reports whether an answer may be sent to src at now, and takes
// its token if so.
func (l *answerLimit) allow(src netip.Addr, now time.Time) bool {
	el, ok := l.buckets[src]
	if !ok {
		if l.lru.Len() >= l.max {
			old := l.lru.Front()
			l.lru.Remove(old)
			delete(l.buckets, old.Value.(*answerBucket).src)
		}
		el = l.lru.PushBack(&answerBucket{src: src, tokens: l.burst, at: now})
		l.buckets[src] = el
	}
	l.lru.MoveToBack(el)
	b := el.Value.(*answerBucket)
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(l.burst, b.tokens+d.Seconds()*l.rate)
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// readProbeAnswers passes the answers to the entity's probes on to
// probeRound.
func (e *Entity) readProbeAnswers(ctx context.Context) {
	defer e.wg.Done()
	for {
		b, from, err := e.probeConn.Recv(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			e.stats.badDatagrams.Add(1)
			continue
		}
		m, err := decodeProbe(b)
		if err != nil || m.Kind != "answer" || m.Base != e.cfg.BasePlace {
			e.stats.badDatagrams.Add(1)
			continue
		}
		if m.ID == e.id {
			continue // never itself
		}
		if m.Active && !usableAddr(m.Addr, from.Addr()) {
			e.logDatagram(slog.LevelWarn, "sion: probe answer with an unusable address ignored", from, "addr", m.Addr)
			e.stats.badDatagrams.Add(1)
			continue
		}
		e.stats.probeAnswersReceived.Add(1)
		select {
		case e.answers <- probeAnswer{m, from}:
		default:
			e.logDatagram(slog.LevelDebug, "sion: probe answers not read fast enough; one dropped", from)
		}
	}
}

// usableAddr reports whether addr ("ip:port") may be dialed for a peer
// whose datagrams come from src: never an unspecified address, never
// loopback unless the peer is on this host (its datagrams came over
// loopback).
func usableAddr(addr string, src netip.Addr) bool {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || ap.Port() == 0 {
		return false
	}
	ip := ap.Addr().Unmap()
	return !ip.IsUnspecified() && !ip.IsMulticast() && (!ip.IsLoopback() || src.Unmap().IsLoopback())
}

// reachableAddr returns the address of the listener at listen ("host:port")
// to give a peer at IP peer: AdvertiseHost when set, else listen's host
// when it is concrete, else the local address the kernel sends from to
// reach peer — the interface that faces it. It returns "" rather than an
// unspecified address, or a loopback address for a peer elsewhere. peer
// may be invalid (unknown): the first non-loopback interface address is
// taken then.
func (e *Entity) reachableAddr(listen string, peer netip.Addr) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen // not an IP transport (mem): its addresses are names
	}
	ip, err := e.hostFor(host, peer)
	if err != nil || ip.IsUnspecified() || (ip.IsLoopback() && peer.IsValid() && !peer.Unmap().IsLoopback()) {
		return ""
	}
	return net.JoinHostPort(ip.String(), port)
}

// hostFor returns the IP to give a peer at peer (possibly invalid:
// unknown) for a listener on host: AdvertiseHost, else host when it is
// concrete, else the interface that faces peer, else the first
// non-loopback interface address.
func (e *Entity) hostFor(host string, peer netip.Addr) (netip.Addr, error) {
	ip, err := netip.ParseAddr(host)
	switch {
	case e.cfg.AdvertiseHost != "":
		ip, err = netip.ParseAddr(e.cfg.AdvertiseHost)
	case err == nil && !ip.IsUnspecified():
	case peer.IsValid():
		ip, err = udp.SourceFor(peer.Unmap())
	default:
		ip, err = firstInterfaceAddr()
	}
	return ip.Unmap(), err
}

// firstInterfaceAddr returns the host's first non-loopback IPv4 interface
// address, or the loopback address when it has none.
func firstInterfaceAddr() (netip.Addr, error) {
	bs, err := udp.BroadcastAddrs()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, b := range bs {
		if !b.Local.Addr().IsLoopback() {
			return b.Local.Addr(), nil
		}
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1}), nil
}

// probeRound broadcasts one probe and returns the answers that arrive
// within ProbeWait, one per entity, in order of arrival; roots asks only
// Active roots to answer.
func (e *Entity) probeRound(ctx context.Context, roots bool) []probeAnswer {
	if e.cfg.NoBroadcast {
		return nil
	}
	for len(e.answers) > 0 { // answers to earlier rounds
		<-e.answers
	}
	nonce := random64()
	msg, _ := json.Marshal(probeMsg{V: probeVersion, Kind: "probe", ID: e.id, Name: e.cfg.Name, Base: e.cfg.BasePlace, Nonce: nonce, Roots: roots})
	if len(msg) < probeBytes {
		msg = append(msg, bytes.Repeat([]byte{' '}, probeBytes-len(msg))...) // room for any answer: none is longer than its probe
	}
	if _, err := e.probeConn.Broadcast(ctx, msg, e.cfg.DiscoveryPort); err != nil {
		e.log.Warn("sion: probe not broadcast", "entity", e.cfg.Name, "err", err)
	} else {
		e.stats.probesSent.Add(1)
	}
	t := time.NewTimer(e.cfg.ProbeWait)
	defer t.Stop()
	var out []probeAnswer
	seen := map[uint64]bool{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			return out
		case a := <-e.answers:
			if a.Nonce == nonce && !seen[a.ID] {
				seen[a.ID] = true
				out = append(out, a)
			}
		}
	}
}

// run is the entity's life cycle: discovery while Suspended, the base
// link's check while Active.
func (e *Entity) run(ctx context.Context) {
	defer e.wg.Done()
	downChecks := 0
	for ctx.Err() == nil {
		if e.State() == Suspended {
			e.discover(ctx)
			downChecks = 0
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(e.cfg.CheckInterval):
		}
		e.check(ctx, &downChecks)
	}
}

// discover probes until the entity links to an Active entity that
// answered, to a seed, or founds the base place, and makes it Active.
func (e *Entity) discover(ctx context.Context) {
	silent, lowest := 0, 0
	for ctx.Err() == nil {
		answers := e.probeRound(ctx, false)
		lower := false // a Suspended entity with a lower ID answered: it founds
		for _, a := range answers {
			if a.Active {
				if e.linkBase(ctx, a.Addr, a.Name) == nil {
					e.setState(Active)
					return
				}
			} else if a.ID < e.id {
				lower = true
			}
		}
		switch {
		case len(answers) == 0:
			silent++
		case !lower:
			lowest++ // only Suspended entities with higher IDs answered
		}
		if lower {
			lowest = 0
		}
		if !e.cfg.NoBroadcast && silent < e.cfg.ProbeRounds && lowest < 2 {
			continue
		}
		for _, s := range e.cfg.Seeds {
			if e.linkBase(ctx, s, "seed "+s) == nil {
				e.setState(Active)
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		e.log.Info("sion: entity founds its base place", "entity", e.cfg.Name, "place", e.cfg.BasePlace)
		e.setState(Active)
		return
	}
}

// check runs every CheckInterval while the entity is Active: an entity
// whose requested base link stayed down for two checks is Suspended (it
// rediscovers); a root (no requested base link: a founder) probes for
// other roots and links to one with a lower ID, so base places founded
// apart merge into one tree; a lone root (no link at all) also tries its
// seeds.
func (e *Entity) check(ctx context.Context, downChecks *int) {
	base := e.member(e.cfg.BasePlace)
	if base == nil {
		return
	}
	if l := base.requested(); l != nil {
		if st, _ := l.State(); st == LinkUp || st == LinkConnecting {
			*downChecks = 0
			return
		}
		if *downChecks++; *downChecks < 2 {
			return
		}
		base.setRequested(nil, "")
		l.Close()
		if len(base.sw.Links()) == 0 {
			e.setState(Suspended)
		}
		return
	}
	for _, a := range e.probeRound(ctx, true) {
		if a.Active && a.Root && a.ID < e.id && e.linkBase(ctx, a.Addr, a.Name) == nil {
			return
		}
	}
	if len(base.sw.Links()) > 0 {
		return
	}
	for _, s := range e.cfg.Seeds {
		if s != base.l.Addr().String() && e.linkBase(ctx, s, "seed "+s) == nil {
			return
		}
	}
}

// linkBase links the base switch to the switch at addr (entity via).
func (e *Entity) linkBase(ctx context.Context, addr, via string) error {
	base := e.member(e.cfg.BasePlace)
	if base == nil {
		return fmt.Errorf("%w: entity %q", ErrClosed, e.cfg.Name)
	}
	return e.linkTo(ctx, base, addr, via)
}

// linkTo requests m's shared link to the switch at addr, of entity via.
func (e *Entity) linkTo(ctx context.Context, m *member, addr, via string) error {
	ctx, cancel := context.WithTimeout(ctx, linkTimeout(e.cfg.Link))
	defer cancel()
	l, err := m.sw.Link(ctx, e.cfg.Transport, addr, e.cfg.Link)
	if err != nil {
		e.log.Info("sion: entity cannot link", "entity", e.cfg.Name, "place", m.place.Name(), "to", via, "addr", addr, "err", err)
		return err
	}
	m.setRequested(l, via)
	e.log.Info("sion: entity linked", "entity", e.cfg.Name, "place", m.place.Name(), "to", via, "addr", addr)
	return nil
}

func linkTimeout(c LinkConfig) time.Duration {
	if c.HandshakeTimeout > 0 {
		return c.HandshakeTimeout
	}
	return 5 * time.Second
}

func (e *Entity) member(place string) *member {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.places[place]
}

func (m *member) requested() *SharedLink {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.link
}

func (m *member) setRequested(l *SharedLink, via string) {
	m.mu.Lock()
	m.link, m.via = l, via
	m.mu.Unlock()
}

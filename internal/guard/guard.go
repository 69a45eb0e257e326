// Package guard bounds what a peer that has not been admitted can cost a
// server: Handshakes caps the connections in their handshake and evicts
// the oldest of the source that holds the most when a new one arrives, and
// Every lets an event (a log record, an answer) happen at most once per
// source per interval. The transports and the root package use it at their
// edges (DESIGN.md "Admission"). It imports nothing of sion, so that the
// transport implementations may use it too.
package guard

import (
	"container/list"
	"net"
	"sync"
	"time"
)

// Source returns the part of a remote address that identifies a source:
// the host of "host:port" (the IP for TCP and UDP), or the whole address
// when it has no port (a name, as in transport/mem). A nil addr is "".
func Source(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	s := addr.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}

// Handshakes is a bounded table of connections in their handshake. When a
// connection arrives and the table is full, the oldest handshake of the
// source that holds the most is evicted (its evict function is called), so
// that connections that send nothing cannot keep others out: a legitimate
// handshake finishes within a round trip, and only a burst of more than
// the table's size of new connections within that round trip can evict
// it. A Handshakes is safe for concurrent use.
type Handshakes struct {
	max int

	mu       sync.Mutex
	n        int                   // handshakes in the table; mu
	started  uint64                // handshakes started so far; mu
	bySource map[string]*list.List // of *handshake, oldest first; mu
	evicted  uint64                // mu
}

type handshake struct {
	source string
	n      uint64 // the order it started in
	evict  func()
	at     *list.Element // in bySource[source]; nil once removed
}

// NewHandshakes returns a table of at most n handshakes (at least 1).
func NewHandshakes(n int) *Handshakes {
	return &Handshakes{max: max(n, 1), bySource: map[string]*list.List{}}
}

// Start records a handshake from source, which evict ends (it is called
// at most once, without the table's lock held, and must not block). If
// the table was full, Start evicts one handshake first and returns its
// source as victim (ok true). done removes the handshake from the table
// when it ends, however it ends; calling it more than once is harmless.
func (h *Handshakes) Start(source string, evict func()) (done func(), victim string, ok bool) {
	h.mu.Lock()
	var out *handshake
	if h.n >= h.max {
		out = h.victim()
		h.remove(out)
		h.evicted++
	}
	h.started++
	hs := &handshake{source: source, n: h.started, evict: evict}
	l := h.bySource[source]
	if l == nil {
		l = list.New()
		h.bySource[source] = l
	}
	hs.at = l.PushBack(hs)
	h.n++
	h.mu.Unlock()
	if out != nil {
		out.evict()
		victim, ok = out.source, true
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			h.remove(hs)
			h.mu.Unlock()
		})
	}, victim, ok
}

// victim returns the oldest handshake of the source with the most (the
// oldest overall among sources that tie). mu must be held; the table is
// not empty.
func (h *Handshakes) victim() *handshake {
	var best *handshake
	bestN := 0
	for _, l := range h.bySource {
		first := l.Front().Value.(*handshake)
		if n := l.Len(); n > bestN || n == bestN && first.n < best.n {
			best, bestN = first, n
		}
	}
	return best
}

// remove takes hs out of the table if it is there. mu must be held.
func (h *Handshakes) remove(hs *handshake) {
	if hs.at == nil {
		return
	}
	l := h.bySource[hs.source]
	l.Remove(hs.at)
	hs.at = nil
	h.n--
	if l.Len() == 0 {
		delete(h.bySource, hs.source)
	}
}

// Len returns the number of handshakes in the table now.
func (h *Handshakes) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Evicted returns how many handshakes the table has evicted so far.
func (h *Handshakes) Evicted() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.evicted
}

// Every lets an event happen at most once per key per interval: a log
// record about a source, an answer to it. It remembers at most maxKeys
// keys; when it has to forget one, it forgets the one allowed longest ago,
// which can then happen again at once. An Every is safe for concurrent
// use.
type Every struct {
	interval time.Duration
	maxKeys  int

	mu   sync.Mutex
	keys map[string]*list.Element // of *everyKey; mu
	lru  *list.List               // of *everyKey, least recently allowed first; mu
}

type everyKey struct {
	key        string
	last       time.Time
	suppressed uint64
}

// NewEvery returns an Every for interval, remembering at most maxKeys
// keys (at least 1).
func NewEvery(interval time.Duration, maxKeys int) *Every {
	return &Every{interval: interval, maxKeys: max(maxKeys, 1), keys: map[string]*list.Element{}, lru: list.New()}
}

// Allow reports whether the event for key may happen at now: true for the
// first time and once interval has passed since the last allowed one, with
// the number of events suppressed for key in between.
func (ev *Every) Allow(key string, now time.Time) (ok bool, suppressed uint64) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if e, found := ev.keys[key]; found {
		k := e.Value.(*everyKey)
		if now.Sub(k.last) < ev.interval {
			k.suppressed++
			return false, 0
		}
		suppressed, k.suppressed, k.last = k.suppressed, 0, now
		ev.lru.MoveToBack(e)
		return true, suppressed
	}
	if ev.lru.Len() >= ev.maxKeys {
		old := ev.lru.Front()
		ev.lru.Remove(old)
		delete(ev.keys, old.Value.(*everyKey).key)
	}
	ev.keys[key] = ev.lru.PushBack(&everyKey{key: key, last: now})
	return true, 0
}

// Window lets at most n events happen per interval overall, whatever
// their source: a bound on log records that a flood from many sources
// would otherwise multiply (Every forgets sources past its maxKeys). A
// Window is safe for concurrent use.
type Window struct {
	n        int
	interval time.Duration

	mu         sync.Mutex
	start      time.Time // of the current interval; mu
	count      int       // events allowed in it; mu
	suppressed uint64    // events refused since the last allowed one; mu
}

// NewWindow returns a Window of at most n (at least 1) events per
// interval.
func NewWindow(n int, interval time.Duration) *Window {
	return &Window{n: max(n, 1), interval: interval}
}

// Allow reports whether an event may happen at now, with the number of
// events refused since the last one allowed.
func (w *Window) Allow(now time.Time) (ok bool, suppressed uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.start) >= w.interval {
		w.start, w.count = now, 0
	}
	if w.count >= w.n {
		w.suppressed++
		return false, 0
	}
	w.count++
	suppressed, w.suppressed = w.suppressed, 0
	return true, suppressed
}

package sion

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/sion-go/sion/internal/wire"
)

// maxReplyBytes bounds the bytes of answers (Ack, Error, PullReply, Lost)
// a remote session's stream holds unconfirmed: past it, the switch reads
// no more requests from the session until the entity confirms what it
// received, so an entity that sends requests and never confirms cannot
// grow the stream without bound.
const maxReplyBytes = 4 << 20

// outbox is the switch's side of a remote session's stream (see Dial):
// every frame the switch sends the session after Welcome — deliveries,
// answers to requests, loss reports — gets the next number, from 1, as it
// is sent, and stays until the entity confirms it has received it
// (wire.Received), so that an entity that reconnects gets every frame it
// missed, once, in order, on its next connection.
//
// The deliveries it holds, sent or not, are bounded in bytes (the
// session's retention, and the switch's total). When a delivery does not
// fit, the oldest delivery not yet sent is dropped to make room — an
// entity away for long receives the newest events — or, when all are
// sent and wait for confirmation, the new one. A drop is counted for its
// subscriptions and reported in the stream (a Lost frame) where the gap
// is: before the next frame sent, or in the Welcome of a reconnect.
//
// An outbox is safe for concurrent use: publishers append, the
// connection's writer takes, its reader confirms.
//
// What is not sent yet waits in a frameQueue (queue.go) that drops the
// oldest delivery and counts the bytes of the deliveries sent until they
// are confirmed; the numbering, the frames sent and unconfirmed and the
// Lost reports are the outbox's, on top of it.
type outbox struct {
	sess  *Session
	limit int // bytes of deliveries held; one is taken whatever its size when none is held

	mu      sync.Mutex
	first   uint64              // the number of items[0]; mu
	items   []outItem           // sent and unconfirmed, numbered from first; mu
	resend  int                 // items[:resend] were sent on the current connection; mu
	queue   frameQueue[outItem] // not yet sent, oldest first; it counts the bytes of the deliveries in items too; mu
	replies int                 // bytes of the frames other than deliveries in items and queue; mu
	lost    map[uint64]uint64   // entity's subscription ID → deliveries dropped, not yet reported; mu
	slow    bool                // a delivery was dropped since the stream last drained below half; mu
	ended   bool                // the session ended: the stream is empty for good; mu
	changed chan struct{}       // closed at the next change; nil unless someone waits; mu
}

// outItem is one frame of the stream.
type outItem struct {
	f    []byte
	subs []*Subscription // for a delivery, its subscriptions; nil for other frames
	lost []wire.Count    // for a Lost frame, what it reports
}

func (it outItem) frame() []byte { return it.f }
func (it outItem) data() bool    { return it.subs != nil }

func newOutbox(s *Session, limit int) *outbox {
	ob := &outbox{sess: s, limit: limit, first: 1, lost: map[uint64]uint64{}}
	ob.queue = frameQueue[outItem]{policy: dropOldest, maxBytes: limit,
		total: &s.sw.held, totalMax: int64(s.sw.cfg.MaxRetentionTotalBytes), lost: ob.dropped}
	return ob
}

// dropped counts a delivery the stream dropped for its subscriptions
// (SubscriptionStats.Dropped, Stats.Dropped) and, unless the session was
// ending when it came (dropClosed), in lost, to be reported to the
// entity. mu must be held.
func (ob *outbox) dropped(it outItem, why dropCause) {
	for _, sub := range it.subs {
		if why != dropClosed {
			ob.lost[sub.public]++
		}
		sub.drop(1, dropStream)
	}
}

// reply appends a frame that is not a delivery: an answer or a report.
func (ob *outbox) reply(f []byte) {
	ob.mu.Lock()
	ob.queue.push(outItem{f: f})
	ob.replies += len(f)
	ob.notify()
	ob.mu.Unlock()
}

// deliver appends the Deliver frame f for subs, making room within the
// session's bound by dropping the oldest deliveries not yet sent; when
// there are none, or the switch's total is full, it drops f for each of
// subs. Drops are counted (dropped) and reported in the stream later. It
// reports whether f was taken.
func (ob *outbox) deliver(f []byte, subs []*Subscription) bool {
	sw := ob.sess.sw
	ob.mu.Lock()
	taken, full := ob.queue.push(outItem{f: f, subs: subs})
	if taken {
		ob.notify()
	}
	report := full > 0 && !ob.slow
	if full > 0 {
		ob.slow = true
	}
	held := ob.queue.held()
	ob.mu.Unlock()
	if report { // once per episode: until the stream drains below half
		sw.log.Warn("sion: a remote session's stream is full; its oldest unsent deliveries are dropped and reported to it", "switch", sw.cfg.Name,
			"session", ob.sess.name, "held_bytes", held, "retention_bytes", ob.limit, "switch_held_bytes", sw.held.Load())
	}
	return taken
}

// unfit drops a delivery for subs that could not be made a frame:
// counted and reported like one the stream had no room for.
func (ob *outbox) unfit(subs []*Subscription) {
	ob.mu.Lock()
	ob.queue.discard(outItem{subs: subs})
	ob.mu.Unlock()
}

// takeLost returns the drops not yet reported, by subscription, and
// forgets them. mu must be held.
func (ob *outbox) takeLost() []wire.Count {
	if len(ob.lost) == 0 {
		return nil
	}
	out := make([]wire.Count, 0, len(ob.lost))
	for sub, n := range ob.lost {
		out = append(out, wire.Count{Sub: sub, N: n})
	}
	clear(ob.lost)
	slices.SortFunc(out, func(a, b wire.Count) int { return cmp.Compare(a.Sub, b.Sub) })
	return out
}

// lostFrames returns the Lost frames for the drops not yet reported, and
// forgets them. mu must be held.
func (ob *outbox) lostFrames() []outItem {
	var out []outItem
	for _, cs := range chunks(ob.takeLost(), wire.DefaultLimits().MaxMatches) {
		f, err := wire.Encode(nil, &wire.Lost{Lost: cs})
		if err != nil { // cannot happen: counts of at most MaxMatches always encode
			panic(fmt.Sprintf("sion: Lost frame: %v", err))
		}
		ob.replies += len(f)
		out = append(out, outItem{f: f, lost: cs})
	}
	return out
}

// unreported returns the drops not yet reported, for a Welcome, and
// forgets them.
func (ob *outbox) unreported() []wire.Count {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	return ob.takeLost()
}

func chunks[T any](s []T, n int) [][]T {
	var out [][]T
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if len(s) > 0 {
		out = append(out, s)
	}
	return out
}

// confirm forgets the frames the entity has received, the first n of the
// stream, and counts their deliveries as delivered. It refuses an n beyond
// the frames sent, and ignores one it has seen.
func (ob *outbox) confirm(n uint64) error {
	ob.mu.Lock()
	sent := ob.first - 1 + uint64(ob.resend)
	if n > sent {
		ob.mu.Unlock()
		return fmt.Errorf("%w: the session confirmed %d frames of its stream, %d were sent", ErrProtocol, n, sent)
	}
	if n < ob.first {
		ob.mu.Unlock()
		return nil
	}
	k := int(n - (ob.first - 1))
	done := slices.Clone(ob.items[:k])
	freed := 0
	for _, it := range done {
		if it.data() {
			freed += len(it.f)
		} else {
			ob.replies -= len(it.f)
		}
	}
	ob.queue.release(freed)
	clear(ob.items[:k])
	ob.items = ob.items[k:]
	if len(ob.items) == 0 {
		ob.items = nil // let the backing array go
	}
	ob.first += uint64(k)
	ob.resend -= k
	recovered := ob.slow && ob.queue.held() < ob.limit/2
	if recovered {
		ob.slow = false
	}
	ob.notify()
	ob.mu.Unlock()
	for _, it := range done {
		for _, sub := range it.subs {
			sub.placed()
		}
	}
	if recovered {
		ob.sess.mu.Lock()
		for _, sub := range ob.sess.subs {
			sub.slow.Store(false)
		}
		ob.sess.mu.Unlock()
	}
	return nil
}

// rewind prepares the stream for a new connection of an entity that has
// received the first received frames: those are confirmed, and the rest
// of those sent are sent again, then those not yet sent; the drops they
// report wait for the Welcome (unreported).
func (ob *outbox) rewind(received uint64) error {
	ob.mu.Lock()
	if total := ob.first - 1 + uint64(len(ob.items)); received > total {
		ob.mu.Unlock()
		return fmt.Errorf("%w: the session says it received %d frames of its stream, %d were sent", ErrProtocol, received, total)
	}
	ob.resend = len(ob.items) // each may have been sent on the connection that ended
	ob.mu.Unlock()
	if err := ob.confirm(received); err != nil {
		return err
	}
	ob.mu.Lock()
	// The entity received none of the frames left: their numbers are not
	// known to it yet, and the drops their Lost frames report go into the
	// Welcome instead, so that it hears of every drop at once.
	kept := ob.items[:0]
	for _, it := range ob.items {
		if it.lost == nil {
			kept = append(kept, it)
			continue
		}
		ob.replies -= len(it.f)
		for _, c := range it.lost {
			ob.lost[c.Sub] += c.N
		}
	}
	clear(ob.items[len(kept):])
	ob.items = kept
	ob.resend = 0
	ob.notify()
	ob.mu.Unlock()
	return nil
}

// next returns the next frame to send on the current connection, waiting
// until there is one: a frame sent before and not confirmed, a report of
// drops, or the oldest not yet sent, which from then on has a number. It
// returns false once stop is closed.
func (ob *outbox) next(stop <-chan struct{}) ([]byte, bool) {
	for {
		ob.mu.Lock()
		if ob.resend == len(ob.items) && (ob.queue.len() > 0 || len(ob.lost) > 0) {
			ob.items = append(ob.items, ob.lostFrames()...)
			if ob.resend == len(ob.items) { // no drops to report: the oldest not yet sent
				it, _ := ob.queue.take()
				ob.items = append(ob.items, it)
			}
		}
		if ob.resend < len(ob.items) {
			f := ob.items[ob.resend].f
			ob.resend++
			ob.mu.Unlock()
			return f, true
		}
		ch := ob.waitChan()
		ob.mu.Unlock()
		select {
		case <-ch:
		case <-stop:
			return nil, false
		}
	}
}

// roomForReplies waits until the answers held are below maxReplyBytes; it
// returns false once stop is closed.
func (ob *outbox) roomForReplies(stop <-chan struct{}) bool {
	return ob.waitFor(func() bool { return ob.replies < maxReplyBytes }, stop)
}

// waitFor waits until ok, called with mu held, reports true; it returns
// false once stop is closed first.
func (ob *outbox) waitFor(ok func() bool, stop <-chan struct{}) bool {
	for {
		ob.mu.Lock()
		if ok() {
			ob.mu.Unlock()
			return true
		}
		ch := ob.waitChan()
		ob.mu.Unlock()
		select {
		case <-ch:
		case <-stop:
			return false
		}
	}
}

// goodbye closes the stream to deliveries and appends a Bye frame, the
// switch's last, after a report of the drops not yet reported; it returns
// the Bye's number.
func (ob *outbox) goodbye() uint64 {
	f, _ := wire.Encode(nil, &wire.Bye{})
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.queue.close()
	for _, it := range ob.lostFrames() {
		ob.queue.push(it)
	}
	ob.queue.push(outItem{f: f})
	ob.replies += len(f)
	ob.notify()
	return ob.first - 1 + uint64(len(ob.items)) + uint64(ob.queue.len())
}

// waitConfirmed waits until the entity has confirmed the first n frames
// of the stream, or the session ended; it returns false once stop is
// closed first.
func (ob *outbox) waitConfirmed(n uint64, stop <-chan struct{}) bool {
	return ob.waitFor(func() bool { return ob.first > n || ob.ended }, stop)
}

// end empties the stream of a session that ends: its unconfirmed
// deliveries, sent or not, are dropped for their subscriptions (counted).
// It returns the deliveries lost by subscription, those not yet reported
// included.
func (ob *outbox) end() []wire.Count {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.ended = true
	ob.queue.close()
	for _, it := range ob.items {
		if it.data() {
			ob.queue.lose(it)
		}
	}
	ob.queue.clear()
	ob.items, ob.resend, ob.replies = nil, 0, 0
	lost := ob.takeLost()
	ob.notify()
	return lost
}

// waitChan returns a channel closed at the next change. mu must be held.
func (ob *outbox) waitChan() <-chan struct{} {
	if ob.changed == nil {
		ob.changed = make(chan struct{})
	}
	return ob.changed
}

// notify wakes those waiting for a change. mu must be held.
func (ob *outbox) notify() {
	if ob.changed != nil {
		close(ob.changed)
		ob.changed = nil
	}
}

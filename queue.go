package sion

import "sync/atomic"

// dropPolicy is which data item a full frameQueue drops.
type dropPolicy int

const (
	// dropNewest drops the data item that does not fit: what waits stays,
	// and the receiver gets a prefix, a gap, then what fits again (a shared
	// link's queue). An item that does not fit is dropped even when the
	// queue is empty.
	dropNewest dropPolicy = iota
	// dropOldest drops the oldest data items waiting, one at a time, until
	// the new one fits: the receiver gets the newest (a remote session's
	// stream, for an entity away for long). When no data item waits — all
	// were taken and are still held — the new one is dropped. One item is
	// taken whatever its size when nothing is held: dropping could never
	// make room for it.
	dropOldest
)

// dropCause says why a frameQueue dropped a data item.
type dropCause int

const (
	dropFull   dropCause = iota // no room: the queue's bounds, or the budget it shares
	dropClosed                  // pushed after close
	dropEnded                   // waiting or held when the queue was emptied for good (clear, lose)
	dropUnfit                   // its owner could not make it a frame (discard)
)

// queueItem is what a frameQueue holds: a frame, and what its owner keeps
// with it. A data item (an event) is bounded and may be dropped; any other
// (control: link control messages, answers, reports) is always admitted
// and never dropped — their number is bounded by what asks for them.
type queueItem interface {
	frame() []byte
	data() bool
}

// frameQueue is an outbound FIFO of frames, the one queue type of the
// switch's outgoing streams: a shared link's or gateway's router queues
// what its writer sends, and a remote session's outbox what is not sent
// yet. Control items are always admitted; data items are bounded in
// number (maxData, 0: no bound) and in bytes (maxBytes, which must be
// positive), and optionally by a byte budget shared with other queues
// (total, at most totalMax: a switch's remote sessions together). What is
// dropped when a data item does not fit is the policy's choice.
//
// Every data item the queue drops — no room, pushed after close, waiting
// or held when it is emptied for good, or never made a frame — goes
// through one path, the lost hook, with why; the owner counts there: the
// router its LinkInfo.Dropped (and, for items counted sent that never
// left, EventsSent back), the outbox its subscriptions' drops and the Lost
// counts it reports to the entity. The hook runs with the owner's lock
// held, so it must only count; logging is the owner's, after its lock is
// released, from what push and clear return.
//
// The bytes of a data item stay counted after it is taken, until its
// owner releases them (release, lose): the router releases at once, as it
// hands the frames to the transport (takeAll); the outbox when the entity
// confirms them, so that one byte bound covers the frames sent and not
// yet confirmed as well as those waiting — the session's retention. The
// outbox keeps its numbering, the frames sent and not confirmed, their
// resending on a new connection (rewind) and the Lost reports on top of
// the queue: those are the stream's protocol with the entity, which a
// shared link, whose frames are gone once sent, does not have; putting
// them in the queue would give the router state it never uses.
//
// A frameQueue has no lock of its own: its owner's lock (the router's
// queue lock, the outbox's) covers it and what the owner keeps beside it.
// Every method needs it: mu must be held.
type frameQueue[T queueItem] struct {
	policy   dropPolicy
	maxData  int                       // data items waiting; 0: no bound
	maxBytes int                       // bytes of data items held: waiting, and taken but not released
	total    *atomic.Int64             // bytes held by this queue and others; nil: no shared budget
	totalMax int64                     // the bound on *total
	lost     func(it T, why dropCause) // every data item dropped; mu held

	items  []T  // waiting, oldest first, from head
	head   int  // items[:head] were taken or dropped
	data   int  // data items waiting
	bytes  int  // bytes of the data items waiting
	out    int  // bytes of the data items taken and not yet released
	closed bool // data items pushed are dropped (dropClosed)
}

// push appends it, and reports whether it was taken. A control item
// always is. A data item that does not fit is dropped under the policy:
// it, or older data items to make room; full counts the items dropped for
// room (it included when it was). After close a data item is dropped
// (dropClosed, not counted in full). mu must be held.
func (q *frameQueue[T]) push(it T) (taken bool, full int) {
	if !it.data() {
		q.items = append(q.items, it)
		return true, 0
	}
	if q.closed {
		q.lost(it, dropClosed)
		return false, 0
	}
	n := len(it.frame())
	taken = q.total == nil || q.total.Add(int64(n)) <= q.totalMax // else the shared budget is full: it is dropped
	for taken && q.over(n) {
		if q.policy != dropOldest || !q.dropOldest() {
			taken = false
			break
		}
		full++
	}
	if !taken {
		if q.total != nil {
			q.total.Add(-int64(n))
		}
		q.lost(it, dropFull)
		return false, full + 1
	}
	q.items = append(q.items, it)
	q.data++
	q.bytes += n
	return true, full
}

// over reports whether a data item of n bytes does not fit now. mu must
// be held.
func (q *frameQueue[T]) over(n int) bool {
	held := q.bytes + q.out
	if q.policy == dropOldest && held == 0 {
		return false // dropping could never make room: one is taken whatever its size
	}
	return q.maxData > 0 && q.data >= q.maxData || held+n > q.maxBytes
}

// dropOldest drops the oldest data item waiting; the control items before
// it keep their order. It reports false when no data item waits. mu must
// be held.
func (q *frameQueue[T]) dropOldest() bool {
	for i := q.head; i < len(q.items); i++ {
		it := q.items[i]
		if !it.data() {
			continue
		}
		copy(q.items[q.head+1:i+1], q.items[q.head:i])
		var zero T
		q.items[q.head] = zero
		q.head++
		n := len(it.frame())
		q.data--
		q.bytes -= n
		if q.total != nil {
			q.total.Add(-int64(n))
		}
		q.lost(it, dropFull)
		return true
	}
	return false
}

// len returns the number of items waiting. mu must be held.
func (q *frameQueue[T]) len() int { return len(q.items) - q.head }

// held returns the bytes of the data items waiting or taken and not yet
// released. mu must be held.
func (q *frameQueue[T]) held() int { return q.bytes + q.out }

// take removes and returns the oldest item waiting; a data item's bytes
// stay held until released. It reports false when none waits. mu must be
// held.
func (q *frameQueue[T]) take() (T, bool) {
	var zero T
	if q.head == len(q.items) {
		return zero, false
	}
	it := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	if it.data() {
		n := len(it.frame())
		q.data--
		q.bytes -= n
		q.out += n
	}
	return it, true
}

// takeAll removes and returns every item waiting, in order, their bytes
// released: for a writer that hands them to the transport at once. The
// slice is the caller's until it passes it back as done, a batch it has
// finished with (or nil): takeAll clears done and queues the next items
// in it, so that a writer and the queue use two slices in turn instead
// of growing a new one for each batch. mu must be held.
func (q *frameQueue[T]) takeAll(done []T) []T {
	all := q.items[q.head:]
	clear(done)
	q.items, q.head, q.data = done[:0], 0, 0
	if q.total != nil {
		q.total.Add(-int64(q.bytes))
	}
	q.bytes = 0
	return all
}

// release notes that n bytes of data items taken are no longer held.
// mu must be held.
func (q *frameQueue[T]) release(n int) {
	q.out -= n
	if q.total != nil {
		q.total.Add(-int64(n))
	}
}

// lose gives up it, a data item taken and still held (never confirmed):
// its bytes are released and it is dropped (dropEnded). mu must be held.
func (q *frameQueue[T]) lose(it T) {
	q.release(len(it.frame()))
	q.lost(it, dropEnded)
}

// discard drops it, a data item its owner could not make a frame of and
// never pushed (dropUnfit). mu must be held.
func (q *frameQueue[T]) discard(it T) { q.lost(it, dropUnfit) }

// close makes the queue drop the data items pushed from now on
// (dropClosed); control items are still admitted. mu must be held.
func (q *frameQueue[T]) close() { q.closed = true }

// clear empties the queue: the data items waiting are dropped (dropEnded)
// and the control items forgotten. It returns the number of data items
// dropped. mu must be held.
func (q *frameQueue[T]) clear() int {
	waiting := q.items[q.head:]
	q.items, q.head, q.data = nil, 0, 0
	if q.total != nil {
		q.total.Add(-int64(q.bytes))
	}
	q.bytes = 0
	n := 0
	for _, it := range waiting {
		if it.data() {
			n++
			q.lost(it, dropEnded)
		}
	}
	return n
}

// linkFrame is an item of a router's queue: a Forward frame, data (an
// event) or control.
type linkFrame struct {
	f      []byte
	isData bool
	accept bool // the handshake's LinkAccept: not counted in the link's frames and bytes
}

func (l linkFrame) frame() []byte { return l.f }
func (l linkFrame) data() bool    { return l.isData }

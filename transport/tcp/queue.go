package tcp

import (
	"encoding/binary"
	"sync"
)

// queue is a FIFO of frames bounded in bytes, between the reader
// goroutine of a Conn and Recv: the frames received. Its methods
// never block; those that can find no room or no frame return a channel
// closed at the next change, to wait on alongside ctx and Close.
type queue struct {
	limit int // bytes; an empty queue takes a frame of any size; mu, for a queue whose setLimit is called

	mu      sync.Mutex
	frames  [][]byte      // oldest first, from head; mu
	head    int           // frames[:head] were popped; mu
	bytes   int           // held, counted with prefixBytes each; mu
	err     error         // once set, push fails with it; mu
	changed chan struct{} // nil unless someone waits; closed at the next change; mu
}

func newQueue(limit int) *queue { return &queue{limit: limit} }

// cost returns the bytes f counts for in a queue: its size on the wire.
func cost(f []byte) int { return prefixBytes + len(f) }

// push appends f if it fits: the queue is empty, or its bytes stay within
// limit. If the queue was closed, push returns its error; if f does not
// fit, it returns a channel to wait on before trying again.
func (q *queue) push(f []byte) (wait <-chan struct{}, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return nil, q.err
	}
	if q.bytes > 0 && q.bytes+cost(f) > q.limit {
		return q.waitChan(), nil
	}
	if q.head > 0 && len(q.frames) == cap(q.frames) { // full: move the waiting frames to the front
		n := copy(q.frames, q.frames[q.head:])
		clear(q.frames[n:])
		q.frames, q.head = q.frames[:n], 0
	}
	q.frames = append(q.frames, f)
	q.bytes += cost(f)
	q.notify()
	return nil, nil
}

// pop removes and returns the oldest frame, with ok true. If the queue is
// empty, it returns the queue's error if it was closed, or else a channel
// to wait on before trying again.
func (q *queue) pop() (f []byte, ok bool, wait <-chan struct{}, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.frames) {
		if q.err != nil {
			return nil, false, nil, q.err
		}
		return nil, false, q.waitChan(), nil
	}
	f = q.frames[q.head]
	q.frames[q.head] = nil
	q.head++
	if q.head == len(q.frames) { // empty: the array serves again, unless it grew large
		q.frames, q.head = q.frames[:0], 0
		if cap(q.frames) > maxSpareFrames {
			q.frames = nil
		}
	}
	q.bytes -= cost(f)
	q.notify()
	return f, true, nil, nil
}

// setLimit changes the queue's limit to n, waking those waiting for
// room.
func (q *queue) setLimit(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.limit = n
	q.notify()
}

// close makes push fail with err from now on, unless the queue was closed
// already; the frames held can still be popped.
func (q *queue) close(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil {
		q.err = err
		q.notify()
	}
}

// waitChan returns the channel closed at the next change.
//
// mu must be held.
func (q *queue) waitChan() <-chan struct{} {
	if q.changed == nil {
		q.changed = make(chan struct{})
	}
	return q.changed
}

// notify wakes those waiting for a change.
//
// mu must be held.
func (q *queue) notify() {
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}

// writeQueue is the write buffer between Send and the writer goroutine:
// the records to write — each frame after its length prefix — in one
// byte slice, bounded in bytes like a queue, which the writer takes whole
// and writes with one call (one system call, or one run of TLS records
// with TLS). Push copies the frame in: no slice per frame, and no second
// copy through a bufio.Writer. The writer hands the slice back with
// release, and the next records are appended to it again, so that two
// slices serve in turn. Its methods never block; those that find no room
// or nothing to write return a channel closed at the next change.
type writeQueue struct {
	limit int // bytes; an empty queue takes a frame of any size

	mu      sync.Mutex
	buf     []byte        // records waiting; mu
	spare   []byte        // empty, for the next records: the slice the writer released last; mu
	bytes   int           // bytes waiting, and taken but not released; mu
	err     error         // once set, push fails with it; mu
	changed chan struct{} // nil unless someone waits; closed at the next change; mu
}

// maxSpareFrames bounds the capacity, in frames, of the array a queue
// keeps for reuse once empty.
const maxSpareFrames = 4096

// maxSpareBytes bounds the capacity of the slice a writeQueue keeps for
// reuse: a burst of large frames does not pin its memory.
const maxSpareBytes = 1 << 20

// firstWriteBytes is the capacity of a writeQueue's slice when it has
// none to reuse: room for a few hundred small frames before it grows.
const firstWriteBytes = 32 << 10

func newWriteQueue(limit int) *writeQueue { return &writeQueue{limit: limit} }

// push appends the record of f if it fits: the queue is empty, or its
// bytes stay within limit. If the queue was closed, push returns its
// error; if f does not fit, it returns a channel to wait on before trying
// again. push does not keep f.
func (q *writeQueue) push(f []byte) (wait <-chan struct{}, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return nil, q.err
	}
	if q.bytes > 0 && q.bytes+cost(f) > q.limit {
		return q.waitChan(), nil
	}
	if q.buf == nil {
		q.buf, q.spare = q.spare, nil
		if q.buf == nil {
			q.buf = make([]byte, 0, max(firstWriteBytes, cost(f)))
		}
	}
	q.buf = binary.BigEndian.AppendUint32(q.buf, uint32(len(f)))
	q.buf = append(q.buf, f...)
	q.bytes += cost(f)
	q.notify()
	return nil, nil
}

// take removes and returns all the records, whose bytes keep counting
// until release. If there are none, it returns the queue's error if it
// was closed, or else a channel to wait on before trying again.
func (q *writeQueue) take() (records []byte, wait <-chan struct{}, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.buf) == 0 {
		if q.err != nil {
			return nil, nil, q.err
		}
		return nil, q.waitChan(), nil
	}
	records, q.buf = q.buf, nil
	return records, nil, nil
}

// release frees the bytes of records returned by take; the caller is done
// with them, and the queue may reuse their slice.
func (q *writeQueue) release(records []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.bytes -= len(records)
	if cap(records) <= maxSpareBytes {
		q.spare = records[:0]
	}
	q.notify()
}

// close makes push fail with err from now on, unless the queue was closed
// already; the records held can still be taken.
func (q *writeQueue) close(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil {
		q.err = err
		q.notify()
	}
}

// waitChan returns the channel closed at the next change.
//
// mu must be held.
func (q *writeQueue) waitChan() <-chan struct{} {
	if q.changed == nil {
		q.changed = make(chan struct{})
	}
	return q.changed
}

// notify wakes those waiting for a change.
//
// mu must be held.
func (q *writeQueue) notify() {
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}

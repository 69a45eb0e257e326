package tcp

import "sync"

// queue is a FIFO of frames bounded in bytes, between the goroutines of a
// Conn and its callers: frames to write, or frames received. Its methods
// never block; those that can find no room or no frame return a channel
// closed at the next change, to wait on alongside ctx and Close.
type queue struct {
	limit int // bytes; an empty queue takes a frame of any size; mu, for a queue whose setLimit is called

	mu      sync.Mutex
	frames  [][]byte      // oldest first; mu
	spare   [][]byte      // empty, to hold frames again: the slice of the last frames taken and released; mu
	bytes   int           // held, counted with prefixBytes each, and taken but not released; mu
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
	if q.frames == nil {
		q.frames, q.spare = q.spare, nil
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
	if len(q.frames) == 0 {
		if q.err != nil {
			return nil, false, nil, q.err
		}
		return nil, false, q.waitChan(), nil
	}
	f = q.frames[0]
	q.frames[0] = nil
	q.frames = q.frames[1:]
	if len(q.frames) == 0 {
		q.frames = nil // let the backing array go
	}
	q.bytes -= cost(f)
	q.notify()
	return f, true, nil, nil
}

// take removes and returns all the frames, whose bytes keep counting
// until release. If the queue is empty, it returns the queue's error if
// it was closed, or else a channel to wait on before trying again.
func (q *queue) take() (frames [][]byte, wait <-chan struct{}, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.frames) == 0 {
		if q.err != nil {
			return nil, nil, q.err
		}
		return nil, q.waitChan(), nil
	}
	frames, q.frames = q.frames, nil
	return frames, nil, nil
}

// release frees the bytes of frames returned by take; the caller is done
// with frames, whose slice the queue reuses.
func (q *queue) release(frames [][]byte) {
	n := 0
	for _, f := range frames {
		n += cost(f)
	}
	clear(frames)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.bytes -= n
	if cap(frames) <= maxSpareFrames {
		q.spare = frames[:0]
	}
	q.notify()
}

// maxSpareFrames bounds the slice a queue keeps for reuse, in frames.
const maxSpareFrames = 4096

// setLimit changes the queue's limit to n, waking those waiting for
// room.
func (q *queue) setLimit(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.limit = n
	q.notify()
}

// close makes push fail with err from now on, unless the queue was closed
// already; the frames held can still be taken.
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

package sion

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// qItem is a frameQueue item for tests: its frame is its name padded to
// size bytes.
type qItem struct {
	name   string
	size   int
	isData bool
}

func (it qItem) frame() []byte { return []byte(it.name + strings.Repeat(".", it.size-len(it.name))) }
func (it qItem) data() bool    { return it.isData }

func dataItem(name string, size int) qItem { return qItem{name: name, size: size, isData: true} }
func ctlItem(name string) qItem            { return qItem{name: name, size: len(name)} }

// dropLog records what a frameQueue's lost hook was called with.
type dropLog struct{ drops []string }

func (l *dropLog) lost(it qItem, why dropCause) {
	l.drops = append(l.drops, it.name+":"+[]string{"full", "closed", "ended", "unfit"}[why])
}

func newTestQueue(t *testing.T, policy dropPolicy, maxData, maxBytes int) (*frameQueue[qItem], *dropLog) {
	t.Helper()
	l := &dropLog{}
	return &frameQueue[qItem]{policy: policy, maxData: maxData, maxBytes: maxBytes, lost: l.lost}, l
}

// waiting returns the names of the items waiting, oldest first, without
// taking them.
func waiting(q *frameQueue[qItem]) []string {
	var out []string
	for _, it := range q.items[q.head:] {
		out = append(out, it.name)
	}
	return out
}

func TestFrameQueuePush(t *testing.T) {
	type push struct {
		it    qItem
		taken bool
		full  int
	}
	cases := []struct {
		name             string
		policy           dropPolicy
		maxData, maxByte int
		pushes           []push
		waiting          []string
		drops            []string
		held             int
	}{
		{
			name: "drop newest: count bound", policy: dropNewest, maxData: 2, maxByte: 1000,
			pushes: []push{
				{dataItem("a", 10), true, 0}, {dataItem("b", 10), true, 0},
				{dataItem("c", 10), false, 1}, {ctlItem("x"), true, 0}, {dataItem("d", 10), false, 1},
			},
			waiting: []string{"a", "b", "x"}, drops: []string{"c:full", "d:full"}, held: 20,
		},
		{
			name: "drop newest: byte bound", policy: dropNewest, maxByte: 25,
			pushes: []push{
				{dataItem("a", 10), true, 0}, {dataItem("b", 10), true, 0},
				{dataItem("c", 10), false, 1}, {dataItem("d", 5), true, 0},
			},
			waiting: []string{"a", "b", "d"}, drops: []string{"c:full"}, held: 25,
		},
		{
			name: "drop newest: too large even for an empty queue", policy: dropNewest, maxByte: 25,
			pushes:  []push{{dataItem("big", 26), false, 1}, {ctlItem("x"), true, 0}},
			waiting: []string{"x"}, drops: []string{"big:full"},
		},
		{
			name: "drop newest: control is never dropped", policy: dropNewest, maxData: 1, maxByte: 10,
			pushes: []push{
				{dataItem("a", 10), true, 0}, {ctlItem("x"), true, 0}, {qItem{name: "huge", size: 100}, true, 0},
				{dataItem("b", 1), false, 1},
			},
			waiting: []string{"a", "x", "huge"}, drops: []string{"b:full"}, held: 10,
		},
		{
			name: "drop oldest: the oldest data make room, control keeps its order", policy: dropOldest, maxByte: 30,
			pushes: []push{
				{ctlItem("x"), true, 0}, {dataItem("a", 10), true, 0}, {ctlItem("y"), true, 0},
				{dataItem("b", 10), true, 0}, {dataItem("c", 10), true, 0}, {dataItem("d", 20), true, 2},
			},
			waiting: []string{"x", "y", "c", "d"}, drops: []string{"a:full", "b:full"}, held: 30,
		},
		{
			name: "drop oldest: count bound", policy: dropOldest, maxData: 2, maxByte: 1000,
			pushes: []push{
				{dataItem("a", 10), true, 0}, {dataItem("b", 10), true, 0}, {dataItem("c", 10), true, 1},
			},
			waiting: []string{"b", "c"}, drops: []string{"a:full"}, held: 20,
		},
		{
			name: "drop oldest: one too large is taken into an empty queue, and dropped for the next", policy: dropOldest, maxByte: 25,
			pushes:  []push{{dataItem("big", 40), true, 0}, {dataItem("a", 1), true, 1}, {ctlItem("x"), true, 0}},
			waiting: []string{"a", "x"}, drops: []string{"big:full"}, held: 1,
		},
		{
			name: "drop oldest: one too large drops all that waits, then is taken", policy: dropOldest, maxByte: 25,
			pushes:  []push{{dataItem("a", 10), true, 0}, {dataItem("b", 10), true, 0}, {dataItem("big", 40), true, 2}},
			waiting: []string{"big"}, drops: []string{"a:full", "b:full"}, held: 40,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, l := newTestQueue(t, c.policy, c.maxData, c.maxByte)
			for _, p := range c.pushes {
				taken, full := q.push(p.it)
				assert.Equal(t, p.taken, taken, "push %s taken", p.it.name)
				assert.Equal(t, p.full, full, "push %s: dropped for room", p.it.name)
			}
			assert.Equal(t, c.waiting, waiting(q))
			assert.Equal(t, c.drops, l.drops, "every drop went through the hook")
			assert.Equal(t, c.held, q.held())
			assert.Equal(t, len(c.waiting), q.len())
		})
	}
}

// TestFrameQueueHeldUntilReleased: a data item taken stays held — it
// counts against the bound — until its owner releases it; under
// dropOldest, a new item that does not fit while only taken items are
// held is dropped.
func TestFrameQueueHeldUntilReleased(t *testing.T) {
	q, l := newTestQueue(t, dropOldest, 0, 20)
	for _, it := range []qItem{dataItem("a", 10), ctlItem("x"), dataItem("b", 10)} {
		taken, _ := q.push(it)
		require.True(t, taken)
	}
	var got []string
	for {
		it, ok := q.take()
		if !ok {
			break
		}
		got = append(got, it.name)
	}
	assert.Equal(t, []string{"a", "x", "b"}, got)
	assert.Equal(t, 20, q.held(), "taken, not released")
	assert.Equal(t, 0, q.len())

	taken, full := q.push(dataItem("c", 5))
	assert.False(t, taken, "nothing waits to be dropped: the new one is")
	assert.Equal(t, 1, full)
	assert.Equal(t, []string{"c:full"}, l.drops)

	q.release(10)
	taken, full = q.push(dataItem("d", 5))
	assert.True(t, taken)
	assert.Zero(t, full)
	assert.Equal(t, 15, q.held())

	q.lose(dataItem("b", 10))
	assert.Equal(t, []string{"c:full", "b:ended"}, l.drops)
	assert.Equal(t, 5, q.held())
}

// TestFrameQueueSharedBudget: a budget shared by two queues drops what
// would take it over, whatever each queue's own bound, and every byte
// taken out of a queue goes back to it.
func TestFrameQueueSharedBudget(t *testing.T) {
	var total atomic.Int64
	l := &dropLog{}
	q1 := &frameQueue[qItem]{policy: dropOldest, maxBytes: 100, total: &total, totalMax: 30, lost: l.lost}
	q2 := &frameQueue[qItem]{policy: dropOldest, maxBytes: 100, total: &total, totalMax: 30, lost: l.lost}
	for _, p := range []struct {
		q     *frameQueue[qItem]
		it    qItem
		taken bool
	}{
		{q1, dataItem("a", 20), true},
		{q2, dataItem("b", 10), true},
		{q2, dataItem("c", 1), false},
		{q1, dataItem("d", 5), false},
	} {
		taken, _ := p.q.push(p.it)
		assert.Equal(t, p.taken, taken, p.it.name)
	}
	assert.Equal(t, []string{"c:full", "d:full"}, l.drops)
	assert.Equal(t, int64(30), total.Load())

	it, ok := q1.take()
	require.True(t, ok)
	assert.Equal(t, int64(30), total.Load(), "taken, still held")
	q1.release(len(it.frame()))
	assert.Equal(t, int64(10), total.Load())
	q2.clear()
	assert.Zero(t, total.Load())

	q1.push(dataItem("e", 10))
	q1.takeAll(nil)
	assert.Zero(t, total.Load(), "takeAll releases")
}

// TestFrameQueueClosedAndCleared: after close, data is dropped and control
// admitted; clear drops what waits; discard counts what never came in.
// Each goes through the hook with its cause.
func TestFrameQueueClosedAndCleared(t *testing.T) {
	for _, policy := range []dropPolicy{dropNewest, dropOldest} {
		t.Run([]string{"drop newest", "drop oldest"}[policy], func(t *testing.T) {
			q, l := newTestQueue(t, policy, 10, 100)
			q.push(dataItem("a", 10))
			q.push(ctlItem("x"))
			q.push(dataItem("b", 10))
			q.close()
			taken, full := q.push(dataItem("c", 10))
			assert.False(t, taken)
			assert.Zero(t, full, "not for want of room")
			taken, _ = q.push(ctlItem("bye"))
			assert.True(t, taken, "control is admitted after close")
			assert.Equal(t, []string{"a", "x", "b", "bye"}, waiting(q))

			q.discard(dataItem("unfit", 1))
			assert.Equal(t, 2, q.clear(), "the data items waiting")
			assert.Equal(t, []string{"c:closed", "unfit:unfit", "a:ended", "b:ended"}, l.drops)
			assert.Zero(t, q.len())
			assert.Zero(t, q.held())
		})
	}
}

// TestFrameQueueTakeAll: the router's writer takes every frame waiting, in
// order, and the bounds apply afresh.
func TestFrameQueueTakeAll(t *testing.T) {
	q, l := newTestQueue(t, dropNewest, 2, 100)
	q.push(dataItem("a", 10))
	q.push(ctlItem("x"))
	q.push(dataItem("b", 10))
	taken, _ := q.push(dataItem("c", 10))
	require.False(t, taken)
	var got []string
	for _, it := range q.takeAll(nil) {
		got = append(got, it.name)
	}
	assert.Equal(t, []string{"a", "x", "b"}, got)
	assert.Zero(t, q.held())
	taken, _ = q.push(dataItem("d", 10))
	assert.True(t, taken, "room again")
	assert.Equal(t, []string{"c:full"}, l.drops)
}

package sion_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
)

// heldDials is a transport that keeps the Conns it dials and, while hold
// is set, makes their Sends wait for their context (and tells stuck): a
// writer stuck on a slow connection, with frames queued behind it.
type heldDials struct {
	transport.Transport
	hold  atomic.Bool
	stuck chan struct{} // one send per Send that waits
	mu    sync.Mutex
	conns []transport.Conn
}

func (h *heldDials) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	c, err := h.Transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.conns = append(h.conns, c)
	h.mu.Unlock()
	return &heldConn{Conn: c, h: h}, nil
}

// closeAll closes every Conn dialled so far.
func (h *heldDials) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.Close()
	}
}

type heldConn struct {
	transport.Conn
	h *heldDials
}

func (c *heldConn) Send(ctx context.Context, frame []byte) error {
	if c.h.hold.Load() {
		select {
		case c.h.stuck <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}
	return c.Conn.Send(ctx, frame)
}

// pauseOn is a slog handler that, the first time it handles a record
// with message msg, reports it on paused and waits until resume is
// closed: it holds the goroutine that logs at that point of its work.
type pauseOn struct {
	msg    string
	once   sync.Once
	paused chan struct{}
	resume chan struct{}
}

func (h *pauseOn) Enabled(context.Context, slog.Level) bool { return true }
func (h *pauseOn) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *pauseOn) WithGroup(string) slog.Handler            { return h }
func (h *pauseOn) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() {
			close(h.paused)
			<-h.resume
		})
	}
	return nil
}

// TestLinksWhileParentLinkEnds checks what Switch.Links reports for the
// parent link at a moment its router is shutting down: it has left the
// switch's table and logs the events its queue lost. A link whose
// connection is gone is not up, and no entry is up without the time it
// came up (LinkInfo.Since) — a caller waiting for the link to re-form,
// by its State and a new Since, must not take the ending link for the
// new one.
func TestLinksWhileParentLinkEnds(t *testing.T) {
	n, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	tr := &heldDials{Transport: n, stuck: make(chan struct{}, 1)}
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "p", Ontology: ont1(t)})
	require.NoError(t, err)

	parent, err := sion.NewSwitch(sion.SwitchConfig{Name: "parent", Place: place})
	require.NoError(t, err)
	l, err := n.Listen("parent")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- parent.Serve(context.Background(), l) }()
	t.Cleanup(func() {
		require.NoError(t, parent.Close())
		require.NoError(t, <-served)
	})
	require.Eventually(t, func() bool { return parent.State() == sion.Active }, 10*time.Second, time.Millisecond)

	logs := &pauseOn{msg: "sion: link ended with events queued; they are lost",
		paused: make(chan struct{}), resume: make(chan struct{})}
	resume := sync.OnceFunc(func() { close(logs.resume) })
	t.Cleanup(resume)
	child, err := sion.NewSwitch(sion.SwitchConfig{Name: "child", Place: place, Logger: slog.New(logs)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, child.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = child.Link(ctx, tr, "parent", sion.LinkConfig{RetryMin: time.Hour, RetryMax: time.Hour, ProbeHops: -1})
	require.NoError(t, err)
	subscribe(t, open(t, parent, "reader"), "{type ⊑ Alarm}") // returns once the child forwards Alarms
	pub := open(t, child, "writer")

	// The child's writer sticks on its connection; what it publishes
	// next waits in the link's queue.
	tr.hold.Store(true)
	publish(t, pub, &sion.Event{Type: "Alarm"})
	select {
	case <-tr.stuck:
	case <-time.After(10 * time.Second):
		t.Fatal("the child's writer did not send")
	}
	publish(t, pub, &sion.Event{Type: "Alarm"})
	queued := child.Links()
	require.Len(t, queued, 1)
	require.Equal(t, 1, queued[0].Queued, "%+v", queued[0])
	tr.closeAll()
	select {
	case <-logs.paused:
	case <-time.After(10 * time.Second):
		t.Fatal("the child's link did not end with events queued")
	}

	links := child.Links()
	tr.hold.Store(false)
	resume()
	require.Len(t, links, 1)
	assert.Equal(t, "parent", links[0].Peer)
	assert.True(t, links[0].Parent)
	assert.NotEqual(t, sion.LinkUp, links[0].State, "%+v", links[0])
	for _, li := range links {
		if li.State == sion.LinkUp {
			assert.False(t, li.Since.IsZero(), "an up link without its Since: %+v", li)
		}
	}
}

package sion_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport/tcp"
)

// freezeProxy forwards TCP connections from its own address to target on
// loopback until freeze: then it stops passing bytes either way but
// keeps the sockets open — a peer that hangs, with no FIN or RST to tell
// anyone (the abrupt failure heartbeats exist for).
type freezeProxy struct {
	l      net.Listener
	target string
	frozen chan struct{}
	once   sync.Once
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &freezeProxy{l: l, target: target, frozen: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		l.Close()
		p.freeze()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *freezeProxy) addr() string { return p.l.Addr().String() }

func (p *freezeProxy) freeze() { p.once.Do(func() { close(p.frozen) }) }

// cut closes the connections through the proxy now (both ends see them
// end); new ones pass again.
func (p *freezeProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *freezeProxy) accept() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(out, in) })
		p.wg.Go(func() { p.pipe(in, out) })
	}
}

// pipe copies from src to dst until either ends; once frozen it passes
// nothing and waits for the sockets to be closed.
func (p *freezeProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.frozen:
			io.Copy(io.Discard, src) // swallow until closed
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// TestAbruptMiddleFailure: the middle switch of sw0 — sw1 — sw2 hangs
// while sw0 keeps publishing (its links go silent, nothing closes them).
// sw2's heartbeats declare it dead, sw2 re-links to sw0, which its probe
// had found, and every event published after the re-link reaches sw2.
func TestAbruptMiddleFailure(t *testing.T) {
	ctx := context.Background()
	tr, err := tcp.New(tcp.Config{HeartbeatInterval: 50 * time.Millisecond, DeadAfter: 500 * time.Millisecond})
	require.NoError(t, err)
	n := newNetwork(t, tr, func(int) string { return "127.0.0.1:0" }, sion.PlaceConfig{}, []int{-1, -1, -1})
	n.linkCfg.ProbeHops = 3
	n.linkCfg.HandshakeTimeout = 2 * time.Second
	to0, to1 := newFreezeProxy(t, n.addrs[0]), newFreezeProxy(t, n.addrs[1])
	n.parent = []int{-1, 0, 1}
	sl1, err := n.sws[1].Link(ctx, tr, to0.addr(), n.linkCfg)
	require.NoError(t, err)
	sl2, err := n.sws[2].Link(ctx, tr, to1.addr(), n.linkCfg)
	require.NoError(t, err)
	_ = sl1
	require.Eventually(t, func() bool { return len(sl2.Alternatives()) == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, n.addrs[0], sl2.Alternatives()[0].Addr, "sw0 answers with its own address")

	sub := subscribe(t, open(t, n.sws[2], "far"), `{type ⊑ Reading}`, sion.WithQueue(1<<16))
	pub := open(t, n.sws[0], "pub")
	stopPublishing := publishThrough(pub, time.Millisecond) // a steady stream through the failure
	time.Sleep(50 * time.Millisecond)                       // some events cross before the failure
	to0.freeze()
	to1.freeze()
	require.Eventually(t, func() bool {
		st, _ := sl2.State()
		return st == sion.LinkUp && sl2.Parent() == n.addrs[0]
	}, 20*time.Second, time.Millisecond, "sw2 re-linked to sw0")
	after := stopPublishing() + 1
	for k := after; k < after+200; k++ {
		publish(t, pub, &sion.Event{Type: "Reading", Attrs: attrs("n", k)})
	}
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, n.sws[0].Flush(fctx)) // the frozen link to sw1 counts as done once declared dead
	got := map[int64]bool{}
	for _, d := range queued(sub) {
		got[must(d.Event.Value("n")).Int()] = true
	}
	missing := 0
	for k := after; k < after+200; k++ {
		if !got[int64(k)] {
			missing++
		}
	}
	assert.Zero(t, missing, "events published after the re-link that did not arrive")
	assert.Positive(t, len(got)-200, "events crossed before the failure too")
}

// publishThrough publishes Reading{n: 1, 2, …} on pub from a goroutine,
// pausing every pause between events (0: back to back), until the
// returned function is called; that returns the last n published.
func publishThrough(pub *sion.Session, pause time.Duration) (stop func() int) {
	quit, last := make(chan struct{}), make(chan int)
	go func() {
		k := 0
		for {
			select {
			case <-quit:
				last <- k
				return
			default:
			}
			k++
			pub.Publish(context.Background(), &sion.Event{Type: "Reading", Attrs: attrs("n", k)})
			if pause > 0 {
				time.Sleep(pause)
			}
		}
	}()
	return func() int {
		close(quit)
		return <-last
	}
}

package mem

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/sion-go/sion/transport"
)

// Defaults for the zero fields of a Config.
const (
	// DefaultBufferFrames is the number of frames each direction of a
	// Conn queues before Send blocks.
	DefaultBufferFrames = 64
	// DefaultBacklogConns is the number of dialed connections a Listener
	// queues before Dial blocks.
	DefaultBacklogConns = 128
)

// Config configures a Network. The zero Config means the defaults.
type Config struct {
	// MaxFrameBytes is the frame size limit of every Conn, in bytes;
	// 0 means transport.DefaultMaxFrameBytes.
	MaxFrameBytes int
	// BufferFrames is the number of frames each direction of a Conn
	// queues, whatever their size, before Send blocks until the peer
	// receives; 0 means DefaultBufferFrames.
	BufferFrames int
	// BacklogConns is the number of connections a Listener queues before
	// they are accepted; Dial blocks while the queue is full, until an
	// Accept takes one, ctx is done or the Listener closes. 0 means
	// DefaultBacklogConns.
	BacklogConns int
}

// Network is an in-process transport.Transport: a namespace of addresses
// where Listeners wait and Conns are dialed. The zero Network is ready to
// use, with the defaults of Config.
//
// A Network is safe for concurrent use by multiple goroutines.
type Network struct {
	cfg Config

	mu        sync.Mutex
	listeners map[string]*listener // by address; mu
	seq       uint64               // number of the last fresh address; mu
}

var _ transport.Transport = (*Network)(nil)

// NewNetwork returns an empty Network configured by cfg. It returns an
// error if a field of cfg is negative.
func NewNetwork(cfg Config) (*Network, error) {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"MaxFrameBytes", cfg.MaxFrameBytes},
		{"BufferFrames", cfg.BufferFrames},
		{"BacklogConns", cfg.BacklogConns},
	} {
		if f.v < 0 {
			return nil, fmt.Errorf("mem: Config.%s is %d, want >= 0", f.name, f.v)
		}
	}
	return &Network{cfg: cfg}, nil
}

// MaxFrameBytes returns the frame size limit, in bytes, of the Conns of n.
func (n *Network) MaxFrameBytes() int {
	return orDefault(n.cfg.MaxFrameBytes, transport.DefaultMaxFrameBytes)
}

// BufferFrames returns the number of frames each direction of a Conn of n
// queues before Send blocks.
func (n *Network) BufferFrames() int {
	return orDefault(n.cfg.BufferFrames, DefaultBufferFrames)
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Listen listens on addr, an arbitrary string. Listen("") picks a fresh
// address, "@1", "@2", …: n never hands out the same fresh address twice
// (also as the LocalAddr of a dialed Conn) and skips those in use. Listen
// returns an error wrapping transport.ErrAddrInUse when another Listener of
// n holds addr. It does not block.
func (n *Network) Listen(addr string) (transport.Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if addr == "" {
		addr = string(n.freshAddr())
	} else if _, ok := n.listeners[addr]; ok {
		return nil, fmt.Errorf("mem: listen %q: %w", addr, transport.ErrAddrInUse)
	}
	if n.listeners == nil {
		n.listeners = make(map[string]*listener)
	}
	l := &listener{
		n:       n,
		addr:    Addr(addr),
		backlog: make(chan *conn, orDefault(n.cfg.BacklogConns, DefaultBacklogConns)),
		done:    make(chan struct{}),
	}
	n.listeners[addr] = l
	return l, nil
}

// Dial connects to the Listener of n at addr. The new Conn's LocalAddr is
// a fresh address ("@N", see Listen) and its RemoteAddr is addr. Dial
// returns once the connection is queued for Accept; it blocks while the
// Listener's backlog is full (Config.BacklogConns), until an Accept makes
// room, ctx is done (it then returns ctx.Err()) or the Listener closes. It
// returns an error wrapping transport.ErrNoListener when no Listener of n
// is at addr, or it closes before queuing the connection.
func (n *Network) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	l := n.listeners[addr]
	var local Addr
	if l != nil {
		local = n.freshAddr()
	}
	n.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("mem: dial %q: %w", addr, transport.ErrNoListener)
	}
	c, s := newPair(local, l.addr, n.MaxFrameBytes(), n.BufferFrames())
	if err := l.queue(ctx, s); err != nil {
		return nil, err
	}
	return c, nil
}

// freshAddr returns an address that n has never handed out and no
// Listener holds.
//
// mu must be held.
func (n *Network) freshAddr() Addr {
	for {
		n.seq++
		a := "@" + strconv.FormatUint(n.seq, 10)
		if _, ok := n.listeners[a]; !ok {
			return Addr(a)
		}
	}
}

// remove frees l's address, if l still holds it.
func (n *Network) remove(l *listener) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners[string(l.addr)] == l {
		delete(n.listeners, string(l.addr))
	}
}

// Addr is an address of a Network: an arbitrary string. It implements
// net.Addr.
type Addr string

// Network returns "mem".
func (a Addr) Network() string { return "mem" }

// String returns a itself.
func (a Addr) String() string { return string(a) }

package sion_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// tcpProxy forwards TCP connections from its own loopback address to a
// target, and can cut them, refuse new ones, or freeze them (stop
// forwarding, as a peer that was stopped with SIGSTOP): the network
// failures remote sessions must survive.
type tcpProxy struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]bool // both sides of every connection forwarded now; mu
	down   bool              // new connections are closed at once; mu
	frozen bool              // nothing is forwarded; mu
	thaw   *sync.Cond        // signals frozen turning false
	cuts   int               // connections cut while they were forwarded; mu
}

// newProxy starts a proxy to target, closed when t ends.
func newProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{l: l, target: target, conns: map[net.Conn]bool{}}
	p.thaw = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		p.frozen = false
		p.thaw.Broadcast()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// Addr returns the address to dial instead of the target's.
func (p *tcpProxy) Addr() string { return p.l.Addr().String() }

func (p *tcpProxy) accept() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = true, true
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(out, in) })
		p.wg.Go(func() { p.pipe(in, out) })
	}
}

// pipe copies from src to dst until either fails, waiting while frozen.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer func() {
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		for p.frozen {
			p.thaw.Wait()
		}
		p.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
	}
}

// cut closes every connection forwarded now, as a network failure does,
// and reports whether there was one.
func (p *tcpProxy) cut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	if len(p.conns) > 0 {
		p.cuts++
		return true
	}
	return false
}

// setDown makes the proxy refuse (close at once) new connections, or
// take them again.
func (p *tcpProxy) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

// freeze stops forwarding on every connection, or resumes it.
func (p *tcpProxy) freeze(frozen bool) {
	p.mu.Lock()
	p.frozen = frozen
	if !frozen {
		p.thaw.Broadcast()
	}
	p.mu.Unlock()
}

package transporttest

import (
	"fmt"
	"sync"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/transport"
)

func (s *suite) dialNoListener(e *env) {
	l := e.listen()
	addr := l.Addr().String()
	require.NoError(e.t, l.Close())
	c, err := e.tr.Dial(e.ctx, addr)
	if c != nil {
		c.Close()
	}
	require.ErrorIs(e.t, err, transport.ErrNoListener, "Dial(%q) after its Listener closed", addr)
	require.Nil(e.t, c, "Conn of a failed Dial")
}

func (s *suite) listenTwice(e *env) {
	l := e.listen()
	l2, err := e.tr.Listen(l.Addr().String())
	if l2 != nil {
		l2.Close()
	}
	require.ErrorIs(e.t, err, transport.ErrAddrInUse, "second Listen(%q)", l.Addr())
	c, sc := e.dial(l) // the first Listener still works
	e.send(c, []byte("ping"))
	require.Equal(e.t, "ping", string(e.recv(sc)))
}

func (s *suite) manyConns(e *env) {
	// dialers goroutines dial at once while acceptors goroutines accept;
	// each connection carries the dialer's ID there and an echo back.
	const dialers, acceptors = 64, 4
	l := e.listen()
	var wg sync.WaitGroup
	errs := make(chan error, 2*dialers+acceptors)
	ids := make(chan string, dialers)
	for id := range dialers {
		wg.Go(func() {
			c, err := e.tr.Dial(e.ctx, l.Addr().String())
			if err != nil {
				errs <- fmt.Errorf("dialer %d: Dial: %w", id, err)
				return
			}
			defer c.Close()
			msg := fmt.Sprint(id)
			if err := c.Send(e.ctx, []byte(msg)); err != nil {
				errs <- fmt.Errorf("dialer %d: Send: %w", id, err)
				return
			}
			echo, err := c.Recv(e.ctx)
			if err == nil && string(echo) != "echo "+msg {
				err = fmt.Errorf("got %q", echo)
			}
			if err != nil {
				errs <- fmt.Errorf("dialer %d: Recv: %w", id, err)
			}
		})
	}
	todo := make(chan struct{}, dialers) // one token per connection to accept
	for range dialers {
		todo <- struct{}{}
	}
	close(todo)
	for range acceptors {
		wg.Go(func() {
			for range todo {
				sc, err := l.Accept(e.ctx)
				if err != nil {
					errs <- fmt.Errorf("acceptor: Accept: %w", err)
					return
				}
				wg.Go(func() {
					defer sc.Close()
					msg, err := sc.Recv(e.ctx)
					if err == nil {
						ids <- string(msg)
						err = sc.Send(e.ctx, append([]byte("echo "), msg...))
					}
					if err != nil {
						errs <- fmt.Errorf("accepted %v: %w", sc.RemoteAddr(), err)
					}
				})
			}
		})
	}
	await(e.t, waitChan(&wg), "dialers and acceptors")
	close(errs)
	for err := range errs {
		require.NoError(e.t, err)
	}
	close(ids)
	seen := make(map[string]bool)
	for id := range ids {
		require.False(e.t, seen[id], "dialer %s accepted twice", id)
		seen[id] = true
	}
	require.Len(e.t, seen, dialers, "dialers accepted")
}

package transporttest

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/transport"
)

func (s *suite) pingPong(e *env) {
	c, sc := e.pair()
	e.send(c, []byte("ping"))
	require.Equal(e.t, "ping", string(e.recv(sc)))
	e.send(sc, []byte("pong"))
	require.Equal(e.t, "pong", string(e.recv(c)))
}

func (s *suite) addresses(e *env) {
	l := e.listen()
	c, sc := e.dial(l)
	for name, a := range map[string]any{
		"dialed LocalAddr": c.LocalAddr(), "dialed RemoteAddr": c.RemoteAddr(),
		"accepted LocalAddr": sc.LocalAddr(), "accepted RemoteAddr": sc.RemoteAddr(),
	} {
		require.NotNil(e.t, a, name)
	}
	assert.Equal(e.t, c.LocalAddr().String(), sc.RemoteAddr().String(), "accepted RemoteAddr")
	assert.Equal(e.t, c.LocalAddr().Network(), sc.RemoteAddr().Network())
	assert.Equal(e.t, l.Addr().Network(), c.RemoteAddr().Network())
	assert.NotEmpty(e.t, l.Addr().String())
}

func (s *suite) order(e *env) {
	const n = 1000
	c, sc := e.pair()
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			if err := c.Send(e.ctx, makeFrame(0, i, e.frameSize(i))); err != nil {
				sent <- fmt.Errorf("frame %d: Send: %w", i, err)
				return
			}
		}
		sent <- nil
	}()
	e.checkSeq(sc, n)
	require.NoError(e.t, await(e.t, sent, "Sends"))
}

// sendAll starts senders goroutines, each sending perSender frames on c,
// and returns where their errors arrive (nil when all succeeded).
func (e *env) sendAll(c transport.Conn, senders, perSender int) <-chan error {
	done := make(chan error, 1)
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for id := range senders {
		wg.Go(func() {
			for i := range perSender {
				if err := c.Send(e.ctx, makeFrame(id, i, e.frameSize(id*perSender+i))); err != nil {
					errs <- fmt.Errorf("sender %d, Send %d: %w", id, i, err)
					return
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(errs)
		done <- <-errs
	}()
	return done
}

func (s *suite) concurrentSenders(e *env) {
	const senders, perSender = 8, 250
	c, sc := e.pair()
	sent := e.sendAll(c, senders, perSender)
	next := make([]int, senders) // next sequence number of each sender
	for range senders * perSender {
		sender, seq, err := parseFrame(e.recv(sc))
		require.NoError(e.t, err)
		require.Less(e.t, sender, senders, "sender")
		require.Equal(e.t, next[sender], seq, "sender %d: frame out of order", sender)
		next[sender]++
	}
	require.NoError(e.t, await(e.t, sent, "Sends"))
}

func (s *suite) concurrentReceivers(e *env) {
	const senders, perSender, receivers = 8, 125, 4
	c, sc := e.pair()
	sent := e.sendAll(c, senders, perSender)
	var mu sync.Mutex
	seen := make(map[[2]int]int) // times each (sender, seq) arrived; mu
	var wg sync.WaitGroup
	errs := make(chan error, receivers)
	var left sync.WaitGroup // one per frame still to receive
	left.Add(senders * perSender)
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	for range receivers {
		wg.Go(func() {
			for {
				f, err := sc.Recv(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				sender, seq, err := parseFrame(f)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				seen[[2]int{sender, seq}]++
				mu.Unlock()
				left.Done()
			}
		})
	}
	await(e.t, waitChan(&left), "receivers")
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(e.t, err)
	}
	require.NoError(e.t, await(e.t, sent, "Sends"))
	require.Len(e.t, seen, senders*perSender, "distinct frames received")
	for k, n := range seen {
		require.Less(e.t, k[0], senders, "sender")
		require.Less(e.t, k[1], perSender, "sequence number")
		require.Equal(e.t, 1, n, "frame %v received %d times", k, n)
	}
}

// waitChan returns a channel closed when wg's counter reaches zero.
func waitChan(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		wg.Wait()
		close(ch)
	}()
	return ch
}

func (s *suite) duplex(e *env) {
	// Both ends send more than any buffer holds before either receives
	// everything: Sends and Recvs in the two directions must not block
	// each other.
	const n = 1000
	c, sc := e.pair()
	fromC := e.sendAll(c, 1, n)
	fromS := e.sendAll(sc, 1, n)
	checked := make(chan error, 1)
	go func() {
		for i := range n {
			f, err := c.Recv(e.ctx)
			if err == nil {
				var seq int
				_, seq, err = parseFrame(f)
				if err == nil && seq != i {
					err = fmt.Errorf("frame %d arrived as %d", seq, i)
				}
			}
			if err != nil {
				checked <- err
				return
			}
		}
		checked <- nil
	}()
	e.checkSeq(sc, n)
	require.NoError(e.t, await(e.t, checked, "Recvs on the dialed end"))
	require.NoError(e.t, await(e.t, fromC, "Sends of the dialed end"))
	require.NoError(e.t, await(e.t, fromS, "Sends of the accepted end"))
}

func (s *suite) sizeLimit(e *env) {
	max := e.caps.MaxFrameBytes
	c, sc := e.pair()
	require.Equal(e.t, max, c.MaxFrameBytes(), "dialed end's MaxFrameBytes")
	require.Equal(e.t, max, sc.MaxFrameBytes(), "accepted end's MaxFrameBytes")
	for _, ends := range []struct {
		name     string
		from, to transport.Conn
	}{{"dialed to accepted", c, sc}, {"accepted to dialed", sc, c}} {
		big := makeFrame(1, 0, max)
		e.send(ends.from, big)
		require.True(e.t, bytes.Equal(big, e.recv(ends.to)), "%s: frame of MaxFrameBytes altered", ends.name)

		err := ends.from.Send(e.ctx, make([]byte, max+1))
		require.ErrorIs(e.t, err, transport.ErrFrameTooLarge, "%s: Send of MaxFrameBytes+1", ends.name)
		e.send(ends.from, []byte("after"))
		require.Equal(e.t, "after", string(e.recv(ends.to)), "%s: frame after the refused one", ends.name)
	}
}

func (s *suite) emptyFrame(e *env) {
	c, sc := e.pair()
	for _, f := range [][]byte{nil, {}} {
		e.send(c, f)
		require.Empty(e.t, e.recv(sc), "frame %#v", f)
	}
	e.send(c, []byte("x"))
	require.Equal(e.t, "x", string(e.recv(sc)), "frame after the empty ones")
}

func (s *suite) bufferReuse(e *env) {
	c, sc := e.pair()
	sent := make(chan error, 1)
	go func() {
		buf := []byte("aaaaaaaa")
		err := c.Send(e.ctx, buf)
		if err == nil {
			copy(buf, "bbbbbbbb") // the sender reuses its buffer
			err = c.Send(e.ctx, buf)
			for i := range buf {
				buf[i] = 'c'
			}
		}
		sent <- err
	}()
	first := e.recv(sc)
	second := e.recv(sc)
	require.NoError(e.t, await(e.t, sent, "Sends"))
	require.Equal(e.t, "aaaaaaaa", string(first), "frame changed by the sender's reuse of its buffer or by the next Recv")
	require.Equal(e.t, "bbbbbbbb", string(second), "frame changed by the sender's reuse of its buffer")

	// The receiver owns what Recv returned: changing it changes nothing
	// the transport delivers later.
	for i := range first {
		first[i], second[i] = 'x', 'y'
	}
	e.send(c, []byte("dddddddd"))
	require.Equal(e.t, "dddddddd", string(e.recv(sc)))
}

package tcp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// waitTimeout bounds every wait for something that must happen, so that
// a hang fails the test; a correct transport never reaches it.
const waitTimeout = 30 * time.Second

// testCtx returns a context done after waitTimeout or when t ends.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func newTransport(t *testing.T, cfg tcp.Config) *tcp.Transport {
	t.Helper()
	tr, err := tcp.New(cfg)
	require.NoError(t, err)
	return tr
}

// listen listens on a fresh loopback port and closes the Listener when t
// ends.
func listen(t *testing.T, tr *tcp.Transport) transport.Listener {
	t.Helper()
	l, err := tr.Listen("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// connect dials l with tr while accepting on l, and returns the dialed
// end c and the accepted end s, admitted (Admit), as an application does
// once its handshake has admitted the peer. When t ends, it closes both,
// then waits until their goroutines have ended.
func connect(t *testing.T, tr *tcp.Transport, l transport.Listener) (c, s *tcp.Conn) {
	t.Helper()
	ctx := testCtx(t)
	type result struct {
		c   transport.Conn
		err error
	}
	dialed := make(chan result, 1)
	go func() {
		c, err := tr.Dial(ctx, l.Addr().String())
		dialed <- result{c, err}
	}()
	sc, err := l.Accept(ctx)
	r := await(t, dialed, "Dial")
	var ends []*tcp.Conn
	for _, e := range []transport.Conn{sc, r.c} {
		if e != nil {
			ends = append(ends, e.(*tcp.Conn))
		}
	}
	closeAtEnd(t, ends...)
	require.NoError(t, err, "Accept")
	require.NoError(t, r.err, "Dial")
	s = sc.(*tcp.Conn)
	s.Admit()
	return r.c.(*tcp.Conn), s
}

// pair returns the two ends of a new connection of one Transport made of
// cfg: c dialed, s accepted.
func pair(t *testing.T, cfg tcp.Config) (c, s *tcp.Conn) {
	t.Helper()
	tr := newTransport(t, cfg)
	return connect(t, tr, listen(t, tr))
}

// closeAtEnd closes conns when t ends, then waits until their goroutines
// end. Close the two ends of a connection together: an admitted Conn
// closed while its peer neither reads nor closes waits WriteTimeout to
// deliver its frames.
func closeAtEnd(t *testing.T, conns ...*tcp.Conn) {
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
		for _, c := range conns {
			await(t, c.Done(), "end of the Conn's goroutines")
		}
	})
}

// await returns what ch delivers, or fails t after waitTimeout.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing within %v", what, waitTimeout)
		var zero T
		return zero
	}
}

// goRecv starts a Recv on c and returns where its frame and error arrive.
func goRecv(ctx context.Context, c transport.Conn) <-chan recvResult {
	ch := make(chan recvResult, 1)
	go func() {
		f, err := c.Recv(ctx)
		ch <- recvResult{f, err}
	}()
	return ch
}

type recvResult struct {
	frame []byte
	err   error
}

// frame returns frame seq of n bytes (at least 4): seq big-endian, then
// bytes derived from seq.
func frame(seq, n int) []byte {
	f := make([]byte, n)
	binary.BigEndian.PutUint32(f, uint32(seq))
	for i := 4; i < n; i++ {
		f[i] = byte(seq*31 + i)
	}
	return f
}

// recvSeq receives frames 0..n-1 of size bytes on c and checks them.
func recvSeq(t *testing.T, ctx context.Context, c transport.Conn, n, size int) {
	t.Helper()
	for i := range n {
		f, err := c.Recv(ctx)
		require.NoError(t, err, "Recv of frame %d of %d", i, n)
		require.True(t, bytes.Equal(frame(i, size), f), "frame %d of %d altered", i, n)
	}
}

// sendUntilBlocked sends frames 0, 1, … of size bytes on c until one
// Send blocks for blockTimeout, and returns how many were sent. The
// blocked frame is not sent.
func sendUntilBlocked(t *testing.T, ctx context.Context, c transport.Conn, size int) int {
	t.Helper()
	const blockTimeout = 50 * time.Millisecond
	for i := 0; ; i++ {
		probe, cancel := context.WithTimeout(ctx, blockTimeout)
		err := c.Send(probe, frame(i, size))
		cancel()
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded, "Send %d", i)
			require.NoError(t, ctx.Err(), "test context")
			return i
		}
	}
}

// pingPong checks that a frame goes each way between c and s.
func pingPong(t *testing.T, ctx context.Context, c, s transport.Conn) {
	t.Helper()
	require.NoError(t, c.Send(ctx, []byte("ping")))
	f, err := s.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, "ping", string(f))
	require.NoError(t, s.Send(ctx, []byte("pong")))
	f, err = c.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, "pong", string(f))
}

// preamble returns the preamble of protocol version 1 announcing limit,
// written out here from the package doc.
func preamble(limit uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{'S', 'I', 'O', 'N', 1}, limit)
}

// record returns frame f on the wire: its length prefix, then f.
func record(f []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...)
}

// rawDial connects a raw TCP socket to addr, closed when t ends.
func rawDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return nc
}

// rawListen listens on a fresh loopback port with a raw TCP listener,
// and returns it and where its accepted sockets arrive. Both close when t
// ends.
func rawListen(t *testing.T) (net.Listener, <-chan net.Conn) {
	t.Helper()
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan net.Conn, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			nc, err := nl.Accept()
			if err != nil {
				return
			}
			accepted <- nc
		}
	}()
	t.Cleanup(func() {
		nl.Close()
		<-done
		close(accepted)
		for nc := range accepted {
			nc.Close()
		}
	})
	return nl, accepted
}

// readPreamble reads the 9-byte preamble of a tcp Conn on nc and checks
// it announces limit.
func readPreamble(t *testing.T, nc net.Conn, limit uint32) {
	t.Helper()
	p := make([]byte, 9)
	require.NoError(t, readFull(nc, p), "reading the preamble")
	require.Equal(t, preamble(limit), p, "preamble")
}

// readFull reads len(p) bytes from nc, within waitTimeout.
func readFull(nc net.Conn, p []byte) error {
	nc.SetReadDeadline(time.Now().Add(waitTimeout))
	_, err := io.ReadFull(nc, p)
	return err
}

// requireEnd reads nc until the other end closes it, which it must do
// within waitTimeout: an EOF, or a reset if it left bytes unread.
func requireEnd(t *testing.T, nc net.Conn, what string) {
	t.Helper()
	readToEnd(t, nc, what)
}

// readToEnd returns what nc receives until the other end closes it,
// which it must do within waitTimeout.
func readToEnd(t *testing.T, nc net.Conn, what string) []byte {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(waitTimeout))
	b, err := io.ReadAll(nc)
	if err != nil {
		require.ErrorIs(t, err, syscall.ECONNRESET, what)
	}
	return b
}

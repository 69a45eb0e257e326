// Package transporttest is the conformance suite of the transport
// contracts: every implementation of transport.Transport (mem, tcp, …)
// passes Run, so each one behaves as the doc comments of package transport
// say. See DESIGN.md, "Network", Transports (S1).
//
// An implementation's test calls Run once per configuration variant:
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, func(t *testing.T) (transport.Transport, string) {
//			return new(mem.Network), "switch-1"
//		}, transporttest.Caps{BufferFrames: mem.DefaultBufferFrames})
//	}
//
// The suite never sleeps to synchronise and makes no timing assertions: a
// call expected to return is given a generous bound (30 s) only so that a
// hang fails the test instead of the whole run, and a Send expected to
// block is recognised by its deadline passing. Run and its subtests are
// safe to run in parallel with other tests; they use only the Transports
// that MakeTransport returns.
package transporttest

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/transport"
)

// MakeTransport returns a fresh Transport for one test, and the address the
// test's first Listener listens on; the suite dials the String form of
// that Listener's Addr. The function registers with t.Cleanup whatever it
// must release. It is called once per subtest.
type MakeTransport func(t *testing.T) (tr transport.Transport, listenAddr string)

// Caps describes the transport under test.
type Caps struct {
	// MaxFrameBytes is the MaxFrameBytes of every Conn the transport
	// makes, in bytes; 0 means transport.DefaultMaxFrameBytes. It must be
	// at least MinFrameBytes.
	MaxFrameBytes int

	// BufferFrames is how many frames a Send may queue in one direction
	// before it blocks because the peer does not receive; 0 means unknown
	// (buffers counted in bytes, as TCP's). When it is known, the suite
	// checks that exactly that many Sends complete and the next one
	// blocks. When it is unknown, the tests of a Send blocked on a full
	// buffer keep sending until the Send fails, and so cannot tell
	// whether it was blocked or merely about to send.
	BufferFrames int

	// PendingFrameBytes is the largest frame, in bytes, that the accepted
	// end of a Conn takes until it is admitted, when it implements
	// transport.Admitter; at most MaxFrameBytes. 0 means the transport
	// has no such budget, and the admission test is skipped. The suite
	// admits every other accepted Conn as soon as Accept returns it.
	PendingFrameBytes int
}

// MinFrameBytes is the smallest Caps.MaxFrameBytes the suite can run with,
// in bytes: its frames carry a 16-byte header.
const MinFrameBytes = 64

const (
	// waitTimeout bounds every call expected to return, so that a hang
	// fails the test; it is never reached by a correct transport.
	waitTimeout = 30 * time.Second
	// blockTimeout is the deadline of a Send that must block.
	blockTimeout = 50 * time.Millisecond
	// floodFrameBytes is the size of the frames that fill a buffer of
	// unknown size.
	floodFrameBytes = 64 << 10
)

// Run runs the conformance suite against the transport that mk makes, one
// subtest per contract (names below). Caps says what to expect of it.
//
// Connections: ping-pong, addresses, order, concurrent-senders,
// concurrent-receivers, duplex, size-limit, empty-frame, buffer-reuse.
// Close: close-unblocks-recv, close-unblocks-send, close-unblocks-accept,
// close-idempotent, close-isolated, peer-close-drains,
// peer-close-unblocks-recv, peer-close-unblocks-send,
// listener-close-closes-unaccepted.
// Contexts: cancel-recv, cancel-send, cancel-accept, cancel-dial.
// Addresses: dial-no-listener, listen-twice, many-conns.
// Admission: admission.
func Run(t *testing.T, mk MakeTransport, caps Caps) {
	if caps.MaxFrameBytes == 0 {
		caps.MaxFrameBytes = transport.DefaultMaxFrameBytes
	}
	require.GreaterOrEqual(t, caps.MaxFrameBytes, MinFrameBytes, "Caps.MaxFrameBytes")
	require.GreaterOrEqual(t, caps.BufferFrames, 0, "Caps.BufferFrames")
	require.GreaterOrEqual(t, caps.PendingFrameBytes, 0, "Caps.PendingFrameBytes")
	require.LessOrEqual(t, caps.PendingFrameBytes, caps.MaxFrameBytes, "Caps.PendingFrameBytes")
	s := &suite{mk: mk, caps: caps}
	for _, tc := range []struct {
		name string
		fn   func(e *env)
	}{
		{"ping-pong", s.pingPong},
		{"addresses", s.addresses},
		{"order", s.order},
		{"concurrent-senders", s.concurrentSenders},
		{"concurrent-receivers", s.concurrentReceivers},
		{"duplex", s.duplex},
		{"size-limit", s.sizeLimit},
		{"empty-frame", s.emptyFrame},
		{"buffer-reuse", s.bufferReuse},
		{"close-unblocks-recv", s.closeUnblocksRecv},
		{"close-unblocks-send", s.closeUnblocksSend},
		{"close-unblocks-accept", s.closeUnblocksAccept},
		{"close-idempotent", s.closeIdempotent},
		{"close-isolated", s.closeIsolated},
		{"peer-close-drains", s.peerCloseDrains},
		{"peer-close-unblocks-recv", s.peerCloseUnblocksRecv},
		{"peer-close-unblocks-send", s.peerCloseUnblocksSend},
		{"listener-close-closes-unaccepted", s.listenerCloseClosesUnaccepted},
		{"cancel-recv", s.cancelRecv},
		{"cancel-send", s.cancelSend},
		{"cancel-accept", s.cancelAccept},
		{"cancel-dial", s.cancelDial},
		{"dial-no-listener", s.dialNoListener},
		{"listen-twice", s.listenTwice},
		{"many-conns", s.manyConns},
		{"admission", s.admission},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(s.env(t)) })
	}
}

type suite struct {
	mk   MakeTransport
	caps Caps
}

// env is what one subtest works with.
type env struct {
	t    *testing.T
	tr   transport.Transport
	addr string // to Listen on
	caps Caps
	ctx  context.Context // done after waitTimeout, or when the test ends
}

func (s *suite) env(t *testing.T) *env {
	t.Helper()
	tr, addr := s.mk(t)
	require.NotNil(t, tr, "MakeTransport returned a nil Transport")
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return &env{t: t, tr: tr, addr: addr, caps: s.caps, ctx: ctx}
}

// listen listens on e.addr and closes the Listener when the test ends.
func (e *env) listen() transport.Listener {
	e.t.Helper()
	l, err := e.tr.Listen(e.addr)
	require.NoError(e.t, err, "Listen(%q)", e.addr)
	require.NotNil(e.t, l.Addr(), "Listener.Addr")
	e.t.Cleanup(func() { l.Close() })
	return l
}

// dial dials l and accepts the connection, concurrently, and closes both
// ends when the test ends. c is the dialed end, s the accepted one,
// admitted if it implements transport.Admitter, as a server does once its
// handshake has admitted the peer.
func (e *env) dial(l transport.Listener) (c, s transport.Conn) {
	e.t.Helper()
	c, s = e.dialPending(l)
	if a, ok := s.(transport.Admitter); ok {
		a.Admit()
	}
	return c, s
}

// dialPending is dial without Admit.
func (e *env) dialPending(l transport.Listener) (c, s transport.Conn) {
	e.t.Helper()
	type result struct {
		c   transport.Conn
		err error
	}
	dialed := make(chan result, 1)
	go func() {
		c, err := e.tr.Dial(e.ctx, l.Addr().String())
		dialed <- result{c, err}
	}()
	s, err := l.Accept(e.ctx)
	if s != nil {
		e.t.Cleanup(func() { s.Close() })
	}
	r := await(e.t, dialed, "Dial")
	if r.c != nil {
		e.t.Cleanup(func() { r.c.Close() })
	}
	require.NoError(e.t, r.err, "Dial")
	require.NoError(e.t, err, "Accept")
	return r.c, s
}

// pair returns the two ends of a new connection: c dialed, s accepted.
func (e *env) pair() (c, s transport.Conn) {
	e.t.Helper()
	return e.dial(e.listen())
}

func (e *env) send(c transport.Conn, frame []byte) {
	e.t.Helper()
	require.NoError(e.t, c.Send(e.ctx, frame), "Send of %d bytes", len(frame))
}

func (e *env) recv(c transport.Conn) []byte {
	e.t.Helper()
	f, err := c.Recv(e.ctx)
	require.NoError(e.t, err, "Recv")
	return f
}

// goCall runs call in a goroutine and returns where its error arrives,
// once the goroutine is about to make the call. The suite cannot observe
// that the call has blocked: the Close or cancel that follows usually
// finds it pending, and the checks hold either way.
func goCall(call func() error) <-chan error {
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		done <- call()
	}()
	<-started
	return done
}

// goRecv starts a Recv on c with ctx and returns where its error arrives.
func goRecv(ctx context.Context, c transport.Conn) <-chan error {
	return goCall(func() error {
		_, err := c.Recv(ctx)
		return err
	})
}

// goAccept starts an Accept on l with ctx and returns where its error
// arrives; a Conn it returns is closed.
func goAccept(ctx context.Context, l transport.Listener) <-chan error {
	return goCall(func() error {
		c, err := l.Accept(ctx)
		if c != nil {
			c.Close()
		}
		return err
	})
}

// await returns the value ch delivers, or fails the test after waitTimeout.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s did not return within %v", what, waitTimeout)
		var zero T
		return zero
	}
}

// within returns what fn returns, running it in a goroutine, or fails the
// test after waitTimeout: for calls that should return through their own
// deadline, which a broken transport might ignore.
func within[T any](t *testing.T, what string, fn func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- fn() }()
	return await(t, ch, what)
}

// Frames of the suite carry a 16-byte header — sender, sequence number,
// length and a checksum of the body — and a body derived from the
// header, so that a frame cut, merged with another or altered is detected.
const headerBytes = 16

// makeFrame returns frame seq of sender: n bytes (at least headerBytes).
func makeFrame(sender, seq, n int) []byte {
	f := make([]byte, n)
	binary.BigEndian.PutUint32(f[0:], uint32(sender))
	binary.BigEndian.PutUint32(f[4:], uint32(seq))
	binary.BigEndian.PutUint32(f[8:], uint32(n))
	var sum uint32
	for i := headerBytes; i < n; i++ {
		f[i] = byte(sender*131 + seq*31 + i*7)
		sum = sum*31 + uint32(f[i])
	}
	binary.BigEndian.PutUint32(f[12:], sum)
	return f
}

// parseFrame returns the sender and sequence number of a frame made by
// makeFrame, or an error saying how it was damaged.
func parseFrame(f []byte) (sender, seq int, err error) {
	if len(f) < headerBytes {
		return 0, 0, fmt.Errorf("frame of %d bytes is shorter than its header", len(f))
	}
	sender = int(binary.BigEndian.Uint32(f[0:]))
	seq = int(binary.BigEndian.Uint32(f[4:]))
	if n := int(binary.BigEndian.Uint32(f[8:])); n != len(f) {
		return 0, 0, fmt.Errorf("frame %d/%d: %d bytes, sent %d", sender, seq, len(f), n)
	}
	if want := makeFrame(sender, seq, len(f)); string(want) != string(f) {
		return 0, 0, fmt.Errorf("frame %d/%d of %d bytes: body altered", sender, seq, len(f))
	}
	return sender, seq, nil
}

// frameSize returns the size of frame seq in tests that vary it: from
// headerBytes up to 300 bytes, or MaxFrameBytes if smaller.
func (e *env) frameSize(seq int) int {
	limit := min(e.caps.MaxFrameBytes, 300)
	return headerBytes + (seq*37)%(limit-headerBytes+1)
}

// checkSeq receives n frames of sender 0 on c and checks they are
// 0..n-1, in order and intact.
func (e *env) checkSeq(c transport.Conn, n int) {
	e.t.Helper()
	for i := range n {
		sender, seq, err := parseFrame(e.recv(c))
		require.NoError(e.t, err)
		require.Equal(e.t, [2]int{0, i}, [2]int{sender, seq}, "frame %d of %d", i, n)
	}
}

// fillResult is how a fill ended: the number of frames sent (all in
// sequence, sender 0, from 0) and the error of the Send that failed.
type fillResult struct {
	sent int
	err  error
}

// fill sends frames on c until a Send blocks, with nobody receiving at
// the other end, and returns where the result arrives once that Send
// fails; the test then unblocks it (Close, cancel of ctx). The frames are
// made by makeFrame(0, i, …).
//
// With Caps.BufferFrames known, fill sends that many, checks that one more
// Send blocks until its deadline, and leaves a last Send blocked (or
// about to block) in a goroutine. Otherwise a goroutine sends
// floodFrameBytes frames until one fails; fill returns after the first
// has been sent.
func (e *env) fill(ctx context.Context, c transport.Conn) <-chan fillResult {
	e.t.Helper()
	res := make(chan fillResult, 1)
	if n := e.caps.BufferFrames; n > 0 {
		for i := range n {
			e.send(c, makeFrame(0, i, headerBytes))
		}
		err := within(e.t, "Send past its deadline", func() error {
			probe, cancel := context.WithTimeout(ctx, blockTimeout)
			defer cancel()
			return c.Send(probe, makeFrame(0, n, headerBytes))
		})
		require.ErrorIs(e.t, err, context.DeadlineExceeded,
			"Send after Caps.BufferFrames=%d unreceived frames did not block", n)
		last := goCall(func() error { return c.Send(ctx, makeFrame(0, n, headerBytes)) })
		go func() {
			if err := <-last; err != nil {
				res <- fillResult{n, err}
				return
			}
			res <- fillResult{n + 1, nil}
		}()
		return res
	}
	size := min(e.caps.MaxFrameBytes, floodFrameBytes)
	first := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			if err := c.Send(ctx, makeFrame(0, i, size)); err != nil {
				if i == 0 {
					close(first)
				}
				res <- fillResult{i, err}
				return
			}
			if i == 0 {
				close(first)
			}
		}
	}()
	await(e.t, first, "first Send of fill")
	return res
}

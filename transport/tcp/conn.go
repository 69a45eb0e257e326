package tcp

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion/transport"
)

// socketBufferBytes is the size of the buffer between a Conn's reader
// goroutine and its socket.
const socketBufferBytes = 32 << 10

// firstChunkBytes is how much of a frame the reader allocates when its
// length arrives; it doubles what it holds each time that is full, so
// that the memory of a frame follows its bytes as they arrive.
const firstChunkBytes = 64 << 10

// Conn is one end of a TCP connection, with TLS if the Transport has a
// TLS config; it implements transport.Conn. Dial and Accept return a
// *Conn as a transport.Conn.
//
// A Conn runs two goroutines: a writer, which writes the frames Send
// queued and sends heartbeats, and a reader, which reads frames into the
// receive buffer for Recv and watches that the peer is alive. Both end
// once Close has delivered the queued frames (or given up, at most
// Config.WriteTimeout later) and the peer has seen the end, or when the
// peer closes, dies or breaks the protocol; Done reports it. An accepted
// Conn closed before Admit does not wait for the peer: its goroutines end
// within UnadmittedCloseTimeout of Close. See the package doc.
//
// The Conn that Accept returns holds its peer to a small receive budget,
// Config.PendingReadBytes, until Admit; the Conn that Dial returns is
// admitted from the start. See the package doc, "Bounds for unadmitted
// peers".
//
// A Conn is safe for concurrent use by multiple goroutines.
type Conn struct {
	nc            net.Conn             // the TLS connection over raw, or raw itself
	raw           net.Conn             // the TCP socket
	tlsState      *tls.ConnectionState // nil for plain TCP
	arrived       time.Time            // when the Listener took the socket in; zero for Dial's
	maxFrameBytes int

	admitted          atomic.Bool
	pendingFrameBytes int // the largest frame the reader takes until admitted
	readBufferBytes   int // rq's limit once admitted

	heartbeatInterval, deadAfter, writeTimeout time.Duration

	wq *writeQueue // the records of the frames Send queued, for the writer
	rq *queue      // frames the reader received, for Recv

	br      *bufio.Reader     // over socketReader; the reader's
	rprefix [prefixBytes]byte // the reader's
	wprefix [prefixBytes]byte // the writer's

	done      chan struct{} // closed when Close starts
	closeOnce sync.Once
	over      chan struct{} // closed when the socket is closed and both goroutines ended
	running   atomic.Int32  // goroutines not yet ended

	// closeAtOnce is set by Close, before it closes done and wq, when c
	// was not admitted: the writer, which reads it once wq is closed,
	// closes the socket once it has written the end of the stream,
	// without waiting for the peer's.
	closeAtOnce bool

	// dmu guards the socket's read deadline, which the reader moves
	// before each read and Close may bring forward.
	dmu           sync.Mutex
	readDeadline  time.Time // the one set on raw; dmu
	closeDeadline time.Time // zero until Close; dmu
}

var (
	_ transport.Conn     = (*Conn)(nil)
	_ transport.Admitter = (*Conn)(nil)
	_ transport.Arrival  = (*Conn)(nil)
)

// newConn returns a Conn over nc, established by a handshake that
// settled on maxFrameBytes, and starts its goroutines. The accepted end
// (server) is not admitted.
func newConn(nc, raw net.Conn, state *tls.ConnectionState, maxFrameBytes int, cfg Config, server bool) *Conn {
	rqLimit := cfg.ReadBufferBytes
	if server {
		rqLimit = min(cfg.PendingReadBytes, cfg.ReadBufferBytes)
	}
	c := &Conn{
		nc:                nc,
		raw:               raw,
		tlsState:          state,
		maxFrameBytes:     maxFrameBytes,
		pendingFrameBytes: min(cfg.PendingReadBytes, maxFrameBytes),
		readBufferBytes:   cfg.ReadBufferBytes,
		heartbeatInterval: cfg.HeartbeatInterval,
		deadAfter:         cfg.DeadAfter,
		writeTimeout:      cfg.WriteTimeout,
		wq:                newWriteQueue(cfg.WriteBufferBytes),
		rq:                newQueue(rqLimit),
		done:              make(chan struct{}),
		over:              make(chan struct{}),
	}
	c.admitted.Store(!server)
	c.br = bufio.NewReaderSize(socketReader{c}, socketBufferBytes)
	c.running.Store(2)
	go c.readLoop()
	go c.writeLoop()
	return c
}

// Send copies frame into the write buffer for the peer and returns nil;
// the writer goroutine writes it to the socket in the background, with
// the frames queued after it, in one write. Send does not keep frame.
//
// Send blocks while the write buffer (Config.WriteBufferBytes) has no
// room for frame, until there is, ctx is done (it returns ctx.Err()),
// the Conn closes (an error wrapping transport.ErrClosed), or
// Config.WriteTimeout passes (an error wrapping ErrWriteBufferFull). A
// frame longer than MaxFrameBytes is refused with an error wrapping
// transport.ErrFrameTooLarge. On ctx, ErrWriteBufferFull and
// ErrFrameTooLarge, the frame is not sent and the Conn stays usable.
// After the peer closed, died (ErrPeerDead) or broke the protocol
// (ErrProtocol), Send returns the same error as Recv. See
// transport.Conn.
func (c *Conn) Send(ctx context.Context, frame []byte) error {
	if isDone(c.done) {
		return errClosed
	}
	if len(frame) > c.maxFrameBytes {
		return fmt.Errorf("tcp: send of %d bytes: %w (MaxFrameBytes is %d)",
			len(frame), transport.ErrFrameTooLarge, c.maxFrameBytes)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	wait, err := c.wq.push(frame)
	if wait == nil {
		return c.sendErr(err)
	}
	full := time.NewTimer(c.writeTimeout)
	defer full.Stop()
	for {
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		case <-full.C:
			return fmt.Errorf("tcp: send of %d bytes to %v: %w for %v (WriteBufferBytes is %d)",
				len(frame), c.RemoteAddr(), ErrWriteBufferFull, c.writeTimeout, c.wq.limit)
		}
		if wait, err = c.wq.push(frame); wait == nil {
			return c.sendErr(err)
		}
	}
}

// sendErr returns what Send returns when the write queue took its frame
// (err nil) or refused it with err.
func (c *Conn) sendErr(err error) error {
	if err != nil && isDone(c.done) {
		return errClosed
	}
	return err
}

// Recv returns the next frame from the peer, in a new slice that the
// caller owns. It blocks until a frame arrives, ctx is done (it returns
// ctx.Err() and takes no frame) or the Conn is closed. After a local Close
// it returns an error wrapping transport.ErrClosed. When the peer closes,
// Recv returns the frames received before, then errors wrapping
// transport.ErrClosed and io.EOF; when the peer died or broke the
// protocol, errors wrapping transport.ErrClosed and ErrPeerDead or
// ErrProtocol; when the connection fails, errors wrapping
// transport.ErrClosed and the socket's error. See transport.Conn.
func (c *Conn) Recv(ctx context.Context) ([]byte, error) {
	for {
		if isDone(c.done) {
			return nil, errClosed
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, ok, wait, err := c.rq.pop()
		if ok {
			return f, nil
		}
		if err != nil {
			return nil, err
		}
		select {
		case <-wait:
		case <-c.done:
			return nil, errClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close closes c: pending and later Sends and Recvs return errors
// wrapping transport.ErrClosed, and frames received but not taken are
// dropped. Close returns at once; in the background, the writer
// goroutine delivers the frames queued by Sends that returned nil, then
// signals the end to the peer, and the reader waits for the peer's end
// before the socket is closed. Both give up Config.WriteTimeout after
// Close, dropping the frames not yet written, so a peer that does not
// read cannot keep the socket open; Done reports when it is closed.
//
// An accepted Conn closed before Admit does not wait for its peer, which
// has not proved who it is and may hold its side open: the writer has
// UnadmittedCloseTimeout (or WriteTimeout, if shorter) to write the
// frames queued, then signals the end and closes the socket without
// waiting for the peer's end, so that its socket and goroutines are gone
// within UnadmittedCloseTimeout of Close. Closing a socket with received
// bytes not yet read (the peer's heartbeats, say) may reset the
// connection, and a reset may make the peer lose what it has not read
// yet: delivery to a peer not admitted — of a refusal, say — is best
// effort. Whether c was admitted is settled when Close is called.
//
// Close is idempotent and returns nil.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		timeout := c.writeTimeout
		if !c.admitted.Load() {
			c.closeAtOnce = true
			timeout = min(timeout, UnadmittedCloseTimeout)
		}
		deadline := time.Now().Add(timeout)
		c.dmu.Lock()
		c.closeDeadline = deadline
		if c.readDeadline.After(deadline) {
			c.readDeadline = deadline
			c.raw.SetReadDeadline(deadline)
		}
		c.dmu.Unlock()
		c.raw.SetWriteDeadline(deadline)
		close(c.done)
		c.wq.close(errClosed)
	})
	return nil
}

// Admit tells c that the application has admitted its peer: it lifts the
// receive budget of an accepted Conn, Config.PendingReadBytes, to
// Config.ReadBufferBytes for the frames c holds and to MaxFrameBytes for
// the frames the peer may send. Until then, a frame announced larger
// than PendingReadBytes closes c with an error wrapping ErrProtocol. Call
// Admit before telling the peer it is admitted, so that the frames it
// sends then find the budget lifted. A Conn returned by Dial is admitted
// from the start. Admit is idempotent, never blocks, and is safe to call
// concurrently with every other method; it implements
// transport.Admitter.
func (c *Conn) Admit() {
	if c.admitted.CompareAndSwap(false, true) {
		c.rq.setLimit(c.readBufferBytes)
	}
}

// abort closes c at once, without delivering queued frames: for a Conn
// that its Listener closes before Accept returned it.
func (c *Conn) abort() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.wq.close(errClosed)
	})
	c.raw.Close()
}

// Done returns a channel that is closed once c's socket is closed and its
// goroutines have ended: after Close, once the queued frames are
// delivered and the peer has seen the end (or Config.WriteTimeout
// passed) — for an accepted Conn closed before Admit, once the queued
// frames are written (or UnadmittedCloseTimeout passed) —, or as soon as
// the peer closes, dies or breaks the protocol. Recv reports why.
func (c *Conn) Done() <-chan struct{} { return c.over }

// LocalAddr returns the address of this end, a *net.TCPAddr.
func (c *Conn) LocalAddr() net.Addr { return c.raw.LocalAddr() }

// RemoteAddr returns the address of the peer, a *net.TCPAddr.
func (c *Conn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }

// MaxFrameBytes returns the frame size limit of c, in bytes: the smaller
// of the two ends' Config.MaxFrameBytes, the same at both ends.
func (c *Conn) MaxFrameBytes() int { return c.maxFrameBytes }

// ArrivedAt returns when the Listener took the connection's socket in,
// before the TLS handshake and the preambles, so that a server bounds its
// whole handshake from then (transport.Arrival); the zero time for a Conn
// from Dial.
func (c *Conn) ArrivedAt() time.Time { return c.arrived }

// TLSConnectionState returns the state of c's TLS connection as it was
// when the handshake completed, and true; or false when c is plain TCP.
// Its PeerCertificates hold the peer's certificate chain (the client's on
// the accepted end of a mutual-TLS connection); the caller must not
// modify them.
func (c *Conn) TLSConnectionState() (tls.ConnectionState, bool) {
	if c.tlsState == nil {
		return tls.ConnectionState{}, false
	}
	return *c.tlsState, true
}

// readLoop is the reader goroutine: it reads frames until the socket
// fails or ends, then ends c with the reason and closes the socket.
func (c *Conn) readLoop() {
	defer c.exit()
	err := c.readFrames()
	switch {
	case isDone(c.done):
		err = errClosed
	case err == io.EOF:
		err = errPeerClosed(c.RemoteAddr())
	case errors.Is(err, ErrProtocol):
	case isTimeout(err):
		err = errDead(c.RemoteAddr(), c.deadAfter)
	default:
		err = errLost(c.RemoteAddr(), err)
	}
	c.wq.close(err) // first, so that Send fails once Recv reports err
	c.rq.close(err)
	c.raw.Close()
}

// readFrames reads records and hands frames to Recv until an error: io.EOF
// if the peer ended between two frames.
func (c *Conn) readFrames() error {
	for {
		if _, err := io.ReadFull(c.br, c.rprefix[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(c.rprefix[:])
		if n == heartbeatLength {
			continue
		}
		if n > uint32(c.maxFrameBytes) {
			return errFrameOverLimit(c.RemoteAddr(), n, c.maxFrameBytes)
		}
		if n > uint32(c.pendingFrameBytes) && !c.admitted.Load() {
			return errFrameOverBudget(c.RemoteAddr(), n, c.pendingFrameBytes)
		}
		f, err := readFrame(c.br, int(n))
		if err != nil {
			return err
		}
		c.deliver(f)
	}
}

// readFrame reads a frame of n bytes from r. It allocates the frame's
// memory as its bytes arrive: firstChunkBytes at first, then twice what
// it holds whenever that is full, up to n; so a peer that announces a
// frame and sends little of it costs little. An end of r before n bytes
// is io.ErrUnexpectedEOF.
func readFrame(r io.Reader, n int) ([]byte, error) {
	f := make([]byte, min(n, firstChunkBytes))
	for got := 0; ; {
		m, err := io.ReadFull(r, f[got:])
		got += m
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if got == n {
			return f, nil
		}
		g := make([]byte, min(n, 2*got))
		copy(g, f)
		f = g
	}
}

// deliver puts f in the receive buffer, waiting for room; after Close, it
// drops f.
func (c *Conn) deliver(f []byte) {
	for !isDone(c.done) {
		wait, err := c.rq.push(f)
		if wait == nil || err != nil {
			return
		}
		select {
		case <-wait:
		case <-c.done:
		}
	}
}

// socketReader reads c's connection, giving each read DeadAfter to
// return: the time the reader spends waiting on the socket, and no other,
// counts toward declaring the peer dead.
type socketReader struct{ c *Conn }

func (r socketReader) Read(p []byte) (int, error) {
	r.c.armReadDeadline()
	return r.c.nc.Read(p)
}

// armReadDeadline sets the socket's read deadline to DeadAfter from now,
// or to Close's deadline if that is sooner.
func (c *Conn) armReadDeadline() {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	d := time.Now().Add(c.deadAfter)
	if !c.closeDeadline.IsZero() && c.closeDeadline.Before(d) {
		d = c.closeDeadline
	}
	c.readDeadline = d
	c.raw.SetReadDeadline(d)
}

// writeLoop is the writer goroutine: it writes the queued frames, and a
// heartbeat whenever it has written nothing for HeartbeatInterval. Once
// Close has been called and the queue is empty, it signals the end to
// the peer and returns; if c was not admitted when Close was called, it
// closes the socket too, which ends the reader. It also returns when the
// reader ends c or a write fails.
func (c *Conn) writeLoop() {
	defer c.exit()
	heartbeat := time.NewTimer(c.heartbeatInterval)
	defer heartbeat.Stop()
	for {
		records, wait, err := c.wq.take()
		switch {
		case len(records) > 0:
			_, werr := c.nc.Write(records)
			c.wq.release(records)
			if werr != nil {
				c.writeFailed(werr)
				return
			}
			heartbeat.Reset(c.heartbeatInterval)
			continue
		case err == errClosed: // by Close, and every frame queued before is written
			if err := c.closeWrite(); err != nil {
				c.writeFailed(err)
			} else if c.closeAtOnce { // set before wq was closed
				c.raw.Close()
			}
			return
		case err != nil: // by the reader
			return
		}
		select {
		case <-wait:
		case <-heartbeat.C:
			binary.BigEndian.PutUint32(c.wprefix[:], heartbeatLength)
			if _, err := c.nc.Write(c.wprefix[:]); err != nil {
				c.writeFailed(err)
				return
			}
			heartbeat.Reset(c.heartbeatInterval)
		}
	}
}

// closeWrite tells the peer that c sends nothing more: a TLS
// close_notify alert, if TLS, then a TCP FIN.
func (c *Conn) closeWrite() error {
	if tc, ok := c.nc.(*tls.Conn); ok {
		if err := tc.CloseWrite(); err != nil {
			return err
		}
	}
	if tc, ok := c.raw.(*net.TCPConn); ok {
		return tc.CloseWrite()
	}
	return nil
}

// writeFailed ends the write side of c after a write failed with err:
// Sends fail from now on. A Conn closing gives up and closes its socket,
// which ends the reader too. Otherwise the socket stays open for the
// reader, which still takes the frames the kernel holds and fails in
// turn once it reaches the broken connection.
func (c *Conn) writeFailed(err error) {
	c.wq.close(errLost(c.RemoteAddr(), err))
	if isDone(c.done) {
		c.raw.Close()
	}
}

// exit records that one of c's goroutines ends; the last one closes over.
func (c *Conn) exit() {
	if c.running.Add(-1) == 0 {
		close(c.over)
	}
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

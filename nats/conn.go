package nats

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/sion-go/sion/transport"
)

// conn is one end of a connection over NATS: it receives on its own
// subject and publishes to its peer's. See the package doc, "Protocol".
//
// A conn has one goroutine of its own, loop, which sends acknowledgements
// and keepalives, retransmits, watches that the peer is alive and, once
// the conn is over, unsubscribes and waits for the subscription's handler
// goroutine (NATS's) to end. Send, Recv and the handler share mu.
type conn struct {
	nc                *natsgo.Conn
	sendSubject       string // the peer's subject
	local, remote     Addr
	maxFrameBytes     int
	cfg               Config    // with defaults
	own               params    // this end's receive window; windowBytes under mu
	arrived0          time.Time // when the Listener took the hello in; zero for Dial's
	pendingFrameBytes int       // the largest frame taken until Admit
	peer              params    // the peer's receive window

	sub     *natsgo.Subscription
	subDone chan struct{} // closed by the subscription's closed handler
	kick    chan struct{} // wakes loop; buffered 1
	done    chan struct{} // closed by Close
	over    chan struct{} // closed when loop has ended and the subscription is gone

	closeOnce sync.Once

	mu sync.Mutex

	// Sending side; mu.
	nextSeq      uint64   // the sequence number of the next message
	sentBytes    uint64   // frame bytes in all messages sent
	unacked      [][]byte // messages from ackedSeq to nextSeq-1, encoded
	ackedSeq     uint64   // the peer has received every message before it
	peerConsumed uint64   // messages the peer's application has taken
	peerBytes    uint64   // frame bytes in them
	credit       chan struct{}
	progressAt   time.Time     // when ackedSeq last moved, or the first unacked message was sent
	rto          time.Duration // the current retransmission timeout
	suspect      uint64        // after a timeout: the messages before it, sent before, are likely lost
	gapResentAt  time.Time     // when the last gap made c resend its unacknowledged messages
	sentAt       time.Time     // when this end last published anything

	// Receiving side; mu.
	expect        uint64   // the sequence number of the next message in order
	partial       [][]byte // chunks of the frame being reassembled
	partialBytes  int
	partialAlone  bool // the frame in partial began when nothing waited for Recv
	rq            []inFrame
	rqMsgs        int
	rqBytes       int
	consumed      uint64 // messages the application has taken
	consumedBytes uint64
	advertised    ack  // the last acknowledgement sent
	gapSeen       bool // a message arrived after a gap since the last acknowledgement
	arrived       chan struct{}
	recvAt        time.Time // when anything last arrived from the peer

	// State; mu.
	closed    bool      // by Close
	endSent   bool      // the end-of-stream marker is queued
	closeBy   time.Time // when a closed conn gives up its peer
	peerEnded bool      // the peer's marker arrived in order, after its frames
	failure   error     // why the conn ended, other than a local Close
	torn      bool      // loop is tearing the conn down: the handler ignores messages
	admitted  bool      // the budget of an accepted end is lifted (Admit); Dial's are from the start
}

// inFrame is a frame waiting for Recv: its bytes and the messages and
// frame bytes it took on the wire.
type inFrame struct {
	data []byte
	msgs int
}

var (
	_ transport.Conn     = (*conn)(nil)
	_ transport.Admitter = (*conn)(nil)
	_ transport.Arrival  = (*conn)(nil)
)

// newConn returns a conn sending to sendSubject; the caller subscribes it
// (c.subscribe) and starts it. An accepted conn holds its peer to
// Config.PendingReadBytes until Admit.
func newConn(nc *natsgo.Conn, cfg Config, local, remote Addr, sendSubject string, accepted bool) *conn {
	now := time.Now()
	c := &conn{
		nc:          nc,
		sendSubject: sendSubject,
		local:       local,
		remote:      remote,
		cfg:         cfg,
		own:         params{maxFrameBytes: cfg.MaxFrameBytes, windowFrames: cfg.WindowFrames, windowBytes: cfg.WindowBytes},
		subDone:     make(chan struct{}),
		kick:        make(chan struct{}, 1),
		done:        make(chan struct{}),
		over:        make(chan struct{}),
		credit:      make(chan struct{}),
		arrived:     make(chan struct{}),
		rto:         cfg.RetransmitTimeout,
		recvAt:      now,
		sentAt:      now,
		admitted:    !accepted,
	}
	c.pendingFrameBytes = c.own.maxFrameBytes
	if accepted {
		c.arrived0 = now
		c.own.windowBytes = min(cfg.PendingReadBytes, cfg.WindowBytes)
		c.pendingFrameBytes = min(cfg.PendingReadBytes, cfg.MaxFrameBytes)
	}
	return c
}

// subscribe subscribes c to subject, on which its peer sends.
func (c *conn) subscribe(subject string) error {
	sub, err := c.nc.Subscribe(subject, c.handle)
	if err != nil {
		return err
	}
	sub.SetClosedHandler(func(string) { close(c.subDone) })
	c.sub = sub
	return nil
}

// start sets the peer's parameters and starts loop.
func (c *conn) start(peer params) {
	c.mu.Lock() // the handler may be taking the peer's first messages
	c.peer = peer
	c.maxFrameBytes = min(c.own.maxFrameBytes, peer.maxFrameBytes)
	c.mu.Unlock()
	go c.loop()
}

// Send sends frame, in one message or, when it exceeds the NATS server's
// max_payload less a 10-byte header, in several; it does not keep frame.
// It blocks while the peer's receive window (its Config.WindowFrames and
// WindowBytes) is full, until Recv at the peer makes room, ctx is done
// (ctx.Err(); nothing is sent), or the Conn closes. It returns nil once
// the frame's messages are published; they are retransmitted until the
// peer acknowledges them.
func (c *conn) Send(ctx context.Context, frame []byte) error {
	if len(frame) > c.maxFrameBytes {
		if c.isClosed() {
			return errClosed
		}
		return fmt.Errorf("nats: send of %d bytes: %w (MaxFrameBytes is %d)",
			len(frame), transport.ErrFrameTooLarge, c.maxFrameBytes)
	}
	chunk := int(c.nc.MaxPayload()) - dataHeaderBytes
	if chunk < MinPayloadBytes-dataHeaderBytes {
		chunk = MinPayloadBytes - dataHeaderBytes // the server's limit refuses: retransmission fails, DeadAfter ends
	}
	msgs := max(1, (len(frame)+chunk-1)/chunk)
	for {
		c.mu.Lock()
		if err := c.sendErrLocked(); err != nil {
			c.mu.Unlock()
			return err
		}
		if err := ctx.Err(); err != nil {
			c.mu.Unlock()
			return err
		}
		if c.fitsLocked(msgs, len(frame)) {
			for i := range msgs {
				part := frame[i*chunk : min(len(frame), (i+1)*chunk)]
				var flags byte
				if i == msgs-1 {
					flags = flagLast
				}
				c.sendLocked(encodeData(c.nextSeq, flags, part), len(part))
			}
			c.mu.Unlock()
			return nil
		}
		wait := c.credit
		c.mu.Unlock()
		select {
		case <-wait:
		case <-c.done:
			return errClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sendErrLocked returns why Send must fail now, or nil. mu must be held.
func (c *conn) sendErrLocked() error {
	switch {
	case c.closed:
		return errClosed
	case c.failure != nil:
		return c.failure
	case c.peerEnded:
		return errPeerClosed(c.remote)
	}
	return nil
}

// fitsLocked reports whether a frame of n bytes in msgs messages fits the
// peer's receive window: it does when nothing is outstanding, or when it
// fits beside what is. mu must be held.
func (c *conn) fitsLocked(msgs, n int) bool {
	outMsgs := c.nextSeq - c.peerConsumed
	outBytes := c.sentBytes - c.peerBytes
	return outMsgs == 0 ||
		outMsgs+uint64(msgs) <= uint64(c.peer.windowFrames) && outBytes+uint64(n) <= uint64(c.peer.windowBytes)
}

// sendLocked publishes the data message m carrying n frame bytes as the
// next in sequence and keeps it for retransmission. mu must be held.
func (c *conn) sendLocked(m []byte, n int) {
	if len(c.unacked) == 0 {
		c.progressAt = time.Now()
	}
	c.unacked = append(c.unacked, m)
	c.nextSeq++
	c.sentBytes += uint64(n)
	c.publishLocked(m)
}

// resendLocked publishes the first n unacknowledged messages again. mu
// must be held.
func (c *conn) resendLocked(n int) {
	for _, m := range c.unacked[:min(n, len(c.unacked))] {
		c.publishLocked(m)
	}
}

// publishLocked publishes m to the peer. A message the NATS client cannot
// take (it is reconnecting and its buffer is full) is lost like one lost
// in a failover, and retransmitted; a closed NATS connection ends c. mu
// must be held.
func (c *conn) publishLocked(m []byte) {
	c.sentAt = time.Now()
	if err := c.nc.Publish(c.sendSubject, m); err != nil && c.nc.IsClosed() {
		c.failLocked(fmt.Errorf("%w: %w: %w", ErrConnLost, err, transport.ErrClosed))
	}
}

// Recv returns the next frame from the peer, in a new slice the caller
// owns. It blocks until a frame arrives, ctx is done (ctx.Err(); no frame
// is taken) or the Conn closes. After a local Close it returns an error
// wrapping transport.ErrClosed; after the peer closed, died or broke the
// protocol, the frames received before, then errors wrapping
// transport.ErrClosed (and io.EOF, ErrPeerDead, ErrProtocol or
// ErrConnLost).
func (c *conn) Recv(ctx context.Context) ([]byte, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, errClosed
		}
		if err := ctx.Err(); err != nil {
			c.mu.Unlock()
			return nil, err
		}
		if len(c.rq) > 0 {
			f := c.rq[0]
			c.rq[0] = inFrame{}
			c.rq = c.rq[1:]
			c.rqMsgs -= f.msgs
			c.rqBytes -= len(f.data)
			c.consumed += uint64(f.msgs)
			c.consumedBytes += uint64(len(f.data))
			// Tell the peer of the room made once a quarter of the
			// window is free, or when nothing is left to take.
			kick := c.consumed-c.advertised.consumed >= uint64(c.own.windowFrames/4) ||
				c.consumedBytes-c.advertised.consumedBytes >= uint64(c.own.windowBytes/4) ||
				len(c.rq) == 0
			c.mu.Unlock()
			if kick {
				c.wake()
			}
			if f.data == nil {
				f.data = []byte{}
			}
			return f.data, nil
		}
		if err := c.failure; err != nil {
			c.mu.Unlock()
			return nil, err
		}
		if c.peerEnded {
			c.mu.Unlock()
			return nil, errPeerClosed(c.remote)
		}
		wait := c.arrived
		c.mu.Unlock()
		select {
		case <-wait:
		case <-c.done:
			return nil, errClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close closes c: pending and later calls return errors wrapping
// transport.ErrClosed, and frames received but not taken are dropped. It
// returns at once; in the background, c retransmits the frames queued
// before and its end-of-stream marker until the peer acknowledges them
// (or Config.CloseTimeout passes — UnadmittedCloseTimeout for an
// accepted Conn not admitted —, or the peer dies), then unsubscribes.
// Close is idempotent and returns nil.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		linger := c.cfg.CloseTimeout
		if !c.admitted {
			linger = min(linger, UnadmittedCloseTimeout)
		}
		c.closeBy = time.Now().Add(linger)
		if c.failure == nil && !c.peerEnded && !c.torn {
			c.endSent = true
			c.sendLocked(encodeData(c.nextSeq, flagEnd, nil), 0)
		}
		c.rq, c.partial = nil, nil
		c.broadcastLocked()
		c.mu.Unlock()
		close(c.done)
		c.wake()
	})
	return nil
}

// abort gives c up at once: it tells the peer (kindAbort) and ends, for
// a conn whose Dial was cancelled or whose Listener closed before Accept.
func (c *conn) abort() {
	c.mu.Lock()
	c.publishLocked([]byte{kindAbort})
	c.failLocked(errClosed)
	c.mu.Unlock()
	c.Close()
}

// Admit tells c that the application has admitted its peer: it lifts the
// receive budget of an accepted Conn, Config.PendingReadBytes, to
// Config.WindowBytes for the frames c holds (the next acknowledgement
// tells the peer) and to MaxFrameBytes for the largest frame. Until then,
// a frame larger than PendingReadBytes closes c with an error wrapping
// ErrProtocol. A Conn returned by Dial is admitted from the start. Admit
// is idempotent, never blocks, and is safe to call concurrently with
// every other method; it implements transport.Admitter.
func (c *conn) Admit() {
	c.mu.Lock()
	if !c.admitted {
		c.admitted = true
		c.own.windowBytes = c.cfg.WindowBytes
	}
	c.mu.Unlock()
	c.wake()
}

// ArrivedAt returns when the Listener took in the Dial's request, the
// transport's whole handshake (transport.Arrival); the zero time for a
// Conn from Dial.
func (c *conn) ArrivedAt() time.Time { return c.arrived0 }

// isClosed reports whether Close was called.
func (c *conn) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// LocalAddr returns the address of this end, an Addr.
func (c *conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the address of the peer, an Addr.
func (c *conn) RemoteAddr() net.Addr { return c.remote }

// MaxFrameBytes returns the smaller of the two ends' Config.MaxFrameBytes.
func (c *conn) MaxFrameBytes() int { return c.maxFrameBytes }

// wake wakes loop, without blocking.
func (c *conn) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// broadcastLocked wakes every Send and Recv waiting. mu must be held.
func (c *conn) broadcastLocked() {
	close(c.credit)
	c.credit = make(chan struct{})
	close(c.arrived)
	c.arrived = make(chan struct{})
}

// failLocked ends c with err, unless it has ended already; loop then
// tears it down. mu must be held.
func (c *conn) failLocked(err error) {
	if c.failure == nil {
		c.failure = err
		c.broadcastLocked()
	}
	c.wake()
}

// handle is the subscription's handler: it runs on NATS's goroutine for
// the subscription, one message at a time, and never blocks.
func (c *conn) handle(m *natsgo.Msg) {
	b := m.Data
	if len(b) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.torn {
		return
	}
	c.recvAt = time.Now()
	var err error
	switch b[0] {
	case kindData:
		err = c.dataLocked(b)
	case kindAck:
		var a ack
		if a, err = decodeAck(b); err == nil {
			c.ackLocked(a)
		}
	case kindAbort:
		c.failLocked(errAborted(c.remote))
	default:
		err = fmt.Errorf("%w: message of kind %#x", ErrProtocol, b[0])
	}
	if err != nil {
		c.failLocked(fmt.Errorf("nats: %v: %w: %w", c.remote, err, transport.ErrClosed))
	}
}

// dataLocked takes a data message. mu must be held.
func (c *conn) dataLocked(b []byte) error {
	if len(b) < dataHeaderBytes {
		return fmt.Errorf("%w: data message of %d bytes", ErrProtocol, len(b))
	}
	flags, seq := b[1], binary.BigEndian.Uint64(b[2:])
	if seq != c.expect || c.peerEnded || c.failure != nil {
		// A duplicate (retransmitted, its acknowledgement lost) or a
		// message after a gap (those before were lost): drop it, and
		// acknowledge what arrived at once, so that the peer resends
		// from there.
		c.advertised.received = ^uint64(0) // force the next acknowledgement
		c.gapSeen = c.gapSeen || seq > c.expect
		c.wake()
		return nil
	}
	c.expect++
	if flags&flagEnd != 0 {
		c.peerEnded = true
		c.broadcastLocked()
		c.wake()
		return nil
	}
	if c.closed {
		return nil // nobody will Recv it; the acknowledgement lets the peer go on
	}
	chunk := b[dataHeaderBytes:]
	if len(c.partial) == 0 {
		c.partialAlone = len(c.rq) == 0
	}
	if c.partialBytes+len(chunk) > c.own.maxFrameBytes {
		return fmt.Errorf("%w: frame over MaxFrameBytes %d", ErrProtocol, c.own.maxFrameBytes)
	}
	if !c.admitted && c.partialBytes+len(chunk) > c.pendingFrameBytes {
		return fmt.Errorf("%w: frame over PendingReadBytes %d before the peer was admitted", ErrProtocol, c.pendingFrameBytes)
	}
	if !c.partialAlone && (c.rqMsgs+len(c.partial)+1 > c.own.windowFrames ||
		c.rqBytes+c.partialBytes+len(chunk) > c.own.windowBytes) {
		return fmt.Errorf("%w: more than the receive window (%d messages, %d bytes)", ErrProtocol,
			c.own.windowFrames, c.own.windowBytes)
	}
	c.partial = append(c.partial, chunk)
	c.partialBytes += len(chunk)
	if flags&flagLast == 0 {
		return nil
	}
	var f []byte
	if len(c.partial) == 1 {
		f = c.partial[0] // NATS gave the message a slice of its own
	} else {
		f = make([]byte, 0, c.partialBytes)
		for _, p := range c.partial {
			f = append(f, p...)
		}
	}
	c.rq = append(c.rq, inFrame{data: f, msgs: len(c.partial)})
	c.rqMsgs += len(c.partial)
	c.rqBytes += len(f)
	c.partial, c.partialBytes = nil, 0
	close(c.arrived)
	c.arrived = make(chan struct{})
	return nil
}

// ackLocked takes an acknowledgement. mu must be held.
func (c *conn) ackLocked(a ack) {
	if a.received > c.nextSeq || a.consumed > a.received {
		c.failLocked(fmt.Errorf("nats: %v: %w: acknowledgement of messages never sent: %w",
			c.remote, ErrProtocol, transport.ErrClosed))
		return
	}
	now := time.Now()
	if a.received > c.ackedSeq {
		c.unacked = c.unacked[a.received-c.ackedSeq:]
		if len(c.unacked) == 0 {
			c.unacked = nil
		}
		c.ackedSeq = a.received
		c.progressAt = now
		c.rto = c.cfg.RetransmitTimeout
		if c.endSent && c.ackedSeq == c.nextSeq {
			c.wake() // the end is acknowledged: loop tears down
		}
		if c.suspect > c.ackedSeq {
			// The message resent on a timeout arrived: those sent with
			// it before the timeout are likely lost too.
			c.resendLocked(int(c.suspect - c.ackedSeq))
		}
		c.suspect = 0
	}
	if a.gap && len(c.unacked) > 0 && now.Sub(c.gapResentAt) >= c.rto {
		// Messages were lost and later ones arrived: resend from the
		// first lost, once per timeout however many messages report it.
		c.resendLocked(len(c.unacked))
		c.gapResentAt, c.progressAt = now, now
	}
	if a.consumed > c.peerConsumed || a.consumedBytes > c.peerBytes || int(a.windowBytes) != c.peer.windowBytes {
		c.peerConsumed = max(c.peerConsumed, a.consumed)
		c.peerBytes = max(c.peerBytes, a.consumedBytes)
		if a.windowBytes > 0 && a.windowBytes <= maxUint32Field {
			c.peer.windowBytes = int(a.windowBytes)
		}
		close(c.credit)
		c.credit = make(chan struct{})
	}
}

// loop is c's goroutine: see conn.
func (c *conn) loop() {
	defer close(c.over)
	tick := time.NewTicker(max(c.cfg.RetransmitTimeout/2, time.Millisecond))
	defer tick.Stop()
	for {
		var now time.Time
		select {
		case <-c.kick:
		case now = <-tick.C:
		}
		if c.step(now) {
			break
		}
	}
	if c.nc.IsClosed() {
		return // NATS ends the subscription's goroutine itself
	}
	if err := c.sub.Unsubscribe(); err == nil {
		<-c.subDone
	}
}

// step does what loop must do on a kick or, with now set, a tick, and
// reports whether c is over.
func (c *conn) step(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nc.IsClosed() {
		c.failLocked(fmt.Errorf("%w: %w", ErrConnLost, transport.ErrClosed))
	}
	if !now.IsZero() && c.failure == nil && !c.peerEnded {
		switch {
		case now.Sub(c.recvAt) > c.cfg.DeadAfter:
			c.failLocked(fmt.Errorf("%w: nothing received from %v for %v: %w",
				ErrPeerDead, c.remote, c.cfg.DeadAfter, transport.ErrClosed))
		case len(c.unacked) > 0 && now.Sub(c.progressAt) >= c.rto:
			// Nothing acknowledged for a timeout: resend the first
			// message only, so that a peer merely slow to acknowledge
			// does not get the whole window again; its acknowledgement
			// brings the others (suspect).
			c.resendLocked(1)
			c.suspect = c.nextSeq
			c.progressAt = now
			c.rto = min(2*c.rto, max(c.cfg.PingInterval, c.cfg.RetransmitTimeout))
		}
	}
	a := ack{received: c.expect, consumed: c.consumed, consumedBytes: c.consumedBytes, windowBytes: uint64(c.own.windowBytes), gap: c.gapSeen}
	if c.failure == nil && (a != c.advertised || !now.IsZero() && now.Sub(c.sentAt) >= c.cfg.PingInterval) {
		// Changed, or a keepalive: it also repeats a lost acknowledgement.
		c.advertised, c.gapSeen = a, false
		c.publishLocked(encodeAck(a))
	}
	over := c.failure != nil || c.peerEnded ||
		c.closed && (c.ackedSeq == c.nextSeq || !now.IsZero() && now.After(c.closeBy))
	if over {
		c.torn = true
		c.unacked = nil
		if c.failure == nil && !c.closed && !c.peerEnded {
			c.failure = errClosed
		}
		c.broadcastLocked()
	}
	return over
}

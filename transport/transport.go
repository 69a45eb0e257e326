// Package transport defines the contracts that carry sion's frames between
// switches, routers and sessions: a Transport listens and dials, a Listener
// accepts, and a Conn sends and receives whole frames. They are shaped after
// net.Listener and net.Conn, but a Conn carries frames — opaque byte slices
// that arrive exactly as they were sent, with a documented size limit —
// instead of a byte stream. See DESIGN.md, "Network", Transports (S1).
//
// An accepted Conn may also implement Admitter: it then holds its peer to a
// small receive budget until the server's own handshake admits the peer,
// so that a peer that has not proved who it is costs little; and Arrival,
// telling when the connection arrived, so that the server's handshake
// deadline counts the transport's handshake too.
//
// The package holds only the contracts and their sentinel errors; each
// implementation lives in its own subpackage (mem runs within one process)
// and passes the conformance suite in transporttest. It imports no other
// package of sion, and never looks inside a frame.
//
// Every Transport, Listener and Conn is safe for concurrent use by multiple
// goroutines.
//
// # Errors
//
// Methods return errors that wrap the sentinels below together with detail
// (the operation, the address), so test them with errors.Is:
//
//	if errors.Is(err, transport.ErrClosed) { … }
//
// A blocking method whose ctx is done returns ctx.Err(), possibly wrapped:
// test it with errors.Is(err, context.Canceled) or
// errors.Is(err, context.DeadlineExceeded).
package transport

import (
	"context"
	"errors"
	"net"
	"time"
)

// DefaultMaxFrameBytes is the frame size limit, in bytes, of an
// implementation that is not configured otherwise: 1 MiB.
const DefaultMaxFrameBytes = 1 << 20

// Sentinel errors, wrapped with detail by every implementation; test them
// with errors.Is.
var (
	// ErrClosed reports a call on, or pending on, a Conn or Listener that
	// was closed locally, and a Recv or Send on a Conn whose peer closed.
	ErrClosed = errors.New("transport: closed")
	// ErrFrameTooLarge reports a Send of a frame longer than the Conn's
	// MaxFrameBytes. The frame is not sent and the Conn stays usable.
	ErrFrameTooLarge = errors.New("transport: frame too large")
	// ErrAddrInUse reports a Listen on an address another Listener holds.
	ErrAddrInUse = errors.New("transport: address in use")
	// ErrNoListener reports a Dial to an address nobody listens on.
	ErrNoListener = errors.New("transport: no listener")
)

// Transport makes connections: it listens on local addresses and dials
// remote ones. The format of an address is the implementation's (a name
// for mem, "host:port" for TCP).
type Transport interface {
	// Listen listens on addr and returns a Listener whose Addr is the
	// address actually bound. An implementation documents what addr ""
	// (or a port 0) means; typically a fresh address it picks. Listen
	// returns an error wrapping ErrAddrInUse when another Listener holds
	// addr. It does not block.
	Listen(addr string) (Listener, error)

	// Dial connects to the Listener at addr and returns the local end of
	// the new Conn; the remote end is returned by that Listener's Accept.
	// Dial returns an error wrapping ErrNoListener when nobody listens on
	// addr. It returns once the Listener has the connection, which
	// Accept then returns; it need not wait for Accept, but may block
	// while the Listener has too many connections not yet accepted (the
	// implementation documents its bound). ctx unblocks it, and Dial then
	// returns ctx's error; ctx does not limit the life of the Conn.
	Dial(ctx context.Context, addr string) (Conn, error)
}

// Listener accepts the connections dialed to its address, like
// net.Listener.
type Listener interface {
	// Accept waits for the next connection dialed to the Listener and
	// returns its local end. It blocks until a connection arrives, ctx is
	// done (it then returns ctx's error and the Listener stays usable), or
	// the Listener is closed (it then returns an error wrapping ErrClosed).
	Accept(ctx context.Context) (Conn, error)

	// Close stops listening and frees the address for another Listen.
	// Pending and later Accepts return errors wrapping ErrClosed;
	// connections dialed but not yet accepted are closed, while the Conns
	// already accepted are not affected. Close is idempotent: calls after
	// the first do nothing and return nil.
	Close() error

	// Addr returns the address the Listener is bound to; its String form
	// can be passed to Dial.
	Addr() net.Addr
}

// Conn is one end of a connection that carries frames: byte slices of
// 0 to MaxFrameBytes bytes whose content the transport never interprets.
//
// A Conn is reliable and ordered: each Send that returns nil delivers its
// frame, whole and exactly once, to one Recv at the other end, in the order
// the Sends returned — unless the connection fails or the peer closes, in
// which case the peer's Recv returns an error. Frames of concurrent Sends
// are never interleaved, and each goroutine's frames keep their order. A
// frame queued by a Send that returned nil is delivered even if the sender
// closes right after (except on a Conn closed before it was admitted;
// see Admitter); the peer's Recv returns the frames sent before the
// close, then an error wrapping ErrClosed.
//
// A Conn is safe for concurrent use by multiple goroutines. Close unblocks
// every pending Send and Recv.
type Conn interface {
	// Send sends frame as one whole frame. A frame may be empty (nil or
	// length 0). Send does not keep frame, nor modify it: the caller may
	// reuse or change it as soon as Send returns.
	//
	// Send may block while the peer is not receiving (the implementation
	// documents how much it buffers). It returns nil once the frame is
	// queued for delivery. It returns an error, and the frame is not sent,
	// when:
	//   - frame is longer than MaxFrameBytes: an error wrapping
	//     ErrFrameTooLarge; the Conn stays usable;
	//   - the Conn is closed, before or during the call: an error
	//     wrapping ErrClosed;
	//   - the peer has closed: an error wrapping ErrClosed, at the latest
	//     once Recv has reported the close (until the Conn learns of it,
	//     Send may succeed and the frame is lost);
	//   - ctx is done before the frame is queued: ctx's error; the Conn
	//     stays usable.
	Send(ctx context.Context, frame []byte) error

	// Recv returns the next frame from the peer, as a new slice that the
	// caller owns (the Conn neither keeps it nor reuses it). An empty
	// frame arrives as a slice of length 0, which may be nil.
	//
	// Recv blocks until a frame arrives, ctx is done, or the Conn is
	// closed. When ctx is done it returns ctx's error, no frame is
	// consumed, and the Conn stays usable. After a local Close it returns
	// an error wrapping ErrClosed. After the peer closes, it returns the
	// frames already sent, in order, and then errors wrapping ErrClosed
	// (an implementation may make them match io.EOF too).
	Recv(ctx context.Context) ([]byte, error)

	// Close closes the Conn. Pending and later Sends and Recvs on it
	// return errors wrapping ErrClosed; the peer receives the frames
	// already sent and then sees the Conn closed. Close does not block on
	// the peer. Close is idempotent: calls after the first do nothing and
	// return nil.
	Close() error

	// LocalAddr returns the address of this end.
	LocalAddr() net.Addr

	// RemoteAddr returns the address of the peer: the other end's
	// LocalAddr.
	RemoteAddr() net.Addr

	// MaxFrameBytes returns the largest frame, in bytes, that Send
	// accepts. It is fixed for the life of the Conn and is the same at
	// both ends.
	MaxFrameBytes() int
}

// Admitter is implemented by a Conn whose accepted end holds the peer to a
// small receive budget until the application admits it, so that a peer
// that has not proved who it is (by the application's own handshake)
// costs the server little. Until Admit, such a Conn buffers few bytes of
// received frames and refuses frames larger than its budget: one breaks
// the connection, whose Recv then returns an error wrapping ErrClosed.
// The implementation documents the budget and the error.
//
// A server calls Admit on each accepted Conn that implements Admitter as
// soon as its handshake has admitted the peer, and before it tells the
// peer so, so that the frames the peer sends then find the budget lifted
// to the Conn's full buffers and MaxFrameBytes. A Conn returned by Dial is
// admitted from the start, and a transport within one process (mem) need
// not implement Admitter.
//
// A server may close at once a Conn it has not admitted: such a Conn,
// closed before Admit, need not wait for the peer to take the frames
// queued or to end its side, and frees the connection within a short
// bound the implementation documents. The frames sent before that Close
// — a refusal, say — are then delivered on a best-effort basis, an
// exception to Conn's delivery on Close.
type Admitter interface {
	// Admit lifts the receive budget of the Conn. It is idempotent, never
	// blocks, and is safe to call concurrently with every method of the
	// Conn.
	Admit()
}

// Arrival is implemented by a Conn that knows when its Listener took the
// connection in, before the transport's own handshake (TLS, preambles),
// so that a server can give the whole handshake — the transport's and its
// own — one deadline from then. ArrivedAt returns the zero time for a
// Conn from Dial, or when it does not know.
type Arrival interface {
	ArrivedAt() time.Time
}

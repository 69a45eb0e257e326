// Package mem implements transport.Transport within one process, for tests
// and for running many switches in one program (like hashicorp/memberlist's
// MockNetwork). See DESIGN.md, "Network", Transports (S1).
//
// A Network is a namespace of addresses, which are arbitrary strings ("a",
// "switch-1"); Listen("") picks a fresh one. Dial connects to a Listener of
// the same Network and returns one end of a Conn; Accept returns the other.
// The two ends are wired by bounded queues of frames, one per direction:
// Send copies the frame into the queue, and blocks while it is full, until
// the peer receives, ctx is done, or either end closes. Nothing is lost,
// duplicated or reordered, and nothing crosses a process.
//
// A Network, its Listeners and its Conns are safe for concurrent use by
// multiple goroutines. The package starts no goroutines, so a Network needs
// no Close: an idle Conn or Listener holds only memory.
//
// # Errors
//
// Errors wrap the transport sentinels (ErrClosed, ErrFrameTooLarge,
// ErrAddrInUse, ErrNoListener); test them with errors.Is. An error of a
// Recv after the peer closed also matches io.EOF. A call whose ctx is done
// returns ctx.Err() unwrapped.
//
// # Locks
//
// Network.mu guards the address table; listener.mu and conn.mu are
// barriers between Close and the calls that may still queue a connection
// or a frame. No lock is held while another is taken.
package mem

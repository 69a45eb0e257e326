package transport

import (
	"context"
	"errors"
	"net/netip"
)

// ErrDatagramTooLarge reports a datagram longer than a PacketConn's
// MaxDatagramBytes. A Send (or Broadcast) of one returns an error wrapping
// it: nothing is sent and the PacketConn stays usable. A received one is
// dropped, never truncated: Recv returns an error wrapping it that names
// the sender, the PacketConn stays usable, and the next Recv waits for the
// next datagram. Test it with errors.Is.
var ErrDatagramTooLarge = errors.New("transport: datagram too large")

// PacketConn sends and receives datagrams: byte slices of 0 to
// MaxDatagramBytes bytes whose content the transport never interprets, each
// addressed to one host and port. Where a Conn is reliable and ordered, a
// PacketConn is best effort (memberlist's packet/stream split): each
// datagram is delivered whole or not at all, and may arrive duplicated or
// out of order. Sion uses it for discovery by broadcast (S1): a new entity
// broadcasts a probe, and the entities that hear it answer the sender.
// Addresses are IPv4 or IPv6 address-port pairs; an implementation
// documents which families it supports.
//
// A PacketConn is safe for concurrent use by multiple goroutines. Close
// unblocks every pending Send, Broadcast and Recv.
type PacketConn interface {
	// Send sends b as one datagram to addr. A datagram may be empty (nil
	// or length 0). Send does not keep b, nor modify it. It returns nil
	// once the datagram is handed to the network, which says nothing of
	// its delivery. It returns an error, and nothing is sent, when:
	//   - b is longer than MaxDatagramBytes: an error wrapping
	//     ErrDatagramTooLarge; the PacketConn stays usable;
	//   - the PacketConn is closed, before or during the call: an error
	//     wrapping ErrClosed;
	//   - ctx is done before the datagram is handed over: ctx's error;
	//     the PacketConn stays usable;
	//   - the network refuses it (no route to addr, for one): the
	//     system's error, wrapped; the PacketConn stays usable.
	Send(ctx context.Context, b []byte, addr netip.AddrPort) error

	// Broadcast sends b as one datagram to port at every broadcast address
	// of the host: the directed broadcast address of each IPv4 address of
	// each interface that is up and broadcast-capable, and the loopback
	// broadcast 127.255.255.255 when the loopback interface is up (package
	// udp lists them with BroadcastAddrs). It returns the addresses it sent
	// to, each once, in no particular order.
	//
	// A failure to send to one address does not stop the others: Broadcast
	// returns an error only when it sent to none, wrapping the first
	// failure. It also returns an error, with the addresses already sent
	// to, when b is longer than MaxDatagramBytes (ErrDatagramTooLarge;
	// nothing is sent), when the PacketConn is closed (ErrClosed) or when
	// ctx is done (ctx's error) before it is through. Like Send, it does
	// not keep b.
	Broadcast(ctx context.Context, b []byte, port uint16) ([]netip.AddrPort, error)

	// Recv waits for the next datagram and returns its bytes, as a new
	// slice that the caller owns, and the address it came from. An empty
	// datagram arrives as a slice of length 0, which may be nil.
	//
	// Recv blocks until a datagram arrives, ctx is done, or the
	// PacketConn is closed. When ctx is done it returns ctx's error, no
	// datagram is consumed, and the PacketConn stays usable. After Close
	// it returns an error wrapping ErrClosed. A datagram longer than
	// MaxDatagramBytes is dropped and Recv returns an error wrapping
	// ErrDatagramTooLarge, along with the sender's address; the next Recv
	// waits for the next datagram.
	Recv(ctx context.Context) ([]byte, netip.AddrPort, error)

	// MaxDatagramBytes returns the largest datagram, in bytes, that Send
	// accepts and Recv returns. It is fixed for the life of the
	// PacketConn; each end has its own, so a sender and its receivers
	// should agree on it.
	MaxDatagramBytes() int

	// LocalAddr returns the address the PacketConn is bound to: the
	// port its peers send to, and an unspecified address when it listens
	// on every interface.
	LocalAddr() netip.AddrPort

	// Close closes the PacketConn and frees its port. Pending and later
	// Sends, Broadcasts and Recvs return errors wrapping ErrClosed;
	// datagrams received and not yet returned are lost. Close is
	// idempotent: calls after the first do nothing and return nil.
	Close() error
}

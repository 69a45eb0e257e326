// Package udp implements transport.PacketConn over UDP and IPv4, for
// discovery by broadcast: a new entity broadcasts a probe, and the
// entities that hear it answer the sender. See DESIGN.md, "Network",
// Discovery (S1).
//
// Listen binds a socket to an IPv4 "host:port" and returns a *Conn, whose
// Send, Broadcast and Recv carry datagrams: best effort, each delivered
// whole or not at all, possibly duplicated or reordered. A Conn speaks no
// protocol of its own: each datagram is one UDP payload, exactly the bytes
// given to Send. A typical discovery pair is a responder that listens on
// "0.0.0.0:port" with Config.Shared, so that every entity of a host hears
// the probes, and a prober on "0.0.0.0:0", an exclusive port where the
// answers arrive:
//
//	responder, err := udp.Listen("0.0.0.0:47474", udp.Config{Shared: true})
//	…
//	probe, from, err := responder.Recv(ctx)
//	…
//	src, err := udp.SourceFor(from.Addr()) // the address from can reach
//	err = responder.Send(ctx, answer(src), from)
//
// A datagram's sender address can be forged, so a responder that answers
// whatever reaches it can be made to send traffic at a third party. It
// should answer with no more bytes than the probe had, probers padding
// their probes to make room (QUIC's anti-amplification rule, RFC 9000
// sections 8.1 and 14.1), and limit how often it answers each sender
// address; sion's Entity does both.
//
// # Datagram size
//
// Each Conn has its own limit, Config.MaxDatagramBytes, which Send and
// Recv enforce: DefaultMaxDatagramBytes (1200) unless configured, at most
// MaxDatagramBytesLimit (65507). 1200 bytes fit in the smallest MTU of an
// IPv6 link (1280), so such a datagram is not fragmented on any IPv4 or
// IPv6 path, where a fragmented one is lost as soon as one fragment is.
// Send refuses a longer datagram; Recv drops one, and returns
// ErrDatagramTooLarge along with its sender rather than a truncated
// datagram. A sender and its receivers should use the same limit.
//
// # Broadcast
//
// Broadcast sends one datagram to each address of BroadcastAddrs: the
// directed broadcast address (such as 192.168.1.255) of each IPv4
// address of each interface that is up and broadcast-capable, and
// 127.255.255.255 for the loopback interface, which reaches the sockets
// of this host only, so that entities on one host find each other
// without any network. The limited broadcast 255.255.255.255 is not
// used: which interface it leaves by depends on the system. Broadcasts do
// not cross routers. A socket receives a broadcast to its port only if it
// is bound to 0.0.0.0 (or to the broadcast address itself); one bound to
// 127.0.0.1 or an interface's address does not. A socket on 0.0.0.0 may
// receive one Broadcast several times, once per address: Linux, for one,
// delivers to this host's own sockets a copy of each broadcast sent out
// of an interface.
//
// # Sharing a port
//
// With Config.Shared, several sockets, in one process or several, may bind
// the same address and port; each receives every broadcast datagram to
// it, and a unicast datagram reaches only one of them. So a responder
// answers at the prober's own address (an exclusive port), never at a
// shared one. On a host with several networks, SourceFor tells which of
// its addresses the prober can reach. Shared sets SO_REUSEADDR and, on
// Linux, macOS and the BSDs, SO_REUSEPORT; on Windows, Solaris, illumos
// and AIX it sets SO_REUSEADDR only, and on js, wasip1 and Plan 9 Listen
// fails with an error wrapping errors.ErrUnsupported.
//
// # Errors
//
// Errors wrap the transport sentinels ErrClosed, ErrDatagramTooLarge and
// ErrAddrInUse; test them with errors.Is. Their text starts with "udp: ".
// Errors of the system are wrapped too. A call whose ctx is done returns
// ctx.Err() unwrapped.
//
// # Locks
//
// A Conn has two locks, each a channel of capacity 1 that a call waits
// for in a select with its ctx and Close, so that neither a done ctx nor
// Close waits behind another call: Conn.rturn serializes Recvs and guards
// the socket's read deadline and the receive buffer; Conn.wturn serializes
// the writes of Send and Broadcast and guards the socket's write
// deadline. No call holds both. The holder blocks on the socket until
// the system delivers, its ctx is done or Close closes the socket; a
// write blocks only while the system's send buffer is full.
package udp

// Package nats implements transport.Transport over a NATS connection, so
// that the shared links of an event place ride a NATS cluster instead of
// their own TCP connections (S1 shared links; issue 19, "NATS as the
// engine when a place outgrows its own links"). See DESIGN.md, "Network",
// Transports, and "Around the library", Interop.
//
// New makes a Transport on a *natsgo.Conn the caller connected and owns
// (Config.Conn). Listen("switch-a") listens on the subject
// "<prefix>.listen.switch-a"; Dial("switch-a") asks that subject for a
// connection, and each connection is an inbox pair: two subjects of its
// own, one per direction. Give every switch of a place a Transport with
// the same Config.SubjectPrefix, and its Serve and Link work as over TCP:
//
//	nc, _ := natsgo.Connect(urls, natsgo.MaxReconnects(-1))
//	tr, _ := nats.New(nats.Config{Conn: nc})
//	l, _ := tr.Listen("switch-a")
//	go sw.Serve(ctx, l)
//	// elsewhere: other.Link(ctx, tr, "switch-a", sion.LinkConfig{})
//
// # What holds over NATS
//
// The whole transport.Conn contract: frames arrive whole, exactly once, in
// order, or the Conn fails; Send blocks while the peer's receive window is
// full, never buffering without bound; Close unblocks every call with
// transport.ErrClosed and still delivers the frames sent before it. NATS
// core delivers at most once, in order from one publisher to one
// subscriber, and loses the messages in flight when a server fails; so
// each message carries a sequence number, the receiver acknowledges what
// arrived, and the sender retransmits what is not acknowledged within
// Config.RetransmitTimeout. A receiver drops a message out of order and
// a duplicate, so a gap is always filled by a retransmission, never
// skipped.
//
// What degrades: latency — each frame crosses the NATS server (two hops
// when the ends are on different servers of a cluster, through the
// route) rather than one socket, and a Conn in a failover waits for its
// NATS client to reconnect and then for a retransmission; throughput is
// bounded by the window and the NATS server rather than by TCP; and
// admission — a Listener's subject is open to every client of the NATS
// account, so restrict who may publish there with NATS permissions, and
// keep sion's own admission (a shared key) on top. Until the application
// admits the peer (transport.Admitter), an accepted Conn holds it to
// Config.PendingReadBytes (64 KiB): its receive window in bytes and its
// largest frame; a Conn closed before Admit lingers at most
// UnadmittedCloseTimeout. So a peer not admitted costs a listening switch
// a subscription, a goroutine and at most PendingReadBytes of frames per
// connection, and at most Config.BacklogConns connections wait for
// Accept. Frames carry no MAC: NATS TLS and accounts protect them.
//
// # When a NATS server fails
//
// Its clients reconnect to another server of the cluster (give them the
// URLs of every server, or let them learn them from the cluster) and
// re-subscribe; the NATS client buffers what is published meanwhile. The
// messages in flight at the failure are lost; the sender's retransmission
// replaces them once both ends are subscribed again, so the Conn goes on
// and sion's links do not notice, beyond a delay. If a client finds no
// server within Config.DeadAfter (5 s by default), its peer hears nothing
// and declares it dead: both ends fail with ErrPeerDead, and sion's
// shared link re-establishes itself on a new Conn once the NATS client is
// back, re-sending its filters (events published while the link is down
// do not cross it, as over TCP).
//
// # Protocol
//
// Subjects, with P = Config.SubjectPrefix ("sion"):
//
//	P.listen.NAME       a Listener's: Dial's requests, Listen's probes
//	P.conn.ID.a         a Conn's accepted end receives here
//	P.conn.ID.d         a Conn's dialed end receives here
//
// ID is a NUID the dialer picks. Each message starts with a kind byte:
//
//	'H' hello, Dial's request: version (1), MaxFrameBytes, WindowFrames,
//	    WindowBytes (each 4 bytes, big-endian), then ID
//	'A' accept, the Listener's reply: its MaxFrameBytes, WindowFrames,
//	    WindowBytes
//	'B' busy, the Listener's reply while its backlog is full: Dial asks
//	    again after 10 ms, then twice as long each time up to 500 ms
//	'Q' probe, Listen's request: 'U' (in use) is the reply of a Listener
//	'D' data: flags (1 byte: last chunk of a frame; end of stream), a
//	    sequence number (8 bytes), then bytes of the frame
//	'K' acknowledgement: the next sequence number expected, the messages
//	    and frame bytes the application has taken, and the window in
//	    bytes (8 bytes each)
//	'X' abort: the peer gives the connection up at once
//
// Dial subscribes to its subject, then sends the hello as a NATS request;
// the Listener subscribes to the other subject, queues the accepted end
// for Accept and replies. No responders (nobody subscribes to the
// Listener's subject) is ErrNoListener — after NoRespondersGrace, since a
// new subscription takes a moment to reach every server of a cluster.
// Each end's MaxFrameBytes is the smaller of the two announced.
//
// A frame travels in one data message, or in several (chunks) when it is
// larger than the NATS server's max_payload (1 MiB by default) less the
// 10-byte header: frames up to MaxFrameBytes are chunked, never refused
// for max_payload. Each message has the next sequence number. The
// receiver takes the message it expects and drops any other; it holds at
// most WindowFrames messages and WindowBytes frame bytes for Recv (a
// frame begun while nothing waits may exceed them). Its acknowledgements
// tell the sender what arrived, which ends their retransmission, and what
// Recv took, which is the sender's credit: Send publishes a frame only
// when its messages fit beside those not yet taken, and waits otherwise.
// The receiver acknowledges when Recv has taken a quarter of a window or
// everything held, every RetransmitTimeout/2 while something arrived, at
// once on a duplicate, and at least every PingInterval as a keepalive.
// So with nothing lost a frame costs one message and about one
// acknowledgement per batch Recv drains (1.006 NATS messages per event
// over a busy shared link, in the benchmark). A receiver that gets a
// message after a gap acknowledges at once with a gap flag, and the
// sender resends every unacknowledged message (at most once per
// RetransmitTimeout). When nothing is acknowledged for RetransmitTimeout
// (doubling, up to PingInterval), the sender resends the first
// unacknowledged message only — a peer merely slow to acknowledge does
// not get the whole window again — and, once it is acknowledged, the
// others sent before the timeout. Close sends a data message with
// the end flag, retransmitted like the others; the peer's Recv reports
// the end (transport.ErrClosed and io.EOF) after the frames before it.
//
// # Goroutines and locks
//
// Each Conn has one goroutine (acknowledgements, keepalives,
// retransmissions, the dead-peer watch) and a NATS subscription, whose
// handler runs on the NATS client's goroutine for it and never blocks.
// A closed Conn keeps them until the peer has acknowledged everything
// (at most Config.CloseTimeout — UnadmittedCloseTimeout for an accepted
// Conn not admitted — or DeadAfter if the peer is gone), then
// unsubscribes and waits for the handler's goroutine to end; a Conn that
// fails ends them at once. A Listener has a subscription and no goroutine
// of its own; its Close waits for the handler's. Closing the NATS
// connection ends them all. A Transport has none. Each Conn has one mutex
// for its state, taken by Send, Recv, Close, the handler and its
// goroutine, and held while publishing (which the NATS client buffers);
// a Listener's mutex orders its Close with the handler queueing a Conn.
// No lock is held while another is taken.
//
// # Errors
//
// Errors wrap the transport sentinels (ErrClosed, ErrFrameTooLarge,
// ErrAddrInUse, ErrNoListener) and this package's (ErrPeerDead,
// ErrProtocol, ErrConnLost); test them with errors.Is. Their text starts
// with "nats: ". A Recv error after the peer closed also matches io.EOF.
// A call whose ctx is done returns ctx.Err(), wrapped by Dial only.
package nats

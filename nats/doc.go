// Package nats puts NATS underneath sion in two ways (issue 19, "NATS as
// the engine when a place outgrows its own links"; see DESIGN.md,
// "Network", Transports, and "Around the library", Interop):
//
//   - Transport implements transport.Transport over a NATS connection, so
//     that the shared links of an event place ride a NATS cluster instead
//     of their own TCP connections (S1 shared links).
//   - Gateway presents a NATS subject space as one entity of an event
//     place (S1's S/x-GW): events go out as CloudEvents on subjects named
//     by their type path, and messages on NATS subjects come in as events
//     (the section "The S/x-GW" below).
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
// Accept. Frames carry no MAC: NATS TLS and accounts protect them. The
// trust boundary is the NATS account: every switch must publish on
// "<prefix>.conn.>", and so can anyone else in the account — a message
// there can end a Conn (its link re-forms; the events in flight are
// lost, as when any link fails) or forge frames. Give the switches an
// account of their own, shared with no other client. A flood of dial
// requests costs the listening switch goroutines and subscriptions that
// it sheds within HandshakeTimeout; over NATS the switch cannot tell the
// requests of one client from another's (their addresses are subjects
// the requester chose), so sion's per-source fairness does not apply.
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
// # The S/x-GW
//
// A Gateway presents a NATS subject space as one entity of an event place
// (S1 SI-GW, and S1's S/x-GW: "from the SION (event place) side, the
// entire Gnutella network appears as one service entity"). It is built on
// sion's public API from an ordinary gateway: the subject space is an
// event place of its own, the subject place, served by one switch inside
// the Gateway on an in-process network (transport/mem), and the caller's
// switch requests the federation to it (Switch.Federate), so the
// caller's DirectionConfigs — Mapping (conversion table) and Firewall
// filters — apply exactly as for any gateway, and interest crosses as for
// any gateway. The subject place's ontology is the caller's place's
// unless GatewayConfig.Ontology names another (then give Mappings).
//
// Out (sion → NATS): one session on the subject switch subscribes
// GatewayConfig.OutFilters (default {type ⊑ *}); that interest crosses
// into the caller's place through the Out firewall, so the events it lets
// through arrive, converted by the Out Mapping, and each is published to
// NATS as a CloudEvent in binary mode (the CloudEvents NATS protocol
// binding): headers ce-specversion, ce-id, ce-source, ce-type, ce-time and
// ce-subject where set, content-type for datacontenttype, one
// ce-<extension> per other attribute (values in the canonical string
// form of their CloudEvents type), and the payload bytes, unchanged, as
// the message data. The sion event becomes a CloudEvent through the
// cloudevents module's Codec (GatewayConfig.CloudEvents; see its doc for
// the mapping). A value a NATS header cannot carry unchanged (a control
// character, leading or trailing white space) sends that event in
// structured mode instead: content-type application/cloudevents+json and
// the JSON event as data (counted in Stats.OutStructured).
//
// Subjects: an event of type T is published on
// "<prefix>.<place>.<path>", where prefix is GatewayConfig.Prefix
// (default "sion"; may hold dots), place the caller's place's name as
// one token, and path the names of the types from a root of the ontology
// down to T, one token each: hazard.natural.seismic.earthquake. Each name
// is escaped reversibly (EscapeToken): every byte other than an ASCII
// letter, digit, '-', '_' or '~' becomes '%' and two upper-case hex
// digits, so "ice quake" is ice%20quake and no name can make a '.',
// '*', '>' or white space. A plain NATS client subscribes by type prefix:
// "sion.usgs.hazard.natural.seismic.>" receives every seismic event (and
// "sion.usgs.hazard.natural.seismic" the events of type seismic itself).
//
// Multiple inheritance: the ontology is a DAG, and a type with several
// parents has several paths from the roots (BGM is-a music and is-a
// seasonal: media.music.BGM and media.seasonal.BGM). Its events are
// published once per path, every copy with the same ce-id, in the order
// of the paths (parents in declaration order, depth first), so each
// prefix subscriber sees the event; a subscriber to the whole space
// ("<prefix>.<place>.>"), or to two prefixes both paths pass, receives
// it once per path and deduplicates by ce-id, as sion does: copies that
// come back in are one event (the ID comes from ce-id). An ontology where
// a type has more than GatewayConfig.MaxTypePaths paths (default 64) is
// refused.
//
// In (NATS → sion): the Gateway subscribes on NATS to the subjects the
// caller's place's interest needs (below), among GatewayConfig.Subjects
// (default "<prefix>.<place>.>") and the keys of GatewayConfig.Types. A
// message with a ce-specversion header (any case) is a binary-mode
// CloudEvent and is decoded with the Codec: the ce-type decides the event
// type (not the subject), and the ID comes from ce-id (a 32-hex-digit id
// is the EventID itself, any other is hashed with ce-source; see the
// cloudevents doc), so two copies of one event are delivered once. A
// message with content-type application/cloudevents+json is a
// structured-mode CloudEvent, read as cloudevents.Handler reads one
// (Codec.FromStructured: an extension that is a JSON number with a
// fraction is refused, not cut to an integer); one with
// application/cloudevents-batch+json is refused. Any other message is
// raw: its event type is GatewayConfig.Types[subject], or,
// for a subject inside "<prefix>.<place>.", the last token of its type
// path (the tokens must be a path from a root, unescaped as above); its
// payload is the message data, with the content-type header as its media
// type (other headers, Nats-Msg-Id included, are ignored); it has no
// attributes and gets a new ID, so a raw message published twice is two
// events. Trace context: a CloudEvent carries the event's W3C trace
// context (sion.Event.TraceParent and TraceState) as the Distributed
// Tracing extension, ce-traceparent and ce-tracestate headers in binary
// mode, both ways; a raw message may carry it in plain traceparent and
// tracestate headers (any case; several tracestate values join with
// ","), and Publish checks it as for any event (a bad one is refused,
// ReasonRefused). A header that would have to be resolved by taking one
// of its values is refused instead, naming it: a ce-* header (the trace
// context's ce-traceparent and ce-tracestate among them) or Content-Type
// that appears more than once, as two values or two spellings of one
// name (ReasonBadCloudEvent; ReasonRefused for a raw message's
// Content-Type), and a raw message's second traceparent (ReasonRefused).
// Each event is published
// into the subject switch by the Gateway's session there; the federation
// carries it into the caller's place only when someone there wants it
// (the gateway's proxy filters) and the In firewall lets it through,
// converted by the In Mapping. A message that does not map — no type
// for its subject, an unknown type, a bad header, an event Publish
// refuses — is refused and counted by reason (Stats.InRefused), never
// delivered, and harms nothing else.
//
// Echo: the Gateway's own NATS subscriptions receive what it published
// when both cover a subject. Those copies come in with the ID the event
// had and the subject switch, which recorded that ID when the event
// crossed into it, drops them as duplicates (Stats.InDuplicates). Its
// memory of IDs is bounded (sion.Event.ID: the last 65,536–131,072); a
// connection made with natsgo.NoEcho() avoids the round trip altogether.
// Events that came in from NATS are never sent out again: the out
// session skips events published on the subject switch itself
// (Control.PlaceHops 0); they pass through its queue all the same (the
// core cannot leave a session's own publications out of its matches).
//
// Interest decides the subscriptions: the filters the subject switch
// holds for the caller's place's interest (what its Switch.Gateways
// reports as GatewayInfo.Filters) name event types; a filter on T needs
// "<prefix>.<place>.<path to T>" and "….>" for every path of T, plus the
// paths of T's descendants that do not pass through T (multiple
// inheritance); a filter on * needs "<prefix>.<place>.>". The Gateway
// subscribes to those subjects that fall in its configured subjects (a
// configured subject that only overlaps one is subscribed whole; one
// outside the type space is subscribed while there is any interest, or,
// for a Types key, while its type is wanted), no subject that another
// covers, and unsubscribes when the interest goes. When the interest
// changes it subscribes to the new subjects before it drains the old ones
// (the messages they hold still come in), so a message on a subject both
// cover is never lost; one published while both are subscribed comes in
// twice — one event for a CloudEvent (its ID), two for a raw message.
// Configured subjects
// that overlap without one covering the other (a.*.c and a.b.>) are both
// subscribed: a message on a subject both match comes in twice, once per
// subscription — one event for a CloudEvent (its ID), two for a raw
// message. The core has no hook
// that tells of a change of a gateway's filters, so the Gateway watches
// them: it re-reads them every GatewayConfig.WatchInterval (default 50
// ms). What that degrades: S2's contract — a Subscribe in the caller's
// place returns once the filter is active everywhere in scope — covers
// events published on NATS only once the Gateway's NATS subscription is
// made, up to one WatchInterval and a NATS round trip after Subscribe
// returned; a message published on NATS meanwhile is not received.
// Events published in the caller's place are not affected. Gateway.Sync
// closes the gap for a caller that needs it: Subscribe returns once the
// subject switch holds the new filter (the gateway acknowledges its
// install, S2), and Sync makes the subscriptions that filter needs and
// waits for the NATS server to confirm them. While the federation is
// re-established after a failure the subject switch reports no filters,
// and the subscriptions go until it is up again (events do not cross
// meanwhile either).
//
// Concurrency: NATS delivers each subscription's messages on a goroutine
// of its own, so messages that arrive on different subscriptions may
// enter sion in another order than they were published; per subscription
// (so per subject), order is kept. Out, events leave in the order the out
// subscription receives them, all copies of one event before the next.
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

// Package tcp implements transport.Transport over TCP, optionally secured
// by TLS, for switches, routers and sessions on different machines. See
// DESIGN.md, "Network", Transports (S1).
//
// New makes a Transport from a Config, whose zero value means the
// defaults. Addresses are "host:port"; Listen("") listens on
// "127.0.0.1:0", a port the system picks. Dial connects to a Listener and
// returns one end of a Conn once the connection is established; Accept
// returns the other. Both are *Conn, whose TLSConnectionState gives the
// peer's certificate when the Transport uses TLS (Config.TLS, mutual TLS
// included). The accepted end holds its peer to a small receive budget
// until the application admits it (Conn.Admit, transport.Admitter).
//
// # Wire format
//
// Once the TCP connection is up and, with TLS, the handshake done, the
// two ends exchange preambles of 9 bytes:
//
//	bytes 0-3  magic: "SION" (0x53 0x49 0x4F 0x4E)
//	byte  4    protocol version: 1
//	bytes 5-8  the sender's Config.MaxFrameBytes, big-endian uint32
//
// The accepting end sends its preamble first; the dialing end reads it
// and then sends its own, which completes the connection for Accept. So
// a Dial that gives up (its ctx done) before leaves no connection
// behind. A preamble with another magic or version fails that
// connection with an error wrapping ErrProtocol: Dial returns it, and
// the Listener closes the connection and goes on accepting others. The
// Conn's MaxFrameBytes is the smaller of the two limits announced, so it
// is the same at both ends. Config.HandshakeTimeout bounds the TLS
// handshake and the preambles together; a plain client of a TLS server,
// which waits for a TLS ClientHello while the client waits for the
// preamble, fails only then.
//
// Then each direction carries a sequence of records, each a 4-byte
// big-endian uint32 length N followed by N bytes:
//
//	N <= MaxFrameBytes   a frame of N bytes (N = 0 is an empty frame)
//	N = 0xFFFFFFFF       a heartbeat, with no bytes after it
//	any other N          a protocol violation (ErrProtocol)
//
// A peer that announces a frame over the Conn's MaxFrameBytes breaks the
// protocol, and so does one that announces a frame over
// Config.PendingReadBytes to an accepted Conn not yet admitted: the Conn
// closes, and its Recv and Send return errors wrapping ErrProtocol and
// transport.ErrClosed. Other Conns are not affected. A Conn ends its
// stream by half-closing the TCP connection (after a TLS close_notify
// alert); the peer's Recv then returns the frames received and an error
// wrapping transport.ErrClosed and io.EOF.
//
// # Buffers
//
// Each Conn has two goroutines and a buffer each way, counted in bytes
// (each frame with its 4-byte prefix), so Caps.BufferFrames is unknown.
// Send copies the frame into the write buffer (Config.WriteBufferBytes,
// 4 MiB by default) and returns; the writer goroutine writes what is
// queued to the socket. While the buffer is full, Send blocks, and after
// Config.WriteTimeout (10 s) gives up with ErrWriteBufferFull, leaving
// the Conn usable. The reader goroutine reads frames into the receive
// buffer (Config.ReadBufferBytes, 4 MiB) for Recv; while it is full, the
// reader stops reading, the kernel's buffers fill up and the peer's Sends
// block. A frame larger than a whole buffer passes when the buffer is
// empty. Until an accepted Conn is admitted (Conn.Admit), its receive
// buffer is Config.PendingReadBytes (64 KiB) and so is the largest frame
// its peer may send; see "Bounds for unadmitted peers". Send appends the
// frame, after its length prefix, to the bytes waiting in the write
// buffer, and the writer writes all that waits in one call, so a burst of
// small frames takes few system calls and no allocation per frame; its
// memory is what waits (up to twice that, as the slice grows), and the
// writer keeps a slice of up to 1 MiB for reuse. The reader reads
// through a 32 KiB buffer and allocates one slice per frame, which Recv
// hands over. The reader commits a frame's memory as its bytes
// arrive, not when its length does: 64 KiB at first (or the frame's
// length, if smaller), then twice what it holds each time that is full,
// up to the length; so a peer that announces a large frame and sends
// little of it costs little.
//
// # Heartbeats
//
// A Conn that has written nothing for Config.HeartbeatInterval (1 s)
// writes a heartbeat; Recv never sees them. A Conn whose reader has
// waited on the socket for Config.DeadAfter (5 s) without receiving
// anything, frame or heartbeat, declares the peer dead and closes: Recv,
// once it has returned the frames received before, and Send return
// errors wrapping ErrPeerDead and transport.ErrClosed. The time the
// reader does not read because the receive buffer is full does not
// count, so an application slow to call Recv never makes its peer look
// dead. A writer blocked on a full socket sends no heartbeat, but then
// the peer is not reading either.
//
// # Listener
//
// A Listener's accept goroutine takes in sockets as they come and starts
// a goroutine per socket for its handshake: the TLS handshake, if any,
// and the preambles, within Config.HandshakeTimeout. At most
// Config.MaxHandshakes (256) handshakes are in progress: when a socket
// arrives with that many, the Listener evicts one — it closes the oldest
// handshake of the source (the remote IP) that holds the most, which in a
// flood is the flood's — so connections that connect and send nothing
// cannot keep others out, and the accept goroutine never stops because
// of handshakes. A legitimate handshake is done within a few round
// trips; only more than MaxHandshakes new connections within them can
// evict it.
//
// Established connections wait for Accept in the backlog. While
// Config.BacklogConns (128) of them wait, the application is slow to
// accept: the accept goroutine stops taking in sockets, and Dials wait in
// the kernel's backlog until an Accept makes room (or their ctx is done,
// or their HandshakeTimeout passes). The handshakes in progress when it
// stops may still complete, so up to BacklogConns + MaxHandshakes
// connections may wait.
//
// The Listener logs (Config.Logger) a Warn record for a connection it
// refuses in its handshake and for a handshake it evicts, at most one per
// source and kind, and 64 in all, every 10 s; the next record says how
// many were suppressed ("suppressed", "suppressed_all_sources"), so a
// flood costs a few lines, from one source or from many.
//
// # Bounds for unadmitted peers
//
// A peer the application has not admitted — it has not passed the
// application's own handshake, sion's Hello and shared-key challenge —
// can make a Listener hold a bounded number of bytes:
//
//   - each handshake in progress, at most MaxHandshakes: a goroutine and
//     a socket, about 6 KiB; with TLS, what crypto/tls holds for the
//     handshake, typically 30 KiB and at most about 300 KiB (one
//     handshake message, 64 KiB, or 256 KiB for a certificate chain, and
//     a record);
//   - each established Conn not yet admitted, whether in the backlog (at
//     most BacklogConns + MaxHandshakes) or accepted: two goroutines, a
//     32 KiB buffer each way, at most PendingReadBytes of received frames
//     and one frame of at most PendingReadBytes being read, so about 2 ×
//     PendingReadBytes + 80 KiB (with TLS, some 40 KiB more for its
//     records); plus the frames the application sends on it, which it
//     controls.
//
// With the defaults and plain TCP: 256 × 6 KiB ≈ 1.5 MiB for the
// handshakes, plus 208 KiB for each Conn not admitted: ≈ 78 MiB for a
// backlog of 384, its most, plus 208 KiB for each of the A Conns accepted
// and not yet admitted. The application bounds A: it admits or closes
// each Conn within its own handshake's deadline, and caps the handshakes
// it runs at once, as the Listener does. The kernel's socket buffers
// (net.ipv4.tcp_rmem and tcp_wmem on Linux) come on top of this, outside
// the process's heap, for each socket.
//
// Once the application closes a Conn it has not admitted, the peer holds
// its socket, goroutines and buffers for at most UnadmittedCloseTimeout
// (250 ms), while the Conn writes what was queued, even if the peer
// holds its side open and sends heartbeats: the Conn does not wait for
// the peer's end of stream (see "Close"). A Conn closed after Admit may
// wait WriteTimeout (10 s) for its peer.
//
// An admitted peer is held to Config.ReadBufferBytes and MaxFrameBytes,
// and its frames too cost memory only as their bytes arrive.
//
// # Close
//
// Conn.Close fails pending and later calls with transport.ErrClosed and
// returns at once. In the background, the writer delivers every frame
// queued by a Send that returned nil and ends the stream; the reader
// drops what still arrives until the peer ends its side (a Conn ends its
// side as soon as it reads the end of the peer's), and then the socket
// closes. All this is bounded by Config.WriteTimeout from Close, so a
// peer that does not read keeps the socket for no longer: past it,
// frames not yet written are lost. Conn.Done reports when the socket is
// closed and the Conn's goroutines have ended. So Close does not wait
// for the peer, yet every goroutine it stops has ended WriteTimeout
// after it at the latest.
//
// An accepted Conn closed before Admit — a peer the application evicts,
// refuses or gives up on in its own handshake — does not wait for its
// peer's end: the writer has UnadmittedCloseTimeout (250 ms), or
// WriteTimeout if shorter, to write the frames queued, then ends the
// stream and closes the socket at once, which ends the reader. Closing a
// socket with received bytes not yet read may make the system reset the
// connection, and a peer that gets a reset may lose what it had not yet
// read, so the frames sent to a peer not admitted — a refusal, say — are
// delivered on a best-effort basis. Admitted Conns, those returned by
// Dial included, close as above.
//
// A Conn whose reader reaches the end of the peer's stream, finds the
// peer dead or the protocol broken closes its socket and ends its
// goroutines at once, without Close; Close is still harmless.
//
// Listener.Close closes the listening socket, fails Accepts, ends the
// handshakes in progress and closes the connections not yet accepted,
// then waits for all their goroutines. Every goroutine of the package
// belongs to a Listener (its accept loop, its handshakes) or a Conn (its
// reader and writer); a Transport has none.
//
// # Errors
//
// Errors wrap the transport sentinels (ErrClosed, ErrFrameTooLarge,
// ErrAddrInUse, ErrNoListener) and this package's (ErrPeerDead,
// ErrWriteBufferFull, ErrProtocol); test them with errors.Is. Their text
// starts with "tcp: ". Listen wraps
// ErrAddrInUse when the system reports EADDRINUSE, and Dial wraps
// ErrNoListener when it reports ECONNREFUSED; both also wrap the system's
// error. A Recv error after the peer closed also matches io.EOF, and
// after the connection failed, the socket's error. A call whose ctx is
// done returns ctx.Err(), wrapped by Dial only.
//
// # Locks
//
// Each of a Conn's two queues has a mutex guarding its frames (and, for
// the receive queue, its limit, which Admit raises); Conn.dmu guards the
// socket's read deadline; Listener.mu is a barrier between Close and the
// handshakes that may still queue a connection; the Listener's table of
// handshakes and its log rate limit (package internal/guard) each have
// their own. No lock is held while another is taken, except Listener.mu
// while the Listener aborts a connection (which takes that Conn's write
// queue's mutex), and none while blocking on the network.
package tcp

package tcp

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/sion-go/sion/transport"
)

// Defaults for the zero fields of a Config.
const (
	// DefaultHandshakeTimeout bounds the TLS handshake and the preamble
	// exchange of each connection.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultHeartbeatInterval is how long a Conn writes nothing before it
	// sends a heartbeat.
	DefaultHeartbeatInterval = time.Second
	// DefaultDeadAfterIntervals is Config.DeadAfter, when zero, in
	// heartbeat intervals: 5, so 5 s with DefaultHeartbeatInterval.
	DefaultDeadAfterIntervals = 5
	// DefaultWriteBufferBytes is the size of a Conn's write buffer, in
	// bytes: 4 MiB.
	DefaultWriteBufferBytes = 4 << 20
	// DefaultReadBufferBytes is the size of a Conn's receive buffer, in
	// bytes: 4 MiB.
	DefaultReadBufferBytes = 4 << 20
	// DefaultWriteTimeout bounds a Send blocked on a full write buffer,
	// and the flush of a closed Conn that was admitted.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultBacklogConns is the number of established connections a
	// Listener holds for Accept before it stops taking in sockets.
	DefaultBacklogConns = 128
	// DefaultMaxHandshakes is the number of connections a Listener holds
	// in their handshake at once: 256.
	DefaultMaxHandshakes = 256
	// DefaultPendingReadBytes is the receive budget, in bytes, of an
	// accepted Conn until Admit: 64 KiB.
	DefaultPendingReadBytes = 64 << 10
)

// MaxFrameBytesLimit is the largest value of Config.MaxFrameBytes, in
// bytes: 2^31-1, so that every length fits the 4-byte length prefix of a
// frame and lengths from 2^31 on stay free for the protocol (see the
// package doc, "Wire format").
const MaxFrameBytesLimit = math.MaxInt32

// UnadmittedCloseTimeout bounds how long an accepted Conn closed before
// Admit writes the frames queued before Close (Config.WriteTimeout
// bounds it too, if shorter): 250 ms. Then it closes its socket without
// waiting for the peer's end of stream, so a peer that has not been
// admitted keeps its socket and goroutines no longer. See Conn.Close.
const UnadmittedCloseTimeout = 250 * time.Millisecond

// Config configures a Transport. The zero Config means the defaults. A
// Config is copied by New; the TLS config it points to is not, and must
// not be changed once passed.
type Config struct {
	// MaxFrameBytes is the largest frame, in bytes, that this end sends
	// and accepts; at most MaxFrameBytesLimit; 0 means
	// transport.DefaultMaxFrameBytes. The two ends announce their limit
	// when they connect, and each Conn's MaxFrameBytes is the smaller
	// one, the same at both ends.
	MaxFrameBytes int

	// TLS, when not nil, secures every connection: Listen uses it as the
	// server config, Dial as the client config. Dial uses a clone and,
	// when its ServerName is empty, sets it to the host part of the
	// dialed address. For mutual TLS, set ClientAuth to
	// tls.RequireAndVerifyClientCert (and ClientCAs) in the server's
	// config and Certificates in the client's; Conn.TLSConnectionState
	// then gives the peer's certificate. A Transport that both listens
	// and dials uses one config for both roles: its Certificates then
	// serve as server and client certificate (or GetClientCertificate
	// gives the client's), RootCAs verifies servers and ClientCAs
	// clients. nil means plain TCP.
	TLS *tls.Config

	// HandshakeTimeout bounds the TLS handshake and the preamble exchange
	// of a connection, at both ends; 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration

	// HeartbeatInterval is how long a Conn writes nothing before it sends
	// a heartbeat to show it is alive; 0 means DefaultHeartbeatInterval.
	// The ends do not exchange it, so the peer's DeadAfter must exceed it
	// by a margin: give every end the same HeartbeatInterval and
	// DeadAfter.
	HeartbeatInterval time.Duration

	// DeadAfter is how long a Conn waits for the peer to send anything (a
	// frame or a heartbeat) before it declares the peer dead and closes
	// (ErrPeerDead). It must exceed HeartbeatInterval, and should be
	// several times it; 0 means DefaultDeadAfterIntervals ×
	// HeartbeatInterval. The time a Conn spends not reading because its
	// receive buffer is full (the application is not calling Recv) does
	// not count.
	DeadAfter time.Duration

	// WriteBufferBytes is how many bytes of frames, each counted with its
	// 4-byte length prefix, a Conn queues for the socket; Send blocks
	// while they do not fit. A frame larger than the whole buffer is
	// queued when the buffer is empty. 0 means DefaultWriteBufferBytes.
	WriteBufferBytes int

	// WriteTimeout is how long a Send waits for room in the write buffer
	// before it gives up with ErrWriteBufferFull; it also bounds how long
	// a closed Conn tries to deliver the frames still queued and waits
	// for the peer's end of stream (UnadmittedCloseTimeout bounds that
	// for an accepted Conn closed before Admit). 0 means
	// DefaultWriteTimeout.
	WriteTimeout time.Duration

	// ReadBufferBytes is how many bytes of received frames, each counted
	// with its 4-byte length prefix, a Conn holds for Recv; while they do
	// not fit, the Conn stops reading the socket and the peer's Sends
	// eventually block. A frame larger than the whole buffer is held when
	// the buffer is empty. 0 means DefaultReadBufferBytes.
	ReadBufferBytes int

	// BacklogConns is how many established connections a Listener holds
	// for Accept before it stops taking in sockets: a Dial then waits in
	// the kernel's backlog until an Accept makes room, its ctx is done or
	// its HandshakeTimeout passes. The handshakes in progress when the
	// Listener stops may still complete, so up to BacklogConns +
	// MaxHandshakes connections may wait for Accept. Connections in their
	// handshake do not count: MaxHandshakes bounds them. 0 means
	// DefaultBacklogConns.
	BacklogConns int

	// MaxHandshakes is how many connections a Listener holds in their
	// handshake (TLS and preamble) at once. When a socket arrives with
	// MaxHandshakes in progress, the Listener evicts one — it closes the
	// oldest handshake of the source (the remote IP) that holds the most —
	// so that connections that send nothing cannot keep others out: the
	// Listener never stops taking sockets because of handshakes. A
	// legitimate handshake, done within a few round trips, is evicted
	// only by more than MaxHandshakes new connections within them. 0
	// means DefaultMaxHandshakes.
	MaxHandshakes int

	// PendingReadBytes is the receive budget, in bytes, of an accepted
	// Conn until the application admits its peer (Conn.Admit): the Conn
	// holds at most that many bytes of received frames (each counted
	// with its 4-byte length prefix; a frame larger than the budget is
	// held alone), and a frame announced larger than PendingReadBytes
	// breaks the protocol (ErrProtocol: the Conn closes). Admit lifts
	// them to ReadBufferBytes and MaxFrameBytes. A budget over either
	// counts as it. Conns returned by Dial are admitted from the start. 0
	// means DefaultPendingReadBytes. See the package doc, "Bounds for
	// unadmitted peers".
	PendingReadBytes int

	// Logger receives a Warn record when a Listener refuses a connection
	// during its handshake — a TLS failure (with mutual TLS: a client
	// without a certificate the server trusts), a bad preamble, a
	// HandshakeTimeout passed — naming the remote address and the
	// reason, and when it evicts a handshake (MaxHandshakes), naming the
	// source, so that refusals that never reach Accept are not silent.
	// Records are rate-limited: at most one per source (remote IP) and
	// kind every 10 s, each with the number of records suppressed for
	// that source and kind since the last one ("suppressed"), so that a
	// flood costs a few lines. nil discards them.
	Logger *slog.Logger
}

// withDefaults returns cfg with its zero fields set to the defaults.
func (cfg Config) withDefaults() Config {
	if cfg.MaxFrameBytes == 0 {
		cfg.MaxFrameBytes = transport.DefaultMaxFrameBytes
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.DeadAfter == 0 {
		cfg.DeadAfter = DefaultDeadAfterIntervals * cfg.HeartbeatInterval
	}
	if cfg.WriteBufferBytes == 0 {
		cfg.WriteBufferBytes = DefaultWriteBufferBytes
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.ReadBufferBytes == 0 {
		cfg.ReadBufferBytes = DefaultReadBufferBytes
	}
	if cfg.BacklogConns == 0 {
		cfg.BacklogConns = DefaultBacklogConns
	}
	if cfg.MaxHandshakes == 0 {
		cfg.MaxHandshakes = DefaultMaxHandshakes
	}
	if cfg.PendingReadBytes == 0 {
		cfg.PendingReadBytes = DefaultPendingReadBytes
	}
	return cfg
}

// validate returns an error naming the first field of cfg out of range.
func (cfg Config) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"MaxFrameBytes", cfg.MaxFrameBytes},
		{"WriteBufferBytes", cfg.WriteBufferBytes},
		{"ReadBufferBytes", cfg.ReadBufferBytes},
		{"BacklogConns", cfg.BacklogConns},
		{"MaxHandshakes", cfg.MaxHandshakes},
		{"PendingReadBytes", cfg.PendingReadBytes},
	} {
		if f.v < 0 {
			return fmt.Errorf("tcp: Config.%s is %d, want >= 0", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"HandshakeTimeout", cfg.HandshakeTimeout},
		{"HeartbeatInterval", cfg.HeartbeatInterval},
		{"DeadAfter", cfg.DeadAfter},
		{"WriteTimeout", cfg.WriteTimeout},
	} {
		if f.v < 0 {
			return fmt.Errorf("tcp: Config.%s is %v, want >= 0", f.name, f.v)
		}
	}
	if cfg.MaxFrameBytes > MaxFrameBytesLimit {
		return fmt.Errorf("tcp: Config.MaxFrameBytes is %d, want <= %d", cfg.MaxFrameBytes, MaxFrameBytesLimit)
	}
	d := cfg.withDefaults()
	if d.DeadAfter <= d.HeartbeatInterval {
		return fmt.Errorf("tcp: Config.DeadAfter is %v, want more than HeartbeatInterval (%v)",
			d.DeadAfter, d.HeartbeatInterval)
	}
	return nil
}

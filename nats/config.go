package nats

import (
	"fmt"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/sion-go/sion/transport"
)

// Defaults for the zero fields of a Config.
const (
	// DefaultSubjectPrefix is the first tokens of every subject the
	// Transport uses: "_sion", apart from the Gateway's subject space
	// (DefaultPrefix, "sion"), so that a client subscribed to "sion.>"
	// sees no link traffic and no place's name can collide with the
	// Transport's "listen" and "conn" subjects. Links are internal, as
	// NATS's own "_INBOX" subjects are.
	DefaultSubjectPrefix = "_sion"
	// DefaultWindowFrames is how many messages (a frame is one message,
	// or several for a frame over the server's max_payload) a Conn holds
	// for Recv, and so how many its peer may send before Send blocks:
	// 1,024.
	DefaultWindowFrames = 1024
	// DefaultWindowBytes is how many bytes of frames a Conn holds for
	// Recv, and so how many its peer may send before Send blocks: 4 MiB.
	DefaultWindowBytes = 4 << 20
	// DefaultBacklogConns is how many dialed connections a Listener holds
	// for Accept before it answers Dials "busy" (they retry): 128.
	DefaultBacklogConns = 128
	// DefaultHandshakeTimeout bounds one Dial's wait for the Listener's
	// reply, and Listen's check that nobody else listens: 10 s.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultPingInterval is how long a Conn sends nothing before it
	// sends a keepalive (an acknowledgement): 1 s.
	DefaultPingInterval = time.Second
	// DefaultDeadAfterIntervals is Config.DeadAfter, when zero, in ping
	// intervals: 5, so 5 s with DefaultPingInterval.
	DefaultDeadAfterIntervals = 5
	// DefaultRetransmitTimeout is how long a Conn waits for the peer to
	// acknowledge a message before it resends: 250 ms, doubling while
	// nothing is acknowledged, up to PingInterval.
	DefaultRetransmitTimeout = 250 * time.Millisecond
	// DefaultPendingReadBytes is the receive budget, in bytes, of an
	// accepted Conn until Admit: 64 KiB.
	DefaultPendingReadBytes = 64 << 10
	// DefaultCloseTimeout bounds how long a closed Conn keeps sending the
	// frames queued before Close (and its end-of-stream marker) until the
	// peer acknowledges them: 10 s.
	DefaultCloseTimeout = 10 * time.Second
)

// UnadmittedCloseTimeout bounds how long an accepted Conn closed before
// Admit keeps retransmitting what it sent (Config.CloseTimeout bounds it
// too, if shorter): 250 ms. So a peer that has not been admitted keeps
// its subscription and goroutine no longer, and what was sent to it — a
// refusal, say — is delivered on a best-effort basis.
const UnadmittedCloseTimeout = 250 * time.Millisecond

// MinPayloadBytes is the smallest max_payload, in bytes, of a NATS server
// that the Transport works with: its messages need room for a header and
// some frame bytes.
const MinPayloadBytes = 256

// Config configures a Transport. The zero value of each field but Conn
// means its default. New copies the Config; the NATS connection is used,
// never closed, by the Transport.
type Config struct {
	// Conn is the NATS connection the Transport publishes and subscribes
	// on; required. Its owner closes it, after closing the Listeners and
	// Conns of the Transport (whose goroutines and subscriptions end when
	// it closes, failing their calls). Give it reconnection to every
	// server of the cluster (natsgo.MaxReconnects(-1) and the servers'
	// URLs) so that Conns survive the loss of one server (see the
	// package doc, "When a NATS server fails"). The server must support
	// headers (NATS 2.2 or later) for Dial to learn at once that nobody
	// listens ("no responders").
	Conn *natsgo.Conn

	// SubjectPrefix is the first tokens of every subject: Listen(name)
	// listens on SubjectPrefix + ".listen." + name, and each Conn
	// receives on SubjectPrefix + ".conn." + an ID + ".d" (the dialed end)
	// or ".a" (the accepted end). Tokens are separated by dots and
	// contain no wildcard ('*', '>') nor whitespace. Two Transports talk
	// only with the same prefix. "" means DefaultSubjectPrefix. Keep it
	// apart from a Gateway's GatewayConfig.Prefix: a place named "listen"
	// or "conn" under the same prefix would share the Transport's subjects.
	SubjectPrefix string

	// MaxFrameBytes is the largest frame, in bytes, this end sends and
	// accepts; 0 means transport.DefaultMaxFrameBytes. The ends exchange
	// their limits when they connect, and a Conn's MaxFrameBytes is the
	// smaller one. A frame larger than the NATS server's max_payload
	// (less a 10-byte header) travels in several messages (chunks).
	MaxFrameBytes int

	// WindowFrames is how many messages of received frames a Conn holds
	// for Recv (a frame is one message, or more when chunked); the peer
	// sends no more until Recv takes some, so its Sends block. 0 means
	// DefaultWindowFrames.
	WindowFrames int

	// WindowBytes is how many bytes of received frames a Conn holds for
	// Recv; the peer sends no more until Recv takes some. A frame larger
	// than the whole window passes when the window is empty. 0 means
	// DefaultWindowBytes.
	WindowBytes int

	// PendingReadBytes is the receive budget, in bytes, of an accepted
	// Conn until the application admits its peer (transport.Admitter):
	// its window in bytes, and the largest frame it takes — a larger one
	// closes it with ErrProtocol. Admit lifts them to WindowBytes and
	// MaxFrameBytes. Conns returned by Dial are admitted from the start.
	// 0 means DefaultPendingReadBytes.
	PendingReadBytes int

	// BacklogConns is how many dialed connections a Listener holds for
	// Accept; while it holds that many, it answers Dials "busy", and they
	// try again until their ctx is done or HandshakeTimeout passes. 0
	// means DefaultBacklogConns.
	BacklogConns int

	// HandshakeTimeout bounds each Dial's wait for a reply from the
	// Listener (and all its retries while the Listener is busy), and
	// Listen's question whether another Listener holds the name. 0 means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration

	// PingInterval is how long a Conn sends nothing before it sends a
	// keepalive, so that the peer knows it is alive. Give both ends the
	// same PingInterval and DeadAfter. 0 means DefaultPingInterval.
	PingInterval time.Duration

	// DeadAfter is how long a Conn waits for the peer to send anything
	// (a frame, an acknowledgement or a keepalive) before it declares the
	// peer dead and closes with ErrPeerDead. It must exceed PingInterval,
	// and should exceed the time the NATS clients need to reconnect to
	// another server after one fails. 0 means DefaultDeadAfterIntervals ×
	// PingInterval.
	DeadAfter time.Duration

	// RetransmitTimeout is how long a Conn waits for the peer to
	// acknowledge the messages it sent before it resends the first of
	// them (and the others once that one is acknowledged); it doubles
	// while nothing is acknowledged, up to PingInterval. It also spaces
	// the resends a gap reported by the peer brings, and the receiver
	// acknowledges what arrived at least every RetransmitTimeout/2. 0
	// means DefaultRetransmitTimeout.
	RetransmitTimeout time.Duration

	// CloseTimeout bounds how long a Conn, once closed, keeps
	// retransmitting the frames queued before Close, and its end-of-stream
	// marker, until the peer acknowledges them; past it they are lost. 0
	// means DefaultCloseTimeout.
	CloseTimeout time.Duration
}

// withDefaults returns cfg with its zero fields set to the defaults.
func (cfg Config) withDefaults() Config {
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = DefaultSubjectPrefix
	}
	if cfg.MaxFrameBytes == 0 {
		cfg.MaxFrameBytes = transport.DefaultMaxFrameBytes
	}
	if cfg.WindowFrames == 0 {
		cfg.WindowFrames = DefaultWindowFrames
	}
	if cfg.WindowBytes == 0 {
		cfg.WindowBytes = DefaultWindowBytes
	}
	if cfg.BacklogConns == 0 {
		cfg.BacklogConns = DefaultBacklogConns
	}
	if cfg.PendingReadBytes == 0 {
		cfg.PendingReadBytes = DefaultPendingReadBytes
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if cfg.DeadAfter == 0 {
		cfg.DeadAfter = DefaultDeadAfterIntervals * cfg.PingInterval
	}
	if cfg.RetransmitTimeout == 0 {
		cfg.RetransmitTimeout = DefaultRetransmitTimeout
	}
	if cfg.CloseTimeout == 0 {
		cfg.CloseTimeout = DefaultCloseTimeout
	}
	return cfg
}

// maxUint32Field bounds MaxFrameBytes, WindowFrames, WindowBytes and
// BacklogConns: the wire carries the first three in 4 bytes.
const maxUint32Field = 1<<31 - 1

// validate returns an error naming the first field of cfg out of range.
func (cfg Config) validate() error {
	if cfg.Conn == nil {
		return fmt.Errorf("nats: Config.Conn is nil")
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"MaxFrameBytes", cfg.MaxFrameBytes},
		{"WindowFrames", cfg.WindowFrames},
		{"WindowBytes", cfg.WindowBytes},
		{"BacklogConns", cfg.BacklogConns},
		{"PendingReadBytes", cfg.PendingReadBytes},
	} {
		if f.v < 0 || f.v > maxUint32Field {
			return fmt.Errorf("nats: Config.%s is %d, want 0 to %d", f.name, f.v, maxUint32Field)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"HandshakeTimeout", cfg.HandshakeTimeout},
		{"PingInterval", cfg.PingInterval},
		{"DeadAfter", cfg.DeadAfter},
		{"RetransmitTimeout", cfg.RetransmitTimeout},
		{"CloseTimeout", cfg.CloseTimeout},
	} {
		if f.v < 0 {
			return fmt.Errorf("nats: Config.%s is %v, want >= 0", f.name, f.v)
		}
	}
	if cfg.SubjectPrefix != "" {
		if err := checkSubject(cfg.SubjectPrefix); err != nil {
			return fmt.Errorf("nats: Config.SubjectPrefix %q: %w", cfg.SubjectPrefix, err)
		}
	}
	d := cfg.withDefaults()
	if d.DeadAfter <= d.PingInterval {
		return fmt.Errorf("nats: Config.DeadAfter is %v, want more than PingInterval (%v)", d.DeadAfter, d.PingInterval)
	}
	return nil
}

// checkSubject returns an error if s is not a subject of literal tokens:
// dot-separated, each non-empty, without wildcards, whitespace or
// control characters.
func checkSubject(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" {
			return fmt.Errorf("empty token")
		}
		if tok == "*" || tok == ">" || strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Errorf("token %q has a wildcard or whitespace", tok)
		}
		for _, r := range tok {
			if r < 0x20 || r == 0x7f {
				return fmt.Errorf("token %q has a control character", tok)
			}
		}
	}
	return nil
}

package tcp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/sion-go/sion/transport"
)

// Transport is a transport.Transport over TCP, with TLS if configured.
// The zero Transport is ready to use, with the defaults of Config.
//
// A Transport is safe for concurrent use by multiple goroutines. It holds
// only its Config: it starts no goroutine and needs no Close.
type Transport struct {
	cfg Config
}

var _ transport.Transport = (*Transport)(nil)

// New returns a Transport configured by cfg. It returns an error if a
// field of cfg is negative, MaxFrameBytes exceeds MaxFrameBytesLimit, or
// DeadAfter does not exceed HeartbeatInterval.
func New(cfg Config) (*Transport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Transport{cfg: cfg}, nil
}

// MaxFrameBytes returns the frame size limit, in bytes, that t announces
// when it connects: Config.MaxFrameBytes or its default. A Conn's limit
// may be smaller, if the peer announces less.
func (t *Transport) MaxFrameBytes() int { return t.cfg.withDefaults().MaxFrameBytes }

// Listen listens on addr, "host:port", and returns a *Listener. addr ""
// means "127.0.0.1:0", and a port 0 one the system picks: Addr tells
// which. Listen returns an error wrapping transport.ErrAddrInUse when
// the address is taken, and an error if Config.TLS gives no server
// certificate. It does not block.
func (t *Transport) Listen(addr string) (transport.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if c := t.cfg.TLS; c != nil && len(c.Certificates) == 0 && c.GetCertificate == nil && c.GetConfigForClient == nil {
		return nil, fmt.Errorf("tcp: listen %s: Config.TLS has no certificate for a server", addr)
	}
	nl, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("tcp: listen %s: %w (%w)", addr, transport.ErrAddrInUse, err)
		}
		return nil, fmt.Errorf("tcp: listen %s: %w", addr, err)
	}
	return newListener(nl, t.cfg.withDefaults()), nil
}

// Dial connects to the Listener at addr, "host:port", and returns a
// *Conn. It returns once the connection is established: the TCP
// connection, the TLS handshake (if Config.TLS is set) and the exchange
// of preambles, bounded by Config.HandshakeTimeout; the Listener then
// holds the connection for Accept. A Listener that holds
// Config.BacklogConns established connections not yet accepted takes in
// no more, so Dial waits until an Accept makes room, up to
// HandshakeTimeout. The Conn is admitted from the start (Conn.Admit). ctx
// unblocks Dial, which then returns ctx's error, wrapped; it does not
// limit the Conn.
//
// Dial returns an error wrapping transport.ErrNoListener when the
// connection is refused (nobody listens on addr), an error wrapping
// ErrProtocol when the peer's preamble is not of this protocol, and an
// error naming the TLS handshake when it fails (an unknown authority, or
// a server that requires a client certificate Config.TLS lacks).
func (t *Transport) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tcp: dial %s: %w", addr, err)
	}
	cfg := t.cfg.withDefaults()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, fmt.Errorf("tcp: dial %s: %w", addr, ctx.Err())
	case errors.Is(err, syscall.ECONNREFUSED):
		return nil, fmt.Errorf("tcp: dial %s: %w (%w)", addr, transport.ErrNoListener, err)
	default:
		return nil, fmt.Errorf("tcp: dial %s: %w", addr, err)
	}
	var tlsCfg *tls.Config
	if cfg.TLS != nil {
		tlsCfg = cfg.TLS.Clone()
		if tlsCfg.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				tlsCfg.ServerName = host
			}
		}
	}
	c, err := establish(ctx, raw, tlsCfg, false, cfg)
	if err != nil {
		return nil, fmt.Errorf("tcp: dial %s: %w", addr, err)
	}
	return c, nil
}

// aLongTimeAgo is a deadline in the past, which fails pending I/O.
var aLongTimeAgo = time.Unix(1, 0)

// establish runs the TLS handshake, if tlsCfg is set, and the preamble
// exchange on raw, within cfg.HandshakeTimeout and until ctx is done, and
// returns the established Conn. On error, it closes raw.
func establish(ctx context.Context, raw net.Conn, tlsCfg *tls.Config, server bool, cfg Config) (*Conn, error) {
	raw.SetDeadline(time.Now().Add(cfg.HandshakeTimeout))
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(aLongTimeAgo) })
	committed := false
	commit := func() error {
		committed = true
		if !stop() {
			return ctx.Err()
		}
		return nil
	}
	nc, state, max, err := handshake(raw, tlsCfg, server, cfg.MaxFrameBytes, commit)
	switch {
	case !committed && !stop(): // ctx is done: the handshake failed because of it
		err = ctx.Err()
	case isTimeout(err) && !server && tlsCfg == nil:
		// A TLS server waits for a ClientHello as the client waits for its
		// preamble.
		err = fmt.Errorf("handshake not done within %v (does the server want TLS?): %w", cfg.HandshakeTimeout, err)
	case isTimeout(err):
		err = fmt.Errorf("handshake not done within %v: %w", cfg.HandshakeTimeout, err)
	}
	if err == nil {
		err = raw.SetDeadline(time.Time{})
	}
	if err != nil {
		raw.Close()
		return nil, err
	}
	return newConn(nc, raw, state, max, cfg, server), nil
}

// handshake runs the TLS handshake, if tlsCfg is set, then the exchange
// of preambles: the server sends its preamble, announcing maxFrameBytes,
// and the client reads it and sends its own. It returns the connection
// to use (raw, or TLS over it), its TLS state, and the smaller of the two
// frame limits.
//
// handshake calls commit once, at the point past which the connection
// cannot be abandoned: on the client, before it sends its preamble, after
// which the server will count the connection established; on the server,
// when it has read the client's. If commit fails, so does handshake.
func handshake(raw net.Conn, tlsCfg *tls.Config, server bool, maxFrameBytes int, commit func() error) (nc net.Conn, state *tls.ConnectionState, max int, err error) {
	nc = raw
	if tlsCfg != nil {
		var tc *tls.Conn
		if server {
			tc = tls.Server(raw, tlsCfg)
		} else {
			tc = tls.Client(raw, tlsCfg)
		}
		if err := tc.Handshake(); err != nil {
			return nil, nil, 0, fmt.Errorf("TLS handshake: %w", err)
		}
		s := tc.ConnectionState()
		nc, state = tc, &s
	}
	if server {
		if err := sendPreamble(nc, maxFrameBytes); err != nil {
			return nil, nil, 0, err
		}
	}
	peerMax, err := readPreamble(nc)
	if err != nil {
		return nil, nil, 0, err
	}
	if err := commit(); err != nil {
		return nil, nil, 0, err
	}
	if !server {
		if err := sendPreamble(nc, maxFrameBytes); err != nil {
			return nil, nil, 0, err
		}
	}
	return nc, state, min(maxFrameBytes, peerMax), nil
}

func sendPreamble(nc net.Conn, maxFrameBytes int) error {
	if _, err := nc.Write(appendPreamble(nil, maxFrameBytes)); err != nil {
		return fmt.Errorf("sending preamble: %w", err)
	}
	return nil
}

// readPreamble reads the peer's preamble from nc and returns the frame
// limit it announces.
func readPreamble(nc net.Conn) (maxFrameBytes int, err error) {
	var p [preambleBytes]byte
	if _, err := io.ReadFull(nc, p[:]); err != nil {
		// With TLS 1.3, a server refuses a client's certificate after the
		// client's handshake is done: the alert arrives here.
		if oe := (*net.OpError)(nil); errors.As(err, &oe) && oe.Op == "remote error" {
			return 0, fmt.Errorf("TLS handshake refused by the peer: %w", err)
		}
		return 0, fmt.Errorf("reading preamble: %w", err)
	}
	return parsePreamble(p)
}

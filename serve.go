package sion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sion-go/sion/internal/guard"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
)

// Serve accepts remote sessions (see Dial), shared links (Switch.Link)
// and gateways (Switch.Federate) on l: for each connection it runs the
// handshake — the entity's Hello, the shared-key challenge when the place
// has a key, the place's admission hook — and then carries the session's
// requests and deliveries over the connection with the wire codec, one
// frame per message. A session fires once per event: one Deliver frame
// lists all its subscriptions that matched. A malformed or unexpected
// frame closes that connection only, as does a request for a link whose
// names (the peer switch's, its place's, a gateway's, an agent's) no
// config could hold: empty, over MaxNameBytes, or with NUL or newline
// (ErrProtocol, counted in Stats.Refused); admission refusals are answered
// with an error frame and logged, at most once per source address and 64
// times in all every 10 s (SwitchConfig.Logger).
//
// A connection that has not been admitted costs the switch a bounded
// amount (S1 security assurance unit, DESIGN.md "Admission"): its whole
// handshake — the transport's (TLS, preambles: transport.Arrival) and the
// switch's — must end within SwitchConfig.HandshakeTimeout of its arrival,
// whatever it sends meanwhile; at most SwitchConfig.MaxHandshakes connections are in
// their handshake at once, and a new one evicts the oldest handshake of
// the source address that holds the most, so connections that send
// nothing cannot keep others out; handshake frames are at most
// MaxHandshakeFrameBytes. The transport bounds what comes before: see
// transport/tcp's Config.MaxHandshakes and PendingReadBytes, which the
// switch lifts (transport.Admitter) once the peer is admitted.
//
// A remote session whose connection fails is kept for the retention its
// entity asked for (ReconnectPolicy), so that it can reconnect and miss
// nothing; see Dial.
//
// Admission is the place's: with no SharedKey, Admit hook or mutual TLS,
// every entity that reaches the listener is admitted. An admitted entity
// is bounded per remote session (MaxRetentionBytes, MaxSpoolSize, one Pull
// waiting) and in all (MaxRetentionTotalBytes), not in how many sessions
// and subscriptions it opens: admit only entities you trust with that.
// Frames carry no MAC of their own, and a shared key proves an entity at
// its handshake only: over a network you do not trust, use TLS
// (transport/tcp Config.TLS).
//
// Serve blocks until ctx ends, l is closed or the switch closes; it then
// closes l and returns nil (the connections it accepted end with ctx or
// the switch's Close, which waits for them); on a switch closed before it
// began (go sw.Serve(…) and defer sw.Close() may run in that order), it
// closes l and returns nil at once. It returns an Accept error other than
// a close as is. Serve may be called for several listeners at once. While
// it runs the switch is Active (see State), and the first listener's address
// is the one the switch gives its peers (link requests, probe replies,
// Leave).
func (sw *Switch) Serve(ctx context.Context, l transport.Listener) error {
	if l == nil {
		return fmt.Errorf("%w: Serve with a nil listener", ErrInvalidConfig)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sw.mu.Lock()
	if sw.closed { // go sw.Serve(…) with defer sw.Close() may get here: a shutdown like any other
		sw.mu.Unlock()
		l.Close()
		return nil
	}
	sw.serving = append(sw.serving, cancel)
	sw.servers.Add(1)
	defer sw.servers.Done() // last: Close waits until the listener is closed
	addr := l.Addr().String()
	sw.addrs = append(sw.addrs, addr)
	sw.mu.Unlock()
	defer func() {
		sw.mu.Lock()
		if i := slices.Index(sw.addrs, addr); i >= 0 {
			sw.addrs = slices.Delete(sw.addrs, i, i+1)
		}
		sw.mu.Unlock()
	}()

	defer l.Close()
	stop := context.AfterFunc(ctx, func() { l.Close() }) // unblocks Accept
	defer stop()
	for {
		conn, err := l.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, transport.ErrClosed) {
				return nil
			}
			return err
		}
		sw.mu.Lock()
		if sw.closed { // Close is waiting for the links: add none
			// but do not return: that would cancel ctx, ending the
			// connections Close is saying goodbye on before their
			// entities confirm (an entity that reconnects at once
			// after the Bye gets here); Close stops this loop after.
			sw.mu.Unlock()
			conn.Close()
			continue
		}
		sw.conns.Add(1)
		sw.mu.Unlock()
		source := guard.Source(conn.RemoteAddr())
		done, victim, evicted := sw.handshakes.Start(source, func() { conn.Close() })
		if evicted {
			sw.refusal(victim, "sion: handshake evicted: too many connections in their handshake", "max", sw.cfg.MaxHandshakes)
		}
		go func() {
			defer sw.conns.Done()
			sw.serveConn(ctx, conn, source, done)
		}()
	}
}

// serveConn runs the handshake of conn, which came from source, and then
// serves it as a remote session, a shared link or a gateway. done ends
// the handshake's place in the switch's table.
func (sw *Switch) serveConn(ctx context.Context, conn transport.Conn, source string, done func()) {
	defer conn.Close()
	deadline := time.Now().Add(sw.cfg.HandshakeTimeout)
	if a, ok := conn.(transport.Arrival); ok && !a.ArrivedAt().IsZero() {
		deadline = a.ArrivedAt().Add(sw.cfg.HandshakeTimeout) // the transport's handshake counts too
	}
	hctx, cancel := context.WithDeadline(ctx, deadline)
	hs, re, resumed, err := sw.handshake(hctx, conn, source)
	cancel()
	done()
	if err != nil {
		return
	}
	if a, ok := conn.(transport.Admitter); ok {
		a.Admit()
	}
	if resumed {
		re.serve(ctx, conn, hs.lim, nil, nil)
		return
	}

	// The first request tells a remote session from a router asking for
	// a shared link or a gateway (its router then becomes the session's
	// sink, see newRouter).
	sess := re.sess
	frame, err := conn.Recv(ctx)
	if err != nil {
		sess.Close()
		return
	}
	first, err := wire.Decode(frame, hs.lim)
	if err == nil && sw.accept(ctx, conn, sess, first) {
		sess.Close()
		return
	}
	re.serve(ctx, conn, hs.lim, first, err)
}

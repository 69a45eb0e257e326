package sion

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
)

// Bounds of the logging of refusals (see Serve).
const (
	// refusalLogInterval is how often a refusal from one source is logged
	// at most; the refusals in between are counted in the next record.
	refusalLogInterval = 10 * time.Second
	refusalLogSources  = 4096
	// maxLogRecords bounds the records of refusals and junk logged per
	// interval over all sources (a switch's refusals, an entity's
	// discovery datagrams), so that a flood from many source addresses
	// cannot flood the log either; the next record counts those held back.
	maxLogRecords = 64
)

// Bounds of a switch's edge, for peers that have not been admitted (see
// SwitchConfig).
const (
	// DefaultHandshakeTimeout bounds a connection's whole handshake on a
	// switch (SwitchConfig.HandshakeTimeout) and a shared link's or
	// gateway's on the requesting side (LinkConfig.HandshakeTimeout).
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultMaxHandshakes is SwitchConfig.MaxHandshakes when zero.
	DefaultMaxHandshakes = 256
	// MaxHandshakeFrameBytes bounds the frames of a handshake (Hello and
	// the answer to a shared-key challenge): a Hello whose profile makes
	// it longer is refused by Dial with ErrInvalidConfig, and by the
	// switch with ErrProtocol. A transport's receive budget for peers not
	// yet admitted (transport/tcp Config.PendingReadBytes) must be at
	// least this.
	MaxHandshakeFrameBytes = 60 << 10
)

// Admission (S1 "security assurance unit"): in a place with a shared key
// every session and shared link proves that it knows the key, and the
// switch proves it too, by HMAC-SHA256 over fresh nonces — the key never
// travels:
//
//	entity → switch  Hello{Token: nonce_e}
//	switch → entity  Challenge{Nonce: nonce_s, Proof: MAC(key, "sion/switch", nonce_e, nonce_s)}
//	entity → switch  Response{Proof: MAC(key, "sion/entity", nonce_s, nonce_e, name)}
//	switch → entity  Welcome, or Error (ErrNotAdmitted)
//
// Then the place's Admit hook, if any, decides as for every session. With
// mutual TLS (transport/tcp) the transport refuses entities without a
// certificate the switch trusts, and the hook sees the certificate
// (AdmissionRequest.TLS).

const nonceBytes = 32

// MinSharedKeyBytes is the shortest shared key a place or a remote session
// accepts (PlaceConfig.SharedKey, SessionConfig.SharedKey); use 32 random
// bytes.
const MinSharedKeyBytes = 16

// checkKey refuses a key that is set but too short to protect anything.
func checkKey(field string, key []byte) error {
	if key != nil && len(key) < MinSharedKeyBytes {
		return fmt.Errorf("%w: %s has %d bytes, want at least %d (32 random bytes are best; nil means no key)", ErrInvalidConfig, field, len(key), MinSharedKeyBytes)
	}
	return nil
}

func newNonce() []byte {
	b := make([]byte, nonceBytes)
	rand.Read(b)
	return b
}

// proof is the MAC of role and parts, each length-prefixed.
func proof(key []byte, role string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	var n [4]byte
	for _, p := range append([][]byte{[]byte(role)}, parts...) {
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		m.Write(n[:])
		m.Write(p)
	}
	return m.Sum(nil)
}

// tlsState returns the TLS state of conn when its transport has one.
func tlsState(conn transport.Conn) *tls.ConnectionState {
	if c, ok := conn.(interface {
		TLSConnectionState() (tls.ConnectionState, bool)
	}); ok {
		if st, ok := c.TLSConnectionState(); ok {
			return &st
		}
	}
	return nil
}

// clientHandshake opens a session (or a router's session) on the switch
// at the other end of conn: hello, the shared-key challenge when the
// place has one, welcome. key is the place's shared key as the entity
// knows it (nil for none): an entity with a key refuses a switch that
// cannot prove it knows the same key.
func clientHandshake(ctx context.Context, conn transport.Conn, lim wire.Limits, hello *wire.Hello, key []byte) (*wire.Welcome, error) {
	nonce := newNonce()
	hello.Token = nonce
	reply, err := exchange(ctx, conn, lim, hello)
	if err != nil {
		return nil, err
	}
	if ch, ok := reply.(*wire.Challenge); ok {
		if len(key) == 0 {
			return nil, fmt.Errorf("%w: the switch's place requires a shared key and none is configured", ErrNotAdmitted)
		}
		if !hmac.Equal(ch.Proof, proof(key, "sion/switch", nonce, ch.Nonce)) {
			return nil, fmt.Errorf("%w: the switch could not prove it knows the place's shared key", ErrNotAdmitted)
		}
		reply, err = exchange(ctx, conn, lim, &wire.Response{Proof: proof(key, "sion/entity", ch.Nonce, nonce, []byte(hello.Session))})
		if err != nil {
			return nil, err
		}
	} else if len(key) > 0 {
		if _, ok := reply.(*wire.Welcome); ok {
			return nil, fmt.Errorf("%w: the switch did not ask for the place's shared key, so it cannot be trusted with it", ErrNotAdmitted)
		}
	}
	w, ok := reply.(*wire.Welcome)
	if !ok {
		return nil, fmt.Errorf("%w: the switch answered hello with a %v frame", ErrProtocol, reply.Kind())
	}
	return w, nil
}

// exchange sends m and returns the answer; an Error frame becomes the
// error it carries.
func exchange(ctx context.Context, conn transport.Conn, lim wire.Limits, m wire.Message) (wire.Message, error) {
	f, err := wire.EncodeLimits(nil, m, lim)
	if err != nil {
		return nil, err
	}
	return exchangeFrame(ctx, conn, lim, f)
}

// exchangeFrame sends frame f and returns the answer, as exchange.
func exchangeFrame(ctx context.Context, conn transport.Conn, lim wire.Limits, f []byte) (wire.Message, error) {
	err := conn.Send(ctx, f)
	if err == nil {
		f, err = conn.Recv(ctx)
	}
	if err != nil {
		return nil, err
	}
	reply, err := wire.Decode(f, lim)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	if e, ok := reply.(*wire.Error); ok {
		return nil, fromWireError(e)
	}
	return reply, nil
}

// challenge runs the switch's side of the shared-key challenge for hello
// on conn; it returns an error wrapping ErrNotAdmitted when the entity's
// proof is wrong or missing.
func (sw *Switch) challenge(ctx context.Context, conn transport.Conn, lim wire.Limits, hello *wire.Hello) error {
	key := sw.place.cfg.SharedKey
	nonce := newNonce()
	reply, err := exchange(ctx, conn, lim, &wire.Challenge{Nonce: nonce, Proof: proof(key, "sion/switch", hello.Token, nonce)})
	if err != nil {
		return fmt.Errorf("%w: no answer to the shared-key challenge: %w", ErrNotAdmitted, err)
	}
	r, ok := reply.(*wire.Response)
	if !ok {
		return fmt.Errorf("%w: the answer to the shared-key challenge is a %v frame", ErrNotAdmitted, reply.Kind())
	}
	if !hmac.Equal(r.Proof, proof(key, "sion/entity", nonce, hello.Token, []byte(hello.Session))) {
		return fmt.Errorf("%w: session %q does not know the place's shared key", ErrNotAdmitted, hello.Session)
	}
	return nil
}

// handshake is what serveConn learned from a peer's handshake.
type handshake struct {
	hello *wire.Hello
	lim   wire.Limits
}

// handshake reads conn's Hello, checks its shared key and admission, and
// answers Welcome: for a new session, whose remote end it returns, not
// yet serving, or for a resumed one (resumed). It answers an Error frame
// and returns an error when it refuses, and returns an error when ctx
// ends first.
func (sw *Switch) handshake(ctx context.Context, conn transport.Conn, source string) (handshake, *remoteEnd, bool, error) {
	hs := handshake{lim: wire.DefaultLimits()}
	hs.lim.MaxFrameBytes = conn.MaxFrameBytes()
	refuse := func(code uint16, err error) error {
		if f, e := wire.Encode(nil, &wire.Error{Code: code, Message: err.Error()}); e == nil {
			conn.Send(ctx, f)
		}
		return err
	}
	frame, err := conn.Recv(ctx)
	if err != nil {
		sw.refusal(source, "sion: handshake failed", "err", err)
		return hs, nil, false, err
	}
	lim := hs.lim
	lim.MaxFrameBytes = min(lim.MaxFrameBytes, MaxHandshakeFrameBytes)
	m, err := wire.Decode(frame, lim)
	hello, ok := m.(*wire.Hello)
	if err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("got a %v frame", m.Kind())
		}
		err = fmt.Errorf("%w: the first frame must be a hello of at most %d bytes (%v)", ErrProtocol, MaxHandshakeFrameBytes, err)
		sw.refusal(source, "sion: connection refused: no hello", "err", err)
		return hs, nil, false, refuse(codeProtocol, err)
	}
	hs.hello = hello
	if hello.Version != protocolVersion {
		err := fmt.Errorf("%w: session protocol version %d, this switch speaks %d", ErrProtocol, hello.Version, protocolVersion)
		sw.refusal(source, "sion: connection refused", "err", err)
		return hs, nil, false, refuse(codeProtocol, err)
	}
	if len(sw.place.cfg.SharedKey) > 0 {
		if err := sw.challenge(ctx, conn, lim, hello); err != nil {
			sw.refusal(source, "sion: session refused", "place", sw.place.Name(), "session", hello.Session, "err", err) // before the count: who sees the count sees the record
			sw.refused.Add(1)
			return hs, nil, false, refuse(codeNotAdmitted, err)
		}
	}
	cfg := SessionConfig{
		Name: hello.Session, Profile: hello.Profile,
		SpoolSize: min(int(hello.SpoolSize), sw.cfg.MaxSpoolSize), SpoolRetention: millis(hello.SpoolRetentionMillis),
	}
	if err := sw.admitSession(ctx, cfg, conn); err != nil {
		return hs, nil, false, refuse(errorCode(err), err)
	}
	retention := min(millis(hello.RetentionMillis), sw.cfg.MaxRetention)
	retentionBytes := sw.cfg.MaxRetentionBytes
	if hello.RetentionBytes > 0 {
		retentionBytes = int(min(hello.RetentionBytes, uint64(sw.cfg.MaxRetentionBytes)))
	}
	welcome := &wire.Welcome{
		Version: protocolVersion, Switch: sw.cfg.Name, Place: sw.place.Name(),
		MaxPayloadBytes: uint64(sw.place.cfg.MaxPayloadBytes),
		RetentionMillis: uint64(retention / time.Millisecond), RetentionBytes: uint64(retentionBytes),
	}
	if len(hello.Resume) > 0 {
		re, err := sw.resume(ctx, hello, welcome)
		switch {
		case err != nil:
			return hs, nil, false, refuse(errorCode(err), err)
		case re != nil:
			if err := sendFrame(ctx, conn, welcome); err != nil {
				re.abandon(err)
				return hs, nil, false, err
			}
			return hs, re, true, nil
		}
	}
	token := make([]byte, 16)
	rand.Read(token)
	var re *remoteEnd
	sess, err := sw.openSession(cfg, func(s *Session) sink {
		re = sw.newRemoteEnd(s, string(token), addrOf(conn), retention, retentionBytes)
		return re
	})
	if err != nil {
		return hs, nil, false, refuse(errorCode(err), err)
	}
	welcome.Token = token
	if err := sendFrame(ctx, conn, welcome); err != nil {
		sess.Close()
		return hs, nil, false, err
	}
	return hs, re, false, nil
}

// sendFrame encodes m and sends it on conn.
func sendFrame(ctx context.Context, conn transport.Conn, m wire.Message) error {
	f, err := wire.Encode(nil, m)
	if err == nil {
		err = conn.Send(ctx, f)
	}
	return err
}

// millis returns n milliseconds as a Duration, saturating.
func millis(n uint64) time.Duration {
	if n > uint64(1<<63-1)/uint64(time.Millisecond) {
		return 1<<63 - 1
	}
	return time.Duration(n) * time.Millisecond
}

// refusal logs a refusal or a piece of junk from source at level Warn, at
// most once per source every refusalLogInterval and maxLogRecords times
// in all per interval, with the numbers of records suppressed since.
func (sw *Switch) refusal(source, msg string, args ...any) {
	now := time.Now()
	ok, suppressed := sw.refusals.Allow(source, now)
	if !ok {
		return
	}
	ok, suppressedAll := sw.refusalsAll.Allow(now)
	if !ok {
		return
	}
	args = append(args, "switch", sw.cfg.Name, "remote", source)
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	if suppressedAll > 0 {
		args = append(args, "suppressed_all_sources", suppressedAll)
	}
	sw.log.Warn(msg, args...)
}

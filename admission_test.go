package sion_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/internal/testcert"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// logBuffer is a slog destination tests read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// keyedSwitch serves a switch of a place with a shared key over tr at
// addr, logging to the returned buffer.
func keyedSwitch(t *testing.T, tr transport.Transport, addr, name string, key []byte) (*sion.Switch, string, *logBuffer) {
	t.Helper()
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "vault", Ontology: ont1(t), SharedKey: key})
	require.NoError(t, err)
	logs := &logBuffer{}
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: name, Place: place, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	l, err := tr.Listen(addr)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- sw.Serve(context.Background(), l) }()
	t.Cleanup(func() {
		require.NoError(t, sw.Close())
		require.NoError(t, <-served)
	})
	return sw, l.Addr().String(), logs
}

// TestSharedKeyAdmission: only entities that prove they know the place's
// shared key open sessions or links; the key never travels; refusals are
// clear errors and logged.
func TestSharedKeyAdmission(t *testing.T) {
	key := bytes.Repeat([]byte("k"), 32)
	wrong := bytes.Repeat([]byte("w"), 32)
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tr, addr := tc.make(t)
			sw, at, logs := keyedSwitch(t, tr, addr(0), "sw0", key)
			pub := open(t, sw, "pub")

			good, err := sion.Dial(ctx, tr, at, sion.SessionConfig{Name: "alice", SharedKey: key})
			require.NoError(t, err)
			defer good.Close()
			sub := subscribe(t, good, `{type ⊑ Alarm}`)

			_, err = sion.Dial(ctx, tr, at, sion.SessionConfig{Name: "bob"})
			require.ErrorIs(t, err, sion.ErrNotAdmitted)
			assert.Contains(t, err.Error(), "requires a shared key")

			_, err = sion.Dial(ctx, tr, at, sion.SessionConfig{Name: "eve", SharedKey: wrong})
			require.ErrorIs(t, err, sion.ErrNotAdmitted)
			assert.Contains(t, err.Error(), "could not prove it knows the place's shared key", "the entity checks the switch too")

			// An entity that skips the check and guesses the proof.
			conn, err := tr.Dial(ctx, at)
			require.NoError(t, err)
			defer conn.Close()
			send := func(m wire.Message) {
				f, err := wire.Encode(nil, m)
				require.NoError(t, err)
				require.NoError(t, conn.Send(ctx, f))
			}
			recv := func() wire.Message {
				f, err := conn.Recv(ctx)
				require.NoError(t, err)
				m, err := wire.Decode(f, wire.DefaultLimits())
				require.NoError(t, err)
				return m
			}
			send(&wire.Hello{Version: 2, Session: "mallory", Token: bytes.Repeat([]byte{1}, 32)})
			ch, ok := recv().(*wire.Challenge)
			require.True(t, ok, "the switch challenges")
			assert.NotContains(t, string(ch.Nonce)+string(ch.Proof), string(key), "the key does not travel")
			send(&wire.Response{Proof: bytes.Repeat([]byte{2}, 32)})
			e, ok := recv().(*wire.Error)
			require.True(t, ok)
			assert.Contains(t, e.Message, `session "mallory" does not know the place's shared key`)
			_, err = conn.Recv(ctx)
			require.Error(t, err, "then the connection closes")

			// An entity with the key refuses a switch that does not ask for it.
			_, plainAt, _ := keyedSwitch(t, tr, addr(1), "open", nil)
			_, err = sion.Dial(ctx, tr, plainAt, sion.SessionConfig{Name: "alice", SharedKey: key})
			require.ErrorIs(t, err, sion.ErrNotAdmitted)
			assert.Contains(t, err.Error(), "did not ask for the place's shared key")

			// Shared links: a switch of the same place links; one with a wrong key does not.
			member, _, _ := keyedSwitch(t, tr, addr(2), "sw1", key)
			_, err = member.Link(ctx, tr, at, sion.LinkConfig{})
			require.NoError(t, err)
			intruder, _, _ := keyedSwitch(t, tr, addr(3), "sw2", wrong)
			_, err = intruder.Link(ctx, tr, at, sion.LinkConfig{})
			require.ErrorIs(t, err, sion.ErrNotAdmitted)

			// Nothing of the place reached the refused ones; the admitted still work.
			publish(t, pub, &sion.Event{Type: "Alarm"})
			require.NoError(t, good.Sync(ctx))
			assert.Equal(t, 1, count(sub))
			// The switch notices a refusal the entity saw first (it hung up
			// on the challenge) when the connection ends.
			require.Eventually(t, func() bool { return sw.Stats().Refused == 4 }, 10*time.Second, time.Millisecond, "bob, eve, mallory and the intruder switch")
			// Refusals are logged at most once per source address every 10 s:
			// over tcp all four come from 127.0.0.1, over mem each
			// connection has an address of its own.
			log := logs.String()
			records := strings.Count(log, "sion: session refused")
			if tc.name == "tcp" {
				assert.Equal(t, 1, records, "one record for the source, the rest counted: %s", log)
				assert.Regexp(t, `session=(bob|eve|mallory|sw2)`, log, "the first refusal the switch saw is logged")
			} else {
				for _, who := range []string{"session=bob", "session=eve", "session=mallory", "session=sw2"} {
					assert.Contains(t, log, who, "the refusal is logged")
				}
			}
		})
	}
}

// TestMutualTLSAdmission: over transport/tcp with mutual TLS, entities
// without a certificate the place trusts cannot connect at all, and the
// admission hook decides by the verified certificate for sessions and
// links alike.
func TestMutualTLSAdmission(t *testing.T) {
	ctx := context.Background()
	certs := testcert.New(t)
	transportFor := func(cfg *tls.Config) transport.Transport {
		tr, err := tcp.New(tcp.Config{TLS: cfg})
		require.NoError(t, err)
		return tr
	}
	var mu sync.Mutex
	var seen []string
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "tls", Ontology: ont1(t), Admit: func(_ context.Context, r sion.AdmissionRequest) error {
		if r.Remote == nil {
			return nil // a local session: inside the process
		}
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			return errors.New("no verified certificate")
		}
		cn := r.TLS.PeerCertificates[0].Subject.CommonName
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s link=%v", cn, r.Link))
		mu.Unlock()
		if cn == "mallory" {
			return errors.New("certificate of mallory is revoked")
		}
		return nil
	}})
	require.NoError(t, err)
	logs := &logBuffer{}
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "sw0", Place: place, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	tlsLogs := &logBuffer{}
	serverTr, err := tcp.New(tcp.Config{TLS: certs.PeerTLS("sw0"), Logger: slog.New(slog.NewTextHandler(tlsLogs, nil))})
	require.NoError(t, err)
	l, err := serverTr.Listen("127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- sw.Serve(ctx, l) }()
	defer func() {
		require.NoError(t, sw.Close())
		require.NoError(t, <-served)
	}()
	at := l.Addr().String()

	alice, err := sion.Dial(ctx, transportFor(certs.ClientTLS("alice")), at, sion.SessionConfig{Name: "alice"})
	require.NoError(t, err)
	defer alice.Close()
	sub := subscribe(t, alice, `{type ⊑ Alarm}`)

	_, err = sion.Dial(ctx, transportFor(certs.ClientTLS("mallory")), at, sion.SessionConfig{Name: "innocent"})
	require.ErrorIs(t, err, sion.ErrNotAdmitted, "the hook refuses by certificate, whatever name the session gives")
	assert.Contains(t, err.Error(), "revoked")

	_, err = sion.Dial(ctx, transportFor(certs.ClientTLSNoCert()), at, sion.SessionConfig{Name: "anonymous"})
	require.Error(t, err, "no client certificate: the TLS handshake fails")
	require.Eventually(t, func() bool { return strings.Contains(tlsLogs.String(), "refused in its handshake") }, 10*time.Second, time.Millisecond,
		"the transport logs the refusal")
	foreign := certs.ClientTLSNoCert()
	foreign.Certificates = []tls.Certificate{certs.Foreign().ClientCert("alice")}
	_, err = sion.Dial(ctx, transportFor(foreign), at, sion.SessionConfig{Name: "alice"})
	require.Error(t, err, "a certificate from another CA: the TLS handshake fails")

	// A switch with a certificate of the place links; the hook saw it.
	sw1, err := sion.NewSwitch(sion.SwitchConfig{Name: "sw1", Place: place})
	require.NoError(t, err)
	defer sw1.Close()
	_, err = sw1.Link(ctx, transportFor(certs.PeerTLS("sw1")), at, sion.LinkConfig{ProbeHops: -1})
	require.NoError(t, err)
	publish(t, open(t, sw1, "pub"), &sion.Event{Type: "Alarm"})
	require.NoError(t, sw1.Flush(ctx))
	require.NoError(t, alice.Sync(ctx))
	assert.Equal(t, 1, count(sub))

	mu.Lock()
	assert.Equal(t, []string{"alice link=false", "mallory link=false", "sw1 link=false", "sw1 link=true"}, seen)
	mu.Unlock()
	assert.Contains(t, logs.String(), "revoked", "the refusal is logged")
}

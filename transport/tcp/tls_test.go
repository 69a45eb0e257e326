package tcp_test

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/internal/testcert"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

func TestTLSRefused(t *testing.T) {
	// A Dial whose handshake fails returns an error; the Listener never
	// returns that connection from Accept, and goes on accepting good
	// ones.
	certs := testcert.New(t)
	foreignCert := certs.ClientTLSNoCert()
	foreignCert.Certificates = []tls.Certificate{certs.Foreign().ClientCert("mallory")}
	for _, tc := range []struct {
		name                 string
		server, client, good *tls.Config // nil: plain TCP
		wantErr              string
	}{
		{"server of an unknown CA", certs.ServerTLS(), certs.Foreign().ClientTLSNoCert(), certs.ClientTLSNoCert(),
			"TLS handshake: tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{"mutual TLS, no client certificate", certs.MutualServerTLS(), certs.ClientTLSNoCert(), certs.ClientTLS("good"),
			"TLS handshake refused by the peer: remote error: tls: certificate required"},
		{"mutual TLS, client of an unknown CA", certs.MutualServerTLS(), foreignCert, certs.ClientTLS("good"),
			"TLS handshake refused by the peer: remote error: tls: unknown certificate authority"},
		{"TLS client, plain server", nil, certs.ClientTLSNoCert(), nil,
			"TLS handshake: tls: first record does not look like a TLS handshake"},
		{"plain client, TLS server", certs.ServerTLS(), nil, certs.ClientTLSNoCert(),
			"handshake not done within 100ms (does the server want TLS?): reading preamble: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			l := listen(t, newTransport(t, tcp.Config{TLS: tc.server}))
			type result struct {
				s   transport.Conn
				err error
			}
			accepted := make(chan result, 1)
			go func() {
				s, err := l.Accept(ctx)
				accepted <- result{s, err}
			}()

			refused := tcp.Config{TLS: tc.client}
			if tc.client == nil {
				// Each end waits for the other to speak first: the client
				// gives up after HandshakeTimeout.
				refused.HandshakeTimeout = 100 * time.Millisecond
			}
			c, err := newTransport(t, refused).Dial(ctx, l.Addr().String())
			if c != nil {
				c.Close()
			}
			require.Error(t, err)
			t.Log("Dial:", err)
			assert.Regexp(t, `^tcp: dial 127\.0\.0\.1:\d+: `, err.Error())
			assert.Contains(t, err.Error(), tc.wantErr)

			c, err = newTransport(t, tcp.Config{TLS: tc.good}).Dial(ctx, l.Addr().String())
			require.NoError(t, err, "Dial with a good config")
			closeAtEnd(t, c.(*tcp.Conn))
			r := await(t, accepted, "Accept")
			require.NoError(t, r.err)
			closeAtEnd(t, r.s.(*tcp.Conn))
			assert.Equal(t, c.LocalAddr().String(), r.s.RemoteAddr().String(), "the Conn Accept returned")
			pingPong(t, ctx, c, r.s)
		})
	}
}

func TestTLSConnectionState(t *testing.T) {
	// Each end of a mutual-TLS Conn sees the other's certificate: the
	// switch admits a peer by its client certificate.
	certs := testcert.New(t)
	server := newTransport(t, tcp.Config{TLS: certs.MutualServerTLS()})
	client := newTransport(t, tcp.Config{TLS: certs.ClientTLS("client-7")})
	c, s := connect(t, client, listen(t, server))
	for _, tc := range []struct {
		name   string
		end    *tcp.Conn
		wantCN string
	}{
		{"accepted end sees the client", s, "client-7"},
		{"dialed end sees the server", c, "localhost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, ok := tc.end.TLSConnectionState()
			require.True(t, ok)
			assert.True(t, state.HandshakeComplete)
			require.NotEmpty(t, state.PeerCertificates)
			assert.Equal(t, tc.wantCN, state.PeerCertificates[0].Subject.CommonName)
			require.NotEmpty(t, state.VerifiedChains, "the chain was verified")
		})
	}
}

func TestListenTLSWithoutCertificate(t *testing.T) {
	certs := testcert.New(t)
	tr := newTransport(t, tcp.Config{TLS: certs.ClientTLSNoCert()})
	l, err := tr.Listen("")
	if l != nil {
		l.Close()
	}
	require.EqualError(t, err, "tcp: listen 127.0.0.1:0: Config.TLS has no certificate for a server")
}

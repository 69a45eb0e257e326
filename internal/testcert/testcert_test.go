package testcert_test

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/internal/testcert"
)

func TestHandshakes(t *testing.T) {
	s := testcert.New(t)
	foreignCert := s.ClientTLSNoCert()
	foreignCert.Certificates = []tls.Certificate{s.Foreign().ClientCert("mallory")}
	for _, tc := range []struct {
		name           string
		server, client *tls.Config
		serverName     string
		wantCN         string // of the client, as the server sees it; "" for none
		wantErr        bool
	}{
		{"server auth", s.ServerTLS(), s.ClientTLSNoCert(), "127.0.0.1", "", false},
		{"server auth by name", s.ServerTLS(), s.ClientTLSNoCert(), "localhost", "", false},
		{"mutual", s.MutualServerTLS(), s.ClientTLS("alice"), "127.0.0.1", "alice", false},
		{"peers", s.PeerTLS("server"), s.PeerTLS("bob"), "::1", "bob", false},
		{"wrong name", s.ServerTLS(), s.ClientTLSNoCert(), "example.com", "", true},
		{"client trusts another CA", s.ServerTLS(), s.Foreign().ClientTLSNoCert(), "127.0.0.1", "", true},
		{"mutual without client certificate", s.MutualServerTLS(), s.ClientTLSNoCert(), "127.0.0.1", "", true},
		{"mutual with a foreign certificate", s.MutualServerTLS(), foreignCert, "127.0.0.1", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := tc.client.Clone()
			client.ServerName = tc.serverName
			a, b := tcpPair(t) // not net.Pipe: both ends of TLS 1.3 write at once
			sc, cc := tls.Server(a, tc.server), tls.Client(b, client)
			serverErr := make(chan error, 1)
			go func() {
				err := sc.Handshake()
				if err == nil {
					// TLS 1.3: the client learns of a refusal on its first read.
					_, err = sc.Write([]byte("x"))
				}
				serverErr <- err
				a.Close()
			}()
			err := cc.Handshake()
			if err == nil {
				_, err = cc.Read(make([]byte, 1))
			}
			b.Close()
			sErr := <-serverErr
			if tc.wantErr {
				assert.Error(t, err, "client")
				return
			}
			require.NoError(t, err, "client")
			require.NoError(t, sErr, "server")
			state := sc.ConnectionState()
			if tc.wantCN == "" {
				assert.Empty(t, state.PeerCertificates)
				return
			}
			require.NotEmpty(t, state.PeerCertificates)
			assert.Equal(t, tc.wantCN, state.PeerCertificates[0].Subject.CommonName)
		})
	}
}

func TestForeignIsStable(t *testing.T) {
	s := testcert.New(t)
	assert.Same(t, s.Foreign(), s.Foreign())
	assert.NotEqual(t, s.CA.Raw, s.Foreign().CA.Raw)
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		a, _ := l.Accept()
		accepted <- a
	}()
	b, err = net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	a = <-accepted
	require.NotNil(t, a)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

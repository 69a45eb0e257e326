package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testPKI is a CA and the certificates it signed, as PEM files.
type testPKI struct {
	dir                   string
	ca, otherCA           string // the CA's certificate; a CA that signed none
	serverCert, serverKey string // for 127.0.0.1, server and client use
	clientCert, clientKey string // client use only
	caKey                 *ecdsa.PrivateKey
	caCert                *x509.Certificate
}

// newTestPKI writes a CA, a server certificate for 127.0.0.1 (also good
// as a client certificate, as a switch that dials needs), a client
// certificate and an unrelated CA into t.TempDir().
func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	var caDER []byte
	p.caKey, p.caCert, caDER = selfSigned(t, "sion test CA")
	p.ca = p.writePEM(t, "ca.pem", "CERTIFICATE", caDER)
	_, _, otherDER := selfSigned(t, "another CA")
	p.otherCA = p.writePEM(t, "other-ca.pem", "CERTIFICATE", otherDER)
	p.serverCert, p.serverKey = p.issue(t, "server", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "sion switch"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	p.clientCert, p.clientKey = p.issue(t, "client", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "sion client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return p
}

func selfSigned(t *testing.T, name string) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return key, cert, der
}

// issue signs tmpl with the CA and writes NAME.pem and NAME.key.
func (p *testPKI) issue(t *testing.T, name string, tmpl *x509.Certificate) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return p.writePEM(t, name+".pem", "CERTIFICATE", der), p.writePEM(t, name+".key", "PRIVATE KEY", keyDER)
}

func (p *testPKI) writePEM(t *testing.T, file, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, file)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

// serveAddr starts "sion serve" with args and returns the process and the
// address it serves on, from its first line.
func serveAddr(t *testing.T, bin string, args ...string) (*started, string) {
	t.Helper()
	p := start(t, bin, nil, append([]string{"serve", "-listen", "127.0.0.1:0"}, args...)...)
	first := line(t, p.stdout)
	require.Contains(t, first, " serving on 127.0.0.1:", first)
	return p, first[strings.LastIndex(first, " ")+1:]
}

// runStatus runs bin with args to its end and returns its exit status and
// combined output.
func runStatus(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	require.NoError(t, err, "%s", out)
	return 0, string(out)
}

// TestTLS serves over TLS from certificate files: sub and pub that trust
// the CA (-tls-ca) work; without TLS, or trusting another CA, they fail
// with status 1 and say what to give. With -tls-verify-clients (mutual
// TLS) a client without a certificate is refused and one with a
// certificate the CA signed is admitted, and a second switch links to it
// over mutual TLS with its own certificate.
func TestTLS(t *testing.T) {
	bin := sionBinary(t)
	pki := newTestPKI(t)
	hazards := filepath.Join("..", "..", "examples", "internal", "usgs", "hazards.json")

	sw, addr := serveAddr(t, bin, "-ontology", hazards, "-place", "usgs", "-tls-cert", pki.serverCert, "-tls-key", pki.serverKey)
	s := start(t, bin, nil, "sub", "-server", addr, "-tls-ca", pki.ca, "-n", "1", "{type ⊑ seismic}")
	assert.Equal(t, "subscribed to {type ⊑ seismic} on "+addr, line(t, s.stderr))
	status, out := runStatus(t, bin, "pub", "-server", addr, "-tls-ca", pki.ca, "-type", "earthquake", "-attr", "mag=4.1")
	require.Equal(t, 0, status, out)
	status, stdout, stderr := exitCode(t, s)
	require.Equal(t, 0, status, stderr)
	assert.Equal(t, "earthquake mag=4.1 [subscription 1 score 0]\n", stdout)

	refused := []struct {
		name string
		args []string
		want string
	}{
		{"plain TCP to a TLS switch", nil, "if the switch serves TLS, give -tls-ca"},
		{"another CA", []string{"-tls-ca", pki.otherCA}, "certificate signed by unknown authority (the switch's certificate is not signed by a CA of -tls-ca"},
		{"a certificate without its key", []string{"-tls-ca", pki.ca, "-tls-cert", pki.clientCert}, "-tls-cert and -tls-key (tls_cert, tls_key) go together"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"pub", "-server", addr, "-type", "earthquake"}, tc.args...)
			status, out := runStatus(t, bin, args...)
			assert.Equal(t, 1, status, out)
			assert.Contains(t, out, tc.want)
		})
	}

	mutual, mutualAddr := serveAddr(t, bin, "-ontology", hazards, "-place", "usgs", "-name", "m",
		"-tls-cert", pki.serverCert, "-tls-key", pki.serverKey, "-tls-ca", pki.ca, "-tls-verify-clients")
	status, out = runStatus(t, bin, "pub", "-server", mutualAddr, "-tls-ca", pki.ca, "-type", "earthquake")
	assert.Equal(t, 1, status, out)
	assert.Contains(t, out, "tls: certificate required (the switch requires a client certificate its CA signed: give -tls-cert and -tls-key)")
	status, out = runStatus(t, bin, "pub", "-server", mutualAddr, "-tls-ca", pki.ca, "-tls-cert", pki.clientCert, "-tls-key", pki.clientKey, "-type", "earthquake")
	assert.Equal(t, 0, status, out)

	// A switch linking to the mutual-TLS one presents its certificate;
	// it prints its serving line once the link is up.
	linked, _ := serveAddr(t, bin, "-ontology", hazards, "-place", "usgs", "-name", "l", "-link", mutualAddr,
		"-tls-cert", pki.serverCert, "-tls-key", pki.serverKey, "-tls-ca", pki.ca)

	for _, p := range []*started{linked, mutual, sw} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		status, _, stderr := exitCode(t, p)
		assert.Equal(t, 0, status, stderr)
	}
}

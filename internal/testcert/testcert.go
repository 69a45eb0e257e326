// Package testcert makes TLS certificates for tests, in memory: a CA, a
// server certificate for 127.0.0.1 and "localhost", and client
// certificates with a given common name, handed out as ready *tls.Config
// values. Keys are ECDSA P-256 and certificates are valid for one hour,
// from a minute before New was called. PeerTLS serves a node that both
// listens and dials with one config.
//
// Nothing here is fit for production: the keys are made fresh for each
// test and never leave memory.
//
// A Set is safe for concurrent use by multiple goroutines.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"
)

// Validity of every certificate a Set issues, around the time it is made.
const (
	notBeforeSkew = time.Minute // before New, for clocks slightly behind
	lifetime      = time.Hour   // after New
)

// Set is a certificate authority made for one test, with a server
// certificate it issued. Its methods issue client certificates and build
// tls.Config values that trust this CA and no other.
type Set struct {
	t testing.TB

	// CA is the authority's self-signed certificate.
	CA *x509.Certificate
	// Pool holds CA alone: the roots of every config of the Set.
	Pool *x509.CertPool

	caKey  *ecdsa.PrivateKey
	server tls.Certificate

	foreignOnce sync.Once
	foreign     *Set
}

// New makes a CA named after t and a server certificate for 127.0.0.1,
// ::1 and "localhost". It fails t if the crypto library fails.
func New(t testing.TB) *Set {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "testcert CA for " + t.Name()},
		NotBefore:             now.Add(-notBeforeSkew),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testcert: CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testcert: CA certificate: %v", err)
	}
	s := &Set{t: t, CA: ca, Pool: x509.NewCertPool(), caKey: key}
	s.Pool.AddCert(ca)
	s.server = s.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return s
}

// ServerTLS returns a server config with the Set's server certificate
// that asks clients for no certificate. Each call returns a new config.
func (s *Set) ServerTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{s.server},
		MinVersion:   tls.VersionTLS12,
	}
}

// MutualServerTLS returns a server config like ServerTLS that requires
// each client to present a certificate issued by the Set's CA
// (tls.RequireAndVerifyClientCert).
func (s *Set) MutualServerTLS() *tls.Config {
	cfg := s.ServerTLS()
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.ClientCAs = s.Pool
	return cfg
}

// ClientTLS returns a client config that trusts the Set's CA and presents
// a new client certificate issued by it, with the given common name. It
// leaves ServerName empty: set it when dialing by another name than the
// address.
func (s *Set) ClientTLS(commonName string) *tls.Config {
	cfg := s.ClientTLSNoCert()
	cfg.Certificates = []tls.Certificate{s.ClientCert(commonName)}
	return cfg
}

// ClientTLSNoCert returns a client config that trusts the Set's CA and
// presents no certificate: a mutual-TLS server refuses it.
func (s *Set) ClientTLSNoCert() *tls.Config {
	return &tls.Config{RootCAs: s.Pool, MinVersion: tls.VersionTLS12}
}

// PeerTLS returns a config for a node that both listens and dials with
// it, mutually authenticated: one new certificate issued by the Set's CA,
// with the given common name, valid for 127.0.0.1, ::1 and "localhost"
// and for both server and client authentication; the Set's CA as the
// roots of servers and of clients; and ClientAuth set to
// tls.RequireAndVerifyClientCert. Set ClientAuth to tls.NoClientCert for
// server authentication only.
func (s *Set) PeerTLS(commonName string) *tls.Config {
	cert := s.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      s.Pool,
		ClientCAs:    s.Pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}
}

// ClientCert issues a new client certificate with the given common name,
// signed by the Set's CA.
func (s *Set) ClientCert(commonName string) tls.Certificate {
	return s.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// Foreign returns another Set, with a CA of its own that s does not
// trust, for negative tests: s.Foreign().ClientTLS(cn) refuses s's server
// and s.Foreign().ServerTLS() is refused by s's clients. A client that
// trusts s but presents a foreign certificate is
//
//	cfg := s.ClientTLSNoCert()
//	cfg.Certificates = []tls.Certificate{s.Foreign().ClientCert("mallory")}
//
// Every call returns the same Set.
func (s *Set) Foreign() *Set {
	s.foreignOnce.Do(func() { s.foreign = New(s.t) })
	return s.foreign
}

// issue signs tmpl, given its names and usages, with the CA, for a new
// key.
func (s *Set) issue(tmpl *x509.Certificate) tls.Certificate {
	s.t.Helper()
	key := newKey(s.t)
	tmpl.SerialNumber = serial(s.t)
	tmpl.NotBefore = s.CA.NotBefore
	tmpl.NotAfter = s.CA.NotAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.CA, &key.PublicKey, s.caKey)
	if err != nil {
		s.t.Fatalf("testcert: certificate for %q: %v", tmpl.Subject.CommonName, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		s.t.Fatalf("testcert: certificate for %q: %v", tmpl.Subject.CommonName, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcert: key: %v", err)
	}
	return key
}

// serial returns a random serial number of 127 bits.
func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("testcert: serial number: %v", err)
	}
	return n
}

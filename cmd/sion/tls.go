package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// tlsFiles are a command's TLS settings: PEM files, and whether a switch
// requires its clients' certificates.
type tlsFiles struct {
	cert, key, ca string
	// on asks a client for TLS without files: the switch is verified with
	// the system's roots.
	on bool
	// verifyClients makes serve require and verify a certificate signed
	// by ca from every session, link and gateway (mutual TLS).
	verifyClients bool
}

// clientFlags adds sub's and pub's TLS flags to fs.
func (f *tlsFiles) clientFlags(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "tls", false, "connect with TLS, verifying the switch with the system's roots (implied by -tls-ca and -tls-cert)")
	fs.StringVar(&f.ca, "tls-ca", "", "a PEM file of the CA certificates that verify the switch's certificate (turns TLS on)")
	fs.StringVar(&f.cert, "tls-cert", "", "a PEM file of this client's certificate, for a switch that requires one (mutual TLS; with -tls-key)")
	fs.StringVar(&f.key, "tls-key", "", "a PEM file of the private key of -tls-cert")
}

// serverFlags adds serve's TLS flags to fs.
func (f *tlsFiles) serverFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.cert, "tls-cert", "", "a PEM file of the switch's certificate: serve with TLS (with -tls-key); also its client certificate for -link and -federate")
	fs.StringVar(&f.key, "tls-key", "", "a PEM file of the private key of -tls-cert")
	fs.StringVar(&f.ca, "tls-ca", "", "a PEM file of the CA certificates that verify the switches it dials (-link, -federate) and, with -tls-verify-clients, its clients")
	fs.BoolVar(&f.verifyClients, "tls-verify-clients", false, "mutual TLS: admit only clients, switches and gateways with a certificate signed by -tls-ca")
}

// serverConfig returns serve's TLS config, nil for plain TCP. One config
// serves both roles (tcp.Config.TLS): the certificate is the server's and
// the client's when it dials, RootCAs verifies the switches it dials and
// ClientCAs its clients.
func (f tlsFiles) serverConfig() (*tls.Config, error) {
	if f.cert == "" && f.key == "" {
		if f.ca != "" || f.verifyClients {
			return nil, errors.New("-tls-ca and -tls-verify-clients need -tls-cert and -tls-key (tls_cert, tls_key): the switch serves TLS with its certificate")
		}
		return nil, nil
	}
	cfg, err := f.base()
	if err != nil {
		return nil, err
	}
	if f.verifyClients {
		if cfg.RootCAs == nil {
			return nil, errors.New("-tls-verify-clients (tls_verify_clients) needs -tls-ca (tls_ca): the CA that signs the clients' certificates")
		}
		cfg.ClientCAs = cfg.RootCAs
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// clientConfig returns sub's and pub's TLS config, nil for plain TCP.
func (f tlsFiles) clientConfig() (*tls.Config, error) {
	if !f.on && f.ca == "" && f.cert == "" && f.key == "" {
		return nil, nil
	}
	return f.base()
}

// base reads the files into a config: the certificate if any, the CAs as
// RootCAs.
func (f tlsFiles) base() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case (f.cert == "") != (f.key == ""):
		return nil, errors.New("-tls-cert and -tls-key (tls_cert, tls_key) go together: a certificate and its private key")
	case f.cert != "":
		c, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("TLS certificate %s, key %s: %w", f.cert, f.key, err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	if f.ca != "" {
		b, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("TLS CA file %s: no PEM certificate in it", f.ca)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// tlsHint explains a failed dial whose cause is TLS, or "" when there is
// nothing to add: with TLS, a switch whose certificate the CAs do not
// verify, or one that asks for a client certificate; without, a switch
// that may serve TLS.
func tlsHint(err error, withTLS bool) string {
	if !withTLS {
		if strings.Contains(err.Error(), "preamble") {
			// A TLS server reads the preamble as a bad handshake and hangs up.
			return " (if the switch serves TLS, give -tls-ca with the CA that signed its certificate)"
		}
		return ""
	}
	var unknown x509.UnknownAuthorityError
	var invalid x509.HostnameError
	switch msg := err.Error(); {
	case errors.As(err, &unknown) || strings.Contains(msg, "unknown authority"):
		return " (the switch's certificate is not signed by a CA of -tls-ca, or the system's)"
	case errors.As(err, &invalid):
		return " (the switch's certificate is not for this address)"
	case strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate"):
		return " (the switch requires a client certificate its CA signed: give -tls-cert and -tls-key)"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return " (the switch does not serve TLS: leave out -tls, -tls-ca and -tls-cert)"
	}
	return ""
}

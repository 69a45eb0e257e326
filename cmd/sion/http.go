package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/manage"
	"github.com/sion-go/sion/metrics"
	"golang.org/x/net/netutil"
)

// DefaultHTTPAddr is where "sion stats" looks for a switch's management
// view unless told otherwise: what "sion serve -http 127.0.0.1:8747"
// serves (as nats-server's monitoring port is 8222 beside its 4222).
const DefaultHTTPAddr = "127.0.0.1:8747"

// The limits of serve's management view (-http): what a client that
// sends slowly, never reads or holds connections open costs the switch.
// The view answers small GETs with JSON, the page and the metrics, so the
// limits are tight; a connection beyond MaxHTTPConns waits in the
// kernel's queue until one ends.
const (
	// MaxHTTPConns is the number of connections the view serves at once.
	MaxHTTPConns = 64
	// HTTPReadHeaderTimeout bounds reading a request's header;
	// HTTPReadTimeout the whole request.
	HTTPReadHeaderTimeout = 5 * time.Second
	HTTPReadTimeout       = 10 * time.Second
	// HTTPWriteTimeout bounds writing a response, from the end of the
	// request's header.
	HTTPWriteTimeout = 30 * time.Second
	// HTTPIdleTimeout is how long a kept-alive connection waits for its
	// next request.
	HTTPIdleTimeout = 60 * time.Second
	// MaxHTTPHeaderBytes bounds a request's header, in bytes.
	MaxHTTPHeaderBytes = 16 << 10
)

// httpOptions are serve's flags for the management view (package
// manage): -http ADDR and -http-peer NAME=URL, and their config fields
// http and http_peers.
type httpOptions struct {
	addr  *string
	peers stringList
}

// httpFlags registers serve's management flags on fs.
func httpFlags(fs *flag.FlagSet) *httpOptions {
	o := &httpOptions{}
	o.addr = fs.String("http", "", `the TCP address to serve the management view on: the page at /, JSON under /api/, /healthz, and Prometheus metrics at /metrics (e.g. 127.0.0.1:8747; "": none)`)
	fs.Var(&o.peers, "http-peer", "NAME=URL: the management view of a neighbour switch, which the page follows to draw the place; may be repeated")
	return o
}

// fromConfig takes the config file's fields for the flags not given (set
// names them).
func (o *httpOptions) fromConfig(cfg Config, set map[string]bool) {
	if !set["http"] && cfg.HTTP != "" {
		*o.addr = cfg.HTTP
	}
	if !set["http-peer"] {
		for name, url := range cfg.HTTPPeers {
			o.peers = append(o.peers, name+"="+url)
		}
	}
}

// peerMap returns the -http-peer names and URLs, or an error naming the
// first that is not NAME=URL with an http:// or https:// URL with a host.
func (o *httpOptions) peerMap() (map[string]string, error) {
	peers := map[string]string{}
	for _, p := range o.peers {
		name, u, ok := strings.Cut(p, "=")
		if !ok || name == "" || u == "" {
			return nil, fmt.Errorf("-http-peer %s: want NAME=URL", quoteIfNeeded(p))
		}
		if bad, ok := badName(name); ok {
			return nil, fmt.Errorf("-http-peer %s: the name %s", strconv.Quote(p), bad)
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || pu.User != nil {
			return nil, fmt.Errorf("-http-peer %s: the URL %s is not http://HOST[:PORT][/PATH] or https://…", quoteIfNeeded(p), quoteIfNeeded(u))
		}
		peers[name] = u
	}
	return peers, nil
}

// start serves sw's management view (package manage) and its metrics at
// /metrics (package metrics) when -http is set, says where on
// stdout (and on stderr if it fails later), and returns the function that
// stops it; a no-op without -http.
func (o *httpOptions) start(sw *sion.Switch, switchAddr string, stdout, stderr io.Writer) (stop func(), err error) {
	if *o.addr == "" {
		return func() {}, nil
	}
	peers, err := o.peerMap()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", *o.addr)
	if err != nil {
		return nil, fmt.Errorf("management view: %w", err)
	}
	l = netutil.LimitListener(l, MaxHTTPConns)
	mux := http.NewServeMux()
	mux.Handle("/metrics", getOrHead(metrics.Handler(sw)))
	mux.Handle("/", manage.New(sw, manage.Config{Addr: switchAddr, Peers: peers}))
	srv := newHTTPServer(mux)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errorf(stderr, "sion serve: management view: %v\n", err)
		}
	}()
	fmt.Fprintf(stdout, "management view of switch %s on http://%s\n", sw.Name(), l.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}, nil
}

// newHTTPServer returns the management view's server of h, with its
// timeouts and header limit; its listener limits the connections
// (MaxHTTPConns).
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: HTTPReadHeaderTimeout,
		ReadTimeout:       HTTPReadTimeout,
		WriteTimeout:      HTTPWriteTimeout,
		IdleTimeout:       HTTPIdleTimeout,
		MaxHeaderBytes:    MaxHTTPHeaderBytes,
	}
}

// getOrHead serves GET and HEAD requests with next and answers any other
// method 405, as the management view's endpoints do.
func getOrHead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method "+strconv.Quote(r.Method)+" not allowed: GET or HEAD", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

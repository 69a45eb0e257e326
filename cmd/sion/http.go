package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/manage"
	"github.com/sion-go/sion/metrics"
)

// DefaultHTTPAddr is where "sion stats" looks for a switch's management
// view unless told otherwise: what "sion serve -http 127.0.0.1:8747"
// serves (as nats-server's monitoring port is 8222 beside its 4222).
const DefaultHTTPAddr = "127.0.0.1:8747"

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

// start serves sw's management view (package manage) and its metrics at
// /metrics (package metrics) when -http is set, says where on
// stdout (and on stderr if it fails later), and returns the function that
// stops it; a no-op without -http.
func (o *httpOptions) start(sw *sion.Switch, switchAddr string, stdout, stderr io.Writer) (stop func(), err error) {
	if *o.addr == "" {
		return func() {}, nil
	}
	peers := map[string]string{}
	for _, p := range o.peers {
		name, url, ok := strings.Cut(p, "=")
		if !ok || name == "" || url == "" {
			return nil, fmt.Errorf("-http-peer %q: want NAME=URL", p)
		}
		peers[name] = url
	}
	l, err := net.Listen("tcp", *o.addr)
	if err != nil {
		return nil, fmt.Errorf("management view: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(sw))
	mux.Handle("/", manage.New(sw, manage.Config{Addr: switchAddr, Peers: peers}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "sion serve: management view: %v\n", err)
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

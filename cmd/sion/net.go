package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/tcp"
)

// DefaultAddr is where serve listens, and pub and sub connect, unless told
// otherwise: sion's port on the loopback interface.
const DefaultAddr = "127.0.0.1:4747"

// stringList is a flag that may be given several times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// Config is the file "sion serve -config FILE" reads: JSON, every field
// optional but ontology; a flag given on the command line overrides its
// field. See example-config.json beside this file.
type Config struct {
	// Listen is the TCP address to serve on (-listen).
	Listen string `json:"listen"`
	// Name is the switch's name (-name); Place the event place's (-place).
	Name  string `json:"name"`
	Place string `json:"place"`
	// Ontology is the place's ontology file (-ontology), relative to the
	// config file's directory.
	Ontology string `json:"ontology"`
	// Links are the addresses of switches of the place to link to (-link).
	Links []string `json:"links"`
	// KeyFile holds the place's shared key (-key-file), relative to the
	// config file's directory: every switch, pub and sub of the place
	// needs it. White space around it is ignored.
	KeyFile string `json:"key_file"`
	// Federate lists the gateways to other places that the switch
	// requests (-federate; see FederateConfig), its files relative to
	// the config file's directory.
	Federate []FederateConfig `json:"federate"`
	// AcceptFederation names the places whose gateways the place accepts
	// (-accept-federation); "*" accepts any. Empty: none, and a
	// requesting switch is told so.
	AcceptFederation []string `json:"accept_federation"`
	// TLSCert and TLSKey are PEM files of the switch's certificate and
	// key (-tls-cert, -tls-key): it serves TLS, and presents them when
	// it dials links and gateways. TLSCA holds the CA certificates that
	// verify the switches it dials and, with TLSVerifyClients, every
	// client, link and gateway (mutual TLS). Relative to the config
	// file's directory.
	TLSCert          string `json:"tls_cert"`
	TLSKey           string `json:"tls_key"`
	TLSCA            string `json:"tls_ca"`
	TLSVerifyClients bool   `json:"tls_verify_clients"`
	// HTTP is the address of the switch's management view (-http; "":
	// none); HTTPPeers maps neighbours' names to their management views'
	// URLs (-http-peer NAME=URL). See http.go.
	HTTP      string            `json:"http"`
	HTTPPeers map[string]string `json:"http_peers"`
}

// serve is "sion serve": one switch of a place, serving remote sessions,
// shared links and gateways over TCP (TLS with -tls-cert), linked to the
// switches named by -link and federated with the places named by
// -federate, until SIGINT or SIGTERM; then it closes its gateways and the
// switch (its links and sessions end) and exits 0.
func serve(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sion serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config", "", "a JSON config file (see example-config.json); flags override its fields")
	listen := fs.String("listen", DefaultAddr, "the TCP address to serve sessions and shared links on (port 0: any free port)")
	name := fs.String("name", "sion", "the switch's name")
	placeName := fs.String("place", "sion", "the event place's name")
	ontFile := fs.String("ontology", "", "the place's ontology (sion JSON, or RDF/XML with .rdf or .owl); required")
	keyFile := fs.String("key-file", "", "a file holding the place's shared key (at least 16 bytes)")
	var links stringList
	fs.Var(&links, "link", "the address of a switch of the same place to link to (a shared link); may be repeated")
	var federate, accept stringList
	fs.Var(&federate, "federate", "a gateway to another place: the address of its switch (two-way, events unchanged), or a JSON object as in a config's \"federate\"; may be repeated")
	fs.Var(&accept, "accept-federation", "a place whose gateways this place accepts (* any); may be repeated; default none")
	logLevel := fs.String("log", "info", "the switch's log on standard error, from this level on: debug, info, warn, error, or off")
	var tf tlsFiles
	tf.serverFlags(fs)
	httpOpts := httpFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var feds []FederateConfig
	for _, v := range federate {
		fc, err := parseFederate(v)
		if err != nil {
			errorf(stderr, "sion serve: %v\n", err)
			return 2
		}
		feds = append(feds, fc)
	}
	set := map[string]bool{} // the flags given: they override the file
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *configFile != "" {
		cfg, err := readConfig(*configFile)
		if err != nil {
			errorf(stderr, "sion serve: %v\n", err)
			return 1
		}
		fromFile := func(flagName string, field *string, v string) {
			if !set[flagName] && v != "" {
				*field = v
			}
		}
		fromFile("listen", listen, cfg.Listen)
		fromFile("name", name, cfg.Name)
		fromFile("place", placeName, cfg.Place)
		fromFile("ontology", ontFile, cfg.Ontology)
		fromFile("key-file", keyFile, cfg.KeyFile)
		if !set["link"] {
			links = cfg.Links
		}
		if !set["federate"] {
			feds = cfg.Federate
		}
		if !set["accept-federation"] {
			accept = cfg.AcceptFederation
		}
		fromFile("tls-cert", &tf.cert, cfg.TLSCert)
		fromFile("tls-key", &tf.key, cfg.TLSKey)
		fromFile("tls-ca", &tf.ca, cfg.TLSCA)
		if !set["tls-verify-clients"] {
			tf.verifyClients = cfg.TLSVerifyClients
		}
		httpOpts.fromConfig(cfg, set)
	}
	if *ontFile == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "sion serve: want -ontology FILE (or a -config that names one), and no arguments")
		return 2
	}
	if status := checkServe(serveSettings{listen: *listen, http: *httpOpts.addr, name: *name, place: *placeName,
		links: links, httpOpts: httpOpts, config: *configFile, set: set}, stderr); status != 0 {
		return status
	}
	key, err := readKey(*keyFile)
	if err != nil {
		errorf(stderr, "sion serve: %v\n", err)
		return 1
	}
	o, err := loadOntology(*ontFile)
	if err != nil {
		errorf(stderr, "sion serve: %v\n", err)
		return 1
	}
	gateways := make([]sion.GatewayConfig, len(feds))
	for i, fc := range feds {
		where := fmt.Sprintf("federate[%d]", i)
		switch {
		case len(federate) == 1:
			where = "-federate"
		case len(federate) > 1:
			where = fmt.Sprintf("-federate #%d", i+1)
		}
		if gateways[i], err = fc.gatewayConfig(o, where); err != nil {
			errorf(stderr, "sion serve: %v\n", err)
			return 1
		}
	}
	tlsConfig, err := tf.serverConfig()
	if err != nil {
		errorf(stderr, "sion serve: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: *placeName, Ontology: o, SharedKey: key,
		Federation: acceptFederation(*placeName, accept)})
	if err != nil {
		errorf(stderr, "sion serve: %v\n", err)
		return 1
	}
	logger, err := serveLogger(*logLevel, stderr)
	if err != nil {
		errorf(stderr, "sion serve: %v\n", err)
		return 2
	}
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: *name, Place: place, Logger: logger})
	if err != nil {
		errorf(stderr, "sion serve: %v\n", err)
		return 1
	}
	defer sw.Close()
	tr, err := tcp.New(tcp.Config{TLS: tlsConfig})
	if err != nil {
		errorf(stderr, "sion serve: %v\n", err)
		return 1
	}
	l, err := tr.Listen(*listen)
	if err != nil {
		errorf(stderr, "sion serve: %v\n", err)
		return 1
	}
	served := make(chan error, 1)
	go func() { served <- sw.Serve(ctx, l) }()
	for _, addr := range links {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := sw.Link(lctx, tr, addr, sion.LinkConfig{})
		cancel()
		if err != nil {
			errorf(stderr, "sion serve: link to %s: %v\n", addr, err)
			stop()
			<-served
			return 1
		}
	}
	fmt.Fprintf(stdout, "switch %s of place %s serving on %s\n", *name, *placeName, l.Addr())
	stopHTTP, err := httpOpts.start(sw, l.Addr().String(), stdout, stderr)
	if err != nil {
		errorf(stderr, "sion serve: %v\n", err)
		stop()
		<-served
		return 1
	}
	defer stopHTTP()
	var gws []*sion.Gateway
	closeGateways := func() {
		for _, g := range gws {
			if err := g.Close(); err != nil {
				errorf(stderr, "sion serve: gateway %s: %v\n", g.Name(), err)
			}
		}
	}
	for i, gc := range gateways {
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		g, err := sw.Federate(fctx, tr, feds[i].Addr, gc)
		cancel()
		if err != nil && ctx.Err() != nil {
			break // interrupted: close what is up, exit 0
		}
		if err != nil {
			errorf(stderr, "sion serve: federate with %s: %v\n", feds[i].Addr, err)
			closeGateways()
			stop()
			<-served
			return 1
		}
		gws = append(gws, g)
		info := g.Info()
		fmt.Fprintf(stdout, "gateway %s to switch %s of place %s up (%s)\n", g.Name(), info.Peer, info.PeerPlace, directions(gc))
	}
	if err := <-served; err != nil && ctx.Err() == nil {
		errorf(stderr, "sion serve: %v\n", err)
		closeGateways()
		return 1
	}
	closeGateways() // each tells the other place the federation ends
	dctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := sw.Drain(dctx); err != nil { // new sessions refused, each session drained, then closed
		errorf(stderr, "sion serve: draining for %v: %v; closing\n", drainTimeout, err)
	}
	if err := sw.Close(); err != nil {
		errorf(stderr, "sion serve: %v\n", err)
		return 1
	}
	return 0
}

// serveSettings are the settings of serve that checkServe checks, after
// the config file's fields were taken for the flags not given (set).
type serveSettings struct {
	listen, http, name, place string
	links                     []string
	httpOpts                  *httpOptions
	config                    string          // the -config file, if any
	set                       map[string]bool // the flags given
}

// checkServe refuses, before serve starts anything, settings that cannot
// work: a management view on the switch's own address, a link to
// itself, a name that is empty or does not print, a -http-peer that is
// not NAME=http(s)://HOST…. It writes why, naming the flag (or the
// config file's field) and the value, and returns the exit status: 2
// when the command line is wrong, 1 when the config file is; 0 when all
// is well.
func checkServe(st serveSettings, stderr io.Writer) int {
	// where names a setting: its flag, or the config file's field when
	// the flag was not given; status is what a fault in it returns.
	where := func(flagName, field string) (string, int) {
		if st.config == "" || st.set[flagName] {
			return "-" + flagName, 2
		}
		return fmt.Sprintf("config %s: %s", st.config, field), 1
	}
	fail := func(flagName, field, format string, args ...any) int {
		w, status := where(flagName, field)
		errorf(stderr, "sion serve: %s %s\n", w, fmt.Sprintf(format, args...))
		return status
	}
	for _, n := range []struct{ flag, what, value string }{{"name", "the switch's name", st.name}, {"place", "the event place's name", st.place}} {
		if bad, ok := badName(n.value); ok {
			return fail(n.flag, n.flag, "%s: %s %s", strconv.Quote(n.value), n.what, bad)
		}
	}
	if st.http != "" && sameAddr(st.http, st.listen) {
		w1, s1 := where("http", "http")
		w2, s2 := where("listen", "listen")
		errorf(stderr, "sion serve: %s %s is the switch's own address (%s %s): give the management view an address of its own\n",
			w1, quoteIfNeeded(st.http), w2, quoteIfNeeded(st.listen))
		return max(s1, s2)
	}
	for _, l := range st.links {
		if sameAddr(l, st.listen) {
			return fail("link", "links", "%s: a link to this switch's own address (-listen %s); -link names another switch of the place", quoteIfNeeded(l), quoteIfNeeded(st.listen))
		}
	}
	if _, err := st.httpOpts.peerMap(); err != nil {
		w, status := where("http-peer", "http_peers")
		if w == "-http-peer" {
			errorf(stderr, "sion serve: %v\n", err)
		} else {
			errorf(stderr, "sion serve: %s: %v\n", w, err)
		}
		return status
	}
	return 0
}

// sameAddr reports whether TCP addresses a and b ("host:port") are the
// same listening address: the same port, not 0, on the same host, or on
// every interface for either.
func sameAddr(a, b string) bool {
	ha, pa, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	hb, pb, err := net.SplitHostPort(b)
	if err != nil || pa != pb || pa == "0" {
		return false
	}
	canon := func(h string) string {
		switch h {
		case "", "0.0.0.0", "::", "[::]":
			return "*"
		case "localhost":
			return "127.0.0.1"
		}
		if ip := net.ParseIP(h); ip != nil {
			if ip.IsUnspecified() {
				return "*"
			}
			return ip.String()
		}
		return h
	}
	ha, hb = canon(ha), canon(hb)
	return ha == hb || ha == "*" || hb == "*"
}

// drainTimeout bounds serve's drain at SIGINT or SIGTERM (Switch.Drain);
// past it, the switch closes with what is left.
const drainTimeout = 10 * time.Second

// directions says which directions of gateway cfg are open.
func directions(cfg sion.GatewayConfig) string {
	switch {
	case cfg.Import != nil && cfg.Export != nil:
		return "import and export"
	case cfg.Import != nil:
		return "import"
	}
	return "export"
}

// readConfig reads a Config file; its file names become relative to the
// file's directory.
func readConfig(path string) (Config, error) {
	var cfg Config
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	if err := decodeStrict(b, "config "+path, &cfg); err != nil {
		return cfg, err
	}
	dir := filepath.Dir(path)
	for _, f := range []*string{&cfg.Ontology, &cfg.KeyFile, &cfg.TLSCert, &cfg.TLSKey, &cfg.TLSCA} {
		*f = rebase(dir, *f)
	}
	for i := range cfg.Federate {
		cfg.Federate[i].rebase(dir)
	}
	return cfg, nil
}

// readKey returns the shared key in path, trimmed; nil for "".
func readKey(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key := []byte(strings.TrimSpace(string(b)))
	if len(key) < sion.MinSharedKeyBytes {
		return nil, fmt.Errorf("key file %s: the key has %d bytes; at least %d", path, len(key), sion.MinSharedKeyBytes)
	}
	return key, nil
}

// dial opens a remote session on the switch at addr, with the place's
// shared key in keyFile ("" for none), over TLS as tf says.
func dial(ctx context.Context, addr, name, keyFile string, tf tlsFiles, rp sion.ReconnectPolicy) (*sion.Session, error) {
	key, err := readKey(keyFile)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := tf.clientConfig()
	if err != nil {
		return nil, err
	}
	tr, err := tcp.New(tcp.Config{TLS: tlsConfig})
	if err != nil {
		return nil, err
	}
	s, err := sion.Dial(ctx, tr, addr, sion.SessionConfig{Name: name, SharedKey: key, Reconnect: rp})
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, tlsHint(err, tlsConfig != nil))
	}
	return s, nil
}

// serveLogger returns the switch's logger for -log level: text records
// on stderr (slog quotes a value that does not print, so a peer's name
// cannot write to the terminal raw), or nil for off.
func serveLogger(level string, stderr io.Writer) (*slog.Logger, error) {
	if level == "off" {
		return nil, nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log %s: want debug, info, warn, error or off", strconv.Quote(level))
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: l})), nil
}

// reconnectPolicy is how sub and pub reconnect: at most attempts times
// (0: not at all), saying on stderr what happened; once they give up, the
// session ends and its calls fail, so the command exits with status 1.
func reconnectPolicy(cmd string, attempts int, stderr io.Writer) sion.ReconnectPolicy {
	return sion.ReconnectPolicy{Disabled: attempts == 0, MaxAttempts: attempts, OnChange: func(e sion.ConnectionEvent) {
		switch {
		case e.Ended:
		case !e.Connected:
			errorf(stderr, "%s: the connection to %s failed: %v; reconnecting (at most %d attempts)\n", cmd, e.Addr, e.Err, attempts)
		case e.Resumed:
			errorf(stderr, "%s: reconnected to %s; %d events lost\n", cmd, e.Addr, e.Lost)
		default:
			errorf(stderr, "%s: reconnected to %s, which did not hold the session any more: events published while away were not delivered\n", cmd, e.Addr)
		}
	}}
}

// sub is "sion sub": it subscribes with FILTER on the switch at -server
// and prints each delivery until N were received or it is interrupted.
func sub(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sion sub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", DefaultAddr, "the switch's address")
	keyFile := fs.String("key-file", "", "a file holding the place's shared key, if it has one")
	var tf tlsFiles
	tf.clientFlags(fs)
	n := fs.Int("n", 0, "stop after this many deliveries (0: until interrupted)")
	format := fs.String("o", "text", "output: text (type, attributes, matched subscriptions and scores) or json (one object per line)")
	reconnect := fs.Int("reconnect", 10, "attempts to reconnect when the connection to the switch fails, before sub exits with status 1 (0: exit at once)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case *n < 0:
		errorf(stderr, "sion sub: -n %d: want a count of deliveries, or 0 for until interrupted\n", *n)
		return 2
	case *reconnect < 0:
		errorf(stderr, "sion sub: -reconnect %d: want a number of attempts, or 0 for none\n", *reconnect)
		return 2
	case *format != "text" && *format != "json":
		errorf(stderr, "sion sub: -o %s: want text or json\n", strconv.Quote(*format))
		return 2
	case fs.NArg() != 1:
		fmt.Fprintln(stderr, "sion sub: want one filter, quoted for the shell: sion sub '{type ⊑ Alarm}'")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := dial(ctx, *server, "sion-sub", *keyFile, tf, reconnectPolicy("sion sub", *reconnect, stderr))
	if err != nil {
		errorf(stderr, "sion sub: %s: %v\n", *server, err)
		return 1
	}
	defer s.Close()
	subscription, err := s.Subscribe(ctx, fs.Arg(0), sion.WithQueue(1<<12))
	if err != nil {
		errorf(stderr, "sion sub: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "subscribed to %s on %s\n", subscription.Filter(), *server)
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	for got := 0; *n == 0 || got < *n; got++ {
		d, err := subscription.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return 0 // interrupted
			}
			errorf(stderr, "sion sub: %v\n", err)
			return 1
		}
		if *format == "json" {
			writeJSON(out, d)
		} else {
			writeText(out, d)
		}
		out.Flush()
	}
	return 0
}

// writeText writes d on one line: its type, its attributes, the
// subscriptions it matched with their scores and its payload's size and
// media type. Names and the media type are quoted when they hold a
// character that does not print, as string values always are.
func writeText(w io.Writer, d sion.Delivery) {
	var b strings.Builder
	b.WriteString(quoteIfNeeded(d.Event.Type))
	for _, a := range d.Event.Attrs {
		fmt.Fprintf(&b, " %s=%s", quoteIfNeeded(a.Name), a.Value)
	}
	for _, m := range d.Matched {
		fmt.Fprintf(&b, " [subscription %d score %s]", m.Subscription, strconv.FormatFloat(m.Score, 'g', -1, 64))
	}
	switch {
	case len(d.Event.Data) > 0 && d.Event.ContentType != "":
		fmt.Fprintf(&b, " (%d bytes of %s)", len(d.Event.Data), quoteIfNeeded(d.Event.ContentType))
	case len(d.Event.Data) > 0:
		fmt.Fprintf(&b, " (%d bytes)", len(d.Event.Data))
	}
	fmt.Fprintln(w, b.String())
}

// jsonDelivery is one line of "sion sub -o json".
type jsonDelivery struct {
	ID          string         `json:"id"`
	Type        string         `json:"type"`
	Attrs       map[string]any `json:"attrs,omitempty"`
	ContentType string         `json:"content_type,omitempty"`
	Data        string         `json:"data,omitempty"`
	TraceParent string         `json:"traceparent,omitempty"`
	TraceState  string         `json:"tracestate,omitempty"`
	Matched     []jsonMatch    `json:"matched"`
}

// jsonMatch is one subscription a delivery matched, with its score.
type jsonMatch struct {
	Subscription uint64  `json:"subscription"`
	Score        float64 `json:"score"`
}

func writeJSON(w io.Writer, d sion.Delivery) {
	j := jsonDelivery{ID: d.Event.ID.String(), Type: d.Event.Type, ContentType: d.Event.ContentType, Data: string(d.Event.Data),
		TraceParent: d.Event.TraceParent, TraceState: d.Event.TraceState, Matched: make([]jsonMatch, len(d.Matched))}
	for i, m := range d.Matched {
		j.Matched[i] = jsonMatch(m)
	}
	if len(d.Event.Attrs) > 0 {
		j.Attrs = map[string]any{}
		for _, a := range d.Event.Attrs {
			j.Attrs[a.Name] = jsonValue(a.Value)
		}
	}
	b, _ := json.Marshal(j) // values are strings, numbers and bools
	fmt.Fprintf(w, "%s\n", jsonForTerminal(b))
}

// jsonValue is v as JSON writes it: an int as its decimal string when
// JSON numbers would lose it, a time in RFC 3339.
func jsonValue(v ontology.Value) any {
	switch v.Kind() {
	case ontology.KindInt:
		if i := v.Int(); i > 1<<53 || i < -(1<<53) {
			return strconv.FormatInt(i, 10)
		}
		return v.Int()
	case ontology.KindFloat:
		return v.Float()
	case ontology.KindBool:
		return v.Bool()
	case ontology.KindTime:
		return v.Time().UTC().Format(time.RFC3339Nano)
	default:
		return v.Str()
	}
}

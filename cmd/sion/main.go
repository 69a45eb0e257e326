// Command sion runs and inspects sion from a shell (DESIGN.md, "Around the
// library", Operations).
//
//	sion serve -ontology FILE [-listen 127.0.0.1:4747] [-name N] [-place P] [-link ADDR …] [-key-file F]
//	           [-federate ADDR|JSON …] [-accept-federation PLACE …]
//	           [-tls-cert F -tls-key F [-tls-ca F] [-tls-verify-clients]] [-log LEVEL]
//	sion serve -config FILE [flags that override it]
//	sion sub [-server ADDR] [-key-file F] [TLS] [-n N] [-o text|json] [-reconnect N] 'FILTER'
//	sion pub [-server ADDR] [-key-file F] [TLS] [-reconnect N] -type T [-attr k=v …] [-payload FILE|-] [-content-type M]
//	sion pub [-server ADDR] [-key-file F] [TLS] [-reconnect N] < events.jsonl
//	sion filter check [-ontology FILE.json|FILE.rdf] 'FILTER'
//	sion stats [-server 127.0.0.1:8747|URL] [-o text|json]
//
// where TLS, for sub and pub, is [-tls] [-tls-ca F] [-tls-cert F -tls-key F].
//
// serve runs one switch (S1 SI-SW) of an event place over TCP: it serves
// remote sessions and shared links, links to the switches named by -link,
// and on SIGINT or SIGTERM drains and exits 0: it stops accepting,
// closes its gateways, refuses new sessions and subscriptions, lets each
// session's queued events reach their subscriptions (Switch.Drain, for at
// most 10 s), then closes — its links and sessions end. It writes the
// switch's log records (SwitchConfig.Logger: refused sessions and links,
// slow consumers, failing links) on stderr as slog text, from -log's
// level on (debug, info — the default —, warn, error; off: none); slog
// quotes a value that does not print. Its config file
// is JSON (Config; example-config.json beside this file): listen, name,
// place, ontology, links, key_file, federate, accept_federation,
// tls_cert, tls_key, tls_ca, tls_verify_clients, http and http_peers,
// the files relative to the config file; a flag given overrides its
// field (a list flag, the whole list). A file that does not parse, a
// field it does not know, or data after its object is named with its
// line and column; so are the federate entries and mapping files. With a key
// file the place admits only switches and sessions that hold the same
// key (PlaceConfig.SharedKey), so pub and sub need -key-file too.
//
// Federation (S1 SI-GW). Each -federate, or entry of the config's
// "federate" list (FederateConfig), makes a gateway from this switch's
// place to the place of the switch at its address, once the switch
// serves and its links are up; serve prints "gateway NAME to switch S of
// place P up (DIRECTIONS)" for each, and exits 1 if one cannot be made
// (unreachable, refused, or a bad mapping). A gateway that fails later
// re-establishes itself; on SIGINT or SIGTERM serve closes its gateways,
// telling the other places, before its switch. -federate ADDR is a
// two-way gateway that converts nothing, for places that share an
// ontology; -federate '{…}' takes a JSON entry like the config file's,
// its files relative to the working directory (the comments here are
// not JSON; example-federate.json is a whole file):
//
//	"federate": [{
//	  "addr": "127.0.0.1:4747",             // a switch of the other place (required)
//	  "name": "usgs-quakes",                // default "<switch>→<addr>"
//	  "ontology": "hazards.json",           // the other place's ontology: needed by a mapping
//	  "key_file": "usgs.key",               // the other place's shared key, if it has one
//	  "import": {                           // from the other place into this one
//	    "mapping": "usgs-to-alerts.json",   // a MappingFile, or the object inline
//	    "firewall": ["{type ⊑ seismic; mag >= 2.5}"]
//	  },
//	  "export": {}                          // from this place into the other
//	}]
//
// An entry with neither import nor export is two-way and converts
// nothing; one with either opens only the directions it names. A
// direction without a mapping passes events unchanged; its firewall lists
// filters over the source place's ontology, one of which an event must
// match to cross (absent: every event the mapping converts and the other
// place subscribes to; []: none). The mapping file (MappingFile;
// example-mapping.json) holds type rules and attribute rules: renames,
// linear conversions (scale, offset), value tables, drops.
//
// A place accepts a gateway only from the places its serve names with
// -accept-federation PLACE (repeatable; "accept_federation" in the
// config; "*" any place); by default it accepts none, and the requesting
// serve is told so, with the flag to give. The name is the one the
// requesting switch gives: what authenticates it is the place's shared
// key or mutual TLS.
//
// TLS. With -tls-cert and -tls-key (PEM) serve serves TLS only, and
// presents the same certificate when it dials its -link and -federate
// switches, which it verifies with -tls-ca (or the system's roots); with
// -tls-verify-clients it requires from every session, link and gateway a
// certificate signed by -tls-ca (mutual TLS). One setting covers all of
// a serve's connections: its links and gateways go to switches that
// serve TLS too. sub and pub use TLS with -tls-ca (the CA of the
// switch's certificate), -tls (the system's roots), or -tls-cert and
// -tls-key (a client certificate, for mutual TLS); a TLS failure is
// explained (unknown CA, a certificate required, a switch that does or
// does not serve TLS) and the status is 1.
//
// sub opens a remote session, subscribes with FILTER (the contract: it
// prints "subscribed to …" on stderr once the filter is active in the
// place) and prints each delivery on stdout — type, attributes, the
// matched subscription and its score; -o json writes one JSON object per
// line, with the event's W3C trace context as "traceparent" and
// "tracestate" when it has one — until -n were received (status 0), it
// is interrupted (0), or the session fails (1: its switch went away and
// -reconnect N attempts to reconnect, default 10, failed; the reason on
// stderr). -n takes 0 (no limit) or a positive count;
// a negative one, like an -o other than text or json, is a wrong command
// line (status 2). In text, a type, attribute name or media type that
// holds a character that does not print (a control character: ESC, CR,
// NUL, …) is quoted as Go quotes strings ("\x1b[2J"), as string values
// always are, so nothing a publisher sends acts on the terminal; so is
// what stats prints from a view, and stderr escapes such characters in
// every message, which may quote a peer, and writes each message on one
// line. -o json (sub's and stats') escapes as \u0080… the DEL and C1
// characters that encoding/json leaves raw.
//
// pub publishes one event from its flags — an -attr value is read as an
// int, a float, true or false, an RFC 3339 time, or else a string, and the
// switch checks it against the ontology — or, without -type, one per line
// of standard input: {"type": T, "attrs": {name: value, …},
// "content_type": M, "data": a JSON value or a string, "traceparent": P,
// "tracestate": S (W3C Trace Context, optional)}, every field optional
// but type. A line with another field (a typo: "atributes"), with data
// after the object, or longer than 4 MiB (skipped) is refused naming its
// line, as is an event the switch refuses; the status is then 1 and the
// other lines are published. When its switch goes away, pub tries to
// reconnect (-reconnect N attempts, default 10; 0: none), then names the
// line it could not publish, says the lines after it were not, and exits
// 1. A -payload is at
// most sion.DefaultMaxPayloadBytes (960 KiB, so that the event fits the
// transport's 1 MiB frame); a larger one is refused before pub connects
// (status 1).
//
// serve -http ADDR also serves the switch's management view (S1 SION-MT;
// package manage) on ADDR — the page at /, JSON under /api/, /healthz —
// and its metrics for Prometheus at /metrics (package metrics), with
// limits for clients that hold connections or send slowly: at most 64
// connections at once (MaxHTTPConns; more wait until one ends), 5 s to
// read a request's header and 10 s the whole request, 30 s to write an
// answer, 60 s for a kept-alive connection to send its next request, and
// 16 KiB of header (net/http allows 4 KiB over); /metrics answers GET and
// HEAD only. -http-peer NAME=URL (an http:// or https:// URL)
// names a neighbour's view, which the page follows to draw the whole
// place; without -http there is none.
//
// serve refuses, before it starts anything, settings that cannot work: a
// -http address that is its own -listen address, a -link to its own
// -listen address, a -name or -place that is empty or holds a character
// that does not print, a -http-peer that is not NAME=http(s)://HOST…;
// the message names the flag (or the config file's field) and the value,
// and the status is 2 (1 when the value is the config file's).
//
// stats reads a
// management view (-server names it: the -http address, or a URL; as
// the nats command reads nats-server's monitoring port) and prints the
// switch's links with their state and counters, the filters it
// propagated with their reference counts, its gateways, its sessions
// with their drops and slow consumers, and its totals; -o json prints
// the endpoints' answers as one JSON object. It exits 1 when the view
// cannot be read.
//
// filter check reads a filter in sion's filter language (filter/SYNTAX.md),
// prints its canonical form and what it selects — the event type and the
// subtypes it covers, the match mode, each predicate with the kind of the
// attribute it tests — and exits 0; given an ontology it also resolves the
// filter against it (types and attribute names, synonyms, kinds). A filter
// that does not parse or resolve is explained on standard error, with a
// caret under the place in the source, and the exit status is 1.
//
// Exit status, as the nats command's: 0 done, 1 the work failed (a switch
// that cannot be reached, refuses or goes away, a bad filter, event or
// file), 2 a wrong command line (as the flag package does).
//
// The command uses the standard library's flag package, not a command
// framework: its few subcommands need no more, and sion's core go.mod
// stays small.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit status: 0 done, 1
// the work failed (a bad filter), 2 a wrong command line.
func run(args []string, stdout, stderr io.Writer) int {
	stderr = escaper{stderr} // its messages may quote a peer
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "filter":
		if len(args) < 2 || args[1] != "check" {
			fmt.Fprintln(stderr, "sion filter: want: sion filter check [-ontology FILE] 'FILTER'")
			return 2
		}
		return filterCheck(args[2:], stdout, stderr)
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "pub":
		return pub(args[1:], os.Stdin, stdout, stderr)
	case "sub":
		return sub(args[1:], stdout, stderr)
	case "stats":
		return stats(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "sion: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: sion <command> [flags]

Commands:
  serve -ontology FILE [-listen 127.0.0.1:4747] [-name N] [-place P] [-link ADDR …]
        [-federate ADDR|JSON …] [-accept-federation PLACE …] [-tls-cert F -tls-key F] [-http ADDR]
        run one switch, with its links and gateways, until SIGINT or SIGTERM
        (-http: its management view and /metrics, at most 64 connections)
  serve -config FILE
        the same from a JSON file (see example-config.json)
  sub [-server ADDR] [-n N] [-o text|json] [-reconnect N] 'FILTER'
        print each event the filter matches (-n: stop after N; 0: never);
        exit 1 when the switch goes away (after -reconnect attempts, default 10)
  pub [-server ADDR] [-reconnect N] -type T [-attr k=v …] [-payload FILE|-] [-content-type M]
        publish one event (a payload of at most 960 KiB); without -type, one
        per JSON line of standard input (at most 4 MiB a line): {"type": T,
        "attrs": {…}, "content_type": M, "data": …, "traceparent": P, "tracestate": S};
        exit 1 when the switch goes away (after -reconnect attempts, default 10)
  filter check [-ontology FILE.json|FILE.rdf] 'FILTER'
        explain a filter, or say where and why it is wrong
  stats [-server 127.0.0.1:8747|URL] [-o text|json]
        print a switch's links, routes, gateways and sessions from its
        management view (serve -http ADDR)
`)
}

// filterCheck is "sion filter check".
func filterCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sion filter check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ontFile := fs.String("ontology", "", "an ontology (sion JSON, or RDF/XML with .rdf or .owl) to resolve the filter against")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "sion filter check: want one filter, quoted for the shell: sion filter check '{type ⊑ Alarm; level >= 3}'")
		return 2
	}
	src := fs.Arg(0)
	var o *ontology.Ontology
	if *ontFile != "" {
		var err error
		if o, err = loadOntology(*ontFile); err != nil {
			fmt.Fprintf(stderr, "sion filter check: %v\n", err)
			return 1
		}
	}
	f, err := filter.Compile(src)
	if err == nil && o != nil {
		f, err = filter.Resolve(o, f)
	}
	if err != nil {
		explainError(stderr, src, err)
		return 1
	}
	explain(stdout, f, o)
	return 0
}

// loadOntology reads an ontology file by its extension.
func loadOntology(path string) (*ontology.Ontology, error) {
	r, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	switch strings.ToLower(filepath.Ext(path)) {
	case ".rdf", ".owl", ".xml":
		return ontology.LoadRDFXML(r, path)
	default:
		return ontology.LoadJSON(r, path)
	}
}

// explainError writes err, and for a syntax error the source line with a
// caret under the column it names.
func explainError(w io.Writer, src string, err error) {
	fmt.Fprintf(w, "sion filter check: %v\n", err)
	var se *filter.SyntaxError
	if !errors.As(err, &se) || se.Line < 1 {
		return
	}
	lines := strings.Split(src, "\n")
	if se.Line > len(lines) {
		return
	}
	line := lines[se.Line-1]
	fmt.Fprintf(w, "  %s\n  %s^\n", line, caretPad(line, se.Col))
}

// caretPad returns the blanks that put a caret under column col (1-based,
// in runes) of line, keeping its tabs so that it lines up.
func caretPad(line string, col int) string {
	var b strings.Builder
	i := 1
	for _, r := range line {
		if i >= col {
			break
		}
		if r == '\t' {
			b.WriteRune('\t')
		} else {
			b.WriteRune(' ')
		}
		i++
	}
	for ; i < col; i++ {
		b.WriteRune(' ')
	}
	return b.String()
}

// explain writes what f selects.
func explain(w io.Writer, f *filter.Filter, o *ontology.Ontology) {
	fmt.Fprintf(w, "filter: %s\n", f)
	spec := f.Spec()
	switch {
	case f.Type() == filter.AnyType:
		fmt.Fprintln(w, "type:   every event type (*)")
	case o == nil:
		fmt.Fprintf(w, "type:   %s and its subtypes (give -ontology to list them)\n", f.Type())
	default:
		t, _ := o.Lookup(f.Type())
		var subs []string
		for _, id := range o.Descendants(t.ID) {
			if id != t.ID {
				subs = append(subs, o.Type(id).Name)
			}
		}
		if len(subs) == 0 {
			fmt.Fprintf(w, "type:   %s (no subtypes)\n", t.Name)
		} else {
			fmt.Fprintf(w, "type:   %s and its %d subtypes: %s\n", t.Name, len(subs), strings.Join(subs, ", "))
		}
	}
	n := len(spec.Predicates)
	switch m := f.Mode(); {
	case m == filter.ModeAll && n == 0:
		fmt.Fprintln(w, "match:  every event of the type (no predicates)")
	case m == filter.ModeAll && n == 1:
		fmt.Fprintln(w, "match:  its one predicate")
	case m == filter.ModeAll:
		fmt.Fprintf(w, "match:  all of its %d predicates\n", n)
	case m == filter.ModeAtLeast:
		fmt.Fprintf(w, "match:  at least %d of its %s\n", f.AtLeast(), plural(n))
	case m == filter.ModeScore:
		fmt.Fprintf(w, "match:  the weights of the predicates that hold add up to at least %s\n", ontology.FormatFloat(f.Threshold()))
	}
	for _, p := range spec.Predicates {
		fmt.Fprintf(w, "  %-40s %s\n", predicate(p), operand(p, f, o))
	}
}

// predicate returns p's canonical source, as the filter's String writes
// it.
func predicate(p filter.Predicate) string {
	w := p.Weight
	p.Weight = 0
	var ns map[string]string
	if p.Operand.Source == filter.SourceXPath {
		ns = map[string]string{} // the prefixes are the filter's; any URI will do to print it
		for _, prefix := range xpathPrefixes(p.Operand.Name) {
			ns[prefix] = "urn:x"
		}
	}
	one, err := filter.Build(filter.Spec{Namespaces: ns, Predicates: []filter.Predicate{p}})
	if err != nil {
		return "?" // cannot happen: p was part of a valid filter
	}
	// "{type ⊑ *; [xmlns:p = "urn:x"; …]PREDICATE}"
	s := strings.TrimSuffix(strings.TrimPrefix(one.String(), "{type ⊑ *; "), "}")
	for trimmed := true; trimmed; {
		trimmed = false
		for prefix := range ns {
			if t := strings.TrimPrefix(s, "xmlns:"+prefix+` = "urn:x"; `); t != s {
				s, trimmed = t, true
			}
		}
	}
	if w != 0 && w != 1 {
		s += " weight " + strconv.FormatFloat(w, 'g', -1, 64)
	}
	return s
}

// xpathPrefixes returns the namespace prefixes an XPath uses ("s" of
// s:reading).
func xpathPrefixes(expr string) []string {
	var out []string
	for _, step := range strings.FieldsFunc(expr, func(r rune) bool {
		return !(r == ':' || r == '_' || r == '-' || r == '.' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}) {
		if prefix, _, ok := strings.Cut(step, ":"); ok && prefix != "" {
			out = append(out, prefix)
		}
	}
	return out
}

// plural returns "1 predicate" or "n predicates".
func plural(n int) string {
	if n == 1 {
		return "1 predicate"
	}
	return fmt.Sprintf("%d predicates", n)
}

// operand says what p reads: an attribute with its kind where the
// ontology knows it, a JSON path or an XPath over the payload.
func operand(p filter.Predicate, f *filter.Filter, o *ontology.Ontology) string {
	switch p.Operand.Source {
	case filter.SourceJSON:
		return "a JSON path into the payload"
	case filter.SourceXPath:
		return "XPath 1.0 over the XML payload"
	}
	if p.Operand.Name == "" {
		return ""
	}
	if o == nil || f.Type() == filter.AnyType {
		return "attribute " + p.Operand.Name
	}
	t, _ := o.Lookup(f.Type())
	if a, ok := o.AttributeBelow(t.ID, p.Operand.Name); ok {
		unit := ""
		if a.Unit != "" {
			unit = ", in " + a.Unit
		}
		return fmt.Sprintf("attribute %s (%s%s)", a.Name, a.Kind, unit)
	}
	return "attribute " + p.Operand.Name
}

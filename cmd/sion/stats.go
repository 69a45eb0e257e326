package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
)

// The parts of the management view's JSON (package manage) that stats
// prints; see manage's package doc for all of it.
type (
	switchView struct {
		Name, Place, Addr, State, Uptime string
		Stats                            struct {
			Sessions, Subscriptions, Filters                int
			EventsIn                                        uint64 `json:"events_in"`
			Fires, Deliveries, Dropped, Refused, Duplicates uint64
			Away                                            int
			Links                                           linkCounters
		}
	}
	linkCounters struct {
		EventsSent      uint64 `json:"events_sent"`
		EventsReceived  uint64 `json:"events_received"`
		ControlSent     uint64 `json:"control_sent"`
		ControlReceived uint64 `json:"control_received"`
		Dropped         uint64
		Expired         uint64
		Duplicates      uint64
		Refused         uint64
	}
	linkView struct {
		Peer, State string
		Parent      bool
		linkCounters
		Routes, Proxies int
	}
	routeView struct {
		Peer, Filter, Gateway string
		TTL, Refs             int
		Acknowledged          bool
		CoveredBy             string `json:"covered_by"`
	}
	gatewayView struct {
		Name, Peer, State string
		PeerPlace         string `json:"peer_place"`
		Requested         bool
		Import, Export    map[string]any
		Routes, Proxies   int
	}
	sessionView struct {
		ID                          uint64
		Name, Kind, Peer            string
		Away, Slow                  bool
		NumSubscriptions            int `json:"num_subscriptions"`
		Matched, Delivered, Dropped uint64
		SpoolDropped                uint64 `json:"spool_dropped"`
	}
)

// stats is "sion stats": it reads a switch's management view (sion serve
// -http) and prints its links, routes with their reference counts,
// gateways, sessions and totals; -o json prints the endpoints' answers as
// one JSON object. Status 1 when the view cannot be read.
func stats(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sion stats", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", DefaultHTTPAddr, "the switch's management view: the address of its sion serve -http, or a URL")
	format := fs.String("o", "text", "the output: text or json")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || (*format != "text" && *format != "json") {
		fmt.Fprintln(stderr, "sion stats: want [-server ADDR|URL] [-o text|json] and no arguments")
		return 2
	}
	base := strings.TrimSuffix(*server, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw := map[string]json.RawMessage{}
	for _, e := range []string{"switch", "links", "routes", "gateways", "sessions"} {
		b, err := fetch(ctx, base+"/api/"+e)
		if err != nil {
			errorf(stderr, "sion stats: %v\n", err)
			return 1
		}
		raw[e] = b
	}
	if *format == "json" {
		b, err := json.MarshalIndent(raw, "", "  ")
		if err != nil {
			errorf(stderr, "sion stats: %s: the view's answers are not JSON: %v\n", base, err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", jsonForTerminal(b))
		return 0
	}
	var (
		sw     switchView
		links  struct{ Links []linkView }
		routes struct {
			Total  int
			Routes []routeView
		}
		gateways struct{ Gateways []gatewayView }
		sessions struct {
			Total    int
			Sessions []sessionView
		}
	)
	for e, v := range map[string]any{"switch": &sw, "links": &links, "routes": &routes, "gateways": &gateways, "sessions": &sessions} {
		if err := json.Unmarshal(raw[e], v); err != nil {
			errorf(stderr, "sion stats: %s/api/%s: %v\n", base, e, err)
			return 1
		}
	}
	report(stdout, &sw, links.Links, routes.Routes, routes.Total, gateways.Gateways, sessions.Sessions, sessions.Total)
	return 0
}

// maxViewBytes bounds one answer of a management view that stats reads.
const maxViewBytes = 64 << 20

// fetch GETs url and returns its body, or an error naming url.
func fetch(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxViewBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	if len(b) > maxViewBytes {
		return nil, fmt.Errorf("%s: the answer is longer than %d bytes", url, maxViewBytes)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// report writes the text form of stats.
func report(w io.Writer, sw *switchView, links []linkView, routes []routeView, nRoutes int, gateways []gatewayView, sessions []sessionView, nSessions int) {
	st := sw.Stats
	q := quoteIfNeeded // every string comes from the view: a peer
	fmt.Fprintf(w, "switch %s of place %s", q(sw.Name), q(sw.Place))
	if sw.Addr != "" {
		fmt.Fprintf(w, " on %s", q(sw.Addr))
	}
	fmt.Fprintf(w, ": %s, view up %s\n", q(sw.State), q(sw.Uptime))
	fmt.Fprintf(w, "  sessions %d (away %d)  subscriptions %d  filters %d\n", st.Sessions, st.Away, st.Subscriptions, st.Filters)
	fmt.Fprintf(w, "  events in %d  fires %d  deliveries %d  dropped %d  refused %d  duplicates %d\n",
		st.EventsIn, st.Fires, st.Deliveries, st.Dropped, st.Refused, st.Duplicates)
	fmt.Fprintf(w, "  over links: %s\n", counters(st.Links))

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "links (%d)\n", len(links))
	for _, l := range links {
		role := "child"
		if l.Parent {
			role = "parent"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\troutes %d\tproxies %d\t%s\n", q(l.Peer), role, q(l.State), l.Routes, l.Proxies, counters(l.linkCounters))
	}
	tw.Flush()
	fmt.Fprintf(w, "routes (%d of %d)\n", len(routes), nRoutes)
	for _, r := range routes {
		to := q(r.Peer)
		if r.Gateway != "" {
			to = "gateway " + q(r.Gateway) + " to " + q(r.Peer)
		}
		note := ""
		if r.Acknowledged {
			note = "acknowledged"
		}
		if r.CoveredBy != "" {
			note = "covered by " + q(r.CoveredBy)
		}
		fmt.Fprintf(tw, "  %s\t%s\trefs %d\tttl %d\t%s\n", to, q(r.Filter), r.Refs, r.TTL, note)
	}
	tw.Flush()
	fmt.Fprintf(w, "gateways (%d)\n", len(gateways))
	for _, g := range gateways {
		dir := "to"
		if !g.Requested {
			dir = "from"
		}
		fmt.Fprintf(tw, "  %s\t%s place %s (switch %s)\t%s\troutes %d\tproxies %d\timport %v\texport %v\n",
			q(g.Name), dir, q(g.PeerPlace), q(g.Peer), q(g.State), g.Routes, g.Proxies, q(fmt.Sprint(g.Import)), q(fmt.Sprint(g.Export)))
	}
	tw.Flush()
	fmt.Fprintf(w, "sessions (%d of %d)\n", len(sessions), nSessions)
	for _, s := range sessions {
		flags := ""
		if s.Away {
			flags += " AWAY"
		}
		if s.Slow {
			flags += " SLOW CONSUMER"
		}
		peer := q(s.Peer)
		if peer == "" {
			peer = "-"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\tsubscriptions %d\tmatched %d\tdelivered %d\tdropped %d\tspool dropped %d%s\n",
			s.ID, q(s.Name), q(s.Kind), peer, s.NumSubscriptions, s.Matched, s.Delivered, s.Dropped, s.SpoolDropped, flags)
	}
	tw.Flush()
}

// counters writes a link's counters on one line.
func counters(c linkCounters) string {
	return fmt.Sprintf("events sent %d received %d  control sent %d received %d  dropped %d  expired %d  duplicates %d  refused %d",
		c.EventsSent, c.EventsReceived, c.ControlSent, c.ControlReceived, c.Dropped, c.Expired, c.Duplicates, c.Refused)
}

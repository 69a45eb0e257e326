package manage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/manage"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/tcp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// place is switches of one place serving over loopback TCP, each with
// its management view on its own HTTP server.
type place struct {
	sws   []*sion.Switch
	addrs []string
	views []*httptest.Server
}

func ontologyFor(t *testing.T) *ontology.Ontology {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "Event"},
		{Name: "Alarm", Parents: []string{"Event"}, Attributes: []ontology.Attribute{{Name: "level", Kind: ontology.KindInt}}},
		{Name: "Reading", Parents: []string{"Event"}, Attributes: []ontology.Attribute{{Name: "celsius", Kind: ontology.KindFloat}}},
		{Name: "Note", Parents: []string{"Event"}, Attributes: []ontology.Attribute{{Name: "text", Kind: ontology.KindString}}},
	})
	require.NoError(t, err)
	return o
}

// newPlace starts switches named names, switch i linked to parent[i] (-1:
// none), each with a management view whose Peers name every other's.
// Everything closes at cleanup.
func newPlace(t *testing.T, names []string, parent []int) *place {
	t.Helper()
	return newPlaceUnlisted(t, names, parent)
}

// newPlaceUnlisted is newPlace, but no view's Peers names the switches
// named in unlisted.
func newPlaceUnlisted(t *testing.T, names []string, parent []int, unlisted ...string) *place {
	t.Helper()
	p, err := sion.NewEventPlace(sion.PlaceConfig{Name: "plant", Ontology: ontologyFor(t)})
	require.NoError(t, err)
	tr, err := tcp.New(tcp.Config{})
	require.NoError(t, err)
	pl := &place{}
	for _, name := range names {
		sw, err := sion.NewSwitch(sion.SwitchConfig{Name: name, Place: p})
		require.NoError(t, err)
		l, err := tr.Listen("127.0.0.1:0")
		require.NoError(t, err)
		served := make(chan error, 1)
		go func() { served <- sw.Serve(context.Background(), l) }()
		t.Cleanup(func() {
			require.NoError(t, sw.Close())
			require.NoError(t, <-served)
		})
		pl.sws = append(pl.sws, sw)
		pl.addrs = append(pl.addrs, l.Addr().String())
		srv := httptest.NewUnstartedServer(nil)
		pl.views = append(pl.views, srv)
	}
	for i, sw := range pl.sws {
		peers := map[string]string{}
		for j, srv := range pl.views {
			if j != i && !slices.Contains(unlisted, names[j]) {
				peers[names[j]] = "http://" + srv.Listener.Addr().String()
			}
		}
		pl.views[i].Config.Handler = manage.New(sw, manage.Config{Addr: pl.addrs[i], Peers: peers})
		pl.views[i].Start()
		t.Cleanup(pl.views[i].Close)
	}
	for i, pi := range parent {
		if pi < 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := pl.sws[i].Link(ctx, tr, pl.addrs[pi], sion.LinkConfig{RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond, ProbeHops: -1})
		cancel()
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			for _, l := range pl.sws[pi].Links() {
				if l.Peer == names[i] && l.State == sion.LinkUp {
					return true
				}
			}
			return false
		}, 10*time.Second, 5*time.Millisecond)
	}
	return pl
}

// get fetches path from srv and decodes its JSON body.
func get(t *testing.T, srv *httptest.Server, method, path string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var m map[string]any
	if len(b) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	}
	return resp.StatusCode, resp.Header, m
}

func list(t *testing.T, m map[string]any, key string) []map[string]any {
	t.Helper()
	raw, ok := m[key].([]any)
	require.True(t, ok, "%s is not a list: %v", key, m)
	out := make([]map[string]any, len(raw))
	for i, e := range raw {
		out[i] = e.(map[string]any)
	}
	return out
}

// TestEndpoints reads each endpoint of the middle switch of a line a-b-c
// with a subscriber on c: its links, the route c's filter makes through
// it with its reference count, its sessions with and without their
// filters, and the switch's totals.
func TestEndpoints(t *testing.T) {
	pl := newPlace(t, []string{"a", "b", "c"}, []int{-1, 0, 1})
	s, err := pl.sws[2].Open(context.Background(), sion.SessionConfig{Name: "watcher"})
	require.NoError(t, err)
	_, err = s.Subscribe(context.Background(), "{type ⊑ Alarm; level >= 3}")
	require.NoError(t, err)
	_, err = s.Subscribe(context.Background(), "{type ⊑ Alarm; level >= 3}")
	require.NoError(t, err)
	require.NoError(t, pl.sws[2].Flush(context.Background()))
	b := pl.views[1]

	status, hdr, sw := get(t, b, "GET", "/api/switch")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "*", hdr.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "b", sw["name"])
	assert.Equal(t, "plant", sw["place"])
	assert.Equal(t, pl.addrs[1], sw["addr"])
	assert.Equal(t, "active", sw["state"])
	assert.Equal(t, map[string]any{"a": pl.views[0].URL, "c": pl.views[2].URL}, sw["peers"])
	stats := sw["stats"].(map[string]any)
	assert.EqualValues(t, 2, stats["sessions"], "the two links' sessions")
	assert.Contains(t, stats["links"], "events_sent")

	_, _, links := get(t, b, "GET", "/api/links")
	ls := list(t, links, "links")
	require.Len(t, ls, 2)
	assert.Equal(t, "a", ls[0]["peer"])
	assert.Equal(t, true, ls[0]["parent"])
	assert.Equal(t, "up", ls[0]["state"])
	assert.NotNil(t, ls[0]["since"])
	assert.Equal(t, "c", ls[1]["peer"])
	assert.Equal(t, false, ls[1]["parent"])

	// c's filter, needed by its two subscriptions... counted once at c
	// (c registers a key once), and b propagates it to a with one ref.
	require.Eventually(t, func() bool {
		_, _, routes := get(t, b, "GET", "/api/routes")
		for _, r := range list(t, routes, "routes") {
			if r["peer"] == "a" && r["filter"] == "{type ⊑ Alarm; level >= 3}" && r["refs"] == 1.0 {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
	_, _, routes := get(t, pl.views[2], "GET", "/api/routes?peer=b")
	rs := list(t, routes, "routes")
	require.Len(t, rs, 1)
	assert.Equal(t, "b", rs[0]["peer"])
	assert.EqualValues(t, 2, rs[0]["refs"], "c's two subscriptions")
	assert.Equal(t, "", rs[0]["gateway"])
	assert.Contains(t, rs[0], "ttl")
	assert.Contains(t, rs[0], "covered_by")

	_, _, sessions := get(t, pl.views[2], "GET", "/api/sessions")
	ss := list(t, sessions, "sessions")
	var watcher map[string]any
	for _, s := range ss {
		if s["name"] == "watcher" {
			watcher = s
		}
	}
	require.NotNil(t, watcher, "%v", ss)
	assert.Equal(t, "local", watcher["kind"])
	assert.EqualValues(t, 2, watcher["num_subscriptions"])
	assert.Equal(t, false, watcher["slow"])
	assert.NotContains(t, watcher, "subscriptions", "without subs=1")
	_, _, sessions = get(t, pl.views[2], "GET", "/api/sessions?subs=1&kind=local")
	ss = list(t, sessions, "sessions")
	require.Len(t, ss, 1)
	subs := list(t, ss[0], "subscriptions")
	require.Len(t, subs, 2)
	assert.Equal(t, []any{"{type ⊑ Alarm; level >= 3}"}, subs[0]["filters"])
	assert.Contains(t, subs[0], "dropped")
	_, _, sessions = get(t, b, "GET", "/api/sessions?kind=link&limit=1&offset=1")
	assert.EqualValues(t, 2, sessions["total"])
	assert.EqualValues(t, 1, sessions["limit"])
	ss = list(t, sessions, "sessions")
	require.Len(t, ss, 1)
	assert.Equal(t, "link", ss[0]["kind"])

	_, _, gws := get(t, b, "GET", "/api/gateways")
	assert.Empty(t, list(t, gws, "gateways"))
}

// TestRequests: the methods and query strings the endpoints refuse, and
// the page's files.
func TestRequests(t *testing.T) {
	pl := newPlace(t, []string{"solo"}, []int{-1})
	v := pl.views[0]
	cases := []struct {
		name, method, path string
		status             int
		want               string // in the body's error, or the page
	}{
		{"post", "POST", "/api/links", http.StatusMethodNotAllowed, "GET or HEAD"},
		{"delete the page", "DELETE", "/", http.StatusMethodNotAllowed, "GET or HEAD"},
		{"a bad limit", "GET", "/api/sessions?limit=many", http.StatusBadRequest, "limit"},
		{"a negative offset", "GET", "/api/routes?offset=-1", http.StatusBadRequest, "offset"},
		{"a bad subs", "GET", "/api/sessions?subs=yes", http.StatusBadRequest, "subs"},
		{"odd bytes", "GET", "/api/sessions?limit=%ff%00&subs=%", http.StatusBadRequest, "query string"},
		{"a huge offset", "GET", "/api/sessions?offset=99999999999", http.StatusOK, ""},
		{"an offset beyond int64", "GET", "/api/routes?offset=99999999999999999999", http.StatusBadRequest, "offset"},
		{"a negative limit", "GET", "/api/routes?limit=-5", http.StatusBadRequest, "limit"},
		{"a limit over MaxLimit", "GET", "/api/routes?limit=10001", http.StatusBadRequest, "from 0 to 10000"},
		{"a limit beyond int64", "GET", "/api/sessions?limit=18446744073709551617", http.StatusBadRequest, "limit"},
		{"a limit over SubsMaxLimit", "GET", "/api/sessions?subs=1&limit=1001", http.StatusBadRequest, "from 0 to 1000"},
		{"a limit given twice", "GET", "/api/sessions?limit=1&limit=2", http.StatusBadRequest, "limit is given 2 times"},
		{"an unknown parameter", "GET", "/api/routes?limt=5", http.StatusBadRequest, `"limt"`},
		{"a parameter on a plain endpoint", "GET", "/api/switch?x=1", http.StatusBadRequest, `"x"`},
		{"a parameter on healthz, ignored (probes may add one)", "GET", "/healthz?verbose=1&verbose=2", http.StatusOK, ""},
		{"an unknown kind", "GET", "/api/sessions?kind=router", http.StatusBadRequest, "kind"},
		{"a semicolon", "GET", "/api/routes?limit=1;offset=2", http.StatusBadRequest, "query string"},
		{"a long value", "GET", "/api/routes?limit=" + strings.Repeat("9", 3000), http.StatusBadRequest, "…"},
		{"a long URL", "GET", "/api/routes?peer=" + strings.Repeat("p", manage.MaxURLBytes), http.StatusRequestURITooLong, "at most 4096"},
		{"a long path", "GET", "/" + strings.Repeat("x", manage.MaxURLBytes), http.StatusRequestURITooLong, "at most 4096"},
		{"options", "OPTIONS", "/api/switch", http.StatusMethodNotAllowed, "GET or HEAD"},
		{"put on healthz", "PUT", "/healthz", http.StatusMethodNotAllowed, "GET or HEAD"},
		{"a path under an endpoint", "GET", "/api/switch/x", http.StatusNotFound, "no such endpoint"},
		{"no such endpoint", "GET", "/api/nonesuch", http.StatusNotFound, "no such endpoint"},
		{"head", "HEAD", "/api/switch", http.StatusOK, ""},
		{"the page", "GET", "/", http.StatusOK, ""},
		{"the script", "GET", "/sion.js", http.StatusOK, ""},
		{"the style", "GET", "/sion.css", http.StatusOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, body := get(t, v, tc.method, tc.path)
			assert.Equal(t, tc.status, status)
			if tc.want != "" {
				assert.Contains(t, fmt.Sprint(body["error"]), tc.want)
				assert.Less(t, len(fmt.Sprint(body["error"])), 300, "the error quotes a short part of the request")
			}
			if status >= 400 && tc.method != "HEAD" && tc.path != "/nonesuch" {
				assert.True(t, strings.HasPrefix(fmt.Sprint(body["error"]), "manage: "), "a JSON error: %v", body)
			}
			assert.Equal(t, "nosniff", hdr.Get("X-Content-Type-Options"))
		})
	}
}

// TestHealthz: ok while the switch is open, 503 once it is closed.
func TestHealthz(t *testing.T) {
	p, err := sion.NewEventPlace(sion.PlaceConfig{Name: "plant", Ontology: ontologyFor(t)})
	require.NoError(t, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "x", Place: p})
	require.NoError(t, err)
	srv := httptest.NewServer(manage.New(sw, manage.Config{}))
	defer srv.Close()
	status, _, body := get(t, srv, "GET", "/healthz")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok", body["status"])
	require.NoError(t, sw.Close())
	status, _, body = get(t, srv, "GET", "/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, "closed", body["status"])
}

// TestSecurityHeaders: every response says nosniff, no-referrer and
// DENY; the page's Content-Security-Policy admits only its own script
// and style, and connections to any http(s) origin (the neighbours'
// views); the API's admits nothing.
func TestSecurityHeaders(t *testing.T) {
	pl := newPlace(t, []string{"solo"}, []int{-1})
	for _, tc := range []struct {
		path string
		csp  []string
	}{
		{"/", []string{"default-src 'self'", "connect-src 'self' http: https:", "frame-ancestors 'none'", "object-src 'none'"}},
		{"/sion.js", []string{"default-src 'self'"}},
		{"/sion.css", []string{"default-src 'self'"}},
		{"/nonesuch", []string{"default-src 'self'"}},
		{"/api/switch", []string{"default-src 'none'"}},
		{"/api/sessions?limit=x", []string{"default-src 'none'"}},
		{"/healthz", []string{"default-src 'none'"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			_, hdr, _ := get(t, pl.views[0], "GET", tc.path)
			assert.Equal(t, "nosniff", hdr.Get("X-Content-Type-Options"))
			assert.Equal(t, "no-referrer", hdr.Get("Referrer-Policy"))
			assert.Equal(t, "DENY", hdr.Get("X-Frame-Options"))
			for _, want := range tc.csp {
				assert.Contains(t, hdr.Get("Content-Security-Policy"), want)
			}
			assert.NotContains(t, hdr.Get("Content-Security-Policy"), "unsafe")
		})
	}
}

// TestPageHasNothingInline: the page runs under a CSP without
// 'unsafe-inline', so it has no inline script, style or event handler,
// and its script builds the page from text only (never as HTML).
func TestPageHasNothingInline(t *testing.T) {
	html, err := os.ReadFile("ui/index.html")
	require.NoError(t, err)
	js, err := os.ReadFile("ui/sion.js")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		src  []byte
		bad  *regexp.Regexp
	}{
		{"inline script", html, regexp.MustCompile(`(?i)<script[^>]*>\s*[^<\s]|<script>`)},
		{"style element", html, regexp.MustCompile(`(?i)<style`)},
		{"style attribute", html, regexp.MustCompile(`(?i)\sstyle\s*=`)},
		{"event handler attribute", html, regexp.MustCompile(`(?i)\son[a-z]+\s*=`)},
		{"javascript: URL", html, regexp.MustCompile(`(?i)javascript:`)},
		{"HTML from strings", js, regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\s*"on|\.style\b`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Empty(t, tc.bad.FindAllString(string(tc.src), -1))
		})
	}
}

// TestSubsBounded: with ?subs=1 a response lists at most
// SubsDefaultLimit sessions by default, SubsMaxLimit on request, and at
// most MaxFilters filters per session, marking the session truncated.
func TestSubsBounded(t *testing.T) {
	pl := newPlace(t, []string{"solo"}, []int{-1})
	sw := pl.sws[0]
	ctx := context.Background()
	many, err := sw.Open(ctx, sion.SessionConfig{Name: "many"})
	require.NoError(t, err)
	for range 3 {
		var fs []*filter.Filter
		for i := range 60 {
			fs = append(fs, filter.MustCompile(fmt.Sprintf("{type ⊑ Alarm; level >= %d}", i)))
		}
		_, err := many.SubscribeFilters(ctx, fs)
		require.NoError(t, err)
	}
	for i := range 150 {
		s, err := sw.Open(ctx, sion.SessionConfig{Name: fmt.Sprintf("e%d", i)})
		require.NoError(t, err)
		_, err = s.Subscribe(ctx, "{type ⊑ Reading}")
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		name     string
		query    string
		sessions int
	}{
		{"subs default", "?subs=1", 100},
		{"subs asked for more", "?subs=1&limit=1000", 151},
		{"without subs", "", 151},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := get(t, pl.views[0], "GET", "/api/sessions"+tc.query)
			require.Equal(t, http.StatusOK, status, "%v", body)
			assert.EqualValues(t, 151, body["total"])
			ss := list(t, body, "sessions")
			assert.Len(t, ss, tc.sessions)
			for _, s := range ss {
				if tc.query == "" {
					assert.NotContains(t, s, "subscriptions")
					assert.NotContains(t, s, "truncated")
					continue
				}
				if s["name"] != "many" {
					assert.Equal(t, false, s["truncated"])
					continue
				}
				assert.Equal(t, true, s["truncated"])
				assert.EqualValues(t, 3, s["num_subscriptions"])
				subs := list(t, s, "subscriptions")
				require.Len(t, subs, 2, "60 filters and 40 of 60: MaxFilters 100")
				assert.Len(t, subs[0]["filters"], 60)
				assert.Len(t, subs[1]["filters"], 40)
				assert.EqualValues(t, 60, subs[1]["num_filters"])
			}
		})
	}
}

package manage

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sion-go/sion"
)

// Config configures a Handler. The zero Config serves the switch's own
// view, with no address and no neighbours' views, and the defaults below.
type Config struct {
	// Addr is the address the switch serves sessions and shared links on
	// (Switch.Serve's listener), shown in /api/switch; "" when unknown.
	Addr string
	// Peers maps a switch's name to the base URL of its management
	// endpoints ("http://10.0.0.2:8747"), for the neighbours that serve
	// one: /api/switch lists them and the page follows them to draw the
	// whole place. Handler does not change it after New.
	Peers map[string]string
	// DefaultLimit is how many routes or sessions one response lists when
	// the request sets no limit; 0 means 1024. MaxLimit is the largest
	// limit a request may ask (a larger one is refused with 400); 0
	// means 10000.
	DefaultLimit, MaxLimit int
	// SubsDefaultLimit and SubsMaxLimit replace DefaultLimit and MaxLimit
	// for /api/sessions?subs=1, which lists every session's filters: 0
	// means 100 and 1000 sessions, and neither exceeds MaxLimit.
	SubsDefaultLimit, SubsMaxLimit int
	// MaxFilters is how many filter texts /api/sessions?subs=1 lists per
	// session, counted over its subscriptions in ID order; the session
	// then has "truncated": true and the rest are left out (its
	// num_subscriptions, and each subscription's num_filters, still count
	// them all). /api/gateways lists as many of each gateway's filters,
	// with "truncated" and "num_filters" alike. 0 means 100.
	MaxFilters int
	// MaxConcurrent is how many /api requests (all but /healthz) take
	// their snapshot of the switch and encode it at once; a snapshot of
	// routes or sessions costs time in proportion to the switch's routes
	// or subscriptions. 0 means 4. A slot is released before the
	// response is written, so a slow reader does not hold one.
	MaxConcurrent int
	// MaxWait is how long a request beyond MaxConcurrent waits for a slot
	// (less if its context ends first) before it is answered 503 with
	// Retry-After: 1 and {"error": "manage: busy: …"}. 0 means 1 s; a
	// negative MaxWait means such a request does not wait.
	MaxWait time.Duration
}

// MaxURLBytes is the longest request URL (path and query, escaped) a
// Handler serves; a longer one is answered 414 with a JSON error.
const MaxURLBytes = 4096

// Handler serves a switch's management view (S1 SION-MT): the JSON
// endpoints under /api/, /healthz, and the page at /. Mount it at the
// root of its own listener, or under a prefix with http.StripPrefix. A
// Handler is safe for concurrent use; each request takes a fresh snapshot
// of the switch, at most Config.MaxConcurrent at once.
type Handler struct {
	sw    *sion.Switch
	cfg   Config
	mux   *http.ServeMux
	start time.Time
	slots chan struct{} // one element per snapshot being taken

	// Test hooks, set before the Handler serves: snapshotHook runs in a
	// slot before each snapshot; waitHook when a request starts waiting
	// for one.
	snapshotHook, waitHook func()
}

//go:embed ui
var ui embed.FS

// The Content-Security-Policy of the page: its script, style and images
// come from this handler only, and no inline script or style runs. The
// page reads the neighbours' views cross-origin, following management
// URLs that the switches list in "peers" from one to the next (this
// handler knows only its own), so connect-src allows any http or https
// origin; data:, blob: and other schemes stay refused.
const (
	pageCSP = "default-src 'self'; connect-src 'self' http: https:; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	apiCSP  = "default-src 'none'; frame-ancestors 'none'"
)

// New returns the management view of sw. It never fails: sw must be
// non-nil; Config's zero fields take their defaults.
func New(sw *sion.Switch, cfg Config) *Handler {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.DefaultLimit, 1024)
	def(&cfg.MaxLimit, 10000)
	def(&cfg.SubsDefaultLimit, 100)
	def(&cfg.SubsMaxLimit, 1000)
	def(&cfg.MaxFilters, 100)
	cfg.SubsMaxLimit = min(cfg.SubsMaxLimit, cfg.MaxLimit)
	cfg.SubsDefaultLimit = min(cfg.SubsDefaultLimit, cfg.SubsMaxLimit)
	def(&cfg.MaxConcurrent, 4)
	if cfg.MaxWait == 0 {
		cfg.MaxWait = time.Second
	}
	cfg.Peers = maps.Clone(cfg.Peers)
	h := &Handler{sw: sw, cfg: cfg, mux: http.NewServeMux(), start: time.Now(),
		slots: make(chan struct{}, cfg.MaxConcurrent)}
	h.mux.HandleFunc("/api/switch", h.api(h.switchView))
	h.mux.HandleFunc("/api/links", h.api(h.links))
	h.mux.HandleFunc("/api/routes", h.api(h.routes, "offset", "limit", "peer"))
	h.mux.HandleFunc("/api/gateways", h.api(h.gateways))
	h.mux.HandleFunc("/api/sessions", h.api(h.sessions, "offset", "limit", "subs", "kind"))
	h.mux.HandleFunc("/api/", getOnly(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, r, http.StatusNotFound, errorBody("no such endpoint"))
	}))
	h.mux.HandleFunc("/healthz", getOnly(func(w http.ResponseWriter, r *http.Request) {
		// Its query is ignored: probes and load balancers may add one.
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if h.sw.State() == sion.NonExistent {
			writeJSON(w, r, http.StatusServiceUnavailable, map[string]any{"status": "closed"})
			return
		}
		writeJSON(w, r, http.StatusOK, map[string]any{"status": "ok"})
	}))
	files, _ := fs.Sub(ui, "ui") // cannot fail: ui is embedded
	h.mux.Handle("/", getOnly(http.FileServerFS(files).ServeHTTP))
	return h
}

// ServeHTTP serves one request; see the package doc for the endpoints.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/healthz" {
		hd.Set("Content-Security-Policy", apiCSP)
	} else {
		hd.Set("Content-Security-Policy", pageCSP)
	}
	if n := len(r.URL.EscapedPath()) + len(r.URL.RawQuery); n > MaxURLBytes {
		writeJSON(w, r, http.StatusRequestURITooLong, errorBody("the URL has "+strconv.Itoa(n)+" bytes, at most "+strconv.Itoa(MaxURLBytes)))
		return
	}
	h.mux.ServeHTTP(w, r)
}

// getOnly answers 405 to methods other than GET and HEAD.
func getOnly(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSON(w, r, http.StatusMethodNotAllowed, errorBody("method "+strconv.Quote(clip(r.Method))+" not allowed: GET or HEAD"))
			return
		}
		next(w, r)
	}
}

// snapshot is what an endpoint does once its query is checked and it
// holds a slot: take the switch's state and return the response body.
type snapshot func() any

// api wraps a JSON endpoint: GET and HEAD only, CORS for reading from a
// neighbour's page, the query parameters named in params (each at most
// once; any other is refused), then a slot of Config.MaxConcurrent for
// the snapshot and its encoding, the body as JSON.
func (h *Handler) api(fn func(url.Values) (snapshot, error), params ...string) http.HandlerFunc {
	return getOnly(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		q, err := query(r, params...)
		var take snapshot
		if err == nil {
			take, err = fn(q)
		}
		if err != nil {
			writeJSON(w, r, http.StatusBadRequest, errorBody(err.Error()))
			return
		}
		if !h.acquire(r.Context()) {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, r, http.StatusServiceUnavailable, errorBody("busy: "+strconv.Itoa(h.cfg.MaxConcurrent)+" snapshots are being taken; retry"))
			return
		}
		b, status := h.take(take)
		writeBytes(w, r, status, b)
	})
}

// take runs a snapshot in the slot acquire got, encodes its body and
// frees the slot.
func (h *Handler) take(take snapshot) ([]byte, int) {
	defer func() { <-h.slots }()
	if h.snapshotHook != nil {
		h.snapshotHook()
	}
	return encode(take())
}

// acquire takes a slot for a snapshot, waiting at most Config.MaxWait
// or until ctx is done; it reports whether it got one.
func (h *Handler) acquire(ctx context.Context) bool {
	select {
	case h.slots <- struct{}{}:
		return true
	default:
	}
	if h.cfg.MaxWait < 0 {
		return false
	}
	if h.waitHook != nil {
		h.waitHook()
	}
	t := time.NewTimer(h.cfg.MaxWait)
	defer t.Stop()
	select {
	case h.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

func encode(body any) ([]byte, int) {
	b, err := json.MarshalIndent(body, "", "  ")
	if err != nil {
		return []byte(`{"error": "manage: cannot encode the response"}`), http.StatusInternalServerError
	}
	return append(b, '\n'), http.StatusOK
}

func writeJSON(w http.ResponseWriter, r *http.Request, status int, body any) {
	b, encStatus := encode(body)
	if encStatus != http.StatusOK {
		status = encStatus
	}
	writeBytes(w, r, status, b)
}

func writeBytes(w http.ResponseWriter, r *http.Request, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}

func errorBody(msg string) map[string]any { return map[string]any{"error": "manage: " + msg} }

// head is what every /api response starts with: whose view it is, and
// when it was taken (for rates from successive counters).
func (h *Handler) head() map[string]any {
	return map[string]any{"switch": h.sw.Name(), "now": time.Now().UTC().Format(time.RFC3339Nano)}
}

func (h *Handler) switchView(url.Values) (snapshot, error) {
	return func() any {
		m := h.head()
		m["name"] = h.sw.Name()
		m["place"] = h.sw.Place().Name()
		m["addr"] = h.cfg.Addr
		m["state"] = h.sw.State().String()
		m["uptime"] = time.Since(h.start).Round(time.Second).String()
		peers := h.cfg.Peers
		if peers == nil {
			peers = map[string]string{}
		}
		m["peers"] = peers
		m["stats"] = plain(h.sw.Stats())
		return m
	}, nil
}

func (h *Handler) links(url.Values) (snapshot, error) {
	return func() any {
		m := h.head()
		m["links"] = plain(nonNil(h.sw.Links()))
		return m
	}, nil
}

func (h *Handler) gateways(url.Values) (snapshot, error) {
	return func() any {
		var out []any
		for _, gi := range h.sw.Gateways() {
			n := len(gi.Filters)
			gi.Filters = gi.Filters[:min(n, h.cfg.MaxFilters)]
			g := plain(gi).(map[string]any)
			g["num_filters"], g["truncated"] = n, len(gi.Filters) < n
			out = append(out, g)
		}
		m := h.head()
		m["gateways"] = nonNil(out)
		return m
	}, nil
}

func (h *Handler) routes(q url.Values) (snapshot, error) {
	offset, limit, err := page(q, h.cfg.DefaultLimit, h.cfg.MaxLimit)
	if err != nil {
		return nil, err
	}
	peer := q.Get("peer")
	return func() any {
		all := h.sw.Routes()
		if peer != "" {
			all = slices.DeleteFunc(all, func(ri sion.RouteInfo) bool { return ri.Peer != peer })
		}
		m := h.head()
		m["total"], m["offset"], m["limit"] = len(all), offset, limit
		m["routes"] = plain(window(all, offset, limit))
		return m
	}, nil
}

// sessionKinds are the values ?kind= accepts.
var sessionKinds = []sion.SessionKind{sion.SessionLocal, sion.SessionRemote, sion.SessionLink, sion.SessionOverlay, sion.SessionGateway}

func (h *Handler) sessions(q url.Values) (snapshot, error) {
	subs, err := flag(q, "subs")
	if err != nil {
		return nil, err
	}
	def, most := h.cfg.DefaultLimit, h.cfg.MaxLimit
	if subs {
		def, most = h.cfg.SubsDefaultLimit, h.cfg.SubsMaxLimit
	}
	offset, limit, err := page(q, def, most)
	if err != nil {
		return nil, err
	}
	kind := q.Get("kind")
	if kind != "" && !slices.Contains(sessionKinds, sion.SessionKind(kind)) {
		return nil, &queryError{"kind", kind, "local, remote, link, overlay or gateway"}
	}
	return func() any {
		all := h.sw.Sessions()
		if kind != "" {
			all = slices.DeleteFunc(all, func(si sion.SessionInfo) bool { return string(si.Kind) != kind })
		}
		var out []any
		for _, si := range window(all, offset, limit) {
			var matched, delivered, dropped uint64
			slow := false
			for _, sub := range si.Subscriptions {
				matched += sub.Matched
				delivered += sub.Delivered
				dropped += sub.Dropped
				slow = slow || sub.Slow
			}
			all := si.Subscriptions
			si.Subscriptions = nil
			m := plain(si).(map[string]any)
			delete(m, "subscriptions")
			m["num_subscriptions"], m["matched"], m["delivered"], m["dropped"], m["slow"] = len(all), matched, delivered, dropped, slow
			if subs {
				m["subscriptions"], m["truncated"] = h.listSubs(all)
			}
			out = append(out, m)
		}
		m := h.head()
		m["total"], m["offset"], m["limit"] = len(all), offset, limit
		m["sessions"] = nonNil(out)
		return m
	}, nil
}

// listSubs lists a session's subscriptions with their filters, at most
// Config.MaxFilters filter texts in all, and reports whether it left
// any out.
func (h *Handler) listSubs(subs []sion.SubscriptionInfo) ([]any, bool) {
	out := []any{}
	budget := h.cfg.MaxFilters
	for _, sub := range subs {
		if budget == 0 {
			return out, true
		}
		n := len(sub.Filters)
		listed := sub.Filters[:min(n, budget)]
		budget -= len(listed)
		sub.Filters = listed
		m := plain(sub).(map[string]any)
		m["num_filters"] = n
		out = append(out, m)
		if len(listed) < n {
			return out, true
		}
	}
	return out, false
}

// query parses r's query string: each parameter must be one of params
// and given at most once.
func query(r *http.Request, params ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errors.New("the query string: " + clip(err.Error()))
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(params, name):
			want := "none"
			if len(params) > 0 {
				want = strings.Join(params, ", ")
			}
			return nil, errors.New("unknown query parameter " + strconv.Quote(clip(name)) + ": this endpoint takes " + want)
		case len(q[name]) > 1:
			return nil, errors.New("query parameter " + name + " is given " + strconv.Itoa(len(q[name])) + " times, at most once")
		}
	}
	return q, nil
}

// page reads the offset and limit query parameters: offset ≥ 0 (default
// 0); limit from 0 to most, 0 or absent meaning def.
func page(q url.Values, def, most int) (offset, limit int, err error) {
	num := func(name string, max int) (int, error) {
		s := q.Get(name)
		if s == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > max {
			return 0, &queryError{name, s, "a whole number from 0 to " + strconv.Itoa(max)}
		}
		return n, nil
	}
	if offset, err = num("offset", int(^uint(0)>>1)); err != nil {
		return 0, 0, err
	}
	if limit, err = num("limit", most); err != nil {
		return 0, 0, err
	}
	if limit == 0 {
		limit = def
	}
	return offset, min(limit, most), nil
}

// flag reads a boolean query parameter: absent, 0 or false is false; 1 or
// true is true.
func flag(q url.Values, name string) (bool, error) {
	switch s := q.Get(name); s {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, &queryError{name, s, "1, true, 0 or false"}
	}
}

type queryError struct{ name, value, want string }

func (e *queryError) Error() string {
	return "query parameter " + e.name + "=" + strconv.Quote(clip(e.value)) + ": want " + e.want
}

// clip shortens what a request sent to at most 64 bytes for an error
// message.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return strings.ToValidUTF8(s[:64], "") + "…"
}

// window returns s[offset:offset+limit], clipped to s.
func window[T any](s []T, offset, limit int) []T {
	if offset >= len(s) {
		return []T{}
	}
	return s[offset:min(len(s), offset+limit)]
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

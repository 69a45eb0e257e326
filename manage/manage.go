package manage

import (
	"embed"
	"encoding/json"
	"io/fs"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sion-go/sion"
)

// Config configures a Handler. The zero Config serves the switch's own
// view, with no address and no neighbours' views.
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
	// the request sets no limit; 0 means 1024. MaxLimit caps what a
	// request may ask; 0 means 10000.
	DefaultLimit, MaxLimit int
}

// Handler serves a switch's management view (S1 SION-MT): the JSON
// endpoints under /api/, /healthz, and the page at /. Mount it at the
// root of its own listener, or under a prefix with http.StripPrefix. A
// Handler is safe for concurrent use; each request takes a fresh snapshot
// of the switch.
type Handler struct {
	sw    *sion.Switch
	cfg   Config
	mux   *http.ServeMux
	start time.Time
}

//go:embed ui
var ui embed.FS

// New returns the management view of sw. It never fails: sw must be
// non-nil; Config's zero fields take their defaults.
func New(sw *sion.Switch, cfg Config) *Handler {
	if cfg.DefaultLimit <= 0 {
		cfg.DefaultLimit = 1024
	}
	if cfg.MaxLimit <= 0 {
		cfg.MaxLimit = 10000
	}
	cfg.Peers = maps.Clone(cfg.Peers)
	h := &Handler{sw: sw, cfg: cfg, mux: http.NewServeMux(), start: time.Now()}
	h.mux.HandleFunc("/api/switch", h.api(h.switchView))
	h.mux.HandleFunc("/api/links", h.api(h.links))
	h.mux.HandleFunc("/api/routes", h.api(h.routes))
	h.mux.HandleFunc("/api/gateways", h.api(h.gateways))
	h.mux.HandleFunc("/api/sessions", h.api(h.sessions))
	h.mux.HandleFunc("/api/", h.api(func(*http.Request) (any, int) {
		return errorBody("no such endpoint"), http.StatusNotFound
	}))
	h.mux.HandleFunc("/healthz", h.api(h.healthz))
	files, _ := fs.Sub(ui, "ui") // cannot fail: ui is embedded
	h.mux.Handle("/", getOnly(http.FileServerFS(files)))
	return h
}

// ServeHTTP serves one request; see the package doc for the endpoints.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// getOnly answers 405 to methods other than GET and HEAD.
func getOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSON(w, r, http.StatusMethodNotAllowed, errorBody("method "+r.Method+" not allowed: GET or HEAD"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// api wraps a JSON endpoint: GET and HEAD only, CORS for reading from a
// neighbour's page, the body as JSON with its status.
func (h *Handler) api(fn func(*http.Request) (any, int)) http.HandlerFunc {
	return getOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		body, status := fn(r)
		writeJSON(w, r, status, body)
	})).ServeHTTP
}

func writeJSON(w http.ResponseWriter, r *http.Request, status int, body any) {
	b, err := json.MarshalIndent(body, "", "  ")
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error": "manage: cannot encode the response"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(append(b, '\n'))
	}
}

func errorBody(msg string) map[string]any { return map[string]any{"error": "manage: " + msg} }

// head is what every /api response starts with: whose view it is, and
// when it was taken (for rates from successive counters).
func (h *Handler) head() map[string]any {
	return map[string]any{"switch": h.sw.Name(), "now": time.Now().UTC().Format(time.RFC3339Nano)}
}

func (h *Handler) switchView(*http.Request) (any, int) {
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
	return m, http.StatusOK
}

func (h *Handler) links(*http.Request) (any, int) {
	m := h.head()
	m["links"] = plain(nonNil(h.sw.Links()))
	return m, http.StatusOK
}

func (h *Handler) gateways(*http.Request) (any, int) {
	m := h.head()
	m["gateways"] = plain(nonNil(h.sw.Gateways()))
	return m, http.StatusOK
}

func (h *Handler) routes(r *http.Request) (any, int) {
	offset, limit, err := h.page(r)
	if err != nil {
		return errorBody(err.Error()), http.StatusBadRequest
	}
	all := h.sw.Routes()
	if peer := r.URL.Query().Get("peer"); peer != "" {
		all = slices.DeleteFunc(all, func(ri sion.RouteInfo) bool { return ri.Peer != peer })
	}
	m := h.head()
	m["total"], m["offset"], m["limit"] = len(all), offset, limit
	m["routes"] = plain(window(all, offset, limit))
	return m, http.StatusOK
}

func (h *Handler) sessions(r *http.Request) (any, int) {
	offset, limit, err := h.page(r)
	if err != nil {
		return errorBody(err.Error()), http.StatusBadRequest
	}
	subs, err := flag(r, "subs")
	if err != nil {
		return errorBody(err.Error()), http.StatusBadRequest
	}
	all := h.sw.Sessions()
	if kind := r.URL.Query().Get("kind"); kind != "" {
		all = slices.DeleteFunc(all, func(si sion.SessionInfo) bool { return string(si.Kind) != kind })
	}
	var out []any
	for _, si := range window(all, offset, limit) {
		m := plain(si).(map[string]any)
		var matched, delivered, dropped uint64
		slow := false
		for _, sub := range si.Subscriptions {
			matched += sub.Matched
			delivered += sub.Delivered
			dropped += sub.Dropped
			slow = slow || sub.Slow
		}
		m["num_subscriptions"], m["matched"], m["delivered"], m["dropped"], m["slow"] = len(si.Subscriptions), matched, delivered, dropped, slow
		if !subs {
			delete(m, "subscriptions")
		}
		out = append(out, m)
	}
	m := h.head()
	m["total"], m["offset"], m["limit"] = len(all), offset, limit
	m["sessions"] = nonNil(out)
	return m, http.StatusOK
}

func (h *Handler) healthz(*http.Request) (any, int) {
	if h.sw.State() == sion.NonExistent {
		return map[string]any{"status": "closed"}, http.StatusServiceUnavailable
	}
	return map[string]any{"status": "ok"}, http.StatusOK
}

// page reads the offset and limit query parameters: offset ≥ 0 (default
// 0); limit ≥ 0, 0 or absent meaning Config.DefaultLimit, capped at
// Config.MaxLimit.
func (h *Handler) page(r *http.Request) (offset, limit int, err error) {
	q := r.URL.Query()
	num := func(name string) (int, error) {
		s := q.Get(name)
		if s == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, &queryError{name, s, "a whole number, 0 or more"}
		}
		return n, nil
	}
	if offset, err = num("offset"); err != nil {
		return 0, 0, err
	}
	if limit, err = num("limit"); err != nil {
		return 0, 0, err
	}
	if limit == 0 {
		limit = h.cfg.DefaultLimit
	}
	return offset, min(limit, h.cfg.MaxLimit), nil
}

// flag reads a boolean query parameter: absent, 0 or false is false; 1 or
// true is true.
func flag(r *http.Request, name string) (bool, error) {
	switch s := r.URL.Query().Get(name); s {
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
	return "query parameter " + e.name + "=" + strconv.Quote(e.value) + ": want " + e.want
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

package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeHTTPAndStats runs two switch processes with their management
// views (serve -http, -http-peer), a subscriber on b, and sion stats
// against b's view and a's: b's link to its parent a, the route b
// propagated to a with its reference count, the subscriber's session;
// a's view of the link's session holding b's proxy filter; -o json; the
// page and /healthz; status 1 for a view that cannot be read, 2 for a
// wrong command line.
func TestServeHTTPAndStats(t *testing.T) {
	bin := sionBinary(t)
	hazards := filepath.Join("..", "..", "examples", "internal", "usgs", "hazards.json")
	a := start(t, bin, nil, "serve", "-ontology", hazards, "-listen", "127.0.0.1:0", "-name", "a", "-place", "usgs", "-http", "127.0.0.1:0")
	addrA := lastWord(line(t, a.stdout))
	viewA := lastWord(line(t, a.stdout))
	require.True(t, strings.HasPrefix(viewA, "http://127.0.0.1:"), viewA)
	b := start(t, bin, nil, "serve", "-ontology", hazards, "-listen", "127.0.0.1:0", "-name", "b", "-place", "usgs",
		"-link", addrA, "-http", "127.0.0.1:0", "-http-peer", "a="+viewA)
	addrB := lastWord(line(t, b.stdout))
	management := line(t, b.stdout)
	require.True(t, strings.HasPrefix(management, "management view of switch b on http://127.0.0.1:"), management)
	viewB := lastWord(management)

	const f = "{type ⊑ seismic; mag >= 4.5}"
	s := start(t, bin, nil, "sub", "-server", addrB, "-n", "1", f)
	assert.Equal(t, "subscribed to "+f+" on "+addrB, line(t, s.stderr))

	run := func(args ...string) (int, string, string) {
		var stdout, stderr strings.Builder
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			return ee.ExitCode(), stdout.String(), stderr.String()
		}
		require.NoError(t, err)
		return 0, stdout.String(), stderr.String()
	}
	status, out, errs := run("stats", "-server", strings.TrimPrefix(viewB, "http://"))
	require.Equal(t, 0, status, errs)
	t.Logf("sion stats of b:\n%s", out)
	assert.Contains(t, out, "switch b of place usgs on "+addrB+": active")
	assert.Regexp(t, `(?m)^links \(1\)\n  a +parent +up +routes 1 +proxies 0 +events sent 0 received 0  control sent \d+`, out)
	assert.Regexp(t, `(?m)^routes \(1 of 1\)\n  a +`+regexp.QuoteMeta(f)+` +refs 1 +ttl \d+`, out)
	assert.Regexp(t, `(?m)^  \d+ +sion-sub +remote +127\.0\.0\.1:\d+ +subscriptions 1 +matched 0 +delivered 0 +dropped 0`, out)
	assert.Contains(t, out, "  sessions 2 (away 0)  subscriptions 1")

	status, out, errs = run("stats", "-server", viewA+"/")
	require.Equal(t, 0, status, errs)
	assert.Regexp(t, `(?m)^  b +child +up +routes 0 +proxies 1 `, out)
	assert.Regexp(t, `(?m)^  \d+ +b +link +b +subscriptions 1 `, out, "b's proxy filter, in the session of a's link to b")

	status, out, errs = run("stats", "-server", viewB, "-o", "json")
	require.Equal(t, 0, status, errs)
	var all map[string]map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &all), out)
	assert.Equal(t, "b", all["switch"]["name"])
	assert.Equal(t, map[string]any{"a": viewA}, all["switch"]["peers"])
	assert.Len(t, all["routes"]["routes"], 1)

	for path, want := range map[string]string{
		"/": "sion.js", "/healthz": `"ok"`,
		"/metrics":  `sion_link_up{peer="a",place="usgs",switch="b"} 1`,
		"/metrics#": `sion_sessions{kind="remote",place="usgs",switch="b"} 1`,
	} {
		resp, err := http.Get(viewB + strings.TrimSuffix(path, "#"))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, string(body), want, path)
	}

	status, _, errs = run("stats", "-server", "127.0.0.1:1")
	assert.Equal(t, 1, status)
	assert.Contains(t, errs, "sion stats: ")
	status, _, errs = run("stats", "-server", viewB, "-o", "xml")
	assert.Equal(t, 2, status)
	assert.Contains(t, errs, "want [-server ADDR|URL] [-o text|json]")

	require.NoError(t, s.cmd.Process.Kill())
	s.cmd.Wait()
	for _, sw := range []*started{b, a} {
		require.NoError(t, sw.cmd.Process.Signal(syscall.SIGTERM))
		status, _, stderr := exitCode(t, sw)
		assert.Equal(t, 0, status, stderr)
	}
}

func lastWord(s string) string { return s[strings.LastIndex(s, " ")+1:] }

// TestServeHTTPFromConfig: the config file's http and http_peers fields
// start the management view, as -http and -http-peer do.
func TestServeHTTPFromConfig(t *testing.T) {
	bin := sionBinary(t)
	hazards, err := filepath.Abs(filepath.Join("..", "..", "examples", "internal", "usgs", "hazards.json"))
	require.NoError(t, err)
	cfg := filepath.Join(t.TempDir(), "sion.json")
	b, err := json.Marshal(map[string]any{"listen": "127.0.0.1:0", "name": "c", "ontology": hazards,
		"http": "127.0.0.1:0", "http_peers": map[string]string{"d": "http://10.0.0.4:8747"}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg, b, 0o644))
	sw := start(t, bin, nil, "serve", "-config", cfg)
	line(t, sw.stdout)
	view := lastWord(line(t, sw.stdout))
	resp, err := http.Get(view + "/api/switch")
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	resp.Body.Close()
	assert.Equal(t, "c", got["name"])
	assert.Equal(t, map[string]any{"d": "http://10.0.0.4:8747"}, got["peers"])
	require.NoError(t, sw.cmd.Process.Signal(syscall.SIGTERM))
	status, _, stderr := exitCode(t, sw)
	assert.Equal(t, 0, status, stderr)
}

// TestPubLeavesNoSessionAway: 30 pub processes in a row, each exiting as
// soon as its event is published, and the switch keeps none of their
// sessions as away (Stats.Disconnects stays 0). The remote session's
// Close used to reset the connection with frames unread, which could
// discard its goodbye: one pub in about ten left its session for the
// switch to hold for its retention.
func TestPubLeavesNoSessionAway(t *testing.T) {
	bin := sionBinary(t)
	hazards := filepath.Join("..", "..", "examples", "internal", "usgs", "hazards.json")
	a := start(t, bin, nil, "serve", "-ontology", hazards, "-listen", "127.0.0.1:0", "-name", "a", "-place", "usgs", "-http", "127.0.0.1:0")
	addr := lastWord(line(t, a.stdout))
	view := lastWord(line(t, a.stdout))
	for range 30 {
		out, err := exec.Command(bin, "pub", "-server", addr, "-type", "earthquake", "-attr", "mag=1").CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	var sw struct {
		Stats struct {
			Sessions    int    `json:"sessions"`
			Disconnects uint64 `json:"disconnects"`
			Published   uint64 `json:"published"`
		} `json:"stats"`
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get(view + "/api/switch")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&sw))
		return sw.Stats.Sessions == 0
	}, 10*time.Second, 10*time.Millisecond, "every pub's session ended: %+v", sw)
	assert.Zero(t, sw.Stats.Disconnects, "no pub's session was kept for its return")
	assert.Equal(t, uint64(30), sw.Stats.Published)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	status, _, stderr := exitCode(t, a)
	assert.Equal(t, 0, status, stderr)
}

// TestServeLogsAndMetricsMethod: serve logs the switch's records on
// stderr (-log, default info), so a refused session shows; -log off
// and a bad -log are handled; /metrics answers GET and HEAD only, as the
// management view does.
func TestServeLogsAndMetricsMethod(t *testing.T) {
	bin := sionBinary(t)
	hazards := filepath.Join("..", "..", "examples", "internal", "usgs", "hazards.json")
	sw := start(t, bin, nil, "serve", "-ontology", hazards, "-listen", "127.0.0.1:0", "-http", "127.0.0.1:0", "-key-file", "example.key")
	addr := lastWord(line(t, sw.stdout))
	view := lastWord(line(t, sw.stdout))

	status, out := runStatus(t, bin, "pub", "-server", addr, "-type", "earthquake") // without the key
	require.Equal(t, 1, status, out)
	logged := line(t, sw.stderr)
	assert.Contains(t, logged, "level=WARN")
	assert.Contains(t, logged, "refused")

	for _, method := range []string{http.MethodPost, http.MethodDelete} {
		req, err := http.NewRequest(method, view+"/metrics", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, method)
		assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
	}
	resp, err := http.Head(view + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, sw.cmd.Process.Signal(syscall.SIGTERM))
	status, _, stderr := exitCode(t, sw)
	assert.Equal(t, 0, status, stderr)

	status, stderr = runStatus(t, bin, "serve", "-ontology", hazards, "-listen", "127.0.0.1:0", "-log", "loud")
	assert.Equal(t, 2, status)
	assert.Contains(t, stderr, `-log "loud": want debug, info, warn, error or off`)
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// controlBytes returns the control characters (C0 but newline, DEL, C1)
// and invalid UTF-8 in s, as Go would quote them; "" when there are none.
func controlBytes(s string) string {
	var out []string
	for i, r := range s {
		if r == '\n' {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || (r == 0xfffd && !strings.HasPrefix(s[i:], "\ufffd")) {
			out = append(out, fmt.Sprintf("%q at %d", r, i))
		}
	}
	return strings.Join(out, ", ")
}

// TestSubTextEscapesPeerStrings: what a publisher puts in an event — an
// attribute value with an escape sequence and a carriage return, a media
// type with an OSC sequence — reaches the terminal of "sion sub -o text"
// escaped, on one line; a plain media type prints as it is, with the
// payload's size.
func TestSubTextEscapesPeerStrings(t *testing.T) {
	bin := sionBinary(t)
	hazards := filepath.Join("..", "..", "examples", "internal", "usgs", "hazards.json")
	sw := start(t, bin, nil, "serve", "-ontology", hazards, "-listen", "127.0.0.1:0", "-place", "usgs")
	addr := lastWord(line(t, sw.stdout))
	payload := filepath.Join(t.TempDir(), "payload.txt")
	require.NoError(t, os.WriteFile(payload, []byte("hello"), 0o600))

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"a plain media type", []string{"-attr", "place=Near Tokyo", "-payload", payload, "-content-type", "text/plain"},
			`earthquake place="Near Tokyo" [subscription 1 score 0] (5 bytes of text/plain)`},
		{"an escape sequence and a CR in a value", []string{"-attr", "place=\x1b[2J\rNear Tokyo"},
			`earthquake place="\x1b[2J\rNear Tokyo" [subscription 1 score 0]`},
		{"an OSC sequence and BEL in the media type", []string{"-payload", payload, "-content-type", "text/plain\x1b]0;owned\a"},
			`earthquake [subscription 1 score 0] (5 bytes of "text/plain\x1b]0;owned\a")`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, bin, nil, "sub", "-server", addr, "-n", "1", "{type ⊑ seismic}")
			require.Contains(t, line(t, s.stderr), "subscribed to ")
			out, err := exec.Command(bin, append([]string{"pub", "-server", addr, "-type", "earthquake"}, tc.args...)...).CombinedOutput()
			require.NoError(t, err, "%s", out)
			status, stdout, stderr := exitCode(t, s)
			require.Equal(t, 0, status, stderr)
			assert.Equal(t, tc.want+"\n", stdout)
			assert.Empty(t, controlBytes(stdout), "raw control characters on the terminal")
		})
	}
	require.NoError(t, sw.cmd.Process.Signal(syscall.SIGTERM))
	status, _, stderr := exitCode(t, sw)
	assert.Equal(t, 0, status, stderr)
}

// TestStatsEscapesPeerStrings runs "sion stats" against a hostile
// management view: every name it reports reaches the terminal escaped,
// on its own line, and so does an error it answers with, on one line.
func TestStatsEscapesPeerStrings(t *testing.T) {
	const esc = "\x1b[2J\x1b]0;owned\a\r\x00\u009b"
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	answers := map[string]string{
		"/api/switch": fmt.Sprintf(`{"name": %s, "place": %s, "addr": %s, "state": "active", "uptime": "1s"}`,
			q("sw"+esc), q("pl"+esc), q("127.0.0.1:1"+esc)),
		"/api/links":    fmt.Sprintf(`{"links": [{"peer": %s, "state": %s}]}`, q("peer"+esc), q("up"+esc)),
		"/api/routes":   fmt.Sprintf(`{"total": 1, "routes": [{"peer": %s, "filter": %s, "gateway": %s, "covered_by": %s}]}`, q("p"+esc), q("{type ⊑ x"+esc+"}"), q("g"+esc), q("c"+esc)),
		"/api/gateways": fmt.Sprintf(`{"gateways": [{"name": %s, "peer": %s, "peer_place": %s, "state": %s, "import": {%s: %s}}]}`, q("gw"+esc), q("s"+esc), q("pp"+esc), q("st"+esc), q("k"+esc), q("v"+esc)),
		"/api/sessions": fmt.Sprintf(`{"total": 1, "sessions": [{"id": 1, "name": %s, "kind": %s, "peer": %s}]}`, q("sess"+esc), q("remote"+esc), q("1.2.3.4:5"+esc)),
	}
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a, ok := answers[r.URL.Path]; ok {
			w.Write([]byte(a))
			return
		}
		http.Error(w, "no such thing"+esc, http.StatusNotFound)
	}))
	t.Cleanup(hostile.Close)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "gone"+esc+"\nsion stats: a line the view forged", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)

	cases := []struct {
		name           string
		server         string
		status         int
		stdout, stderr string // parts that must appear
	}{
		{"names in the report", hostile.URL, 0, `switch "sw\x1b[2J\x1b]0;owned\a\r\x00\u009b" of place "pl\x1b[2J`, ""},
		{"an error the view answers", failing.URL, 1, "", `gone\x1b[2J\x1b]0;owned\x07\x0d\x00\u009b\nsion stats: a line the view forged` + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := run([]string{"stats", "-server", tc.server}, &stdout, &stderr)
			assert.Equal(t, tc.status, status, stderr.String())
			assert.Contains(t, stdout.String(), tc.stdout)
			assert.Contains(t, stderr.String(), tc.stderr)
			assert.Empty(t, controlBytes(stdout.String()), "stdout: raw control characters:\n%s", stdout.String())
			assert.Empty(t, controlBytes(stderr.String()), "stderr: raw control characters:\n%s", stderr.String())
			assert.LessOrEqual(t, strings.Count(stderr.String(), "\n"), 1, "stderr: one line at most:\n%s", stderr.String())
			if tc.status == 0 {
				for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
					assert.NotContains(t, l, "owned\a")
				}
				assert.Contains(t, stdout.String(), `"gw\x1b[2J`)
				assert.Contains(t, stdout.String(), `"sess\x1b[2J`)
				assert.Contains(t, stdout.String(), `"{type ⊑ x\x1b[2J`)
			}
		})
	}
}

// TestJSONOutputEscapesC1: encoding/json leaves DEL and the C1 controls
// (U+009B is CSI) raw in its strings; sub -o json and stats -o json
// escape them, and the line is still JSON with the same value.
func TestJSONOutputEscapesC1(t *testing.T) {
	const hostile = "a\u009b2J\u0085b\x7fc"
	t.Run("sub -o json", func(t *testing.T) {
		bin := sionBinary(t)
		hazards := filepath.Join("..", "..", "examples", "internal", "usgs", "hazards.json")
		sw := start(t, bin, nil, "serve", "-ontology", hazards, "-listen", "127.0.0.1:0", "-place", "usgs")
		addr := lastWord(line(t, sw.stdout))
		s := start(t, bin, nil, "sub", "-server", addr, "-n", "1", "-o", "json", "{type ⊑ seismic}")
		require.Contains(t, line(t, s.stderr), "subscribed to ")
		out, err := exec.Command(bin, "pub", "-server", addr, "-type", "earthquake", "-attr", "place="+hostile).CombinedOutput()
		require.NoError(t, err, "%s", out)
		status, stdout, stderr := exitCode(t, s)
		require.Equal(t, 0, status, stderr)
		assert.Contains(t, stdout, `"place":"a\u009b2J\u0085b\u007fc"`)
		assert.Empty(t, controlBytes(stdout))
		assert.NotContains(t, stdout, "\x7f")
		var d jsonDelivery
		require.NoError(t, json.Unmarshal([]byte(stdout), &d))
		assert.Equal(t, hostile, d.Attrs["place"])
		require.NoError(t, sw.cmd.Process.Signal(syscall.SIGTERM))
		exitCode(t, sw)
	})
	t.Run("stats -o json", func(t *testing.T) {
		view := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"name": "` + hostile + `"}`))
		}))
		t.Cleanup(view.Close)
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, run([]string{"stats", "-server", view.URL, "-o", "json"}, &stdout, &stderr), stderr.String())
		assert.Contains(t, stdout.String(), `"name": "a\u009b2J\u0085b\u007fc"`)
		assert.Empty(t, controlBytes(stdout.String()))
		assert.NotContains(t, stdout.String(), "\x7f")
		var all map[string]map[string]string
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &all))
		assert.Equal(t, hostile, all["switch"]["name"])
	})
}

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// started is a process of the built command that the test reads.
type started struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	stderr *bufio.Reader
}

// start runs bin with args; the process is killed at cleanup if it is
// still running.
func start(t *testing.T, bin string, stdin io.Reader, args ...string) *started {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = stdin
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errs, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return &started{cmd: cmd, stdout: bufio.NewReader(out), stderr: bufio.NewReader(errs)}
}

// line reads one line of r, failing the test after 30 s.
func line(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		s, _ := r.ReadString('\n')
		got <- s
	}()
	select {
	case s := <-got:
		return strings.TrimSuffix(s, "\n")
	case <-time.After(30 * time.Second):
		t.Fatal("no line within 30 s")
		return ""
	}
}

// exitCode waits for p and returns its exit status, and what is left of
// its stdout and stderr.
func exitCode(t *testing.T, p *started) (int, string, string) {
	t.Helper()
	out, _ := io.ReadAll(p.stdout)
	errs, _ := io.ReadAll(p.stderr)
	err := p.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out), string(errs)
	}
	require.NoError(t, err)
	return 0, string(out), string(errs)
}

// TestServeSubPub runs a place of two switch processes joined by a
// shared link, a subscriber on one and publishers on the other, as the
// README's "Running sion" does: each delivery is printed with its type,
// attributes and matched subscription; a refused event makes pub exit 1
// and names the line; SIGTERM makes serve exit 0.
func TestServeSubPub(t *testing.T) {
	bin := sionBinary(t)
	hazards := filepath.Join("..", "..", "examples", "internal", "usgs", "hazards.json")
	a := start(t, bin, nil, "serve", "-ontology", hazards, "-listen", "127.0.0.1:0", "-name", "a", "-place", "usgs")
	first := line(t, a.stdout)
	require.True(t, strings.HasPrefix(first, "switch a of place usgs serving on 127.0.0.1:"), first)
	addrA := first[strings.LastIndex(first, " ")+1:]
	b := start(t, bin, nil, "serve", "-ontology", hazards, "-listen", "127.0.0.1:0", "-name", "b", "-place", "usgs", "-link", addrA)
	second := line(t, b.stdout)
	addrB := second[strings.LastIndex(second, " ")+1:]

	s := start(t, bin, nil, "sub", "-server", addrB, "-n", "3", "-o", "json", "{type ⊑ seismic; mag >= 4.5}")
	assert.Equal(t, "subscribed to {type ⊑ seismic; mag >= 4.5} on "+addrB, line(t, s.stderr))

	one := exec.Command(bin, "pub", "-server", addrA, "-type", "earthquake", "-attr", "mag=5.2", "-attr", "place=Near Tokyo", "-attr", "tsunami=1")
	out, err := one.CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.NewReader(`{"type": "earthquake", "attrs": {"mag": 3.1}}
{"type": "ice quake", "attrs": {"mag": 4.9, "place": "5 km N"}}

{"type": "nonesuch"}
{"type": "earthquake", "attrs": {"mag": 7, "time": "2023-04-07T17:20:12.38Z"}, "data": {"felt": 12}, "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "rojo=1"}
`)
	p := start(t, bin, lines, "pub", "-server", addrA)
	status, _, stderr := exitCode(t, p)
	assert.Equal(t, 1, status, "one line was refused")
	assert.Contains(t, stderr, `line 4: sion: unknown event type "nonesuch"`)

	status, stdout, stderr := exitCode(t, s)
	require.Equal(t, 0, status, stderr)
	var got []jsonDelivery
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var d jsonDelivery
		require.NoError(t, json.Unmarshal([]byte(l), &d), l)
		assert.Contains(t, l, `"matched":[{"subscription":1,"score":1}]`, "lower-case keys, as every other")
		got = append(got, d)
	}
	require.Len(t, got, 3, stdout)
	assert.Equal(t, "earthquake", got[0].Type)
	assert.Equal(t, map[string]any{"mag": 5.2, "place": "Near Tokyo", "tsunami": 1.0}, got[0].Attrs)
	assert.Equal(t, "ice quake", got[1].Type)
	assert.Equal(t, map[string]any{"mag": 4.9, "place": "5 km N"}, got[1].Attrs)
	assert.Equal(t, "earthquake", got[2].Type)
	assert.Equal(t, map[string]any{"mag": 7.0, "time": "2023-04-07T17:20:12.38Z"}, got[2].Attrs)
	assert.JSONEq(t, `{"felt": 12}`, got[2].Data)
	assert.Equal(t, "application/json", got[2].ContentType, "a JSON value as data is JSON")
	assert.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", got[2].TraceParent, "the trace context crossed the link")
	assert.Equal(t, "rojo=1", got[2].TraceState)
	assert.Empty(t, got[0].TraceParent)
	for _, d := range got {
		require.Len(t, d.Matched, 1)
		assert.Equal(t, 1.0, d.Matched[0].Score)
	}

	for _, sw := range []*started{b, a} {
		require.NoError(t, sw.cmd.Process.Signal(syscall.SIGTERM))
		status, _, stderr := exitCode(t, sw)
		assert.Equal(t, 0, status, stderr)
	}
}

// TestServeConfigAndKey: serve reads example-config.json (its ontology and
// key file relative to it, a flag overriding its listen address); a sub
// without the place's key is refused (status 1), one with it subscribes.
func TestServeConfigAndKey(t *testing.T) {
	bin := sionBinary(t)
	sw := start(t, bin, nil, "serve", "-config", "example-config.json", "-listen", "127.0.0.1:0")
	first := line(t, sw.stdout)
	require.True(t, strings.HasPrefix(first, "switch quakes-1 of place usgs serving on 127.0.0.1:"), first)
	addr := first[strings.LastIndex(first, " ")+1:]

	refused := exec.Command(bin, "sub", "-server", addr, "-n", "1", "{type ⊑ seismic}")
	out, err := refused.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, "%v: %s", err, out)
	assert.Equal(t, 1, ee.ExitCode())
	assert.Contains(t, string(out), "sion sub: "+addr)

	s := start(t, bin, nil, "sub", "-server", addr, "-key-file", "example.key", "-n", "1", "{type ⊑ seismic}")
	assert.Equal(t, "subscribed to {type ⊑ seismic} on "+addr, line(t, s.stderr))
	pubOut, err := exec.Command(bin, "pub", "-server", addr, "-key-file", "example.key", "-type", "ice quake", "-attr", "mag=1.5").CombinedOutput()
	require.NoError(t, err, "%s", pubOut)
	status, stdout, stderr := exitCode(t, s)
	require.Equal(t, 0, status, stderr)
	assert.Equal(t, "ice quake mag=1.5 [subscription 1 score 0]\n", stdout) // a filter of no predicates scores 0

	require.NoError(t, sw.cmd.Process.Signal(syscall.SIGTERM))
	status, _, stderr = exitCode(t, sw)
	assert.Equal(t, 0, status, stderr)
}

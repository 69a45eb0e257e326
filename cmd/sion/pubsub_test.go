package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSubFlags: a nonsense -n or -o is a wrong command line: status 2,
// and the message names the flag; nothing is dialled.
func TestSubFlags(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"a negative count", []string{"-n", "-1", "{type ⊑ x}"}, "sion sub: -n -1: want a count of deliveries, or 0 for until interrupted"},
		{"a count that is not a number", []string{"-n", "many", "{type ⊑ x}"}, `invalid value "many" for flag -n`},
		{"an unknown output", []string{"-o", "xml", "{type ⊑ x}"}, `sion sub: -o "xml": want text or json`},
		{"no filter", nil, "sion sub: want one filter"},
		{"two filters", []string{"{type ⊑ x}", "{type ⊑ y}"}, "sion sub: want one filter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := run(append([]string{"sub", "-server", "127.0.0.1:1"}, tc.args...), &stdout, &stderr)
			assert.Equal(t, 2, status, stderr.String())
			assert.Contains(t, stderr.String(), tc.stderr)
			assert.Empty(t, stdout.String())
		})
	}
}

// TestPubRefuses: pub refuses, with status 1 and a message naming the
// line or the file, a JSON line with an unknown field (a typo must not
// publish an event without its attributes) or with data after the
// object, a line longer than 4 MiB (skipped: the lines after it are
// published), and a payload larger than a place
// accepts (sion.DefaultMaxPayloadBytes, within the transport's frame
// limit) — the last before it connects. The valid lines
// around them are published, and nothing else is.
func TestPubRefuses(t *testing.T) {
	bin := sionBinary(t)
	hazards := filepath.Join("..", "..", "examples", "internal", "usgs", "hazards.json")
	sw := start(t, bin, nil, "serve", "-ontology", hazards, "-listen", "127.0.0.1:0", "-http", "127.0.0.1:0")
	addr := lastWord(line(t, sw.stdout))
	view := lastWord(line(t, sw.stdout))
	dir := t.TempDir()
	big := filepath.Join(dir, "big.bin")
	require.NoError(t, os.WriteFile(big, make([]byte, 960<<10+1), 0o600))
	good := `{"type": "earthquake", "attrs": {"mag": 3}}` + "\n"

	cases := []struct {
		name      string
		args      []string
		stdin     string
		stderr    string
		published uint64 // events the switch got
	}{
		{"an unknown field", nil, good + `{"type": "earthquake", "atributes": {"mag": 3}}` + "\n" + good,
			`sion pub: line 2: column 24: unknown field "atributes"`, 2},
		{"an unknown field after nested objects", nil, `{"type": "earthquake", "attrs": {"mag": 3}, "data": {"x": 1}, "tracestate": "a=1", "trace": 1}` + "\n",
			`sion pub: line 1: column 84: unknown field "trace"`, 0},
		{"data after the object", nil, `{"type": "earthquake"} {"type": "earthquake"}` + "\n",
			"sion pub: line 1: column 24: data after the JSON value", 0},
		{"a line over 4 MiB, skipped", nil, good + `{"type": "earthquake", "data": "` + strings.Repeat("x", 4<<20) + `"}` + "\n" + good + strings.TrimSuffix(good, "\n"),
			"sion pub: line 2: longer than 4194304 bytes (4 MiB), the limit of a line of standard input; skipped", 3},
		{"a payload file over the frame limit", []string{"-type", "earthquake", "-payload", big}, "",
			"sion pub: -payload " + big + ": 983041 bytes; a payload is at most 983040 bytes, so that the event fits the transport's frame of 1048576 bytes", 0},
		{"a payload on standard input over the frame limit", []string{"-type", "earthquake", "-payload", "-"}, strings.Repeat("x", 960<<10+1),
			"sion pub: -payload -: standard input holds more than 983040 bytes; a payload is at most 983040 bytes", 0},
	}
	var total uint64
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(bin, append([]string{"pub", "-server", addr}, tc.args...)...)
			cmd.Stdin, cmd.Stderr = strings.NewReader(tc.stdin), &stderr
			err := cmd.Run()
			ee, ok := errors.AsType[*exec.ExitError](err)
			require.True(t, ok, "%v: %s", err, stderr.String())
			assert.Equal(t, 1, ee.ExitCode(), stderr.String())
			assert.Contains(t, stderr.String(), tc.stderr)
			total += tc.published
			assert.Equal(t, total, published(t, view))
		})
	}
	t.Run("a payload over the limit is refused before connecting", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		status := run([]string{"pub", "-server", "127.0.0.1:1", "-type", "earthquake", "-payload", big}, &stdout, &stderr)
		assert.Equal(t, 1, status)
		assert.Contains(t, stderr.String(), "983041 bytes; a payload is at most 983040 bytes")
	})
	require.NoError(t, sw.cmd.Process.Signal(syscall.SIGTERM))
	status, _, stderr := exitCode(t, sw)
	assert.Equal(t, 0, status, stderr)
}

// published returns the number of events the switch whose management
// view is at view got from its sessions.
func published(t *testing.T, view string) uint64 {
	t.Helper()
	resp, err := http.Get(view + "/api/switch")
	require.NoError(t, err)
	defer resp.Body.Close()
	var sw struct {
		Stats struct {
			Published uint64 `json:"published"`
		} `json:"stats"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&sw))
	return sw.Stats.Published
}

// TestSubExitsWhenSwitchGoes: when its switch goes away — killed, or
// drained on SIGTERM — sub says so on stderr and exits 1, at once with
// -reconnect 0 or after its attempts to reconnect fail.
func TestSubExitsWhenSwitchGoes(t *testing.T) {
	bin := sionBinary(t)
	hazards := filepath.Join("..", "..", "examples", "internal", "usgs", "hazards.json")
	cases := []struct {
		name      string
		reconnect string
		signal    os.Signal
		stderr    []string
	}{
		{"killed, no reconnecting", "0", os.Kill, nil},
		{"drained, two attempts", "2", syscall.SIGTERM, []string{"reconnecting (at most 2 attempts)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sw := start(t, bin, nil, "serve", "-ontology", hazards, "-listen", "127.0.0.1:0")
			addr := lastWord(line(t, sw.stdout))
			s := start(t, bin, nil, "sub", "-server", addr, "-reconnect", tc.reconnect, "{type ⊑ seismic}")
			require.Contains(t, line(t, s.stderr), "subscribed to ")
			require.NoError(t, sw.cmd.Process.Signal(tc.signal))
			sw.cmd.Wait()
			status, _, stderr := exitCode(t, s)
			assert.Equal(t, 1, status, stderr)
			assert.Contains(t, stderr, "sion sub: ")
			for _, want := range tc.stderr {
				assert.Contains(t, stderr, want)
			}
			t.Logf("sub's stderr:\n%s", stderr)
		})
	}
}

// TestPubExitsWhenSwitchGoes: when its switch goes away while pub reads
// its standard input, pub tries to reconnect (-reconnect N attempts),
// then names the line it could not publish, says the lines after it were
// not, and exits 1 — it does not wait for the switch forever.
func TestPubExitsWhenSwitchGoes(t *testing.T) {
	bin := sionBinary(t)
	hazards := filepath.Join("..", "..", "examples", "internal", "usgs", "hazards.json")
	sw := start(t, bin, nil, "serve", "-ontology", hazards, "-listen", "127.0.0.1:0", "-http", "127.0.0.1:0")
	addr := lastWord(line(t, sw.stdout))
	view := lastWord(line(t, sw.stdout))
	in, w := io.Pipe()
	p := start(t, bin, in, "pub", "-server", addr, "-reconnect", "1")
	_, err := io.WriteString(w, `{"type": "earthquake", "attrs": {"mag": 1.5}}`+"\n")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return published(t, view) == 1 }, 30*time.Second, 10*time.Millisecond, "pub is connected")
	require.NoError(t, sw.cmd.Process.Kill())
	sw.cmd.Wait()
	go func() { // pub may exit before it reads these
		io.WriteString(w, `{"type": "earthquake", "attrs": {"mag": 2.5}}`+"\n"+`{"type": "earthquake", "attrs": {"mag": 3.5}}`+"\n")
		w.Close()
	}()
	status, _, stderr := exitCode(t, p)
	in.Close()
	assert.Equal(t, 1, status, stderr)
	assert.Contains(t, stderr, "reconnecting (at most 1 attempts)")
	assert.Contains(t, stderr, "were not published")
	t.Logf("pub's stderr:\n%s", stderr)
}

// TestReadLine: pub's lines are at most max bytes without their newline,
// at the end of the input too; a longer one is read to its end, reported
// and the next line comes whole.
func TestReadLine(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string // "!" for a line too long
	}{
		{"lines", "ab\ncd\n", []string{"ab", "cd"}},
		{"no newline at the end", "ab\ncd", []string{"ab", "cd"}},
		{"exactly max", "abcd\nabcd", []string{"abcd", "abcd"}},
		{"one over, then one", "abcde\nab\n", []string{"!", "ab"}},
		{"one over at the end", "ab\nabcde", []string{"ab", "!"}},
		{"blank lines", "\n\nab", []string{"", "", "ab"}},
		{"empty", "", nil},
		{"longer than the reader's buffer", strings.Repeat("x", 40) + "\nab\n" + strings.Repeat("y", 40), []string{"!", "ab", "!"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := bufio.NewReaderSize(strings.NewReader(tc.in), 16) // chunks shorter than a long line
			var got []string
			for {
				line, tooLong, err := readLine(r, 4)
				if err == io.EOF && line == nil && !tooLong {
					break
				}
				if tooLong {
					got = append(got, "!")
				} else {
					got = append(got, string(line))
				}
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

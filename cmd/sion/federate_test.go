package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// federateConfig writes example-federate.json into a temporary directory
// with its gateway's addr set to addr and its files made absolute, and
// returns its path.
func federateConfig(t *testing.T, addr string) string {
	t.Helper()
	b, err := os.ReadFile("example-federate.json")
	require.NoError(t, err)
	var cfg Config
	require.NoError(t, decodeStrict(b, "example-federate.json", &cfg))
	wd, err := os.Getwd()
	require.NoError(t, err)
	cfg.Ontology = rebase(wd, cfg.Ontology)
	require.Len(t, cfg.Federate, 1)
	cfg.Federate[0].rebase(wd)
	cfg.Federate[0].Addr = addr
	out, err := json.Marshal(cfg)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "federate.json")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	return path
}

// TestFederate runs the two example places as processes: usgs
// (example-config.json, which accepts federation from place alerts) and
// alerts (example-federate.json, its own ontology, a gateway importing
// from usgs through example-mapping.json and a firewall). A subscriber
// in alerts, in alerts' vocabulary, receives an earthquake published in
// usgs, converted: type, renamed attributes, metres from kilometres, a
// value table, a dropped attribute. When usgs restarts, the gateway
// re-establishes itself and events cross again. A place that accepts no
// federation refuses a gateway, and the requesting serve exits 1 saying
// so. SIGTERM ends both places with status 0.
func TestFederate(t *testing.T) {
	bin := sionBinary(t)
	usgs, usgsAddr := serveAddr(t, bin, "-config", "example-config.json")
	alerts, alertsAddr := serveAddr(t, bin, "-config", federateConfig(t, usgsAddr))
	assert.Equal(t, "gateway usgs-quakes to switch quakes-1 of place usgs up (import)", line(t, alerts.stdout))

	quake := []string{"pub", "-server", usgsAddr, "-key-file", "example.key", "-type", "earthquake",
		"-attr", "mag=5.2", "-attr", "place=Near Tokyo", "-attr", "depth=10.5", "-attr", "alert=yellow", "-attr", "tsunami=1"}
	d := subscribeWhilePublishing(t, bin, alertsAddr, "{type ⊑ Alert; magnitude >= 4.5}", quake)
	assert.Equal(t, "QuakeAlert", d.Type)
	assert.Equal(t, map[string]any{"magnitude": 5.2, "region": "Near Tokyo", "depth_m": 10500.0, "level": "moderate"}, d.Attrs)

	// usgs restarts on its address: the gateway re-establishes itself
	// and the subscriptions of alerts cross again.
	require.NoError(t, usgs.cmd.Process.Signal(syscall.SIGTERM))
	status, _, stderr := exitCode(t, usgs)
	require.Equal(t, 0, status, stderr)
	usgs, _ = serveAddr(t, bin, "-config", "example-config.json", "-listen", usgsAddr)
	d = subscribeWhilePublishing(t, bin, alertsAddr, "{type ⊑ QuakeAlert}", quake)
	assert.Equal(t, "QuakeAlert", d.Type)

	// alerts accepts no federation: its refusal reaches the requester.
	status, out := runStatus(t, bin, "serve", "-listen", "127.0.0.1:0", "-ontology", "example-alerts.json", "-place", "other", "-federate", alertsAddr)
	assert.Equal(t, 1, status, out)
	assert.Contains(t, out, `place "alerts" accepts no federation (its sion serve has no -accept-federation other)`)

	for _, p := range []*started{alerts, usgs} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		status, _, stderr := exitCode(t, p)
		assert.Equal(t, 0, status, stderr)
	}
}

// subscribeWhilePublishing subscribes on the switch at addr with filter
// for one delivery, and runs "sion pub" with pubArgs until it is there:
// interest reaches another place through a gateway after the sub is told
// its filter is active in its own. It returns the delivery.
func subscribeWhilePublishing(t *testing.T, bin, addr, filter string, pubArgs []string) jsonDelivery {
	t.Helper()
	s := start(t, bin, nil, "sub", "-server", addr, "-n", "1", "-o", "json", filter)
	require.Contains(t, line(t, s.stderr), "subscribed to ")
	done := make(chan struct{})
	published := make(chan error, 1)
	go func() {
		defer close(published)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			if out, err := exec.Command(bin, pubArgs...).CombinedOutput(); err != nil {
				published <- &pubError{err, out}
				return
			}
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		published <- errors.New("no delivery within 30 s")
		s.cmd.Process.Kill()
	}()
	status, stdout, stderr := exitCode(t, s)
	close(done)
	require.NoError(t, <-published)
	require.Equal(t, 0, status, stderr)
	var d jsonDelivery
	require.NoError(t, json.Unmarshal(bytes.TrimSpace([]byte(stdout)), &d), stdout)
	return d
}

// pubError is a failed "sion pub" with its output.
type pubError struct {
	err error
	out []byte
}

func (e *pubError) Error() string { return e.err.Error() + ": " + string(e.out) }

// TestServeFederateErrors: a bad -federate or federate entry is named,
// with the file, line and column where JSON is wrong, and the status is
// 2 for a wrong command line, 1 for a bad file; nothing is served.
func TestServeFederateErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	alerts := "example-alerts.json"
	badMapping := write("bad-mapping.json", `{"types": [{"from": "seismic", "to": "Tremor"}]}`)
	typo := write("typo.json", "{\"ontology\": \"x.json\",\n  \"federate\": [{\"addr\": \"127.0.0.1:1\", \"imprt\": {}}]}")
	trailing := write("trailing.json", "{\"ontology\": \"x.json\"}\n}")
	twoValues := write("two.json", "{\"ontology\": \"x.json\"}\n{\"ontology\": \"y.json\"}")
	mappingTypo := write("mapping-typo.json", `{"types": [], "atributes": []}`)
	mappingTrailing := write("mapping-trailing.json", `{"types": []} x`)
	hazards := "../../examples/internal/usgs/hazards.json"
	cases := []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{"an address with a blank", []string{"-federate", "a b"}, 2, `-federate "a b": want an address (host:port) or a JSON object`},
		{"JSON that does not parse", []string{"-federate", `{"addr": }`}, 2, "-federate:1:10: invalid character '}'"},
		{"a field of the wrong type", []string{"-federate", `{"addr": 1}`}, 2, "-federate:1:10: json: cannot unmarshal number"},
		{"no addr", []string{"-federate", `{"name": "g"}`}, 1, "sion serve: -federate: no addr"},
		{"a mapping without the other place's ontology", []string{"-federate", `{"addr": "127.0.0.1:1", "export": {"mapping": "m.json"}}`}, 1,
			"(127.0.0.1:1): export.mapping needs ontology, the other place's ontology file"},
		{"a mapping rule the ontologies refute", []string{"-federate", `{"addr": "127.0.0.1:1", "ontology": "../../examples/internal/usgs/hazards.json", "export": {"mapping": "` + badMapping + `"}}`}, 1,
			"sion serve: -federate (127.0.0.1:1): export.mapping: " + badMapping + `: ontology: mapping Types[0]: unknown type "seismic" in the source ontology`},
		{"an inline mapping", []string{"-federate", `{"addr": "127.0.0.1:1", "ontology": "../../examples/internal/usgs/hazards.json", "import": {"mapping": {"types": [{"from": "seismic", "to": "Tremor"}]}}}`}, 1,
			`import.mapping: ontology: mapping Types[0]: unknown type "Tremor" in the target ontology`},
		{"an unknown field in a config file", []string{"-config", typo}, 1, typo + `:2:40: unknown field "imprt"`},
		{"a stray brace after a config file's object", []string{"-config", trailing}, 1, trailing + ":2:1: data after the JSON value"},
		{"two objects in a config file", []string{"-config", twoValues}, 1, twoValues + ":2:1: data after the JSON value"},
		{"an unknown field whose name is also a value", []string{"-federate", `{"addr": "127.0.0.1:1", "name": "imprt", "imprt": {}}`}, 2,
			`-federate:1:42: unknown field "imprt"`},
		{"data after a -federate object", []string{"-federate", `{"addr": "127.0.0.1:1"} {}`}, 2, "-federate:1:25: data after the JSON value"},
		{"an unknown field in a mapping file", []string{"-federate", `{"addr": "127.0.0.1:1", "ontology": "` + hazards + `", "import": {"mapping": "` + mappingTypo + `"}}`}, 1,
			mappingTypo + `:1:15: unknown field "atributes"`},
		{"data after a mapping file's object", []string{"-federate", `{"addr": "127.0.0.1:1", "ontology": "` + hazards + `", "import": {"mapping": "` + mappingTrailing + `"}}`}, 1,
			mappingTrailing + ":1:15: data after the JSON value"},
		{"an unknown field in an inline mapping", []string{"-federate", `{"addr": "127.0.0.1:1", "ontology": "` + hazards + `", "import": {"mapping": {"typs": []}}}`}, 1,
			`the mapping object:1:2: unknown field "typs"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "-listen", "127.0.0.1:0", "-ontology", alerts}, tc.args...)
			status := run(args, &stdout, &stderr)
			assert.Equal(t, tc.status, status, stderr.String())
			assert.Contains(t, stderr.String(), tc.stderr)
			assert.Empty(t, stdout.String())
		})
	}
}

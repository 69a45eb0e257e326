package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sionBinary builds the command once per test and returns its path.
func sionBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sion")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// TestFilterCheck runs the built command as a process, as a user would:
// what a filter selects on stdout and status 0; a filter that does not
// parse or resolve explained on stderr with status 1; a wrong command
// line, status 2.
func TestFilterCheck(t *testing.T) {
	bin := sionBinary(t)
	hazards := filepath.Join("..", "..", "examples", "internal", "usgs", "hazards.json")
	// stdout and stderr are the whole output; a "~" in front makes it a
	// part that must appear.
	cases := []struct {
		name   string
		args   []string
		status int
		stdout string
		stderr string
	}{
		{"explained against the ontology", []string{"filter", "check", "-ontology", hazards,
			`{type ⊑ seismic; match score >= 3; magnitude >= 5 weight 2; tsunami == 1 weight 2; json(properties.felt) >= 10; place contains "a; b"}`}, 0,
			"filter: {type ⊑ seismic; match score >= 3; mag >= 5 weight 2; tsunami == 1 weight 2; json(properties.felt) >= 10; place contains \"a; b\"}\n" +
				"type:   seismic and its 2 subtypes: earthquake, ice quake\n" +
				"match:  the weights of the predicates that hold add up to at least 3.0\n" +
				"  mag >= 5 weight 2                        attribute mag (float)\n" +
				"  tsunami == 1 weight 2                    attribute tsunami (int)\n" +
				"  json(properties.felt) >= 10              a JSON path into the payload\n" +
				"  place contains \"a; b\"                    attribute place (string)\n", ""},
		{"without an ontology", []string{"filter", "check", `{type ⊑ Alarm; level in {2, 3}; match atleast 1}`}, 0,
			"filter: {type ⊑ Alarm; match atleast 1; level in {2, 3}}\n" +
				"type:   Alarm and its subtypes (give -ontology to list them)\n" +
				"match:  at least 1 of its 1 predicate\n" +
				"  level in {2, 3}                          attribute level\n", ""},
		{"a syntax error, with a caret", []string{"filter", "check", `{type ⊑ volcanic eruption}`}, 1, "",
			"sion filter check: filter: 1:18: expected \";\" after the type name \"volcanic\", found \"eruption\" (a name with spaces is quoted: \"volcanic eruption\")\n" +
				"  {type ⊑ volcanic eruption}\n" +
				"                   ^\n"},
		{"an unknown type", []string{"filter", "check", "-ontology", hazards, `{type ⊑ quake}`}, 1, "",
			"sion filter check: filter: unknown event type \"quake\"\n"},
		{"an attribute no type has", []string{"filter", "check", "-ontology", hazards, `{type ⊑ seismic; colour == "red"}`}, 1, "", "~colour"},
		{"a missing ontology file", []string{"filter", "check", "-ontology", "nonesuch.json", `{type ⊑ seismic}`}, 1, "", "~nonesuch.json"},
		{"no filter", []string{"filter", "check"}, 2, "", "~want one filter"},
		{"one predicate, every type", []string{"filter", "check", `{type ⊑ *; zone prefix "hall."}`}, 0,
			"filter: {type ⊑ *; zone prefix \"hall.\"}\n" +
				"type:   every event type (*)\n" +
				"match:  its one predicate\n" +
				"  zone prefix \"hall.\"                      attribute zone\n", ""},
		{"an RDF/XML ontology (W3C SOSA)", []string{"filter", "check", "-ontology", filepath.Join("..", "..", "ontology", "testdata", "sosa.rdf"), `{type ⊑ Observation}`}, 0,
			"~type:   Observation (no subtypes)\n", ""},
		{"no command", nil, 2, "", "~Usage: sion <command>"},
		{"an unknown command", []string{"frobnicate"}, 2, "", `~unknown command "frobnicate"`},
		{"help", []string{"help"}, 0, "~Usage: sion <command>", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, tc.args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			status := 0
			if ee, ok := errors.AsType[*exec.ExitError](err); ok {
				status = ee.ExitCode()
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.status, status, "stderr: %s", stderr.String())
			check(t, "stdout", tc.stdout, stdout.String())
			check(t, "stderr", tc.stderr, stderr.String())
		})
	}
}

// check compares got with want: the whole of it, or, when want starts
// with "~", a part of it.
func check(t *testing.T, what, want, got string) {
	t.Helper()
	if part, ok := strings.CutPrefix(want, "~"); ok {
		assert.Contains(t, got, part, what)
		return
	}
	assert.Equal(t, want, got, what)
}

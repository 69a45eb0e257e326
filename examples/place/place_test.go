package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestThreeProcesses builds the example and runs it as three OS processes
// linked over TCP on loopback: every subscriber receives quakewatch's
// counts under every routing mode, and routing by filter carries far
// fewer events than flooding.
func TestThreeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a binary")
	}
	bin := filepath.Join(t.TempDir(), "place")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(bin, "-procs", "-n", "3").CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 9, "%s", out)
	assert.Equal(t, []string{
		"subscriber big received 81 events",
		"subscriber blasts received 36 events",
		"subscriber alaska received 62 events",
		"subscriber tsunami received 6 events",
		"subscriber deep received 13 events",
		"subscriber felt-widely received 9 events",
	}, lines[3:])
	assert.Equal(t, "routing unconditional: 20 control messages, 4778 event messages over 2 links", lines[0], "2389 events flood both links")
	assert.Equal(t, "routing by-filter: 36 control messages, 233 event messages over 2 links", lines[2])
}

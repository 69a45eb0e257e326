package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDiscovery builds the example and runs it with 10 and 3 entities,
// each a process of its own on loopback, knowing only the discovery
// port: every entity becomes active, the base place is one tree rooted
// at e1 (the founder), the beta entity finds alpha (e1) by broadcast, and
// the newcomer's search walks base → alpha (through e1) → beta (through
// the beta entity).
func TestDiscovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a binary")
	}
	bin := filepath.Join(t.TempDir(), "discovery")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, n := range []int{10, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, "-n", fmt.Sprint(n)).CombinedOutput()
			text := string(out)
			require.NoError(t, err, "%s", text)
			t.Logf("\n%s", text)
			beta := fmt.Sprintf("e%d", n-1)
			for i := range n {
				assert.Regexp(t, fmt.Sprintf(`(?m)^e%d active \d+ probes=\d+ answers=\d+$`, i), text)
			}
			assert.Regexp(t, fmt.Sprintf(`(?m)^all %d entities active in `, n), text)
			assert.Regexp(t, `(?m)^one tree in \S+: root e1$`, text)
			assert.Regexp(t, `(?m)^e1 ready founded alpha at 127\.0\.0\.1:\d+$`, text)
			assert.Regexp(t, fmt.Sprintf(`(?m)^%s ready found alpha by broadcast through e1, founded beta at 127\.0\.0\.1:\d+$`, regexp.QuoteMeta(beta)), text)
			assert.Regexp(t, fmt.Sprintf(`(?m)^search: met=true found=%s place=beta rounds=2 answers=\d+ elapsed=`, beta), text)
			lines := strings.Split(strings.TrimSpace(text), "\n")
			last := lines[len(lines)-1]
			assert.Regexp(t, fmt.Sprintf(`^reached beta: base → alpha \(through e1 at 127\.0\.0\.1:\d+\) → beta \(through %s at 127\.0\.0\.1:\d+\)$`, beta), last)
			for _, bad := range []string{"dropped", "skipped", "refused"} {
				assert.NotContains(t, text, bad)
			}
		})
	}
}

package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/examples/internal/beijing"
)

// TestFederation builds the example and runs it in one process and as two
// OS processes with the gateway crossing TCP between them: every
// subscriber in monitoring receives exactly the readings the data says
// (computed from the CSV files by examples/internal/beijing's tests), and
// only those cross the gateway.
func TestFederation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a binary")
	}
	bin := filepath.Join(t.TempDir(), "federation")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, args := range [][]string{nil, {"-procs"}} {
		t.Run(strings.Join(append([]string{"args"}, args...), " "), func(t *testing.T) {
			out, err := exec.Command(bin, args...).CombinedOutput()
			require.NoError(t, err, "%s", out)
			text := string(out)
			for _, want := range []string{
				fmt.Sprintf("subscriber hazardous-pm25 received %d events\n", beijing.Hazardous),
				fmt.Sprintf("subscriber below-freezing received %d events\n", beijing.Freezing),
				fmt.Sprintf("subscriber all-observations received %d events\n", beijing.Forwarded),
				fmt.Sprintf("%d readings published in beijing, %d crossed to monitoring (%d converted)\n", beijing.NumReadings, beijing.Forwarded, beijing.Forwarded),
				"first below-freezing observation in monitoring: AirQualityObservation{",
				"air_temp_f: 30.74,", // Aotizhongxin, the first hour: -0.7 °C
				`site: "Olympic Sports Center, Chaoyang"`,
				"path beijing → monitoring\n",
			} {
				assert.Contains(t, text, want)
			}
			assert.NotContains(t, text, "dropped")
			assert.NotContains(t, text, "refused")
		})
	}
}

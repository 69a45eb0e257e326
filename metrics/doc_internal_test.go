package metrics

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocListsEveryFamily keeps doc.go's table in step with the families.
func TestDocListsEveryFamily(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "//\t")); len(f) > 0 && strings.HasPrefix(f[0], "sion_") && strings.HasPrefix(line, "//\tsion_") {
			rows[f[0]] = line
		}
	}
	assert.Len(t, rows, len(families))
	for _, f := range families {
		row, ok := rows[f.name]
		if !assert.True(t, ok, "%s is not in doc.go's table", f.name) {
			continue
		}
		assert.Contains(t, row, " "+f.otel, f.name)
		for _, l := range f.labels[2:] {
			assert.Contains(t, row, l, f.name)
		}
		if f.typ != histogram {
			assert.True(t, strings.HasSuffix(row, " "+f.unit), "%s: unit %s", f.name, f.unit)
		}
	}
}

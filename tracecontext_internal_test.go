package sion

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// traceParentOracle is W3C Trace Context Level 1's traceparent as a
// regular expression: version 00 exactly, a later version (not ff) with
// optional fields after a dash; the all-zero IDs are checked apart.
var traceParentOracle = regexp.MustCompile(`^(00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}|[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[\x21-\x7e]*)?)$`)

// FuzzCheckTraceContext compares checkTraceContext's traceparent check
// with the oracle, and checks that every refusal wraps ErrInvalidEvent
// and that an accepted tracestate keeps to the spec's limits.
func FuzzCheckTraceContext(f *testing.F) {
	for _, s := range [][2]string{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"},
		{"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz", " a=1 ,\t,b@c=2"},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "a=b=c"},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "a=1,a=2"},
		{"", "a=1"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, parent, state string) {
		err := checkTraceContext(parent, state)
		if err != nil {
			require.True(t, errors.Is(err, ErrInvalidEvent), "%v", err)
			require.True(t, strings.HasPrefix(err.Error(), "sion: invalid event: trace"), "%v", err)
		}
		if parent == "" {
			require.Equal(t, state != "", err != nil, "tracestate %q without a traceparent: %v", state, err)
			return
		}
		good := traceParentOracle.MatchString(parent) && !strings.HasPrefix(parent, "ff") && len(parent) <= MaxTraceParentBytes &&
			parent[3:35] != strings.Repeat("0", 32) && parent[36:52] != strings.Repeat("0", 16)
		if !good {
			require.Error(t, err, "traceparent %q", parent)
			return
		}
		require.Equal(t, traceStateProblem(state) != "", err != nil, "%v", err)
		if err == nil {
			require.LessOrEqual(t, len(state), MaxTraceStateBytes)
			require.LessOrEqual(t, strings.Count(state, "="), MaxTraceStateMembers, "one = per member")
			for _, c := range []byte(state) {
				require.True(t, c == '\t' || c >= 0x20 && c <= 0x7e, "byte %q", c)
			}
		}
	})
}

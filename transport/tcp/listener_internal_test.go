package tcp

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/internal/guard"
)

func TestWarnCountsSuppressed(t *testing.T) {
	// A Listener logs at most one record per kind and source per
	// logInterval; the next one says how many it suppressed.
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { nl.Close() })
	var out bytes.Buffer
	l := &Listener{nl: nl, cfg: Config{Logger: slog.New(slog.NewJSONHandler(&out, nil))}, logs: guard.NewEvery(logInterval, logSources), logsAll: guard.NewWindow(logRecords, logInterval)}
	t0 := time.Now()
	for _, w := range []struct {
		at           time.Duration
		kind, source string
	}{
		{0, "refused", "10.0.0.1"},               // logged, suppressed 0
		{time.Second, "refused", "10.0.0.1"},     // suppressed
		{2 * time.Second, "refused", "10.0.0.1"}, // suppressed
		{time.Second, "refused", "10.0.0.2"},     // another source: logged
		{time.Second, "evicted", "10.0.0.1"},     // another kind: logged
		{logInterval, "refused", "10.0.0.1"},     // logged, suppressed 2
	} {
		l.warn(t0.Add(w.at), w.kind, w.source, "tcp: "+w.kind, slog.String("source", w.source))
	}
	type record struct {
		Level, Msg, Source, Listener string
		Suppressed                   uint64
	}
	var got []record
	dec := json.NewDecoder(&out)
	for dec.More() {
		var r record
		require.NoError(t, dec.Decode(&r))
		got = append(got, r)
	}
	addr := nl.Addr().String()
	assert.Equal(t, []record{
		{"WARN", "tcp: refused", "10.0.0.1", addr, 0},
		{"WARN", "tcp: refused", "10.0.0.2", addr, 0},
		{"WARN", "tcp: evicted", "10.0.0.1", addr, 0},
		{"WARN", "tcp: refused", "10.0.0.1", addr, 2},
	}, got)
}

package sion_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport/tcp"
)

const (
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceState  = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
)

// tracedReading is a Reading with a W3C trace context.
func tracedReading(n int) *sion.Event {
	ev := reading(n)
	ev.TraceParent, ev.TraceState = traceParent, traceState
	return ev
}

// TestTraceContextRefusedAtPublish: Publish refuses a traceparent or
// tracestate that W3C Trace Context Level 1 does not allow, locally and
// over a remote session, with ErrInvalidEvent and the problem named; the
// valid ones, including a future version's, pass.
func TestTraceContextRefusedAtPublish(t *testing.T) {
	const (
		id   = "4bf92f3577b34da6a3ce929d0e0e4736"
		span = "00f067aa0ba902b7"
	)
	tp := func(version, trace, parent, flags string) string {
		return version + "-" + trace + "-" + parent + "-" + flags
	}
	members := func(n int) string {
		ms := make([]string, n)
		for i := range ms {
			ms[i] = fmt.Sprintf("k%d=v", i)
		}
		return strings.Join(ms, ",")
	}
	bad := []struct {
		name, parent, state, want string
	}{
		{"upper-case trace-id", tp("00", strings.ToUpper(id), span, "01"), "", `trace-id "4BF92F3577B34DA6A3CE929D0E0E4736" (32 lower-case hex digits): upper-case 'B'`},
		{"upper-case parent-id", tp("00", id, "00F067AA0BA902B7", "01"), "", "parent-id \"00F067AA0BA902B7\" (16 lower-case hex digits): upper-case 'F'"},
		{"upper-case flags", tp("00", id, span, "0A"), "", "trace-flags \"0A\" (2 lower-case hex digits): upper-case 'A'"},
		{"upper-case version", tp("0A", id, span, "01"), "", "version \"0A\" (2 lower-case hex digits): upper-case 'A'"},
		{"not hex", tp("00", id[:31]+"g", span, "01"), "", "trace-id \"4bf92f3577b34da6a3ce929d0e0e473g\" (32 lower-case hex digits): 'g' is not a hex digit"},
		{"short trace-id", tp("00", id[:31], span, "01"), "", "54 bytes, want 55"},
		{"long trace-id", tp("00", id+"0", span, "01"), "", "byte 35 is '0', want '-' before the parent-id"},
		{"short parent-id", tp("00", id, span[:15], "01"), "", "54 bytes, want 55"},
		{"long parent-id, short flags", tp("00", id, span+"0", "1"), "", "byte 52 is '0', want '-' before the trace-flags"},
		{"one-digit version", tp("0", id, span, "01") + "0", "", `version "0-" (2 lower-case hex digits): '-' is not a hex digit`},
		{"empty", "-", "", "1 bytes, want 55"},
		{"all-zero trace-id", tp("00", strings.Repeat("0", 32), span, "01"), "", "trace-id is all zeros"},
		{"all-zero parent-id", tp("00", id, strings.Repeat("0", 16), "01"), "", "parent-id is all zeros"},
		{"version ff", tp("ff", id, span, "01"), "", "version ff is invalid"},
		{"version 00 with more", tp("00", id, span, "01") + "-00", "", "version 00 is 55 bytes, got 58"},
		{"future version, no dash after flags", tp("01", id, span, "01") + "x", "", "byte 55 is 'x', want '-' or the end after the trace-flags"},
		{"future version, control byte", tp("cc", id, span, "01") + "-\n", "", "byte 56 is '\\n', not visible ASCII"},
		{"too long", tp("01", id, span, "01") + "-" + strings.Repeat("a", sion.MaxTraceParentBytes), "", "568 bytes, more than 512"},
		{"tracestate without traceparent", "", traceState, "tracestate without a traceparent"},
		{"tracestate without '='", traceParent, "rojo", `list-member 0 "rojo" has no '='`},
		{"tracestate upper-case key", traceParent, "Rojo=1", "key \"Rojo\": begins with 'R', not a lower-case letter"},
		{"tracestate key with a dot", traceParent, "a=1,ro.jo=1", "list-member 1: key \"ro.jo\": has '.', not a-z 0-9 _ - * /"},
		{"tracestate key beginning with a digit", traceParent, "1abc=1", "begins with '1', not a lower-case letter"},
		{"tracestate empty tenant", traceParent, "@sys=1", "tenant-id is empty"},
		{"tracestate long system-id", traceParent, "t@abcdefghijklmno=1", "system-id is 15 bytes, more than 14"},
		{"tracestate empty value", traceParent, "rojo=", "value \"\": is empty"},
		{"tracestate value with '='", traceParent, "rojo=a=b", `has '=', not printable ASCII other than ',' and '='`},
		{"tracestate value with a tab", traceParent, "rojo=a\tb", `has '\t'`},
		{"tracestate long value", traceParent, "a=" + strings.Repeat("v", 257), "is 257 bytes, more than 256"},
		{"tracestate duplicate key", traceParent, "rojo=1,congo=2,rojo=3", `key "rojo" appears twice`},
		{"tracestate 33 members", traceParent, members(33), "more than 32 list-members"},
		{"tracestate over 512 bytes", traceParent, "a=" + strings.Repeat("v", 200) + ",b=" + strings.Repeat("v", 200) + ",c=" + strings.Repeat("v", 200), "608 bytes, more than 512"},
	}
	good := []struct{ name, parent, state string }{
		{"none", "", ""},
		{"traceparent alone", traceParent, ""},
		{"not sampled", tp("00", id, span, "00"), ""},
		{"future version", tp("01", id, span, "09"), ""},
		{"future version with more fields", tp("cc", id, span, "01") + "-what-comes-next", ""},
		{"two members", traceParent, traceState},
		{"multi-tenant key", traceParent, "0tenant@vendor*/_-=v a l"},
		{"spaces, tabs and empty members", traceParent, " a=1 ,\t, b=2,"},
		{"32 members", traceParent, members(32)},
		{"512 bytes", traceParent, "a=" + strings.Repeat("v", 254) + ",b=" + strings.Repeat("v", 253)},
	}
	variants(t, sion.PlaceConfig{}, func(t *testing.T, w *world) {
		ctx := context.Background()
		pub := w.session(t, "pub")
		for _, tc := range bad {
			t.Run("bad/"+tc.name, func(t *testing.T) {
				ev := reading(1)
				ev.TraceParent, ev.TraceState = tc.parent, tc.state
				err := pub.Publish(ctx, ev)
				require.ErrorIs(t, err, sion.ErrInvalidEvent)
				assert.Contains(t, err.Error(), tc.want)
				assert.True(t, strings.HasPrefix(err.Error(), "sion: invalid event: trace"), err.Error())
			})
		}
		for _, tc := range good {
			t.Run("good/"+tc.name, func(t *testing.T) {
				ev := reading(1)
				ev.TraceParent, ev.TraceState = tc.parent, tc.state
				require.NoError(t, pub.Publish(ctx, ev))
			})
		}
	})
}

// TestTraceContextSurvives: an event's trace context arrives untouched
// across a shared link over TCP, a gateway between places whose Mapping
// renames the type, a remote session over TCP (its publishes and its
// deliveries) and look-in, local and remote; an event without one
// arrives without one.
func TestTraceContextSurvives(t *testing.T) {
	tcpTransport := func(t *testing.T) *tcp.Transport {
		tr, err := tcp.New(tcp.Config{})
		require.NoError(t, err)
		return tr
	}
	// Each path publishes ev and returns it as delivered.
	paths := []struct {
		name string
		path func(t *testing.T) (publish func(*sion.Event), received func() *sion.Event)
	}{
		{"shared link over TCP", func(t *testing.T) (func(*sion.Event), func() *sion.Event) {
			n := newNetwork(t, tcpTransport(t), func(int) string { return "127.0.0.1:0" }, sion.PlaceConfig{}, line(2))
			c := collector(t, open(t, n.sws[1], "sub"), "{type ⊑ Reading}")
			pub := open(t, n.sws[0], "pub")
			return func(ev *sion.Event) { publish(t, pub, ev) }, c.next(t)
		}},
		{"gateway renaming the type", func(t *testing.T) (func(*sion.Event), func() *sion.Event) {
			tr := tcpTransport(t)
			mo, io := metricOntology(t), imperialOntology(t)
			lab := newPlace(t, tr, placeAddrs("tcp", "lab"), "lab", mo, 1)
			field := newPlace(t, tr, placeAddrs("tcp", "field"), "field", io, 1)
			c := collector(t, open(t, field.sws[0], "dashboard"), "{type ⊑ WeatherObs}")
			federate(t, lab, 0, field, 0, sion.GatewayConfig{Name: "lab→field", Export: &sion.DirectionConfig{Mapping: metricToImperial(t, mo, io, false)}})
			pub := open(t, lab.sws[0], "sensor")
			next := c.next(t)
			return func(ev *sion.Event) {
					w := &sion.Event{Type: "Weather", Attrs: kv("station", "north", "celsius", 20.0), TraceParent: ev.TraceParent, TraceState: ev.TraceState}
					publish(t, pub, w)
				}, func() *sion.Event {
					ev := next()
					assert.Equal(t, "WeatherObs", ev.Type, "the Mapping converted the event")
					return ev
				}
		}},
		{"remote session over TCP", func(t *testing.T) (func(*sion.Event), func() *sion.Event) {
			tr := tcpTransport(t)
			sw := newSwitch(t, sion.PlaceConfig{})
			addr := serveAt(t, sw, tr, "127.0.0.1:0")
			dial := func(name string) *sion.Session {
				s, err := sion.Dial(context.Background(), tr, addr, sion.SessionConfig{Name: name})
				require.NoError(t, err)
				t.Cleanup(func() { s.Close() })
				return s
			}
			c := collector(t, dial("sub"), "{type ⊑ Reading}")
			pub := dial("pub")
			return func(ev *sion.Event) { publish(t, pub, ev) }, c.next(t)
		}},
		{"look-in, local", func(t *testing.T) (func(*sion.Event), func() *sion.Event) {
			sw := newSwitch(t, sion.PlaceConfig{})
			away := open(t, sw, "away")
			subscribe(t, away, "{type ⊑ Reading}", sion.WithLookIn())
			pub := open(t, sw, "pub")
			return func(ev *sion.Event) { publish(t, pub, ev) }, pull(t, away)
		}},
		{"look-in, remote over TCP", func(t *testing.T) (func(*sion.Event), func() *sion.Event) {
			tr := tcpTransport(t)
			sw := newSwitch(t, sion.PlaceConfig{})
			addr := serveAt(t, sw, tr, "127.0.0.1:0")
			away, err := sion.Dial(context.Background(), tr, addr, sion.SessionConfig{Name: "away"})
			require.NoError(t, err)
			t.Cleanup(func() { away.Close() })
			subscribe(t, away, "{type ⊑ Reading}", sion.WithLookIn())
			pub := open(t, sw, "pub")
			return func(ev *sion.Event) { publish(t, pub, ev) }, pull(t, away)
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			publish, received := p.path(t)
			ev := tracedReading(1)
			publish(ev)
			got := received()
			assert.Equal(t, traceParent, got.TraceParent)
			assert.Equal(t, traceState, got.TraceState)
			assert.Equal(t, traceParent, ev.TraceParent, "Publish does not modify the caller's event")

			publish(reading(2))
			got = received()
			assert.Empty(t, got.TraceParent, "no trace context: none arrives")
			assert.Empty(t, got.TraceState)

			future := tracedReading(3)
			future.TraceParent = "cc" + traceParent[2:] + "-what-comes-next"
			publish(future)
			got = received()
			assert.Equal(t, future.TraceParent, got.TraceParent, "a future version travels as it is")
		})
	}
}

// next returns a function that waits for c's next event and returns it.
func (c *collect) next(t *testing.T) func() *sion.Event {
	i := 0
	return func() *sion.Event {
		t.Helper()
		require.Eventually(t, func() bool { return c.len() > i }, 10*time.Second, time.Millisecond, "event %d", i)
		i++
		return c.events()[i-1]
	}
}

// pull returns a function that pulls s's next spooled event.
func pull(t *testing.T, s *sion.Session) func() *sion.Event {
	return func() *sion.Event {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ds, err := s.Pull(ctx, 1)
		require.NoError(t, err)
		require.Len(t, ds, 1)
		return ds[0].Event
	}
}

package sion_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport"
)

// logRecords is a slog handler that keeps the messages of the records
// it handles, in order.
type logRecords struct {
	mu   sync.Mutex
	msgs []string
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecords) WithGroup(string) slog.Handler            { return h }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}

// mark returns how many records there are so far, for since.
func (h *logRecords) mark() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.msgs)
}

// since returns the messages recorded after mark m that contain s.
func (h *logRecords) since(m int, s string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, msg := range h.msgs[m:] {
		if strings.Contains(msg, s) {
			out = append(out, msg)
		}
	}
	return out
}

// dialCounter counts the dials made through it.
type dialCounter struct {
	transport.Transport
	n atomic.Int64
}

func (d *dialCounter) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	d.n.Add(1)
	return d.Transport.Dial(ctx, addr)
}

// TestGatewayCloseDoesNotReestablish: once a federation is being ended —
// by its Gateway's Close, by Unfederate at either end, or by the
// requesting switch's Close — the requesting end never re-establishes
// it: no "re-establishing" record, no dial, however the Leave and the end
// of the link race. Each way is tried many times, since the race is won
// or lost by scheduling.
func TestGatewayCloseDoesNotReestablish(t *testing.T) {
	const rounds = 40
	o := ont1(t)
	for _, tc := range []struct {
		name string
		// end ends gateway g of switch a to switch b; a is closed at
		// cleanup when end does not close it.
		end func(t *testing.T, a, b *sion.Switch, g *sion.Gateway)
	}{
		{"Gateway.Close", func(t *testing.T, _, _ *sion.Switch, g *sion.Gateway) {
			require.NoError(t, g.Close())
		}},
		{"Unfederate at the requesting end", func(t *testing.T, a, _ *sion.Switch, g *sion.Gateway) {
			require.NoError(t, a.Unfederate(g.Name()))
		}},
		{"Unfederate at the accepting end", func(t *testing.T, _, b *sion.Switch, g *sion.Gateway) {
			require.NoError(t, b.Unfederate(g.Name()))
			require.Eventually(t, func() bool { st, _ := g.State(); return st == sion.LinkClosed }, 5*time.Second, time.Millisecond)
			require.NoError(t, g.Close())
		}},
		{"Switch.Close at the requesting end", func(t *testing.T, a, _ *sion.Switch, _ *sion.Gateway) {
			require.NoError(t, a.Close())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _ := transports[0].make(t)
			dials := &dialCounter{Transport: tr}
			b := newPlace(t, tr, placeAddrs("mem", "b"), "b", o, 1)
			collector(t, open(t, b.sws[0], "sub"), "{type ⊑ Alarm}")
			pa, err := sion.NewEventPlace(sion.PlaceConfig{Name: "a", Ontology: o})
			require.NoError(t, err)
			for i := range rounds {
				logs := &logRecords{}
				a, err := sion.NewSwitch(sion.SwitchConfig{Name: "a", Place: pa, Logger: slog.New(logs)})
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, a.Close()) })
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				g, err := a.Federate(ctx, dials, b.addrs[0], sion.GatewayConfig{Name: "g", Export: &sion.DirectionConfig{},
					RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
				cancel()
				require.NoError(t, err)
				require.Eventually(t, func() bool { return len(b.sws[0].Gateways()) == 1 }, 5*time.Second, time.Millisecond)

				mark, before := logs.mark(), dials.n.Load()
				tc.end(t, a, b.sws[0], g)
				assert.Empty(t, logs.since(mark, "re-establishing"), "round %d: re-established after the end began", i)
				assert.Equal(t, before, dials.n.Load(), "round %d: dialled after the end began", i)
				st, _ := g.State()
				assert.Equal(t, sion.LinkClosed, st, "round %d", i)
				require.Eventually(t, func() bool { return len(b.sws[0].Gateways()) == 0 }, 5*time.Second, time.Millisecond, "round %d", i)
				if t.Failed() {
					return
				}
			}
		})
	}
}

// TestLinkAndSessionCloseDoNotReconnect: the other links that
// re-establish themselves — a shared link to its parent, a remote session
// to its switch — end for good on Close too: no "re-establishing" or
// "reconnecting" record and no dial once Close began. (Their Close stops
// re-establishment before it ends the connection; unlike a gateway's, it
// has nothing to say over the link first.)
func TestLinkAndSessionCloseDoNotReconnect(t *testing.T) {
	const rounds = 40
	for _, tc := range []struct {
		name string
		// open connects an end through tr to the switch at addr, logging
		// to logs, and returns its Close.
		open func(t *testing.T, tr transport.Transport, addr string, place *sion.EventPlace, logs slog.Handler) func() error
	}{
		{"SharedLink.Close", func(t *testing.T, tr transport.Transport, addr string, place *sion.EventPlace, logs slog.Handler) func() error {
			sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "child", Place: place, Logger: slog.New(logs)})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, sw.Close()) })
			sl, err := sw.Link(context.Background(), tr, addr, sion.LinkConfig{RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond, ProbeHops: -1})
			require.NoError(t, err)
			return sl.Close
		}},
		{"Switch.Close of the child", func(t *testing.T, tr transport.Transport, addr string, place *sion.EventPlace, logs slog.Handler) func() error {
			sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "child", Place: place, Logger: slog.New(logs)})
			require.NoError(t, err)
			_, err = sw.Link(context.Background(), tr, addr, sion.LinkConfig{RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond, ProbeHops: -1})
			require.NoError(t, err)
			return sw.Close
		}},
		{"Session.Close of a remote session", func(t *testing.T, tr transport.Transport, addr string, _ *sion.EventPlace, logs slog.Handler) func() error {
			s, err := sion.Dial(context.Background(), tr, addr, sion.SessionConfig{Name: "remote", Logger: slog.New(logs),
				Reconnect: sion.ReconnectPolicy{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}})
			require.NoError(t, err)
			_, err = s.Subscribe(context.Background(), "{type ⊑ Alarm}")
			require.NoError(t, err)
			return s.Close
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, addr := transports[0].make(t)
			n := newNetwork(t, tr, addr, sion.PlaceConfig{}, []int{-1})
			dials := &dialCounter{Transport: tr}
			for i := range rounds {
				logs := &logRecords{}
				closeIt := tc.open(t, dials, n.addrs[0], n.place, logs)
				mark, before := logs.mark(), dials.n.Load()
				require.NoError(t, closeIt())
				assert.Empty(t, logs.since(mark, "re-establishing"), "round %d", i)
				assert.Empty(t, logs.since(mark, "reconnecting"), "round %d", i)
				assert.Equal(t, before, dials.n.Load(), "round %d: dialled after Close began", i)
				if t.Failed() {
					return
				}
			}
		})
	}
}

package manage_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/manage"
	"github.com/sion-go/sion/transport/tcp"
)

// federated starts a switch of a place named name that approves
// federation requests, serving over loopback TCP with its management
// view; everything closes at cleanup.
func federated(t *testing.T, name, switchName string) (*sion.Switch, string, *httptest.Server) {
	t.Helper()
	p, err := sion.NewEventPlace(sion.PlaceConfig{Name: name, Ontology: ontologyFor(t),
		Federation: func(context.Context, sion.FederationRequest) error { return nil }})
	require.NoError(t, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: switchName, Place: p})
	require.NoError(t, err)
	tr, err := tcp.New(tcp.Config{})
	require.NoError(t, err)
	l, err := tr.Listen("127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- sw.Serve(context.Background(), l) }()
	t.Cleanup(func() {
		require.NoError(t, sw.Close())
		require.NoError(t, <-served)
	})
	srv := httptest.NewServer(manage.New(sw, manage.Config{Addr: l.Addr().String()}))
	t.Cleanup(srv.Close)
	return sw, l.Addr().String(), srv
}

// TestGateways: a gateway from place plant to place office, seen from
// both ends — the requesting switch's gateway with the filter office's
// subscriber needs, and office's route over the gateway.
func TestGateways(t *testing.T) {
	x, _, viewX := federated(t, "plant", "x")
	y, addrY, viewY := federated(t, "office", "y")
	tr, err := tcp.New(tcp.Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := x.Federate(ctx, tr, addrY, sion.GatewayConfig{Name: "plant-office", Export: &sion.DirectionConfig{},
		RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, g.Close()) })
	s, err := y.Open(context.Background(), sion.SessionConfig{Name: "desk"})
	require.NoError(t, err)
	_, err = s.Subscribe(context.Background(), "{type ⊑ Alarm}")
	require.NoError(t, err)

	var gws []map[string]any
	require.Eventually(t, func() bool {
		_, _, body := get(t, viewX, "GET", "/api/gateways")
		gws = list(t, body, "gateways")
		return len(gws) == 1 && len(gws[0]["filters"].([]any)) == 1
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "plant-office", gws[0]["name"])
	assert.Equal(t, "y", gws[0]["peer"])
	assert.Equal(t, "office", gws[0]["peer_place"])
	assert.Equal(t, true, gws[0]["requested"])
	assert.Equal(t, "up", gws[0]["state"])
	assert.Equal(t, []any{"{type ⊑ Alarm}"}, gws[0]["filters"])
	assert.Contains(t, gws[0], "export")
	assert.EqualValues(t, 1, gws[0]["num_filters"])
	assert.Equal(t, false, gws[0]["truncated"])

	_, _, body := get(t, viewY, "GET", "/api/routes")
	routes := list(t, body, "routes")
	require.Len(t, routes, 1)
	assert.Equal(t, "plant-office", routes[0]["gateway"])
	assert.Equal(t, "{type ⊑ Alarm}", routes[0]["filter"])
	assert.EqualValues(t, 1, routes[0]["refs"])
	_, _, body = get(t, viewY, "GET", "/api/sessions?kind=gateway")
	sessions := list(t, body, "sessions")
	require.Len(t, sessions, 1)
	assert.Equal(t, "plant-office", sessions[0]["peer"])

	// MaxFilters bounds the filters listed per gateway.
	_, err = s.Subscribe(context.Background(), "{type ⊑ Reading}")
	require.NoError(t, err)
	few := httptest.NewServer(manage.New(x, manage.Config{MaxFilters: 1}))
	t.Cleanup(few.Close)
	require.Eventually(t, func() bool {
		_, _, body := get(t, few, "GET", "/api/gateways")
		gws = list(t, body, "gateways")
		return len(gws) == 1 && gws[0]["num_filters"] == 2.0
	}, 10*time.Second, 10*time.Millisecond)
	assert.Len(t, gws[0]["filters"], 1)
	assert.Equal(t, true, gws[0]["truncated"])
}

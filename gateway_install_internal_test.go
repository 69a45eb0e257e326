package sion

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// TestGatewayCountsOnlyInstalledProxies: while the exporting end of a
// gateway that is up is still installing a new interest of the other
// place, GatewayInfo neither counts nor lists it (events cannot match it
// yet); once it is installed, it does, and an event crosses.
func TestGatewayCountsOnlyInstalledProxies(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "Notice"}})
	require.NoError(t, err)
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	approve := func(context.Context, FederationRequest) error { return nil }
	place := func(name string) *Switch {
		p, err := NewEventPlace(PlaceConfig{Name: name, Ontology: o, Federation: approve})
		require.NoError(t, err)
		return activeSwitch(t, tr, p, name)
	}
	a, b := place("A"), place("B")
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	g, err := a.Federate(fctx, tr, "B", GatewayConfig{Name: "g", Export: &DirectionConfig{}, RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, g.Close()) })
	require.Zero(t, g.Info().Proxies, "B has no interest yet")

	// A stops the installation of B's interest until the test has looked.
	reached, release := holdInstall(t, a, func(_, f string) bool { return f == "{type ⊑ Notice}" })

	sess, err := b.Open(ctx, SessionConfig{Name: "sub"})
	require.NoError(t, err)
	t.Cleanup(func() { sess.Close() })
	type subscribed struct {
		sub *Subscription
		err error
	}
	done := make(chan subscribed, 1)
	go func() {
		sub, err := sess.Subscribe(ctx, `{type ⊑ Notice}`, WithQueue(8))
		done <- subscribed{sub, err}
	}()
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("B's interest did not reach A within 10 s")
	}
	info := g.Info()
	assert.Zero(t, info.Proxies, "A counts a proxy filter it has not installed")
	assert.Empty(t, info.Filters, "A lists a proxy filter it has not installed")

	release()
	s := <-done
	require.NoError(t, s.err, "Subscribe")
	require.Eventually(t, func() bool { return g.Info().Proxies == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{"{type ⊑ Notice}"}, g.Info().Filters)
	pub, err := a.Open(ctx, SessionConfig{Name: "pub"})
	require.NoError(t, err)
	t.Cleanup(func() { pub.Close() })
	require.NoError(t, pub.Publish(ctx, &Event{Type: "Notice"}))
	select {
	case <-s.sub.C():
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery across the gateway within 10 s")
	}
}

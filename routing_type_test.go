package sion_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// TestTypeKeysOfNamesWithSpaces: type names may hold spaces (the USGS
// ontology's "ice quake"); routing by event type registers the filter on
// the type alone, which must quote the name — unquoted, the key did not
// compile and the switch panicked. The agent of a managed place and S1's
// advertisement pruning build the same filter.
func TestTypeKeysOfNamesWithSpaces(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "quake"}, {Name: "ice quake", Parents: []string{"quake"}}})
	require.NoError(t, err)
	for _, cfg := range []sion.PlaceConfig{
		{Routing: sion.RouteByEventType},
		{Routing: sion.RouteByEventType, RequireAdvertisements: true, Covering: true},
		{Routing: sion.RouteByFilter, RequireAdvertisements: true},
	} {
		t.Run(cfg.Routing.String(), func(t *testing.T) {
			tr, err := mem.NewNetwork(mem.Config{})
			require.NoError(t, err)
			cfg.Ontology = o
			n := newNetwork(t, tr, func(i int) string { return string(rune('a' + i)) }, cfg, []int{-1, 0, 1})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			pub := open(t, n.sws[0], "pub")
			require.NoError(t, pub.Advertise(ctx, sion.Advertisement{Type: "ice quake"}))
			sub := subscribe(t, open(t, n.sws[2], "sub"), `{type ⊑ "ice quake"}`)
			publish(t, pub, &sion.Event{Type: "ice quake"})
			select {
			case d := <-sub.C():
				require.Equal(t, "ice quake", d.Event.Type)
			case <-ctx.Done():
				t.Fatal("the event did not arrive")
			}
		})
	}
}

package sion_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport/mem"
)

// TestSeenIDsDoNotNameTheNext: whoever saw an ID a switch gave (every
// CloudEvent sent out shows one) cannot name the IDs it gives next, and
// so cannot publish first under them — through a CloudEvents endpoint, a
// NATS subject or a session — to have its events dropped as duplicates.
// When an ID was the switch's random prefix and a counter, 20 events
// published on the next switch under the next 20 counts suppressed all
// 10 events the first published next (found attacking
// cloudevents.Handler, issue 19).
func TestSeenIDsDoNotNameTheNext(t *testing.T) {
	ctx := context.Background()
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	n := newNetwork(t, tr, func(i int) string { return fmt.Sprintf("sw%d", i) }, sion.PlaceConfig{}, []int{-1, 0})
	victim, attacker := open(t, n.sws[0], "victim"), open(t, n.sws[1], "attacker")
	sub := subscribe(t, open(t, n.sws[1], "reader"), `{type ⊑ Notice; zone == "victim"}`, sion.WithQueue(64))

	publish(t, victim, &sion.Event{Type: "Notice", Attrs: attrs("zone", "victim")})
	n.flush()
	seen := next(t, sub).Event.ID
	for k := uint64(1); k <= 20; k++ {
		forged := seen
		binary.BigEndian.PutUint64(forged[8:], binary.BigEndian.Uint64(seen[8:])+k)
		require.NoError(t, attacker.Publish(ctx, &sion.Event{ID: forged, Type: "Notice", Attrs: attrs("zone", "attacker")}))
	}
	for range 10 {
		publish(t, victim, &sion.Event{Type: "Notice", Attrs: attrs("zone", "victim")})
	}
	n.flush()
	assert.Len(t, queued(sub), 10, "the victim's events after the forged ones")
	assert.Zero(t, n.sws[1].Stats().Duplicates)
}

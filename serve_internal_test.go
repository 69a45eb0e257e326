package sion

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/transport"
)

// activeSwitch makes a switch of place named name, serves it on tr at
// its name until the test ends (then closes it, and checks that Serve
// returned no error), and waits until it is Active.
func activeSwitch(t *testing.T, tr transport.Transport, place *EventPlace, name string) *Switch {
	t.Helper()
	sw, err := NewSwitch(SwitchConfig{Name: name, Place: place})
	require.NoError(t, err)
	l, err := tr.Listen(name)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- sw.Serve(context.Background(), l) }()
	t.Cleanup(func() {
		require.NoError(t, sw.Close())
		require.NoError(t, <-served)
	})
	require.Eventually(t, func() bool { return sw.State() == Active }, 10*time.Second, time.Millisecond)
	return sw
}

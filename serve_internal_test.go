package sion

import (
	"context"
	"sync"
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

// holdInstall stops sw's first installation of a peer's register that
// hold selects (from its link's peer and its filter's text), between the
// proxy's entry into the router's session and Switch.install, until
// release is called (by the test, or when it ends: before the switches
// close, since cleanups run last first). reached closes when it is held.
func holdInstall(t *testing.T, sw *Switch, hold func(peer, filter string) bool) (reached <-chan struct{}, release func()) {
	t.Helper()
	held, stopped := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(stopped) })
	var once sync.Once
	hook := func(r *router, p *Subscription) {
		if hold(r.peer, p.f.String()) {
			once.Do(func() {
				close(held)
				<-stopped
			})
		}
	}
	sw.installing.Store(&hook)
	t.Cleanup(release)
	return held, release
}

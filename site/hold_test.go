package site_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/site"
)

// settleTimeout sets the site manager's SettleTimeout.
func settleTimeout(d time.Duration) systemOption {
	return func(_ *system, c *site.ManagerConfig) { c.SettleTimeout = d }
}

// holdTimeout sets the site manager's HoldTimeout.
func holdTimeout(d time.Duration) systemOption {
	return func(_ *system, c *site.ManagerConfig) { c.HoldTimeout = d }
}

// TestFirstEventsHeldUntilSlowPlacementAcknowledged: process A
// subscribes at proxy 0 (the cloud) to topic A before anything publishes
// it. Then proxy 0 falls behind: the site manager's frames to it are held
// (its connection up, as on a loaded machine), so it neither hears that
// B1 publishes topic A nor places its subscription there, nor
// acknowledges. The first publish of topic A at B1 is answered after
// SettleTimeout all the same, and the sensor goes on publishing. Every
// one of those events reaches process A exactly once when proxy 0 has
// caught up: proxy 5 held them (ProxyStats.Held) until the manager told
// it that proxy 0 had placed its subscription, and none counts as
// unsettled. (They were published at once, at switches where no
// subscription of proxy 0 was yet, and lost with only a log line.)
func TestFirstEventsHeldUntilSlowPlacementAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []systemOption
	}{
		{"representative proxy", nil},
		{"direct", []systemOption{direct}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFailSystem(t, figSites, append(tc.opts, fallback("B0"), settleTimeout(200*time.Millisecond))...)
			sa := fs.subscribe("0", "process-A", "{type ⊑ TopicA}")
			sensor := fs.session("5", "sensor-A")

			fs.cut.hold("0", "manager")
			t.Cleanup(func() { fs.cut.release("0", "manager") })
			// The first Publish returns after SettleTimeout: proxy 0 has
			// not acknowledged, and cannot until its frames flow.
			publishAll(t, sensor, "TopicA", span(0, 10), sa)
			st := fs.proxies["5"].Stats()
			assert.Equal(t, uint64(10), st.Held, "proxy 5 holds every event of topic A")
			fs.cut.release("0", "manager")

			settled(t, sa)
			publishAll(t, sensor, "TopicA", span(10, 20), sa)
			settled(t, sa)
			st = fs.proxies["5"].Stats()
			assert.Equal(t, uint64(10), st.Held, "events published once settled are not held")
			assert.Zero(t, st.Unsettled)
		})
	}
}

// TestHoldGivenUpIsCounted: as above, but proxy 0 stays behind past the
// site manager's HoldTimeout. The manager gives up on it, proxy 5
// publishes the events it held and counts each as unsettled (it may have
// missed proxy 0's subscribers) — not lost silently. Once proxy 0 has
// caught up, process A receives every event published afterwards; those
// given up on reach it at most once.
func TestHoldGivenUpIsCounted(t *testing.T) {
	fs := newFailSystem(t, figSites, fallback("B0"), settleTimeout(100*time.Millisecond), holdTimeout(300*time.Millisecond))
	sa := fs.subscribe("0", "process-A", "{type ⊑ TopicA}")
	sensor := fs.session("5", "sensor-A")

	fs.cut.hold("0", "manager")
	t.Cleanup(func() { fs.cut.release("0", "manager") })
	for _, n := range span(0, 10) {
		require.NoError(t, pub(sensor, "TopicA", n))
	}
	sa.allow(span(0, 10)...)
	require.Eventually(t, func() bool { return fs.proxies["5"].Stats().Unsettled == 10 }, wait, tick, "events given up on not counted")
	assert.Equal(t, uint64(10), fs.proxies["5"].Stats().Held)
	fs.cut.release("0", "manager")

	// Proxy 0 places its subscription at B1 once it hears of topic A
	// there; a probe tells when it has.
	probe := int64(100)
	require.Eventually(t, func() bool {
		probe++
		sa.allow(probe)
		require.NoError(t, pub(sensor, "TopicA", probe))
		return sa.has(probe)
	}, wait, 50*time.Millisecond, "proxy 0 never placed its subscription at B1")
	publishAll(t, sensor, "TopicA", span(10, 20), sa)
	settled(t, sa)
	assert.Equal(t, uint64(10), fs.proxies["5"].Stats().Unsettled, "only the events given up on")
}

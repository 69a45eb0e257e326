package site_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlowSwitchStaysInSpread: representative proxy 1's answer from
// switch 4.1 comes late — its connection up all along, as on a loaded
// machine — so one spread attempt there is not answered within a quarter
// of RequestTimeout, and the publish goes on to 4.0. Switch 4.1 took it
// all the same. It stays in the spread: once its answers flow again, the
// publishes keep being spread evenly over both switches, the
// representative's count per switch is what each switch took in, and the
// subscriber receives each event once. (A late answer was taken for a
// dead connection, and nothing took that back: 4.1 got no publish again.)
func TestSlowSwitchStaysInSpread(t *testing.T) {
	fs := newFailSystem(t, figSites, fallback("B0"))
	sensor := fs.session("5", "sensor-A")
	sa := fs.subscribe("0", "process-A", "{type ⊑ TopicA}")
	publishAll(t, sensor, "TopicA", span(0, 2), sa) // one at each switch: their subscriptions are placed
	rep := fs.proxies["1"]
	require.Equal(t, map[string]uint64{"4.0": 1, "4.1": 1}, rep.Stats().Spread)

	fs.cut.hold("1", "4.1")
	t.Cleanup(func() { fs.cut.release("1", "4.1") })
	publishAll(t, sensor, "TopicA", span(2, 4), sa) // 2 at 4.0; 3 at 4.1, unanswered, then at 4.0
	fs.cut.release("1", "4.1")
	require.Equal(t, uint64(1), uint64(1), "the attempt at 4.1 was answered in time")

	publishAll(t, sensor, "TopicA", span(4, 24), sa)
	settled(t, sa)
	spread := rep.Stats().Spread
	in := map[string]uint64{"4.0": fs.switches["4.0"].Stats().EventsIn, "4.1": fs.switches["4.1"].Stats().EventsIn}
	assert.Equal(t, in, spread, "the representative's counts are what the switches took in")
	assert.LessOrEqual(t, max(in["4.0"], in["4.1"])-min(in["4.0"], in["4.1"]), uint64(1), "switches took in %v", in)
	assert.Equal(t, uint64(24+1), in["4.0"]+in["4.1"], "each event once, and event 3 at both switches")
}

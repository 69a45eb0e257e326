package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFigures: in the system of S4 Figs. 4, 9, 20 and 21, process B's
// subscription to topic B crosses from the cloud to site B1 once with
// the representative proxy and twice without (once per switch); 1,000
// publishes of topic A split 500/500 over B1's switches, as the
// representative proxy counted them; and processes A, B and C receive
// every event of their topics published after they subscribed exactly
// once.
func TestFigures(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		direct    bool
		interSite uint64
	}{
		{"representative proxy", false, 1},
		{"direct", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := runFigures(ctx, systemConfig{direct: tc.direct})
			require.NoError(t, err)
			assert.Equal(t, tc.interSite, r.interSite)
			assert.Equal(t, [2]uint64{500, 500}, r.perSwitch)
			assert.Equal(t, map[string]uint64{"4.0": 500, "4.1": 500}, r.spread)
			for name, d := range map[string]delivery{"process A": r.a, "process B": r.b, "process C": r.c} {
				assert.True(t, d.exact(), "%s: %v", name, d)
				assert.Positive(t, d.want, name)
			}
		})
	}
	lines, err := figures(ctx, systemConfig{})
	require.NoError(t, err)
	assert.Contains(t, lines, "inter-site subscribe messages: 1 (without representative proxy: 2)")
	assert.Contains(t, lines, "publishes per switch at site B1: 500 500")
}

// TestSimulation runs a small simulation — 6 edge sites of 2 switches
// and 2 proxies, and the cloud — with and without representative
// proxies: a subscription crosses to a site once with them and once per
// switch without, each proxy that spreads a site's publishes spreads them
// evenly over its switches (and so do the switches take them in when one
// proxy spread each site and no attempt failed over), and
// every subscriber receives exactly the events the oracle says it
// matched, once.
func TestSimulation(t *testing.T) {
	lines, rep, dir, err := simulation(context.Background(), simConfig{sites: 6, switches: 2, proxies: 2, cloudProxies: 2})
	require.NoError(t, err)
	for _, l := range lines {
		t.Log(l)
	}
	assert.Positive(t, rep.interSite)
	assert.Less(t, rep.interSite, dir.interSite)
	assert.Equal(t, 2*rep.interSite, dir.interSite, "one message per switch of a site instead of one per site")
	for _, r := range []simResult{rep, dir} {
		assert.Zero(t, r.refused, "%v", r.refusedErr)
		assert.Equal(t, 2389, r.published)
		// An event is published at a second switch only when the attempt
		// at the first was not answered in time.
		assert.GreaterOrEqual(t, r.switchesIn, uint64(r.published))
		assert.LessOrEqual(t, r.switchesIn, uint64(r.published)+r.failedOver, "each event published at one switch, or one more per failover")
		assert.LessOrEqual(t, r.worstSpread, uint64(1), "site %s", r.worstSite)
		if r.spreaders == 0 && r.failedOver == 0 {
			assert.LessOrEqual(t, r.worstIntake, uint64(1), "site %s: one proxy spread each site, none failed over", r.worstIntakeSite)
		}
		assert.Positive(t, r.matched)
		assert.Equal(t, r.matched, r.delivered)
		assert.Zero(t, r.duplicates)
		assert.Zero(t, r.unexpected)
		for _, s := range r.perSubscriber {
			assert.True(t, s.exact(), "subscriber %s at %s: %v", s.name, s.site, s.delivery)
		}
	}
}

package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFigures: S3's Fig. 2 network with Fig. 13's traffic gives the
// source's loads at the rendezvous switch — 245 before the bypass, 85
// after bypassing the hottest level-2 class, 145 after the hottest
// level-3 class.
func TestFigures(t *testing.T) {
	for _, tc := range []struct {
		level int
		class string
		after float64
	}{
		{2, "TemperatureMoreThan20/Place=YokohamaStation", 85},
		{3, "TemperatureMoreThan20/GlobalPositionID=0001", 145},
	} {
		r, err := runFig2(context.Background(), tc.level)
		require.NoError(t, err)
		assert.Equal(t, figResult{before: 245, after: tc.after, class: tc.class}, r)
	}
}

// TestSimulation runs a small simulation: routes within the bound, every
// event delivered before and after a tenth of the switches (a rendezvous
// switch among them) die, and a subscription costing far fewer control
// messages than S1's propagation.
func TestSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("a place of 60 switches and another of 60")
	}
	r, err := simulate(context.Background(), simConfig{n: 60, subs: 30, seed: 7, hourEvery: 10 * time.Millisecond, stream: 300, kill: 0.1})
	require.NoError(t, err)
	assert.LessOrEqual(t, r.hopsMax, r.hopsBound)
	assert.Positive(t, r.expected)
	assert.Equal(t, r.expected, r.delivered)
	assert.Positive(t, r.expAft)
	assert.Equal(t, r.expAft, r.deliveredAfter)
	assert.Equal(t, 6, r.killed)
	assert.NotEqual(t, r.oldRV, r.newRV, "the subscriptions moved to another rendezvous switch")
	assert.Less(t, 10*r.ctlRendezvous, r.ctlS1)
	t.Logf("%+v", r)
}

package site_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
)

// figSites is the system of S4 Figs. 4, 9, 20 and 21: site B0 (the
// cloud: processes A and B at proxy 0, a switch 3), site B1 (sensors A
// and B; switches 4.0 and 4.1; proxies 1 — the representative — and 5),
// site B2 (sensor C; one proxy, 2; no switch: it publishes at the
// cloud's).
var figSites = []siteSpec{
	{id: "B0", switches: []string{"3"}, proxies: []string{"0"}},
	{id: "B1", switches: []string{"4.0", "4.1"}, proxies: []string{"1", "5"}},
	{id: "B2", proxies: []string{"2"}},
}

func publish(t testing.TB, s *sion.Session, typ string, n int) {
	t.Helper()
	require.NoError(t, s.Publish(context.Background(), &sion.Event{Type: typ, Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(int64(n))}}}))
}

// TestFig20Spread: 1,000 publishes of topic A at proxy 5 go to
// representative proxy 1, which spreads them over switches 4.0 and 4.1:
// 500 each (S4 Fig. 20).
func TestFig20Spread(t *testing.T) {
	s := newSystem(t, figSites, fallback("B0"))
	sensor := s.session("5", "sensor-A")
	const n = 1000
	for i := range n {
		publish(t, sensor, "TopicA", i)
	}
	assert.Equal(t, uint64(500), s.publishes("4.0"))
	assert.Equal(t, uint64(500), s.publishes("4.1"))
	assert.Equal(t, uint64(n), s.proxies["5"].Stats().ToRepresentative)
	rep := s.proxies["1"].Stats()
	assert.True(t, rep.Representative)
	assert.Equal(t, map[string]uint64{"4.0": 500, "4.1": 500}, rep.Spread)
	assert.Equal(t, map[string][]string{"4.0": {"TopicA"}, "4.1": {"TopicA"}}, s.proxies["1"].Brokers())
}

// TestFig21Subscribe: process B's subscription to topic B at proxy 0
// crosses to site B1 once, to representative proxy 1, which fans it out
// to both switches; without representative proxies it crosses twice, once
// per switch (S4 Figs. 9 and 21). Every event published at B1 reaches it
// once.
func TestFig21Subscribe(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []systemOption
		interSite uint64
	}{
		{"representative", nil, 1},
		{"direct", []systemOption{direct}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSystem(t, figSites, append(tc.opts, fallback("B0"))...)
			sensor := s.session("5", "sensor-B")
			publish(t, sensor, "TopicB", -1) // topic B is published at site B1
			procB := s.session("0", "process-B")
			sub, err := procB.Subscribe(context.Background(), "{type ⊑ TopicB}")
			require.NoError(t, err)
			assert.Equal(t, tc.interSite, s.proxies["0"].Stats().InterSiteSubscribes)
			const n = 100
			for i := range n {
				publish(t, sensor, "TopicB", i)
			}
			got := map[int64]int{}
			for len(got) < n {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				d, err := sub.Next(ctx)
				cancel()
				require.NoError(t, err, "after %d events", len(got))
				v, _ := d.Event.Value("n")
				got[v.Int()]++
			}
			for i := range n {
				assert.Equal(t, 1, got[int64(i)], "event %d", i)
			}
			a, b := s.publishes("4.0"), s.publishes("4.1")
			assert.Equal(t, uint64(n+1), a+b)
			assert.LessOrEqual(t, max(a, b)-min(a, b), uint64(1))
			_, err = sub.Next(quiet(t))
			assert.ErrorIs(t, err, context.DeadlineExceeded, "a second copy")
		})
	}
}

// quiet returns a context that ends after T_quiet (CASES-2: nothing
// arrives within 1 s after the last publish).
func quiet(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	t.Cleanup(cancel)
	return ctx
}

package metrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/metrics"
)

// TestCollectorRefusesCollidingSwitches: two switches of one name and
// place would export one set of series (the registry said so only at
// gather time, 25 errors without a word of which switch); NewCollector
// and Add refuse the second naming it, and a second Collector on a
// registry is refused naming the switches of the first.
func TestCollectorRefusesCollidingSwitches(t *testing.T) {
	tr := memNet(t)
	plant, yard := newPlace(t, "plant", testOntology(t)), newPlace(t, "yard", testOntology(t))
	for _, tc := range []struct {
		name string
		try  func(t *testing.T) error
		says string // "" for no error
	}{
		{"NewCollector, one name twice", func(t *testing.T) error {
			_, err := metrics.NewCollector(serve(t, tr, plant, "a", "a1"), serve(t, tr, plant, "a", "a2"))
			return err
		}, `metrics: switch "a" of place "plant": the Collector holds another switch of that name and place`},
		{"Add, a name held", func(t *testing.T) error {
			c := collectorOf(t, serve(t, tr, plant, "a", "a3"))
			b := serve(t, tr, plant, "b", "b3")
			err := c.Add(b, serve(t, tr, plant, "a", "a4"))
			for k := range scrape(t, c) {
				assert.NotContains(t, k, "switch=b", "Add added none")
			}
			return err
		}, `switch "a" of place "plant"`},
		{"one name in two places", func(t *testing.T) error {
			c := collectorOf(t, serve(t, tr, plant, "a", "a5"))
			return c.Add(serve(t, tr, yard, "a", "a6"))
		}, ""},
		{"the same switch twice", func(t *testing.T) error {
			a := serve(t, tr, plant, "a", "a7")
			_, err := metrics.NewCollector(a, a)
			return err
		}, ""},
		{"a closed switch replaced", func(t *testing.T) error {
			a := serve(t, tr, plant, "a", "a8")
			c := collectorOf(t, a)
			require.NoError(t, a.Close())
			return c.Add(serve(t, tr, plant, "a", "a9"))
		}, ""},
		{"two Collectors on one registry", func(t *testing.T) error {
			reg := prometheus.NewRegistry()
			first := collectorOf(t, serve(t, tr, plant, "a", "a10"))
			require.NoError(t, first.Register(reg))
			err := collectorOf(t, serve(t, tr, plant, "a", "a11")).Register(reg)
			_, gerr := reg.Gather()
			assert.NoError(t, gerr, "the registry exports the first alone")
			return err
		}, `metrics: the registry has a Collector already, of switch "a" of place "plant"; a second one would export the same families (and the same series for a switch of the same name and place): Add switch "a" of place "plant" to the first instead`},
		{"one Collector registered twice", func(t *testing.T) error {
			reg := prometheus.NewRegistry()
			c := collectorOf(t, serve(t, tr, plant, "a", "a12"))
			require.NoError(t, c.Register(reg))
			err := c.Register(reg)
			assert.IsType(t, prometheus.AlreadyRegisteredError{}, err, "Prometheus' own error")
			return err
		}, "duplicate metrics collector registration attempted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.try(t)
			if tc.says == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
	t.Run("Handler panics naming the switch", func(t *testing.T) {
		assert.PanicsWithError(t, `metrics: switch "h" of place "plant": the Collector holds another switch of that name and place, and their series would be one (sion_…{switch="h",place="plant"}); give each switch its own name, or Remove the other first`, func() {
			metrics.Handler(serve(t, tr, plant, "h", "h1"), serve(t, tr, plant, "h", "h2"))
		})
	})
}

// TestCollectorForgetsWhatIsGone: a closed switch's series are no longer
// exported (it was until removed), and its last counts carry over to a
// switch of its name and place added later — what it counted after the
// last scrape included; a link's gauges go with the link while its
// counters by peer stay, as LinkTotals keeps them; a gateway's series
// go with it. The counters that are left never decrease.
func TestCollectorForgetsWhatIsGone(t *testing.T) {
	tr := memNet(t)
	p := newPlace(t, "plant", testOntology(t))
	o := testOntology(t)
	a := serve(t, tr, p, "a", "a")
	b := serve(t, tr, p, "b", "b")
	linkUp(t, tr, b, a, "a")
	east := serve(t, tr, newPlace(t, "east", o), "e", "e")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := a.Federate(ctx, tr, "e", sion.GatewayConfig{Name: "a-e", Export: &sion.DirectionConfig{}})
	require.NoError(t, err)
	sub := subscribe(t, open(t, b, "reader"), "{type ⊑ Reading}", sion.WithQueue(100))
	c := collectorOf(t, a, b, east)
	pub := open(t, a, "writer")
	publish(t, pub, "Reading", 3)
	require.Eventually(t, func() bool { return sub.Stats().Delivered == 3 }, 10*time.Second, time.Millisecond)
	sentTo(t, a, "b", 3)

	const (
		published = "sion_events_published_total{place=plant,switch=a}"
		linkSent  = "sion_link_events_sent_total{peer=b,place=plant,switch=a}"
		linkUpAB  = "sion_link_up{peer=b,place=plant,switch=a}"
		gwUp      = "sion_gateway_up{gateway=a-e,place=plant,switch=a}"
		gwFwd     = "sion_gateway_events_forwarded_total{direction=export,gateway=a-e,place=plant,switch=a}"
	)
	s := scrape(t, c)
	for _, k := range []string{linkUpAB, gwUp, gwFwd, "sion_events_in_total{place=plant,switch=b}"} {
		require.Contains(t, s, k, dump(s))
	}
	require.Equal(t, float64(3), s[published])
	require.Equal(t, float64(3), s[linkSent])
	last := s

	t.Run("a gateway closed", func(t *testing.T) {
		require.NoError(t, g.Close())
		require.Eventually(t, func() bool { return len(a.Gateways()) == 0 && len(east.Gateways()) == 0 }, 10*time.Second, time.Millisecond)
		s := scrape(t, c)
		for k := range s {
			assert.NotContains(t, k, "gateway=a-e", "the gateway is gone")
		}
	})
	t.Run("a switch closed", func(t *testing.T) {
		require.NoError(t, b.Close())
		require.Eventually(t, func() bool { return len(a.Links()) == 0 }, 10*time.Second, time.Millisecond)
		s := scrape(t, c)
		for k := range s {
			assert.NotContains(t, k, "switch=b", "b is closed: none of its series")
		}
		assert.NotContains(t, s, linkUpAB, "the link is gone")
		assert.Equal(t, float64(3), s[linkSent], "a's counters by peer stay (LinkTotals)")
	})
	t.Run("counters left never decreased", func(t *testing.T) {
		s := scrape(t, c)
		for k, v := range s {
			if strings.Contains(strings.SplitN(k, "{", 2)[0], "_total") {
				assert.GreaterOrEqual(t, v, last[k], k)
			}
		}
	})
	t.Run("a closed switch replaced", func(t *testing.T) {
		publish(t, pub, "Reading", 2) // counted by a, never scraped from it
		require.NoError(t, a.Close())
		s := scrape(t, c)
		for k := range s {
			assert.NotContains(t, k, "switch=a", "a is closed: none of its series")
		}
		again := serve(t, tr, p, "a", "a-again")
		require.NoError(t, c.Add(again), "a closed switch's name is free")
		publish(t, open(t, again, "writer"), "Reading", 1)
		s = scrape(t, c)
		assert.Equal(t, float64(3+2+1), s[published], "the first's count, to its last event, carried over")
		assert.NotContains(t, s, linkSent, "the new a has no link to b: the series does not exist")
	})
}

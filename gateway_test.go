package sion_test

import (
	"context"
	"fmt"

	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// Two vocabularies for gateway tests: a metric one (°C, station codes)
// and an imperial one (°F, site names), with mappings both ways.
func metricOntology(t testing.TB) *ontology.Ontology {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "Measurement", Attributes: []ontology.Attribute{{Name: "station", Kind: ontology.KindString}}},
		{Name: "Weather", Parents: []string{"Measurement"}, Attributes: []ontology.Attribute{
			{Name: "celsius", Kind: ontology.KindFloat, Unit: "degC"}, {Name: "humidity", Kind: ontology.KindInt},
		}},
		{Name: "Air", Parents: []string{"Measurement"}, Attributes: []ontology.Attribute{{Name: "pm25", Kind: ontology.KindFloat}}},
		{Name: "Alarm", Attributes: []ontology.Attribute{{Name: "level", Kind: ontology.KindString}}},
		{Name: "Internal"},
	})
	require.NoError(t, err)
	return o
}

func imperialOntology(t testing.TB) *ontology.Ontology {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "Obs", Attributes: []ontology.Attribute{{Name: "site", Kind: ontology.KindString}}},
		{Name: "WeatherObs", Parents: []string{"Obs"}, Attributes: []ontology.Attribute{
			{Name: "fahrenheit", Kind: ontology.KindFloat, Unit: "degF"}, {Name: "humidity", Kind: ontology.KindFloat},
		}},
		{Name: "AirObs", Parents: []string{"Obs"}, Attributes: []ontology.Attribute{{Name: "pm2_5", Kind: ontology.KindFloat}}},
		{Name: "Warning", Attributes: []ontology.Attribute{{Name: "severity", Kind: ontology.KindString}}},
	})
	require.NoError(t, err)
	return o
}

func metricToImperial(t testing.TB, from, to *ontology.Ontology, withAir bool) *ontology.Mapping {
	t.Helper()
	spec := ontology.MappingSpec{
		Types: []ontology.TypeRule{{From: "Weather", To: "WeatherObs"}, {From: "Alarm", To: "Warning"}},
		Attributes: []ontology.AttributeRule{
			{From: "station", To: "site", Values: map[string]string{"north": "N-01", "south": "S-02"}},
			{From: "celsius", To: "fahrenheit", Scale: 1.8, Offset: 32},
			{From: "level", To: "severity", Values: map[string]string{"hi": "high", "lo": "low"}},
		},
	}
	if withAir {
		spec.Types = append(spec.Types, ontology.TypeRule{From: "Air", To: "AirObs"})
		spec.Attributes = append(spec.Attributes, ontology.AttributeRule{From: "pm25", To: "pm2_5"})
	}
	m, err := ontology.NewMapping(from, to, spec)
	require.NoError(t, err)
	return m
}

func imperialToMetric(t testing.TB, from, to *ontology.Ontology) *ontology.Mapping {
	t.Helper()
	m, err := ontology.NewMapping(from, to, ontology.MappingSpec{
		Types: []ontology.TypeRule{{From: "WeatherObs", To: "Weather"}, {From: "AirObs", To: "Air"}, {From: "Warning", To: "Alarm"}},
		Attributes: []ontology.AttributeRule{
			{From: "site", To: "station", Values: map[string]string{"N-01": "north", "S-02": "south"}},
			{From: "fahrenheit", To: "celsius", Scale: 5.0 / 9, Offset: -160.0 / 9},
			{From: "humidity", Drop: true},
			{From: "pm2_5", To: "pm25"},
			{From: "severity", To: "level", Values: map[string]string{"high": "hi", "low": "lo"}},
		},
	})
	require.NoError(t, err)
	return m
}

// approve is a PlaceConfig.Federation that approves every request.
func approve(context.Context, sion.FederationRequest) error { return nil }

// newPlace starts n switches of one place (a line), named prefix0…,
// that approve federation requests.
func newPlace(t *testing.T, tr transport.Transport, addr func(int) string, name string, o *ontology.Ontology, n int) *network {
	t.Helper()
	parent := line(n)
	net := &network{t: t, tr: tr, parent: parent, links: make([]*sion.SharedLink, n), prefix: name + "-sw",
		linkCfg: sion.LinkConfig{RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond, ProbeHops: -1}}
	p, err := sion.NewEventPlace(sion.PlaceConfig{Name: name, Ontology: o, Federation: approve})
	require.NoError(t, err)
	net.place = p
	for i := range n {
		net.start(i, addr(i))
	}
	for i, p := range parent {
		if p >= 0 {
			net.link(i, p)
		}
	}
	return net
}

// placeAddrs gives each place's switches their own mem addresses.
func placeAddrs(tr string, name string) func(int) string {
	if tr == "tcp" {
		return func(int) string { return "127.0.0.1:0" }
	}
	return func(i int) string { return fmt.Sprintf("%s-%d", name, i) }
}

func federate(t *testing.T, from *network, i int, to *network, j int, cfg sion.GatewayConfig) *sion.Gateway {
	t.Helper()
	if cfg.RetryMin == 0 {
		cfg.RetryMin, cfg.RetryMax = 5*time.Millisecond, 50*time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := from.sws[i].Federate(ctx, from.tr, to.addrs[j], cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, g.Close()) })
	return g
}

// collect gathers what a subscription receives, by event ID.
type collect struct {
	mu   sync.Mutex
	got  []*sion.Event
	seen map[sion.EventID]int
}

func collector(t *testing.T, s *sion.Session, src string) *collect {
	t.Helper()
	c := &collect{seen: map[sion.EventID]int{}}
	_, err := s.Subscribe(context.Background(), src, sion.WithHandler(func(d sion.Delivery) {
		c.mu.Lock()
		c.got = append(c.got, d.Event)
		c.seen[d.Event.ID]++
		c.mu.Unlock()
	}), sion.WithQueue(1<<14))
	require.NoError(t, err, src)
	return c
}

func (c *collect) events() []*sion.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

func (c *collect) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

// exactlyOnce waits until c has n events and checks that no ID came
// twice, then that nothing more arrives for a quiet period.
func (c *collect) exactlyOnce(t *testing.T, n int, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return c.len() >= n }, 10*time.Second, time.Millisecond, "%s: %d of %d events", what, c.len(), n)
	time.Sleep(200 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Len(t, c.got, n, what)
	for id, k := range c.seen {
		assert.Equal(t, 1, k, "%s: event %s arrived %d times", what, id, k)
	}
}

func kv(pairs ...any) []ontology.Attr {
	var out []ontology.Attr
	for i := 0; i < len(pairs); i += 2 {
		var v ontology.Value
		switch x := pairs[i+1].(type) {
		case string:
			v = ontology.String(x)
		case int:
			v = ontology.Int(int64(x))
		case float64:
			v = ontology.Float(x)
		}
		out = append(out, ontology.Attr{Name: pairs[i].(string), Value: v})
	}
	return out
}

func gatewayInfo(t *testing.T, sw *sion.Switch, name string) sion.GatewayInfo {
	t.Helper()
	for _, g := range sw.Gateways() {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("switch %s has no gateway %q: %+v", sw.Name(), name, sw.Gateways())
	return sion.GatewayInfo{}
}

// TestGatewayConvertsOneWay: place "lab" (metric) exports to place
// "field" (imperial); events cross converted — type, attribute names,
// units, value tables — with their ID, one place hop and the path; the
// other direction carries nothing.
func TestGatewayConvertsOneWay(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			tr, _ := tc.make(t)
			mo, io := metricOntology(t), imperialOntology(t)
			lab := newPlace(t, tr, placeAddrs(tc.name, "lab"), "lab", mo, 1)
			field := newPlace(t, tr, placeAddrs(tc.name, "field"), "field", io, 1)
			got := collector(t, open(t, field.sws[0], "dashboard"), "{type ⊑ Obs}")
			warn := collector(t, open(t, field.sws[0], "pager"), "{type ⊑ Warning}")
			labAll := collector(t, open(t, lab.sws[0], "lab-all"), "{}")
			federate(t, lab, 0, field, 0, sion.GatewayConfig{Name: "lab→field", Export: &sion.DirectionConfig{Mapping: metricToImperial(t, mo, io, true)}})

			pub := open(t, lab.sws[0], "sensor")
			publish(t, pub, &sion.Event{Type: "Weather", Attrs: kv("station", "north", "celsius", 21.5, "humidity", 40)})
			publish(t, pub, &sion.Event{Type: "Air", Attrs: kv("station", "east", "pm25", 300.0)})
			publish(t, pub, &sion.Event{Type: "Alarm", Attrs: kv("level", "hi")})
			publish(t, pub, &sion.Event{Type: "Internal"}) // no counterpart
			got.exactlyOnce(t, 2, "dashboard")
			warn.exactlyOnce(t, 1, "pager")

			evs := got.events()
			slices.SortFunc(evs, func(a, b *sion.Event) int { return len(a.Type) - len(b.Type) })
			assert.Equal(t, "AirObs", evs[0].Type)
			assert.Equal(t, kv("pm2_5", 300.0), evs[0].Attrs, "east has no counterpart: the attribute is dropped")
			assert.Equal(t, "WeatherObs", evs[1].Type)
			assert.Equal(t, kv("fahrenheit", 70.7, "humidity", 40.0, "site", "N-01"), evs[1].Attrs, "21.5 °C = 70.7 °F exactly; the int humidity became a float")
			w := warn.events()[0]
			assert.Equal(t, kv("severity", "high"), w.Attrs)
			assert.Equal(t, []string{"lab", "field"}, w.Control.Path)
			assert.Equal(t, 1, w.Control.PlaceHops)
			assert.Equal(t, sion.DefaultTTL-1, w.Control.PlaceTTL)
			assert.Equal(t, "lab", w.Control.Place, "the origin place stays")
			ids := map[sion.EventID]bool{}
			for _, e := range labAll.events() {
				ids[e.ID] = true
			}
			assert.True(t, ids[w.ID], "the converted event keeps its ID")

			// One way: field's events stay in field.
			publish(t, open(t, field.sws[0], "field-pub"), &sion.Event{Type: "Warning", Attrs: kv("severity", "low")})
			warn.exactlyOnce(t, 2, "pager")
			labAll.exactlyOnce(t, 4, "lab-all")

			li := gatewayInfo(t, lab.sws[0], "lab→field")
			assert.True(t, li.Requested)
			assert.Equal(t, "field", li.PeerPlace)
			assert.Equal(t, sion.LinkUp, li.State)
			assert.Equal(t, uint64(3), li.Export.Forwarded)
			assert.Equal(t, uint64(3), li.Export.Converted)
			assert.Equal(t, uint64(0), li.Import.Forwarded)
			fi := gatewayInfo(t, field.sws[0], "lab→field")
			assert.False(t, fi.Requested)
			assert.Equal(t, "lab", fi.PeerPlace)
			assert.Equal(t, uint64(3), fi.Import.Forwarded)
			assert.Empty(t, field.sws[0].Links(), "a gateway is not a shared link")
		})
	}
}

// TestGatewayInterestDerivation: a filter in the target place becomes,
// through the Mapping, exactly the expected filters in the source place,
// and only the events they match cross; without interest nothing does.
func TestGatewayInterestDerivation(t *testing.T) {
	tr, _ := transports[0].make(t)
	mo, io := metricOntology(t), imperialOntology(t)
	lab := newPlace(t, tr, placeAddrs("mem", "lab"), "lab", mo, 2)
	field := newPlace(t, tr, placeAddrs("mem", "field"), "field", io, 2)
	federate(t, lab, 1, field, 1, sion.GatewayConfig{Name: "g", Export: &sion.DirectionConfig{Mapping: metricToImperial(t, mo, io, true)}})
	pub := open(t, lab.sws[0], "sensor")
	weather := func(c float64) *sion.Event {
		return &sion.Event{Type: "Weather", Attrs: kv("station", "south", "celsius", c)}
	}
	for _, c := range []float64{-3, 5} {
		publish(t, pub, weather(c))
	}
	require.NoError(t, lab.sws[0].Flush(context.Background()))
	assert.Zero(t, gatewayInfo(t, lab.sws[1], "g").Export.Forwarded, "nobody in field wants anything: nothing crosses")

	s := open(t, field.sws[0], "frost")
	frost := collector(t, s, "{type ⊑ WeatherObs; fahrenheit < 32}")
	assert.Equal(t, []string{"{type ⊑ Weather; celsius < -9.868649107779168e-16}"}, gatewayInfo(t, lab.sws[1], "g").Filters)
	for _, c := range []float64{-3, 5, 0, -0.5} {
		publish(t, pub, weather(c))
	}
	frost.exactlyOnce(t, 2, "frost")
	assert.Equal(t, uint64(2), gatewayInfo(t, lab.sws[1], "g").Export.Forwarded, "only the events the derived filter matches cross")

	all := collector(t, open(t, field.sws[0], "all"), "{type ⊑ Obs}")
	assert.Equal(t, []string{"{type ⊑ Air}", "{type ⊑ Weather; celsius < -9.868649107779168e-16}", "{type ⊑ Weather}"}, gatewayInfo(t, lab.sws[1], "g").Filters)
	publish(t, pub, weather(10))
	all.exactlyOnce(t, 1, "all")

	require.NoError(t, s.Close())
	require.Eventually(t, func() bool {
		return slices.Equal([]string{"{type ⊑ Air}", "{type ⊑ Weather}"}, gatewayInfo(t, lab.sws[1], "g").Filters)
	}, 5*time.Second, time.Millisecond, "the frost subscriber's interest is withdrawn")
}

// TestGatewayFirewall: firewall filters by type and by content decide what
// crosses, whatever the target place subscribes to.
func TestGatewayFirewall(t *testing.T) {
	tr, _ := transports[0].make(t)
	mo, io := metricOntology(t), imperialOntology(t)
	lab := newPlace(t, tr, placeAddrs("mem", "lab"), "lab", mo, 1)
	field := newPlace(t, tr, placeAddrs("mem", "field"), "field", io, 1)
	all := collector(t, open(t, field.sws[0], "all"), "{}")
	g := federate(t, lab, 0, field, 0, sion.GatewayConfig{Name: "g", Export: &sion.DirectionConfig{
		Mapping: metricToImperial(t, mo, io, true), Firewall: []string{"{type ⊑ Alarm}"},
	}})
	assert.Equal(t, []string{"{type ⊑ Alarm}"}, g.Info().Filters, "interest in everything, intersected with the firewall")
	pub := open(t, lab.sws[0], "sensor")
	publish(t, pub, &sion.Event{Type: "Weather", Attrs: kv("station", "north", "celsius", -1.0)})
	publish(t, pub, &sion.Event{Type: "Alarm", Attrs: kv("level", "lo")})
	all.exactlyOnce(t, 1, "by type")
	assert.Equal(t, "Warning", all.events()[0].Type)

	require.NoError(t, g.SetFirewall(context.Background(), sion.Export, []string{"{type ⊑ Weather; celsius < 0}", "{type ⊑ Air; pm25 > 250}"}))
	assert.Equal(t, []string{"{type ⊑ Air; pm25 > 250}", "{type ⊑ Weather; celsius < 0}"}, g.Info().Filters)
	publish(t, pub, &sion.Event{Type: "Weather", Attrs: kv("station", "north", "celsius", -1.0)})
	publish(t, pub, &sion.Event{Type: "Weather", Attrs: kv("station", "north", "celsius", 1.0)})
	publish(t, pub, &sion.Event{Type: "Air", Attrs: kv("pm25", 251.0)})
	publish(t, pub, &sion.Event{Type: "Air", Attrs: kv("pm25", 250.0)})
	publish(t, pub, &sion.Event{Type: "Alarm", Attrs: kv("level", "lo")})
	all.exactlyOnce(t, 3, "by content")
	assert.Equal(t, uint64(3), g.Info().Export.Forwarded)

	err := g.SetFirewall(context.Background(), sion.Export, []string{"{type ⊑ WeatherObs}"})
	require.ErrorIs(t, err, sion.ErrInvalidFilter, "the firewall is over the source place's ontology")
	require.ErrorIs(t, g.SetFirewall(context.Background(), sion.Import, nil), sion.ErrInvalidConfig, "no import direction")
}

// TestGatewaySetMapping: replacing the Mapping at run time re-derives the
// interest: what the new Mapping covers starts crossing, what it no
// longer covers stops, with no subscription made again.
func TestGatewaySetMapping(t *testing.T) {
	tr, _ := transports[0].make(t)
	mo, io := metricOntology(t), imperialOntology(t)
	lab := newPlace(t, tr, placeAddrs("mem", "lab"), "lab", mo, 1)
	field := newPlace(t, tr, placeAddrs("mem", "field"), "field", io, 1)
	obs := collector(t, open(t, field.sws[0], "obs"), "{type ⊑ Obs}")
	g := federate(t, lab, 0, field, 0, sion.GatewayConfig{Name: "g", Export: &sion.DirectionConfig{Mapping: metricToImperial(t, mo, io, false)}})
	pub := open(t, lab.sws[0], "sensor")
	round := func() {
		publish(t, pub, &sion.Event{Type: "Weather", Attrs: kv("celsius", 3.0)})
		publish(t, pub, &sion.Event{Type: "Air", Attrs: kv("pm25", 3.0)})
	}
	round()
	obs.exactlyOnce(t, 1, "weather only")
	assert.Equal(t, []string{"{type ⊑ Weather}"}, g.Info().Filters)

	require.NoError(t, g.SetMapping(context.Background(), sion.Export, metricToImperial(t, mo, io, true)))
	assert.Equal(t, []string{"{type ⊑ Air}", "{type ⊑ Weather}"}, g.Info().Filters)
	round()
	obs.exactlyOnce(t, 3, "air starts crossing")

	require.NoError(t, g.SetMapping(context.Background(), sion.Export, metricToImperial(t, mo, io, false)))
	round()
	obs.exactlyOnce(t, 4, "air stops again")
	assert.Zero(t, g.Info().Export.Unmapped, "air does not even reach the gateway: the interest for it is gone")

	wrong := metricToImperial(t, metricOntology(t), io, true) // another *Ontology
	require.ErrorIs(t, g.SetMapping(context.Background(), sion.Export, wrong), sion.ErrInvalidConfig)
}

// TestGatewayTwoWay: a two-way gateway with a Mapping each way; each
// place's subscribers get their own events and the other's, once; no
// event returns.
func TestGatewayTwoWay(t *testing.T) {
	tr, _ := transports[0].make(t)
	mo, io := metricOntology(t), imperialOntology(t)
	lab := newPlace(t, tr, placeAddrs("mem", "lab"), "lab", mo, 1)
	field := newPlace(t, tr, placeAddrs("mem", "field"), "field", io, 1)
	labSub := collector(t, open(t, lab.sws[0], "lab-sub"), "{type ⊑ Weather}")
	fieldSub := collector(t, open(t, field.sws[0], "field-sub"), "{type ⊑ WeatherObs}")
	federate(t, lab, 0, field, 0, sion.GatewayConfig{Name: "g",
		Export: &sion.DirectionConfig{Mapping: metricToImperial(t, mo, io, true)},
		Import: &sion.DirectionConfig{Mapping: imperialToMetric(t, io, mo)}})
	publish(t, open(t, lab.sws[0], "p"), &sion.Event{Type: "Weather", Attrs: kv("station", "south", "celsius", 100.0)})
	publish(t, open(t, field.sws[0], "p"), &sion.Event{Type: "WeatherObs", Attrs: kv("site", "N-01", "fahrenheit", 212.0, "humidity", 3.5)})
	labSub.exactlyOnce(t, 2, "lab")
	fieldSub.exactlyOnce(t, 2, "field")
	for _, e := range labSub.events() {
		if e.Control.Place == "field" {
			assert.Equal(t, kv("celsius", 100.0, "station", "north"), e.Attrs, "212 °F = 100 °C; humidity has no counterpart")
			assert.Equal(t, []string{"field", "lab"}, e.Control.Path)
		}
	}
	for _, e := range fieldSub.events() {
		if e.Control.Place == "lab" {
			assert.Equal(t, kv("fahrenheit", 212.0, "site", "S-02"), e.Attrs)
		}
	}
}

// TestGatewayPlaceTTL: a chain of four places; PlaceTTL bounds how many
// gateways an event crosses, and the interest of the last place reaches
// the first through the chain.
func TestGatewayPlaceTTL(t *testing.T) {
	tr, _ := transports[0].make(t)
	o := ont1(t)
	var ps []*network
	var subs []*collect
	for i := range 4 {
		name := fmt.Sprintf("P%d", i)
		ps = append(ps, newPlace(t, tr, placeAddrs("mem", name), name, o, 1))
		subs = append(subs, collector(t, open(t, ps[i].sws[0], "sub"), "{type ⊑ Notice}"))
	}
	for i := range 3 {
		federate(t, ps[i], 0, ps[i+1], 0, sion.GatewayConfig{Name: fmt.Sprintf("g%d", i), Export: &sion.DirectionConfig{}})
	}
	pub := open(t, ps[0].sws[0], "pub")
	publish(t, pub, &sion.Event{Type: "Notice", Control: sion.Control{PlaceTTL: 2}})
	publish(t, pub, &sion.Event{Type: "Notice"})
	subs[0].exactlyOnce(t, 2, "P0")
	subs[1].exactlyOnce(t, 2, "P1")
	subs[2].exactlyOnce(t, 2, "P2")
	subs[3].exactlyOnce(t, 1, "P3: PlaceTTL 2 stops one event at the third gateway")
	e := subs[3].events()[0]
	assert.Equal(t, []string{"P0", "P1", "P2", "P3"}, e.Control.Path)
	assert.Equal(t, 3, e.Control.PlaceHops)
	assert.Equal(t, uint64(1), gatewayInfo(t, ps[2].sws[0], "g2").Export.Expired)
}

// TestGatewayCyclesExactlyOnce: places joined in cycles — a two-way
// gateway, a ring of one-way gateways, and a redundant second gateway
// between two places on other switches — and every subscriber gets every
// event exactly once, also while one gateway is cut and after it is
// restored.
func TestGatewayCyclesExactlyOnce(t *testing.T) {
	tr, err := tcp.New(tcp.Config{})
	require.NoError(t, err)
	o := ont1(t)
	a := newPlace(t, tr, placeAddrs("tcp", "A"), "A", o, 2)
	b := newPlace(t, tr, placeAddrs("tcp", "B"), "B", o, 2)
	c := newPlace(t, tr, placeAddrs("tcp", "C"), "C", o, 1)
	places := []*network{a, b, c}
	var subs []*collect
	for _, p := range places {
		for _, sw := range p.sws {
			subs = append(subs, collector(t, open(t, sw, "sub"), "{type ⊑ Notice}"))
		}
	}
	both := &sion.DirectionConfig{}
	federate(t, a, 0, b, 0, sion.GatewayConfig{Name: "AB", Import: both, Export: both})
	proxy := newFreezeProxy(t, b.addrs[1])
	redundant := &network{t: t, tr: tr, addrs: []string{proxy.addr()}}
	gr := federate(t, a, 1, redundant, 0, sion.GatewayConfig{Name: "AB2", Export: both})
	federate(t, b, 1, c, 0, sion.GatewayConfig{Name: "BC", Export: both})
	federate(t, c, 0, a, 1, sion.GatewayConfig{Name: "CA", Export: both})

	pubs := []*sion.Session{open(t, a.sws[0], "pub"), open(t, b.sws[1], "pub"), open(t, c.sws[0], "pub")}
	total := 0
	round := func(n int) {
		for range n {
			for _, p := range pubs {
				publish(t, p, &sion.Event{Type: "Notice"})
				total++
			}
		}
		for i, s := range subs {
			s.exactlyOnce(t, total, fmt.Sprintf("subscriber %d", i))
		}
	}
	round(20)

	proxy.cut()
	round(20) // while it is cut and re-established, the other gateways carry everything
	require.Eventually(t, func() bool { st, _ := gr.State(); return st == sion.LinkUp && gr.Establishments() == 2 }, 10*time.Second, time.Millisecond)
	round(20)
	fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range places {
		require.NoError(t, p.sws[0].Flush(fctx), "a marker crosses one gateway at most: cycles of places do not multiply it")
	}
	// A copy is dropped where it enters a place (a gateway's Import) or,
	// when the other copy entered at the other switch of B and crossed
	// B's shared link first, where it meets it (the link's Duplicates):
	// which one depends on timing.
	var dups, atLinks, looped uint64
	for _, p := range places {
		for _, sw := range p.sws {
			for _, g := range sw.Gateways() {
				dups += g.Import.Duplicates
				looped += g.Export.Looped + g.Import.Looped
			}
			for _, l := range sw.Links() {
				atLinks += l.Duplicates
			}
		}
	}
	assert.NotZero(t, dups+atLinks, "redundant paths deliver copies, which are dropped where they enter or meet")
	t.Logf("duplicates dropped: %d entering, %d at shared links; loops stopped: %d", dups, atLinks, looped)
}

// TestFederationAdmission: a place federates only with its consent and
// its admission; bad requests are refused with clear errors.
func TestFederationAdmission(t *testing.T) {
	tr, _ := transports[0].make(t)
	o := ont1(t)
	lab := newPlace(t, tr, placeAddrs("mem", "lab"), "lab", o, 1)
	ctx := context.Background()
	try := func(cfg sion.PlaceConfig, gc sion.GatewayConfig) error {
		cfg.Ontology = o
		p, err := sion.NewEventPlace(cfg)
		require.NoError(t, err)
		sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "peer", Place: p})
		require.NoError(t, err)
		defer sw.Close()
		l, err := tr.Listen(cfg.Name + "-peer")
		require.NoError(t, err)
		go sw.Serve(ctx, l)
		if gc.Export == nil && gc.Import == nil {
			gc.Export = &sion.DirectionConfig{}
		}
		g, err := lab.sws[0].Federate(ctx, tr, cfg.Name+"-peer", gc)
		if err == nil {
			g.Close()
		}
		return err
	}
	err := try(sion.PlaceConfig{Name: "closed"}, sion.GatewayConfig{})
	require.ErrorIs(t, err, sion.ErrNotAdmitted)
	assert.ErrorContains(t, err, "accepts no federation requests")
	err = try(sion.PlaceConfig{Name: "picky", Federation: func(_ context.Context, r sion.FederationRequest) error {
		if r.Place != "lab" || !r.Export || r.Import {
			return fmt.Errorf("bad request %+v", r)
		}
		return fmt.Errorf("no exports from %s accepted", r.Place)
	}}, sion.GatewayConfig{})
	require.ErrorIs(t, err, sion.ErrNotAdmitted)
	assert.ErrorContains(t, err, "no exports from lab accepted")
	key := []byte("0123456789abcdef0123456789abcdef")
	require.ErrorIs(t, try(sion.PlaceConfig{Name: "keyed", SharedKey: key, Federation: approve}, sion.GatewayConfig{}), sion.ErrNotAdmitted)
	require.NoError(t, try(sion.PlaceConfig{Name: "keyed2", SharedKey: key, Federation: approve}, sion.GatewayConfig{SharedKey: key}))
	require.ErrorIs(t, try(sion.PlaceConfig{Name: "lab", Federation: approve}, sion.GatewayConfig{}), sion.ErrLinkRefused, "a place does not federate with itself")

	_, err = lab.sws[0].Federate(ctx, tr, "nowhere", sion.GatewayConfig{})
	require.ErrorIs(t, err, sion.ErrInvalidConfig, "no direction")
	_, err = lab.sws[0].Federate(ctx, tr, "nowhere", sion.GatewayConfig{Export: &sion.DirectionConfig{Firewall: []string{"{type ⊑ Nope}"}}})
	require.ErrorIs(t, err, sion.ErrInvalidFilter)
	mo, io := metricOntology(t), imperialOntology(t)
	_, err = lab.sws[0].Federate(ctx, tr, "nowhere", sion.GatewayConfig{Export: &sion.DirectionConfig{Mapping: metricToImperial(t, mo, io, true)}})
	require.ErrorIs(t, err, sion.ErrInvalidConfig, "the Mapping's source is not lab's ontology")
	_, err = lab.sws[0].Federate(ctx, nil, "nowhere", sion.GatewayConfig{Export: &sion.DirectionConfig{}})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
}

// TestUnfederate: either end ends the federation; the interest it carried
// is withdrawn and the gateway is not re-established.
func TestUnfederate(t *testing.T) {
	tr, _ := transports[0].make(t)
	o := ont1(t)
	a := newPlace(t, tr, placeAddrs("mem", "a"), "a", o, 1)
	b := newPlace(t, tr, placeAddrs("mem", "b"), "b", o, 1)
	collector(t, open(t, b.sws[0], "sub"), "{type ⊑ Alarm}")
	g, err := a.sws[0].Federate(context.Background(), tr, b.addrs[0], sion.GatewayConfig{Name: "g", Export: &sion.DirectionConfig{}})
	require.NoError(t, err)
	assert.Equal(t, []string{"{type ⊑ Alarm}"}, g.Info().Filters)
	require.NoError(t, b.sws[0].Unfederate("g"))
	require.Eventually(t, func() bool { st, _ := g.State(); return st == sion.LinkClosed }, 5*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	assert.Empty(t, b.sws[0].Gateways(), "not re-established")
	assert.Equal(t, 1, g.Establishments())
	require.NoError(t, g.Close())
	require.NoError(t, g.Close(), "idempotent")
	assert.Empty(t, a.sws[0].Gateways())
	require.ErrorIs(t, a.sws[0].Unfederate("g"), sion.ErrInvalidConfig)

	g2, err := a.sws[0].Federate(context.Background(), tr, b.addrs[0], sion.GatewayConfig{Name: "g", Export: &sion.DirectionConfig{}})
	require.NoError(t, err, "federate again at run time")
	require.Len(t, b.sws[0].Gateways(), 1)
	require.NoError(t, g2.Close())
	require.Eventually(t, func() bool { return len(b.sws[0].Gateways()) == 0 }, 5*time.Second, time.Millisecond)
}

package main

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
)

// The source's figures (S4 Figs. 4, 9, 20, 21): three sites under one site
// manager.
//
//   - B0, the cloud: one switch (address 3) and proxy 0, where processes
//     B and C subscribe to topics B and C.
//   - B1: sensors A and B publish topics A and B at proxy 5; switches 4.0
//     and 4.1 (Fig. 9: the site grew a second broker) and proxies 1 —
//     the representative proxy, made first — and 5; process A
//     subscribes to topic A at proxy 1.
//   - B2: sensor C publishes topic C at its one proxy, 2; the site has no
//     switch, so its publishes go to the fallback site's, the cloud's
//     switch 3 (Fig. 4 (4a)).
//
// Fig. 20: the 1,000 publishes of topic A at proxy 5 go to representative
// proxy 1, which spreads them over 4.0 and 4.1. Fig. 21: process B's
// subscription to topic B crosses from B0 to B1 once, to proxy 1, which
// fans it out to the switches that carry topic B; without representative
// proxies (Fig. 9, site.ProxyConfig.Direct) it crosses once per switch.

// figSites are the figures' sites.
var figSites = []siteSpec{
	{id: "B0", switches: []string{"3"}, proxies: []string{"0"}},
	{id: "B1", switches: []string{"4.0", "4.1"}, proxies: []string{"1", "5"}},
	{id: "B2", proxies: []string{"2"}},
}

// figOntology returns the figures' topics as event types: A, B and C
// under one Topic, each event carrying its sensor and a sequence number.
func figOntology() (*ontology.Ontology, error) {
	return ontology.New([]ontology.TypeDef{
		{Name: "Topic", Attributes: []ontology.Attribute{{Name: "sensor", Kind: ontology.KindString}, {Name: "seq", Kind: ontology.KindInt}}},
		{Name: "TopicA", Parents: []string{"Topic"}},
		{Name: "TopicB", Parents: []string{"Topic"}},
		{Name: "TopicC", Parents: []string{"Topic"}},
	})
}

// figPublishes is how many events of topic A sensor A publishes (Fig. 20),
// and figEvents how many of topics B and C sensors B and C publish after
// processes B and C have subscribed.
const (
	figPublishes = 1000
	figEvents    = 100
)

// figResult is what one run of the figures measured.
type figResult struct {
	// interSite counts the inter-site subscribe messages process B's
	// subscription cost (ProxyStats.InterSiteSubscribes of proxy 0).
	interSite uint64
	// perSwitch are the publishes switches 4.0 and 4.1 took in while
	// sensor A published topic A (Fig. 20); spread the representative
	// proxy's count of what it spread to each (ProxyStats.Spread).
	perSwitch [2]uint64
	spread    map[string]uint64
	// What processes A, B and C received of the events published after
	// they subscribed: distinct events of want, duplicates, events they
	// should not have received.
	a, b, c delivery
}

// delivery is what one subscriber received of want events.
type delivery struct {
	want, delivered, duplicates, unexpected int
}

// exact reports whether every event wanted arrived exactly once and
// nothing else did.
func (d delivery) exact() bool {
	return d.delivered == d.want && d.duplicates == 0 && d.unexpected == 0
}

func (d delivery) String() string {
	return fmt.Sprintf("%d of %d, %d duplicates, %d unexpected", d.delivered, d.want, d.duplicates, d.unexpected)
}

// runFigures builds the figures' system — with representative proxies,
// or direct — and runs Figs. 20, 21 and 4's topic C.
func runFigures(ctx context.Context, cfg systemConfig) (figResult, error) {
	var res figResult
	o, err := figOntology()
	if err != nil {
		return res, err
	}
	cfg.fallback = "B0"
	cfg.operatorRep = false // proxy 1 is made first and becomes B1's representative
	s, err := startSystem(ctx, o, figSites, cfg)
	if s != nil {
		defer s.close()
	}
	if err != nil {
		return res, err
	}
	sessions := map[string]*sion.Session{}
	for _, x := range []struct{ proxy, name string }{
		{"5", "sensor A"}, {"5", "sensor B"}, {"2", "sensor C"},
		{"1", "process A"}, {"0", "process B"}, {"0", "process C"},
	} {
		if sessions[x.name], err = s.open(ctx, x.proxy, x.name); err != nil {
			return res, err
		}
	}
	subscribe := func(name, topic string) (*inbox, error) {
		in := newInbox(figKey)
		_, err := sessions[name].Subscribe(ctx, "{type ⊑ "+topic+"}", sion.WithQueue(4*figPublishes), sion.WithHandler(in.handler))
		return in, err
	}
	publish := func(name, topic string, seq int, keys map[string]bool) error {
		ev := &sion.Event{Type: topic, Attrs: []ontology.Attr{
			{Name: "sensor", Value: ontology.String(name)},
			{Name: "seq", Value: ontology.Int(int64(seq))},
		}}
		if keys != nil {
			keys[figKey(ev)] = true
		}
		return sessions[name].Publish(ctx, ev)
	}

	// Fig. 21 (1'): process A subscribes to topic A at proxy 1, in its own
	// site; Fig. 20: sensor A publishes topic A 1,000 times at proxy 5.
	inA, err := subscribe("process A", "TopicA")
	if err != nil {
		return res, fmt.Errorf("process A: %w", err)
	}
	before := [2]uint64{s.eventsIn("4.0"), s.eventsIn("4.1")}
	spreadBefore := s.proxies["1"].Stats().Spread
	wantA := map[string]bool{}
	for i := range figPublishes {
		if err := publish("sensor A", "TopicA", i, wantA); err != nil {
			return res, fmt.Errorf("sensor A: %w", err)
		}
	}
	res.perSwitch = [2]uint64{s.eventsIn("4.0") - before[0], s.eventsIn("4.1") - before[1]}
	res.spread = s.proxies["1"].Stats().Spread
	for addr, n := range spreadBefore {
		res.spread[addr] -= n
	}

	// Fig. 21: topic B is published at site B1; process B subscribes to
	// it at proxy 0, in the cloud.
	if err := publish("sensor B", "TopicB", -1, nil); err != nil {
		return res, fmt.Errorf("sensor B: %w", err)
	}
	interBefore := s.proxies["0"].Stats().InterSiteSubscribes
	inB, err := subscribe("process B", "TopicB")
	if err != nil {
		return res, fmt.Errorf("process B: %w", err)
	}
	res.interSite = s.proxies["0"].Stats().InterSiteSubscribes - interBefore

	// Fig. 4: process C subscribes to topic C at proxy 0; sensor C
	// publishes it at site B2, which has no switch: at the cloud's.
	inC, err := subscribe("process C", "TopicC")
	if err != nil {
		return res, fmt.Errorf("process C: %w", err)
	}
	wantB, wantC := map[string]bool{}, map[string]bool{}
	for i := range figEvents {
		if err := publish("sensor B", "TopicB", i, wantB); err != nil {
			return res, fmt.Errorf("sensor B: %w", err)
		}
		if err := publish("sensor C", "TopicC", i, wantC); err != nil {
			return res, fmt.Errorf("sensor C: %w", err)
		}
	}
	inboxes := []*inbox{inA, inB, inC}
	wants := []map[string]bool{wantA, wantB, wantC}
	if err := settle(ctx, inboxes, []int{len(wantA), len(wantB), len(wantC)}, 5*time.Second, 30*time.Second); err != nil {
		return res, err
	}
	for i, d := range []*delivery{&res.a, &res.b, &res.c} {
		d.want = len(wants[i])
		d.delivered, d.duplicates, d.unexpected = inboxes[i].check(wants[i])
	}
	return res, nil
}

// figKey tells the figures' events apart: sensor and sequence number.
func figKey(ev *sion.Event) string {
	sensor, _ := ev.Value("sensor")
	seq, _ := ev.Value("seq")
	return fmt.Sprintf("%s/%d", sensor.Str(), seq.Int())
}

// figures runs the figures with and without representative proxies and
// checks what the counters say against each other; the lines to print
// are returned.
func figures(ctx context.Context, cfg systemConfig) ([]string, error) {
	rep, err := runFigures(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("figures, with representative proxy: %w", err)
	}
	cfg.direct = true
	dir, err := runFigures(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("figures, without representative proxy: %w", err)
	}
	if want := map[string]uint64{"4.0": rep.perSwitch[0], "4.1": rep.perSwitch[1]}; !maps.Equal(rep.spread, want) {
		return nil, fmt.Errorf("figures: the representative proxy spread %v, the switches took in %v", rep.spread, want)
	}
	lines := []string{
		"S4 figures: sites B0 (cloud: switch 3, proxy 0), B1 (switches 4.0, 4.1; representative proxy 1, proxy 5), B2 (proxy 2, no switch)",
		fmt.Sprintf("inter-site subscribe messages: %d (without representative proxy: %d)", rep.interSite, dir.interSite),
		fmt.Sprintf("publishes per switch at site B1: %d %d", rep.perSwitch[0], rep.perSwitch[1]),
	}
	for _, x := range []struct {
		who, what string
		rep, dir  delivery
	}{
		{"process A", "topic-A events published in its own site B1", rep.a, dir.a},
		{"process B", "topic-B events published at site B1", rep.b, dir.b},
		{"process C", "topic-C events published at site B2 (no switch there: at the cloud's)", rep.c, dir.c},
	} {
		if x.rep.exact() && x.dir.exact() {
			lines = append(lines, fmt.Sprintf("%s received each of the %d %s exactly once (with and without representative proxy)", x.who, x.rep.want, x.what))
		} else {
			lines = append(lines, fmt.Sprintf("%s did not receive each of the %s exactly once: with representative proxy %v; without %v", x.who, x.what, x.rep, x.dir))
		}
	}
	return lines, nil
}

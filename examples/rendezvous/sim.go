package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/examples/internal/beijing"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// The simulation: a place of n switches routed by rendezvous, in one
// process over transport/mem, publishing the Beijing air-quality readings
// (examples/internal/beijing: 12 stations, hourly, March–April 2013) as
// one event type per pollutant, with the district of the station as the
// level-2 attribute and the station as the level-3 one.
//
// The skew (Zipf, s = 1, over the pollutants by rank): the pollutant of
// rank k is published every k-th hour — PM2.5 every hour, PM10 every
// second, … SO2 every sixth — and chosen by a subscription with weight
// 1/k. A subscription follows one station's readings of one pollutant
// (`{type ⊑ PM25Reading; station == "Dongsi"}`: the station's operator).
// Publishers and subscribers sit on random switches that are not the
// rendezvous switch of any pollutant.

// pollutants are the event types, by rank.
var pollutants = []string{"PM25Reading", "PM10Reading", "NO2Reading", "O3Reading", "COReading", "SO2Reading"}

func simOntology() (*ontology.Ontology, error) {
	defs := []ontology.TypeDef{{Name: "PollutantReading", Attributes: []ontology.Attribute{
		{Name: "station", Kind: ontology.KindString},
		{Name: "district", Kind: ontology.KindString},
		{Name: "value", Kind: ontology.KindFloat, Unit: "ug/m3"},
		{Name: "time", Kind: ontology.KindTime},
	}}}
	for _, p := range pollutants {
		defs = append(defs, ontology.TypeDef{Name: p, Parents: []string{"PollutantReading"}})
	}
	return ontology.New(defs)
}

// simConfig configures a simulation.
type simConfig struct {
	n, subs   int
	seed      uint64
	hourEvery time.Duration // how long an hour of readings takes to publish
	stream    int           // hours published while bypasses form
	kill      float64       // the share of switches killed
}

// simResult is what a simulation measured.
type simResult struct {
	n, subs                int
	hopsMean               float64
	hopsMax, hopsBound     int
	stateMean, linksMean   float64
	stateMax               int
	ctlRendezvous, ctlS1   float64 // control messages per subscription
	hotBefore, hotAfter    float64 // the hottest rendezvous switch's load / the mean
	bypassed               []string
	delivered, expected    int
	killed                 int
	oldRV, newRV           string
	deliveredAfter, expAft int
}

// simSub is a subscription of the simulation.
type simSub struct {
	typ, station string
	host         int
	sub          *sion.Subscription
	got          int
}

func simulate(ctx context.Context, cfg simConfig) (simResult, error) {
	res := simResult{n: cfg.n, subs: cfg.subs}
	rng := rand.New(rand.NewPCG(cfg.seed, 15))
	o, err := simOntology()
	if err != nil {
		return res, err
	}
	readings, err := beijing.Readings()
	if err != nil {
		return res, err
	}
	district := map[string]string{}
	for _, s := range beijing.Stations() {
		district[s.Name] = s.District
	}
	// Rates: the pollutant of rank k is published every k-th hour, so the
	// mean load of the six rendezvous switches is 12 × (1 + 1/2 + … + 1/6)
	// / 6 readings per hour; the threshold keeps each within 1.5 × that.
	hourly := 12.0 * (1 + 1.0/2 + 1.0/3 + 1.0/4 + 1.0/5 + 1.0/6) / 6
	perSecond := float64(time.Second) / float64(cfg.hourEvery)
	window := 2 * time.Second
	// The switches measure traffic by a clock that moves an hour's worth
	// (hourEvery) per hour published, so the rates are the readings' own
	// however long a slow machine takes to publish an hour.
	var clock atomic.Int64 // ns
	clock.Store(time.Now().UnixNano())
	routing := sion.RouteByRendezvous(sion.RendezvousConfig{
		Clock:       func() time.Time { return time.Unix(0, clock.Load()) },
		Classes:     map[string]sion.ClassLevels{"PollutantReading": {First: "district", Leaf: "station"}},
		Window:      window,
		Threshold:   1.5 * hourly * perSecond,
		BypassLevel: 3, // a subscription names a station: the class to take off a rendezvous switch is a station's
	})
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "beijing-s3", Ontology: o, Routing: routing})
	if err != nil {
		return res, err
	}
	tr, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		return res, err
	}
	net := &network{}
	defer net.close()
	names := make([]string, cfg.n)
	byName := map[string]*sion.Switch{}
	for i := range cfg.n {
		names[i] = fmt.Sprintf("sw%04d", i)
		via := ""
		if i > 0 {
			via = names[rng.IntN(i)] // any member will do
		}
		sw, err := net.start(ctx, tr, place, names[i], via)
		if err != nil {
			return res, err
		}
		byName[names[i]] = sw
	}
	live := func() []*sion.Switch {
		var out []*sion.Switch
		for _, name := range names {
			if sw := byName[name]; sw != nil {
				out = append(out, sw)
			}
		}
		return out
	}
	rvs, err := settle(ctx, live, byName)
	if err != nil {
		return res, err
	}
	// Overlay hops and state.
	res.hopsBound = int(math.Ceil(math.Log(float64(cfg.n))/math.Log(16))) + 2
	hops, routes := 0, 0
	for _, sw := range live() {
		for _, t := range pollutants {
			h := 0
			for at := sw; ; h++ {
				peer, _ := at.RendezvousNextHop(t)
				if peer == "" {
					break
				}
				at = byName[peer]
			}
			hops += h
			routes++
			res.hopsMax = max(res.hopsMax, h)
		}
		info, _ := sw.Rendezvous()
		res.stateMean += float64(info.Entries)
		res.linksMean += float64(info.Links)
		res.stateMax = max(res.stateMax, info.Entries)
	}
	res.hopsMean = float64(hops) / float64(routes)
	res.stateMean /= float64(cfg.n)
	res.linksMean /= float64(cfg.n)

	// Hosts for sessions: any switch but the rendezvous switches.
	isRV := map[string]bool{}
	for _, name := range rvs {
		isRV[name] = true
	}
	host := func() int {
		for {
			if i := rng.IntN(cfg.n); !isRV[names[i]] {
				return i
			}
		}
	}
	stations := beijing.Stations()
	pubs := map[string]*sion.Session{}
	hosts := map[int]bool{}
	for _, st := range stations {
		i := host()
		hosts[i] = true
		s, err := byName[names[i]].Open(ctx, sion.SessionConfig{Name: "station " + st.Name})
		if err != nil {
			return res, err
		}
		if err := s.Advertise(ctx, sion.Advertisement{Type: "PollutantReading", Attrs: []ontology.Attr{
			{Name: "station", Value: ontology.String(st.Name)},
			{Name: "district", Value: ontology.String(st.District)},
		}}); err != nil {
			return res, err
		}
		pubs[st.Name] = s
	}
	zipf := make([]float64, len(pollutants))
	sum := 0.0
	for k := range pollutants {
		zipf[k] = 1 / float64(k+1)
		sum += zipf[k]
	}
	pick := func() string {
		x := rng.Float64() * sum
		for k, w := range zipf {
			if x -= w; x < 0 {
				return pollutants[k]
			}
		}
		return pollutants[len(pollutants)-1]
	}
	// Control messages per subscription, against S1 by-filter
	// propagation over a tree of as many switches (measured below).
	ctlBefore := controlSent(live())
	var subs []*simSub
	for i := range cfg.subs {
		s := &simSub{typ: pick(), station: stations[rng.IntN(len(stations))].Name, host: host()}
		hosts[s.host] = true
		sess, err := byName[names[s.host]].Open(ctx, sion.SessionConfig{Name: fmt.Sprintf("operator %d", i)})
		if err != nil {
			return res, err
		}
		s.sub, err = sess.Subscribe(ctx, fmt.Sprintf(`{type ⊑ %s; station == %q}`, s.typ, s.station), sion.WithQueue(1<<16))
		if err != nil {
			return res, err
		}
		subs = append(subs, s)
	}
	res.ctlRendezvous = float64(controlSent(live())-ctlBefore) / float64(cfg.subs)
	if res.ctlS1, err = s1Control(ctx, cfg, o, subs); err != nil {
		return res, err
	}

	// The stream: hours of readings, paced; bypasses form as the hottest
	// rendezvous switch passes its threshold.
	byHour := map[time.Time][]beijing.Reading{}
	var hoursList []time.Time
	for _, r := range readings {
		if _, ok := byHour[r.Time]; !ok {
			hoursList = append(hoursList, r.Time)
		}
		byHour[r.Time] = append(byHour[r.Time], r)
	}
	slices.SortFunc(hoursList, func(a, b time.Time) int { return a.Compare(b) })
	publish := func(h int) (int, error) {
		n := 0
		for _, r := range byHour[hoursList[h%len(hoursList)]] {
			for k, t := range pollutants {
				if h%(k+1) != 0 {
					continue
				}
				v := []beijing.Number{r.PM25, r.PM10, r.NO2, r.O3, r.CO, r.SO2}[k]
				if !v.OK {
					continue
				}
				ev := &sion.Event{Type: t, Attrs: []ontology.Attr{
					{Name: "station", Value: ontology.String(r.Station)},
					{Name: "district", Value: ontology.String(district[r.Station])},
					{Name: "value", Value: ontology.Float(v.V)},
					{Name: "time", Value: ontology.Time(r.Time)},
				}}
				if err := pubs[r.Station].Publish(ctx, ev); err != nil {
					return n, err
				}
				for _, s := range subs {
					if s.typ == t && s.station == r.Station {
						s.got++ // expected, for now
					}
				}
				n++
			}
		}
		return n, nil
	}
	loads := func() (hot, mean float64) {
		for _, name := range rvs {
			info, _ := byName[name].Rendezvous()
			hot = max(hot, info.Load)
			mean += info.Load
		}
		return hot, mean / float64(len(rvs))
	}
	tick := time.NewTicker(cfg.hourEvery)
	defer tick.Stop()
	hour := 0
	for ; hour < cfg.stream; hour++ {
		<-tick.C
		if _, err := publish(hour); err != nil {
			return res, err
		}
		clock.Add(int64(cfg.hourEvery))
		if hour == int(window/cfg.hourEvery) { // a full window of traffic, before any bypass can have formed
			hot, mean := loads()
			res.hotBefore = hot / mean
		}
	}
	hot, mean := loads()
	res.hotAfter = hot / mean
	for _, name := range rvs {
		info, _ := byName[name].Rendezvous()
		for _, b := range info.Bypasses {
			if b.Active {
				res.bypassed = append(res.bypassed, b.Class)
			}
		}
	}
	slices.Sort(res.bypassed)
	expect := func() (delivered, expected int, err error) {
		for _, s := range subs {
			if s.sub == nil {
				continue
			}
			for got := 0; got < s.got; got++ {
				select {
				case <-s.sub.C():
				case <-time.After(10 * time.Second):
					return delivered, expected + s.got, fmt.Errorf("operator of %s %s: %d of %d events after 10 s", s.station, s.typ, got, s.got)
				}
				delivered++
			}
			expected += s.got
			s.got = 0
		}
		return delivered, expected, nil
	}
	if res.delivered, res.expected, err = expect(); err != nil {
		return res, err
	}

	// Kill a share of the switches, the busiest rendezvous switch among
	// them, while the stream goes on; once the overlay has repaired, every
	// event is delivered again.
	res.oldRV = rvs[0]
	victims := []string{rvs[0]}
	for len(victims) < int(cfg.kill*float64(cfg.n)) {
		i := rng.IntN(cfg.n)
		if !hosts[i] && !slices.Contains(victims, names[i]) {
			victims = append(victims, names[i])
		}
	}
	var wg sync.WaitGroup
	for _, v := range victims {
		sw := byName[v]
		byName[v] = nil
		wg.Go(func() { net.kill(sw) })
	}
	for range int(window / cfg.hourEvery) { // mid-stream: these may be lost while the overlay repairs
		<-tick.C
		if _, err := publish(hour); err != nil {
			return res, err
		}
		hour++
	}
	wg.Wait()
	res.killed = len(victims)
	for _, s := range subs { // what was published during the repair does not count
		for drained := false; !drained; {
			select {
			case <-s.sub.C():
			default:
				drained = true
			}
		}
		s.got = 0
	}
	rvs, err = settle(ctx, live, byName)
	if err != nil {
		return res, err
	}
	res.newRV = rvs[0]
	for range int(window / cfg.hourEvery) {
		<-tick.C
		if _, err := publish(hour); err != nil {
			return res, err
		}
		hour++
	}
	res.deliveredAfter, res.expAft, err = expect()
	return res, err
}

// settle waits until every live switch routes each pollutant's key to one
// and the same rendezvous switch and the switches' tables have stopped
// changing, and returns the rendezvous switches by pollutant rank.
func settle(ctx context.Context, live func() []*sion.Switch, byName map[string]*sion.Switch) ([]string, error) {
	var last string
	stable := 0
	deadline := time.Now().Add(60 * time.Second)
	for {
		rvs, ok := rendezvousSwitches(live(), byName)
		state := fmt.Sprint(rvs)
		for _, sw := range live() {
			info, _ := sw.Rendezvous()
			state += fmt.Sprint(info.Entries, info.Links, info.Advertisements, info.Requests)
		}
		if ok && state == last {
			if stable++; stable >= 5 {
				return rvs, nil
			}
		} else {
			stable = 0
		}
		last = state
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the overlay did not settle within 60 s")
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// rendezvousSwitches follows each pollutant's route from every live
// switch and reports the rendezvous switch of each, and whether all
// routes of a pollutant end at the same live switch.
func rendezvousSwitches(sws []*sion.Switch, byName map[string]*sion.Switch) ([]string, bool) {
	out := make([]string, len(pollutants))
	for k, t := range pollutants {
		for _, sw := range sws {
			at := sw
			for h := 0; ; h++ {
				peer, ok := at.RendezvousNextHop(t)
				if !ok || h > 64 {
					return out, false
				}
				if peer == "" {
					break
				}
				if at = byName[peer]; at == nil {
					return out, false
				}
			}
			if out[k] == "" {
				out[k] = at.Name()
			} else if out[k] != at.Name() {
				return out, false
			}
		}
	}
	return out, true
}

// controlSent sums the control messages the switches' links have sent.
func controlSent(sws []*sion.Switch) uint64 {
	var n uint64
	for _, sw := range sws {
		for _, l := range sw.Links() {
			n += l.ControlSent
		}
	}
	return n
}

// s1Control makes the same subscriptions on as many switches in a place
// routed by S1's whole-filter propagation, linked as a random tree, and
// returns the control messages each cost.
func s1Control(ctx context.Context, cfg simConfig, o *ontology.Ontology, subs []*simSub) (float64, error) {
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "beijing-s1", Ontology: o})
	if err != nil {
		return 0, err
	}
	tr, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(cfg.seed, 1))
	var sws []*sion.Switch
	var served []chan error
	defer func() {
		for i, sw := range sws {
			sw.Close()
			<-served[i]
		}
	}()
	for i := range cfg.n {
		sw, err := sion.NewSwitch(sion.SwitchConfig{Name: fmt.Sprintf("s1-%04d", i), Place: place})
		if err != nil {
			return 0, err
		}
		l, err := tr.Listen(sw.Name())
		if err != nil {
			return 0, err
		}
		done := make(chan error, 1)
		go func() { done <- sw.Serve(context.Background(), l) }()
		sws, served = append(sws, sw), append(served, done)
		if i > 0 {
			if _, err := sw.Link(ctx, tr, sws[rng.IntN(i)].Name(), sion.LinkConfig{ProbeHops: -1}); err != nil {
				return 0, err
			}
		}
	}
	before := controlSent(sws)
	for i, s := range subs {
		sess, err := sws[s.host].Open(ctx, sion.SessionConfig{Name: fmt.Sprintf("operator %d", i)})
		if err != nil {
			return 0, err
		}
		if _, err := sess.Subscribe(ctx, fmt.Sprintf(`{type ⊑ %s; station == %q}`, s.typ, s.station)); err != nil {
			return 0, err
		}
	}
	return float64(controlSent(sws)-before) / float64(len(subs)), nil
}

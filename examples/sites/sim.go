package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/examples/internal/usgs"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// The simulation: many edge sites and a cloud site under one site
// manager, in one process over transport/mem, publishing the USGS week
// (examples/internal/usgs) at the sites where it was recorded.
//
// Sites from network codes. Each feature of the feed names the seismic
// network that recorded it (properties.net: ak, av, ci, hv, nc, us, …; 14
// codes in the week). The codes are sorted and dealt round-robin to the
// sites: slot j of max(sites, codes) slots gives site j mod sites the code
// j mod codes. With 50 sites and 14 codes, site s publishes network
// codes[s mod 14], and each code has 3 or 4 sites; with fewer sites than
// codes, a site publishes several networks. A code with several sites
// splits its features among them by an FNV-1a hash of the feature's ID,
// so that every site publishes, and each publishes the same events every
// run. At each site, one publisher session per proxy publishes the
// site's events, round-robin, in the feed's order.
//
// Subscribers. The cloud site (one switch, a few proxies, no publisher)
// holds quakewatch's six subscribers and four more — a magnitude range,
// one network (a payload path: json(properties.net)), two networks and a
// depth, everything — spread over its proxies. A few edge sites hold two
// subscribers each: their own network's earthquakes, and strong ones from
// anywhere. All subscribe before the first publish, so every event they
// match must reach them; the site manager holds the first publish of an
// event type at a site until the proxies whose subscriptions need it have
// placed them there.
//
// The oracle: each subscriber's filter compiled with filter.Compile — the
// type test by the ontology (IsA), the predicates by Filter.Eval — over
// every event published; what the subscribers received is compared with
// it by each event's content (a hash of its payload: a switch gives every
// event published at it an ID of its own).

// simConfig configures a simulation.
type simConfig struct {
	sites, switches, proxies int // edge sites, and switches and proxies per edge site
	cloudProxies             int
	system                   systemConfig
}

// simResult is what one run of the simulation measured.
type simResult struct {
	codes                  []string // the network codes, sorted
	published, refused     int
	subscribers, cloudSubs int
	interSite              uint64 // ProxyStats.InterSiteSubscribes, summed
	// The publish spread (S4: the representative proxy spreads a site's
	// publishes so that the counts per switch approach uniformity). Per
	// site, for each proxy that spread publishes over the site's switches,
	// max − min of its counts per switch (ProxyStats.Spread); the worst.
	worstSpread uint64
	worstSite   string
	// What the switches took in (their EventsIn): per site, max − min;
	// the worst. It equals the above when one proxy spread a site's
	// publishes, but not when several did — the representative's forward
	// failed, or the site manager replaced it when it had not heard from
	// it for its Timeout, and each proxy spread on its own counts
	// (spreaders: sites where more than one proxy spread) — and it counts
	// an event twice when a spread attempt was not answered in time, was
	// taken all the same, and went on to the next switch (failedOver:
	// ProxyStats.SpreadFailures, summed).
	worstIntake     uint64
	worstIntakeSite string
	spreaders       int // sites whose publishes more than one proxy spread
	failedOver      uint64
	switchesIn      uint64 // publishes the edge switches took in
	// held: events the proxies held until the subscriptions that need
	// their type were placed (site.ProxyStats.Held), summed; unsettled:
	// those that may have missed a subscription (ProxyStats.Unsettled).
	held, unsettled        uint64
	matched, delivered     int
	duplicates, unexpected int
	perSubscriber          []subResult
	refusedErr             error
}

// subResult is what one subscriber received.
type subResult struct {
	name, site string
	delivery
}

// simSubscriber is one subscriber of the simulation.
type simSubscriber struct {
	name, filter string
	site, proxy  string // where it subscribes
	f            *filter.Filter
	typ          *ontology.EventType // nil for "*"
}

// quake is one feature of the feed, read as an event, with its network
// code, a hash of its ID, and the site that publishes it.
type quake struct {
	ev   *sion.Event
	net  string
	hash uint32
	site int
}

// feed reads the week's features and deals them to n sites by network
// code (see above); it returns the quakes in the feed's order and the
// codes, sorted.
func feed(o *ontology.Ontology, n int) ([]quake, []string, error) {
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "usgs", Ontology: o})
	if err != nil {
		return nil, nil, err
	}
	reader, err := place.NewJSONReader(usgs.Fields)
	if err != nil {
		return nil, nil, err
	}
	var doc struct {
		Features []json.RawMessage `json:"features"`
	}
	if err := json.Unmarshal(usgs.Week, &doc); err != nil {
		return nil, nil, err
	}
	var quakes []quake
	var errs []error
	for i, raw := range doc.Features {
		var f struct {
			ID         string `json:"id"`
			Properties struct {
				Net string `json:"net"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			errs = append(errs, fmt.Errorf("feature %d: %w", i, err))
			continue
		}
		ev, err := reader.Read(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("feature %d (%s): %w", i, f.ID, err))
			continue
		}
		h := fnv.New32a()
		h.Write([]byte(f.ID))
		quakes = append(quakes, quake{ev: ev, net: f.Properties.Net, hash: h.Sum32()})
	}
	var codes []string
	for _, q := range quakes {
		codes = append(codes, q.net)
	}
	slices.Sort(codes)
	codes = slices.Compact(codes)
	sitesOf := map[string][]int{}
	for j := range max(n, len(codes)) {
		c := codes[j%len(codes)]
		sitesOf[c] = append(sitesOf[c], j%n)
	}
	for i := range quakes {
		ss := sitesOf[quakes[i].net]
		quakes[i].site = ss[quakes[i].hash%uint32(len(ss))]
	}
	return quakes, codes, errors.Join(errs...)
}

// codesOf returns the network codes site i publishes.
func codesOf(codes []string, n, i int) []string {
	var out []string
	for j := range max(n, len(codes)) {
		if j%n == i {
			out = append(out, codes[j%len(codes)])
		}
	}
	return out
}

// cloudFilters are the cloud site's subscribers beyond quakewatch's.
var cloudFilters = []usgs.Subscriber{
	{Name: "moderate", Filter: `{type ⊑ earthquake; mag in [3, 4.5)}`},
	{Name: "hawaii", Filter: `{type ⊑ hazard; json(properties.net) == "hv"}`},
	{Name: "california-shallow", Filter: `{type ⊑ earthquake; json(properties.net) in {"ci", "nc"}; depth < 2}`},
	{Name: "everything", Filter: `{type ⊑ hazard}`},
}

// siteID and the addresses of the simulation's sites.
func siteID(i int) string               { return fmt.Sprintf("site%02d", i) }
func switchAddr(s string, k int) string { return fmt.Sprintf("%s/switch%d", s, k) }
func proxyAddr(s string, k int) string  { return fmt.Sprintf("%s/proxy%d", s, k) }

const cloudSite = "cloud"

// simulate runs the simulation once.
func simulate(ctx context.Context, cfg simConfig) (simResult, error) {
	var res simResult
	o, err := ontology.LoadJSON(bytes.NewReader(usgs.Hazards), "hazards.json")
	if err != nil {
		return res, err
	}
	quakes, codes, err := feed(o, cfg.sites)
	if err != nil {
		return res, err
	}
	res.codes = codes

	// The sites: the edge sites, then the cloud.
	var specs []siteSpec
	for i := range cfg.sites {
		sp := siteSpec{id: siteID(i)}
		for k := range cfg.switches {
			sp.switches = append(sp.switches, switchAddr(sp.id, k))
		}
		for k := range cfg.proxies {
			sp.proxies = append(sp.proxies, proxyAddr(sp.id, k))
		}
		specs = append(specs, sp)
	}
	cloud := siteSpec{id: cloudSite, switches: []string{switchAddr(cloudSite, 0)}}
	for k := range cfg.cloudProxies {
		cloud.proxies = append(cloud.proxies, proxyAddr(cloudSite, k))
	}
	specs = append(specs, cloud)
	cfg.system.operatorRep = true // each site's first proxy, as the operator says
	// A site publishes a few hundred quakes at most: each subscription a
	// proxy holds at a switch or a representative proxy needs a queue of
	// far fewer than site.DefaultQueue events, whose memory is taken up
	// front — a few thousand such subscriptions are held in the run
	// without representative proxies.
	cfg.system.queue = 512
	s, err := startSystem(ctx, o, specs, cfg.system)
	if s != nil {
		defer s.close()
	}
	if err != nil {
		return res, err
	}

	// The subscribers.
	var subs []*simSubscriber
	for i, u := range slices.Concat(usgs.Subscribers, cloudFilters) {
		subs = append(subs, &simSubscriber{name: u.Name, filter: u.Filter, site: cloudSite, proxy: cloud.proxies[i%len(cloud.proxies)]})
	}
	res.cloudSubs = len(subs)
	for _, i := range edgeSubscriberSites(cfg.sites) {
		id := siteID(i)
		code := codesOf(codes, cfg.sites, i)[0]
		subs = append(subs,
			&simSubscriber{name: id + "-own-network", filter: fmt.Sprintf(`{type ⊑ earthquake; json(properties.net) == %q; mag >= 1}`, code),
				site: id, proxy: proxyAddr(id, 1%cfg.proxies)},
			&simSubscriber{name: id + "-strong", filter: `{type ⊑ seismic; mag >= 4}`,
				site: id, proxy: proxyAddr(id, 2%cfg.proxies)})
	}
	res.subscribers = len(subs)
	inboxes := make([]*inbox, len(subs))
	for i, sub := range subs {
		if sub.f, err = filter.Compile(sub.filter); err != nil {
			return res, fmt.Errorf("subscriber %s: %w", sub.name, err)
		}
		if t := sub.f.Type(); t != filter.AnyType {
			et, ok := o.Lookup(t)
			if !ok {
				return res, fmt.Errorf("subscriber %s: unknown type %q", sub.name, t)
			}
			sub.typ = et
		}
		sess, err := s.open(ctx, sub.proxy, "subscriber "+sub.name)
		if err != nil {
			return res, err
		}
		inboxes[i] = newInbox(quakeKey)
		if _, err := sess.Subscribe(ctx, sub.filter, sion.WithQueue(len(quakes)), sion.WithHandler(inboxes[i].handler)); err != nil {
			return res, fmt.Errorf("subscriber %s: %w", sub.name, err)
		}
	}

	// The publishers: one session per proxy of each edge site; each
	// publishes its share of the site's quakes, all at once.
	type publisher struct {
		sess   *sion.Session
		quakes []*sion.Event
	}
	var pubs []*publisher
	bySite := make([][]*publisher, cfg.sites)
	for i := range cfg.sites {
		for k := range cfg.proxies {
			addr := proxyAddr(siteID(i), k)
			sess, err := s.open(ctx, addr, "sensors "+addr)
			if err != nil {
				return res, err
			}
			p := &publisher{sess: sess}
			pubs = append(pubs, p)
			bySite[i] = append(bySite[i], p)
		}
	}
	next := make([]int, cfg.sites)
	for _, q := range quakes {
		p := bySite[q.site][next[q.site]%cfg.proxies]
		next[q.site]++
		p.quakes = append(p.quakes, q.ev)
	}
	var mu sync.Mutex
	var published []*sion.Event
	var wg sync.WaitGroup
	for _, p := range pubs {
		wg.Go(func() {
			for _, ev := range p.quakes {
				err := p.sess.Publish(ctx, ev)
				mu.Lock()
				if err != nil {
					res.refused++
					res.refusedErr = errors.Join(res.refusedErr, err)
				} else {
					published = append(published, ev)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.published = len(published)

	// The oracle, then what arrived.
	wants := make([]map[string]bool, len(subs))
	counts := make([]int, len(subs))
	for i, sub := range subs {
		wants[i] = map[string]bool{}
		for _, ev := range published {
			if sub.matches(o, ev) {
				wants[i][quakeKey(ev)] = true
			}
		}
		counts[i] = len(wants[i])
	}
	if err := settle(ctx, inboxes, counts, 5*time.Second, 60*time.Second); err != nil {
		return res, err
	}
	for i, sub := range subs {
		r := subResult{name: sub.name, site: sub.site, delivery: delivery{want: counts[i]}}
		r.delivered, r.duplicates, r.unexpected = inboxes[i].check(wants[i])
		res.perSubscriber = append(res.perSubscriber, r)
		res.matched += r.want
		res.delivered += r.delivered
		res.duplicates += r.duplicates
		res.unexpected += r.unexpected
	}

	// The counters.
	res.interSite = s.interSiteSubscribes()
	for _, p := range s.proxies {
		st := p.Stats()
		res.held += st.Held
		res.unsettled += st.Unsettled
	}
	for _, sp := range specs[:cfg.sites] {
		lo, hi := ^uint64(0), uint64(0)
		for _, addr := range sp.switches {
			n := s.eventsIn(addr)
			res.switchesIn += n
			lo, hi = min(lo, n), max(hi, n)
		}
		if d := hi - lo; d > res.worstIntake || res.worstIntakeSite == "" {
			res.worstIntake, res.worstIntakeSite = d, sp.id
		}
		spread, spreaders := uint64(0), 0
		for _, addr := range sp.proxies {
			st := s.proxies[addr].Stats()
			res.failedOver += st.SpreadFailures
			if len(st.Spread) == 0 {
				continue
			}
			spreaders++
			lo, hi := ^uint64(0), uint64(0)
			for _, sw := range sp.switches {
				n := st.Spread[sw]
				lo, hi = min(lo, n), max(hi, n)
			}
			spread = max(spread, hi-lo)
		}
		if spreaders > 1 {
			res.spreaders++
		}
		if spread > res.worstSpread || res.worstSite == "" {
			res.worstSpread, res.worstSite = spread, sp.id
		}
	}
	return res, nil
}

// quakeKey tells the quakes apart: a hash of the payload, the feature.
func quakeKey(ev *sion.Event) string {
	h := sha256.Sum256(ev.Data)
	return string(h[:16])
}

// edgeSubscriberSites returns the edge sites that hold subscribers: the
// second, the middle and the last.
func edgeSubscriberSites(n int) []int {
	out := []int{1 % n, n / 2, n - 1}
	slices.Sort(out)
	return slices.Compact(out)
}

// matches is the oracle: whether the subscriber's filter matches ev.
func (sub *simSubscriber) matches(o *ontology.Ontology, ev *sion.Event) bool {
	if sub.typ != nil {
		et, ok := o.Lookup(ev.Type)
		if !ok || !o.IsA(et.ID, sub.typ.ID) {
			return false
		}
	}
	ok, _ := sub.f.Eval(ev)
	return ok
}

// simulation runs the simulation with representative proxies and
// without, and returns the lines to print.
func simulation(ctx context.Context, cfg simConfig) ([]string, simResult, simResult, error) {
	rep, err := simulate(ctx, cfg)
	if err != nil {
		return nil, rep, simResult{}, fmt.Errorf("simulation, with representative proxies: %w", err)
	}
	cfg.system.direct = true
	dir, err := simulate(ctx, cfg)
	if err != nil {
		return nil, rep, dir, fmt.Errorf("simulation, without representative proxies: %w", err)
	}
	lines := []string{
		fmt.Sprintf("simulation: %d sites, %d switches, %d proxies, %d events published, %d subscribers",
			cfg.sites, cfg.sites*cfg.switches, cfg.sites*cfg.proxies, rep.published, rep.subscribers),
		fmt.Sprintf("sites from network codes: %d codes (%s) dealt round-robin over the %d sites; a cloud site with %d subscribers on %d proxies, %d subscribers at edge sites",
			len(rep.codes), strings.Join(rep.codes, " "), cfg.sites, rep.cloudSubs, cfg.cloudProxies, rep.subscribers-rep.cloudSubs),
		fmt.Sprintf("inter-site subscribe messages: %d (without representative proxies: %d)", rep.interSite, dir.interSite),
	}
	worst, site := rep.worstSpread, rep.worstSite
	if dir.worstSpread > worst {
		worst, site = dir.worstSpread, dir.worstSite
	}
	if worst <= 1 {
		lines = append(lines, fmt.Sprintf("publish spread per site: max - min <= 1 at every site (worst site: %d)", worst))
	} else {
		lines = append(lines, fmt.Sprintf("publish spread per site: max - min = %d at %s", worst, site))
	}
	intake, intakeSite := rep.worstIntake, rep.worstIntakeSite
	if dir.worstIntake > intake {
		intake, intakeSite = dir.worstIntake, dir.worstIntakeSite
	}
	lines = append(lines, fmt.Sprintf("switches' intake per site: max - min = %d at worst (%s); sites spread by more than one proxy: %d; spread attempts failed over: %d",
		intake, intakeSite, rep.spreaders+dir.spreaders, rep.failedOver+dir.failedOver))
	for _, x := range []struct {
		r    simResult
		with string
	}{{rep, "with"}, {dir, "without"}} {
		lines = append(lines, fmt.Sprintf("delivered %d of %d matched events, %d duplicates, %d unexpected (%s representative proxies)",
			x.r.delivered, x.r.matched, x.r.duplicates, x.r.unexpected, x.with))
		lines = append(lines, fmt.Sprintf("events held until their subscriptions were placed: %d, unsettled: %d (%s representative proxies)", x.r.held, x.r.unsettled, x.with))
		if x.r.refused > 0 {
			lines = append(lines, fmt.Sprintf("%d events refused (%s representative proxies): %v", x.r.refused, x.with, x.r.refusedErr))
		}
		for _, sr := range x.r.perSubscriber {
			if !sr.exact() {
				lines = append(lines, fmt.Sprintf("  subscriber %s at %s (%s representative proxies): %v", sr.name, sr.site, x.with, sr.delivery))
			}
		}
	}
	return lines, rep, dir, nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport/mem"
)

// The simulation of one mode: the workload's tree of switches in one
// process over transport/mem, then three phases, each measured on the
// switches' link counters (Stats().Links, summed over every switch):
//
//  1. Advertise: each producer opens its session and advertises its
//     types.
//  2. Subscribe: the consumers open their sessions and subscribe, one
//     subscription after another; each Subscribe returns once every
//     switch within its TTL has acknowledged the filter (S2 contract), so
//     the control messages it caused have all been sent by then. Control
//     messages per subscription = the control messages sent in this
//     phase / the subscriptions.
//  3. Publish: the producers publish their events, one after another in
//     the feed's order; then every producer's switch Flushes (markers
//     follow the events down every link, so what was forwarded has been
//     delivered). Event messages per event = the event messages sent in
//     this phase / the events.
//
// Before each phase's counters are read the network must be quiet:
// nothing sent for quietFor (what a mode does in the background, an
// agent say, counts in the phase that caused it). Then every
// subscription's queue is drained and compared, event by event, with the
// reference (workload.want).

// quietFor is how long the link counters must stay still before a
// phase's counters are read.
const quietFor = 50 * time.Millisecond

// network is one mode's switches, linked as the workload's tree, each
// serving on its own listener of one transport/mem network.
type network struct {
	tr       *mem.Network
	place    *sion.EventPlace
	switches []*sion.Switch
	served   []chan error
}

// linkConfig turns off the periodic probes for alternative parents, so
// that the control messages counted are those of the phases alone.
var linkConfig = sion.LinkConfig{ProbeHops: -1}

// startNetwork starts the switches of w in place and links each to its
// parent. The caller closes the network, also when it fails.
func startNetwork(ctx context.Context, w *workload, place *sion.EventPlace) (*network, error) {
	tr, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		return nil, err
	}
	net := &network{tr: tr, place: place}
	for i := range w.n {
		sw, err := sion.NewSwitch(sion.SwitchConfig{Name: switchName(i), Place: place})
		if err != nil {
			return net, err
		}
		l, err := tr.Listen(sw.Name())
		if err != nil {
			sw.Close()
			return net, err
		}
		served := make(chan error, 1)
		go func() { served <- sw.Serve(context.Background(), l) }()
		net.switches = append(net.switches, sw)
		net.served = append(net.served, served)
		if i > 0 {
			if _, err := sw.Link(ctx, tr, switchName(w.parent[i]), linkConfig); err != nil {
				return net, fmt.Errorf("linking %s to %s: %w", sw.Name(), switchName(w.parent[i]), err)
			}
		}
	}
	return net, nil
}

// switchName names switch i.
func switchName(i int) string { return fmt.Sprintf("sw%04d", i) }

// close closes every switch and waits for them.
func (net *network) close() error {
	var errs []error
	for i, sw := range net.switches {
		errs = append(errs, sw.Close(), <-net.served[i])
	}
	return errors.Join(errs...)
}

// totals sums the link counters of every switch. ControlSent includes
// the messages on a managed place's agent connections (S2: reports,
// Deploy, Detected, Verdict), which are not links: each is counted once,
// at the switch that sent or received it.
func (net *network) totals() sion.LinkTotals {
	var t sion.LinkTotals
	for _, sw := range net.switches {
		st := sw.Stats()
		l := st.Links
		t.ControlSent += st.AgentSent + st.AgentReceived
		t.EventsSent += l.EventsSent
		t.EventsReceived += l.EventsReceived
		t.ControlSent += l.ControlSent
		t.ControlReceived += l.ControlReceived
		t.Dropped += l.Dropped
		t.Expired += l.Expired
		t.Duplicates += l.Duplicates
		t.Refused += l.Refused
	}
	return t
}

// quiet returns the link counters once nothing has been sent or received
// over any link for quietFor, or an error when that takes longer than a
// minute or ctx ends.
func (net *network) quiet(ctx context.Context) (sion.LinkTotals, error) {
	deadline := time.Now().Add(time.Minute)
	last := net.totals()
	since := time.Now()
	for {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(quietFor / 5):
		}
		now := net.totals()
		if now != last {
			last, since = now, time.Now()
			if time.Now().After(deadline) {
				return last, errors.New("agent: the links did not fall quiet within a minute")
			}
			continue
		}
		if time.Since(since) >= quietFor {
			return last, nil
		}
	}
}

// modeResult is what one mode measured.
type modeResult struct {
	mode                string
	goal                bool // the mode's goal (see mode)
	subs, events        int
	adControl           uint64 // control messages of the advertise phase
	subControl          uint64 // … of the subscribe phase
	publishControl      uint64 // … of the publish phase, the Flush's markers excluded
	eventMessages       uint64 // event messages of the publish phase
	deliveries, wanted  int    // received by the subscriptions; the reference's count
	missing, unexpected int    // events the reference wants that did not arrive; arrivals it does not want
	duplicates          int    // events a subscription received more than once
	dropped             uint64 // events lost at links and at subscriptions' queues
	elapsed             time.Duration
}

// controlPerSub is control messages per subscription.
func (r modeResult) controlPerSub() float64 { return float64(r.subControl) / float64(r.subs) }

// eventsPerEvent is event messages per event.
func (r modeResult) eventsPerEvent() float64 { return float64(r.eventMessages) / float64(r.events) }

// exact reports whether every subscription received exactly the events
// the reference says, once each, and nothing was dropped.
func (r modeResult) exact() bool {
	return r.missing == 0 && r.unexpected == 0 && r.duplicates == 0 && r.dropped == 0 && r.deliveries == r.wanted
}

// runMode runs workload w in mode m.
func runMode(ctx context.Context, w *workload, m mode) (res modeResult, err error) {
	start := time.Now()
	res = modeResult{mode: m.name, goal: m.goal, subs: len(w.subs), events: len(w.events), wanted: w.wanted}
	cfg := sion.PlaceConfig{Name: "usgs-" + m.name, Ontology: w.o, TTL: w.ttl}
	m.configure(&cfg)
	place, err := sion.NewEventPlace(cfg)
	if err != nil {
		return res, err
	}
	net, err := startNetwork(ctx, w, place)
	if net != nil {
		defer func() { err = errors.Join(err, net.close()) }()
	}
	if err != nil {
		return res, err
	}
	if m.start != nil {
		stop, serr := m.start(ctx, net)
		if serr != nil {
			return res, fmt.Errorf("starting mode %s: %w", m.name, serr)
		}
		defer func() { err = errors.Join(err, stop()) }()
	}

	// 1. Advertise.
	t0, err := net.quiet(ctx)
	if err != nil {
		return res, err
	}
	pubs := make([]*sion.Session, len(w.producers))
	for p, pr := range w.producers {
		if pubs[p], err = net.switches[pr.at].Open(ctx, sion.SessionConfig{Name: fmt.Sprintf("producer %d", p)}); err != nil {
			return res, err
		}
		ads := make([]sion.Advertisement, len(pr.types))
		for k, t := range pr.types {
			ads[k] = sion.Advertisement{Type: t}
		}
		if err := pubs[p].Advertise(ctx, ads...); err != nil {
			return res, fmt.Errorf("producer %d: %w", p, err)
		}
	}

	// 2. Subscribe.
	t1, err := net.quiet(ctx)
	if err != nil {
		return res, err
	}
	res.adControl = t1.ControlSent - t0.ControlSent
	subs := make([]*sion.Subscription, len(w.subs))
	for c, con := range w.consumers {
		sess, err := net.switches[con.at].Open(ctx, sion.SessionConfig{Name: fmt.Sprintf("consumer %d", c)})
		if err != nil {
			return res, err
		}
		for _, j := range con.subs {
			queue := min(len(w.want[j])+64, sion.MaxQueue) // room for every event it wants, and some it may not
			if subs[j], err = sess.Subscribe(ctx, w.subs[j].src, sion.WithQueue(queue)); err != nil {
				return res, fmt.Errorf("consumer %d: %s: %w", c, w.subs[j].src, err)
			}
		}
	}

	// 3. Publish.
	t2, err := net.quiet(ctx)
	if err != nil {
		return res, err
	}
	res.subControl = t2.ControlSent - t1.ControlSent
	for i, ev := range w.events {
		if err := pubs[w.from[i]].Publish(ctx, ev); err != nil {
			return res, fmt.Errorf("event %d: %w", i, err)
		}
	}
	t3, err := net.quiet(ctx)
	if err != nil {
		return res, err
	}
	res.publishControl = t3.ControlSent - t2.ControlSent
	for _, pr := range w.producers {
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := net.switches[pr.at].Flush(fctx)
		cancel()
		if err != nil {
			return res, fmt.Errorf("flushing %s: %w", switchName(pr.at), err)
		}
	}
	t4 := net.totals()
	res.eventMessages = t4.EventsSent - t2.EventsSent
	res.dropped = t4.Dropped - t2.Dropped

	// What arrived, against the reference.
	index := make(map[string]int, len(w.events)) // by payload: the feature
	for i, ev := range w.events {
		index[string(ev.Data)] = i
	}
	for j, sub := range subs {
		want := make(map[int]bool, len(w.want[j]))
		for _, i := range w.want[j] {
			want[i] = true
		}
		got := map[int]bool{}
		for drained := false; !drained; {
			select {
			case d := <-sub.C():
				res.deliveries++
				i, ok := index[string(d.Event.Data)]
				switch {
				case !ok || !want[i]:
					res.unexpected++
				case got[i]:
					res.duplicates++
				}
				got[i] = true
			default:
				drained = true
			}
		}
		for i := range want {
			if !got[i] {
				res.missing++
			}
		}
		res.dropped += sub.Stats().Dropped
	}
	res.elapsed = time.Since(start)
	return res, nil
}

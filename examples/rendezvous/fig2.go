package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// The source's figures (S3): Fig. 2's network — publishers P11 on B21 and
// P12 on B22, whose events merge at B23, cross the rendezvous switch R31
// and branch at B24 toward B25 and B26, where the subscribers S42 and S41
// are — and Fig. 13's traffic at R31: 245 events per second of the type
// TemperatureMoreThan20, of which Place = YokohamaStation 160
// (GlobalPosition ID 0001: 100, 0002: 60), TokyoStation 50 (0003),
// KawasakiStation 35 (0004).

const figType = "TemperatureMoreThan20"

// figEvent is one event of Fig. 13's traffic.
type figEvent struct {
	place, id string
	lat, lon  float64
}

// fig13 returns one second of Fig. 13's traffic, interleaved so that every
// prefix keeps the figure's proportions.
func fig13() []figEvent {
	groups := []struct {
		ev figEvent
		n  int
	}{
		{figEvent{"YokohamaStation", "0001", 35.4658, 139.6223}, 100},
		{figEvent{"YokohamaStation", "0002", 35.4662, 139.6229}, 60},
		{figEvent{"TokyoStation", "0003", 35.6812, 139.7671}, 50},
		{figEvent{"KawasakiStation", "0004", 35.5313, 139.6969}, 35},
	}
	total := 0
	for _, g := range groups {
		total += g.n
	}
	sent := make([]int, len(groups))
	out := make([]figEvent, 0, total)
	for i := range total {
		best, deficit := 0, -1.0
		for k, g := range groups {
			if d := float64(g.n*(i+1))/float64(total) - float64(sent[k]); sent[k] < g.n && d > deficit {
				best, deficit = k, d
			}
		}
		sent[best]++
		out = append(out, groups[best].ev)
	}
	return out
}

// event returns the event as S3's Fig. 8 writes it — XML with the place,
// the GlobalPosition (ID, latitude, longitude) and the temperature — with
// the place and the position's ID as typed attributes too: the levels of
// its classes.
func (f figEvent) event() *sion.Event {
	xml := fmt.Sprintf(`<Event><EventType Name="%s"/><Place>%s</Place><GlobalPosition ID="%s"><Latitude>%g</Latitude><Longitude>%g</Longitude></GlobalPosition><Notification>21</Notification></Event>`,
		figType, f.place, f.id, f.lat, f.lon)
	return &sion.Event{Type: figType, ContentType: "application/xml", Data: []byte(xml), Attrs: []ontology.Attr{
		{Name: "Place", Value: ontology.String(f.place)},
		{Name: "GlobalPositionID", Value: ontology.String(f.id)},
	}}
}

// figResult is what one run of the figures measured at R31, in events per
// second, and the class it bypassed.
type figResult struct {
	before, after float64
	class         string
}

// runFig2 builds Fig. 2's network in one process (transport/mem), sends
// one second of Fig. 13's traffic, then a second more every 200 ms until
// R31, over its threshold of 300 events per second, has bypassed its
// hottest class at level, and, once its traffic window has slid past
// that, one second more. The seconds are those of a clock the run
// advances itself (RendezvousConfig.Clock), so the figures are the
// source's however long the machine takes to publish a second's events.
func runFig2(ctx context.Context, level int) (figResult, error) {
	var clock atomic.Int64 // ns
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	o, err := ontology.New([]ontology.TypeDef{{Name: figType, Attributes: []ontology.Attribute{
		{Name: "Place", Kind: ontology.KindString},
		{Name: "GlobalPositionID", Kind: ontology.KindString},
	}}})
	if err != nil {
		return figResult{}, err
	}
	// The figure's overlay: R31's ID is the type's key, B23 and B24 next to
	// it on either side, the others farther; each switch knows only its
	// neighbours in the figure.
	key := sion.OverlayKey(figType)
	near := func(d int64) [16]byte {
		k := key
		binary.BigEndian.PutUint64(k[8:], binary.BigEndian.Uint64(k[8:])+uint64(d))
		return k
	}
	routing := sion.RouteByRendezvous(sion.RendezvousConfig{
		Classes:     map[string]sion.ClassLevels{figType: {First: "Place", Leaf: "GlobalPositionID"}},
		Window:      time.Second,
		Threshold:   300,
		BypassLevel: level,
		IDs: map[string][16]byte{
			"R31": key, "B23": near(1), "B21": near(1000), "B22": near(2000),
			"B24": near(-1), "B25": near(-1000), "B26": near(-2000),
		},
		Neighbours: map[string][]string{
			"R31": {"B23", "B24"}, "B23": {"R31", "B21", "B22"}, "B21": {"B23"}, "B22": {"B23"},
			"B24": {"R31", "B25", "B26"}, "B25": {"B24"}, "B26": {"B24"},
		},
		Clock: now,
	})
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "fig2", Ontology: o, Routing: routing})
	if err != nil {
		return figResult{}, err
	}
	tr, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		return figResult{}, err
	}
	net := &network{}
	defer net.close()
	sw := map[string]*sion.Switch{}
	for _, j := range []struct{ name, via string }{
		{"R31", ""}, {"B23", "R31"}, {"B24", "R31"}, {"B21", "B23"}, {"B22", "B23"}, {"B25", "B24"}, {"B26", "B24"},
	} {
		s, err := net.start(ctx, tr, place, j.name, j.via)
		if err != nil {
			return figResult{}, err
		}
		sw[j.name] = s
	}
	var pubs []*sion.Session
	for _, p := range []struct{ name, at string }{{"P11", "B21"}, {"P12", "B22"}} {
		s, err := sw[p.at].Open(ctx, sion.SessionConfig{Name: p.name})
		if err != nil {
			return figResult{}, err
		}
		if err := s.Advertise(ctx, sion.Advertisement{Type: figType}); err != nil {
			return figResult{}, err
		}
		pubs = append(pubs, s)
	}
	// S3 Fig. 10's subscriptions are XPath over the event's XML.
	var subs []*sion.Subscription
	for _, s := range []struct{ name, at, filter string }{
		{"S41", "B26", `{type ⊑ TemperatureMoreThan20; xpath(/Event/Notification) >= 20}`},
		{"S42", "B25", `{type ⊑ TemperatureMoreThan20; xpath(/Event/Place = 'YokohamaStation')}`},
	} {
		sess, err := sw[s.at].Open(ctx, sion.SessionConfig{Name: s.name})
		if err != nil {
			return figResult{}, err
		}
		sub, err := sess.Subscribe(ctx, s.filter, sion.WithQueue(1<<14))
		if err != nil {
			return figResult{}, err
		}
		subs = append(subs, sub)
	}
	round := func() error {
		yokohama := 0
		for i, ev := range fig13() {
			if err := pubs[i%2].Publish(ctx, ev.event()); err != nil {
				return err
			}
			if ev.place == "YokohamaStation" {
				yokohama++
			}
		}
		for i, n := range []int{245, yokohama} {
			for range n {
				select {
				case <-subs[i].C():
				case <-time.After(10 * time.Second):
					return fmt.Errorf("a subscriber lacks events after 10 s")
				}
			}
		}
		return nil
	}
	rv := func() sion.RendezvousInfo { info, _ := sw["R31"].Rendezvous(); return info }
	var res figResult
	if err := round(); err != nil {
		return res, err
	}
	res.before = rv().Load
	// A second of the figure's traffic every 200 ms, within R31's
	// one-second window, until R31 starts a bypass (it looks every 100 ms
	// of real time); then wait for it.
	for deadline := time.Now().Add(20 * time.Second); len(rv().Bypasses) == 0; time.Sleep(200 * time.Millisecond) {
		if err := round(); err != nil {
			return res, err
		}
		clock.Add(int64(200 * time.Millisecond))
		if time.Now().After(deadline) {
			return res, fmt.Errorf("R31 did not start a bypass within 20 s")
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b := rv().Bypasses
		if len(b) != 1 {
			return res, fmt.Errorf("R31 bypasses %d classes, not one: %v", len(b), b)
		}
		if b[0].Active {
			res.class = b[0].Class
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("R31's bypass was not set up within 10 s")
		}
	}
	clock.Add(int64(time.Second)) // the window slides past that traffic
	if l := rv().Load; l != 0 {
		return res, fmt.Errorf("R31's traffic window did not slide: %g events per second", l)
	}
	if err := round(); err != nil {
		return res, err
	}
	res.after = rv().Load
	return res, nil
}

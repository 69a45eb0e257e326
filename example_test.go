package sion_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// musicPlace is the S1 example: BGM is-a music and is-a seasonal.
func musicPlace() *sion.EventPlace {
	ont, err := ontology.New([]ontology.TypeDef{
		{Name: "music", Attributes: []ontology.Attribute{
			{Name: "price", Kind: ontology.KindFloat, Unit: "USD"}, {Name: "title", Kind: ontology.KindString},
			{Name: "tier", Kind: ontology.KindInt},
		}},
		{Name: "seasonal"},
		{Name: "popular", Parents: []string{"music"}},
		{Name: "BGM", Parents: []string{"music", "seasonal"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "shop", Ontology: ont})
	if err != nil {
		log.Fatal(err)
	}
	return place
}

func price(p float64) []ontology.Attr {
	return []ontology.Attr{{Name: "price", Value: ontology.Float(p)}}
}

// A session subscribes to music priced from $20 to $40; a BGM event at $25
// reaches it through type inheritance, a popular one at $50 does not.
func Example() {
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "sw1", Place: musicPlace()})
	if err != nil {
		log.Fatal(err)
	}
	defer sw.Close()
	ctx := context.Background()

	listener, _ := sw.Open(ctx, sion.SessionConfig{Name: "listener"})
	sub, err := listener.Subscribe(ctx, `{type ⊑ music; price in [20, 40]}`)
	if err != nil {
		log.Fatal(err)
	}
	shop, _ := sw.Open(ctx, sion.SessionConfig{Name: "shop"})
	for _, ev := range []*sion.Event{
		{Type: "BGM", Attrs: price(25)},
		{Type: "popular", Attrs: price(50)},
	} {
		if err := shop.Publish(ctx, ev); err != nil {
			log.Fatal(err)
		}
	}
	d := <-sub.C()
	fmt.Println(d.Event.Type, d.Event.Attrs[0].Value, len(sub.C()))
	// Output: BGM 25.0 0
}

// A handler receives a subscription's events on a goroutine the session
// owns; Drain waits until it has seen them all.
func ExampleWithHandler() {
	sw, _ := sion.NewSwitch(sion.SwitchConfig{Name: "sw1", Place: musicPlace()})
	defer sw.Close()
	ctx := context.Background()
	s, _ := sw.Open(ctx, sion.SessionConfig{Name: "app"})
	_, err := s.Subscribe(ctx, `{type ⊑ seasonal}`, sion.WithHandler(func(d sion.Delivery) {
		fmt.Println("seasonal:", d.Event.Type)
	}))
	if err != nil {
		log.Fatal(err)
	}
	s.Publish(ctx, &sion.Event{Type: "BGM"})
	s.Publish(ctx, &sion.Event{Type: "popular"})
	s.Drain(ctx)
	// Output: seasonal: BGM
}

// One subscription with two filters, OR-ed: cheap music, or anything
// seasonal. A BGM event at $15 matches both and arrives once.
func ExampleSession_SubscribeFilters() {
	sw, _ := sion.NewSwitch(sion.SwitchConfig{Name: "sw1", Place: musicPlace()})
	defer sw.Close()
	ctx := context.Background()
	s, _ := sw.Open(ctx, sion.SessionConfig{Name: "app"})
	sub, err := s.SubscribeFilters(ctx, []*filter.Filter{
		filter.MustCompile(`{type ⊑ music; price < 20}`),
		filter.MustCompile(`{type ⊑ seasonal}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range []*sion.Event{
		{Type: "BGM", Attrs: price(15)},
		{Type: "popular", Attrs: price(30)},
		{Type: "popular", Attrs: price(10)},
		{Type: "seasonal"},
	} {
		s.Publish(ctx, ev)
	}
	for len(sub.C()) > 0 {
		d := <-sub.C()
		fmt.Println(d.Event.Type, len(d.Matched))
	}
	// Output:
	// BGM 1
	// popular 1
	// seasonal 1
}

// A look-in subscriber is away; its events wait in its session's spool
// until it pulls them (S1 look-in).
func ExampleSession_Pull() {
	sw, _ := sion.NewSwitch(sion.SwitchConfig{Name: "sw1", Place: musicPlace()})
	defer sw.Close()
	ctx := context.Background()
	away, _ := sw.Open(ctx, sion.SessionConfig{Name: "away", SpoolSize: 100})
	away.Subscribe(ctx, `{type ⊑ music; price < 30}`, sion.WithLookIn())
	shop, _ := sw.Open(ctx, sion.SessionConfig{Name: "shop"})
	for _, p := range []float64{10, 35, 20} {
		shop.Publish(ctx, &sion.Event{Type: "popular", Attrs: price(p)})
	}
	got, _ := away.Pull(ctx, 10)
	for _, d := range got {
		fmt.Println(d.Event.Attrs[0].Value)
	}
	// Output:
	// 10.0
	// 20.0
}

// An event may carry a patronage condition over the receivers' profiles:
// only sessions whose tier is at least 2 receive it (S1 patronage).
func ExampleEvent_patronage() {
	sw, _ := sion.NewSwitch(sion.SwitchConfig{Name: "sw1", Place: musicPlace()})
	defer sw.Close()
	ctx := context.Background()
	var subs []*sion.Subscription
	for tier := int64(1); tier <= 3; tier++ {
		s, _ := sw.Open(ctx, sion.SessionConfig{Name: fmt.Sprint("tier", tier), Profile: []ontology.Attr{{Name: "tier", Value: ontology.Int(tier)}}})
		sub, _ := s.Subscribe(ctx, `{type ⊑ music}`)
		subs = append(subs, sub)
	}
	cond := filter.MustCompile(`{tier >= 2}`)
	shop, _ := sw.Open(ctx, sion.SessionConfig{Name: "shop"})
	shop.Publish(ctx, &sion.Event{Type: "popular", Condition: cond})
	for i, sub := range subs {
		fmt.Printf("tier %d: %d\n", i+1, len(sub.C()))
	}
	// Output:
	// tier 1: 0
	// tier 2: 1
	// tier 3: 1
}

// A JSONReader reads events out of JSON documents with gjson paths declared
// once, with the kinds the ontology gives the attributes.
func ExampleEventPlace_NewJSONReader() {
	place := musicPlace()
	r, err := place.NewJSONReader(sion.JSONFields{
		TypePath: "kind",
		Attrs:    []sion.AttrPath{{Name: "price", Path: "offer.usd"}, {Name: "title", Path: "name"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	events, err := r.ReadList([]byte(`{"items": [{"kind": "BGM", "name": "Snow", "offer": {"usd": 25}}, {"kind": "jingle"}]}`), "items")
	for _, ev := range events {
		fmt.Println(ev.Type, ev.Attrs)
	}
	fmt.Fprintln(os.Stdout, err)
	// Output:
	// BGM [{price 25.0} {title "Snow"}]
	// element 1 of "items": sion: unknown event type "jingle" (read at "kind")
}

// A remote session: the switch serves sessions on a transport (here the
// in-process mem network; TCP crosses machines), and Dial returns a
// Session with the same API as a local one.
func ExampleDial() {
	sw, _ := sion.NewSwitch(sion.SwitchConfig{Name: "sw1", Place: musicPlace()})
	defer sw.Close()
	ctx := context.Background()
	network, _ := mem.NewNetwork(mem.Config{})
	l, _ := network.Listen("sw1")
	go sw.Serve(ctx, l) // Close stops it

	remote, err := sion.Dial(ctx, network, "sw1", sion.SessionConfig{Name: "far listener"})
	if err != nil {
		log.Fatal(err)
	}
	sub, _ := remote.Subscribe(ctx, `{type ⊑ music; price < 30}`)
	shop, _ := sw.Open(ctx, sion.SessionConfig{Name: "shop"})
	shop.Publish(ctx, &sion.Event{Type: "BGM", Attrs: price(25)})
	d, _ := sub.Next(ctx) // it arrives over the link
	fmt.Println(d.Event.Type, d.Event.Attrs[0].Value, d.Event.Control.Origin)

	err = remote.Publish(ctx, &sion.Event{Type: "jingle"})
	fmt.Println(errors.Is(err, sion.ErrUnknownEventType))
	remote.Close()
	// Output:
	// BGM 25.0 sw1
	// true
}

func ExampleReconnectPolicy() {
	sw, _ := sion.NewSwitch(sion.SwitchConfig{Name: "sw1", Place: musicPlace()})
	defer sw.Close()
	ctx := context.Background()
	network, _ := mem.NewNetwork(mem.Config{})
	serve := func() (stop func()) {
		l, _ := network.Listen("sw1")
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { sw.Serve(sctx, l); close(done) }()
		return func() { cancel(); <-done }
	}
	stop := serve()
	changes := make(chan sion.ConnectionEvent, 4)
	remote, err := sion.Dial(ctx, network, "sw1", sion.SessionConfig{Name: "far listener", Reconnect: sion.ReconnectPolicy{
		MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		OnChange: func(ev sion.ConnectionEvent) { changes <- ev },
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer remote.Close()
	sub, _ := remote.Subscribe(ctx, `{type ⊑ music}`)
	shop, _ := sw.Open(ctx, sion.SessionConfig{Name: "shop"})

	stop() // the switch stops serving: the connection fails, and the switch keeps the session
	ev := <-changes
	fmt.Println("connected:", ev.Connected)
	shop.Publish(ctx, &sion.Event{Type: "BGM", Attrs: price(25)}) // matched while it is away
	stop = serve()
	defer stop()
	ev = <-changes
	fmt.Println("connected:", ev.Connected, "resumed:", ev.Resumed, "lost:", ev.Lost)
	d, _ := sub.Next(ctx)
	fmt.Println(d.Event.Type, d.Event.Attrs[0].Value)
	// Output:
	// connected: false
	// connected: true resumed: true lost: 0
	// BGM 25.0
}

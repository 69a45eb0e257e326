package nats_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/nats"
	"github.com/sion-go/sion/ontology"
)

// A place federated with NATS: a plain NATS subscriber receives the
// place's alarms by type prefix, and a raw NATS message comes in as an
// event of the type its subject names.
func ExampleNewGateway() {
	srv, _ := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	srv.Start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	srv.ReadyForConnections(10 * time.Second)
	nc, _ := natsgo.Connect(srv.ClientURL())
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	o, _ := ontology.New([]ontology.TypeDef{
		{Name: "Alarm", Attributes: []ontology.Attribute{{Name: "level", Kind: ontology.KindInt}}},
		{Name: "Fire", Parents: []string{"Alarm"}},
		{Name: "Smoke alarm", Parents: []string{"Fire"}},
	})
	place, _ := sion.NewEventPlace(sion.PlaceConfig{Name: "hq", Ontology: o})
	sw, _ := sion.NewSwitch(sion.SwitchConfig{Name: "hq-1", Place: place})
	defer sw.Close()
	g, err := nats.NewGateway(ctx, sw, nats.GatewayConfig{Conn: nc})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()

	// Out: a plain NATS subscriber by type prefix.
	fires, _ := nc.SubscribeSync("sion.hq.Alarm.Fire.>")
	nc.Flush()
	s, _ := sw.Open(ctx, sion.SessionConfig{Name: "sensor"})
	s.Publish(ctx, &sion.Event{Type: "Smoke alarm", Attrs: []ontology.Attr{{Name: "level", Value: ontology.Int(2)}}})
	m, _ := fires.NextMsg(10 * time.Second)
	fmt.Println(m.Subject, m.Header.Get("ce-type"), m.Header.Get("ce-level"))

	// In: a subscriber in the place, and a raw message on NATS.
	sub, _ := s.Subscribe(ctx, "{type ⊑ Fire}")
	g.Sync(ctx) // the NATS subscriptions the new interest needs are made
	nc.Publish("sion.hq.Alarm.Fire", []byte("from NATS"))
	d, _ := sub.Next(ctx)
	fmt.Println(d.Event.Type, string(d.Event.Data), d.Event.Control.Path)
	fmt.Println(g.Stats().Subjects)
	// Output:
	// sion.hq.Alarm.Fire.Smoke%20alarm Smoke alarm 2
	// Fire from NATS [nats:sion.hq hq]
	// [sion.hq.Alarm.Fire sion.hq.Alarm.Fire.>]
}

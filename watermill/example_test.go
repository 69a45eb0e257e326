package watermill_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	wmessage "github.com/ThreeDotsLabs/watermill/message"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/watermill"
)

func Example() {
	o, err := ontology.LoadJSON(strings.NewReader(`{"types": [
	  {"name": "Reading", "attributes": [
	    {"name": "celsius", "kind": "float"}, {"name": "station", "kind": "string"}]}]}`), "readings.json")
	if err != nil {
		log.Fatal(err)
	}
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "lab", Ontology: o})
	if err != nil {
		log.Fatal(err)
	}
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "sw", Place: place})
	if err != nil {
		log.Fatal(err)
	}
	defer sw.Close()
	ctx := context.Background()
	session, err := sw.Open(ctx, sion.SessionConfig{Name: "app"})
	if err != nil {
		log.Fatal(err)
	}

	sub, err := watermill.NewSubscriber(session, watermill.SubscriberConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	messages, err := sub.Subscribe(ctx, "Reading") // {type ⊑ Reading}
	if err != nil {
		log.Fatal(err)
	}

	pub, err := watermill.NewPublisher(session, watermill.Config{})
	if err != nil {
		log.Fatal(err)
	}
	msg := wmessage.NewMessage("4b1c0a52-3c0e-4f5e-9d64-2f0c1a7b9e11", []byte(`{"note":"roof"}`))
	msg.Metadata.Set("celsius", "21.50")
	msg.Metadata.Set("station", "north")
	msg.Metadata.Set("content_type", "application/json")
	if err := pub.Publish("Reading", msg); err != nil {
		log.Fatal(err)
	}

	got := <-messages
	fmt.Println(got.UUID, string(got.Payload))
	fmt.Println(got.Metadata.Get("celsius"), got.Metadata.Get("station"), got.Metadata.Get("content_type"))
	got.Ack()
	// Output:
	// 4b1c0a52-3c0e-4f5e-9d64-2f0c1a7b9e11 {"note":"roof"}
	// 21.5 north application/json
}

package cloudevents_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/ontology"
)

func ExampleCodec() {
	o, err := ontology.LoadJSON(strings.NewReader(`{"types": [
	  {"name": "quake", "attributes": [
	    {"name": "mag", "kind": "float"}, {"name": "region", "kind": "string"},
	    {"name": "felt", "kind": "int"}]}]}`), "quakes.json")
	if err != nil {
		log.Fatal(err)
	}
	c, err := cloudevents.NewCodec(cloudevents.Config{Ontology: o, TypePrefix: "gov.usgs.", SubjectAttribute: "region", Source: "https://earthquake.usgs.gov/"})
	if err != nil {
		log.Fatal(err)
	}
	ev := &sion.Event{ID: sion.EventID{15: 1}, Type: "quake", Attrs: []ontology.Attr{
		{Name: "mag", Value: ontology.Float(4.5)},
		{Name: "region", Value: ontology.String("Alaska")},
		{Name: "felt", Value: ontology.Int(1 << 40)},
	}, ContentType: "application/json", Data: []byte(`{"id":"ak0234"}`)}

	ce, err := c.ToCloudEvent(ev)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ce.Type(), ce.ID(), ce.Subject())
	fmt.Printf("mag=%q felt=%q\n", ce.Extensions()["mag"], ce.Extensions()["felt"])

	back, err := c.FromCloudEvent(ce)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(back.String())
	// Output:
	// gov.usgs.quake 00000000000000000000000000000001 Alaska
	// mag="4.5" felt="1099511627776"
	// quake{felt: 1099511627776, mag: 4.5, region: "Alaska"} id=00000000000000000000000000000001
}

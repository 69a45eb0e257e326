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

func ExampleCodec_CompileSQL() {
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "hazard", Attributes: []ontology.Attribute{
			{Name: "mag", Kind: ontology.KindFloat}, {Name: "place", Kind: ontology.KindString},
			{Name: "tsunami", Kind: ontology.KindInt}, {Name: "alert", Kind: ontology.KindString}}},
		{Name: "earthquake", Parents: []string{"hazard"}},
		{Name: "explosion", Parents: []string{"hazard"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	c, err := cloudevents.NewCodec(cloudevents.Config{Ontology: o, TypePrefix: "gov.usgs.", SubjectAttribute: "place"})
	if err != nil {
		log.Fatal(err)
	}
	fs, err := c.CompileSQL(`type = 'gov.usgs.earthquake' AND subject LIKE '%Alaska' AND (tsunami > 0 OR alert IN ('orange', 'red'))`)
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range fs {
		fmt.Println(f)
	}
	_, err = c.CompileSQL(`UPPER(alert) = 'RED'`)
	fmt.Println(err)
	// Output:
	// {type ⊑ earthquake; tsunami in (0, 2147483647]; place suffix "Alaska"}
	// {type ⊑ earthquake; alert in {"orange", "red"}; tsunami in [-2147483648, 0]; place suffix "Alaska"}
	// cloudevents: sql: at 1: function UPPER(…): sion's filters compare attributes with values, they do not call functions
}

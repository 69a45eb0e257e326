package ontology_test

import (
	"fmt"
	"strings"

	"github.com/sion-go/sion/ontology"
)

// New builds an ontology from type definitions. S1's example: BGM is-a
// music and is-a seasonal (multiple inheritance); synonyms resolve to
// canonical names at the edge.
func ExampleNew() {
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "music", Synonyms: []string{"Musik"}, Attributes: []ontology.Attribute{
			{Name: "price", Kind: ontology.KindFloat, Unit: "USD", Synonyms: []string{"cost"}},
		}},
		{Name: "seasonal"},
		{Name: "popular", Parents: []string{"music"}},
		{Name: "BGM", Parents: []string{"Musik", "seasonal"}, Label: "background music"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	bgm, _ := o.Lookup("BGM")
	music, _ := o.Lookup("Musik") // a synonym
	popular, _ := o.Lookup("popular")
	seasonal, _ := o.Lookup("seasonal")
	fmt.Println(music.Name, bgm.Parents, bgm.Label)
	fmt.Println("BGM is-a music:", o.IsA(bgm.ID, music.ID))
	fmt.Println("BGM is-a seasonal:", o.IsA(bgm.ID, seasonal.ID))
	fmt.Println("popular is-a seasonal:", o.IsA(popular.ID, seasonal.ID))
	fmt.Println("music is-a BGM:", o.IsA(music.ID, bgm.ID))
	a, _ := o.Attribute(bgm.ID, "cost") // inherited, by synonym
	fmt.Println(o.CanonicalAttribute("cost"), a.Kind, a.Unit)
	_, ok := o.Lookup("Music")
	fmt.Println("Music:", ok) // names are case-sensitive
	// Output:
	// music [music seasonal] background music
	// BGM is-a music: true
	// BGM is-a seasonal: true
	// popular is-a seasonal: false
	// music is-a BGM: false
	// price float USD
	// Music: false
}

// LoadJSON reads sion's JSON ontology format; errors carry the file, line
// and column.
func ExampleLoadJSON() {
	const src = `{"types": [
  {"name": "Event"},
  {"name": "Reading", "parents": ["Event"], "synonyms": ["Measurement"],
   "attributes": [
     {"name": "celsius", "kind": "float", "unit": "degC", "synonyms": ["temp"]},
     {"name": "station", "kind": "string"}]}
]}`
	o, err := ontology.LoadJSON(strings.NewReader(src), "sensors.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	r, _ := o.Lookup("Measurement")
	for _, a := range o.Vocabulary(r.ID) {
		fmt.Printf("%s.%s %s unit=%q synonyms=%v\n", r.Name, a.Name, a.Kind, a.Unit, a.Synonyms)
	}

	_, err = ontology.LoadJSON(strings.NewReader(`{"types": [
  {"name": "A", "parents": ["B"]}
]}`), "bad.json")
	fmt.Println(err)
	// Output:
	// Reading.celsius float unit="degC" synonyms=[temp]
	// Reading.station string unit="" synonyms=[]
	// ontology: bad.json:2:3: type "A": unknown parent "B"
}

// A Mapping converts events between two ontologies, here a linear
// conversion from °C to °F and a renamed type.
func ExampleMapping_Apply() {
	from, _ := ontology.New([]ontology.TypeDef{
		{Name: "Reading", Attributes: []ontology.Attribute{
			{Name: "celsius", Kind: ontology.KindFloat, Unit: "degC"},
			{Name: "station", Kind: ontology.KindString},
		}},
	})
	to, _ := ontology.New([]ontology.TypeDef{
		{Name: "Measurement", Attributes: []ontology.Attribute{
			{Name: "fahrenheit", Kind: ontology.KindFloat, Unit: "degF"},
			{Name: "station", Kind: ontology.KindString},
		}},
	})
	m, err := ontology.NewMapping(from, to, ontology.MappingSpec{
		Types:      []ontology.TypeRule{{From: "Reading", To: "Measurement"}},
		Attributes: []ontology.AttributeRule{{From: "celsius", To: "fahrenheit", Scale: 1.8, Offset: 32}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range []float64{21.5, -40, 100} {
		typ, attrs, ok, err := m.Apply("Reading", []ontology.Attr{
			{Name: "celsius", Value: ontology.Float(c)},
			{Name: "station", Value: ontology.String("KIX")},
		})
		fmt.Println(typ, attrs, ok, err)
	}
	// Output:
	// Measurement [{fahrenheit 70.7} {station "KIX"}] true <nil>
	// Measurement [{fahrenheit -40.0} {station "KIX"}] true <nil>
	// Measurement [{fahrenheit 212.0} {station "KIX"}] true <nil>
}

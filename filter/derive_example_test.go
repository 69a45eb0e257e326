package filter_test

import (
	"fmt"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// A gateway between a place that measures in °C and one that speaks °F
// subscribes on the °C side with the interest derived from the °F side.
// The boundary is exact for Apply's arithmetic (one rounding): every
// temperature in (-9.87e-16, 0) °C converts to exactly 32.0 °F.
func ExampleDerive() {
	src, _ := ontology.New([]ontology.TypeDef{{Name: "Reading", Attributes: []ontology.Attribute{
		{Name: "station", Kind: ontology.KindString},
		{Name: "pm25", Kind: ontology.KindFloat},
		{Name: "temp", Kind: ontology.KindFloat, Unit: "degC"},
	}}})
	dst, _ := ontology.New([]ontology.TypeDef{{Name: "Observation", Attributes: []ontology.Attribute{
		{Name: "site", Kind: ontology.KindString},
		{Name: "pm2_5", Kind: ontology.KindFloat},
		{Name: "air_temp_f", Kind: ontology.KindFloat, Unit: "degF"},
	}}})
	m, err := ontology.NewMapping(src, dst, ontology.MappingSpec{
		Types: []ontology.TypeRule{{From: "Reading", To: "Observation"}},
		Attributes: []ontology.AttributeRule{
			{From: "station", To: "site", Values: map[string]string{"Dongsi": "Beijing-East", "Tiantan": "Beijing-East", "Wanliu": "Beijing-West"}},
			{From: "pm25", To: "pm2_5"},
			{From: "temp", To: "air_temp_f", Scale: 1.8, Offset: 32},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, src := range []string{
		`{type ⊑ Observation; air_temp_f < 32}`,
		`{type ⊑ Observation; pm2_5 > 250}`,
		`{type ⊑ Observation; site == "Beijing-East"; air_temp_f >= 212}`,
	} {
		fs, err := filter.Derive(filter.MustCompile(src), m)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(src, "→", fs)
	}
	// Output:
	// {type ⊑ Observation; air_temp_f < 32} → [{type ⊑ Reading; temp < -9.868649107779168e-16}]
	// {type ⊑ Observation; pm2_5 > 250} → [{type ⊑ Reading; pm25 > 250.0}]
	// {type ⊑ Observation; site == "Beijing-East"; air_temp_f >= 212} → [{type ⊑ Reading; station in {"Dongsi", "Tiantan"}; temp >= 100.0}]
}

package filter_test

import (
	"fmt"
	"slices"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// Compile reads any spelling of the syntax; String writes the canonical
// form, which Compile reads back to the same filter.
func ExampleCompile() {
	f, err := filter.Compile(`type <: Reading;   delta = -0.0; zone prefix "hall.";
		json(temp\.celsius) > 30 ; n in (0, 10]`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f)
	fmt.Println(f.Type(), len(f.Predicates()))

	_, err = filter.Compile(`{type ⊑ Reading; delta in [1, 0]}`)
	fmt.Println(err)
	// Output:
	// {type ⊑ Reading; delta == -0.0; zone prefix "hall."; json(temp\.celsius) > 30; n in (0, 10]}
	// Reading 4
	// filter: predicate 1 (delta in [1, 0]): range lower end 1 is above upper end 0
}

// Build takes a Spec made with the builder methods of Operand.
func ExampleBuild() {
	f, err := filter.Build(filter.Spec{
		Type:      "Quake",
		Mode:      filter.ModeScore,
		Threshold: 2,
		Predicates: []filter.Predicate{
			filter.Attr("mag").GE(ontology.Float(6)).WithWeight(2),
			filter.Attr("tsunami").EQ(ontology.Int(1)),
			filter.JSON("properties.place").Contains("Alaska"),
			filter.Attr("depth").Range(ontology.Int(0), ontology.Float(70), false, true),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f)
	// Output:
	// {type ⊑ Quake; match score >= 2; mag >= 6.0 weight 2; tsunami == 1; json(properties.place) contains "Alaska"; depth in [0, 70.0)}
}

// An Index holds filters by ID and reports, for each event, the filters it
// matches. This is S1's example: BGM is-a music and is-a seasonal, so a
// filter on music receives BGM events.
func ExampleIndex() {
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "music", Attributes: []ontology.Attribute{{Name: "price", Kind: ontology.KindFloat, Unit: "USD"}}},
		{Name: "seasonal"},
		{Name: "popular", Parents: []string{"music"}},
		{Name: "BGM", Parents: []string{"music", "seasonal"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ix := filter.NewIndex(o)
	for id, src := range map[uint64]string{
		1: `{type ⊑ music; price in [20, 40]}`,
		2: `{type ⊑ seasonal}`,
		3: `{type ⊑ popular; price < 20}`,
	} {
		if err := ix.Add(id, filter.MustCompile(src)); err != nil {
			fmt.Println(err)
			return
		}
	}
	for _, ev := range []*filter.BasicEvent{
		{Type: "BGM", Attrs: []ontology.Attr{{Name: "price", Value: ontology.Float(40)}}},
		{Type: "BGM", Attrs: []ontology.Attr{{Name: "price", Value: ontology.Float(40.01)}}},
		{Type: "popular", Attrs: []ontology.Attr{{Name: "price", Value: ontology.Int(19)}}},
		{Type: "music"},
	} {
		var ids []uint64
		ix.Match(ev, func(id uint64, _ float64) { ids = append(ids, id) })
		slices.Sort(ids) // Match reports in no particular order
		fmt.Println(ev.Type, ev.Attrs, ids)
	}
	// Output:
	// BGM [{price 40.0}] [1 2]
	// BGM [{price 40.01}] [2]
	// popular [{price 19}] [3]
	// music [] []
}

// BruteForce has Index's API and evaluates every filter in turn: the
// reference to test an Index against, and the benchmarks' baseline.
func ExampleBruteForce() {
	o, _ := ontology.New([]ontology.TypeDef{
		{Name: "Quake", Attributes: []ontology.Attribute{{Name: "mag", Kind: ontology.KindFloat}}},
	})
	bf, ix := filter.NewBruteForce(o), filter.NewIndex(o)
	f := filter.MustCompile(`{type ⊑ Quake; match atleast 1; mag >= 6; json(tsunami) == 1}`)
	_ = bf.Add(1, f)
	_ = ix.Add(1, f)
	ev := &filter.BasicEvent{
		Type:        "Quake",
		Attrs:       []ontology.Attr{{Name: "mag", Value: ontology.Float(6.1)}},
		ContentType: "application/geo+json",
		Data:        []byte(`{"tsunami": 1}`),
	}
	bf.Match(ev, func(id uint64, score float64) { fmt.Println("brute force:", id, score) })
	ix.Match(ev, func(id uint64, score float64) { fmt.Println("index:", id, score) })
	// Output:
	// brute force: 1 2
	// index: 1 2
}

// EscapeJSON builds the gjson path of a key that holds path syntax.
func ExampleEscapeJSON() {
	path := filter.EscapeJSON("@odata.type")
	fmt.Println(path)
	f := filter.MustCompile(fmt.Sprintf(`json(%s) == "#item"`, path))
	ok, _ := f.Eval(&filter.BasicEvent{ContentType: "application/json", Data: []byte(`{"@odata.type": "#item"}`)})
	fmt.Println(ok)
	// Output:
	// \@odata\.type
	// true
}

// A patronage condition travels with an event and is checked against each
// receiver's profile.
func ExampleCompileCondition() {
	cond, err := filter.CompileCondition(`{tier >= 2; region in {"eu", "us"}}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, profile := range [][]ontology.Attr{
		{{Name: "tier", Value: ontology.Int(1)}, {Name: "region", Value: ontology.String("eu")}},
		{{Name: "tier", Value: ontology.Int(3)}, {Name: "region", Value: ontology.String("eu")}},
		{{Name: "tier", Value: ontology.Int(3)}},
	} {
		ok, _ := cond.MatchProfile(profile)
		fmt.Println(profile, ok)
	}
	_, err = filter.CompileCondition(`{type ⊑ Reading; tier >= 2}`)
	fmt.Println(err)
	// Output:
	// [{tier 1} {region "eu"}] false
	// [{tier 3} {region "eu"}] true
	// [{tier 3}] false
	// filter: a patronage condition has no event type, not "Reading"
}

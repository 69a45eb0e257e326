package filter

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// fuzzSeeds are filters from CASES.md and the syntax reference, plus
// malformed and edge inputs.
var fuzzSeeds = []string{
	``,
	`{}`,
	`{type ⊑ Reading; json(temp\.celsius) > 30}`,
	`{type ⊑ Reading; json(temp.celsius) > 30}`,
	`{type ⊑ Reading; json(\@odata\.type) == "#item"}`,
	`{type ⊑ Reading; delta in [-1, 0]}`,
	`{type ⊑ Reading; delta in (0, 1]}`,
	`{type ⊑ Reading; delta == -0.0}`,
	`{type ⊑ Notice; zone prefix "hall."}`,
	`{xmlns:s = "urn:example:sensors"; xpath(/s:reading/s:value > 20)}`,
	`{xmlns:s = "urn:example:sensors"; xpath(/s:reading[@id='1']/s:value[@unit='C']) > 20}`,
	`{type <: Quake; match score >= 2; mag >= 6 weight 2; tsunami == 1}`,
	`{type ⊑ "quarry blast"}`,
	`{type ⊑ *; entity == "role"}`,
	`json(orderId) == 9007199254740993`,
	`json(properties.place) contains "Alaska"; json(properties.mag) >= 2.5`,
	`{match atleast 2; a == 1; b != "x"; c < 1.5; d <= 2; e > -3; f >= 4e10}`,
	`{a in {1, 2.5, "x", true, time("2024-01-02T03:04:05.123456789+02:00")}; b not in {false}}`,
	`{a exists; b not exists; c suffix "z"; true weight 3; match score >= 0.5}`,
	`{type == "x"; match == 1; xmlns == 2; json == 3; xpath == 4; true == 5}`,
	`{"quarry blast" == 1; "a\tb\u00e9\x00" == "\U0001F600"; ünïcode == "ж"}`,
	`{a == 9223372036854775807; b == -9223372036854775808; c == 5e-324; d == 1.7976931348623157e+308}`,
	`{a == 9223372036854775808}`,
	"{a == `raw\\string`; json(\"quoted path\") exists; xpath(\"string(/a)\") == \"x\"}",
	`{xmlns : t = "urn:t"; xmlns:t = "urn:u"}`,
	`{a == ;}`,
	`{a in [1, 2}`,
	`{json(a\) == 1}`,
	`{a == NaN}`,
}

// FuzzCompile checks that Compile never panics and that the canonical
// source of every filter it accepts compiles to the same canonical source
// and the same Spec.
func FuzzCompile(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		flt, err := Compile(src)
		if err != nil {
			return
		}
		s := flt.String()
		again, err := Compile(s)
		if err != nil {
			t.Fatalf("Compile(%q).String() = %q does not compile: %v", src, s, err)
		}
		if got := again.String(); got != s {
			t.Fatalf("Compile(%q): String() = %q, but that compiles to %q", src, s, got)
		}
		if a, b := normalWeights(flt.Spec()), normalWeights(again.Spec()); !assert.ObjectsAreEqual(a, b) {
			t.Fatalf("Compile(%q): Spec %+v, but its String() %q compiles to Spec %+v", src, a, s, b)
		}
	})
}

// normalWeights returns spec with weights of 1 written as 0 (the default),
// which String omits.
func normalWeights(spec Spec) Spec {
	for i := range spec.Predicates {
		if spec.Predicates[i].Weight == 1 {
			spec.Predicates[i].Weight = 0
		}
	}
	return spec
}

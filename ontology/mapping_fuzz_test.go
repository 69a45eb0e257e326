package ontology

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzMappingOntologies are the mapping tests' ontologies with more
// shapes: the S1 music DAG (BGM under two parents) in the source, time
// attributes on both sides, and target types for the music types.
func fuzzMappingOntologies(t testing.TB) (src, dst *Ontology) {
	a, b := mappingDefs()
	a = append(a, musicDefs()...)
	a = append(a, TypeDef{Name: "Tick", Parents: []string{"Event"}, Attributes: []Attribute{
		{Name: "at", Kind: KindTime}, {Name: "n", Kind: KindInt, Synonyms: []string{"number"}}}})
	b = append(b,
		TypeDef{Name: "M", Attributes: []Attribute{{Name: "tempo", Kind: KindFloat}, {Name: "title", Kind: KindString}}},
		TypeDef{Name: "S", Parents: []string{"M"}, Attributes: []Attribute{{Name: "season", Kind: KindString}}},
		TypeDef{Name: "Zeit", Attributes: []Attribute{{Name: "at", Kind: KindTime}, {Name: "n", Kind: KindFloat}}})
	return mustNew(t, a), mustNew(t, b)
}

// fuzzMappingSpecs are seeds: the mapping tests' specs and one rule of
// each kind of error of NewMapping.
func fuzzMappingSpecs() []MappingSpec {
	reading := []TypeRule{{From: "Reading", To: "Messung"}}
	return []MappingSpec{
		testSpec(),
		{Types: []TypeRule{{From: "music", To: "M"}, {From: "seasonal", To: "S"}, {From: "BGM", To: "M"}, {From: "Tick", To: "Zeit"}},
			Attributes: []AttributeRule{{Type: "music", From: "bpm", To: "tempo", Scale: 0.5}, {From: "n", Scale: -3, Offset: 7}, {Type: "BGM", From: "venue", Drop: true}}},
		{Types: []TypeRule{{From: "music", To: "M"}, {From: "seasonal", To: "S"}}},
		{Types: []TypeRule{{From: "Nope", To: "Messung"}}},
		{Types: []TypeRule{{From: "Reading", To: "Messung"}, {From: "Reading", To: "Innen"}}},
		{Types: []TypeRule{{From: "Reading", To: "Messung", Drop: true}}},
		{Types: reading, Attributes: []AttributeRule{{Type: "Reading", From: "station", To: "nope"}}},
		{Types: reading, Attributes: []AttributeRule{{Type: "Alarm", From: "station"}}},
		{Types: reading, Attributes: []AttributeRule{{From: "celsius", To: "fahrenheit", Values: map[string]string{}}}},
		{Types: reading, Attributes: []AttributeRule{{From: "celsius", To: "zustand"}}},
		{Types: reading, Attributes: []AttributeRule{{From: "celsius", To: "fahrenheit", Offset: 32}}},
		{Types: reading, Attributes: []AttributeRule{{From: "celsius", Drop: true, Scale: 1}}},
		{Types: reading, Attributes: []AttributeRule{{From: "temp", Drop: true}, {From: "celsius", Drop: true}}},
		{Types: reading, Attributes: []AttributeRule{{Type: "Reading", From: "state", To: "zustand", Values: map[string]string{"on": "an"}, KeepUnmapped: true},
			{Type: "Calibration", From: "state", To: "zustand"}, {Type: "IndoorReading", From: "count", To: "room", Scale: 2}}},
	}
}

// fuzzValues are values of each kind, with the edges of int64 and float64.
var fuzzValues = map[Kind][]Value{
	KindString: {String(""), String("on"), String("off"), String("x")},
	KindInt:    {Int(0), Int(-7), Int(math.MaxInt64), Int(math.MinInt64), Int(1<<53 + 1)},
	KindFloat:  {Float(0), Float(math.Copysign(0, -1)), Float(21.5), Float(-1e300), Float(math.MaxFloat64), Float(5e-324)},
	KindBool:   {Bool(true), Bool(false)},
	KindTime:   {TimeNanos(0), TimeNanos(math.MinInt64), TimeNanos(math.MaxInt64)},
}

var mappingRule = regexp.MustCompile(`^(Types|Attributes)\[(\d+)\]$`)

// FuzzNewMapping builds a MappingSpec from JSON (and, so that NaN and
// ±Inf reach it, optionally takes one attribute rule's Scale and Offset
// from two fuzzed floats). NewMapping must not panic; its errors are
// *MappingError naming a rule of the spec. A Mapping it builds converts an
// event of every source type with each value of each attribute of the
// type's vocabulary without panicking, as Target says, into canonical
// target attributes, and as Conversions says.
//
//	go test -run=^$ -fuzz=FuzzNewMapping -fuzztime=1m ./ontology
func FuzzNewMapping(f *testing.F) {
	for _, s := range fuzzMappingSpecs() {
		b, err := json.Marshal(s)
		require.NoError(f, err)
		f.Add(b, 0.0, 0.0, uint8(0))
	}
	f.Add([]byte(`{"Types": [{"From": "Reading", "To": "Messung"}], "Attributes": [{"From": "celsius", "To": "fahrenheit"}]}`), 1.8, 32.0, uint8(3))
	f.Add([]byte(`{"Types": [{"From": "Reading", "To": "Messung"}], "Attributes": [{"From": "count", "To": "anzahl"}]}`), math.NaN(), math.Inf(-1), uint8(3))
	f.Add([]byte(`{"Types": [{"From": "Reading", "To": "Messung"}], "Attributes": [{"From": "count", "To": "anzahl"}]}`), 1e300, 0.0, uint8(1))
	src, dst := fuzzMappingOntologies(f)
	f.Fuzz(func(t *testing.T, data []byte, scale, offset float64, which uint8) {
		var spec MappingSpec
		if json.Unmarshal(data, &spec) != nil {
			return
		}
		if n := len(spec.Attributes); n > 0 {
			r := &spec.Attributes[int(which>>2)%n]
			if which&1 != 0 {
				r.Scale = scale
			}
			if which&2 != 0 {
				r.Offset = offset
			}
		}
		m, err := NewMapping(src, dst, spec)
		if err != nil {
			require.Nil(t, m)
			var me *MappingError
			require.ErrorAs(t, err, &me)
			sub := mappingRule.FindStringSubmatch(me.Rule)
			require.NotNil(t, sub, "the error names a rule: %v", err)
			i, _ := strconv.Atoi(sub[2])
			if sub[1] == "Types" {
				require.Less(t, i, len(spec.Types), "%v", err)
			} else {
				require.Less(t, i, len(spec.Attributes), "%v", err)
			}
			require.Equal(t, "ontology: mapping "+me.Rule+": "+me.Err.Error(), err.Error())
			return
		}
		for id := range src.NumTypes() {
			et := src.Type(id)
			target, converted := m.Target(et.Name)
			for _, a := range src.Vocabulary(id) {
				for _, v := range fuzzValues[a.Kind] {
					typ, out, ok, err := m.Apply(et.Name, []Attr{{Name: a.Name, Value: v}})
					if err != nil {
						require.ErrorIs(t, err, ErrConversion)
						continue
					}
					require.Equal(t, converted, ok, "Target and Apply of %q", et.Name)
					if !ok {
						continue
					}
					require.Equal(t, target, typ)
					require.LessOrEqual(t, len(out), 1)
					if len(out) == 0 {
						continue
					}
					o := out[0]
					require.Equal(t, o.Name, dst.CanonicalAttribute(o.Name), "canonical target name")
					require.True(t, dst.HasAttribute(o.Name), "%q is a target attribute", o.Name)
					cs := m.Conversions(et.Name, o.Name)
					var c *Conversion
					for i := range cs {
						if cs[i].From == a.Name {
							c = &cs[i]
						}
					}
					require.NotNil(t, c, "Conversions(%q, %q) lists %q", et.Name, o.Name, a.Name)
					got, keep, err := c.Convert(v)
					require.NoError(t, err)
					require.True(t, keep)
					require.True(t, Equal(got, o.Value) || got.IsNaN() && o.Value.IsNaN(), "Convert %v: %v, Apply: %v", v, got, o.Value)
				}
			}
		}
	})
}

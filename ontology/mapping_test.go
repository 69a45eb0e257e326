package ontology

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mappingOntologies(t testing.TB) (a, b *Ontology) {
	t.Helper()
	da, db := mappingDefs()
	return mustNew(t, da), mustNew(t, db)
}

// mappingDefs are the source and target ontologies of the mapping tests.
func mappingDefs() (a, b []TypeDef) {
	a = []TypeDef{
		{Name: "Event"},
		{Name: "Reading", Parents: []string{"Event"}, Attributes: []Attribute{
			{Name: "celsius", Kind: KindFloat, Unit: "degC", Synonyms: []string{"temp"}},
			{Name: "count", Kind: KindInt},
			{Name: "state", Kind: KindString},
			{Name: "station", Kind: KindString},
			{Name: "secret", Kind: KindString},
			{Name: "local", Kind: KindBool},
		}},
		{Name: "IndoorReading", Parents: []string{"Reading"}, Attributes: []Attribute{{Name: "room", Kind: KindString}}},
		{Name: "Calibration", Parents: []string{"Reading"}},
		{Name: "Alarm", Parents: []string{"Event"}},
	}
	b = []TypeDef{
		{Name: "Messung", Synonyms: []string{"Measurement"}, Attributes: []Attribute{
			{Name: "fahrenheit", Kind: KindFloat, Unit: "degF"},
			{Name: "anzahl", Kind: KindInt},
			{Name: "zustand", Kind: KindString},
			{Name: "station", Kind: KindString},
			{Name: "room", Kind: KindInt},
		}},
		{Name: "Innen", Parents: []string{"Messung"}, Attributes: []Attribute{{Name: "raum", Kind: KindString}}},
		{Name: "Text", Attributes: []Attribute{{Name: "celsius", Kind: KindString}}},
	}
	return a, b
}

func testSpec() MappingSpec {
	return MappingSpec{
		Types: []TypeRule{
			{From: "Reading", To: "Measurement"},
			{From: "IndoorReading", To: "Innen"},
			{From: "Calibration", Drop: true},
		},
		Attributes: []AttributeRule{
			{From: "temp", To: "fahrenheit", Scale: 1.8, Offset: 32},
			{From: "count", To: "anzahl", Scale: 2, Offset: 1},
			{From: "state", To: "zustand", Values: map[string]string{"on": "an", "off": "aus"}},
			{Type: "IndoorReading", From: "state", To: "zustand", Values: map[string]string{"on": "ein"}, KeepUnmapped: true},
			{From: "secret", Drop: true},
			{Type: "IndoorReading", From: "room", To: "raum"},
		},
	}
}

func TestMappingApply(t *testing.T) {
	a, b := mappingOntologies(t)
	m, err := NewMapping(a, b, testSpec())
	require.NoError(t, err)
	tests := []struct {
		name     string
		typ      string
		in       []Attr
		wantType string
		want     []Attr
		ok       bool
	}{
		{"celsius to fahrenheit, exact", "Reading", []Attr{{"celsius", Float(21.5)}}, "Messung",
			[]Attr{{"fahrenheit", Float(70.7)}}, true},
		{"synonym, one rounding", "Reading", []Attr{{"temp", Float(37)}}, "Messung",
			[]Attr{{"fahrenheit", Float(98.60000000000001)}}, true},
		{"int input to float target", "Reading", []Attr{{"temp", Int(100)}}, "Messung",
			[]Attr{{"fahrenheit", Float(212)}}, true},
		{"int to int exact", "Reading", []Attr{{"count", Int(math.MaxInt64 / 2)}}, "Messung",
			[]Attr{{"anzahl", Int(math.MaxInt64)}}, true},
		{"value map", "Reading", []Attr{{"state", String("on")}, {"station", String("S1")}}, "Messung",
			[]Attr{{"zustand", String("an")}, {"station", String("S1")}}, true},
		{"value map unmapped dropped", "Reading", []Attr{{"state", String("broken")}}, "Messung",
			[]Attr{}, true},
		{"subtype rule and unmapped kept", "IndoorReading", []Attr{{"state", String("broken")}, {"room", String("K1")}}, "Innen",
			[]Attr{{"zustand", String("broken")}, {"raum", String("K1")}}, true},
		{"drop and not in target vocabulary", "Reading", []Attr{{"secret", String("x")}, {"local", Bool(true)}, {"unknown", Int(1)}}, "Messung",
			[]Attr{}, true},
		{"type dropped", "Calibration", []Attr{{"celsius", Float(1)}}, "", nil, false},
		{"type without counterpart", "Alarm", nil, "", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			typ, out, ok, err := m.Apply(tc.typ, tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.wantType, typ)
			require.Len(t, out, len(tc.want))
			for i := range out {
				assert.Equal(t, tc.want[i].Name, out[i].Name)
				assert.Equal(t, tc.want[i].Value.Kind(), out[i].Value.Kind(), out[i].Name)
				assert.True(t, Equal(tc.want[i].Value, out[i].Value), "%s: got %v want %v", out[i].Name, out[i].Value, tc.want[i].Value)
			}
		})
	}
	t.Run("errors", func(t *testing.T) {
		_, _, _, err := m.Apply("Nope", nil)
		assert.ErrorIs(t, err, ErrConversion)
		_, _, _, err = m.Apply("Reading", []Attr{{"celsius", String("warm")}})
		assert.ErrorIs(t, err, ErrConversion)
		_, _, _, err = m.Apply("IndoorReading", []Attr{{"state", String("on")}, {"state", String("x")}})
		assert.ErrorContains(t, err, `two attributes convert to "zustand"`)
		_, _, _, err = m.Apply("Reading", []Attr{{"count", Int(math.MaxInt64)}})
		assert.ErrorContains(t, err, "overflows int64")
	})
	t.Run("source types", func(t *testing.T) {
		assert.Equal(t, []string{"Reading", "IndoorReading"}, m.SourceTypes("Measurement"))
		assert.Equal(t, []string{"IndoorReading"}, m.SourceTypes("Innen"))
		assert.Empty(t, m.SourceTypes("Text"))
		assert.Nil(t, m.SourceTypes("Nope"))
		to, ok := m.Target("IndoorReading")
		assert.True(t, ok)
		assert.Equal(t, "Innen", to)
	})
}

func TestMappingIntTarget(t *testing.T) {
	a := mustNew(t, []TypeDef{{Name: "A", Attributes: []Attribute{{Name: "x", Kind: KindFloat}, {Name: "n", Kind: KindInt}}}})
	b := mustNew(t, []TypeDef{{Name: "B", Attributes: []Attribute{{Name: "y", Kind: KindInt}, {Name: "f", Kind: KindFloat}}}})
	m, err := NewMapping(a, b, MappingSpec{Types: []TypeRule{{From: "A", To: "B"}},
		Attributes: []AttributeRule{{From: "x", To: "y", Scale: 0.5}, {From: "n", To: "f"}}})
	require.NoError(t, err)
	tests := []struct {
		name string
		in   Attr
		want Attr
		err  string
	}{
		{"integral result becomes int", Attr{"x", Float(8)}, Attr{"y", Int(4)}, ""},
		{"fraction into int is an error", Attr{"x", Float(3)}, Attr{}, "does not fit int attribute"},
		{"int rename to float", Attr{"n", Int(3)}, Attr{"f", Float(3)}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, out, ok, err := m.Apply("A", []Attr{tc.in})
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.True(t, ok)
			require.Len(t, out, 1)
			assert.Equal(t, tc.want.Name, out[0].Name)
			assert.Equal(t, tc.want.Value.Kind(), out[0].Value.Kind())
			assert.True(t, Equal(tc.want.Value, out[0].Value))
		})
	}
}

func TestNewMappingErrors(t *testing.T) {
	a, b := mappingOntologies(t)
	reading := []TypeRule{{From: "Reading", To: "Messung"}}
	tests := []struct {
		name string
		spec MappingSpec
		msg  string
	}{
		{"unknown source type", MappingSpec{Types: []TypeRule{{From: "Nope", To: "Messung"}}},
			`ontology: mapping Types[0]: unknown type "Nope" in the source ontology`},
		{"unknown target type", MappingSpec{Types: []TypeRule{{From: "Reading", To: "Nope"}}},
			`ontology: mapping Types[0]: unknown type "Nope" in the target ontology`},
		{"duplicate type rule", MappingSpec{Types: []TypeRule{{From: "Reading", To: "Messung"}, {From: "Reading", To: "Innen"}}},
			`ontology: mapping Types[1]: type "Reading" already has rule Types[0]`},
		{"drop with target", MappingSpec{Types: []TypeRule{{From: "Reading", To: "Messung", Drop: true}}},
			`ontology: mapping Types[0]: a Drop rule has no target type (To is "Messung")`},
		{"unknown source attribute", MappingSpec{Types: reading, Attributes: []AttributeRule{{From: "nope", To: "station"}}},
			`ontology: mapping Attributes[0]: the source ontology has no attribute "nope"`},
		{"unknown target attribute", MappingSpec{Types: reading, Attributes: []AttributeRule{{Type: "Reading", From: "station", To: "nope"}}},
			`ontology: mapping Attributes[0]: target type "Messung" has no attribute "nope"`},
		{"attribute not on type", MappingSpec{Types: reading, Attributes: []AttributeRule{{Type: "Alarm", From: "station"}}},
			`ontology: mapping Attributes[0]: type "Alarm" of the source ontology has no attribute "station"`},
		{"linear on string", MappingSpec{Types: reading, Attributes: []AttributeRule{{From: "station", Scale: 2}}},
			`ontology: mapping Attributes[0]: linear conversion on a non-numeric attribute: "station" is string, "station" is string`},
		{"value table on float", MappingSpec{Types: reading, Attributes: []AttributeRule{{From: "celsius", To: "fahrenheit", Values: map[string]string{}}}},
			`ontology: mapping Attributes[0]: value table on a non-string attribute: "celsius" is float, "fahrenheit" is float`},
		{"kind mismatch", MappingSpec{Types: reading, Attributes: []AttributeRule{{From: "celsius", To: "zustand"}}},
			`ontology: mapping Attributes[0]: kind mismatch: source "celsius" is float, target "zustand" is string`},
		{"offset without scale", MappingSpec{Types: reading, Attributes: []AttributeRule{{From: "celsius", To: "fahrenheit", Offset: 32}}},
			`ontology: mapping Attributes[0]: Offset 32 without Scale (Scale 0 means no linear conversion)`},
		{"drop with conversion", MappingSpec{Types: reading, Attributes: []AttributeRule{{From: "celsius", Drop: true, Scale: 1}}},
			`ontology: mapping Attributes[0]: a Drop rule for "celsius" has a conversion`},
		{"duplicate attribute rule", MappingSpec{Types: reading, Attributes: []AttributeRule{{From: "temp", Drop: true}, {From: "celsius", Drop: true}}},
			`ontology: mapping Attributes[1]: attribute "celsius" already has rule Attributes[0] for the same type`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewMapping(a, b, tc.spec)
			require.Error(t, err)
			var me *MappingError
			require.ErrorAs(t, err, &me)
			assert.Equal(t, tc.msg, err.Error())
		})
	}
	t.Run("ambiguous inheritance", func(t *testing.T) {
		a := mustNew(t, musicDefs())
		b := mustNew(t, []TypeDef{{Name: "M"}, {Name: "S"}})
		_, err := NewMapping(a, b, MappingSpec{Types: []TypeRule{{From: "music", To: "M"}, {From: "seasonal", To: "S"}}})
		assert.EqualError(t, err, `ontology: mapping Types[1]: source type "BGM" inherits it and rule Types[0], which disagree; add a rule for "BGM"`)
		m, err := NewMapping(a, b, MappingSpec{Types: []TypeRule{{From: "music", To: "M"}, {From: "seasonal", To: "S"}, {From: "BGM", To: "M"}}})
		require.NoError(t, err)
		to, _ := m.Target("popular")
		assert.Equal(t, "M", to, "nearest ruled ancestor")
	})
}

func TestMappingConversions(t *testing.T) {
	a, b := mappingOntologies(t)
	m, err := NewMapping(a, b, testSpec())
	require.NoError(t, err)
	assert.Same(t, a, m.From())
	assert.Same(t, b, m.To())
	type row struct {
		From   string
		Method ConversionMethod
		Kinds  [2]Kind
	}
	tests := []struct {
		name, typ, attr string
		want            []row
	}{
		{"linear, by attribute synonym", "Reading", "fahrenheit", []row{{"celsius", ConvertLinear, [2]Kind{KindFloat, KindFloat}}}},
		{"linear int", "Reading", "anzahl", []row{{"count", ConvertLinear, [2]Kind{KindInt, KindInt}}}},
		{"table", "Reading", "zustand", []row{{"state", ConvertTable, [2]Kind{KindString, KindString}}}},
		{"pass-through", "Reading", "station", []row{{"station", ConvertPass, [2]Kind{KindString, KindString}}}},
		{"inherited by a subtype", "IndoorReading", "station", []row{{"station", ConvertPass, [2]Kind{KindString, KindString}}}},
		{"type-specific rename", "IndoorReading", "raum", []row{{"room", ConvertRename, [2]Kind{KindString, KindString}}}},
		{"kind mismatch does not pass", "IndoorReading", "room", nil},
		{"dropped attribute", "Reading", "secret", nil},
		{"not in the target type", "Reading", "local", nil},
		{"type dropped", "Calibration", "station", nil},
		{"type without counterpart", "Alarm", "station", nil},
		{"unknown type", "Nope", "station", nil},
		{"unknown target attribute", "Reading", "nope", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []row
			for _, c := range m.Conversions(tc.typ, tc.attr) {
				got = append(got, row{c.From, c.Method, [2]Kind{c.FromKind, c.ToKind}})
				st, _ := a.Lookup(tc.typ)
				assert.Equal(t, st.Name, c.Type)
			}
			assert.Equal(t, tc.want, got)
		})
	}
	t.Run("fields", func(t *testing.T) {
		cs := m.Conversions("IndoorReading", "zustand")
		require.Len(t, cs, 1)
		assert.Equal(t, map[string]string{"on": "ein"}, cs[0].Values, "the subtype's rule wins")
		assert.True(t, cs[0].KeepUnmapped)
		cs = m.Conversions("Reading", "Fahrenheit")
		assert.Empty(t, cs, "names are case-sensitive")
		cs = m.Conversions("Reading", "fahrenheit")
		require.Len(t, cs, 1)
		assert.Equal(t, Conversion{Type: "Reading", From: "celsius", FromKind: KindFloat, To: "fahrenheit", ToKind: KindFloat,
			Method: ConvertLinear, Scale: 1.8, Offset: 32}, cs[0])
		assert.Equal(t, "linear", cs[0].Method.String())
	})
	t.Run("two producers", func(t *testing.T) {
		m, err := NewMapping(a, b, MappingSpec{Types: []TypeRule{{From: "Reading", To: "Messung"}},
			Attributes: []AttributeRule{{From: "state", To: "station"}}})
		require.NoError(t, err)
		cs := m.Conversions("Reading", "station")
		require.Len(t, cs, 2)
		assert.Equal(t, []string{"state", "station"}, []string{cs[0].From, cs[1].From})
		assert.Equal(t, []ConversionMethod{ConvertRename, ConvertPass}, []ConversionMethod{cs[0].Method, cs[1].Method})
	})
}

// TestConversionConvertIsApply: Convert gives, value for value, what Apply
// gives for a one-attribute event, errors included.
func TestConversionConvertIsApply(t *testing.T) {
	src := mustNew(t, []TypeDef{{Name: "S", Attributes: []Attribute{
		{Name: "f", Kind: KindFloat}, {Name: "i", Kind: KindInt}, {Name: "j", Kind: KindInt}, {Name: "k", Kind: KindInt},
		{Name: "s", Kind: KindString}, {Name: "u", Kind: KindString}, {Name: "p", Kind: KindInt}, {Name: "q", Kind: KindFloat},
	}}})
	dst := mustNew(t, []TypeDef{{Name: "T", Attributes: []Attribute{
		{Name: "F", Kind: KindFloat}, {Name: "I", Kind: KindFloat}, {Name: "J", Kind: KindInt}, {Name: "K", Kind: KindInt},
		{Name: "S", Kind: KindString}, {Name: "U", Kind: KindString}, {Name: "p", Kind: KindFloat}, {Name: "q", Kind: KindInt},
	}}})
	m, err := NewMapping(src, dst, MappingSpec{Types: []TypeRule{{From: "S", To: "T"}}, Attributes: []AttributeRule{
		{From: "f", To: "F", Scale: -1.8, Offset: 32},
		{From: "i", To: "I"},
		{From: "j", To: "J", Scale: -3, Offset: 7},
		{From: "k", To: "K", Scale: 0.5},
		{From: "s", To: "S", Values: map[string]string{"a": "x", "b": "x"}},
		{From: "u", To: "U", Values: map[string]string{"a": "x"}, KeepUnmapped: true},
	}})
	require.NoError(t, err)
	values := []Value{Int(0), Int(1), Int(-7), Int(math.MaxInt64), Int(math.MinInt64), Int(1<<53 + 1), Int(3074457345618258603),
		Float(0), Float(math.Copysign(0, -1)), Float(2.5), Float(-1e300), Float(math.MaxFloat64), Float(5e-324), Float(8),
		String("a"), String("b"), String("c"), Bool(true)}
	for _, name := range []string{"F", "I", "J", "K", "S", "U", "p", "q"} {
		cs := m.Conversions("S", name)
		require.Len(t, cs, 1, name)
		c := cs[0]
		for _, v := range values {
			_, out, ok, aerr := m.Apply("S", []Attr{{c.From, v}})
			got, keep, err := c.Convert(v)
			if aerr != nil {
				assert.ErrorIs(t, err, ErrConversion, "%s(%v)", name, v)
				continue
			}
			require.True(t, ok)
			require.NoError(t, err, "%s(%v)", name, v)
			require.Equal(t, len(out) == 1, keep, "%s(%v)", name, v)
			if keep {
				assert.Equal(t, out[0].Value.Kind(), got.Kind(), "%s(%v)", name, v)
				assert.True(t, Equal(out[0].Value, got) || got.IsNaN(), "%s(%v): %v vs %v", name, v, got, out[0].Value)
				assert.Equal(t, got, c.Unbounded(v))
			}
		}
	}
}

// TestConversionUnboundedMonotone: over values of the source kind,
// Unbounded is monotone in the direction of Scale, including where Convert
// fails (int overflow, a fraction into an int attribute).
func TestConversionUnboundedMonotone(t *testing.T) {
	src := mustNew(t, []TypeDef{{Name: "S", Attributes: []Attribute{{Name: "i", Kind: KindInt}, {Name: "f", Kind: KindFloat}, {Name: "n", Kind: KindInt}}}})
	dst := mustNew(t, []TypeDef{{Name: "T", Attributes: []Attribute{{Name: "I", Kind: KindInt}, {Name: "F", Kind: KindInt}, {Name: "N", Kind: KindFloat}}}})
	for _, scale := range []float64{3, -3, 0.5, -0.5, 1e300} {
		m, err := NewMapping(src, dst, MappingSpec{Types: []TypeRule{{From: "S", To: "T"}}, Attributes: []AttributeRule{
			{From: "i", To: "I", Scale: scale, Offset: 5}, {From: "f", To: "F", Scale: scale, Offset: -1}, {From: "n", To: "N", Scale: scale, Offset: 0.25},
		}})
		require.NoError(t, err)
		ints := []int64{math.MinInt64, math.MinInt64 + 1, -3074457345618258603, -1 << 53, -2, -1, 0, 1, 2, 1<<53 + 1, 3074457345618258602, 3074457345618258603, math.MaxInt64 - 1, math.MaxInt64}
		floats := []float64{-math.MaxFloat64, -1e300, -3, -2.5, -5e-324, 0, 5e-324, 1, 2.5, 1e300, math.MaxFloat64}
		check := func(c Conversion, vs []Value) {
			for i := 1; i < len(vs); i++ {
				x, y := c.Unbounded(vs[i-1]), c.Unbounded(vs[i])
				require.True(t, x.IsValid() && y.IsValid())
				cmp, ok := Compare(x, y)
				require.True(t, ok)
				if scale > 0 {
					assert.LessOrEqual(t, cmp, 0, "scale %v: %v→%v, %v→%v", scale, vs[i-1], x, vs[i], y)
				} else {
					assert.GreaterOrEqual(t, cmp, 0, "scale %v: %v→%v, %v→%v", scale, vs[i-1], x, vs[i], y)
				}
			}
		}
		var iv, fv []Value
		for _, i := range ints {
			iv = append(iv, Int(i))
		}
		for _, f := range floats {
			fv = append(fv, Float(f))
		}
		check(m.Conversions("S", "I")[0], iv)
		check(m.Conversions("S", "N")[0], iv)
		check(m.Conversions("S", "F")[0], fv)
	}
}

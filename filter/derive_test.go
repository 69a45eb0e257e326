package filter

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// airMapping is the product's example: Reading {station, pm25, temp °C}
// converts to Observation {site, pm2_5, air_temp_f °F}.
func airMapping(t testing.TB) *ontology.Mapping {
	t.Helper()
	src, err := ontology.New([]ontology.TypeDef{{Name: "Reading", Attributes: []ontology.Attribute{
		{Name: "station", Kind: ontology.KindString},
		{Name: "pm25", Kind: ontology.KindFloat, Unit: "ug/m3"},
		{Name: "temp", Kind: ontology.KindFloat, Unit: "degC"},
	}}})
	require.NoError(t, err)
	dst, err := ontology.New([]ontology.TypeDef{{Name: "Observation", Attributes: []ontology.Attribute{
		{Name: "site", Kind: ontology.KindString},
		{Name: "pm2_5", Kind: ontology.KindFloat, Unit: "ug/m3"},
		{Name: "air_temp_f", Kind: ontology.KindFloat, Unit: "degF"},
	}}})
	require.NoError(t, err)
	m, err := ontology.NewMapping(src, dst, ontology.MappingSpec{
		Types: []ontology.TypeRule{{From: "Reading", To: "Observation"}},
		Attributes: []ontology.AttributeRule{
			{From: "station", To: "site", Values: map[string]string{"Dongsi": "Beijing-East", "Tiantan": "Beijing-East", "Wanliu": "Beijing-West"}},
			{From: "pm25", To: "pm2_5"},
			{From: "temp", To: "air_temp_f", Scale: 1.8, Offset: 32},
		},
	})
	require.NoError(t, err)
	return m
}

// TestDeriveProductExample is what the gateway prints for the example.
// °F < 32 is not °C < 0 exactly: Apply rounds once (fma), so every
// temperature in (-9.87e-16, 0) converts to exactly 32.0 °F, which
// air_temp_f < 32 refuses; the exact source boundary is the least
// temperature that converts to 32.0 or more.
func TestDeriveProductExample(t *testing.T) {
	m := airMapping(t)
	tests := []struct{ name, f, want string }{
		{"linear", `{type ⊑ Observation; air_temp_f < 32}`, `{type ⊑ Reading; temp < -9.868649107779168e-16}`},
		{"rename", `{type ⊑ Observation; pm2_5 > 250}`, `{type ⊑ Reading; pm25 > 250.0}`},
		{"value table", `{type ⊑ Observation; site == "Beijing-East"}`, `{type ⊑ Reading; station in {"Dongsi", "Tiantan"}}`},
		{"all three", `{type ⊑ Observation; site != "Beijing-East"; pm2_5 >= 75; air_temp_f in [50, 212]}`,
			`{type ⊑ Reading; station == "Wanliu"; pm25 >= 75.0; temp in [9.999999999999998, 100.0]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, exact, err := derive(MustCompile(tc.f), m)
			require.NoError(t, err)
			require.Len(t, fs, 1)
			assert.Equal(t, tc.want, fs[0].String())
			assert.True(t, exact)
		})
	}
	t.Run("the boundary", func(t *testing.T) {
		fs, err := Derive(MustCompile(`{type ⊑ Observation; air_temp_f < 32}`), m)
		require.NoError(t, err)
		b := fs[0].Predicates()[0].Value.Float()
		conv := func(c float64) float64 {
			_, out, ok, err := m.Apply("Reading", []ontology.Attr{{Name: "temp", Value: ontology.Float(c)}})
			require.NoError(t, err)
			require.True(t, ok)
			return out[0].Value.Float()
		}
		assert.Equal(t, 32.0, conv(b), "the boundary itself converts to 32")
		assert.Less(t, conv(math.Nextafter(b, math.Inf(-1))), 32.0, "the next value below converts below 32")
		assert.Equal(t, 32.0, conv(-1e-17), "so temp < 0 would let -1e-17 °C cross as 32.0 °F")
	})
}

// world is a source and a target ontology with inheritance and every kind
// of conversion:
//
//	source                                   target
//	Event                                    Observation {site, pm2_5, air_temp_f, n, code, mv, zustand, ok, at}
//	  Reading {station, pm25, temp, count,     IndoorObservation {raum, code2}
//	           code, volts, state, ok, at}     Warning {level, severity}
//	    IndoorReading {room, raum}
//	    Calibration                          (dropped)
//	    Outdoor
//	  Alarm {level, raw}
//	  Note                                   (no rule)
func world(t testing.TB) *ontology.Mapping {
	t.Helper()
	k := func(name string, kind ontology.Kind) ontology.Attribute {
		return ontology.Attribute{Name: name, Kind: kind}
	}
	S, I, F, B, T := ontology.KindString, ontology.KindInt, ontology.KindFloat, ontology.KindBool, ontology.KindTime
	src, err := ontology.New([]ontology.TypeDef{
		{Name: "Event"},
		{Name: "Reading", Parents: []string{"Event"}, Synonyms: []string{"Messung"}, Attributes: []ontology.Attribute{
			k("station", S), k("pm25", F), {Name: "temp", Kind: F, Synonyms: []string{"celsius"}}, k("count", I), k("code", I),
			k("volts", F), k("state", S), k("ok", B), k("at", T)}},
		{Name: "IndoorReading", Parents: []string{"Reading"}, Attributes: []ontology.Attribute{k("room", S), k("raum", S)}},
		{Name: "Calibration", Parents: []string{"Reading"}},
		{Name: "Outdoor", Parents: []string{"Reading"}},
		{Name: "Alarm", Parents: []string{"Event"}, Attributes: []ontology.Attribute{k("level", I), k("raw", I)}},
		{Name: "Note", Parents: []string{"Event"}},
	})
	require.NoError(t, err)
	dst, err := ontology.New([]ontology.TypeDef{
		{Name: "Observation", Synonyms: []string{"Obs"}, Attributes: []ontology.Attribute{
			k("site", S), k("pm2_5", F), {Name: "air_temp_f", Kind: F, Synonyms: []string{"fahrenheit"}}, k("n", F), k("code", I),
			k("mv", I), k("zustand", S), k("ok", B), k("at", T)}},
		{Name: "IndoorObservation", Parents: []string{"Observation"}, Attributes: []ontology.Attribute{k("raum", S), k("code2", I)}},
		{Name: "Warning", Attributes: []ontology.Attribute{k("level", I), k("severity", F)}},
	})
	require.NoError(t, err)
	m, err := ontology.NewMapping(src, dst, ontology.MappingSpec{
		Types: []ontology.TypeRule{
			{From: "Reading", To: "Observation"}, {From: "IndoorReading", To: "IndoorObservation"},
			{From: "Calibration", Drop: true}, {From: "Alarm", To: "Warning"},
		},
		Attributes: []ontology.AttributeRule{
			{From: "station", To: "site", Values: map[string]string{"ST01": "Alpha", "ST02": "Beta", "ST03": "Alpha"}},
			{Type: "IndoorReading", From: "station", To: "site", Values: map[string]string{"ST01": "Indoor"}, KeepUnmapped: true},
			{From: "pm25", To: "pm2_5"},
			{From: "temp", To: "air_temp_f", Scale: 1.8, Offset: 32},
			{From: "count", To: "n"},
			{Type: "IndoorReading", From: "code", To: "code2", Scale: -3, Offset: 7},
			{From: "volts", To: "mv", Scale: 1000},
			{From: "state", To: "zustand"},
			{Type: "IndoorReading", From: "room", To: "raum"},
			{From: "raw", To: "severity", Scale: -0.5, Offset: 1e-3},
		},
	})
	require.NoError(t, err)
	return m
}

func TestDerive(t *testing.T) {
	m := world(t)
	tests := []struct {
		name, f string
		want    []string
		exact   bool
	}{
		{"type only collapses to the highest source type", `{type ⊑ Obs}`, []string{`{type ⊑ Reading}`}, true},
		{"subtype", `{type ⊑ IndoorObservation}`, []string{`{type ⊑ IndoorReading}`}, true},
		{"every type: unconverted Event and Note are not used", `{}`, []string{`{type ⊑ Reading}`, `{type ⊑ Alarm}`}, true},
		{"a type nothing converts to", `{type ⊑ Warning; level > 3}`, []string{`{type ⊑ Alarm; level > 3}`}, true},
		{"rename, literal of the source kind", `{type ⊑ Obs; pm2_5 > 250}`, []string{`{type ⊑ Reading; pm25 > 250.0}`}, true},
		{"rename exists", `{type ⊑ Obs; pm2_5 exists}`, []string{`{type ⊑ Reading; pm25 exists}`}, true},
		{"int to float", `{type ⊑ Obs; n >= 2.5}`, []string{`{type ⊑ Reading; count >= 3}`}, true},
		{"int to float, no int converts to 2^53+1", `{type ⊑ Obs; n == 9007199254740993}`, nil, true},
		{"int to float, two ints round to 2^53", `{type ⊑ Obs; n == 9007199254740992.0}`,
			[]string{`{type ⊑ Reading; count in [9007199254740992, 9007199254740993]}`}, true},
		{"linear, synonym of the attribute", `{type ⊑ Obs; fahrenheit < 32}`, []string{`{type ⊑ Reading; temp < -9.868649107779168e-16}`}, true},
		{"linear >= from an integral image", `{type ⊑ Obs; air_temp_f >= 212}`, []string{`{type ⊑ Reading; temp >= 100.0}`}, true},
		{"linear != is the two sides", `{type ⊑ Obs; air_temp_f != 212}`, []string{`{type ⊑ Reading; temp != 100.0}`}, true},
		{"negative scale flips", `{type ⊑ Warning; severity > 0}`, []string{`{type ⊑ Alarm; raw < 1}`}, true},
		{"negative scale range", `{type ⊑ Warning; severity in [-1, 0.001]}`, []string{`{type ⊑ Alarm; raw in [0, 2]}`}, true},
		{"exact int arithmetic, negative scale", `{type ⊑ IndoorObservation; code2 >= 1}`, []string{`{type ⊑ IndoorReading; code <= 2}`}, true},
		{"equality with a preimage", `{type ⊑ IndoorObservation; code2 == 4}`, []string{`{type ⊑ IndoorReading; code == 1}`}, true},
		{"equality without a preimage", `{type ⊑ IndoorObservation; code2 == 5}`, nil, true},
		{"in: preimages only", `{type ⊑ IndoorObservation; code2 in {4, 5, 7}}`, []string{`{type ⊑ IndoorReading; code in {0, 1}}`}, true},
		{"not in", `{type ⊑ IndoorObservation; code2 not in {4, 5, 7.5}}`, []string{`{type ⊑ IndoorReading; code != 1}`}, true},
		{"value table ==, and a subtype's own table", `{type ⊑ Obs; site == "Alpha"}`,
			[]string{`{type ⊑ Reading; station in {"ST01", "ST03"}}`, `{type ⊑ IndoorReading; station == "Alpha"}`}, false},
		{"KeepUnmapped in", `{type ⊑ IndoorObservation; site in {"Indoor", "ST01", "X"}}`,
			[]string{`{type ⊑ IndoorReading; station in {"Indoor", "ST01", "X"}}`}, true},
		{"KeepUnmapped !=", `{type ⊑ IndoorObservation; site != "Indoor"}`,
			[]string{`{type ⊑ IndoorReading; station not in {"Indoor", "ST01"}}`}, true},
		{"KeepUnmapped prefix", `{type ⊑ IndoorObservation; site prefix "In"}`,
			[]string{`{type ⊑ IndoorReading; station == "ST01"}`, `{type ⊑ IndoorReading; station prefix "In"}`}, true},
		{"table exists", `{type ⊑ Obs; site exists; zustand == "on"}`, []string{
			`{type ⊑ Reading; station in {"ST01", "ST02", "ST03"}; state == "on"}`,
			`{type ⊑ IndoorReading; station exists; state == "on"}`}, false},
		{"attribute the type never gets: exists", `{type ⊑ Obs; code exists}`, []string{`{type ⊑ Reading; code exists}`}, false},
		{"attribute the type never gets: not exists", `{type ⊑ IndoorObservation; code not exists}`, []string{`{type ⊑ IndoorReading}`}, true},
		{"attribute the type never gets: ==", `{type ⊑ IndoorObservation; code == 1}`, nil, true},
		{"two source attributes give one", `{type ⊑ IndoorObservation; raum == "K1"}`,
			[]string{`{type ⊑ IndoorReading; raum == "K1"}`, `{type ⊑ IndoorReading; room == "K1"}`}, true},
		{"two source attributes, not exists", `{type ⊑ IndoorObservation; raum not exists}`,
			[]string{`{type ⊑ IndoorReading; raum not exists; room not exists}`}, true},
		{"payload, bool and time unchanged", `{type ⊑ Warning; xmlns:s = "urn:s"; json(a.b) > 1; xpath(/s:r) exists; level exists}`,
			[]string{`{type ⊑ Alarm; xmlns:s = "urn:s"; json(a.b) > 1; xpath(/s:r) exists; level exists}`}, true},
		{"bool and time pass through", `{type ⊑ IndoorObservation; ok == true; at >= time("2024-01-01T00:00:00Z")}`,
			[]string{`{type ⊑ IndoorReading; ok == true; at >= time("2024-01-01T00:00:00Z")}`}, true},
		{"atleast", `{type ⊑ Warning; match atleast 1; level > 3; severity > 0}`,
			[]string{`{type ⊑ Alarm; match atleast 1; level > 3; raw < 1}`}, true},
		{"score keeps weights", `{type ⊑ Warning; match score >= 2; level > 3 weight 1.5; severity > 0; json(x) exists weight 0.5}`,
			[]string{`{type ⊑ Alarm; match score >= 2; level > 3 weight 1.5; raw < 1; json(x) exists weight 0.5}`}, true},
		{"atleast: a predicate that never holds leaves, K = N is match all", `{type ⊑ IndoorObservation; match atleast 2; code == 1; code2 >= 1; pm2_5 > 1}`,
			[]string{`{type ⊑ IndoorReading; code <= 2; pm25 > 1.0}`}, true},
		{"atleast: K out of reach", `{type ⊑ IndoorObservation; match atleast 2; code == 1; code2 == 5}`, nil, true},
		{"atleast: always holding becomes true", `{type ⊑ IndoorObservation; match atleast 2; code not exists; code2 == 4; pm2_5 > 1}`,
			[]string{`{type ⊑ IndoorReading; match atleast 2; true; code == 1; pm25 > 1.0}`}, true},
		{"score widened to true reaches the threshold: type only", `{type ⊑ IndoorObservation; match score >= 1; raum == "K1" weight 2; code2 >= 1}`,
			[]string{`{type ⊑ IndoorReading}`}, false},
		{"score widened to exists", `{type ⊑ IndoorObservation; match score >= 3; code2 != 4 weight 2; air_temp_f != 32; pm2_5 > 1}`,
			[]string{`{type ⊑ IndoorReading; match score >= 3; code != 1 weight 2; temp exists; pm25 > 1.0}`}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, exact, err := derive(MustCompile(tc.f), m)
			require.NoError(t, err)
			assert.Equal(t, tc.want, texts(fs))
			assert.Equal(t, tc.exact, exact, "exact")
			checkCanonical(t, m.From(), fs)
		})
	}
}

func texts(fs []*Filter) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

// checkCanonical: derived filters are canonical for the source ontology
// and read back from their text.
func checkCanonical(t *testing.T, o *ontology.Ontology, fs []*Filter) {
	t.Helper()
	seen := map[string]bool{}
	for _, g := range fs {
		r, err := Resolve(o, g)
		require.NoError(t, err, "%s", g)
		assert.Same(t, g, r, "%s is canonical", g)
		assert.Equal(t, g.String(), MustCompile(g.String()).String())
		assert.False(t, seen[g.String()], "duplicate %s", g)
		seen[g.String()] = true
	}
}

func TestDeriveWidening(t *testing.T) {
	m := world(t)
	t.Run("at most 16 filters per source type", func(t *testing.T) {
		var sa, ta []ontology.Attribute
		var rules []ontology.AttributeRule
		for _, n := range []string{"a", "b", "c", "d", "e"} {
			sa = append(sa, ontology.Attribute{Name: n, Kind: ontology.KindFloat})
			ta = append(ta, ontology.Attribute{Name: n + "F", Kind: ontology.KindFloat})
			rules = append(rules, ontology.AttributeRule{From: n, To: n + "F", Scale: 1.8, Offset: 32})
		}
		src, err := ontology.New([]ontology.TypeDef{{Name: "S", Attributes: sa}})
		require.NoError(t, err)
		dst, err := ontology.New([]ontology.TypeDef{{Name: "T", Attributes: ta}})
		require.NoError(t, err)
		m, err := ontology.NewMapping(src, dst, ontology.MappingSpec{Types: []ontology.TypeRule{{From: "S", To: "T"}}, Attributes: rules})
		require.NoError(t, err)
		// Several °C round to 32 °F, so each != 32 is two sides: 2^5 = 32 filters.
		fs, exact, err := derive(MustCompile(`{aF != 32; bF != 32; cF != 32; dF != 32; eF != 32}`), m)
		require.NoError(t, err)
		assert.False(t, exact)
		require.Len(t, fs, 16)
		for _, g := range fs {
			ps := g.Predicates()
			require.Len(t, ps, 5)
			assert.Equal(t, "e exists", formatPredicate(&ps[4]), "the last predicate is widened")
		}
		assert.Equal(t, `{type ⊑ S; a < -9.868649107779168e-16; b < -9.868649107779168e-16; c < -9.868649107779168e-16; d < -9.868649107779168e-16; e exists}`, fs[0].String())
		checkCanonical(t, src, fs)
	})
	t.Run("folded alternatives", func(t *testing.T) {
		fs, exact, err := derive(MustCompile(`{type ⊑ Obs; air_temp_f != 32; air_temp_f != 50; air_temp_f not in {32, 50}}`), m)
		require.NoError(t, err)
		assert.True(t, exact)
		assert.Equal(t, []string{`{type ⊑ Reading; temp < -9.868649107779168e-16}`, `{type ⊑ Reading; temp > 10.0}`,
			`{type ⊑ Reading; temp in (1.9737298215558335e-15, 9.999999999999998)}`}, texts(fs), "contradictory sides are gone")
	})
	t.Run("a table with KeepUnmapped", func(t *testing.T) {
		fs, exact, err := derive(MustCompile(`{type ⊑ IndoorObservation; site not exists}`), m)
		require.NoError(t, err)
		assert.True(t, exact)
		assert.Equal(t, []string{`{type ⊑ IndoorReading; station not exists}`}, texts(fs))
		fs, exact, err = derive(MustCompile(`{type ⊑ Obs; site not exists}`), m)
		require.NoError(t, err)
		assert.False(t, exact, "Reading's table drops unmapped values, IndoorReading's keeps them")
		assert.Equal(t, []string{`{type ⊑ Reading; station not exists}`, `{type ⊑ Reading; station not in {"ST01", "ST02", "ST03"}}`,
			`{type ⊑ IndoorReading; station not exists}`}, texts(fs))
	})
}

func TestDeriveErrors(t *testing.T) {
	m := world(t)
	tests := []struct {
		name string
		f    *Filter
		m    *ontology.Mapping
		msg  string
	}{
		{"nil filter", nil, m, "filter: derive: nil filter"},
		{"nil mapping", MustCompile(`{}`), nil, "filter: derive: nil mapping"},
		{"unknown type", MustCompile(`{type ⊑ Reading}`), m, `filter: unknown event type "Reading" (target ontology)`},
		{"unknown attribute", MustCompile(`{type ⊑ Warning; temp > 1}`), m,
			`filter: predicate 1 (temp > 1): attribute "temp" is not in the vocabulary of event type "Warning", its ancestors or its subtypes (target ontology)`},
		{"unknown attribute on every type", MustCompile(`{temp > 1}`), m,
			`filter: predicate 1 (temp > 1): attribute "temp" is not in the vocabulary of any event type (target ontology)`},
		{"literal of the wrong kind", MustCompile(`{type ⊑ Obs; site == 1}`), m,
			`filter: predicate 1 (site == 1): attribute "site" is string; 1 is of kind int (target ontology)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := Derive(tc.f, tc.m)
			assert.Nil(t, fs)
			assert.EqualError(t, err, tc.msg)
			assert.ErrorIs(t, err, ErrInvalid)
			var be *BuildError
			assert.True(t, errors.As(err, &be))
		})
	}
}

// deriveWorld generates, for the world mapping, random filters over the
// target ontology and random valid events of the source ontology, with
// literals and values drawn from the conversions' images and from the
// boundaries that Derive computed.
type deriveWorld struct {
	r     *rand.Rand
	m     *ontology.Mapping
	src   map[string][]ontology.Value // source attribute → values
	tgt   map[string][]ontology.Value // target attribute → literals
	kinds map[string]ontology.Kind    // target attribute → kind
}

var (
	deriveInts = []int64{0, 1, -1, 2, 3, -2, 4, 7, 100, -100, 1 << 53, 1<<53 + 1, -(1<<53 + 1), math.MaxInt64, math.MinInt64,
		math.MaxInt64 - 1, math.MinInt64 + 1, 3074457345618258602, 3074457345618258603, -3074457345618258603}
	deriveFloats = []float64{0, math.Copysign(0, -1), 1, -1, 2.5, -2.5, 0.5, 1.5, 32, -17.77777777777778, 100, 37,
		250, 250.00000000000003, 5e-324, -5e-324, -1e-17, 1e-16, math.MaxFloat64, -math.MaxFloat64, 1e300, -1e300,
		1 << 53, 1<<53 + 2, 0.1, 0.2, 0.30000000000000004, 9.999999999999998, 0.0015, 0.001}
	deriveStrings = []string{"ST01", "ST02", "ST03", "Alpha", "Beta", "Indoor", "In", "K1", "X", "", "on", "off", "ST0"}
)

func newDeriveWorld(t testing.TB, seed uint64) *deriveWorld {
	t.Helper()
	w := &deriveWorld{r: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)), m: world(t),
		src: map[string][]ontology.Value{}, tgt: map[string][]ontology.Value{}, kinds: map[string]ontology.Kind{}}
	from, to := w.m.From(), w.m.To()
	pool := func(k ontology.Kind) []ontology.Value {
		var vs []ontology.Value
		switch k {
		case ontology.KindInt:
			for _, i := range deriveInts {
				vs = append(vs, ontology.Int(i))
			}
		case ontology.KindFloat:
			for _, f := range deriveFloats {
				vs = append(vs, ontology.Float(f))
			}
		case ontology.KindString:
			for _, s := range deriveStrings {
				vs = append(vs, ontology.String(s))
			}
		case ontology.KindBool:
			vs = []ontology.Value{ontology.Bool(true), ontology.Bool(false)}
		case ontology.KindTime:
			vs = []ontology.Value{ontology.TimeNanos(0), ontology.TimeNanos(1704067200e9), ontology.TimeNanos(1704067200e9 - 1)}
		}
		return vs
	}
	for id := range from.NumTypes() {
		for _, a := range from.Vocabulary(id) {
			if _, ok := w.src[a.Name]; !ok {
				w.src[a.Name] = pool(a.Kind)
			}
		}
	}
	for id := range to.NumTypes() {
		for _, a := range to.Vocabulary(id) {
			if ontology.IsReserved(to.Type(id).Name) {
				continue
			}
			w.kinds[a.Name] = a.Kind
			w.tgt[a.Name] = pool(a.Kind)
			if a.Kind == ontology.KindInt {
				w.tgt[a.Name] = append(w.tgt[a.Name], ontology.Float(2.5), ontology.Float(-0.5), ontology.Float(0x1p63))
			}
			if a.Kind == ontology.KindFloat {
				w.tgt[a.Name] = append(w.tgt[a.Name], ontology.Int(1<<53+1), ontology.Int(math.MaxInt64), ontology.Int(32))
			}
		}
	}
	// The images of the source values are the literals that sit on boundaries.
	for id := range from.NumTypes() {
		name := from.Type(id).Name
		for x := range w.tgt {
			for _, c := range w.m.Conversions(name, x) {
				for _, v := range w.src[c.From] {
					if out, keep, err := c.Convert(v); err == nil && keep && out.IsFinite() {
						w.tgt[x] = append(w.tgt[x], out)
					}
				}
			}
		}
	}
	return w
}

func (w *deriveWorld) pick(vs []ontology.Value) ontology.Value { return vs[w.r.IntN(len(vs))] }

func (w *deriveWorld) predicate(attrs []string) Predicate {
	r := w.r
	if r.IntN(15) == 0 {
		return JSON("j").GT(ontology.Int(int64(r.IntN(3))))
	}
	x := attrs[r.IntN(len(attrs))]
	k, o := w.kinds[x], Attr(x)
	ops := []Op{OpEQ, OpNE, OpIn, OpNotIn, OpExists, OpNotExists}
	if k != ontology.KindBool {
		ops = append(ops, OpLT, OpLE, OpGT, OpGE, OpRange, OpLT, OpGE)
	}
	if k == ontology.KindString {
		ops = append(ops, OpPrefix, OpSuffix, OpContains)
	}
	switch op := ops[r.IntN(len(ops))]; op {
	case OpIn, OpNotIn:
		p := Predicate{Operand: o, Op: op}
		for range 1 + r.IntN(3) {
			p.Set = append(p.Set, w.pick(w.tgt[x]))
		}
		return p
	case OpRange:
		lo, hi := w.pick(w.tgt[x]), w.pick(w.tgt[x])
		c, _ := ontology.Compare(lo, hi)
		if c > 0 {
			lo, hi = hi, lo
		}
		return o.Range(lo, hi, c != 0 && r.IntN(2) == 0, c != 0 && r.IntN(2) == 0)
	case OpExists, OpNotExists:
		return Predicate{Operand: o, Op: op}
	case OpPrefix, OpSuffix, OpContains:
		s := w.pick(w.tgt[x]).Str()
		if len(s) > 0 && r.IntN(2) == 0 {
			s = s[:r.IntN(len(s))]
		}
		return o.pred(op, ontology.String(s))
	default:
		return o.pred(op, w.pick(w.tgt[x]))
	}
}

func (w *deriveWorld) filter() *Filter {
	r := w.r
	to := w.m.To()
	types := []string{AnyType, "Observation", "IndoorObservation", "Warning", "Observation"}
	spec := Spec{Type: types[r.IntN(len(types))]}
	var attrs []string
	for x := range w.kinds {
		if spec.Type == AnyType {
			attrs = append(attrs, x)
		} else if tt, _ := to.Lookup(spec.Type); func() bool { _, ok := to.AttributeBelow(tt.ID, x); return ok }() {
			attrs = append(attrs, x)
		}
	}
	slices.Sort(attrs)
	n := r.IntN(4)
	for range n {
		spec.Predicates = append(spec.Predicates, w.predicate(attrs))
	}
	switch m := r.IntN(8); {
	case m == 6 && n > 0:
		spec.Mode, spec.AtLeast = ModeAtLeast, 1+r.IntN(n)
	case m == 7 && n > 0:
		spec.Mode = ModeScore
		total := 0.0
		for i := range spec.Predicates {
			spec.Predicates[i].Weight = float64(1+r.IntN(4)) / 2
			total += spec.Predicates[i].Weight
		}
		spec.Threshold = min(total, 0.5+float64(r.IntN(2*n)))
	}
	f, err := Build(spec)
	if err != nil {
		panic(err)
	}
	return f
}

// event returns a valid event of a random source type: attributes of its
// vocabulary, of the declared kinds.
func (w *deriveWorld) event() *BasicEvent {
	from := w.m.From()
	var types []string
	for id := range from.NumTypes() {
		if name := from.Type(id).Name; !ontology.IsReserved(name) {
			types = append(types, name)
		}
	}
	t, _ := from.Lookup(types[w.r.IntN(len(types))])
	ev := &BasicEvent{Type: t.Name}
	for _, a := range from.Vocabulary(t.ID) {
		if w.r.IntN(5) < 2 {
			continue
		}
		ev.Attrs = append(ev.Attrs, ontology.Attr{Name: a.Name, Value: w.pick(w.src[a.Name])})
	}
	if w.r.IntN(3) == 0 {
		ev.ContentType, ev.Data = "application/json", []byte(`{"j": `+[]string{"0", "1", "2", "3"}[w.r.IntN(4)]+`}`)
	}
	return ev
}

// learn adds the literals of derived filters, and their neighbours, to the
// source values, so that events land on the computed boundaries.
func (w *deriveWorld) learn(fs []*Filter) {
	add := func(name string, v ontology.Value) {
		vs := []ontology.Value{v}
		switch v.Kind() {
		case ontology.KindInt:
			if v.Int() > math.MinInt64 {
				vs = append(vs, ontology.Int(v.Int()-1))
			}
			if v.Int() < math.MaxInt64 {
				vs = append(vs, ontology.Int(v.Int()+1))
			}
		case ontology.KindFloat:
			for _, d := range []float64{math.Inf(1), math.Inf(-1)} {
				if n := math.Nextafter(v.Float(), d); !math.IsInf(n, 0) {
					vs = append(vs, ontology.Float(n))
				}
			}
		}
		if len(w.src[name]) < 400 {
			w.src[name] = append(w.src[name], vs...)
		}
	}
	for _, f := range fs {
		for _, p := range f.Predicates() {
			if p.Operand.Source != SourceAttr {
				continue
			}
			for _, v := range append([]ontology.Value{p.Value, p.Hi}, p.Set...) {
				if v.IsValid() {
					add(p.Operand.Name, v)
				}
			}
		}
	}
}

func matchesIn(o *ontology.Ontology, f *Filter, ev Event) bool {
	if f.Type() != AnyType {
		t, ok := o.Lookup(f.Type())
		e, known := o.Lookup(ev.EventType())
		if !ok || !known || !o.IsA(e.ID, t.ID) {
			return false
		}
	}
	ok, _ := f.Eval(ev)
	return ok
}

// TestDeriveProperty: for random filters over the target ontology and
// random valid source events, a derived filter matches every event whose
// conversion the filter matches (always), and only those (when derive
// claims exactness).
func TestDeriveProperty(t *testing.T) {
	filters, events := 1500, 80
	if testing.Short() {
		filters = 300
	}
	for _, seed := range []uint64{1, 2} {
		w := newDeriveWorld(t, seed)
		from, to := w.m.From(), w.m.To()
		var wanted, exactFilters, crossed int
		for range filters {
			f := w.filter()
			fs, exact, err := derive(f, w.m)
			require.NoError(t, err, "%s", f)
			checkCanonical(t, from, fs)
			w.learn(fs)
			if exact {
				exactFilters++
			}
			for range events {
				ev := w.event()
				tt, out, ok, err := w.m.Apply(ev.Type, ev.Attrs)
				if err != nil || !ok {
					continue
				}
				crossed++
				want := matchesIn(to, f, &BasicEvent{Type: tt, Attrs: out, ContentType: ev.ContentType, Data: ev.Data})
				got := slices.ContainsFunc(fs, func(g *Filter) bool { return matchesIn(from, g, ev) })
				if want {
					wanted++
				}
				if want && !got {
					t.Fatalf("seed %d: lost an event\nfilter  %s\nderived %v\nsource  %s %v\ntarget  %s %v", seed, f, texts(fs), ev.Type, ev.Attrs, tt, out)
				}
				if exact && got && !want {
					t.Fatalf("seed %d: derived filters claimed exact match an event the filter refuses\nfilter  %s\nderived %v\nsource  %s %v\ntarget  %s %v", seed, f, texts(fs), ev.Type, ev.Attrs, tt, out)
				}
			}
		}
		t.Logf("seed %d: %d of %d filters exact; %d of %d converted events wanted", seed, exactFilters, filters, wanted, crossed)
		assert.Greater(t, exactFilters, filters/2)
		assert.Greater(t, wanted, crossed/50)
	}
}

func BenchmarkDerive(b *testing.B) {
	m := world(b)
	for _, src := range []string{
		`{type ⊑ Observation; air_temp_f < 32}`,
		`{type ⊑ Observation; site == "Alpha"; pm2_5 > 250; air_temp_f in [50, 212]}`,
		`{air_temp_f != 32; n >= 2.5; mv == 1500}`,
	} {
		f := MustCompile(src)
		b.Run(src, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Derive(f, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestSimplifyConj(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"bounds fold to the tightest", `{x > 1; x >= 2; x < 9; x <= 9}`, `{type ⊑ *; x in [2, 9)}`},
		{"open beats closed at a tie", `{x <= 5; x < 5; x >= 1.0; x > 1}`, `{type ⊑ *; x in (1, 5)}`},
		{"empty interval", `{x > 5; x < 5}`, ``},
		{"one point", `{x >= 5; x <= 5.0}`, `{type ⊑ *; x == 5}`},
		{"incomparable literals stay", `{x > 5; x < "a"}`, `{type ⊑ *; x > 5; x < "a"}`},
		{"members filtered by the other tests", `{x in {1, 2, 3, 4}; x > 1; x != 3; x exists}`, `{type ⊑ *; x in {2, 4}}`},
		{"two memberships intersect", `{x in {"a", "b"}; x in {"b", "c"}}`, `{type ⊑ *; x == "b"}`},
		{"no member left", `{x == 1; x > 1}`, ``},
		{"missing and present conflict", `{x not exists; x exists}`, ``},
		{"missing and a test conflict", `{x not exists; x prefix "a"}`, ``},
		{"exists is implied", `{x exists; x prefix "a"; y exists}`, `{type ⊑ *; x prefix "a"; y exists}`},
		{"duplicates and other operands kept in order", `{json(x) > 1; x != 1; x != 1; true; y not exists}`, `{type ⊑ *; json(x) > 1; x != 1; true; y not exists}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := simplifyConj(MustCompile(tc.in).Predicates())
			if tc.want == "" {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tc.want, MustBuild(Spec{Predicates: c}).String())
		})
	}
}

// TestNumDomainFirst: the search finds the boundary anywhere in the
// domain, from any guess, within its bound on calls.
func TestNumDomainFirst(t *testing.T) {
	ints := &numDomain{isInt: true, min: math.MinInt64, max: math.MaxInt64}
	floats := &numDomain{min: -maxFloatKey, max: maxFloatKey}
	bounds := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, 1 << 40, math.MaxInt64 - 1, math.MaxInt64}
	guesses := []int64{math.MinInt64, -5, 0, 7, math.MaxInt64}
	for _, nd := range []*numDomain{ints, floats} {
		for _, b := range bounds {
			b = max(nd.min, min(nd.max, b))
			for _, g := range guesses {
				calls := 0
				k, ok := nd.first(func(k int64) bool { calls++; return k >= b }, g)
				assert.True(t, ok)
				assert.Equal(t, b, k, "boundary %d from guess %d", b, g)
				assert.LessOrEqual(t, calls, 140)
			}
		}
		for _, g := range guesses {
			_, ok := nd.first(func(int64) bool { return false }, g)
			assert.False(t, ok, "holds nowhere")
		}
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 5e-324, -5e-324, 1, -2.5, math.MaxFloat64, -math.MaxFloat64} {
		assert.Equal(t, f, keyFloat(floatKey(f)), "%v", f)
		if f != 0 {
			assert.Equal(t, math.Nextafter(f, math.Inf(1)), keyFloat(floatKey(f)+1), "%v", f)
		}
	}
	assert.Equal(t, int64(0), floatKey(math.Copysign(0, -1)), "-0.0 and 0.0 are one key")
}

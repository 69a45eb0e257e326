package cloudevents_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// ceAttr returns the string form of CloudEvent attribute name of ce, as
// the Subscriptions API compares it, and whether ce has it.
func ceAttr(ce event.Event, name string) (string, bool) {
	switch name {
	case "specversion":
		return ce.SpecVersion(), true
	case "id":
		return ce.ID(), true
	case "source":
		return ce.Source(), true
	case "type":
		return ce.Type(), true
	case "subject":
		return ce.Subject(), ce.Subject() != ""
	case "time":
		if ce.Time().IsZero() {
			return "", false
		}
		return types.FormatTime(ce.Time()), true
	case "datacontenttype":
		return ce.DataContentType(), ce.DataContentType() != ""
	case "dataschema":
		return ce.DataSchema(), ce.DataSchema() != ""
	}
	v, ok := ce.Extensions()[name]
	if !ok {
		return "", false
	}
	s, err := types.Format(v)
	if err != nil {
		panic(err)
	}
	return s, true
}

// refEval is the reference: the Subscriptions API's dialects evaluated on
// a CloudEvent, straight from the spec (subscriptions/spec.md, 3.2.4),
// over the decoded JSON expression.
func refEval(x any, ce event.Event) bool {
	if list, ok := x.([]any); ok {
		for _, e := range list {
			if !refEval(e, ce) {
				return false
			}
		}
		return true
	}
	for dialect, body := range x.(map[string]any) {
		switch dialect {
		case "all":
			return refEval(body, ce)
		case "any":
			for _, e := range body.([]any) {
				if refEval(e, ce) {
					return true
				}
			}
			return false
		case "not":
			return !refEval(body, ce)
		}
		for k, v := range body.(map[string]any) {
			s, ok := ceAttr(ce, k)
			if !ok {
				return false
			}
			var holds bool
			switch dialect {
			case "exact":
				holds = s == v.(string)
			case "prefix":
				holds = strings.HasPrefix(s, v.(string))
			case "suffix":
				holds = strings.HasSuffix(s, v.(string))
			default:
				panic(dialect)
			}
			if !holds {
				return false
			}
		}
		return true
	}
	panic("empty expression")
}

// weekCE is one event of the week with its CloudEvent.
type weekCE struct {
	ev *sion.Event
	ce event.Event
}

func convertWeek(t *testing.T, c *cloudevents.Codec, week []*sion.Event) []weekCE {
	t.Helper()
	out := make([]weekCE, len(week))
	for i, ev := range week {
		ce, err := c.ToCloudEvent(ev)
		require.NoError(t, err)
		out[i] = weekCE{ev, ce}
	}
	return out
}

// matcher returns whether any of fs matches an event, through an Index
// (the type test included).
func matcher(t *testing.T, o *ontology.Ontology, fs []*filter.Filter) func(*sion.Event) bool {
	t.Helper()
	x := filter.NewIndex(o)
	for i, f := range fs {
		require.NoError(t, x.Add(uint64(i), f), "%s", f)
	}
	return func(ev *sion.Event) bool {
		hit := false
		x.Match(ev, func(uint64, float64) { hit = true })
		return hit
	}
}

// decode reads JSON text as CompileFilters' decoded form.
func decode(t *testing.T, src string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(src), &v))
	return v
}

// compare compiles src with c and checks, event by event, that the
// compiled filters match exactly the events whose CloudEvents pass the
// reference evaluation; it returns how many do.
func compare(t *testing.T, c *cloudevents.Codec, o *ontology.Ontology, events []weekCE, src string) (int, []*filter.Filter) {
	t.Helper()
	fs, err := c.CompileFilters([]byte(src))
	require.NoError(t, err, src)
	expr := decode(t, src)
	fs2, err := c.CompileFilters(expr)
	require.NoError(t, err)
	require.Equal(t, filterStrings(fs), filterStrings(fs2), "the bytes and the decoded value compile alike")
	match := matcher(t, o, fs)
	n := 0
	for _, w := range events {
		want := refEval(expr, w.ce)
		require.Equal(t, want, match(w.ev), "%s\nfilters %v\nevent %s", src, filterStrings(fs), w.ev)
		if want {
			n++
		}
	}
	return n, fs
}

func filterStrings(fs []*filter.Filter) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}

// usgsCodecs are the two configurations the dialect tests run over: time
// and subject in context attributes with a fixed source and a type
// prefix, and everything as extensions (time renamed) with the source
// following the place and no prefix.
func usgsCodecs(t testing.TB, o *ontology.Ontology) (ctx, ext *cloudevents.Codec) {
	t.Helper()
	ctx, err := cloudevents.NewCodec(cloudevents.Config{Ontology: o, TypePrefix: "gov.usgs.", Source: "https://earthquake.usgs.gov/", TimeAttribute: "time", SubjectAttribute: "place"})
	require.NoError(t, err)
	ext, err = cloudevents.NewCodec(cloudevents.Config{Ontology: o, Extensions: map[string]string{"time": "origintime"}})
	require.NoError(t, err)
	return ctx, ext
}

func TestCompileFiltersUSGS(t *testing.T) {
	o, week, _, _ := publishedWeek(t)
	ctxCodec, extCodec := usgsCodecs(t, o)
	ctxEvents, extEvents := convertWeek(t, ctxCodec, week), convertWeek(t, extCodec, week)
	t0, _ := ceAttr(ctxEvents[0].ce, "time")
	t7, _ := ceAttr(ctxEvents[7].ce, "time")
	place3, _ := ceAttr(ctxEvents[3].ce, "subject")
	require.NotEqual(t, t0, t7)

	cases := []struct {
		name    string
		ext     bool // the extensions codec
		src     string
		filters int // how many filters it compiles to
		// want is how many events of the week match (the data: 2,346
		// earthquakes, 20 explosions, 16 quarry blasts, 5 other events,
		// 2 ice quakes; tsunami 1 on 6; alert green on 15, yellow on 1,
		// missing on the others; mag 1.5 on 60).
		want int
	}{
		{"exact type without subtypes", false, `[{"exact":{"type":"gov.usgs.explosion"}}]`, 1, 20},
		{"prefix type", false, `[{"prefix":{"type":"gov.usgs.e"}}]`, 2, 2366},
		{"suffix type", false, `[{"suffix":{"type":"quake"}}]`, 2, 2348},
		{"prefix type selecting every type", false, `[{"prefix":{"type":"gov.usgs."}}, {"exact":{"tsunami":"1"}}]`, 1, 6},
		{"any of exact types closed under subtypes is one type", false, `[{"any":[{"exact":{"type":"gov.usgs.earthquake"}},{"exact":{"type":"gov.usgs.seismic"}},{"exact":{"type":"gov.usgs.ice quake"}}]}]`, 1, 2348},
		{"not of types closed under ancestors", false, `[{"all":[{"not":{"exact":{"type":"gov.usgs.hazard"}}},{"not":{"exact":{"type":"gov.usgs.natural"}}},{"not":{"exact":{"type":"gov.usgs.seismic"}}},{"not":{"exact":{"type":"gov.usgs.earthquake"}}}]}]`, 4, 43},
		{"not any of types", false, `[{"not":{"any":[{"prefix":{"type":"gov.usgs.hazard"}},{"exact":{"type":"gov.usgs.natural"}},{"exact":{"type":"gov.usgs.seismic"}},{"exact":{"type":"gov.usgs.earthquake"}}]}}]`, 4, 43},
		{"exact float extension", false, `[{"exact":{"mag":"1.5"}}]`, 1, 60},
		{"exact int extension", false, `[{"exact":{"tsunami":"1"}}]`, 1, 6},
		{"not exact int extension", false, `[{"not":{"exact":{"tsunami":"0"}}}]`, 2, 6},
		{"not exact of a mostly missing extension", false, `[{"not":{"exact":{"alert":"green"}}}]`, 2, 2389 - 15},
		{"exact string extension", false, `[{"exact":{"alert":"yellow"}}]`, 1, 1},
		{"prefix subject", false, `[{"prefix":{"subject":"1"}}]`, 1, 509},
		{"suffix subject", false, `[{"suffix":{"subject":", Alaska"}}]`, 1, -1},
		{"exact subject", false, `[{"exact":{"subject":` + quote(place3) + `}}]`, 1, -1},
		{"not exact subject", false, `[{"not":{"exact":{"subject":` + quote(place3) + `}}}]`, 2, -1},
		{"exact time", false, `[{"exact":{"time":` + quote(t0) + `}}]`, 1, -1},
		{"any of exact times", false, `[{"any":[{"exact":{"time":` + quote(t0) + `}},{"exact":{"time":` + quote(t7) + `}}]}]`, 2, -1},
		{"several keys in one exact", false, `[{"exact":{"type":"gov.usgs.earthquake","tsunami":"1"}}]`, 1, -1},
		{"several keys in one prefix", false, `[{"prefix":{"type":"gov.usgs.e","subject":"1"}}]`, 2, -1},
		{"constant source and specversion", false, `[{"exact":{"source":"https://earthquake.usgs.gov/"}},{"prefix":{"specversion":"1"}},{"suffix":{"type":"blast"}}]`, 1, 16},
		{"constant false in any", false, `[{"any":[{"exact":{"source":"https://example.com/"}},{"exact":{"specversion":"0.3"}},{"exact":{"dataschema":"x"}},{"exact":{"alert":"green"}}]}]`, 1, 15},
		{"not of a missing context attribute", false, `[{"not":{"prefix":{"dataschema":"x"}}},{"exact":{"alert":"green"}}]`, 1, 15},
		{"all any not mixed", false, `[{"all":[{"prefix":{"type":"gov.usgs."}},{"suffix":{"subject":"Alaska"}},{"not":{"exact":{"mag":"1.5"}}}]}]`, 2, -1},
		{"any of all", false, `[{"any":[{"all":[{"exact":{"type":"gov.usgs.explosion"}},{"prefix":{"subject":"1"}}]},{"not":{"exact":{"tsunami":"0"}}},{"exact":{"alert":"yellow"}}]}]`, 4, -1},
		{"not all", false, `[{"prefix":{"type":"gov.usgs.quarry"}},{"not":{"all":[{"exact":{"tsunami":"0"}},{"exact":{"alert":"green"}}]}}]`, 4, 16},
		{"double not", false, `[{"not":{"not":{"prefix":{"subject":"1"}}}}]`, 1, 509},
		{"attribute test decided per type", false, `[{"any":[{"exact":{"type":"gov.usgs.other event"}},{"exact":{"tsunami":"1"}}]}]`, 2, 11},
		{"empty filters array", false, `[]`, 1, 2389},
		{"one expression, no array", false, `{"exact":{"type":"gov.usgs.ice quake"}}`, 1, 2},

		{"exact type, no prefix", true, `[{"exact":{"type":"quarry blast"}}]`, 1, 16},
		{"renamed time extension", true, `[{"exact":{"origintime":` + quote(t0) + `}}]`, 1, -1},
		{"not exact of renamed time", true, `[{"not":{"exact":{"origintime":` + quote(t0) + `}}}]`, 2, 2388},
		{"subject and time never written", true, `[{"not":{"exact":{"subject":"x"}}},{"not":{"prefix":{"time":"2"}}},{"exact":{"type":"other event"}}]`, 1, 5},
		{"subject never written, exact", true, `[{"any":[{"exact":{"subject":"x"}},{"exact":{"type":"ice quake"}}]}]`, 1, 2},
		{"string extension prefix", true, `[{"prefix":{"place":"1"}},{"suffix":{"place":"Alaska"}}]`, 1, -1},
		{"float extension", true, `[{"exact":{"depth":"10"}}]`, 1, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, events := ctxCodec, ctxEvents
			if tc.ext {
				c, events = extCodec, extEvents
			}
			n, fs := compare(t, c, o, events, tc.src)
			assert.Len(t, fs, tc.filters, "%v", filterStrings(fs))
			if tc.want >= 0 {
				assert.Equal(t, tc.want, n)
			}
			if tc.want != len(events) {
				assert.Positive(t, n, "some events match")
				assert.Less(t, n, len(events), "some do not")
			}
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestCompileFiltersRefused(t *testing.T) {
	hz := usgsOntology(t)
	c, ext := usgsCodecs(t, hz)
	cases := []struct {
		name string
		ext  bool
		src  string
		err  error
		path string
		says string // a piece of the message
	}{
		{"unknown dialect", false, `[{"regex":{"type":"x"}}]`, cloudevents.ErrFilterInvalid, "filters[0]", `unknown dialect "regex"`},
		{"unknown dialect deep", false, `[{"exact":{"type":"gov.usgs.earthquake"}},{"any":[{"exact":{"mag":"1.5"}},{"not":{"bogus":{}}}]}]`, cloudevents.ErrFilterInvalid, "filters[1].any[1].not", `unknown dialect "bogus"`},
		{"two dialects in one expression", false, `[{"exact":{"type":"a"},"prefix":{"type":"b"}}]`, cloudevents.ErrFilterInvalid, "filters[0]", "exactly one key"},
		{"no dialect", false, `[{}]`, cloudevents.ErrFilterInvalid, "filters[0]", "exactly one key"},
		{"expression not an object", false, `["exact"]`, cloudevents.ErrFilterInvalid, "filters[0]", "got a string"},
		{"top level not an array", false, `"type"`, cloudevents.ErrFilterInvalid, "filters", "array"},
		{"not JSON", false, `[{"exact":`, cloudevents.ErrFilterInvalid, "filters[0].exact", "not JSON"},
		{"text after the value", false, `[] []`, cloudevents.ErrFilterInvalid, "filters", "text follows"},
		{"duplicate key", false, `[{"exact":{"type":"a","type":"b"}}]`, cloudevents.ErrFilterInvalid, "filters[0].exact", `key "type" appears twice`},
		{"exact not an object", false, `[{"exact":"type"}]`, cloudevents.ErrFilterInvalid, "filters[0].exact", "want an object"},
		{"exact value not a string", false, `[{"exact":{"mag":1.5}}]`, cloudevents.ErrFilterInvalid, "filters[0].exact.mag", "must be a string, got a number"},
		{"empty value", false, `[{"prefix":{"subject":""}}]`, cloudevents.ErrFilterInvalid, "filters[0].prefix.subject", "empty"},
		{"empty name", false, `[{"suffix":{"":"x"}}]`, cloudevents.ErrFilterInvalid, "filters[0].suffix", "name is empty"},
		{"empty exact object", false, `[{"exact":{}}]`, cloudevents.ErrFilterInvalid, "filters[0].exact", "names no attribute"},
		{"empty all", false, `[{"all":[]}]`, cloudevents.ErrFilterInvalid, "filters[0].all", "at least one"},
		{"any not an array", false, `[{"any":{"exact":{"type":"x"}}}]`, cloudevents.ErrFilterInvalid, "filters[0].any", "want an array"},
		{"not of an array", false, `[{"not":[{"exact":{"type":"x"}}]}]`, cloudevents.ErrFilterInvalid, "filters[0].not", "got an array"},

		{"sql", false, `[{"sql":"type = 'x'"}]`, cloudevents.ErrFilterNeverHolds, "filters[0].sql", "at 6: type = \"x\" holds for no type"},
		{"exact type with subtypes", false, `[{"exact":{"type":"gov.usgs.seismic"}}]`, cloudevents.ErrFilterUnsupported, "filters[0].exact.type", `include "seismic" but not its subtype "earthquake"`},
		{"not exact type with ancestors", false, `[{"not":{"exact":{"type":"gov.usgs.earthquake"}}}]`, cloudevents.ErrFilterUnsupported, "filters[0].not.exact.type", `not filters[0].not.exact.type "gov.usgs.earthquake"`},
		{"prefix type with partial subtree", false, `[{"prefix":{"type":"gov.usgs.a"}}]`, cloudevents.ErrFilterUnsupported, "filters[0].prefix.type", `"anthropogenic" but not its subtype "explosion"`},
		{"prefix on a float", false, `[{"prefix":{"mag":"1"}}]`, cloudevents.ErrFilterUnsupported, "filters[0].prefix.mag", "prefix on attribute \"mag\", which is float"},
		{"suffix on the time", false, `[{"suffix":{"time":"Z"}}]`, cloudevents.ErrFilterUnsupported, "filters[0].suffix.time", "which is time"},
		{"not prefix", false, `[{"not":{"prefix":{"subject":"1"}}}]`, cloudevents.ErrFilterUnsupported, "filters[0].not.prefix.subject", "not prefix"},
		{"not suffix through De Morgan", false, `[{"not":{"all":[{"exact":{"tsunami":"0"}},{"suffix":{"alert":"n"}}]}}]`, cloudevents.ErrFilterUnsupported, "filters[0].not.all[1].suffix.alert", "not suffix"},
		{"float zero", false, `[{"exact":{"depth":"0"}}]`, cloudevents.ErrFilterUnsupported, "filters[0].exact.depth", "0 and -0"},
		{"id", false, `[{"exact":{"id":"x"}}]`, cloudevents.ErrFilterUnsupported, "filters[0].exact.id", "id"},
		{"datacontenttype", false, `[{"prefix":{"datacontenttype":"application/"}}]`, cloudevents.ErrFilterUnsupported, "filters[0].prefix.datacontenttype", "datacontenttype"},
		{"data", false, `[{"prefix":{"data":"{"}}]`, cloudevents.ErrFilterUnsupported, "filters[0].prefix.data", "payload"},
		{"control extension", false, `[{"exact":{"sionorigin":"quakes"}}]`, cloudevents.ErrFilterUnsupported, "filters[0].exact.sionorigin", "never trusted"},
		{"source following the place", true, `[{"prefix":{"source":"/sion"}}]`, cloudevents.ErrFilterUnsupported, "filters[0].prefix.source", "place"},
		{"too many filters", false, `[{"all":[` + strings.Repeat(`{"any":[{"exact":{"alert":"a"}},{"exact":{"mag":"1.5"}}]},`, 6) + `{"any":[{"exact":{"tsunami":"1"}},{"exact":{"depth":"2"}}]}]}]`, cloudevents.ErrFilterUnsupported, "filters[0].all", "more than 64 filters"},

		{"type naming nothing", false, `[{"exact":{"type":"gov.usgs.tornado"}}]`, cloudevents.ErrFilterNeverHolds, "filters[0].exact.type", `"gov.usgs.tornado" selects no type`},
		{"type by synonym", false, `[{"exact":{"type":"gov.usgs.man-made"}}]`, cloudevents.ErrFilterNeverHolds, "filters[0].exact.type", "selects no type"},
		{"type without the prefix", false, `[{"not":{"exact":{"type":"earthquake"}}}]`, cloudevents.ErrFilterNeverHolds, "filters[0].not.exact.type", "selects no type"},
		{"int not canonical", false, `[{"exact":{"tsunami":"05"}}]`, cloudevents.ErrFilterNeverHolds, "filters[0].exact.tsunami", `writes that value as "5"`},
		{"int not a number", false, `[{"exact":{"tsunami":"one"}}]`, cloudevents.ErrFilterNeverHolds, "filters[0].exact.tsunami", "not a decimal int64"},
		{"float not canonical", false, `[{"not":{"exact":{"mag":"1.50"}}}]`, cloudevents.ErrFilterNeverHolds, "filters[0].not.exact.mag", `writes that value as "1.5"`},
		{"time not canonical", false, `[{"exact":{"time":"2023-04-07T19:20:12.380+02:00"}}]`, cloudevents.ErrFilterNeverHolds, "filters[0].exact.time", `"2023-04-07T17:20:12.38Z"`},
		{"unknown extension", false, `[{"exact":{"felt":"3"}}]`, cloudevents.ErrFilterNeverHolds, "filters[0].exact.felt", "no type of the ontology has"},
		{"attribute synonym", false, `[{"exact":{"magnitude":"3"}}]`, cloudevents.ErrFilterNeverHolds, "filters[0].exact.magnitude", "synonym"},
		{"subject attribute as extension", false, `[{"exact":{"place":"x"}}]`, cloudevents.ErrFilterNeverHolds, "filters[0].exact.place", "the CloudEvent's subject"},
		{"renamed attribute by its name", true, `[{"exact":{"time":"x"}},{"exact":{"time":"y"}}]`, cloudevents.ErrFilterNeverHolds, "filters", "matches no event"},
		{"renamed attribute as extension", true, `[{"prefix":{"mag":"1"}},{"exact":{"origintime":"x"}}]`, cloudevents.ErrFilterUnsupported, "filters[0].prefix.mag", "float"},
		{"two exact types", false, `[{"exact":{"type":"gov.usgs.earthquake"}},{"exact":{"type":"gov.usgs.explosion"}}]`, cloudevents.ErrFilterNeverHolds, "filters", "matches no event"},
		{"type absent below", false, `[{"exact":{"type":"gov.usgs.earthquake"}},{"not":{"prefix":{"type":"gov.usgs."}}}]`, cloudevents.ErrFilterNeverHolds, "filters", "matches no event"},
	}
	// The subject attribute renamed as an extension still travels as the
	// subject.
	renamed, err := cloudevents.NewCodec(cloudevents.Config{Ontology: hz, SubjectAttribute: "place", Extensions: map[string]string{"place": "where"}})
	require.NoError(t, err)
	ev := &sion.Event{Type: "earthquake", Attrs: []ontology.Attr{{Name: "place", Value: ontology.String("here")}}}
	ce, err := renamed.ToCloudEvent(ev)
	require.NoError(t, err)
	require.Equal(t, "here", ce.Subject())
	require.NotContains(t, ce.Extensions(), "where")
	_, err = renamed.CompileFilters([]byte(`[{"exact":{"where":"here"}}]`))
	assert.ErrorIs(t, err, cloudevents.ErrFilterNeverHolds)
	assert.ErrorContains(t, err, `cloudevents: filters[0].exact.where: no CloudEvent of this Codec carries extension "where": attribute "place" travels as the CloudEvent's subject`)

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cc := c
			if tc.ext {
				cc = ext
			}
			fs, err := cc.CompileFilters([]byte(tc.src))
			require.Error(t, err, "%v", filterStrings(fs))
			assert.ErrorIs(t, err, tc.err)
			var fe *cloudevents.FilterError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.path, fe.Path, "%v", err)
			assert.Contains(t, err.Error(), tc.says)
			assert.True(t, strings.HasPrefix(err.Error(), "cloudevents: "+tc.path+": "), err.Error())
		})
	}
}

func TestCompileFiltersGoValues(t *testing.T) {
	hz := usgsOntology(t)
	c, _ := usgsCodecs(t, hz)
	for name, v := range map[string]any{
		"[]any":            []any{map[string]any{"exact": map[string]any{"type": "gov.usgs.earthquake"}}},
		"map":              map[string]any{"exact": map[string]any{"type": "gov.usgs.earthquake"}},
		"[]map[string]any": []map[string]any{{"exact": map[string]any{"type": "gov.usgs.earthquake"}}},
		"json.RawMessage":  json.RawMessage(`[{"exact":{"type":"gov.usgs.earthquake"}}]`),
	} {
		t.Run(name, func(t *testing.T) {
			fs, err := c.CompileFilters(v)
			require.NoError(t, err)
			assert.Equal(t, []string{"{type ⊑ earthquake}"}, filterStrings(fs))
		})
	}
	for name, v := range map[string]any{"nil": nil, "string": `[]`, "int": 3, "[]string": []string{"x"}} {
		t.Run("refused "+name, func(t *testing.T) {
			_, err := c.CompileFilters(v)
			assert.ErrorIs(t, err, cloudevents.ErrFilterInvalid)
		})
	}
	t.Run("a number value", func(t *testing.T) {
		_, err := c.CompileFilters([]any{map[string]any{"exact": map[string]any{"tsunami": 1.0}}})
		assert.ErrorIs(t, err, cloudevents.ErrFilterInvalid)
		assert.ErrorContains(t, err, "filters[0].exact.tsunami")
	})
}

// TestCompileFiltersShapes pins the filters a few expressions compile
// to.
func TestCompileFiltersShapes(t *testing.T) {
	hz := usgsOntology(t)
	c, _ := usgsCodecs(t, hz)
	for _, tc := range []struct{ src, want string }{
		{`[{"not":{"exact":{"tsunami":"0"}}}]`, `{type ⊑ *; tsunami != 0} | {type ⊑ *; tsunami not exists}`},
		{`[{"prefix":{"type":"gov.usgs.e"}}, {"exact":{"mag":"2.5"}}]`, `{type ⊑ earthquake; mag == 2.5} | {type ⊑ explosion; mag == 2.5}`},
		{`[{"exact":{"time":"2023-04-07T17:20:12.38Z"}}]`, `{type ⊑ *; "time" == time("2023-04-07T17:20:12.38Z")}`},
		{`[{"prefix":{"type":"gov.usgs.","subject":"1"}}]`, `{type ⊑ *; place prefix "1"}`},
		{`[{"any":[{"exact":{"type":"gov.usgs.anthropogenic"}},{"exact":{"type":"gov.usgs.explosion"}},{"exact":{"type":"gov.usgs.quarry blast"}},{"exact":{"type":"gov.usgs.chemical explosion"}}]}]`, `{type ⊑ anthropogenic}`},
		{`[{"any":[{"exact":{"alert":"green"}},{"exact":{"alert":"green"}}]}]`, `{type ⊑ *; alert == "green"}`},
	} {
		fs, err := c.CompileFilters([]byte(tc.src))
		require.NoError(t, err, tc.src)
		assert.Equal(t, tc.want, strings.Join(filterStrings(fs), " | "), tc.src)
	}
}

// usgsOntology loads the hazard ontology alone (no switch).
func usgsOntology(t testing.TB) *ontology.Ontology {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "hazards.json"))
	require.NoError(t, err)
	defer f.Close()
	o, err := ontology.LoadJSON(f, "hazards.json")
	require.NoError(t, err)
	return o
}

// TestCompileFiltersRandom compiles random expressions over a few keys
// and values and checks each compiled one against the reference on a
// sample of the week; a refused one must be refused for a reason
// (unsupported or never holding), and one refused as matching no event
// must indeed match none.
func TestCompileFiltersRandom(t *testing.T) {
	o, week, _, _ := publishedWeek(t)
	ctxCodec, extCodec := usgsCodecs(t, o)
	ctxEvents := convertWeek(t, ctxCodec, week)
	t0, _ := ceAttr(ctxEvents[0].ce, "time")
	variants := []struct {
		name   string
		c      *cloudevents.Codec
		leaves []string
	}{
		{"time and subject in context attributes", ctxCodec, []string{
			`{"exact":{"type":"gov.usgs.earthquake"}}`, `{"exact":{"type":"gov.usgs.explosion"}}`,
			`{"exact":{"type":"gov.usgs.hazard"}}`, `{"exact":{"type":"gov.usgs.natural"}}`,
			`{"prefix":{"type":"gov.usgs.e"}}`, `{"suffix":{"type":"blast"}}`, `{"suffix":{"type":"quake"}}`,
			`{"prefix":{"type":"gov.usgs."}}`, `{"exact":{"type":"gov.usgs.other event"}}`,
			`{"exact":{"tsunami":"0"}}`, `{"exact":{"tsunami":"1"}}`, `{"exact":{"alert":"green"}}`,
			`{"exact":{"mag":"1.5"}}`, `{"exact":{"mag":"1.4"}}`, `{"prefix":{"subject":"1"}}`,
			`{"suffix":{"subject":"Alaska"}}`, `{"exact":{"time":` + quote(t0) + `}}`,
			`{"exact":{"specversion":"1.0"}}`, `{"prefix":{"source":"http://"}}`,
			`{"exact":{"type":"gov.usgs.explosion","alert":"green"}}`,
		}},
		{"all extensions", extCodec, []string{
			`{"exact":{"type":"earthquake"}}`, `{"exact":{"type":"quarry blast"}}`,
			`{"exact":{"type":"anthropogenic"}}`, `{"exact":{"type":"hazard"}}`,
			`{"prefix":{"type":"e"}}`, `{"suffix":{"type":"quake"}}`, `{"prefix":{"type":"ice"}}`,
			`{"exact":{"tsunami":"1"}}`, `{"exact":{"alert":"green"}}`, `{"exact":{"depth":"10"}}`,
			`{"prefix":{"place":"1"}}`, `{"suffix":{"place":"CA"}}`, `{"exact":{"origintime":` + quote(t0) + `}}`,
			`{"exact":{"subject":"x"}}`, `{"prefix":{"time":"2"}}`, `{"exact":{"dataschema":"x"}}`,
			`{"prefix":{"place":"1","alert":"g"}}`,
		}},
	}
	for vi, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			all := convertWeek(t, v.c, week)
			var sample []weekCE
			for i, w := range all {
				if w.ev.Type != "earthquake" || i%8 == 0 {
					sample = append(sample, w)
				}
			}
			rng := rand.New(rand.NewPCG(68, uint64(vi)))
			var gen func(depth int) string
			gen = func(depth int) string {
				if depth == 0 || rng.IntN(3) == 0 {
					return v.leaves[rng.IntN(len(v.leaves))]
				}
				if rng.IntN(3) == 0 {
					return `{"not":` + gen(depth-1) + `}`
				}
				kids := make([]string, 1+rng.IntN(3))
				for i := range kids {
					kids[i] = gen(depth - 1)
				}
				return `{"` + []string{"all", "any"}[rng.IntN(2)] + `":[` + strings.Join(kids, ",") + `]}`
			}
			const cases = 2000
			compiled, refused, never, split := 0, 0, 0, 0
			for i := range cases {
				top := make([]string, 1+rng.IntN(2))
				for j := range top {
					top[j] = gen(3)
				}
				src := "[" + strings.Join(top, ",") + "]"
				fs, err := v.c.CompileFilters([]byte(src))
				expr := decode(t, src)
				if err != nil {
					var fe *cloudevents.FilterError
					require.ErrorAs(t, err, &fe, src)
					require.False(t, errors.Is(err, cloudevents.ErrFilterInvalid), "case %d: %s: %v", i, src, err)
					if errors.Is(err, cloudevents.ErrFilterNeverHolds) && fe.Path == "filters" {
						never++
						for _, w := range all {
							require.False(t, refEval(expr, w.ce), "case %d: %s refused as matching nothing, but matches %s", i, src, w.ev)
						}
					}
					refused++
					continue
				}
				compiled++
				match := matcher(t, o, fs)
				n := 0
				for _, w := range sample {
					want := refEval(expr, w.ce)
					require.Equal(t, want, match(w.ev), "case %d: %s\nfilters %v\nevent %s", i, src, filterStrings(fs), w.ev)
					if want {
						n++
					}
				}
				if n > 0 && n < len(sample) {
					split++
				}
			}
			t.Logf("%d compiled and checked on %d events (%d matching some but not all), %d refused (%d as matching nothing)", compiled, len(sample), split, refused, never)
			assert.Greater(t, compiled, cases/4, "enough of them compile")
			assert.Greater(t, split, compiled/4, "enough of them split the sample")
			assert.Positive(t, never)
			assert.Equal(t, cases, compiled+refused)
		})
	}
}

func ExampleCodec_CompileFilters() {
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "hazard", Attributes: []ontology.Attribute{{Name: "mag", Kind: ontology.KindFloat}, {Name: "place", Kind: ontology.KindString}}},
		{Name: "earthquake", Parents: []string{"hazard"}},
		{Name: "explosion", Parents: []string{"hazard"}},
	})
	if err != nil {
		panic(err)
	}
	c, err := cloudevents.NewCodec(cloudevents.Config{Ontology: o, TypePrefix: "gov.usgs.", SubjectAttribute: "place"})
	if err != nil {
		panic(err)
	}
	fs, err := c.CompileFilters([]byte(`[
		{"any": [{"exact": {"type": "gov.usgs.earthquake"}}, {"exact": {"type": "gov.usgs.explosion"}}]},
		{"not": {"exact": {"mag": "2.5"}}},
		{"suffix": {"subject": "Alaska"}}
	]`))
	if err != nil {
		panic(err)
	}
	for _, f := range fs {
		fmt.Println(f)
	}
	_, err = c.CompileFilters([]byte(`[{"not": {"prefix": {"subject": "10 km"}}}]`))
	fmt.Println(err)
	// Output:
	// {type ⊑ earthquake; mag != 2.5; place suffix "Alaska"}
	// {type ⊑ explosion; mag != 2.5; place suffix "Alaska"}
	// {type ⊑ earthquake; mag not exists; place suffix "Alaska"}
	// {type ⊑ explosion; mag not exists; place suffix "Alaska"}
	// cloudevents: filters[0].not.prefix.subject: not prefix: sion has no negated prefix
}

package cloudevents_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// compareSQL compiles src with c, directly and as the sql dialect, and
// checks, event by event, that the filters match exactly the events
// whose CloudEvents the reference passes; {"not": {"sql": src}} must
// match the others (when it compiles). It returns how many match.
func compareSQL(t *testing.T, c *cloudevents.Codec, o *ontology.Ontology, events []weekCE, src string) int {
	t.Helper()
	fs, err := c.CompileSQL(src)
	require.NoError(t, err, src)
	fs2, err := c.CompileFilters([]any{map[string]any{"sql": src}})
	require.NoError(t, err, src)
	require.Equal(t, filterStrings(fs), filterStrings(fs2), "CompileSQL and the sql dialect agree")
	ref := refCompile(src)
	match := matcher(t, o, fs)
	n := 0
	for _, w := range events {
		want := refPasses(ref, w.ce)
		require.Equal(t, want, match(w.ev), "%s\nfilters %v\nevent %s", src, filterStrings(fs), w.ev)
		if want {
			n++
		}
	}
	if nfs, err := c.CompileFilters([]any{map[string]any{"not": map[string]any{"sql": src}}}); err == nil {
		nmatch := matcher(t, o, nfs)
		for _, w := range events {
			require.Equal(t, !refPasses(ref, w.ce), nmatch(w.ev), "not %s\nfilters %v\nevent %s", src, filterStrings(nfs), w.ev)
		}
	}
	return n
}

func TestCompileSQLUSGS(t *testing.T) {
	o, week, _, _ := publishedWeek(t)
	ctxCodec, extCodec := usgsCodecs(t, o)
	ctxEvents, extEvents := convertWeek(t, ctxCodec, week), convertWeek(t, extCodec, week)
	t0, _ := ceAttr(ctxEvents[0].ce, "time")
	place3, _ := ceAttr(ctxEvents[3].ce, "subject")
	sq := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

	cases := []struct {
		name string
		ext  bool
		src  string
		want int // events of the week that pass; -1: not pinned
	}{
		{"exact type", false, "type = 'gov.usgs.explosion'", 20},
		{"type LIKE prefix", false, "type LIKE 'gov.usgs.e%'", 2366},
		{"type LIKE with _", false, "type LIKE 'gov.usgs.___ quake'", 2},
		{"type LIKE inner %", false, "type LIKE 'gov.usgs.%quake'", 2348},
		{"type IN", false, "type IN ('gov.usgs.explosion', 'gov.usgs.quarry blast', \"gov.usgs.nothing\")", 36},
		{"type NOT IN closed under ancestors", false, "type NOT IN ('gov.usgs.hazard', 'gov.usgs.natural', 'gov.usgs.seismic', 'gov.usgs.earthquake')", 43},
		{"type != of a leaf's ancestors", false, "type <> 'gov.usgs.hazard' AND type != 'gov.usgs.natural' AND type != 'gov.usgs.seismic' AND type != 'gov.usgs.earthquake'", 43},
		{"int equal", false, "tsunami = 1", 6},
		{"int equal literal left", false, "1 = tsunami", 6},
		{"int equal string literal", false, "tsunami = '1'", 6},
		{"string literal cast to an int", false, "'01' = tsunami", 6},
		{"boolean cast to an int", false, "TRUE = tsunami", 6},
		{"int not equal", false, "tsunami != 0", 6},
		{"int ordering", false, "tsunami > 0", 6},
		{"int ordering literal left", false, "0 >= tsunami", 2383},
		{"int ordering with a string literal", false, "tsunami < '1'", 2383},
		{"int IN", false, "tsunami IN (1, 2, '3', TRUE)", 6},
		{"int NOT IN", false, "tsunami NOT IN (1)", 2383},
		{"float equal", false, "mag = '1.5'", 60},
		{"float equal literal left", false, "'1.5' = mag", 60},
		{"float equal integer", false, "mag = 2", -1},
		{"float IN", false, "mag IN ('1.5', '2.5', 3)", -1},
		{"float not equal", false, "mag <> '1.5'", 2389 - 60},
		{"string equal", false, "alert = 'yellow'", 1},
		{"string not equal", false, "alert != 'green'", 1},
		{"string IN", false, "alert IN ('green', \"yellow\")", 16},
		{"string LIKE exact", false, "alert LIKE 'green'", 15},
		{"string LIKE any", false, "alert LIKE '%'", 16},
		{"string LIKE contains", false, "alert LIKE '%ell%'", 1},
		{"subject prefix", false, "subject LIKE '1%'", 509},
		{"subject suffix", false, "subject LIKE '%, Alaska'", -1},
		{"subject equal with quotes", false, "subject = " + sq(place3), -1},
		{"subject not equal", false, "subject <> " + sq(place3), -1},
		{"time equal", false, "time = '" + t0 + "'", -1},
		{"time LIKE a day", false, "time LIKE '" + t0[:10] + "%'", -1},
		{"time NOT LIKE an hour", false, "time NOT LIKE '" + t0[:14] + "%'", -1},
		{"time IN", false, "time IN ('" + t0 + "')", -1},
		{"exists", false, "EXISTS alert", 16},
		{"not exists", false, "NOT EXISTS alert", 2389 - 16},
		{"exists of required attributes", false, "EXISTS id AND EXISTS source AND EXISTS SpecVersion AND EXISTS type", 2389},
		{"exists of an unwritten attribute", false, "EXISTS dataschema OR tsunami = 1", 6},
		{"missing attribute is an error under NOT", false, "tsunami = 1 OR NOT (dataschema = 'x')", 6},
		{"AND short-circuits a missing attribute", false, "alert = 'green' AND tsunami = 0", -1},
		{"missing alert under NOT is an error", false, "NOT (alert = 'green')", 1},
		{"OR after an error", false, "alert = 'green' OR tsunami = 1", -1},
		{"OR short-circuits an error", false, "tsunami = 1 OR alert = 'green'", -1},
		{"XOR", false, "tsunami = 1 XOR mag = '1.5'", -1},
		{"XOR with an error", false, "alert = 'green' XOR tsunami = 0", -1},
		{"constants", false, "specversion = '1.0' AND source LIKE 'https://%' AND type LIKE '%blast'", 16},
		{"literal comparisons", false, "1 = '1' AND TRUE = 'true' AND NOT ('TRUE' = TRUE AND FALSE) AND tsunami = 1", 6},
		{"nested NOT", false, "NOT (NOT (NOT (tsunami = 0)))", 6},
		{"nested parentheses", false, "((((tsunami = 1)) AND ((type LIKE 'gov.usgs.%'))))", 6},
		{"keywords in any case", false, "Type LiKe '%quake' aNd NoT (tsunami In (0))", -1},
		{"TRUE", false, "TRUE", 2389},
		{"extension time by its new name", true, "origintime = '" + t0 + "'", -1},
		{"extension place", true, "place LIKE '%CA' AND type IN ('earthquake', 'explosion')", -1},
		{"subject unwritten", true, "depth = '10' OR EXISTS subject OR subject = 'x'", -1},
		{"time unwritten", true, "NOT EXISTS time OR NOT (time = 'x')", 2389},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, evs := ctxCodec, ctxEvents
			if tc.ext {
				c, evs = extCodec, extEvents
			}
			n := compareSQL(t, c, o, evs, tc.src)
			if tc.want >= 0 {
				assert.Equal(t, tc.want, n)
			}
		})
	}
}

// kindsOntology has one type with an attribute of each kind, for what
// the USGS week lacks: bools and ints beyond 32 bits.
func kindsOntology(t testing.TB) (*ontology.Ontology, *cloudevents.Codec, []weekCE) {
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "reading", Attributes: []ontology.Attribute{
			{Name: "n", Kind: ontology.KindInt}, {Name: "ok", Kind: ontology.KindBool},
			{Name: "s", Kind: ontology.KindString}, {Name: "x", Kind: ontology.KindFloat},
			{Name: "at", Kind: ontology.KindTime}}},
		{Name: "alarm", Parents: []string{"reading"}},
	})
	require.NoError(t, err)
	c, err := cloudevents.NewCodec(cloudevents.Config{Ontology: o, TypePrefix: "org.example.", TimeAttribute: "at"})
	require.NoError(t, err)
	ints := []int64{0, 1, -1, 5, 2147483647, 2147483648, -2147483648, -2147483649, 1 << 40, -1 << 40, 9223372036854775807}
	floats := []float64{0, 2, 1.5, -2, 999999, 1e6, 3, math.Copysign(0, -1)}
	strs := []string{"", "true", "TRUE", "5", "05", "abc", "a%b", "a_b", `a\b`}
	at := time.Date(2024, 1, 2, 3, 4, 5, 600000000, time.UTC)
	var out []weekCE
	for i := range 200 {
		ev := &sion.Event{Type: []string{"reading", "alarm"}[i%2]}
		if i%7 != 0 {
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: "n", Value: ontology.Int(ints[i%len(ints)])})
		}
		if i%5 != 0 {
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: "ok", Value: ontology.Bool(i%3 == 0)})
		}
		if i%4 != 0 {
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: "s", Value: ontology.String(strs[i%len(strs)])})
		}
		if i%6 != 0 {
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: "x", Value: ontology.Float(floats[i%len(floats)])})
		}
		if i%3 != 0 {
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: "at", Value: ontology.Time(at.Add(time.Duration(i%4) * time.Second))})
		}
		ce, err := c.ToCloudEvent(ev)
		require.NoError(t, err)
		out = append(out, weekCE{ev, ce})
	}
	return o, c, out
}

func TestCompileSQLKinds(t *testing.T) {
	o, c, events := kindsOntology(t)
	for _, src := range []string{
		"n = 5", "n != 5", "5 = n", "5 <> n", "n = '5'", "'5' = n", "'05' = n", "'2147483648' = n", "NOT ('2147483648' = n)",
		"n = '2147483648'", "n < 0", "NOT (n < 0)", "0 <= n", "n > -2147483648", "n >= '-2147483648'", "NOT (n < -2147483648)", "n <= -2147483648", "NOT (2147483647 < n)", "n >= 2147483647", "NOT (n > 2147483647)", "n IN (0, 1, '5', TRUE)",
		"n NOT IN (0, 1)", "NOT (n = 5)", "EXISTS n", "n LIKE '%'", "n LIKE '2147483648'",
		"n IN (0, 1) AND n IN (1, 5)", "n >= 0 AND n > 0", "n > 0 AND n >= 0", "NOT (n IN (0, 1) AND n IN (1, 5))",
		"ok", "NOT ok", "ok = TRUE", "ok = 'true'", "'TRUE' = ok", "ok != FALSE", "ok = 1", "ok < 1", "ok IN (TRUE)", "ok LIKE 'tr%'",
		"ok AND n = 1", "NOT ok OR s = 'abc'", "ok XOR n > 0",
		"s = 'abc'", "5 = s", "TRUE = s", "s IN ('abc', 5, TRUE)", "s LIKE 'a\\%b'", "s LIKE 'a\\_b'", "s LIKE 'a\\b'",
		"s LIKE 'a%'", "s LIKE ''", "s NOT IN ('', 'abc')", "NOT (s = '')",
		"s = 'a\\b'", `s = "a\\b"`, `s IN ('a\'b', "a\"b", 'a%b')`, "s LIKE '%\\_%'", "s LIKE '%\\%%'",
		"x = 2", "x = 0", "x = '1.5'", "'1.5' = x", "'-2' = x", "x IN ('1.5', 2, -2)", "x = 999999", "x <> '3'",
		"time = '2024-01-02T03:04:05.6Z'", "NOT (time = '2024-01-02T03:04:06.6Z')", "EXISTS time", "time LIKE '%'",
		"time LIKE '2024%'", "time LIKE '2024-01-%'", "time LIKE '2024-01-02T03:04:05%'", "time NOT LIKE '2024-01-02T03:04:06%'",
		"time LIKE '2024-01-02T03:04:06%' OR NOT (time NOT LIKE '2024-01-02T03:04:07%')", "time NOT LIKE '2024-01-02T03%'",
		"type = 'org.example.alarm'", "type LIKE '%m'", "type IN ('org.example.alarm') AND ok", "NOT (type = 'org.example.reading')",
	} {
		t.Run(src, func(t *testing.T) {
			compareSQL(t, c, o, events, src)
		})
	}
}

// TestCompileSQLLiterals runs cases of the CESQL TCK
// (cloudevents/spec cesql/cesql_tck) whose expressions read no
// attribute: each compiles to every event or is refused as never
// holding, and the reference agrees.
func TestCompileSQLLiterals(t *testing.T) {
	hz := usgsOntology(t)
	c, _ := usgsCodecs(t, hz)
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{"TRUE = FALSE", false}, {"FALSE = FALSE", true}, {"1 = 2", false}, {"2 = 2", true},
		{"'abc' = '123'", false}, {"'abc' = 'abc'", true}, {"TRUE != FALSE", true}, {"2 <> 2", false},
		{"2 <= 2", true}, {"3 <= 2", false}, {"1 < 2", true}, {"2 >= 3", false}, {"2 > 1", true},
		{"true = 'TRUE'", false}, {"'TRUE' = true", true}, {"TRUE = 'true' AND FALSE = 'false'", true},
		{"TRUE = 'TRUE' OR FALSE = 'FALSE'", false}, {"FALSE XOR TRUE", true}, {"TRUE XOR TRUE", false},
		{"123 IN (1, 2, 3, 12, 13, 23, 123)", true}, {"123 NOT IN (1, 2, 3, 12, 13, 23, 123)", false},
		{`'abc' IN ('abc', "bcd")`, true}, {"TRUE IN (FALSE)", false}, {"'true' IN (TRUE, 'false')", true},
		{"'true' IN ('TRUE', 'false')", false}, {"TRUE IN ('true', 'false')", true}, {"'TRUE' IN (TRUE, 'false')", false},
		{"1 IN ('1', '2')", true}, {"'1' IN (1, 2)", true},
		{"'abc' LIKE 'abc'", true}, {`'ab\c' LIKE 'ab\c'`, true}, {"'abc' NOT LIKE 'abc'", false},
		{"'azzzbzzzc' LIKE 'a%b%c'", true}, {"'ac' LIKE 'abc'", false}, {"'' LIKE 'abc'", false},
		{"'.ab.cde.' LIKE '.%.%.'", true}, {"'ab.cde' LIKE '.%.%.'", false}, {"'abc' LIKE 'a_b_c'", false},
		{"'azbzc' LIKE 'a_b_c'", true}, {`'a_b_c' LIKE 'a\_b\_c'`, true}, {`'azbzc' LIKE 'a\_b\_c'`, false},
		{`'a%b%c' LIKE 'a\%b\%c'`, true}, {`'abc' LIKE 'a\%b\%c'`, false}, {"234 LIKE '23_'", true},
		{"2344 LIKE '23_'", false}, {"TRUE LIKE '%ue'", true}, {"FALSE LIKE 'tr%'", false},
		{`'a"b\'c' = "a\"b'c"`, true}, {"NOT TRUE", false}, {"(TRUE)", true},
		{"EXISTS specversion AND EXISTS id AND EXISTS type AND EXISTS SOURCE", true},
		{"false and (1 != '1x')", false}, {"true or ('1x' < 1)", true}, {"true and ('1x' < 1)", false},
	} {
		t.Run(tc.src, func(t *testing.T) {
			fs, err := c.CompileSQL(tc.src)
			if tc.want {
				require.NoError(t, err)
				assert.Equal(t, []string{"{type ⊑ *}"}, filterStrings(fs))
			} else {
				assert.ErrorIs(t, err, cloudevents.ErrFilterNeverHolds)
			}
			assert.Equal(t, tc.want, refPasses(refCompile(tc.src), event.New()))
		})
	}
}

// TestCompileSQLRandom compiles random expressions built from tests of
// the USGS attributes and checks each one that compiles against the
// reference on the week's sample, and its not-dialect negation too; a
// refusal must name a reason.
func TestCompileSQLRandom(t *testing.T) {
	o, week, _, _ := publishedWeek(t)
	ctxCodec, _ := usgsCodecs(t, o)
	all := convertWeek(t, ctxCodec, week)
	t0, _ := ceAttr(all[0].ce, "time")
	var sample []weekCE
	for i, w := range all {
		if w.ev.Type != "earthquake" || i%8 == 0 {
			sample = append(sample, w)
		}
	}
	_, extCodec := usgsCodecs(t, o)
	extAll := convertWeek(t, extCodec, week)
	var extSample []weekCE
	for i, w := range extAll {
		if w.ev.Type != "earthquake" || i%8 == 0 {
			extSample = append(extSample, w)
		}
	}
	_, kc, kevents := kindsOntology(t)
	variants := []struct {
		name   string
		c      *cloudevents.Codec
		events []weekCE
		leaves []string
	}{
		{"usgs", ctxCodec, sample, []string{
			"type = 'gov.usgs.earthquake'", "type = 'gov.usgs.explosion'", "type LIKE 'gov.usgs.e%'", "type LIKE '%blast'",
			"type IN ('gov.usgs.other event', 'gov.usgs.ice quake')", "type <> 'gov.usgs.hazard'",
			"tsunami = 1", "tsunami != 0", "0 < tsunami", "tsunami IN (0)", "alert = 'green'", "alert LIKE 'y%'",
			"EXISTS alert", "mag = '1.5'", "mag = 2", "mag IN ('1.4', '1.5')", "subject LIKE '1%'", "subject LIKE '%Alaska'",
			"time = '" + t0 + "'", "EXISTS time", "dataschema = 'x'", "TRUE", "FALSE", "specversion = '1.0'",
		}},
		{"usgs extensions", extCodec, extSample, []string{
			"type = 'earthquake'", "type IN ('quarry blast', 'explosion', 'chemical explosion')", "type LIKE 'e%'",
			"tsunami = 1", "'0' = tsunami", "tsunami >= 1", "alert = 'green'", "NOT EXISTS alert", "place LIKE '%CA'",
			"place = 'x'", "origintime = '" + t0 + "'", "EXISTS time", "subject = 'x'", "depth = '10'", "mag IN (2, '1.5')",
		}},
		{"kinds", kc, kevents, []string{
			"n = 5", "5 = n", "n < 0", "'2147483648' = n", "n IN (0, 1)", "EXISTS n", "ok", "ok = FALSE", "ok < 1",
			"s = 'abc'", "5 = s", "s LIKE 'a%'", "s IN ('', 'true')", "x = 2", "x = '1.5'", "time = '2024-01-02T03:04:05.6Z'",
			"type = 'org.example.alarm'", "type LIKE 'org.example.%'", "time LIKE '2024-01-02T03:04:05%'", "time LIKE '2024-01-02T03:04:%'",
		}},
	}
	for vi, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(70, uint64(vi)))
			var gen func(depth int) string
			gen = func(depth int) string {
				if depth == 0 || rng.IntN(3) == 0 {
					return v.leaves[rng.IntN(len(v.leaves))]
				}
				if rng.IntN(4) == 0 {
					return "NOT (" + gen(depth-1) + ")"
				}
				kids := make([]string, 2+rng.IntN(2))
				for i := range kids {
					kids[i] = gen(depth - 1)
				}
				return "(" + strings.Join(kids, " "+[]string{"AND", "OR", "XOR"}[rng.IntN(3)]+" ") + ")"
			}
			const cases = 2000
			compiled, refused, split, negated := 0, 0, 0, 0
			for i := range cases {
				src := gen(3)
				ref := refCompile(src)
				fs, err := v.c.CompileSQL(src)
				if err != nil {
					var fe *cloudevents.FilterError
					require.ErrorAs(t, err, &fe, src)
					require.False(t, errors.Is(err, cloudevents.ErrFilterInvalid), "case %d: %s: %v", i, src, err)
					if errors.Is(err, cloudevents.ErrFilterNeverHolds) && fe.Pos == 0 {
						for _, w := range v.events {
							require.False(t, refPasses(ref, w.ce), "case %d: %s refused as matching nothing (%v), but passes %s", i, src, err, w.ev)
						}
					}
					refused++
					continue
				}
				compiled++
				match := matcher(t, o2(v.c), fs)
				n := 0
				for _, w := range v.events {
					want := refPasses(ref, w.ce)
					require.Equal(t, want, match(w.ev), "case %d: %s\nfilters %v\nevent %s", i, src, filterStrings(fs), w.ev)
					if want {
						n++
					}
				}
				if n > 0 && n < len(v.events) {
					split++
				}
				if nfs, err := v.c.CompileFilters([]any{map[string]any{"not": map[string]any{"sql": src}}}); err == nil {
					negated++
					nmatch := matcher(t, o2(v.c), nfs)
					for _, w := range v.events {
						require.Equal(t, !refPasses(ref, w.ce), nmatch(w.ev), "case %d: not %s\nfilters %v\nevent %s", i, src, filterStrings(nfs), w.ev)
					}
				}
			}
			t.Logf("%d compiled and checked on %d events (%d matching some but not all; %d negated by the not dialect), %d refused", compiled, len(v.events), split, negated, refused)
			assert.Greater(t, compiled, cases/4, "enough of them compile")
			assert.Greater(t, split, compiled/4, "enough of them split the events")
		})
	}
}

func o2(c *cloudevents.Codec) *ontology.Ontology { return c.Ontology() }

func TestCompileSQLRefused(t *testing.T) {
	hz := usgsOntology(t)
	c, ext := usgsCodecs(t, hz)
	cases := []struct {
		name string
		ext  bool
		src  string
		err  error
		pos  int
		says string
	}{
		{"empty", false, "  ", cloudevents.ErrFilterInvalid, 1, "empty"},
		{"unclosed string", false, "alert = 'green", cloudevents.ErrFilterInvalid, 9, "not closed"},
		{"unclosed paren", false, "(alert = 'x'", cloudevents.ErrFilterInvalid, 13, "expected ) to close the ( at 1"},
		{"integer beyond 32 bits", false, "tsunami = 2147483648", cloudevents.ErrFilterInvalid, 11, "not a 32-bit integer"},
		{"decimal literal", false, "mag = 1.5", cloudevents.ErrFilterInvalid, 7, "no decimal numbers"},
		{"bad character", false, "alert = 'x' ; x", cloudevents.ErrFilterInvalid, 13, "unexpected character"},
		{"LIKE without a string", false, "alert LIKE 123", cloudevents.ErrFilterInvalid, 12, "must be a string literal"},
		{"trailing text", false, "alert = 'x' alert", cloudevents.ErrFilterInvalid, 13, "expected an operator or the end"},
		{"identifier with underscore", false, "my_ext = 'x'", cloudevents.ErrFilterInvalid, 1, "expected an expression"},
		{"function", false, "UPPER(alert) = 'GREEN'", cloudevents.ErrFilterUnsupported, 1, "function UPPER"},
		{"function in an IN list", false, "alert IN ('a', LOWER(place))", cloudevents.ErrFilterUnsupported, 16, "function LOWER"},
		{"arithmetic", false, "tsunami + 1 = 2", cloudevents.ErrFilterUnsupported, 9, "arithmetic (+)"},
		{"unary minus", false, "-tsunami = 1", cloudevents.ErrFilterUnsupported, 1, "arithmetic (-)"},
		{"signed literal after an operand", false, "tsunami -1 = 0", cloudevents.ErrFilterUnsupported, 9, "arithmetic (- 1)"},
		{"mixed AND OR", false, "tsunami = 1 AND alert = 'x' OR mag = '1'", cloudevents.ErrFilterUnsupported, 29, "OR after AND without parentheses"},
		{"NOT binds tighter", false, "NOT tsunami = 1", cloudevents.ErrFilterUnsupported, 1, "NOT applies to tsunami alone"},
		{"two attributes", false, "tsunami = depth", cloudevents.ErrFilterUnsupported, 9, "compares two attributes"},
		{"a number with an exponent", false, "tsunami = 1e3", cloudevents.ErrFilterUnsupported, 9, "1e3 is an attribute's name"},
		{"attribute in an IN list", false, "alert IN ('x', place)", cloudevents.ErrFilterUnsupported, 16, "place in an IN list"},
		{"comparison of a comparison", false, "tsunami = 1 = TRUE", cloudevents.ErrFilterUnsupported, 9, "tsunami = 1 as an operand of ="},
		{"LIKE with inner %", false, "alert LIKE 'g%n'", cloudevents.ErrFilterUnsupported, 7, `has "%" inside it`},
		{"LIKE with _", false, "alert LIKE 'gree_'", cloudevents.ErrFilterUnsupported, 7, `has "_" inside it`},
		{"LIKE with \\\\", false, `alert LIKE 'a\\%'`, cloudevents.ErrFilterUnsupported, 7, `\\`},
		{"NOT LIKE prefix", false, "alert NOT LIKE 'g%'", cloudevents.ErrFilterUnsupported, 7, "no negated prefix"},
		{"LIKE prefix on a float", false, "mag LIKE '1.%'", cloudevents.ErrFilterUnsupported, 5, "strings only"},
		{"LIKE prefix on a time inside a field", false, "time LIKE '2023-0%'", cloudevents.ErrFilterUnsupported, 6, "ends at a field"},
		{"LIKE prefix on a time beyond sion's years", false, "time LIKE '1677%'", cloudevents.ErrFilterUnsupported, 6, "the times sion holds"},
		{"LIKE prefix on a time that no time has", false, "time LIKE '2023-02-30%'", cloudevents.ErrFilterNeverHolds, 6, "no time the Codec writes"},
		{"string attribute cast to an Integer", false, "alert = 5", cloudevents.ErrFilterUnsupported, 7, "infinitely many strings"},
		{"string attribute cast to a Boolean", false, "alert = TRUE", cloudevents.ErrFilterUnsupported, 7, "any case"},
		{"int attribute cast to a Boolean", false, "tsunami = TRUE", cloudevents.ErrFilterUnsupported, 9, "Integer to a Boolean"},
		{"ordering a string", false, "alert < 5", cloudevents.ErrFilterUnsupported, 7, "orders Integers only"},
		{"ordering a float", false, "mag >= 2", cloudevents.ErrFilterUnsupported, 5, "orders Integers only"},
		{"NOT of a float equal to an integer", false, "NOT (mag = 2)", cloudevents.ErrFilterUnsupported, 10, "whole, below 10^6"},
		{"IN member that may fail its cast", false, "tsunami IN (1, 'one')", cloudevents.ErrFilterUnsupported, 16, "cannot be cast to an Integer"},
		{"integer where a Boolean is expected", false, "NOT 10", cloudevents.ErrFilterUnsupported, 5, "where a Boolean is expected"},
		{"string attribute where a Boolean is expected", false, "alert AND TRUE", cloudevents.ErrFilterUnsupported, 1, "where a Boolean is expected"},
		{"id", false, "id = 'x'", cloudevents.ErrFilterUnsupported, 1, "id"},
		{"datacontenttype", false, "EXISTS datacontenttype", cloudevents.ErrFilterUnsupported, 1, "datacontenttype"},
		{"control extension", false, "sionorigin = 'x'", cloudevents.ErrFilterUnsupported, 1, "never trusted"},
		{"source following the place", true, "source LIKE '/sion%'", cloudevents.ErrFilterUnsupported, 1, "place"},
		{"type with subtypes", false, "type = 'gov.usgs.seismic'", cloudevents.ErrFilterUnsupported, 6, `not its subtype "earthquake"`},
		{"too long", false, "alert = '" + strings.Repeat("x", cloudevents.MaxSQLBytes) + "'", cloudevents.ErrFilterUnsupported, 1, "MaxSQLBytes"},

		{"string literal root", false, "'true'", cloudevents.ErrFilterNeverHolds, 1, "not a Boolean"},
		{"non-bool attribute root", false, "alert", cloudevents.ErrFilterNeverHolds, 1, "not a Boolean"},
		{"FALSE", false, "FALSE", cloudevents.ErrFilterNeverHolds, 0, "matches no event"},
		{"an error on the left of OR", false, "tsunami = 1 AND (NOT (dataschema = 'x') OR TRUE)", cloudevents.ErrFilterNeverHolds, 0, "matches no event"},
		{"unknown extension", false, "felt = 3", cloudevents.ErrFilterNeverHolds, 1, `extension "felt"`},
		{"int not canonical", false, "tsunami = '05'", cloudevents.ErrFilterNeverHolds, 9, `writes that value as "5"`},
		{"float not canonical", false, "mag IN ('1.50')", cloudevents.ErrFilterNeverHolds, 9, `writes that value as "1.5"`},
		{"float equal to a large integer", false, "mag = 1000000", cloudevents.ErrFilterNeverHolds, 5, `"1e+06"`},
		{"time ordered", false, "time < 5", cloudevents.ErrFilterNeverHolds, 6, "orders Integers only"},
		{"ordering with a non-integer literal", false, "tsunami < 'one'", cloudevents.ErrFilterNeverHolds, 9, "cannot be cast to an Integer"},
		{"type naming nothing", false, "type = 'gov.usgs.tornado'", cloudevents.ErrFilterNeverHolds, 6, "holds for no type"},
		{"type ordered", false, "type < 3", cloudevents.ErrFilterNeverHolds, 6, "evaluation error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cc := c
			if tc.ext {
				cc = ext
			}
			fs, err := cc.CompileSQL(tc.src)
			require.Error(t, err, "%v", filterStrings(fs))
			assert.ErrorIs(t, err, tc.err)
			var fe *cloudevents.FilterError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, "sql", fe.Path, "%v", err)
			assert.Equal(t, tc.pos, fe.Pos, "%v", err)
			assert.Contains(t, err.Error(), tc.says)
			if tc.pos > 0 {
				assert.True(t, strings.HasPrefix(err.Error(), "cloudevents: sql: at "), err.Error())
			}
			// The same in the sql dialect, at its path.
			_, err = cc.CompileFilters([]any{map[string]any{"any": []any{map[string]any{"sql": tc.src}}}})
			require.ErrorAs(t, err, &fe)
			assert.ErrorIs(t, err, tc.err)
			assert.Equal(t, tc.pos, fe.Pos, "%v", err)
		})
	}
	t.Run("not dialect around a prefix", func(t *testing.T) {
		_, err := c.CompileFilters([]byte(`[{"not":{"sql":"tsunami = 1 AND alert LIKE 'g%'"}}]`))
		assert.ErrorIs(t, err, cloudevents.ErrFilterUnsupported)
		var fe *cloudevents.FilterError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, "filters[0].not.sql", fe.Path)
		assert.Equal(t, 23, fe.Pos)
		assert.ErrorContains(t, err, "at 23: not around a sql expression that tests alert prefix: sion has no negated prefix")
	})
	t.Run("sql not a string", func(t *testing.T) {
		_, err := c.CompileFilters([]byte(`[{"sql": 5}]`))
		assert.ErrorIs(t, err, cloudevents.ErrFilterInvalid)
		assert.ErrorContains(t, err, "filters[0].sql: want a string")
	})
}

// TestCompileSQLHostile feeds input built to cost: each is refused
// quickly with a clear error.
func TestCompileSQLHostile(t *testing.T) {
	hz := usgsOntology(t)
	c, _ := usgsCodecs(t, hz)
	many := func(n int, sep string, f func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = f(i)
		}
		return strings.Join(parts, sep)
	}
	for _, tc := range []struct {
		name, src string
		err       error
		says      string
	}{
		{"100k nested parentheses", strings.Repeat("(", 100000) + "TRUE" + strings.Repeat(")", 100000), cloudevents.ErrFilterUnsupported, "MaxSQLBytes"},
		{"nested parentheses under the length limit", strings.Repeat("(", 30000) + "TRUE" + strings.Repeat(")", 30000), cloudevents.ErrFilterUnsupported, "MaxFilterDepth"},
		{"nested NOT", strings.Repeat("NOT ", 10000) + "TRUE", cloudevents.ErrFilterUnsupported, "MaxFilterDepth"},
		{"huge IN list", "alert IN (" + many(10000, ",", func(i int) string { return "'a'" }) + ")", cloudevents.ErrFilterUnsupported, "MaxFilterTests"},
		{"giant string", "alert = '" + strings.Repeat("é", 1<<20) + "'", cloudevents.ErrFilterUnsupported, "MaxSQLBytes"},
		{"long AND chain", many(1000, " AND ", func(i int) string { return "alert = 'a'" }), cloudevents.ErrFilterUnsupported, "MaxFilterTests"},
		{"long chain of constants", many(6000, " AND ", func(i int) string { return "TRUE" }), cloudevents.ErrFilterUnsupported, "MaxFilterTests"},
		{"long chain of NOT", many(4000, " OR ", func(i int) string { return "NOT (TRUE)" }), cloudevents.ErrFilterUnsupported, "MaxFilterTests"},
		{"DNF explosion", many(8, " AND ", func(i int) string { return "(tsunami = 1 OR alert = 'x')" }), cloudevents.ErrFilterUnsupported, "MaxFilters"},
		{"XOR explosion", many(12, " XOR ", func(i int) string { return "tsunami = 1" }), cloudevents.ErrFilterUnsupported, "MaxFilters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := c.CompileSQL(tc.src)
			assert.ErrorIs(t, err, tc.err)
			assert.ErrorContains(t, err, tc.says)
			t.Logf("%v in %v", err.Error()[:min(len(err.Error()), 100)], time.Since(start))
		})
	}
}

// TestCompileSQLShapes pins what a few expressions compile to.
func TestCompileSQLShapes(t *testing.T) {
	hz := usgsOntology(t)
	c, _ := usgsCodecs(t, hz)
	for _, tc := range []struct{ src, want string }{
		{"tsunami = 1", `{type ⊑ *; tsunami == 1}`},
		{"NOT (tsunami = 1)", `{type ⊑ *; tsunami != 1; tsunami in [-2147483648, 2147483647]}`},
		{"tsunami <> 1", `{type ⊑ *; tsunami != 1; tsunami in [-2147483648, 2147483647]}`},
		{"1 <> tsunami", `{type ⊑ *; tsunami != 1}`},
		{"alert = 'green' OR tsunami = 1", `{type ⊑ *; alert == "green"} | {type ⊑ *; alert != "green"; tsunami == 1}`},
		{"subject LIKE '%Alaska%' AND type LIKE 'gov.usgs.e%'", `{type ⊑ earthquake; place contains "Alaska"} | {type ⊑ explosion; place contains "Alaska"}`},
		{"alert IN ('green', 5)", `{type ⊑ *; alert in {"green", "5"}}`},
		{"EXISTS alert", `{type ⊑ *; alert exists}`},
	} {
		fs, err := c.CompileSQL(tc.src)
		require.NoError(t, err, tc.src)
		assert.Equal(t, tc.want, strings.Join(filterStrings(fs), " | "), tc.src)
	}
}

// FuzzCompileSQL: CompileSQL never panics and refuses with a
// *FilterError; what it compiles matches, on every event of the kinds
// ontology, exactly what the reference passes.
func FuzzCompileSQL(f *testing.F) {
	for _, seed := range []string{
		"type = 'org.example.alarm'", "n > 0 AND NOT (s IN ('abc', \"a%b\"))", "s LIKE '%b' OR EXISTS ok",
		"(n = 1) XOR (x = '1.5')", `s LIKE 'a\%b\_c%'`, "'a\\'b' = s", "UPPER(s) = 'X'", "n + -1", "((((",
		"NOT NOT NOT TRUE", "s IN (", "'unclosed", "n = 2147483648", "n = -2147483648", "EXISTS", "ok AND n < 5 OR s",
		"TrUe", "'2147483648' = n", "time = '2024-01-02T03:04:05.6Z'", "ok = 'TRUE' OR ok",
	} {
		f.Add(seed)
	}
	o, c, events := kindsOntology(f)
	x := filter.NewIndex(o)
	f.Fuzz(func(t *testing.T, src string) {
		fs, err := c.CompileSQL(src)
		if err != nil {
			var fe *cloudevents.FilterError
			require.ErrorAs(t, err, &fe)
			return
		}
		require.NotEmpty(t, fs)
		ref := refCompile(src)
		for i, f := range fs {
			require.NoError(t, x.Add(uint64(i), f))
		}
		defer func() {
			for i := range fs {
				x.Remove(uint64(i))
			}
		}()
		for _, w := range events {
			hit := false
			x.Match(w.ev, func(uint64, float64) { hit = true })
			require.Equal(t, refPasses(ref, w.ce), hit, "%s\nfilters %v\nevent %s", src, filterStrings(fs), w.ev)
		}
	})
}

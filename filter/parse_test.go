package filter

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

var (
	vs = ontology.String
	vi = ontology.Int
	vf = ontology.Float
	vb = ontology.Bool
)

// preds returns a Spec of type t with predicates ps.
func preds(t string, ps ...Predicate) Spec { return Spec{Type: t, Predicates: ps} }

func TestParse(t *testing.T) {
	t0 := time.Date(2024, 1, 2, 1, 4, 5, 123456789, time.UTC)
	tests := []struct {
		name string
		src  string
		want Spec
	}{
		// Whole filters and clauses.
		{"empty", ``, Spec{}},
		{"empty braces", `{}`, Spec{}},
		{"only spaces", " \t\r\n ", Spec{}},
		{"braces and spaces", " {\n} ", Spec{}},
		{"type", `{type ⊑ Reading}`, Spec{Type: "Reading"}},
		{"type ascii", `{type <: Reading}`, Spec{Type: "Reading"}},
		{"type no spaces", `{type⊑Reading}`, Spec{Type: "Reading"}},
		{"type any", `{type ⊑ *}`, Spec{Type: "*"}},
		{"type quoted", `{type ⊑ "quarry blast"}`, Spec{Type: "quarry blast"}},
		{"type keyword spelt", `{type ⊑ match}`, Spec{Type: "match"}},
		{"type unicode", `{type ⊑ 地震}`, Spec{Type: "地震"}},
		{"no braces", `type ⊑ Reading; a exists`, preds("Reading", Attr("a").Exists())},
		{"trailing semicolon", `{a exists;}`, preds("", Attr("a").Exists())},
		{"trailing semicolon no braces", `a exists ;`, preds("", Attr("a").Exists())},
		{"newlines", "{\r\n  type ⊑ Reading;\n\ta\n exists\n}", preds("Reading", Attr("a").Exists())},
		{"match all", `{match all; a exists}`, preds("", Attr("a").Exists())},
		{"match atleast", `{match atleast 2; a exists; b exists}`,
			Spec{Mode: ModeAtLeast, AtLeast: 2, Predicates: []Predicate{Attr("a").Exists(), Attr("b").Exists()}}},
		{"match atleast negative", `{match atleast -1}`, Spec{Mode: ModeAtLeast, AtLeast: -1}},
		{"match score", `{type <: Quake; match score >= 2; mag >= 6 weight 2; tsunami == 1}`,
			Spec{Type: "Quake", Mode: ModeScore, Threshold: 2, Predicates: []Predicate{
				Attr("mag").GE(vi(6)).WithWeight(2), Attr("tsunami").EQ(vi(1))}}},
		{"match score float", `{match score >= 0.5; true weight 1e-3}`,
			Spec{Mode: ModeScore, Threshold: 0.5, Predicates: []Predicate{True().WithWeight(0.001)}}},
		{"match score big int", `{match score >= 100000000000000000000}`, Spec{Mode: ModeScore, Threshold: 1e20}},
		{"xmlns", `{xmlns:s = "urn:example:sensors"; xpath(/s:reading/s:value > 20)}`,
			Spec{Namespaces: map[string]string{"s": "urn:example:sensors"},
				Predicates: []Predicate{XPathTrue("/s:reading/s:value > 20")}}},
		{"xmlns spaced", "{xmlns : s\t=`urn:s`; xmlns: t= \"urn:t\"; xmlns :u =\"\"}",
			Spec{Namespaces: map[string]string{"s": "urn:s", "t": "urn:t", "u": ""}}},
		{"xmlns prefix with dots", `{xmlns:a.b-c_1 = "urn:x"}`, Spec{Namespaces: map[string]string{"a.b-c_1": "urn:x"}}},

		// Operators.
		{"eq", `{a == 1}`, preds("", Attr("a").EQ(vi(1)))},
		{"eq single", `{a = 1}`, preds("", Attr("a").EQ(vi(1)))},
		{"ne", `{a != 1}`, preds("", Attr("a").NE(vi(1)))},
		{"lt", `{a < 1}`, preds("", Attr("a").LT(vi(1)))},
		{"le", `{a <= 1}`, preds("", Attr("a").LE(vi(1)))},
		{"gt", `{a > 1}`, preds("", Attr("a").GT(vi(1)))},
		{"ge", `{a >= 1}`, preds("", Attr("a").GE(vi(1)))},
		{"no spaces", `{a<-1;b>=2;c!=3}`, preds("", Attr("a").LT(vi(-1)), Attr("b").GE(vi(2)), Attr("c").NE(vi(3)))},
		{"range closed", `{delta in [-1, 0]}`, preds("", Attr("delta").Range(vi(-1), vi(0), false, false))},
		{"range lo open", `{delta in (0, 1]}`, preds("", Attr("delta").Range(vi(0), vi(1), true, false))},
		{"range hi open", `{delta in [0,1)}`, preds("", Attr("delta").Range(vi(0), vi(1), false, true))},
		{"range open", `{d in ( "a" , "b" )}`, preds("", Attr("d").Range(vs("a"), vs("b"), true, true))},
		{"set", `{a in {1, "x", 2.5, true}}`, preds("", Attr("a").In(vi(1), vs("x"), vf(2.5), vb(true)))},
		{"set one", `{a in {1}}`, preds("", Attr("a").In(vi(1)))},
		{"not in", `{a not in {"x","y"}}`, preds("", Attr("a").NotIn(vs("x"), vs("y")))},
		{"prefix", `{zone prefix "hall."}`, preds("", Attr("zone").Prefix("hall."))},
		{"suffix", `{zone suffix ".3"}`, preds("", Attr("zone").Suffix(".3"))},
		{"contains", `{zone contains "North"}`, preds("", Attr("zone").Contains("North"))},
		{"exists", `{a exists}`, preds("", Attr("a").Exists())},
		{"not exists", `{a not exists}`, preds("", Attr("a").NotExists())},
		{"true", `{true}`, preds("", True())},
		{"true weighted", `{true weight 2.5}`, preds("", True().WithWeight(2.5))},
		{"true twice", `true; true`, preds("", True(), True())},
		{"weight on range", `{a in [1, 2] weight 3}`, preds("", Attr("a").Range(vi(1), vi(2), false, false).WithWeight(3))},
		{"weight negative", `{a exists weight -1}`, preds("", Attr("a").Exists().WithWeight(-1))},

		// Literals.
		{"string", `{a == "x"}`, preds("", Attr("a").EQ(vs("x")))},
		{"string empty", `{a == ""}`, preds("", Attr("a").EQ(vs("")))},
		{"string escapes", `{a == "q\"b\\t\t\n\x41\u00e9\U0001F600\101"}`,
			preds("", Attr("a").EQ(vs("q\"b\\t\t\nA\u00e9\U0001F600A")))},
		{"string raw", "{a == `c:\\dir\\\"x\"`}", preds("", Attr("a").EQ(vs(`c:\dir\"x"`)))},
		{"string raw multiline", "{a == `x\r\ny`}", preds("", Attr("a").EQ(vs("x\ny")))},
		{"string unicode", `{a == "Ωμέγα 地震 😀"}`, preds("", Attr("a").EQ(vs("Ωμέγα 地震 😀")))},
		{"string with syntax", `{a == "; } { ) ( ⊑"}`, preds("", Attr("a").EQ(vs("; } { ) ( ⊑")))},
		{"int zero", `{a == 0}`, preds("", Attr("a").EQ(vi(0)))},
		{"int minus zero", `{a == -0}`, preds("", Attr("a").EQ(vi(0)))},
		{"int leading zeros", `{a == 007}`, preds("", Attr("a").EQ(vi(7)))},
		{"int max", `{a == 9223372036854775807}`, preds("", Attr("a").EQ(vi(math.MaxInt64)))},
		{"int min", `{a == -9223372036854775808}`, preds("", Attr("a").EQ(vi(math.MinInt64)))},
		{"int beyond 2^53", `json(orderId) == 9007199254740993`, preds("", JSON("orderId").EQ(vi(9007199254740993)))},
		{"float", `{a == 2.5}`, preds("", Attr("a").EQ(vf(2.5)))},
		{"float zero", `{a == 0.0}`, preds("", Attr("a").EQ(vf(0)))},
		{"float negative", `{a == -2.5}`, preds("", Attr("a").EQ(vf(-2.5)))},
		{"float exp", `{a == 1e+21}`, preds("", Attr("a").EQ(vf(1e21)))},
		{"float exp no sign", `{a == 1E21}`, preds("", Attr("a").EQ(vf(1e21)))},
		{"float exp negative", `{a == -1.5e-7}`, preds("", Attr("a").EQ(vf(-1.5e-7)))},
		{"float smallest", `{a == 5e-324}`, preds("", Attr("a").EQ(vf(5e-324)))},
		{"float largest", `{a == 1.7976931348623157e+308}`, preds("", Attr("a").EQ(vf(math.MaxFloat64)))},
		{"float underflow", `{a == 1e-400}`, preds("", Attr("a").EQ(vf(0)))},
		{"float int-valued big", `{a == 9223372036854775808.0}`, preds("", Attr("a").EQ(vf(0x1p63)))},
		{"bool true", `{a == true}`, preds("", Attr("a").EQ(vb(true)))},
		{"bool false", `{a != false}`, preds("", Attr("a").NE(vb(false)))},
		{"time utc", `{a < time("2024-01-02T01:04:05.123456789Z")}`, preds("", Attr("a").LT(ontology.Time(t0)))},
		{"time offset", `{a < time("2024-01-02T03:04:05.123456789+02:00")}`, preds("", Attr("a").LT(ontology.Time(t0)))},
		{"time no fraction", `{a >= time("2024-01-02T01:04:05Z")}`,
			preds("", Attr("a").GE(ontology.Time(t0.Truncate(time.Second))))},
		{"time raw string", "{a == time(`1970-01-01T00:00:00Z`)}", preds("", Attr("a").EQ(ontology.TimeNanos(0)))},
		{"time spaced", `{a == time ( "1970-01-01T00:00:00Z" ) }`, preds("", Attr("a").EQ(ontology.TimeNanos(0)))},
		{"time in set", `{a in {time("1970-01-01T00:00:00Z")}}`, preds("", Attr("a").In(ontology.TimeNanos(0)))},

		// Operands and names.
		{"name with dots", `{a.b-c:d_1 == 1}`, preds("", Attr("a.b-c:d_1").EQ(vi(1)))},
		{"name underscore", `{_x exists}`, preds("", Attr("_x").Exists())},
		{"name unicode", `{température > 30; 震度 >= 5}`, preds("", Attr("température").GT(vi(30)), Attr("震度").GE(vi(5)))},
		{"name quoted", `{"quarry blast" exists}`, preds("", Attr("quarry blast").Exists())},
		{"name quoted escapes", `{"a\"b\u00e9" exists}`, preds("", Attr("a\"bé").Exists())},
		{"name raw quoted", "{`a b` exists}", preds("", Attr("a b").Exists())},
		{"json", `{json(temp\.celsius) > 30}`, preds("", JSON(`temp\.celsius`).GT(vi(30)))},
		{"json at", `{type ⊑ Reading; json(\@odata\.type) == "#item"}`, preds("Reading", JSON(`\@odata\.type`).EQ(vs("#item")))},
		{"json nested", `json(properties.place) contains "Alaska"; json(properties.mag) >= 2.5`,
			preds("", JSON("properties.place").Contains("Alaska"), JSON("properties.mag").GE(vf(2.5)))},
		{"json spaces trimmed", `{json(  a.b	) exists}`, preds("", JSON("a.b").Exists())},
		{"json escaped trailing space", `{json(a\ ) exists}`, preds("", JSON(`a\ `).Exists())},
		{"json double backslash then space", `{json(a\\ ) exists}`, preds("", JSON(`a\\`).Exists())},
		{"json escaped paren", `{json(a\)b) exists}`, preds("", JSON(`a\)b`).Exists())},
		{"json nested parens", `{json(a.#(b=="x)").c) exists}`, preds("", JSON(`a.#(b=="x)").c`).Exists())},
		{"json quoted", `{json("a b\")") exists}`, preds("", JSON(`a b")`).Exists())},
		{"json quoted spaced", `{json( "a" ) exists}`, preds("", JSON("a").Exists())},
		{"json quote-led raw", `{json("a".b) exists}`, preds("", JSON(`"a".b`).Exists())},
		{"json space before paren", `{json (a) exists}`, preds("", JSON("a").Exists())},
		{"json unicode", `{json(données.température) > 1}`, preds("", JSON("données.température").GT(vi(1)))},
		{"xpath boolean", `{xpath(/a/b = 'x)')}`, preds("", XPathTrue(`/a/b = 'x)'`))},
		{"xpath boolean weighted", `{match score >= 1; xpath(/a) weight 2}`,
			Spec{Mode: ModeScore, Threshold: 1, Predicates: []Predicate{XPathTrue("/a").WithWeight(2)}}},
		{"xpath compared", `{xpath(/r[@id='1']/v) > 20}`, preds("", XPath(`/r[@id='1']/v`).GT(vi(20)))},
		{"xpath quoted", `{xpath("string(/a)") == "x"}`, preds("", XPath("string(/a)").EQ(vs("x")))},
		{"xpath quote-led raw", `{xpath("a" = /b)}`, preds("", XPathTrue(`"a" = /b`))},
		{"xpath backslash is plain", `{xpath(/a[. = "\"]) exists}`, preds("", XPath(`/a[. = "\"]`).Exists())},

		// Keywords spelt as names.
		{"type as name", `{type == "x"}`, preds("", Attr("type").EQ(vs("x")))},
		{"type as name quoted", `{type ⊑ "type"; "type" == "x"}`, preds("type", Attr("type").EQ(vs("x")))},
		{"match as name", `{match == 1}`, preds("", Attr("match").EQ(vi(1)))},
		{"xmlns as name", `{xmlns exists}`, preds("", Attr("xmlns").Exists())},
		{"xmlns colon name with ==", `{xmlns:t == "urn"}`, preds("", Attr("xmlns:t").EQ(vs("urn")))},
		{"xmlns-led name", `{xmlnsx = 1}`, preds("", Attr("xmlnsx").EQ(vi(1)))},
		{"true as name", `{true == false}`, preds("", Attr("true").EQ(vb(false)))},
		{"json as name", `{json exists}`, preds("", Attr("json").Exists())},
		{"xpath as name", `{xpath == 1}`, preds("", Attr("xpath").EQ(vi(1)))},
		{"weight as name", `{weight > 1}`, preds("", Attr("weight").GT(vi(1)))},
		{"in as name", `{in in {1}}`, preds("", Attr("in").In(vi(1)))},
		{"time as name", `{time < 1}`, preds("", Attr("time").LT(vi(1)))},
		{"not as name", `{not not exists}`, preds("", Attr("not").NotExists())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.src)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseNegativeZero(t *testing.T) {
	tests := []struct {
		name string
		src  string
		neg  bool
	}{
		{"minus zero point zero", `{delta == -0.0}`, true},
		{"minus zero exp", `{delta == -0e5}`, true},
		{"zero point zero", `{delta == 0.0}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := Parse(tt.src)
			require.NoError(t, err)
			require.Len(t, spec.Predicates, 1)
			v := spec.Predicates[0].Value
			require.Equal(t, ontology.KindFloat, v.Kind())
			assert.Equal(t, tt.neg, math.Signbit(v.Float()))
			f := MustCompile(tt.src)
			assert.Equal(t, tt.neg, math.Signbit(MustCompile(f.String()).Predicates()[0].Value.Float()), f.String())
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		line, col int
		msg       string
	}{
		{"missing value", `{type ⊑ Reading; delta == ;}`, 1, 27, `expected a value after "==", found ";"`},
		{"missing value at end", `a ==`, 1, 5, `expected a value after "==", found end of input`},
		{"missing operator", `{a}`, 1, 3, `expected an operator after "a", found "}"`},
		{"missing operator json", `{json(a.b) ; b exists}`, 1, 12, `expected an operator after "json(a.b)", found ";"`},
		{"unknown operator", `{a ~ 1}`, 1, 4, `expected an operator after "a", found "~"`},
		{"bang", `{a ! 1}`, 1, 4, `expected an operator after "a", found "!"`},
		{"empty clause", `{;}`, 1, 2, `expected an attribute name, json(...), xpath(...) or a type, match or xmlns clause, found ";"`},
		{"double semicolon", `{a exists;;}`, 1, 11, `expected an attribute name, json(...), xpath(...) or a type, match or xmlns clause, found ";"`},
		{"missing close brace", `{a exists`, 1, 10, `expected ";" or "}", found end of input`},
		{"missing semicolon", "{a exists\n b exists}", 2, 2, `expected ";" or "}", found "b"`},
		{"missing semicolon no braces", `a exists b exists`, 1, 10, `expected ";" or end of input, found "b"`},
		{"type name with a space", `{type ⊑ volcanic eruption}`, 1, 18, `expected ";" after the type name "volcanic", found "eruption" (a name with spaces is quoted: "volcanic eruption")`},
		{"text after close", `{a exists} b`, 1, 12, `expected end of input after "}", found "b"`},
		{"close without open", `a exists}`, 1, 9, `expected ";" or end of input, found "}"`},
		{"unterminated string", `{a == "abc}`, 1, 7, `string literal not terminated`},
		{"newline in string", "{a == \"ab\nc\"}", 1, 7, `string literal not terminated`},
		{"bad escape", `{a == "\q"}`, 1, 7, `invalid escape in string literal "\q"`},
		{"int overflow", `{a == 9223372036854775808}`, 1, 7, `integer 9223372036854775808 out of the int64 range`},
		{"int underflow", `{a == -9223372036854775809}`, 1, 7, `integer -9223372036854775809 out of the int64 range`},
		{"float overflow", `{a == 1e400}`, 1, 7, `number 1e400 out of the float64 range`},
		{"NaN", `{a == NaN}`, 1, 7, `expected a value after "==", found "NaN" (NaN and infinities are not values)`},
		{"Inf", `{a > Inf}`, 1, 6, `expected a value after ">", found "Inf" (NaN and infinities are not values)`},
		{"minus Inf", `{a > -Inf}`, 1, 6, `expected a value after ">", found "-"`},
		{"malformed number", `{a == 1.2.3}`, 1, 7, `malformed number "1.2.3"`},
		{"trailing dot", `{a == 1.}`, 1, 7, `malformed number "1."`},
		{"leading dot", `{a == .5}`, 1, 7, `expected a value after "==", found "."`},
		{"hex", `{a == 0x10}`, 1, 7, `malformed number "0x10"`},
		{"plus sign", `{a == +1}`, 1, 7, `expected a value after "==", found "+"`},
		{"name as value", `{a == b}`, 1, 7, `expected a value after "==", found "b"`},
		{"bad time", `{a == time("yesterday")}`, 1, 12, `time "yesterday" is not RFC 3339 (such as "2006-01-02T15:04:05Z")`},
		{"time out of range", `{a == time("2300-01-01T00:00:00Z")}`, 1, 12, `time "2300-01-01T00:00:00Z" is outside 1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z, the times sion holds`},
		{"time without string", `{a == time(0)}`, 1, 12, `expected a string after "time(", found "0"`},
		{"time unclosed", `{a == time("1970-01-01T00:00:00Z"}`, 1, 34, `expected ")" to close "time(", found "}"`},
		{"range missing comma", `{a in [1 2]}`, 1, 10, `expected "," between the ends of a range, found "2"`},
		{"range bad close", `{a in [1, 2}`, 1, 12, `expected "]" or ")" to close a range, found "}"`},
		{"in without bracket", `{a in 1}`, 1, 7, `expected "[", "(" or "{" after "in", found "1"`},
		{"not in range", `{a not in [1, 2]}`, 1, 11, `expected "{" after "not in", found "["`},
		{"empty set", `{a in {}}`, 1, 8, `expected a value after "{", found "}"`},
		{"set trailing comma", `{a in {1,}}`, 1, 10, `expected a value after ",", found "}"`},
		{"set unclosed", `{a in {1 2}}`, 1, 10, `expected "," or "}" in a set, found "2"`},
		{"not alone", `{a not 1}`, 1, 8, `expected "in" or "exists" after "not", found "1"`},
		{"prefix number", `{a prefix 1}`, 1, 11, `expected a string after "prefix", found "1"`},
		{"type missing name", `{type ⊑ ;}`, 1, 9, `expected an event type name or * after "⊑", found ";"`},
		{"type twice", `{type ⊑ A; type ⊑ B}`, 1, 12, `a filter has at most one type clause`},
		{"match twice", `{match all; match all}`, 1, 13, `a filter has at most one match clause`},
		{"match atleast float", `{match atleast 1.5}`, 1, 16, `expected an integer after "match atleast", found "1.5"`},
		{"match atleast overflow", `{match atleast 99999999999999999999}`, 1, 16, `integer 99999999999999999999 out of range`},
		{"match score without ge", `{match score 2}`, 1, 14, `expected ">=" after "match score", found "2"`},
		{"match score not number", `{match score >= x}`, 1, 17, `expected a number after "match score >=", found "x"`},
		{"weight not number", `{a exists weight x}`, 1, 18, `expected a number after "weight", found "x"`},
		{"weight out of range", `{a exists weight 1e999}`, 1, 18, `number 1e999 out of the float64 range`},
		{"xmlns twice", `{xmlns:s = "a"; xmlns:s = "b"}`, 1, 23, `namespace prefix "s" bound twice`},
		{"xmlns not a string", `{xmlns:s = 1}`, 1, 12, `expected a namespace URI string after "xmlns:s =", found "1"`},
		{"xmlns bad prefix", `{xmlns:1s = "a"}`, 1, 8, `namespace prefix "1s" is not an XML name`},
		{"xmlns empty prefix", `{xmlns: = "a"}`, 1, 9, `expected a namespace prefix after "xmlns:", found "="`},
		{"json unclosed", `{json(a.b == 1}`, 1, 6, `expected ")" to close "json(", found end of input`},
		{"json escaped close", `{json(a\) == 1}`, 1, 6, `expected ")" to close "json(", found end of input`},
		{"json empty", `{json( ) exists}`, 1, 8, `expected a JSON path after "json(", found ")"`},
		{"xpath empty", `{xpath()}`, 1, 8, `expected an XPath expression after "xpath(", found ")"`},
		{"xpath unclosed string", `{xpath(/a = 'x)}`, 1, 7, `expected ")" to close "xpath(", found end of input`},
		{"true with operand", `{true exists x}`, 1, 14, `expected ";" or "}", found "x"`},
		{"invalid utf8", "{a == 1; \xff}", 1, 10, `byte 0xff is not UTF-8 (write bytes that are not UTF-8 in strings as \x escapes)`},
		{"invalid utf8 in string", "{a == \"é\xff\"}", 1, 9, `byte 0xff is not UTF-8 (write bytes that are not UTF-8 in strings as \x escapes)`},
		{"invalid utf8 in raw string", "{a == `\xc3`}", 1, 8, `byte 0xc3 is not UTF-8 (write bytes that are not UTF-8 in strings as \x escapes)`},
		{"weight underflow", `{match score >= 1; a exists weight 1e-999}`, 1, 36, `number 1e-999 rounds to 0`},
		{"threshold underflow", `{match score >= 1e-400; a exists}`, 1, 17, `number 1e-400 rounds to 0`},
		{"comment", `{a exists // no}`, 1, 11, `expected ";" or "}", found "/"`},
		{"multiline position", "{\n  type ⊑ Reading;\n  délta == ;\n}", 3, 12, `expected a value after "==", found ";"`},
		{"columns count runes", `{"ünï" == ;}`, 1, 11, `expected a value after "==", found ";"`},
		{"found string", `{a exists "x"}`, 1, 11, `expected ";" or "}", found string "x"`},
		{"found long text", `{a == bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb}`, 1, 7, `expected a value after "==", found "bbbbbbbbbbbbbbbbbbbbbbbb…"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.src)
			require.Error(t, err)
			var se *SyntaxError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.line, se.Line, "line")
			assert.Equal(t, tt.col, se.Col, "col")
			assert.Equal(t, tt.msg, se.Msg)
			assert.Equal(t, fmt.Sprintf("filter: %d:%d: %s", tt.line, tt.col, tt.msg), err.Error())
			assert.ErrorIs(t, err, ErrSyntax)
			assert.NotErrorIs(t, err, ErrInvalid)

			_, cerr := Compile(tt.src)
			assert.Equal(t, err, cerr, "Compile returns Parse's error")
		})
	}
}

// TestParseEscapedByte: a byte that is not UTF-8 is written as an
// escape (raw, it is refused: TestParseErrors).
func TestParseEscapedByte(t *testing.T) {
	spec, err := Parse(`{a == "\xff"}`)
	require.NoError(t, err)
	require.Equal(t, "\xff", spec.Predicates[0].Value.Str())
}

func TestSyntaxErrorOffset(t *testing.T) {
	src := "{\n  a == 1;\n  ééé ~ 2}"
	_, err := Parse(src)
	var se *SyntaxError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "~", src[se.Offset:se.Offset+1])
	assert.Equal(t, 3, se.Line)
	assert.Equal(t, 7, se.Col)
}

// TestCompileBuildErrors checks that well-formed but invalid filters get
// Build's error, not a syntax error.
func TestCompileBuildErrors(t *testing.T) {
	tests := []struct{ name, src string }{
		{"range out of order", `{a in [2, 1]}`},
		{"unbound prefix", `{xpath(/t:reading)}`},
		{"atleast too big", `{match atleast 3; a exists}`},
		{"weight without score", `{a exists weight 2}`},
		{"zero threshold", `{match score >= 0}`},
		{"prefix on number literal kind", `{a < true}`},
		{"empty name", `{"" exists}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.src)
			require.NoError(t, err)
			_, err = Compile(tt.src)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalid)
			assert.False(t, errors.Is(err, ErrSyntax))
		})
	}
}

// roundTripSources are accepted filters whose canonical form must read
// back to the same filter.
var roundTripSources = []string{
	``,
	`{}`,
	`{type ⊑ Reading; json(temp\.celsius) > 30}`,
	`{type ⊑ Reading; json(temp.celsius) > 30}`,
	`{type ⊑ Reading; json(\@odata\.type) == "#item"}`,
	`{type ⊑ Reading; delta in [-1, 0]}`,
	`{type ⊑ Reading; delta in (0, 1]}`,
	`{type ⊑ Reading; delta == -0.0}`,
	`{type ⊑ Reading; delta == 0}`,
	`{type ⊑ Notice; zone prefix "hall."}`,
	`{xmlns:s = "urn:example:sensors"; xpath(/s:reading/s:value > 20)}`,
	`{xmlns:s = "urn:example:sensors"; type ⊑ Reading; xpath(/s:reading[@id='1']/s:value[@unit='C']) > 20}`,
	`{type <: Quake; match score >= 2; mag >= 6 weight 2; tsunami == 1}`,
	`{type ⊑ "quarry blast"}`,
	`{type ⊑ *; entity == "role"}`,
	`json(orderId) == 9007199254740993`,
	`json(properties.place) contains "Alaska"; json(properties.mag) >= 2.5`,
	`{match atleast 2; a == 1; b != "x"; c < 1.5; d <= 2; e > -3; f >= 4e10}`,
	`{a in {1, 2.5, "x", true, time("2024-01-02T03:04:05.123456789+02:00")}; b not in {false}}`,
	`{match score >= 0.5; a exists weight 0.25; b not exists weight 1e21; c suffix "z"; true weight 3; xpath(/a) weight 2}`,
	`{type == "x"; match == 1; xmlns == 2; json == 3; xpath == 4; true == 5; weight == 6; "in" exists}`,
	`{"quarry blast" == 1; "a\tb\u00e9" == "\U0001F600\x00"; ünïcode == "ж"; xmlns:t == "urn"}`,
	`{a == 9223372036854775807; b == -9223372036854775808; c == 5e-324; d == 1.7976931348623157e+308; e == -1e-300}`,
	"{a == `raw\\string`; json(\"quoted path\") exists; xpath(\"string(/a)\") == \"x\"}",
	`{json(a\ ) exists; json(  b  ) exists; json("c".d) exists; json("e)") exists; xpath("f" = /g)}`,
	`{xmlns:a = "urn:a"; xmlns:b = ""; xpath(/a:x | /b:y)}`,
	`{a < time("1678-01-01T00:00:00Z"); b > time("2262-04-11T23:47:16.854775807Z")}`,
	// SYNTAX.md examples.
	`{match atleast 2; mag >= 5; depth < 10.0; region in {"JP", "NZ"}}`,
	`{type ⊑ Alarm; raised >= time("2024-06-01T00:00:00Z"); ack not exists}`,
	`json(items.#(id=="a)").v) exists; json("odd)key") exists; xpath("string(/a)") == "x"`,
	`{type ⊑ "2nd-reading"; température > 30; 震度 >= 5}`,
	`{a exists weight 1; match all}`,
}

func TestRoundTrip(t *testing.T) {
	for _, src := range roundTripSources {
		t.Run(src, func(t *testing.T) {
			f, err := Compile(src)
			require.NoError(t, err)
			s := f.String()
			g, err := Compile(s)
			require.NoError(t, err, s)
			assert.Equal(t, s, g.String())
			assert.Equal(t, normalWeights(f.Spec()), normalWeights(g.Spec()))
			h, err := Compile(g.String())
			require.NoError(t, err)
			assert.Equal(t, s, h.String())
		})
	}
}

package ontology

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const exampleJSON = `{"types": [
  {"name": "Event"},
  {"name": "Reading", "parents": ["Event"], "synonyms": ["Measurement"],
   "label": "a sensor reading",
   "attributes": [
     {"name": "celsius", "kind": "float", "unit": "degC", "synonyms": ["temp"]},
     {"name": "station", "kind": "string"}]},
  {"name": "BGM", "parents": ["music", "seasonal"]},
  {"name": "music"}, {"name": "seasonal"}, {"name": "popular", "parents": ["music"]}
]}`

func TestLoadJSON(t *testing.T) {
	o, err := LoadJSON(strings.NewReader(exampleJSON), "ex.json")
	require.NoError(t, err)
	require.Equal(t, NumReserved+6, o.NumTypes())
	r, ok := o.Lookup("Measurement")
	require.True(t, ok)
	assert.Equal(t, "Reading", r.Name)
	assert.Equal(t, "a sensor reading", r.Label)
	assert.Equal(t, Position{File: "ex.json", Line: 3, Col: 3}, r.Pos)
	assert.Equal(t, []Attribute{
		{Name: "celsius", Kind: KindFloat, Unit: "degC", Synonyms: []string{"temp"}},
		{Name: "station", Kind: KindString},
	}, r.Attributes)
	a, ok := o.Attribute(r.ID, "temp")
	require.True(t, ok)
	assert.Equal(t, "degC", a.Unit)
	bgm, _ := o.Lookup("BGM")
	music, _ := o.Lookup("music")
	assert.True(t, o.IsA(bgm.ID, music.ID), "parents may be defined later")
	assert.Equal(t, Position{File: "ex.json", Line: 8, Col: 3}, bgm.Pos)
}

func TestLoadJSONErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		err  error
		msg  string
	}{
		{"syntax", "{\"types\": [\n  {\"name\": \"A\",}\n]}", ErrSyntax,
			`ontology: f.json:2:16: syntax error: invalid character '}' looking for beginning of object key string`},
		{"truncated", "{\"types\": [\n  {\"name\": \"A\"}", ErrSyntax,
			`ontology: f.json:2:15: syntax error: unexpected end of JSON input`},
		{"not an object", "[]", ErrSyntax,
			`ontology: f.json:1:1: syntax error: top level must be an object, not an array`},
		{"missing types", "\n {}", ErrSyntax,
			`ontology: f.json:2:2: syntax error: missing "types"`},
		{"unknown top field", `{"types": [], "typo": 1}`, ErrUnknownField,
			`ontology: f.json:1:15: unknown field "typo" in top level (allowed: [types])`},
		{"unknown type field", "{\"types\": [\n  {\"name\": \"A\", \"parent\": [\"B\"]}]}", ErrUnknownField,
			`ontology: f.json:2:17: type "A": unknown field "parent" in a type (allowed: [attributes label name parents synonyms])`},
		{"field twice", "{\"types\": [\n  {\"name\": \"A\", \"label\": \"x\", \"label\": \"y\"}]}", ErrUnknownField,
			`ontology: f.json:2:31: type "A": unknown field: "label" given twice in a type`},
		{"unknown attribute field", "{\"types\": [\n {\"name\": \"A\", \"attributes\": [\n  {\"name\": \"x\", \"kind\": \"int\", \"units\": \"m\"}]}]}", ErrUnknownField,
			`ontology: f.json:3:32: type "A": unknown field "units" in an attribute (allowed: [kind name synonyms unit])`},
		{"name not a string", "{\"types\": [\n  {\"name\": 7}]}", ErrSyntax,
			`ontology: f.json:2:12: syntax error: "name" must be a string, not a number`},
		{"parents not an array", "{\"types\": [\n  {\"name\": \"A\", \"parents\": \"B\"}]}", ErrSyntax,
			`ontology: f.json:2:28: type "A": syntax error: "parents" must be an array, not a string`},
		{"parent not a string", "{\"types\": [\n  {\"name\": \"A\", \"parents\": [null]}]}", ErrSyntax,
			`ontology: f.json:2:29: type "A": syntax error: "parents" element must be a string, not null`},
		{"empty synonym", "{\"types\": [\n  {\"name\": \"A\", \"synonyms\": [\"\"]}]}", ErrEmptyName,
			`ontology: f.json:2:30: type "A": empty name in "synonyms"`},
		{"type not an object", "{\"types\": [\n  \"A\"]}", ErrSyntax,
			`ontology: f.json:2:3: syntax error: a type must be an object, not a string`},
		{"no name", "{\"types\": [\n  {\"label\": \"x\"}]}", ErrEmptyName,
			`ontology: f.json:2:3: empty name: a type needs a non-empty "name"`},
		{"unknown kind", "{\"types\": [\n {\"name\": \"A\", \"attributes\": [\n  {\"name\": \"x\", \"kind\": \"decimal\"}]}]}", ErrInvalidKind,
			`ontology: f.json:3:25: type "A": invalid attribute kind: attribute "x": kind "decimal" (want string, int, float, bool or time)`},
		{"missing kind", "{\"types\": [\n {\"name\": \"A\", \"attributes\": [\n  {\"name\": \"x\"}]}]}", ErrInvalidKind,
			`ontology: f.json:3:3: type "A": invalid attribute kind: attribute "x" has no "kind"`},
		{"semantic error at the type", "{\"types\": [\n  {\"name\": \"A\"},\n  {\"name\": \"B\", \"parents\": [\"C\"]}]}", ErrUnknownParent,
			`ontology: f.json:3:3: type "B": unknown parent "C"`},
		{"cycle", "{\"types\": [\n  {\"name\": \"A\", \"parents\": [\"B\"]},\n  {\"name\": \"B\", \"parents\": [\"A\"]}]}", ErrCycle,
			`ontology: f.json:2:3: type "A": inheritance cycle: "A" -> "B" -> "A" (each name is a parent of the one before it)`},
		{"reserved", "{\"types\": [\n\n    {\"name\": \"sion.X\"}]}", ErrReserved,
			`ontology: f.json:3:5: type "sion.X": reserved name: names beginning "sion." belong to sion`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadJSON(strings.NewReader(tc.src), "f.json")
			require.Error(t, err)
			var le *LoadError
			require.ErrorAs(t, err, &le)
			assert.ErrorIs(t, err, tc.err)
			assert.Equal(t, tc.msg, err.Error())
		})
	}
}

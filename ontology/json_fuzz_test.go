package ontology

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadSentinels are the errors a *LoadError of LoadJSON, LoadRDFXML or New
// wraps; each error wraps exactly one of them.
var loadSentinels = []error{ErrSyntax, ErrUnknownField, ErrEmptyName, ErrReserved, ErrDuplicateType,
	ErrSynonym, ErrUnknownParent, ErrCycle, ErrTooLarge, ErrVocabulary, ErrInvalidKind}

// requireLoadError checks the error of a loader: a *LoadError wrapping
// exactly one sentinel, naming file when it has a position.
func requireLoadError(t *testing.T, err error, file string) {
	t.Helper()
	var le *LoadError
	require.ErrorAs(t, err, &le)
	n := 0
	for _, s := range loadSentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	require.Equal(t, 1, n, "exactly one sentinel: %v", err)
	require.True(t, strings.HasPrefix(err.Error(), "ontology: "), "%v", err)
	if le.Pos.IsValid() {
		require.Equal(t, file, le.Pos.File, "%v", err)
	}
}

// checkOntology checks that a loaded ontology is consistent: the reserved
// types first; every name, synonym and parent resolves; IsA, Ancestors and
// Descendants agree and are acyclic; vocabularies are sorted, hold what
// the type and its parents declare, and resolve by synonym.
func checkOntology(t *testing.T, o *Ontology) {
	t.Helper()
	n := o.NumTypes()
	require.GreaterOrEqual(t, n, NumReserved)
	for i, d := range ReservedTypes() {
		require.Equal(t, d.Name, o.Type(i).Name)
	}
	for id := range n {
		et := o.Type(id)
		require.Equal(t, id, et.ID)
		got, ok := o.Lookup(et.Name)
		require.True(t, ok, "type %q", et.Name)
		require.Same(t, et, got)
		for _, s := range et.Synonyms {
			got, ok := o.Lookup(s)
			require.True(t, ok, "synonym %q of %q", s, et.Name)
			require.Same(t, et, got, "synonym %q", s)
		}
		require.True(t, o.IsA(id, id))
		anc := o.Ancestors(id)
		require.True(t, slices.IsSorted(anc), "ancestors of %q", et.Name)
		require.Contains(t, anc, id)
		for _, p := range et.Parents {
			pt, ok := o.Lookup(p)
			require.True(t, ok, "parent %q of %q resolves", p, et.Name)
			require.Equal(t, p, pt.Name, "parents are canonical names")
			require.True(t, o.IsA(id, pt.ID))
			require.False(t, o.IsA(pt.ID, id), "no cycle through %q and %q", et.Name, p)
			require.Contains(t, anc, pt.ID)
		}
		vocab := o.Vocabulary(id)
		require.True(t, slices.IsSortedFunc(vocab, func(a, b Attribute) int { return strings.Compare(a.Name, b.Name) }))
		for i := 1; i < len(vocab); i++ {
			require.NotEqual(t, vocab[i-1].Name, vocab[i].Name)
		}
		own := map[string]bool{}
		for _, a := range et.Attributes {
			own[a.Name] = true
			v, ok := o.Attribute(id, a.Name)
			require.True(t, ok, "own attribute %q of %q", a.Name, et.Name)
			require.Equal(t, a.Kind, v.Kind)
			require.Equal(t, a.Unit, v.Unit)
			for _, s := range a.Synonyms {
				require.Equal(t, a.Name, o.CanonicalAttribute(s))
				_, ok := o.Attribute(id, s)
				require.True(t, ok, "attribute %q by synonym %q", a.Name, s)
			}
		}
		for _, p := range et.Parents {
			pt, _ := o.Lookup(p)
			for _, a := range o.Vocabulary(pt.ID) {
				_, ok := o.Attribute(id, a.Name)
				require.True(t, ok, "%q inherits %q from %q", et.Name, a.Name, p)
			}
		}
		for _, a := range vocab {
			require.True(t, own[a.Name] || slices.ContainsFunc(et.Parents, func(p string) bool {
				pt, _ := o.Lookup(p)
				_, ok := o.Attribute(pt.ID, a.Name)
				return ok
			}), "%q has %q, which it neither declares nor inherits", et.Name, a.Name)
		}
	}
	if n > 200 {
		return // the pairwise check below is quadratic
	}
	for sub := range n {
		desc := o.Descendants(sub)
		require.True(t, slices.IsSorted(desc))
		for super := range n {
			isA := o.IsA(sub, super)
			require.Equal(t, isA, slices.Contains(o.Ancestors(sub), super), "IsA(%d, %d) and Ancestors", sub, super)
			require.Equal(t, isA, slices.Contains(o.Descendants(super), sub), "IsA(%d, %d) and Descendants", sub, super)
			if sub != super && isA {
				require.False(t, o.IsA(super, sub), "cycle %d, %d", sub, super)
			}
		}
	}
}

// writeJSON writes the user types of o in LoadJSON's format. Strings are
// written byte for byte, escaping only what JSON requires, so that names
// that are not UTF-8 read back the same.
func writeJSON(o *Ontology) []byte {
	var b bytes.Buffer
	str := func(s string) {
		b.WriteByte('"')
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c < 0x20:
				fmt.Fprintf(&b, `\u%04x`, c)
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte('"')
	}
	strs := func(field string, ss []string) {
		if len(ss) == 0 {
			return
		}
		b.WriteString(`, "` + field + `": [`)
		for i, s := range ss {
			if i > 0 {
				b.WriteString(", ")
			}
			str(s)
		}
		b.WriteString("]")
	}
	b.WriteString(`{"types": [`)
	for id := NumReserved; id < o.NumTypes(); id++ {
		et := o.Type(id)
		if id > NumReserved {
			b.WriteString(",")
		}
		b.WriteString("\n  {\"name\": ")
		str(et.Name)
		strs("parents", et.Parents)
		strs("synonyms", et.Synonyms)
		if et.Label != "" {
			b.WriteString(`, "label": `)
			str(et.Label)
		}
		if len(et.Attributes) > 0 {
			b.WriteString(`, "attributes": [`)
			for i, a := range et.Attributes {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(`{"name": `)
				str(a.Name)
				b.WriteString(`, "kind": "` + a.Kind.String() + `"`)
				if a.Unit != "" {
					b.WriteString(`, "unit": `)
					str(a.Unit)
				}
				strs("synonyms", a.Synonyms)
				b.WriteString("}")
			}
			b.WriteString("]")
		}
		b.WriteString("}")
	}
	b.WriteString("\n]}\n")
	return b.Bytes()
}

// requireSameTypes checks that two ontologies have the same types, apart
// from positions.
func requireSameTypes(t *testing.T, want, got *Ontology) {
	t.Helper()
	require.Equal(t, want.NumTypes(), got.NumTypes())
	for id := range want.NumTypes() {
		w, g := *want.Type(id), *got.Type(id)
		w.Pos, g.Pos = Position{}, Position{}
		require.Equal(t, w, g)
	}
}

// jsonSeeds are ontologies in the JSON format: the package doc's example,
// the examples' real ontologies, and the malformed inputs of
// TestLoadJSONErrors' kind.
func jsonSeeds(t testing.TB) [][]byte {
	seeds := [][]byte{
		[]byte(exampleJSON),
		[]byte(`{"types": []}`),
		[]byte("\xef\xbb\xbf" + `{"types": [{"name": "A"}]}`),
		[]byte(`{"types": [{"name": "A", "parents": ["B"]}, {"name": "B", "parents": ["A"]}]}`),
		[]byte(`{"types": [{"name": "A", "attributes": [{"name": "x", "kind": "int"}]},
			{"name": "B", "attributes": [{"name": "x", "kind": "float"}]},
			{"name": "C", "parents": ["A", "B"]}]}`),
		[]byte(`{"types": [{"name": "A", "synonyms": ["B"]}, {"name": "B"}]}`),
		[]byte(`{"types": [{"name": "sion.X"}, {"name": "*"}, {"name": ""}]}`),
		[]byte(`{"types": [{"name": "A", "parents": ["sion.Control"], "attributes": [{"name": "t", "kind": "time", "unit": "s", "synonyms": ["when", "at"]}]}]}`),
		[]byte(`{"types": [{"name": "A", "attributes": [{"name": "a", "kind": "integer"}, {"name": "b", "kind": "double"}, {"name": "c", "kind": "boolean"}, {"name": "d", "kind": "blob"}]}]}`),
		[]byte(`{"types": [{"name": "A", "label": 3}], "typo": 1}`),
		[]byte(`{"types": [{"name": "A\u0000\"\\é", "label": "\ud83d\ude00"}]}`),
		[]byte("{\"types\": [\n  {\"name\": \"A\",}\n]}"),
		[]byte(`[]`),
		[]byte(``),
	}
	for _, name := range []string{"../examples/internal/usgs/hazards.json", "../examples/alerts/alerts.json"} {
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		seeds = append(seeds, data)
	}
	return seeds
}

// FuzzLoadJSON checks that LoadJSON never panics, that its errors are
// *LoadError with exactly one sentinel, and that what it loads is a
// consistent ontology that writes back to JSON and loads again the same.
//
//	go test -run=^$ -fuzz=FuzzLoadJSON -fuzztime=1m ./ontology
func FuzzLoadJSON(f *testing.F) {
	for _, s := range jsonSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := LoadJSON(bytes.NewReader(data), "f.json")
		if err != nil {
			require.Nil(t, o)
			requireLoadError(t, err, "f.json")
			return
		}
		checkOntology(t, o)
		out := writeJSON(o)
		again, err := LoadJSON(bytes.NewReader(out), "again.json")
		require.NoError(t, err, "%s", out)
		requireSameTypes(t, o, again)
	})
}

func TestFuzzLoadJSONSeeds(t *testing.T) {
	// The seeds that load write back the same; the package doc's example
	// is among them.
	loaded := 0
	for _, s := range jsonSeeds(t) {
		o, err := LoadJSON(bytes.NewReader(s), "s.json")
		if err != nil {
			continue
		}
		loaded++
		again, err := LoadJSON(bytes.NewReader(writeJSON(o)), "again.json")
		require.NoError(t, err)
		requireSameTypes(t, o, again)
	}
	assert.GreaterOrEqual(t, loaded, 5)
}

package ontology

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const rdfHead = `<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#" xmlns:owl="http://www.w3.org/2002/07/owl#">`

// TestLoadRDFXMLPositionsExact: positions are those of each element's
// '<', wherever it is on its line. They used to come from xmlquery's line
// numbers (the line where the preceding token ended), and the column from
// the first start tag on that line: elements sharing a line, or following
// a comment of several lines, all got one wrong position.
func TestLoadRDFXMLPositionsExact(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want map[string]string // type → the text it is positioned at
	}{
		{"one line", rdfHead + `<owl:Class rdf:about="x:A"/><owl:Class rdf:about="x:B"><rdfs:subClassOf rdf:resource="x:C"/></owl:Class></rdf:RDF>`,
			map[string]string{"A": `<owl:Class rdf:about="x:A"`, "B": `<owl:Class rdf:about="x:B"`, "C": `<rdfs:subClassOf`}},
		{"after a comment", rdfHead + "\n<!--\n\n-->  <owl:Class rdf:about=\"x:A\"/>\n</rdf:RDF>",
			map[string]string{"A": `<owl:Class`}},
		{"entities and CDATA before", "<!DOCTYPE rdf:RDF [<!ENTITY x \"x:\">]>\n" + rdfHead +
			"<![CDATA[\n<owl:Class rdf:about=\"x:Z\"/>]]>\n\t<owl:Class rdf:about=\"&x;A\"/></rdf:RDF>",
			map[string]string{"A": `<owl:Class rdf:about="&x;A"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := LoadRDFXML(strings.NewReader(tc.src), "p.rdf")
			require.NoError(t, err)
			require.Equal(t, NumReserved+len(tc.want), o.NumTypes())
			for name, at := range tc.want {
				et, ok := o.Lookup(name)
				require.True(t, ok, name)
				i := strings.Index(tc.src, at)
				line := 1 + strings.Count(tc.src[:i], "\n")
				col := i - strings.LastIndexByte(tc.src[:i], '\n')
				assert.Equal(t, Position{File: "p.rdf", Line: line, Col: col}, et.Pos, name)
			}
		})
	}
}

// TestStartTags: startTags finds the start tags as encoding/xml reads
// them, past markup that holds '<' or '>'.
func TestStartTags(t *testing.T) {
	docs := []string{
		`<a/>`,
		`<?xml version="1.0"?><?pi <b/> ?><a x='>' y=">"><b/><!-- <c/> --><![CDATA[<d/>]]></a>`,
		"<!DOCTYPE a [\n <!ENTITY e \"<b>\">\n <!ENTITY f '>'>\n <!-- <c> '\" -->\n <!ELEMENT a (#PCDATA)>\n]>\n<a>&e;<b\n/></a>",
		"<!DOCTYPE a SYSTEM \"a>.dtd\"><a><!----></a>",
		"<!\"0><a/>", "<!'x><a/>",
		rdfHead + `<owl:Class rdf:about="x:A"><rdfs:label>a &lt;b> c</rdfs:label></owl:Class></rdf:RDF>`,
	}
	for _, doc := range docs {
		want := decoderStartTags(t, []byte(doc))
		require.NotEmpty(t, want)
		assert.Equal(t, want, startTags([]byte(doc)), doc)
	}
}

// TestLoadRDFXMLLabelIsText: an rdfs:label's content is its text, read
// once; a class element inside a label is no class. (Reading the classes
// inside labels made every level of classes nested in labels read the
// text of all the levels below it again: quadratic.)
func TestLoadRDFXMLLabelIsText(t *testing.T) {
	src := rdfHead + `<owl:Class rdf:about="x:A"><rdfs:label>a<owl:Class rdf:about="x:B"><rdfs:label>b</rdfs:label></owl:Class>c</rdfs:label></owl:Class></rdf:RDF>`
	o, err := LoadRDFXML(strings.NewReader(src), "l.rdf")
	require.NoError(t, err)
	a, ok := o.Lookup("A")
	require.True(t, ok)
	assert.Equal(t, "abc", a.Label)
	_, ok = o.Lookup("B")
	assert.False(t, ok)
}

// hostileShapes are documents whose loading cost used to grow with the
// square of their size (n is about the number of repeated parts; the
// documents are 4n to 12n bytes).
func hostileShapes(n int) []struct{ name, src string } {
	var parents, equivalents, entities, nested, attrs, jsonParents, jsonTypes strings.Builder
	for i := range n {
		fmt.Fprintf(&parents, "<rdfs:subClassOf rdf:resource=\"x:P%d\"/>\n", i)
		fmt.Fprintf(&equivalents, "<owl:equivalentClass rdf:resource=\"x:E%d\"/>\n", i)
		fmt.Fprintf(&entities, "<!ENTITY e%d ''>", i)
		if i < n/10 {
			nested.WriteString(`<owl:Class rdf:about="x:A"><rdfs:label>`)
		}
		if i > 0 {
			attrs.WriteString(",")
			jsonParents.WriteString(",")
		}
		fmt.Fprintf(&attrs, `{"name": "a%08d", "kind": "int"}`, n-i)
		fmt.Fprintf(&jsonParents, `"B%d"`, i)
		fmt.Fprintf(&jsonTypes, `, {"name": "B%d"}`, i)
	}
	return []struct{ name, src string }{
		// xmlquery's line numbers: a token of many lines, then many
		// tokens on one line.
		{"rdf: lines then tokens", rdfHead + "<!--" + strings.Repeat("\n", n) + "-->" + strings.Repeat("<a/>", n) + "</rdf:RDF>"},
		// The loader's column search from the start of a stale line.
		{"rdf: lines then classes", rdfHead + "<!--" + strings.Repeat("\n", n) + "-->" + strings.Repeat(`<owl:Class rdf:about="x:A"/>`, n/4) + "</rdf:RDF>"},
		// Labels' text read again at each level.
		{"rdf: classes in labels", rdfHead + nested.String() + strings.Repeat("</rdfs:label></owl:Class>", n/10) + "</rdf:RDF>"},
		// Parents and synonyms deduplicated by linear search.
		{"rdf: parents", rdfHead + `<owl:Class rdf:about="x:A">` + parents.String() + "</owl:Class></rdf:RDF>"},
		{"rdf: equivalents", rdfHead + `<owl:Class rdf:about="x:A">` + equivalents.String() + "</owl:Class></rdf:RDF>"},
		// Each entity's references counted over the whole document.
		{"rdf: entities", "<!DOCTYPE rdf:RDF [" + entities.String() + "]>" + rdfHead + "</rdf:RDF>"},
		// Attributes inserted one by one into a sorted vocabulary.
		{"json: attributes", `{"types": [{"name": "A", "attributes": [` + attrs.String() + "]}]}"},
		// Parents deduplicated by linear search in New.
		{"json: parents", `{"types": [{"name": "C", "parents": [` + jsonParents.String() + "]}" + jsonTypes.String() + "]}"},
	}
}

func loadShape(name, src string) (*Ontology, error) {
	if strings.HasPrefix(name, "json") {
		return LoadJSON(strings.NewReader(src), "h.json")
	}
	return LoadRDFXML(strings.NewReader(src), "h.rdf")
}

// TestLoadHostileShapes loads documents that took the loaders time
// growing with the square of their size (at n = 64,000, 0.3 s to 5 s
// each; see BenchmarkLoadHostileShapes). The test makes no timing
// assertion: run with -timeout to catch a regression.
func TestLoadHostileShapes(t *testing.T) {
	for _, s := range hostileShapes(16_000) {
		t.Run(s.name, func(t *testing.T) {
			o, err := loadShape(s.name, s.src)
			require.NoError(t, err)
			switch s.name {
			case "rdf: parents":
				a, _ := o.Lookup("A")
				assert.Len(t, a.Parents, 16_000)
			case "rdf: equivalents":
				a, _ := o.Lookup("x:E17")
				assert.Equal(t, "A", a.Name)
				assert.Len(t, a.Synonyms, 2*16_000+1)
			case "json: attributes":
				a, _ := o.Lookup("A")
				v := o.Vocabulary(a.ID)
				assert.Len(t, v, 16_000)
				assert.Equal(t, "a00000001", v[0].Name)
			case "json: parents":
				c, _ := o.Lookup("C")
				assert.Len(t, c.Parents, 16_000)
				assert.Len(t, o.Ancestors(c.ID), 16_001)
			}
		})
	}
}

// BenchmarkLoadHostileShapes shows the loaders' cost growing linearly
// with the size of the documents of hostileShapes.
func BenchmarkLoadHostileShapes(b *testing.B) {
	for _, n := range []int{16_000, 64_000} {
		for _, s := range hostileShapes(n) {
			b.Run(fmt.Sprintf("%s/n=%d", s.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(s.src)))
				for b.Loop() {
					if _, err := loadShape(s.name, s.src); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

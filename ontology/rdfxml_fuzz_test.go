package ontology

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxRDFSeedBytes bounds each seed of FuzzLoadRDFXML. The fuzzer minimizes
// every input that finds new coverage by deleting its bytes one at a
// time, then spans of them: at least one full load per byte, so the cost
// of a minimization grows with the square of the input's size. The whole
// sosa.rdf (42,820 bytes, about 2 ms a load with coverage counters) as the
// only seed made each minimization run into -fuzzminimizetime (60 s by
// default): a 60 s run stalled after 6 executions. Seeds cut from the
// real files one class each keep minimizations short.
const maxRDFSeedBytes = 4 << 10

// rdfClassSeeds cuts the W3C files of testdata into documents of one
// class each: the file's prolog, its rdf:RDF start tag with xml:base and
// the namespaces the class uses (by prefix or by IRI), one top-level owl:Class element as the
// file has it, and the end tag. It leaves out the few over
// maxRDFSeedBytes.
func rdfClassSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, name := range []string{"sosa.rdf", "ssn.rdf", "ssnx.rdf"} {
		data, err := os.ReadFile("testdata/" + name)
		require.NoError(t, err)
		d := xml.NewDecoder(bytes.NewReader(data))
		var prolog []byte
		var root xml.StartElement
		depth, start := 0, int64(0)
		for {
			off := d.InputOffset()
			tok, err := d.RawToken()
			if err == io.EOF {
				break
			}
			require.NoError(t, err, name)
			switch tok := tok.(type) {
			case xml.StartElement:
				depth++
				switch depth {
				case 1:
					prolog, root = data[:off], tok.Copy()
				case 2:
					start = off
				}
			case xml.EndElement:
				if depth == 2 && tok.Name.Space == "owl" && tok.Name.Local == "Class" {
					class := data[start:d.InputOffset()]
					seed := append(slices.Clip(prolog), "<rdf:RDF"...)
					for _, a := range root.Attr {
						if a.Name.Space != "xmlns" || a.Name.Local == "rdf" || bytes.Contains(class, []byte(a.Name.Local+":")) || bytes.Contains(class, []byte(a.Value)) {
							seed = fmt.Appendf(seed, "\n    %s=%q", strings.TrimPrefix(a.Name.Space+":"+a.Name.Local, ":"), a.Value)
						}
					}
					seed = append(append(append(seed, ">\n"...), class...), "\n</rdf:RDF>\n"...)
					if len(seed) <= maxRDFSeedBytes {
						seeds = append(seeds, seed)
					}
				}
				depth--
			}
		}
	}
	return seeds
}

// rdfSeeds are the seeds of FuzzLoadRDFXML: every class of the W3C files
// in a document of its own, and small documents with what the real files
// lack (entities, rdf:ID, rdf:Description, cycles, reserved names).
func rdfSeeds(t testing.TB) [][]byte {
	const head = `<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#" xmlns:owl="http://www.w3.org/2002/07/owl#" xmlns:b="http://example.org/b#">`
	seeds := [][]byte{
		[]byte(`<?xml version="1.0"?>
<!DOCTYPE rdf:RDF [
  <!ENTITY ex "http://example.org/a#">
]>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
         xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#"
         xmlns:owl="http://www.w3.org/2002/07/owl#"
         xmlns:b="http://example.org/b#"
         xml:base="http://example.org/a">
  <rdfs:Class rdf:ID="Music">
    <rdfs:label xml:lang="de">Musik</rdfs:label>
    <rdfs:label>music</rdfs:label>
  </rdfs:Class>
  <owl:Class rdf:about="&ex;BGM">
    <rdfs:subClassOf rdf:resource="#Music"/>
    <rdfs:subClassOf><owl:Class rdf:about="http://example.org/a#Seasonal"/></rdfs:subClassOf>
    <rdfs:subClassOf><owl:Restriction/></rdfs:subClassOf>
    <owl:equivalentClass rdf:resource="http://example.org/b#BGM"/>
  </owl:Class>
  <rdf:Description rdf:about="http://example.org/b#Thing">
    <rdf:type rdf:resource="http://www.w3.org/2002/07/owl#Class"/>
  </rdf:Description>
</rdf:RDF>`),
		[]byte(head + `<owl:Class rdf:about="x:A"><rdfs:subClassOf rdf:resource="x:B"/></owl:Class><owl:Class rdf:about="x:B"><rdfs:subClassOf rdf:resource="x:A"/></owl:Class></rdf:RDF>`),
		[]byte(head + `<owl:Class rdf:about="b#A"><owl:equivalentClass rdf:resource="http://example.org/b#A"/></owl:Class><owl:Class rdf:about="http://x/sion.Foo"/><owl:Class rdf:about="http://x/*"/></rdf:RDF>`),
		[]byte(head + `<owl:Class rdf:about="http://e/a#X"><rdfs:label xml:lang="fr">x</rdfs:label></owl:Class><owl:Class rdf:about="http://e/b#X"/><owl:Class rdf:about="http://e/c/"/></rdf:RDF>`),
		[]byte(`<?xml version="1.0" encoding="ISO-8859-1"?>` + head + `<owl:Class rdf:about="x:Caf` + "\xe9" + `"/></rdf:RDF>`),
		[]byte(`<html/>`),
		[]byte(head + `<owl:Class rdf:about="x:A">` + "\n</rdf:RDF>"),
	}
	return append(seeds, rdfClassSeeds(t)...)
}

// FuzzLoadRDFXML checks that LoadRDFXML never panics, that its errors are
// *LoadError with exactly one sentinel, and that what it loads is a
// consistent ontology that writes to JSON and loads from there the same.
//
//	go test -run=^$ -fuzz=FuzzLoadRDFXML -fuzztime=1m ./ontology
func FuzzLoadRDFXML(f *testing.F) {
	for _, s := range rdfSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := LoadRDFXML(bytes.NewReader(data), "f.rdf")
		if err != nil {
			require.Nil(t, o)
			requireLoadError(t, err, "f.rdf")
			return
		}
		checkOntology(t, o)
		require.Equal(t, decoderStartTags(t, data), startTags(data), "start tags")
		out := writeJSON(o)
		again, err := LoadJSON(bytes.NewReader(out), "again.json")
		require.NoError(t, err, "%s", out)
		requireSameTypes(t, o, again)
	})
}

// TestFuzzLoadRDFXMLSeeds: the seeds are small (see maxRDFSeedBytes), and
// they hold nearly every class of the W3C files, each loading alone.
func TestFuzzLoadRDFXMLSeeds(t *testing.T) {
	seeds := rdfSeeds(t)
	for i, s := range seeds {
		assert.LessOrEqual(t, len(s), maxRDFSeedBytes, "seed %d", i)
	}
	classes := 0
	for _, name := range []string{"sosa.rdf", "ssn.rdf", "ssnx.rdf"} {
		classes += countTag(t, name, "<owl:Class rdf:about=")
	}
	assert.GreaterOrEqual(t, len(rdfClassSeeds(t)), classes*9/10, "of %d classes", classes)
	for _, s := range rdfClassSeeds(t) {
		_, err := LoadRDFXML(bytes.NewReader(s), "seed.rdf")
		assert.NoError(t, err)
	}
}

// decoderStartTags returns the offsets of data's start tags as
// encoding/xml reads them, with the document's entities: what startTags
// must find.
func decoderStartTags(t testing.TB, data []byte) []int {
	entities := map[string]string{}
	if i := bytes.Index(data, []byte("<!DOCTYPE")); i >= 0 {
		for _, m := range entityDecl.FindAllSubmatch(data[i:], -1) {
			entities[string(m[1])] = string(m[2]) + string(m[3])
		}
	}
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Entity = entities
	var offs []int
	for {
		off := d.InputOffset()
		tok, err := d.RawToken()
		if err == io.EOF {
			return offs
		}
		require.NoError(t, err)
		if _, ok := tok.(xml.StartElement); ok {
			offs = append(offs, int(off))
		}
	}
}

package ontology

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func loadRDFFile(t *testing.T, name string) *Ontology {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	o, err := LoadRDFXML(f, name)
	require.NoError(t, err)
	return o
}

func TestLoadRDFXMLSOSA(t *testing.T) {
	o := loadRDFFile(t, "sosa.rdf")
	assert.Equal(t, NumReserved+16, o.NumTypes(), "sosa.rdf describes 16 classes")
	assert.Zero(t, o.ExtraIntervals())
	s, ok := o.Lookup("http://www.w3.org/ns/sosa/Sensor")
	require.True(t, ok)
	assert.Equal(t, "Sensor", s.Name)
	assert.Equal(t, "Sensor", s.Label)
	assert.Empty(t, s.Parents, "sosa.rdf has no rdfs:subClassOf")
	assert.Equal(t, "sosa.rdf", s.Pos.File)
	assert.Positive(t, s.Pos.Line)
}

func TestLoadRDFXMLSSN(t *testing.T) {
	o := loadRDFFile(t, "ssn.rdf")
	sample, ok := o.Lookup("Sample")
	require.True(t, ok)
	// ssn.rdf line 842: sosa:Sample subClassOf sosa:FeatureOfInterest and
	// sosa:Result, plus an owl:Restriction that is not a parent.
	assert.Equal(t, []string{"FeatureOfInterest", "Result"}, sample.Parents)
	assert.Equal(t, Position{File: "ssn.rdf", Line: 842, Col: 5}, sample.Pos)
	sensor, _ := o.Lookup("Sensor")
	system, _ := o.Lookup("http://www.w3.org/ns/ssn/System")
	assert.True(t, o.IsA(sensor.ID, system.ID))
	assert.Equal(t, 11, countTag(t, "ssn.rdf", "<owl:Class rdf:about="))
}

func countTag(t *testing.T, file, tag string) int {
	t.Helper()
	data, err := os.ReadFile("testdata/" + file)
	require.NoError(t, err)
	return bytes.Count(data, []byte(tag))
}

func TestLoadRDFXMLSSNX(t *testing.T) {
	o := loadRDFFile(t, "ssnx.rdf")
	lookup := func(t *testing.T, name string) *EventType {
		t.Helper()
		et, ok := o.Lookup(name)
		require.True(t, ok, "%q", name)
		return et
	}
	t.Run("class counts", func(t *testing.T) {
		// 43 named owl:Class elements (the shared README's "86" counts the
		// lines mentioning owl:Class); the classes they reference from SOSA,
		// SSN and DOLCE become implicit types, and owl:equivalentClass merges.
		assert.Equal(t, 43, countTag(t, "ssnx.rdf", "<owl:Class rdf:about="))
		data, err := os.ReadFile("testdata/ssnx.rdf")
		require.NoError(t, err)
		defs, err := rdfTypeDefs(data, "ssnx.rdf")
		require.NoError(t, err)
		assert.Len(t, defs, o.NumTypes()-NumReserved)
		assert.Equal(t, NumReserved+63, o.NumTypes())
	})
	t.Run("named subClassOf", func(t *testing.T) {
		// ssnx.rdf line 929: ssnx#BatteryLifetime subClassOf ssnx#SurvivalProperty.
		bl := lookup(t, "http://purl.oclc.org/NET/ssnx/ssn#BatteryLifetime")
		assert.Equal(t, "oldssn:BatteryLifetime", bl.Name)
		assert.Equal(t, []string{"oldssn:SurvivalProperty"}, bl.Parents)
		assert.Equal(t, "Battery Lifetime", bl.Label)
		assert.Equal(t, Position{File: "ssnx.rdf", Line: 927, Col: 5}, bl.Pos)
		sp := lookup(t, "oldssn:SurvivalProperty")
		assert.True(t, o.IsA(bl.ID, sp.ID))
		assert.False(t, o.IsA(sp.ID, bl.ID))
		// … SurvivalProperty subClassOf Property subClassOf dul:Quality.
		assert.True(t, o.IsA(bl.ID, lookup(t, "http://www.ontologydesignpatterns.org/ont/dul/DUL.owl#Quality").ID))
	})
	t.Run("equivalentClass", func(t *testing.T) {
		// ssnx.rdf line 956: ssnx#Deployment equivalentClass ssn:Deployment.
		d := lookup(t, "ssn:Deployment")
		assert.Equal(t, "oldssn:Deployment", d.Name)
		assert.Equal(t, d, lookup(t, "http://www.w3.org/ns/ssn/Deployment"))
		assert.Equal(t, d, lookup(t, "http://purl.oclc.org/NET/ssnx/ssn#Deployment"))
		assert.Equal(t, []string{"http://purl.oclc.org/NET/ssnx/ssn#Deployment", "ssn:Deployment", "http://www.w3.org/ns/ssn/Deployment"}, d.Synonyms)
		// Its two owl:Restriction subClassOf are not parents.
		assert.Equal(t, []string{"DeploymentRelatedProcess"}, d.Parents)
		// ssnx#Process equivalentClass sosa:Procedure, a unique local name.
		assert.Equal(t, "oldssn:Process", lookup(t, "Procedure").Name)
	})
	t.Run("multiple inheritance", func(t *testing.T) {
		// ssnx#Device subClassOf dul:DesignedArtifact, sosa:Platform, ssn:System.
		dev := lookup(t, "Device")
		assert.Equal(t, []string{"DesignedArtifact", "oldssn:Platform", "oldssn:System"}, dev.Parents)
		for _, super := range []string{"sosa:Platform", "ssn:System", "DesignedArtifact", "PhysicalObject"} {
			assert.True(t, o.IsA(dev.ID, lookup(t, super).ID), super)
		}
		sd := lookup(t, "SensingDevice")
		assert.True(t, o.IsA(sd.ID, lookup(t, "sosa:Sensor").ID))
		assert.True(t, o.IsA(sd.ID, dev.ID))
		assert.Positive(t, o.ExtraIntervals())
	})
	t.Run("anonymous unionOf is not a parent", func(t *testing.T) {
		assert.Equal(t, []string{"sosa:FeatureOfInterest"}, lookup(t, "oldssn:FeatureOfInterest").Parents)
	})
	t.Run("implicit types", func(t *testing.T) {
		p := lookup(t, "dul:Process")
		assert.Empty(t, p.Parents)
		assert.Empty(t, p.Label)
		assert.Equal(t, Position{File: "ssnx.rdf", Line: 984, Col: 9}, p.Pos, "first reference")
	})
}

func TestLoadRDFXMLSynthetic(t *testing.T) {
	const src = `<?xml version="1.0"?>
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
    <rdfs:label xml:lang="en-GB">music (en)</rdfs:label>
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
  <rdf:Description rdf:about="http://example.org/b#Pop">
    <rdfs:subClassOf rdf:resource="#Music"/>
  </rdf:Description>
</rdf:RDF>`
	o, err := LoadRDFXML(strings.NewReader(src), "s.rdf")
	require.NoError(t, err)
	music, ok := o.Lookup("Music")
	require.True(t, ok)
	assert.Equal(t, "music (en)", music.Label, "en-GB beats no language beats de")
	assert.Equal(t, Position{File: "s.rdf", Line: 10, Col: 3}, music.Pos)
	bgm, ok := o.Lookup("b:BGM")
	require.True(t, ok)
	assert.Equal(t, "BGM", bgm.Name[len(bgm.Name)-3:])
	assert.Equal(t, []string{"Music", "Seasonal"}, bgm.Parents)
	assert.NotEqual(t, "b:BGM", bgm.Name, "the described class is canonical")
	_, ok = o.Lookup("Thing")
	assert.True(t, ok)
	pop, _ := o.Lookup("Pop")
	assert.True(t, o.IsA(pop.ID, music.ID))
	assert.Equal(t, NumReserved+5, o.NumTypes())
}

func TestLoadRDFXMLErrors(t *testing.T) {
	head := `<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#" xmlns:owl="http://www.w3.org/2002/07/owl#">` + "\n"
	tests := []struct {
		name string
		src  string
		err  error
		msg  string
	}{
		{"not well-formed", head + "<owl:Class rdf:about=\"x:A\">\n</rdf:RDF>", ErrSyntax,
			"ontology: e.rdf:3: syntax error: XML syntax error on line 3: element <Class> closed by </RDF>"},
		{"not rdf", "<html/>", ErrSyntax,
			"ontology: e.rdf:1: syntax error: the document element is not rdf:RDF"},
		{"cycle", head + "<owl:Class rdf:about=\"x:A\"><rdfs:subClassOf rdf:resource=\"x:B\"/></owl:Class>\n" +
			"  <owl:Class rdf:about=\"x:B\"><rdfs:subClassOf rdf:resource=\"x:A\"/></owl:Class>\n</rdf:RDF>", ErrCycle,
			`ontology: e.rdf:2:1: type "A": inheritance cycle: "A" -> "B" -> "A" (each name is a parent of the one before it)`},
		{"reserved", head + "\n <owl:Class rdf:about=\"http://x/sion.Foo\"/>\n</rdf:RDF>", ErrReserved,
			`ontology: e.rdf:3:2: type "sion.Foo": reserved name: names beginning "sion." belong to sion`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadRDFXML(strings.NewReader(tc.src), "e.rdf")
			require.Error(t, err)
			var le *LoadError
			require.ErrorAs(t, err, &le)
			assert.ErrorIs(t, err, tc.err)
			assert.Equal(t, tc.msg, err.Error())
		})
	}
}

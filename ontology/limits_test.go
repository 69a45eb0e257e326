package ontology

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLimits: inputs that would take the process's memory are refused
// with ErrTooLarge, and "*" (AnyType in filters) is not a type name.
func TestLimits(t *testing.T) {
	t.Run("deep chain", func(t *testing.T) {
		defs := make([]TypeDef, 6000)
		for i := range defs {
			defs[i].Name = fmt.Sprintf("T%d", i)
			if i > 0 {
				defs[i].Parents = []string{defs[i-1].Name}
			}
		}
		_, err := New(defs)
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrTooLarge)
	})
	t.Run("chain within the limit", func(t *testing.T) {
		defs := make([]TypeDef, 3000)
		for i := range defs {
			defs[i].Name = fmt.Sprintf("T%d", i)
			if i > 0 {
				defs[i].Parents = []string{defs[i-1].Name}
			}
		}
		defs[0].Attributes = []Attribute{{Name: "a", Kind: KindInt}}
		o, err := New(defs)
		require.NoError(t, err)
		last, _ := o.Lookup("T2999")
		first, _ := o.Lookup("T0")
		assert.True(t, o.IsA(last.ID, first.ID))
		_, ok := o.Attribute(last.ID, "a")
		assert.True(t, ok, "inherited through 2,999 levels")
	})
	t.Run("star is not a type name", func(t *testing.T) {
		_, err := New([]TypeDef{{Name: "*"}})
		assert.ErrorIs(t, err, ErrReserved)
		_, err = New([]TypeDef{{Name: "A", Synonyms: []string{"*"}}})
		assert.ErrorIs(t, err, ErrReserved)
	})
	t.Run("entity expansion", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(`<?xml version="1.0"?><!DOCTYPE rdf:RDF [<!ENTITY big "` + strings.Repeat("x", 100_000) + `">]>`)
		b.WriteString(`<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:owl="http://www.w3.org/2002/07/owl#" xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#">`)
		b.WriteString(`<owl:Class rdf:about="http://example.org/A"><rdfs:label>`)
		for range 200 {
			b.WriteString("&big;")
		}
		b.WriteString(`</rdfs:label></owl:Class></rdf:RDF>`)
		_, err := LoadRDFXML(strings.NewReader(b.String()), "bomb.rdf")
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrTooLarge)
		assert.Contains(t, err.Error(), "bomb.rdf")
	})
}

func TestLoadJSONByteOrderMark(t *testing.T) {
	o, err := LoadJSON(strings.NewReader("\xef\xbb\xbf"+`{"types": [{"name": "A"}]}`), "bom.json")
	require.NoError(t, err)
	_, ok := o.Lookup("A")
	assert.True(t, ok)
}

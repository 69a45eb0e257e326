package sion_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

func testPlace(t *testing.T) *sion.EventPlace {
	t.Helper()
	p, err := sion.NewEventPlace(sion.PlaceConfig{Name: "p", Ontology: ont1(t)})
	require.NoError(t, err)
	return p
}

func TestJSONReader(t *testing.T) {
	p := testPlace(t)
	r, err := p.NewJSONReader(sion.JSONFields{TypePath: "kind", Attrs: []sion.AttrPath{
		{Name: "n", Path: "n"}, {Name: "tempC", Path: "t\\.c"}, {Name: "zone", Path: "where.zone"}, {Name: "seq", Path: "seq"},
	}})
	require.NoError(t, err)
	ev, err := r.Read([]byte(`{"kind": "TempReading", "n": 9007199254740993, "t.c": 21, "where": {"zone": null}}`))
	require.NoError(t, err)
	assert.Equal(t, "TempReading", ev.Type)
	assert.Equal(t, attrs("n", int64(9007199254740993), "celsius", 21.0), ev.Attrs, "exact ints, synonyms resolved, declared kinds; null is missing")
	assert.Equal(t, "application/json", ev.ContentType)

	for _, c := range []struct{ doc, want string }{
		{`{"n": 1}`, `no event type name at "kind"`},
		{`{"kind": "Gossip"}`, `unknown event type "Gossip"`},
		{`{"kind": "Reading", "n": 1.5}`, `attribute "n" (at "n"): want int, got float 1.5`},
		{`{"kind": "Reading", "n": "1"}`, `want int, got string "1"`},
		{`{"kind": "Notice", "where": {"zone": 3}}`, `attribute "zone" (at "where.zone"): want string, got int 3`},
		{`{"kind": "TempReading", "where": {"zone": "hall"}}`, `attribute "zone" (at "where.zone") is not in the vocabulary of event type "TempReading"`},
		// Found by FuzzJSONReader: what Publish would refuse, the reader refuses.
		{`{"kind": "sion.Control"}`, `event type "sion.Control" (read at "kind") is reserved for sion's control traffic`},
		{`{"kind": "TempReading", "t.c": 1e999}`, `attribute "tempC" (at "t\\.c"): +Inf: the number is beyond float64's range`},
	} {
		_, err := r.Read([]byte(c.doc))
		require.Error(t, err, c.doc)
		assert.Contains(t, err.Error(), c.want)
	}
	_, err = p.NewJSONReader(sion.JSONFields{Type: "Reading", TypePath: "kind"})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	_, err = p.NewJSONReader(sion.JSONFields{Type: "Reading", Attrs: []sion.AttrPath{{Name: "colour", Path: "c"}}})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	_, err = r.ReadList([]byte(`{"items": `), "items")
	require.ErrorIs(t, err, sion.ErrInvalidEvent)
	_, err = r.ReadList([]byte(`{"items": 3}`), "items")
	require.ErrorIs(t, err, sion.ErrInvalidEvent)
}

func TestXMLReader(t *testing.T) {
	p := testPlace(t)
	ns := map[string]string{"a": "urn:atom", "s": "urn:sensors"}
	r, err := p.NewXMLReader(sion.XMLFields{Namespaces: ns, TypePath: "s:kind", Attrs: []sion.AttrPath{
		{Name: "celsius", Path: "s:c"}, {Name: "n", Path: "@n"},
	}})
	require.NoError(t, err)
	doc := `<feed xmlns="urn:atom" xmlns:x="urn:sensors">
	  <entry n="7"><x:kind>TempReading</x:kind><x:c> 21.5 </x:c><title>one</title></entry>
	  <entry><x:kind>Gossip</x:kind></entry>
	  <entry><x:kind>TempReading</x:kind><x:c>warm</x:c></entry>
	  <entry n="8"><x:kind>Reading</x:kind></entry>
	</feed>`
	events, err := r.ReadList([]byte(doc), "/a:feed/a:entry")
	require.Len(t, events, 2)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `element 1 of "/a:feed/a:entry": sion: unknown event type "Gossip"`)
	assert.Contains(t, err.Error(), `element 2 of "/a:feed/a:entry": sion: invalid event: attribute "celsius" (at "s:c"): "warm" is not a finite float`)
	assert.Equal(t, attrs("celsius", 21.5, "n", 7), events[0].Attrs)

	// The payload keeps its namespaces: a filter bound to the URIs matches it.
	payload := string(events[0].Data)
	assert.True(t, strings.HasPrefix(payload, `<entry n="7" xmlns="urn:atom" xmlns:x="urn:sensors">`), payload)
	f := filter.MustCompile(`{xmlns:q = "urn:sensors"; xmlns:b = "urn:atom"; xpath(/b:entry[q:c > 21]/b:title = 'one')}`)
	ok, _ := f.Eval(events[0])
	assert.True(t, ok)

	_, err = p.NewXMLReader(sion.XMLFields{TypePath: "t:kind"})
	require.ErrorIs(t, err, sion.ErrInvalidConfig, "unbound prefix")
	_, err = r.ReadList([]byte(`<feed><entry>`), "/a:feed/a:entry")
	require.ErrorIs(t, err, sion.ErrInvalidEvent)

	// Found by FuzzXMLReader: a reserved type, and a prefix declared with
	// an empty namespace name, which xmlquery would put on unprefixed
	// attributes in the payload (Namespaces in XML 1.0 forbids it).
	_, err = r.Read([]byte(`<entry xmlns:x="urn:sensors"><x:kind>sion.Discovery</x:kind></entry>`))
	require.ErrorIs(t, err, sion.ErrInvalidEvent)
	assert.Contains(t, err.Error(), `event type "sion.Discovery" (read at "s:kind") is reserved`)
	_, err = r.Read([]byte(`<entry xmlns:x="urn:sensors" xmlns:e="" a="1"><x:kind>Reading</x:kind></entry>`))
	require.ErrorIs(t, err, sion.ErrInvalidEvent)
	assert.Contains(t, err.Error(), `prefix "e" declared with an empty namespace name`)
	require.ErrorIs(t, filter.CheckPayload("application/xml", []byte(`<feed xmlns:000='' A=''></feed>`)), filter.ErrPayload)

	tr, err := p.NewXMLReader(sion.XMLFields{Type: "Notice", Attrs: []sion.AttrPath{{Name: "seq", Path: "@seq"}}})
	require.NoError(t, err)
	ev, err := tr.Read([]byte(`<notice seq="-9223372036854775808"/>`))
	require.NoError(t, err)
	assert.Equal(t, attrs("seq", ontology.Int(-1<<63)), ev.Attrs)
}

func timePlace(t *testing.T) *sion.EventPlace {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{{Name: "Tick", Attributes: []ontology.Attribute{{Name: "at", Kind: ontology.KindTime}}}})
	require.NoError(t, err)
	p, err := sion.NewEventPlace(sion.PlaceConfig{Name: "t", Ontology: o})
	require.NoError(t, err)
	return p
}

func TestXMLReaderXPathBudget(t *testing.T) {
	p := testPlace(t)
	r, err := p.NewXMLReader(sion.XMLFields{Type: "Notice", Attrs: []sion.AttrPath{{Name: "zone", Path: "string(count(//a[. = //a[last()]]))"}}})
	require.NoError(t, err)
	_, err = r.Read([]byte("<r>" + strings.Repeat("<a>1</a>", 4000) + "</r>"))
	require.ErrorIs(t, err, sion.ErrInvalidEvent)
	require.ErrorIs(t, err, filter.ErrPayload)
	assert.Contains(t, err.Error(), "XPathStepBudget")
	ev, err := r.Read([]byte("<r>" + strings.Repeat("<a>1</a>", 20) + "</r>"))
	require.NoError(t, err)
	assert.Equal(t, attrs("zone", "20"), ev.Attrs)
}

package sion

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// fuzzPlace is an event place over an ontology file of the examples.
func fuzzPlace(t testing.TB, file string) *EventPlace {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	o, err := ontology.LoadJSON(bytes.NewReader(data), file)
	require.NoError(t, err)
	p, err := NewEventPlace(PlaceConfig{Name: "fuzz", Ontology: o})
	require.NoError(t, err)
	return p
}

// requireAdmitted checks that the place accepts an event that a reader
// made from doc, as Publish would, and that the reader reads the event's
// payload back to the same event (so the payload is the document the
// event was read from). read is the reader's Read.
func requireAdmitted(t *testing.T, p *EventPlace, ev *Event, doc []byte, read func([]byte) (*Event, error)) {
	t.Helper()
	_, err := p.admit(ev, admitPublished)
	require.NoError(t, err, "the reader made %v", ev)
	if ev.Data == nil {
		return
	}
	again, err := read(ev.Data)
	require.NoError(t, err, "the reader reads the payload %q of %v", ev.Data, ev)
	require.Equal(t, ev.Type, again.Type, "payload %q", ev.Data)
	require.Equal(t, ev.Attrs, again.Attrs, "payload %q", ev.Data)
}

// requireRecords checks what a reader made of a list of n records in doc:
// each event is admitted (requireAdmitted), each error names its record,
// and every record gave one or the other.
func requireRecords(t *testing.T, p *EventPlace, events []*Event, err error, n int, list string, doc []byte, read func([]byte) (*Event, error)) {
	t.Helper()
	for _, ev := range events {
		requireAdmitted(t, p, ev, doc, read)
	}
	var errs []error
	if err != nil {
		j, ok := err.(interface{ Unwrap() []error })
		require.True(t, ok, "ReadList joins the records' errors: %v", err)
		errs = j.Unwrap()
	}
	for _, e := range errs {
		require.Regexp(t, fmt.Sprintf(`^element \d+ of %q: `, list), e.Error())
		require.True(t, errors.Is(e, ErrInvalidEvent) || errors.Is(e, ErrUnknownEventType), "%v", e)
	}
	require.Equal(t, n, len(events)+len(errs), "one event or one error per record")
}

// requireRead checks what Read made of one document.
func requireRead(t *testing.T, p *EventPlace, ev *Event, err error, doc []byte, read func([]byte) (*Event, error)) {
	t.Helper()
	if err != nil {
		require.Nil(t, ev)
		require.True(t, errors.Is(err, ErrInvalidEvent) || errors.Is(err, ErrUnknownEventType), "%v", err)
		return
	}
	requireAdmitted(t, p, ev, doc, read)
}

// usgsFields reads the USGS feed as the quakewatch example does
// (examples/internal/usgs.Fields).
var usgsFields = JSONFields{
	TypePath: "properties.type",
	Attrs: []AttrPath{
		{Name: "mag", Path: "properties.mag"},
		{Name: "place", Path: "properties.place"},
		{Name: "depth", Path: "geometry.coordinates.2"},
		{Name: "tsunami", Path: "properties.tsunami"},
		{Name: "alert", Path: "properties.alert"},
		{Name: "time", Path: "properties.time"},
	},
}

// usgsSeeds are features of the real USGS feed: the first of each event
// type, the first with an alert, the first with a tsunami flag, and a
// FeatureCollection of three.
func usgsSeeds(t testing.TB) [][]byte {
	week, err := os.ReadFile("examples/internal/usgs/all_week_2023-04-07.geojson")
	require.NoError(t, err)
	features, ok := filter.JSONElements(week, "features")
	require.True(t, ok)
	var seeds [][]byte
	seen := map[string]bool{}
	for _, f := range features {
		typ, _ := filter.JSONValue(f, "properties.type")
		_, hasAlert := filter.JSONValue(f, "properties.alert")
		tsunami, _ := filter.JSONValue(f, "properties.tsunami")
		keys := []string{"type " + typ.Str()}
		if hasAlert {
			keys = append(keys, "alert")
		}
		if tsunami.Int() == 1 {
			keys = append(keys, "tsunami")
		}
		for _, k := range keys {
			if !seen[k] {
				seen[k] = true
				seeds = append(seeds, f)
				break
			}
		}
	}
	coll := `{"type": "FeatureCollection", "features": [` + string(features[0]) + ", " + string(features[1]) + ", " + string(features[2]) + "]}"
	return append(seeds, []byte(coll))
}

// FuzzJSONReader reads fuzzed documents with the quakewatch example's
// JSONFields (Read, and ReadList of "features"), and with a fixed type,
// time units and no payload: no panic; every event it makes passes the
// place's validation (EventPlace.admit, as Publish); every error names its
// record.
//
//	go test -run=^$ -fuzz=FuzzJSONReader -fuzztime=1m .
func FuzzJSONReader(f *testing.F) {
	for _, s := range usgsSeeds(f) {
		f.Add(s)
	}
	for _, s := range []string{
		`{"features": 3}`, `{"features": []}`, `[]`, `{`, `null`,
		`{"properties": {"type": "earthquake", "mag": "4.5", "time": 1e300, "tsunami": 1.5}}`,
		`{"properties": {"type": "quarry blast", "mag": 9007199254740993, "time": -9223372036854775808, "alert": null}, "geometry": {"coordinates": [1, 2, -0.0]}}`,
		`{"properties": {"type": "sion.Control"}}`,
		`{"properties": {"type": "*"}}`,
		`{"properties": {"type": "earthquake", "mag": 1e999}}`, `-1e999`,
		`{"features": [{"properties": {"type": "hazard", "place": "\ud800"}}, 7, {"properties": {"type": "x"}}]}`,
	} {
		f.Add([]byte(s))
	}
	p := fuzzPlace(f, "examples/internal/usgs/hazards.json")
	r, err := p.NewJSONReader(usgsFields)
	require.NoError(f, err)
	fixed, err := p.NewJSONReader(JSONFields{Type: "earthquake", NoPayload: true, Attrs: []AttrPath{
		{Name: "time", Path: "properties.time", TimeUnit: 1000}, {Name: "depth", Path: "properties.time"}, {Name: "mag", Path: "@this"},
	}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, r := range []*JSONReader{r, fixed} {
			ev, err := r.Read(doc)
			requireRead(t, p, ev, err, doc, r.Read)
			events, err := r.ReadList(doc, "features")
			elems, ok := filter.JSONElements(doc, "features")
			if !ok || filter.CheckPayload("application/json", doc) != nil {
				require.Empty(t, events)
				require.ErrorIs(t, err, ErrInvalidEvent)
				continue
			}
			requireRecords(t, p, events, err, len(elems), "features", doc, r.Read)
		}
	})
}

// capNamespaces and capFields read the NWS CAP Atom feed as the alerts
// example does.
var (
	capNamespaces = map[string]string{"atom": "http://www.w3.org/2005/Atom", "cap": "urn:oasis:names:tc:emergency:cap:1.1"}
	capFields     = XMLFields{
		Namespaces: capNamespaces,
		TypePath:   "cap:event",
		Attrs: []AttrPath{
			{Name: "severity", Path: "cap:severity"},
			{Name: "urgency", Path: "cap:urgency"},
			{Name: "certainty", Path: "cap:certainty"},
			{Name: "status", Path: "cap:status"},
			{Name: "msgType", Path: "cap:msgType"},
			{Name: "category", Path: "cap:category"},
			{Name: "area", Path: "cap:areaDesc"},
			{Name: "effective", Path: "cap:effective"},
			{Name: "expires", Path: "cap:expires"},
		},
	}
)

// capSeeds are feeds of one entry of the real NWS feed (its feed start
// tag, with its namespaces, around it), and one entry alone: small, as
// the fuzzer's minimization costs a parse per byte and more.
func capSeeds(t testing.TB) [][]byte {
	feed, err := os.ReadFile("examples/alerts/nws_cap_atom_2018-08-15.xml")
	require.NoError(t, err)
	start := bytes.Index(feed, []byte("<feed"))
	require.GreaterOrEqual(t, start, 0)
	head := feed[start : start+bytes.IndexByte(feed[start:], '>')+1]
	var entries [][]byte
	for rest := feed; len(entries) < 6; {
		i, j := bytes.Index(rest, []byte("<entry>")), bytes.Index(rest, []byte("</entry>"))
		require.True(t, i >= 0 && j > i)
		entries = append(entries, rest[i:j+len("</entry>")])
		rest = rest[j+1:]
	}
	wrap := func(es ...[]byte) []byte {
		return []byte(string(head) + "\n" + string(bytes.Join(es, []byte("\n"))) + "\n</feed>\n")
	}
	return [][]byte{
		wrap(entries[0]), wrap(entries[3]), wrap(entries[5]),
		[]byte(strings.Replace(string(entries[0]), "<entry>", `<entry xmlns="http://www.w3.org/2005/Atom" xmlns:cap="urn:oasis:names:tc:emergency:cap:1.1">`, 1)),
	}
}

// FuzzXMLReader reads fuzzed documents with the alerts example's
// XMLFields (ReadList of the Atom entries, and Read), and with a fixed
// type and attribute values from XML attributes: no panic; every event it
// makes passes the place's validation (EventPlace.admit, as Publish),
// its XML payload included; every error names its record.
//
//	go test -run=^$ -fuzz=FuzzXMLReader -fuzztime=1m .
func FuzzXMLReader(f *testing.F) {
	for _, s := range capSeeds(f) {
		f.Add(s)
	}
	for _, s := range []string{
		`<feed xmlns="http://www.w3.org/2005/Atom" xmlns:c="urn:oasis:names:tc:emergency:cap:1.1"><entry><c:event> flood </c:event><c:effective>2018-08-15T14:52:00-08:00</c:effective><c:expires>9999-01-01T00:00:00Z</c:expires></entry></feed>`,
		`<feed xmlns="http://www.w3.org/2005/Atom"><entry/><entry><cap:event xmlns:cap="urn:oasis:names:tc:emergency:cap:1.1">alert</cap:event></entry></feed>`,
		`<feed xmlns="http://www.w3.org/2005/Atom" xmlns:cap="urn:oasis:names:tc:emergency:cap:1.1"><entry><cap:event><![CDATA[Flood Warning]]></cap:event><cap:areaDesc>a &amp; b &lt;c&gt;</cap:areaDesc><!-- x --><?pi x?></entry></feed>`,
		`<entry sev="Severe" at="2018-08-15T14:52:00Z"/>`,
		`<entry xmlns:cap="urn:oasis:names:tc:emergency:cap:1.1"><cap:event>sion.Discovery</cap:event></entry>`,
		`<entry xmlns:x="" sev="Severe"/>`,
		`<feed xmlns:000=''A=''></feed>0`,
		`<?xml version="1.0" encoding="ISO-8859-1"?><entry sev="caf` + "\xe9" + `"/>`,
		`<a><b>`, ``, `<`,
	} {
		f.Add([]byte(s))
	}
	p := fuzzPlace(f, "examples/alerts/alerts.json")
	r, err := p.NewXMLReader(capFields)
	require.NoError(f, err)
	fixed, err := p.NewXMLReader(XMLFields{Namespaces: capNamespaces, Type: "Flood Warning", Attrs: []AttrPath{
		{Name: "severity", Path: "@sev"}, {Name: "effective", Path: "@at"}, {Name: "area", Path: "."},
	}})
	require.NoError(f, err)
	const list = "/atom:feed/atom:entry"
	sel, err := filter.CompileXMLPath(list, capNamespaces)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, r := range []*XMLReader{r, fixed} {
			ev, err := r.Read(doc)
			requireRead(t, p, ev, err, doc, r.Read)
			events, err := r.ReadList(doc, list)
			elems, xerr := filter.XMLElements(doc, sel)
			if xerr != nil {
				require.Empty(t, events)
				require.ErrorIs(t, err, ErrInvalidEvent)
				continue
			}
			requireRecords(t, p, events, err, len(elems), list, doc, r.Read)
		}
	})
}

package nats_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	natsgo "github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/nats"
	"github.com/sion-go/sion/ontology"
)

// usgsDir holds the USGS week and the hazard ontology (testdata/DATA.md).
var usgsDir = "testdata"

// seismicTruth counts the week's features whose type is seismic or
// below, from the raw files with encoding/json only: the hazard
// ontology's parent links are followed by hand, not by sion's ontology.
func seismicTruth(t *testing.T, hazards, week []byte) (seismic, all int) {
	t.Helper()
	var h struct {
		Types []struct {
			Name     string   `json:"name"`
			Parents  []string `json:"parents"`
			Synonyms []string `json:"synonyms"`
		} `json:"types"`
	}
	require.NoError(t, json.Unmarshal(hazards, &h))
	parents := map[string][]string{}
	for _, ty := range h.Types {
		parents[ty.Name] = ty.Parents
	}
	var under func(name string) bool
	under = func(name string) bool {
		if name == "seismic" {
			return true
		}
		for _, p := range parents[name] {
			if under(p) {
				return true
			}
		}
		return false
	}
	var w struct {
		Features []struct {
			Properties struct {
				Type string `json:"type"`
			} `json:"properties"`
		} `json:"features"`
	}
	require.NoError(t, json.Unmarshal(week, &w))
	for _, f := range w.Features {
		if under(f.Properties.Type) {
			seismic++
		}
	}
	return seismic, len(w.Features)
}

// fromBinary decodes a binary-mode CloudEvent from a NATS message as a
// plain NATS client would: headers ce-* and content-type, data as is.
func fromBinary(t *testing.T, m *natsgo.Msg) event.Event {
	t.Helper()
	ce := event.New(m.Header.Get("ce-specversion"))
	for k, vs := range m.Header {
		name, ok := strings.CutPrefix(k, "ce-")
		switch {
		case k == "content-type":
			ce.SetDataContentType(vs[0])
		case !ok, name == "specversion":
		case name == "id":
			ce.SetID(vs[0])
		case name == "source":
			ce.SetSource(vs[0])
		case name == "type":
			ce.SetType(vs[0])
		case name == "subject":
			ce.SetSubject(vs[0])
		case name == "time":
			at, err := types.ParseTime(vs[0])
			require.NoError(t, err)
			ce.SetTime(at)
		default:
			ce.SetExtension(name, vs[0])
		}
	}
	ce.DataEncoded = m.Data
	require.NoError(t, ce.Validate())
	return ce
}

func sameValue(a, b ontology.Value) bool {
	if a.Kind() == ontology.KindFloat && b.Kind() == ontology.KindFloat {
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	}
	return a.Kind() == b.Kind() && ontology.Equal(a, b)
}

// TestUSGSWeekOut publishes the USGS week in a place federated with NATS:
// a plain NATS subscriber on the seismic prefix receives exactly the
// seismic events of the ground truth, each once, each decoding back to
// the event sion delivered.
func TestUSGSWeekOut(t *testing.T) {
	hazards, err := os.ReadFile(filepath.Join(usgsDir, "hazards.json"))
	require.NoError(t, err)
	week, err := os.ReadFile(filepath.Join(usgsDir, "all_week_2023-04-07.geojson"))
	require.NoError(t, err)
	wantSeismic, wantAll := seismicTruth(t, hazards, week)
	require.Equal(t, 2389, wantAll, "DATA.md: 2,389 features")
	require.Equal(t, 2346+2, wantSeismic, "DATA.md: 2,346 earthquakes and 2 ice quakes")

	o, err := ontology.LoadJSON(bytes.NewReader(hazards), "hazards.json")
	require.NoError(t, err)
	srv := natsServer(t)
	sw := newSwitch(t, "usgs", o)
	ceCfg := cloudevents.Config{TimeAttribute: "time", SubjectAttribute: "place"}
	g := newGateway(t, sw, nats.GatewayConfig{Conn: connectTo(t, srv), CloudEvents: ceCfg})
	prefix := "sion.usgs.hazard.natural.seismic"
	seismic := subscribe(t, connectTo(t, srv), prefix+".>")
	everything := subscribe(t, connectTo(t, srv), "sion.usgs.>")

	// A subscriber in the place sees every event with the ID the switch
	// gave it; its interest also has the gateway subscribe on NATS, so
	// every event comes back in once and is dropped there by ID.
	watched := receiver(t, sw, "{type ⊑ hazard}")
	subscribed(t, g, "sion.usgs.hazard", "sion.usgs.hazard.>")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader, err := sw.Place().NewJSONReader(usgsFields)
	require.NoError(t, err)
	events, err := reader.ReadList(week, "features")
	require.NoError(t, err)
	publish := publisher(t, sw)
	for _, ev := range events {
		publish(ev)
	}
	byID := map[sion.EventID]*sion.Event{}
	for range events {
		d, err := watched.Next(ctx)
		require.NoError(t, err)
		byID[d.Event.ID] = d.Event
	}

	require.Eventually(t, func() bool { return seismic.len() >= wantSeismic && everything.len() >= wantAll }, time.Minute, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		st := g.Stats()
		return st.InDuplicates == uint64(wantAll) && st.OutEvents == uint64(wantAll)
	}, time.Minute, 10*time.Millisecond, "every event out, every echo dropped: %+v", g.Stats())
	assert.Equal(t, wantAll, everything.len(), "a tree ontology: one message per event")
	msgs := seismic.all()
	require.Len(t, msgs, wantSeismic)
	codec, err := cloudevents.NewCodec(cloudevents.Config{Ontology: o, TimeAttribute: "time", SubjectAttribute: "place"})
	require.NoError(t, err)
	seen := map[sion.EventID]bool{}
	for _, m := range msgs {
		back, err := codec.FromCloudEvent(fromBinary(t, m))
		require.NoError(t, err)
		want := byID[back.ID]
		require.NotNil(t, want, "an event sion did not deliver: %s", back.ID)
		assert.False(t, seen[back.ID], "event %s twice", back.ID)
		seen[back.ID] = true
		assert.Equal(t, prefix+"."+nats.EscapeToken(want.Type), m.Subject)
		assert.Contains(t, []string{"earthquake", "ice quake"}, want.Type)
		assert.Equal(t, want.Type, back.Type)
		assert.Equal(t, want.ContentType, back.ContentType)
		assert.Equal(t, want.Data, back.Data)
		if assert.Len(t, back.Attrs, len(want.Attrs), "attributes of %s", want) {
			for _, a := range want.Attrs {
				v, ok := back.Value(a.Name)
				assert.True(t, ok && sameValue(a.Value, v), "attribute %q: want %s, got %s", a.Name, a.Value, v)
			}
		}
	}
	st := g.Stats()
	assert.Equal(t, uint64(wantAll), st.OutEvents)
	assert.Equal(t, uint64(wantAll), st.OutMessages)
	assert.Zero(t, st.OutFailed+st.OutDropped+st.OutStructured)
	assert.Empty(t, st.InRefused)
}

// bigSeismicTruth counts the week's seismic features of magnitude 4.5 or
// more, from the raw files with encoding/json only.
func bigSeismicTruth(t *testing.T, week []byte) int {
	t.Helper()
	var w struct {
		Features []struct {
			Properties struct {
				Type string   `json:"type"`
				Mag  *float64 `json:"mag"`
			} `json:"properties"`
		} `json:"features"`
	}
	require.NoError(t, json.Unmarshal(week, &w))
	n := 0
	for _, f := range w.Features {
		if (f.Properties.Type == "earthquake" || f.Properties.Type == "ice quake") && f.Properties.Mag != nil && *f.Properties.Mag >= 4.5 {
			n++
		}
	}
	return n
}

// TestUSGSWeekAcross publishes the USGS week in one place; a gateway
// sends it out to NATS, and another place's gateway on the same subject
// space brings in what its subscriber wants: exactly the big seismic
// events of the ground truth, each once, with the IDs they had.
func TestUSGSWeekAcross(t *testing.T) {
	hazards, err := os.ReadFile(filepath.Join(usgsDir, "hazards.json"))
	require.NoError(t, err)
	week, err := os.ReadFile(filepath.Join(usgsDir, "all_week_2023-04-07.geojson"))
	require.NoError(t, err)
	want := bigSeismicTruth(t, week)
	require.Positive(t, want)
	o, err := ontology.LoadJSON(bytes.NewReader(hazards), "hazards.json")
	require.NoError(t, err)
	srv := natsServer(t)
	east, west := newSwitch(t, "east", o), newSwitch(t, "west", o)
	ceCfg := cloudevents.Config{TimeAttribute: "time"}
	newGateway(t, east, nats.GatewayConfig{Conn: connectTo(t, srv), Place: "usgs", Out: &sion.DirectionConfig{}, CloudEvents: ceCfg})
	gw := newGateway(t, west, nats.GatewayConfig{Conn: connectTo(t, srv), Place: "usgs", In: &sion.DirectionConfig{}, CloudEvents: ceCfg})
	big := receiver(t, west, "{type ⊑ seismic; mag >= 4.5}")
	local := receiver(t, east, "{type ⊑ seismic; mag >= 4.5}")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, gw.Sync(ctx))
	assert.Equal(t, []string{"sion.usgs.hazard.natural.seismic", "sion.usgs.hazard.natural.seismic.>"}, gw.Stats().Subjects)

	reader, err := east.Place().NewJSONReader(usgsFields)
	require.NoError(t, err)
	events, err := reader.ReadList(week, "features")
	require.NoError(t, err)
	publish := publisher(t, east)
	for _, ev := range events {
		publish(ev)
	}
	publish(&sion.Event{Type: "earthquake", Attrs: []ontology.Attr{{Name: "mag", Value: ontology.Float(9.9)}}, Data: []byte("marker")})

	seen := map[sion.EventID]bool{}
	for i := range want {
		d, err := big.Next(ctx)
		require.NoError(t, err, "after %d of %d", i, want)
		ev := d.Event
		assert.False(t, seen[ev.ID], "event %s twice", ev.ID)
		seen[ev.ID] = true
		mag, ok := ev.Value("mag")
		assert.True(t, ok && mag.Float() >= 4.5, "%s", ev)
		assert.Contains(t, []string{"earthquake", "ice quake"}, ev.Type)
		assert.Equal(t, []string{"nats:sion.usgs", "west"}, ev.Control.Path)
	}
	nothingMore(t, big, "marker")
	for range want {
		d, err := local.Next(ctx)
		require.NoError(t, err)
		assert.True(t, seen[d.Event.ID], "event %s of the place did not come across", d.Event.ID)
	}
	t.Logf("%d big seismic events across NATS (ground truth %d)", len(seen), want)
	st := gw.Stats()
	assert.Empty(t, st.InRefused)
	assert.Zero(t, st.InDuplicates, "a tree ontology: one copy of each")
}

package cloudevents_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/ontology"
)

// usgsFields is how the examples read a USGS feature into an event
// (examples/internal/usgs.Fields, internal to the examples, so copied).
var usgsFields = sion.JSONFields{
	TypePath: "properties.type",
	Attrs: []sion.AttrPath{
		{Name: "mag", Path: "properties.mag"},
		{Name: "place", Path: "properties.place"},
		{Name: "depth", Path: "geometry.coordinates.2"},
		{Name: "tsunami", Path: "properties.tsunami"},
		{Name: "alert", Path: "properties.alert"},
		{Name: "time", Path: "properties.time"},
	},
}

// usgsWeekEvents is the number of features in testdata's week (DATA.md).
const usgsWeekEvents = 2389

// publishedWeek publishes every feature of the USGS week on a switch and
// returns the events as a subscriber of every hazard receives them (IDs,
// canonical names, control information set by the switch), the switch and
// the subscriber's session.
func publishedWeek(t *testing.T) (*ontology.Ontology, []*sion.Event, *sion.Switch, *sion.Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	hz, err := os.Open(filepath.Join("testdata", "hazards.json"))
	require.NoError(t, err)
	defer hz.Close()
	o, err := ontology.LoadJSON(hz, "hazards.json")
	require.NoError(t, err)
	week, err := os.ReadFile(filepath.Join("testdata", "all_week_2023-04-07.geojson"))
	require.NoError(t, err)

	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "usgs", Ontology: o})
	require.NoError(t, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "quakes", Place: place})
	require.NoError(t, err)
	t.Cleanup(func() { sw.Close() })
	reader, err := place.NewJSONReader(usgsFields)
	require.NoError(t, err)
	events, err := reader.ReadList(week, "features")
	require.NoError(t, err)
	require.Len(t, events, usgsWeekEvents)

	sess, err := sw.Open(ctx, sion.SessionConfig{Name: "watcher"})
	require.NoError(t, err)
	sub, err := sess.Subscribe(ctx, `{type ⊑ hazard}`, sion.WithQueue(2*usgsWeekEvents))
	require.NoError(t, err)
	pub, err := sw.Open(ctx, sion.SessionConfig{Name: "feed"})
	require.NoError(t, err)
	for _, ev := range events {
		require.NoError(t, pub.Publish(ctx, ev))
	}
	got := make([]*sion.Event, 0, len(events))
	for range events {
		d, err := sub.Next(ctx)
		require.NoError(t, err)
		got = append(got, d.Event)
	}
	return o, got, sw, sub
}

func TestUSGSWeekRoundTrip(t *testing.T) {
	o, week, first, watched := publishedWeek(t)
	variants := []struct {
		name string
		cfg  cloudevents.Config
	}{
		{"time and subject in context attributes", cloudevents.Config{Ontology: o, TypePrefix: "gov.usgs.earthquake.", TimeAttribute: "time", SubjectAttribute: "place"}},
		{"all extensions", cloudevents.Config{Ontology: o, TypePrefix: "gov.usgs.", Source: "https://earthquake.usgs.gov/", Extensions: map[string]string{"time": "origintime"}}},
		{"no prefix, no control", cloudevents.Config{Ontology: o, TimeAttribute: "time", OmitControl: true}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			c, err := cloudevents.NewCodec(v.cfg)
			require.NoError(t, err)
			n := 0
			for _, ev := range week {
				ce, err := c.ToCloudEvent(ev)
				require.NoError(t, err, "%s", ev)
				require.NoError(t, ce.Validate())
				assert.Equal(t, ev.ID.String(), ce.ID())
				assert.Equal(t, v.cfg.TypePrefix+ev.Type, ce.Type())
				if !v.cfg.OmitControl {
					assert.Equal(t, "quakes", ce.Extensions()["sionorigin"])
				}

				back, err := c.FromCloudEvent(ce)
				require.NoError(t, err, "%s", ev)
				assertSameEvent(t, ev, &back)

				// Structured JSON through encoding/json: the payload is
				// compacted, its value kept.
				back2 := viaStructuredJSON(t, c, ce)
				assert.JSONEq(t, string(ev.Data), string(back2.Data))
				back2.Data = ev.Data
				assertSameEvent(t, ev, &back2)
				n++
			}
			assert.Equal(t, usgsWeekEvents, n)
		})
	}

	// Dedupe by ID holds on the switch the events came from: each comes
	// back with the ID that switch gave it, and is a duplicate there.
	t.Run("back on their own switch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := cloudevents.NewCodec(cloudevents.Config{Ontology: o, TimeAttribute: "time", SubjectAttribute: "place"})
		require.NoError(t, err)
		bridge, err := first.Open(ctx, sion.SessionConfig{Name: "bridge"})
		require.NoError(t, err)
		before := first.Stats().Duplicates
		for _, ev := range week {
			ce, err := c.ToCloudEvent(ev)
			require.NoError(t, err)
			back, err := c.FromCloudEvent(ce)
			require.NoError(t, err)
			require.NoError(t, bridge.Publish(ctx, &back))
		}
		assert.Equal(t, uint64(usgsWeekEvents), first.Stats().Duplicates-before)
		fresh := &sion.Event{Type: "earthquake", Attrs: []ontology.Attr{{Name: "mag", Value: ontology.Float(9.5)}}}
		require.NoError(t, bridge.Publish(ctx, fresh))
		d, err := watched.Next(ctx)
		require.NoError(t, err)
		v, _ := d.Event.Value("mag")
		assert.Equal(t, 9.5, v.Float(), "the fresh event is the next delivery: no duplicate came through")
	})

	// Dedupe by ID holds: on another switch, each event back from its
	// CloudEvent is delivered once however often it arrives (here twice,
	// from the event and from its structured JSON encoding), with the ID it
	// had. A fresh event published after them is the next delivery.
	t.Run("the IDs deduplicate", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := cloudevents.NewCodec(cloudevents.Config{Ontology: o, TimeAttribute: "time", SubjectAttribute: "place"})
		require.NoError(t, err)
		place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "bridged", Ontology: o})
		require.NoError(t, err)
		other, err := sion.NewSwitch(sion.SwitchConfig{Name: "other", Place: place})
		require.NoError(t, err)
		defer other.Close()
		watcher, err := other.Open(ctx, sion.SessionConfig{Name: "watcher"})
		require.NoError(t, err)
		sub, err := watcher.Subscribe(ctx, `{type ⊑ hazard}`, sion.WithQueue(2*usgsWeekEvents))
		require.NoError(t, err)
		bridge, err := other.Open(ctx, sion.SessionConfig{Name: "bridge"})
		require.NoError(t, err)
		for _, ev := range week {
			ce, err := c.ToCloudEvent(ev)
			require.NoError(t, err)
			b, err := json.Marshal(ce)
			require.NoError(t, err)
			var retry event.Event
			require.NoError(t, json.Unmarshal(b, &retry))
			for _, x := range []event.Event{ce, retry} {
				back, err := c.FromCloudEvent(x)
				require.NoError(t, err)
				require.NoError(t, bridge.Publish(ctx, &back))
			}
		}
		assert.Equal(t, uint64(usgsWeekEvents), other.Stats().Duplicates)
		fresh := &sion.Event{Type: "earthquake", Attrs: []ontology.Attr{{Name: "mag", Value: ontology.Float(9.5)}}}
		require.NoError(t, bridge.Publish(ctx, fresh))
		for i, ev := range week {
			d, err := sub.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, ev.ID, d.Event.ID, "delivery %d", i)
		}
		d, err := sub.Next(ctx)
		require.NoError(t, err)
		v, _ := d.Event.Value("mag")
		assert.Equal(t, 9.5, v.Float(), "the fresh event, not a duplicate")
	})
}

package cloudevents_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/ontology"
)

// TestCAPAlertsRoundTrip: the NWS alerts (testdata/DATA.md) — XML
// payloads, time attributes, free text with quotes and commas, an
// attribute name (msgType) that cannot be an extension as it is — go
// from one switch to another through a Sender and a Handler over HTTP,
// in binary and in structured mode, and every one arrives equal to its
// original: ID, type, content type, payload bytes, every attribute.
func TestCAPAlertsRoundTrip(t *testing.T) {
	src, err := os.Open(filepath.Join("testdata", "alerts.json"))
	require.NoError(t, err)
	defer src.Close()
	o, err := ontology.LoadJSON(src, "alerts.json")
	require.NoError(t, err)
	feed, err := os.ReadFile(filepath.Join("testdata", "nws_cap_atom_2018-08-15.xml"))
	require.NoError(t, err)
	c, err := cloudevents.NewCodec(cloudevents.Config{Ontology: o, TypePrefix: "gov.weather.",
		TimeAttribute: "effective", SubjectAttribute: "area", Extensions: map[string]string{"msgType": "msgtype"}})
	require.NoError(t, err)
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "nws", Ontology: o})
	require.NoError(t, err)
	reader, err := place.NewXMLReader(sion.XMLFields{
		Namespaces: map[string]string{"atom": "http://www.w3.org/2005/Atom", "cap": "urn:oasis:names:tc:emergency:cap:1.1"},
		TypePath:   "cap:event",
		Attrs: []sion.AttrPath{
			{Name: "severity", Path: "cap:severity"}, {Name: "urgency", Path: "cap:urgency"},
			{Name: "certainty", Path: "cap:certainty"}, {Name: "status", Path: "cap:status"},
			{Name: "msgType", Path: "cap:msgType"}, {Name: "category", Path: "cap:category"},
			{Name: "area", Path: "cap:areaDesc"}, {Name: "effective", Path: "cap:effective"},
			{Name: "expires", Path: "cap:expires"},
		},
	})
	require.NoError(t, err)
	events, err := reader.ReadList(feed, "/atom:feed/atom:entry")
	require.NoError(t, err)
	require.Len(t, events, 163, "DATA.md: 163 entries")

	for _, structured := range []bool{false, true} {
		t.Run(map[bool]string{false: "binary", true: "structured"}[structured], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rig := newHandlerRig(t, c, `{type ⊑ *}`, 0)
			pub, sub := sourceSwitch(t, c)
			// The originals as their switch published them, with their IDs.
			watcher, err := pub.Switch().Open(ctx, sion.SessionConfig{Name: "originals"})
			require.NoError(t, err)
			originals, err := watcher.Subscribe(ctx, `{type ⊑ *}`, sion.WithQueue(1024))
			require.NoError(t, err)
			s, err := cloudevents.NewSender(cloudevents.SenderConfig{Codec: c, Target: rig.srv.URL, Structured: structured,
				Dropped: func(ev *sion.Event, err error) { t.Errorf("dropped %s: %v", ev, err) }})
			require.NoError(t, err)
			runSender(t, s, sub)
			for _, ev := range events {
				require.NoError(t, pub.Publish(ctx, ev))
			}
			for i := range events {
				want, err := originals.Next(ctx)
				require.NoError(t, err)
				got, err := rig.sub.Next(ctx)
				require.NoError(t, err, "after %d of %d", i, len(events))
				assert.Equal(t, "application/xml", got.Event.ContentType)
				assertSameEvent(t, want.Event, got.Event)
			}
			// The Sender counts once the answer is in, after the delivery.
			require.Eventually(t, func() bool { return s.Stats().Sent == uint64(len(events)) }, 10*time.Second, time.Millisecond)
			assert.Zero(t, s.Stats().Dropped)
		})
	}
}

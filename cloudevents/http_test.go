package cloudevents_test

import (
	"context"
	"math"
	"testing"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/ontology"
)

// TestHTTPBinaryMode sends events through the SDK's HTTP binding in binary
// mode, where every extension travels as a ce-* header string, and reads
// them back: each kind comes back from its canonical string.
func TestHTTPBinaryMode(t *testing.T) {
	c := newCodec(t, cloudevents.Config{TimeAttribute: "at", SubjectAttribute: "label", Extensions: map[string]string{"wind_speed": "windspeed"}})
	at := time.Date(2023, 4, 7, 17, 23, 7, 1, time.UTC)
	cases := []struct {
		name string
		ev   sion.Event
	}{
		{"every kind", sion.Event{ID: someID(7), Type: "reading", Attrs: []ontology.Attr{
			{Name: "n", Value: ontology.Int(-5)},
			{Name: "x", Value: ontology.Float(0.1)},
			{Name: "ok", Value: ontology.Bool(true)},
			{Name: "s", Value: ontology.String("a, b; c")},
			{Name: "wind_speed", Value: ontology.Float(math.Copysign(0, -1))},
			{Name: "at", Value: ontology.Time(at)},
			{Name: "label", Value: ontology.String("station 7")},
		}, ContentType: "application/json", Data: []byte("{\n  \"k\": 1\n}")}},
		{"int64 beyond Integer", sion.Event{ID: someID(8), Type: "reading", Attrs: []ontology.Attr{
			{Name: "n", Value: ontology.Int(1<<53 + 1)},
		}, ContentType: "application/xml", Data: []byte(`<r>1</r>`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ce, err := c.ToCloudEvent(&tc.ev)
			require.NoError(t, err)
			req, err := cehttp.NewHTTPRequestFromEvent(context.Background(), "http://localhost/", ce)
			require.NoError(t, err)
			assert.Equal(t, tc.ev.ID.String(), req.Header.Get("ce-id"))
			got, err := cehttp.NewEventFromHTTPRequest(req)
			require.NoError(t, err)
			for name, v := range got.Extensions() {
				assert.IsType(t, "", v, "extension %q arrives as a string", name)
			}
			back, err := c.FromCloudEvent(*got)
			require.NoError(t, err)
			assertSameEvent(t, &tc.ev, &back)
		})
	}
}

package cloudevents_test

import (
	"encoding/json"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/cloudevents"
)

// FuzzFromCloudEvent reads structured JSON CloudEvents: FromCloudEvent
// never panics, and an event it accepts goes out and back in unchanged.
func FuzzFromCloudEvent(f *testing.F) {
	for _, seed := range []string{
		`{"specversion":"1.0","id":"1","source":"/s","type":"org.example.sion.reading","n":5,"x":"0.1","ok":true,"s":"a"}`,
		`{"specversion":"1.0","id":"000102030405060708090a0b0c0d0e0f","source":"/s","type":"org.example.sion.measurement","count":"9007199254740993","sionttl":3}`,
		`{"specversion":"1.0","id":"x","source":"/s","type":"org.example.sion.reading","time":"2023-04-07T17:23:07.123456789Z","subject":"st","datacontenttype":"application/json","data":{"a":1}}`,
		`{"specversion":"1.0","id":"x","source":"/s","type":"org.example.sion.reading","datacontenttype":"application/xml","data":"<r/>","windspeed":"-0"}`,
		`{"specversion":"1.0","id":"x","source":"/s","type":"org.example.sion.other","y":"1e3","data_base64":"AAE="}`,
		`{"specversion":"0.3","id":"x","source":"/s","type":"org.example.sion.reading","datacontentencoding":"base64","data":"AAE="}`,
	} {
		f.Add([]byte(seed))
	}
	c, err := cloudevents.NewCodec(cloudevents.Config{Ontology: fuzzOntology(f), TypePrefix: prefix,
		TimeAttribute: "at", SubjectAttribute: "label", Extensions: map[string]string{"wind_speed": "windspeed"}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, doc []byte) {
		var ce event.Event
		if json.Unmarshal(doc, &ce) != nil {
			return
		}
		ev, err := c.FromCloudEvent(ce)
		if err != nil {
			return
		}
		out, err := c.ToCloudEvent(&ev)
		require.NoError(t, err, "%s", ev.String())
		back, err := c.FromCloudEvent(out)
		require.NoError(t, err)
		assertSameEvent(t, &ev, &back)
	})
}

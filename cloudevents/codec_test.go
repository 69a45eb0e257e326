package cloudevents_test

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// readings is the test ontology: one type with an attribute of each kind,
// a synonym, and names that cannot be extension names as they are.
const readings = `{"types": [
  {"name": "reading", "synonyms": ["measurement"], "attributes": [
    {"name": "n", "kind": "int", "synonyms": ["count"]},
    {"name": "x", "kind": "float"},
    {"name": "ok", "kind": "bool"},
    {"name": "at", "kind": "time"},
    {"name": "s", "kind": "string"},
    {"name": "label", "kind": "string"},
    {"name": "wind_speed", "kind": "float"},
    {"name": "source", "kind": "string"},
    {"name": "sionx", "kind": "string"}]},
  {"name": "other", "attributes": [{"name": "y", "kind": "int"}]}
]}`

const prefix = "org.example.sion."

func fuzzOntology(f *testing.F) *ontology.Ontology {
	f.Helper()
	o, err := ontology.LoadJSON(strings.NewReader(readings), "readings.json")
	require.NoError(f, err)
	return o
}

func readingsOntology(t *testing.T) *ontology.Ontology {
	t.Helper()
	o, err := ontology.LoadJSON(strings.NewReader(readings), "readings.json")
	require.NoError(t, err)
	return o
}

func newCodec(t *testing.T, cfg cloudevents.Config) *cloudevents.Codec {
	t.Helper()
	if cfg.Ontology == nil {
		cfg.Ontology = readingsOntology(t)
	}
	if cfg.TypePrefix == "" {
		cfg.TypePrefix = prefix
	}
	c, err := cloudevents.NewCodec(cfg)
	require.NoError(t, err)
	return c
}

func someID(b byte) sion.EventID {
	var id sion.EventID
	for i := range id {
		id[i] = b + byte(i)
	}
	return id
}

// sameValue reports whether a and b are the same value of the same kind,
// floats compared by their bits (so -0 differs from 0).
func sameValue(a, b ontology.Value) bool {
	if a.Kind() != b.Kind() {
		return false
	}
	if a.Kind() == ontology.KindFloat {
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	}
	return ontology.Equal(a, b)
}

// assertSameEvent checks that got is want after a round trip: ID, type,
// attributes (as a set, with kinds and exact values), content type and
// data bytes.
func assertSameEvent(t *testing.T, want, got *sion.Event) {
	t.Helper()
	assert.Equal(t, want.ID, got.ID, "ID")
	assert.Equal(t, want.Type, got.Type, "type")
	assert.Equal(t, want.ContentType, got.ContentType, "content type")
	assert.Equal(t, want.Data, got.Data, "data")
	if assert.Len(t, got.Attrs, len(want.Attrs), "attributes of %s", want) {
		for _, a := range want.Attrs {
			v, ok := got.Value(a.Name)
			if assert.True(t, ok, "attribute %q missing from %s", a.Name, got) {
				assert.True(t, sameValue(a.Value, v), "attribute %q: want %s %s, got %s %s", a.Name, a.Value.Kind(), a.Value, v.Kind(), v)
			}
		}
	}
}

func TestKindsRoundTrip(t *testing.T) {
	at := time.Date(2023, 4, 7, 17, 23, 7, 123456789, time.UTC)
	cases := []struct {
		name string
		attr ontology.Attr
		ext  any // the extension's value in the CloudEvent
	}{
		{"int 2^53+1 exact", ontology.Attr{Name: "n", Value: ontology.Int(1<<53 + 1)}, "9007199254740993"},
		{"int max", ontology.Attr{Name: "n", Value: ontology.Int(math.MaxInt64)}, "9223372036854775807"},
		{"int min", ontology.Attr{Name: "n", Value: ontology.Int(math.MinInt64)}, "-9223372036854775808"},
		{"int 2^31 as string", ontology.Attr{Name: "n", Value: ontology.Int(1 << 31)}, "2147483648"},
		{"int -2^31 as Integer", ontology.Attr{Name: "n", Value: ontology.Int(-1 << 31)}, int32(math.MinInt32)},
		{"int 5 as Integer", ontology.Attr{Name: "n", Value: ontology.Int(5)}, int32(5)},
		{"float 0.1", ontology.Attr{Name: "x", Value: ontology.Float(0.1)}, "0.1"},
		{"float 1e300", ontology.Attr{Name: "x", Value: ontology.Float(1e300)}, "1e+300"},
		{"float -0", ontology.Attr{Name: "x", Value: ontology.Float(math.Copysign(0, -1))}, "-0"},
		{"float smallest subnormal", ontology.Attr{Name: "x", Value: ontology.Float(5e-324)}, "5e-324"},
		{"float 2^53+2", ontology.Attr{Name: "x", Value: ontology.Float(1<<53 + 2)}, "9.007199254740994e+15"},
		{"bool true", ontology.Attr{Name: "ok", Value: ontology.Bool(true)}, true},
		{"bool false", ontology.Attr{Name: "ok", Value: ontology.Bool(false)}, false},
		{"time with nanoseconds", ontology.Attr{Name: "at", Value: ontology.Time(at)}, types.Timestamp{Time: at}},
		{"time before 1970", ontology.Attr{Name: "at", Value: ontology.TimeNanos(-1)}, types.Timestamp{Time: time.Unix(0, -1).UTC()}},
		{"string", ontology.Attr{Name: "s", Value: ontology.String(" naïve, \"quoted\" ")}, " naïve, \"quoted\" "},
		{"empty string", ontology.Attr{Name: "s", Value: ontology.String("")}, ""},
	}
	c := newCodec(t, cloudevents.Config{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := &sion.Event{ID: someID(1), Type: "reading", Attrs: []ontology.Attr{tc.attr}}
			ce, err := c.ToCloudEvent(in)
			require.NoError(t, err)
			assert.Equal(t, tc.ext, ce.Extensions()[tc.attr.Name], "extension value")

			back, err := c.FromCloudEvent(ce)
			require.NoError(t, err)
			assertSameEvent(t, in, &back)

			// The same through the SDK's structured JSON encoding, where
			// an Integer comes back from a JSON number and a Timestamp
			// from a string.
			back2 := viaStructuredJSON(t, c, ce)
			assertSameEvent(t, in, &back2)
		})
	}
}

// viaStructuredJSON returns ce read back by c after a trip through
// encoding/json (the SDK's structured JSON format; a JSON payload comes
// back compacted, its value kept).
func viaStructuredJSON(t *testing.T, c *cloudevents.Codec, ce event.Event) sion.Event {
	t.Helper()
	b, err := json.Marshal(ce)
	require.NoError(t, err)
	var ce2 event.Event
	require.NoError(t, json.Unmarshal(b, &ce2))
	back, err := c.FromCloudEvent(ce2)
	require.NoError(t, err, "%s", b)
	return back
}

func TestSynonymsAndConversionsOut(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	in := &sion.Event{ID: someID(2), Type: "measurement", Attrs: []ontology.Attr{
		{Name: "count", Value: ontology.Float(3)}, // an integral float for an int attribute, as Publish converts it
		{Name: "x", Value: ontology.Int(7)},       // an int for a float attribute
	}}
	ce, err := c.ToCloudEvent(in)
	require.NoError(t, err)
	assert.Equal(t, prefix+"reading", ce.Type(), "the canonical type name")
	assert.Equal(t, map[string]any{"n": int32(3), "x": "7"}, ce.Extensions())
	back, err := c.FromCloudEvent(ce)
	require.NoError(t, err)
	assert.Equal(t, "reading", back.Type)
	assert.Equal(t, []ontology.Attr{{Name: "n", Value: ontology.Int(3)}, {Name: "x", Value: ontology.Float(7)}}, back.Attrs)

	// On the way in a synonym extension name resolves too, and an Integer
	// is a float attribute's value.
	ce2 := validCloudEvent(t, prefix+"reading")
	ce2.SetExtension("count", int32(4))
	ce2.SetExtension("x", int32(-2))
	back, err = c.FromCloudEvent(ce2)
	require.NoError(t, err)
	assert.Equal(t, []ontology.Attr{{Name: "n", Value: ontology.Int(4)}, {Name: "x", Value: ontology.Float(-2)}}, back.Attrs)
}

func validCloudEvent(t *testing.T, typ string) event.Event {
	t.Helper()
	ce := event.New()
	ce.SetID("retry-safe-1")
	ce.SetSource("https://example.org/sensors")
	ce.SetType(typ)
	require.NoError(t, ce.Validate())
	return ce
}

func TestIDs(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	t.Run("a caller-set ID survives", func(t *testing.T) {
		in := &sion.Event{ID: someID(0xa0), Type: "reading"}
		ce, err := c.ToCloudEvent(in)
		require.NoError(t, err)
		assert.Equal(t, in.ID.String(), ce.ID())
		assert.Len(t, ce.ID(), 32)
		back, err := c.FromCloudEvent(ce)
		require.NoError(t, err)
		assert.Equal(t, in.ID, back.ID)
	})
	t.Run("a zero ID gets a new random one", func(t *testing.T) {
		a, err := c.ToCloudEvent(&sion.Event{Type: "reading"})
		require.NoError(t, err)
		b, err := c.ToCloudEvent(&sion.Event{Type: "reading"})
		require.NoError(t, err)
		assert.Len(t, a.ID(), 32)
		assert.NotEqual(t, strings.Repeat("0", 32), a.ID())
		assert.NotEqual(t, a.ID(), b.ID())
	})
	derived := func(t *testing.T, source, id string) sion.EventID {
		t.Helper()
		ce := validCloudEvent(t, prefix+"reading")
		ce.SetSource(source)
		ce.SetID(id)
		ev, err := c.FromCloudEvent(ce)
		require.NoError(t, err)
		require.False(t, ev.ID.IsZero())
		return ev.ID
	}
	t.Run("a foreign id is derived from source and id, stably", func(t *testing.T) {
		first := derived(t, "/sensors/a", "A234-1234-1234")
		assert.Equal(t, first, derived(t, "/sensors/a", "A234-1234-1234"), "a retry deduplicates")
		assert.NotEqual(t, first, derived(t, "/sensors/b", "A234-1234-1234"), "another source is another event")
		assert.NotEqual(t, first, derived(t, "/sensors/a", "A234-1234-1235"))
		// Length prefixes keep (source, id) pairs apart that concatenate alike.
		assert.NotEqual(t, derived(t, "/a", "bc"), derived(t, "/ab", "c"))
	})
	t.Run("32 hex digits not lower-case or all zero are derived", func(t *testing.T) {
		upper := strings.ToUpper(someID(0xb0).String())
		assert.NotEqual(t, someID(0xb0), derived(t, "/s", upper))
		assert.False(t, derived(t, "/s", strings.Repeat("0", 32)).IsZero())
		assert.Equal(t, someID(0xb0), derived(t, "/s", someID(0xb0).String()))
	})
}

func TestTimeAndSubject(t *testing.T) {
	at := time.Date(2023, 4, 7, 17, 23, 7, 999999999, time.UTC)
	c := newCodec(t, cloudevents.Config{TimeAttribute: "at", SubjectAttribute: "label"})
	in := &sion.Event{ID: someID(3), Type: "reading", Attrs: []ontology.Attr{
		{Name: "at", Value: ontology.Time(at)},
		{Name: "label", Value: ontology.String("station 7")},
		{Name: "n", Value: ontology.Int(1)},
	}}
	ce, err := c.ToCloudEvent(in)
	require.NoError(t, err)
	assert.True(t, at.Equal(ce.Time()), "time %s", ce.Time())
	assert.Equal(t, "station 7", ce.Subject())
	assert.Equal(t, map[string]any{"n": int32(1)}, ce.Extensions(), "time and subject are not extensions too")
	back, err := c.FromCloudEvent(ce)
	require.NoError(t, err)
	assertSameEvent(t, in, &back)

	t.Run("a blank subject is refused", func(t *testing.T) {
		_, err := c.ToCloudEvent(&sion.Event{Type: "reading", Attrs: []ontology.Attr{{Name: "label", Value: ontology.String(" ")}}})
		require.ErrorIs(t, err, sion.ErrInvalidEvent)
		assert.Contains(t, err.Error(), `"label"`)
	})
	t.Run("a time attribute that is not a time is refused", func(t *testing.T) {
		odd := newCodec(t, cloudevents.Config{TimeAttribute: "s", SubjectAttribute: "n"})
		for _, a := range []ontology.Attr{{Name: "s", Value: ontology.String("2023-04-07T00:00:00Z")}, {Name: "n", Value: ontology.Int(1)}} {
			_, err := odd.ToCloudEvent(&sion.Event{Type: "reading", Attrs: []ontology.Attr{a}})
			require.ErrorIs(t, err, sion.ErrInvalidEvent)
			assert.Contains(t, err.Error(), strconv.Quote(a.Name))
		}
		ce := validCloudEvent(t, prefix+"reading")
		ce.SetTime(at)
		_, err := odd.FromCloudEvent(ce)
		require.ErrorIs(t, err, sion.ErrInvalidEvent)
		assert.Contains(t, err.Error(), `"s"`)
	})
	t.Run("a nil event is refused", func(t *testing.T) {
		_, err := c.ToCloudEvent(nil)
		require.ErrorIs(t, err, sion.ErrInvalidEvent)
	})
	t.Run("without the fields they are left out", func(t *testing.T) {
		plain := newCodec(t, cloudevents.Config{Extensions: map[string]string{"label": "label"}})
		ce := validCloudEvent(t, prefix+"reading")
		ce.SetTime(at)
		ce.SetSubject("dropped")
		ev, err := plain.FromCloudEvent(ce)
		require.NoError(t, err)
		assert.Empty(t, ev.Attrs)
		out, err := plain.ToCloudEvent(&sion.Event{Type: "reading", Attrs: []ontology.Attr{{Name: "at", Value: ontology.Time(at)}}})
		require.NoError(t, err)
		assert.True(t, out.Time().IsZero())
		assert.Equal(t, types.Timestamp{Time: at}, out.Extensions()["at"], "an ordinary extension instead")
	})
	t.Run("a type without the attributes drops time and subject", func(t *testing.T) {
		ce := validCloudEvent(t, prefix+"other")
		ce.SetTime(at)
		ce.SetSubject("x")
		ev, err := c.FromCloudEvent(ce)
		require.NoError(t, err)
		assert.Empty(t, ev.Attrs)
	})
}

func TestHostileInput(t *testing.T) {
	c := newCodec(t, cloudevents.Config{TimeAttribute: "at", Extensions: map[string]string{"wind_speed": "windspeed", "x": "xval"}})
	cases := []struct {
		name   string
		typ    string
		ext    map[string]any // set directly, bypassing the SDK's checks
		target error
		names  string // in the message
	}{
		{"unknown type", prefix + "nonesuch", nil, sion.ErrUnknownEventType, `"nonesuch"`},
		{"missing prefix", "reading", nil, sion.ErrUnknownEventType, `"reading"`},
		{"other prefix", "com.other.reading", nil, sion.ErrUnknownEventType, `"com.other.reading"`},
		{"reserved sion type", prefix + ontology.DiscoveryType, nil, sion.ErrUnknownEventType, ontology.DiscoveryType},
		{"extension not in the vocabulary", prefix + "reading", map[string]any{"y": int32(1)}, sion.ErrInvalidEvent, `"y"`},
		{"upper-case extension name", prefix + "reading", map[string]any{"N": int32(1)}, sion.ErrInvalidEvent, `"N"`},
		{"extension name with an underscore", prefix + "reading", map[string]any{"wind_speed": "1"}, sion.ErrInvalidEvent, `"wind_speed"`},
		{"extension named like a context attribute", prefix + "reading", map[string]any{"source": "x"}, sion.ErrInvalidEvent, `"source"`},
		{"renamed attribute under its own name", prefix + "reading", map[string]any{"x": "1"}, sion.ErrInvalidEvent, `"xval"`},
		{"time attribute as an extension", prefix + "reading", map[string]any{"at": "2023-04-07T00:00:00Z"}, sion.ErrInvalidEvent, `"at"`},
		{"int from a fraction", prefix + "reading", map[string]any{"n": "1.5"}, sion.ErrInvalidEvent, `"n"`},
		{"int beyond int64", prefix + "reading", map[string]any{"n": "9223372036854775808"}, sion.ErrInvalidEvent, `"n"`},
		{"int from a bool", prefix + "reading", map[string]any{"n": true}, sion.ErrInvalidEvent, `"n"`},
		{"float NaN", prefix + "reading", map[string]any{"x": "NaN"}, sion.ErrInvalidEvent, `"x"`},
		{"float in hexadecimal", prefix + "reading", map[string]any{"x": "0x1p-2"}, sion.ErrInvalidEvent, `"x"`},
		{"string not UTF-8", prefix + "reading", map[string]any{"s": "a\xffb"}, sion.ErrInvalidEvent, `"s"`},
		{"float Inf", prefix + "reading", map[string]any{"x": "+Inf"}, sion.ErrInvalidEvent, `"x"`},
		{"float from a bool", prefix + "reading", map[string]any{"x": false}, sion.ErrInvalidEvent, `"x"`},
		{"bool from yes", prefix + "reading", map[string]any{"ok": "yes"}, sion.ErrInvalidEvent, `"ok"`},
		{"bool from 1", prefix + "reading", map[string]any{"ok": int32(1)}, sion.ErrInvalidEvent, `"ok"`},
		{"string from an Integer", prefix + "reading", map[string]any{"s": int32(3)}, sion.ErrInvalidEvent, `"s"`},
		{"string from a URI", prefix + "reading", map[string]any{"s": types.URI{}}, sion.ErrInvalidEvent, `"s"`},
		{"synonym and name both", prefix + "reading", map[string]any{"n": int32(1), "count": int32(2)}, sion.ErrInvalidEvent, `"n"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ce := validCloudEvent(t, tc.typ)
			ec := ce.Context.(*event.EventContextV1)
			ec.Extensions = tc.ext
			_, err := c.FromCloudEvent(ce)
			require.ErrorIs(t, err, tc.target)
			assert.True(t, strings.HasPrefix(strings.TrimPrefix(err.Error(), tc.target.Error()+": "), "cloudevents:"), "%v", err)
			assert.Contains(t, err.Error(), tc.names)
		})
	}
	t.Run("time outside a time value's years", func(t *testing.T) {
		ce := validCloudEvent(t, prefix+"reading")
		ce.SetTime(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
		_, err := c.FromCloudEvent(ce)
		require.ErrorIs(t, err, sion.ErrInvalidEvent)
		assert.Contains(t, err.Error(), `"at"`)
	})
	t.Run("time extensions of the wrong shape", func(t *testing.T) {
		plain := newCodec(t, cloudevents.Config{})
		for _, v := range []any{"yesterday", "2023-04-07", int32(5), true, "3000-01-01T00:00:00Z"} {
			ce := validCloudEvent(t, prefix+"reading")
			ce.Context.(*event.EventContextV1).Extensions = map[string]any{"at": v}
			_, err := plain.FromCloudEvent(ce)
			require.ErrorIs(t, err, sion.ErrInvalidEvent, "%v", v)
			assert.Contains(t, err.Error(), `"at"`)
		}
		ce := validCloudEvent(t, prefix+"reading")
		ce.Context.(*event.EventContextV1).Extensions = map[string]any{"at": "2023-04-07T17:23:07.000000001+09:00"}
		ev, err := plain.FromCloudEvent(ce)
		require.NoError(t, err)
		assert.Equal(t, time.Date(2023, 4, 7, 8, 23, 7, 1, time.UTC), ev.Attrs[0].Value.Time(), "an RFC 3339 string with an offset")
	})
	t.Run("a zero event", func(t *testing.T) {
		_, err := c.FromCloudEvent(event.Event{})
		require.ErrorIs(t, err, sion.ErrInvalidEvent)
	})
	t.Run("an invalid CloudEvent", func(t *testing.T) {
		ce := validCloudEvent(t, prefix+"reading")
		ce.Context.(*event.EventContextV1).ID = ""
		_, err := c.FromCloudEvent(ce)
		require.ErrorIs(t, err, sion.ErrInvalidEvent)
		assert.Contains(t, err.Error(), "id")
	})
}

func TestControlNeverTrusted(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	cond := filter.MustCompile(`{type ⊑ *; n > 1}`)
	in := &sion.Event{ID: someID(4), Type: "reading", Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(2)}},
		Condition: cond,
		Control:   sion.Control{TTL: 7, Hops: 2, PlaceTTL: 15, PlaceHops: 1, Origin: "sw-1", Place: "here", Path: []string{"there", "here"}}}
	ce, err := c.ToCloudEvent(in)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"n": int32(2), "sionttl": int32(7), "sionhops": int32(2), "sionplacettl": int32(15), "sionplacehops": int32(1),
		"sionorigin": "sw-1", "sionplace": "here", "sionpath": "there,here", "sioncondition": cond.String(),
	}, ce.Extensions())
	assert.Equal(t, "/sion/here", ce.Source(), "the default source names the place")

	// Forged control information on the way in: every sion* extension is
	// dropped, whatever its value or case, even when the vocabulary has
	// an attribute of that name.
	ec := ce.Context.(*event.EventContextV1)
	ec.Extensions["sionttl"] = "not a number"
	ec.Extensions["sionx"] = "an attribute of that name exists"
	ec.Extensions["SIONHOPS"] = int32(-1)
	ec.Extensions["sion"] = true
	back, err := c.FromCloudEvent(ce)
	require.NoError(t, err)
	assert.Equal(t, sion.Control{}, back.Control)
	assert.Nil(t, back.Condition)
	assert.Equal(t, []ontology.Attr{{Name: "n", Value: ontology.Int(2)}}, back.Attrs)

	t.Run("OmitControl", func(t *testing.T) {
		quiet := newCodec(t, cloudevents.Config{OmitControl: true, Source: "urn:example:sion"})
		ce, err := quiet.ToCloudEvent(in)
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"n": int32(2)}, ce.Extensions())
		assert.Equal(t, "urn:example:sion", ce.Source())
	})
}

func TestToCloudEventRefuses(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	cases := []struct {
		name   string
		ev     sion.Event
		target error
		names  string
	}{
		{"attribute name with an underscore", sion.Event{Type: "reading", Attrs: []ontology.Attr{{Name: "wind_speed", Value: ontology.Float(1)}}}, sion.ErrInvalidEvent, `"wind_speed"`},
		{"attribute named like a context attribute", sion.Event{Type: "reading", Attrs: []ontology.Attr{{Name: "source", Value: ontology.String("x")}}}, sion.ErrInvalidEvent, `"source"`},
		{"attribute starting with sion", sion.Event{Type: "reading", Attrs: []ontology.Attr{{Name: "sionx", Value: ontology.String("x")}}}, sion.ErrInvalidEvent, `"sionx"`},
		{"attribute not in the vocabulary", sion.Event{Type: "reading", Attrs: []ontology.Attr{{Name: "y", Value: ontology.Int(1)}}}, sion.ErrInvalidEvent, `"y"`},
		{"wrong kind", sion.Event{Type: "reading", Attrs: []ontology.Attr{{Name: "ok", Value: ontology.Int(1)}}}, sion.ErrInvalidEvent, `"ok"`},
		{"fractional float for an int", sion.Event{Type: "reading", Attrs: []ontology.Attr{{Name: "n", Value: ontology.Float(0.5)}}}, sion.ErrInvalidEvent, `"n"`},
		{"NaN", sion.Event{Type: "reading", Attrs: []ontology.Attr{{Name: "x", Value: ontology.Float(math.NaN())}}}, sion.ErrInvalidEvent, `"x"`},
		{"string not UTF-8", sion.Event{Type: "reading", Attrs: []ontology.Attr{{Name: "s", Value: ontology.String("a\xffb")}}}, sion.ErrInvalidEvent, `"s"`},
		{"synonym and name both", sion.Event{Type: "reading", Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(1)}, {Name: "count", Value: ontology.Int(1)}}}, sion.ErrInvalidEvent, `"n"`},
		{"unknown type", sion.Event{Type: "nonesuch"}, sion.ErrUnknownEventType, `"nonesuch"`},
		{"reserved type", sion.Event{Type: ontology.DiscoveryType}, sion.ErrUnknownEventType, ontology.DiscoveryType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.ToCloudEvent(&tc.ev)
			require.ErrorIs(t, err, tc.target)
			assert.Contains(t, err.Error(), tc.names)
		})
	}
	t.Run("renamed, they travel", func(t *testing.T) {
		rc := newCodec(t, cloudevents.Config{Extensions: map[string]string{"wind_speed": "windspeed", "source": "origsource", "sionx": "x2"}})
		in := &sion.Event{ID: someID(5), Type: "reading", Attrs: []ontology.Attr{
			{Name: "sionx", Value: ontology.String("s")},
			{Name: "source", Value: ontology.String("src")},
			{Name: "wind_speed", Value: ontology.Float(12.5)},
		}}
		ce, err := rc.ToCloudEvent(in)
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"windspeed": "12.5", "origsource": "src", "x2": "s"}, ce.Extensions())
		back, err := rc.FromCloudEvent(ce)
		require.NoError(t, err)
		assertSameEvent(t, in, &back)
	})
}

func TestNewCodecRefuses(t *testing.T) {
	o := readingsOntology(t)
	cases := []struct {
		name  string
		cfg   cloudevents.Config
		names string
	}{
		{"no ontology", cloudevents.Config{}, "Ontology"},
		{"unknown time attribute", cloudevents.Config{Ontology: o, TimeAttribute: "when"}, `"when"`},
		{"unknown subject attribute", cloudevents.Config{Ontology: o, SubjectAttribute: "who"}, `"who"`},
		{"time and subject alike", cloudevents.Config{Ontology: o, TimeAttribute: "at", SubjectAttribute: "at"}, `"at"`},
		{"bad source", cloudevents.Config{Ontology: o, Source: "%zz"}, "Source"},
		{"rename of an unknown attribute", cloudevents.Config{Ontology: o, Extensions: map[string]string{"nope": "nope"}}, `"nope"`},
		{"rename to a bad name", cloudevents.Config{Ontology: o, Extensions: map[string]string{"wind_speed": "Wind"}}, `"Wind"`},
		{"rename to a context name", cloudevents.Config{Ontology: o, Extensions: map[string]string{"wind_speed": "time"}}, `"time"`},
		{"rename to a sion name", cloudevents.Config{Ontology: o, Extensions: map[string]string{"wind_speed": "sionwind"}}, `"sionwind"`},
		{"rename to another attribute", cloudevents.Config{Ontology: o, Extensions: map[string]string{"wind_speed": "x"}}, `"x"`},
		{"two renames to one name", cloudevents.Config{Ontology: o, Extensions: map[string]string{"wind_speed": "w", "sionx": "w"}}, `"w"`},
		{"one attribute renamed twice", cloudevents.Config{Ontology: o, Extensions: map[string]string{"n": "a1", "count": "a2"}}, `"n"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cloudevents.NewCodec(tc.cfg)
			require.ErrorIs(t, err, sion.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.names)
		})
	}
}

func TestPayloads(t *testing.T) {
	c := newCodec(t, cloudevents.Config{})
	cases := []struct {
		name, contentType string
		data              []byte
		wire              string // the structured JSON's data member
	}{
		{"JSON", "application/json", []byte(`{"a": [1, 2.50, "x"]}`), `"data":{"a":[1,2.50,"x"]}`},
		{"JSON with parameters", "application/json; charset=utf-8", []byte(`[true]`), `"data":[true]`},
		{"XML", "application/xml", []byte(`<r a="1"><v>x &amp; y</v></r>`), `"data":"\u003cr a=\"1\"\u003e`},
		{"XML, not UTF-8", "application/xml", []byte("<r>\xff</r>"), `"data_base64":`},
		{"bytes", "application/octet-stream", []byte{0, 1, 0xfe}, `"data_base64":"AAH+"`},
		{"no content type", "", []byte(`<r/>`), `"data_base64":`},
		{"no data", "", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := &sion.Event{ID: someID(6), Type: "reading", ContentType: tc.contentType, Data: tc.data}
			ce, err := c.ToCloudEvent(in)
			require.NoError(t, err)
			assert.Equal(t, tc.contentType, ce.DataContentType())
			assert.Equal(t, tc.data, ce.Data())
			if len(tc.data) > 0 {
				assert.NotSame(t, &tc.data[0], &ce.Data()[0], "data is copied")
			}
			back, err := c.FromCloudEvent(ce)
			require.NoError(t, err)
			assertSameEvent(t, in, &back)

			b, err := json.Marshal(ce)
			require.NoError(t, err)
			assert.Contains(t, string(b), tc.wire)
			var ce2 event.Event
			require.NoError(t, json.Unmarshal(b, &ce2))
			back2, err := c.FromCloudEvent(ce2)
			require.NoError(t, err)
			if strings.HasPrefix(tc.contentType, "application/json") {
				// encoding/json compacts what MarshalJSON writes: the
				// value survives, the whitespace does not.
				assert.JSONEq(t, string(tc.data), string(back2.Data))
				back2.Data = in.Data
			}
			assertSameEvent(t, in, &back2)

			// The SDK's own MarshalJSON keeps the bytes.
			raw, err := ce.MarshalJSON()
			require.NoError(t, err)
			var ce3 event.Event
			require.NoError(t, ce3.UnmarshalJSON(raw))
			back3, err := c.FromCloudEvent(ce3)
			require.NoError(t, err)
			assertSameEvent(t, in, &back3)
		})
	}
}

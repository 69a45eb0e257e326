package filter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// ont1 is the reference ontology ONT-1 of CASES.md, with the attributes
// the scenarios use.
func ont1(t testing.TB) *ontology.Ontology {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "Event"},
		{Name: "Reading", Parents: []string{"Event"}, Attributes: []ontology.Attribute{
			{Name: "delta", Kind: ontology.KindFloat}, {Name: "n", Kind: ontology.KindInt},
		}},
		{Name: "TempReading", Parents: []string{"Reading"}, Attributes: []ontology.Attribute{
			{Name: "celsius", Kind: ontology.KindFloat, Unit: "degC"},
		}},
		{Name: "Alarm", Parents: []string{"Event"}},
		{Name: "FireAlarm", Parents: []string{"Alarm"}},
		{Name: "KitchenFireAlarm", Parents: []string{"FireAlarm"}},
		{Name: "Notice", Parents: []string{"Event"}, Attributes: []ontology.Attribute{
			{Name: "zone", Kind: ontology.KindString}, {Name: "seq", Kind: ontology.KindInt},
		}},
		{Name: "Changed", Parents: []string{"Event"}, Attributes: []ontology.Attribute{
			{Name: "entity", Kind: ontology.KindString},
		}},
		{Name: "Created", Parents: []string{"Changed"}},
	})
	require.NoError(t, err)
	return o
}

// matchers runs body once for the Index and once for the oracle, so every
// scenario is checked on both (STYLE: one test body over each variant).
func matchers(t *testing.T, o *ontology.Ontology, body func(t *testing.T, m matcher)) {
	t.Run("index", func(t *testing.T) { body(t, NewIndex(o)) })
	t.Run("bruteforce", func(t *testing.T) { body(t, NewBruteForce(o)) })
}

type matcher interface {
	Add(uint64, *Filter) error
	Remove(uint64) bool
	Match(Event, func(uint64, float64))
}

// subscribe adds filters in order with IDs 1, 2, … and returns nothing; the
// ID of the i-th source is i+1.
func subscribe(t *testing.T, m matcher, srcs ...string) {
	t.Helper()
	for i, s := range srcs {
		require.NoError(t, m.Add(uint64(i+1), MustCompile(s)), s)
	}
}

// matched returns the sorted IDs ev matches, failing on a duplicate.
func matched(t *testing.T, m matcher, ev Event) []uint64 {
	t.Helper()
	seen := map[uint64]bool{}
	var ids []uint64
	m.Match(ev, func(id uint64, _ float64) {
		assert.False(t, seen[id], "filter %d reported twice", id)
		seen[id] = true
		ids = append(ids, id)
	})
	for i := 1; i < len(ids); i++ { // insertion sort: tiny lists
		for j := i; j > 0 && ids[j] < ids[j-1]; j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
	return ids
}

func jsonEvent(typ, payload string) *BasicEvent {
	return &BasicEvent{Type: typ, ContentType: "application/json", Data: []byte(payload)}
}

func attrEvent(typ string, attrs ...ontology.Attr) *BasicEvent {
	return &BasicEvent{Type: typ, Attrs: attrs}
}

func ids(v ...uint64) []uint64 { return v }

func TestCaseB01DottedJSONKeys(t *testing.T) {
	matchers(t, ont1(t), func(t *testing.T, m matcher) {
		subscribe(t, m,
			`{type ⊑ Reading; json(temp\.celsius) > 30}`,
			`{type ⊑ Reading; json(temp.celsius) > 30}`,
			`{type ⊑ Reading; json(\@odata\.type) == "#item"}`,
			fmt.Sprintf(`{type ⊑ Reading; json(%s) > 30}`, EscapeJSON("temp.celsius")),
		)
		e1 := jsonEvent("Reading", `{"temp.celsius": 31, "temp": {"celsius": 12}, "@odata.type": "#item", "@odata": {"type": "nested"}}`)
		e2 := jsonEvent("Reading", `{"temp": {"celsius": 35}}`)
		assert.Equal(t, ids(1, 3, 4), matched(t, m, e1))
		assert.Equal(t, ids(2), matched(t, m, e2))
	})
}

func TestCaseB02LargeIntegers(t *testing.T) {
	matchers(t, ont1(t), func(t *testing.T, m matcher) {
		subscribe(t, m,
			`{type ⊑ Notice; json(orderId) == 9007199254740993}`,
			`{type ⊑ Notice; json(orderId) > 9007199254740992}`,
			`{type ⊑ Notice; seq == 9007199254740993}`,
		)
		e1 := &BasicEvent{Type: "Notice", Attrs: []ontology.Attr{{Name: "seq", Value: ontology.Int(9007199254740993)}},
			ContentType: "application/json", Data: []byte(`{"orderId": 9007199254740993}`)}
		e2 := &BasicEvent{Type: "Notice", Attrs: []ontology.Attr{{Name: "seq", Value: ontology.Int(9007199254740992)}},
			ContentType: "application/json", Data: []byte(`{"orderId": 9007199254740992}`)}
		assert.Equal(t, ids(1, 2, 3), matched(t, m, e1))
		assert.Empty(t, matched(t, m, e2))
	})
}

func TestCaseB03IntVsFloat(t *testing.T) {
	matchers(t, ont1(t), func(t *testing.T, m matcher) {
		subscribe(t, m,
			`{type ⊑ Reading; json(hits) == 0}`,
			`{type ⊑ Reading; json(hits) == 0.5}`,
			`{type ⊑ Reading; json(hits) >= 1}`,
		)
		for _, c := range []struct {
			x    string
			want []uint64
		}{
			{`0`, ids(1)}, {`0.0`, ids(1)}, {`0.6`, nil}, {`-0.4`, nil}, {`1.0`, ids(3)}, {`"0"`, nil},
		} {
			t.Run(c.x, func(t *testing.T) {
				assert.Equal(t, c.want, matched(t, m, jsonEvent("Reading", `{"hits": `+c.x+`}`)))
			})
		}
	})
}

func TestCaseB04NegativeZeroNaNRanges(t *testing.T) {
	s1, s2 := `{type ⊑ Reading; delta == 0}`, `{type ⊑ Reading; delta == -0.0}`
	s3, s4 := `{type ⊑ Reading; delta in [-1, 0]}`, `{type ⊑ Reading; delta in (0, 1]}`
	for _, order := range []struct {
		name string
		srcs []string // registered with IDs 1..4 in this order
		ids  [4]uint64
	}{
		{"S1 first", []string{s1, s2, s3, s4}, [4]uint64{1, 2, 3, 4}},
		{"S2 first", []string{s2, s1, s3, s4}, [4]uint64{2, 1, 3, 4}},
	} {
		t.Run(order.name, func(t *testing.T) {
			matchers(t, ont1(t), func(t *testing.T, m matcher) {
				subscribe(t, m, order.srcs...)
				S := order.ids
				delta := func(f float64) Event {
					return attrEvent("Reading", ontology.Attr{Name: "delta", Value: ontology.Float(f)})
				}
				sorted := func(v ...uint64) []uint64 {
					out := append([]uint64(nil), v...)
					for i := 1; i < len(out); i++ {
						for j := i; j > 0 && out[j] < out[j-1]; j-- {
							out[j], out[j-1] = out[j-1], out[j]
						}
					}
					return out
				}
				assert.Equal(t, sorted(S[0], S[1], S[2]), matched(t, m, delta(0)), "E1 +0.0")
				assert.Equal(t, sorted(S[0], S[1], S[2]), matched(t, m, delta(math.Copysign(0, -1))), "E2 -0.0")
				assert.Equal(t, ids(S[2]), matched(t, m, delta(-1)), "E3 -1")
				assert.Equal(t, ids(S[3]), matched(t, m, delta(1)), "E4 1")
				assert.Equal(t, ids(S[3]), matched(t, m, delta(5e-324)), "E5 5e-324")
				assert.Empty(t, matched(t, m, delta(math.NaN())), "E6 NaN matches nothing")
				assert.Equal(t, sorted(S[0], S[1], S[2]), matched(t, m, delta(0)), "E1 again")
			})
		})
	}
}

func TestCaseB06XPathNamespaces(t *testing.T) {
	const s1 = `{type ⊑ Reading; xmlns:s = "urn:example:sensors"; xpath(/s:reading[@id='1']/s:value[@unit='C'] > 20)}`
	matchers(t, ont1(t), func(t *testing.T, m matcher) {
		subscribe(t, m, s1)
		xml := func(s string) Event {
			return &BasicEvent{Type: "Reading", ContentType: "application/xml", Data: []byte(s)}
		}
		assert.Equal(t, ids(1), matched(t, m, xml(`<r:reading xmlns:r="urn:example:sensors" id="1"><r:value unit="C">21.5</r:value></r:reading>`)), "E1 other prefix, same URI")
		assert.Equal(t, ids(1), matched(t, m, xml(`<reading xmlns="urn:example:sensors" id="1"><value unit="C">21.5</value></reading>`)), "E2 default namespace")
		assert.Empty(t, matched(t, m, xml(`<s:reading xmlns:s="urn:example:other" id="1"><s:value unit="C">21.5</s:value></s:reading>`)), "E3 same prefix, other URI")
		assert.Empty(t, matched(t, m, xml(`<reading id="1"><value unit="C">21.5</value></reading>`)), "E4 no namespace")
		assert.Empty(t, matched(t, m, xml(`<r:reading xmlns:r="urn:example:sensors" id="1"><r:value unit="C">19.0</r:value></r:reading>`)), "E5 19.0")
	})
	_, err := Compile(`{xpath(/t:reading)}`)
	require.Error(t, err, "an unbound prefix must be refused")
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "t")
}

func TestCaseB09StaleStateAfterUnsubscribe(t *testing.T) {
	run := func(t *testing.T, m matcher, cycles int) {
		r := rand.New(rand.NewPCG(9, 9))
		id := uint64(1000)
		for i := 0; i < cycles; i++ {
			z := fmt.Sprintf("%c%c.%d", 'A'+r.IntN(3), 'a'+r.IntN(3), r.IntN(4))
			if r.IntN(2) == 0 {
				z = "hall" + z[2:]
			}
			id++
			require.NoError(t, m.Add(id, MustCompile(fmt.Sprintf(`{type ⊑ Notice; zone == %q}`, z))))
			require.True(t, m.Remove(id))
		}
		require.NoError(t, m.Add(1, MustCompile(`{type ⊑ Notice; zone == "Hall.North.3"}`)))
		require.True(t, m.Remove(1))
		require.NoError(t, m.Add(2, MustCompile(`{type ⊑ Notice; zone == "hall"}`)))
		require.NoError(t, m.Add(3, MustCompile(`{type ⊑ Notice; zone prefix "hall."}`)))
		zone := func(z string) Event {
			return attrEvent("Notice", ontology.Attr{Name: "zone", Value: ontology.String(z)})
		}
		assert.Equal(t, ids(3), matched(t, m, zone("hall.north")), "E1")
		assert.Equal(t, ids(2), matched(t, m, zone("hall")), "E2")
		assert.Empty(t, matched(t, m, zone("Hall.North.3")), "E3")
		assert.Empty(t, matched(t, m, zone("Hall")), "E4")
	}
	for _, cycles := range []int{0, 1000} {
		t.Run(fmt.Sprintf("cycles=%d", cycles), func(t *testing.T) {
			matchers(t, ont1(t), func(t *testing.T, m matcher) { run(t, m, cycles) })
		})
	}
}

// TestS1Example is the example of the SION source (S1): BGM is-a music and
// is-a seasonal, popular is-a music; a filter on music with a price between
// $20 and $40 receives popular and BGM events in that range.
func TestS1Example(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "music", Attributes: []ontology.Attribute{{Name: "price", Kind: ontology.KindFloat, Unit: "USD"}}},
		{Name: "seasonal"},
		{Name: "popular", Parents: []string{"music"}},
		{Name: "BGM", Parents: []string{"music", "seasonal"}},
	})
	require.NoError(t, err)
	matchers(t, o, func(t *testing.T, m matcher) {
		subscribe(t, m,
			`{type ⊑ music; price in [20, 40]}`,
			`{type ⊑ seasonal}`,
			`{type ⊑ popular; price < 20}`,
		)
		ev := func(typ string, price float64) Event {
			return attrEvent(typ, ontology.Attr{Name: "price", Value: ontology.Float(price)})
		}
		assert.Equal(t, ids(1), matched(t, m, ev("popular", 25)))
		assert.Equal(t, ids(1, 2), matched(t, m, ev("BGM", 40)))
		assert.Equal(t, ids(2), matched(t, m, ev("BGM", 40.01)))
		assert.Equal(t, ids(3), matched(t, m, ev("popular", 19.99)))
		assert.Equal(t, ids(1), matched(t, m, ev("music", 20)))
		assert.Equal(t, ids(2), matched(t, m, ev("seasonal", 30)))
	})
}

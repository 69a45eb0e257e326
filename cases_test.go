package sion_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// The scenarios of ../shared/CASES.md that one switch can run, named after
// them. Publish hands events to subscription queues before it returns, so
// "receives nothing" is checked by looking at the queue right after.

func TestCaseB01JSONPathEscapes(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	s := open(t, sw, "app")
	s1 := subscribe(t, s, `{type ⊑ Reading; json(temp\.celsius) > 30}`)
	s2 := subscribe(t, s, `{type ⊑ Reading; json(temp.celsius) > 30}`)
	s3 := subscribe(t, s, `{type ⊑ Reading; json(\@odata\.type) == "#item"}`)
	escaped := subscribe(t, s, fmt.Sprintf(`{type ⊑ Reading; json(%s) > 30}`, filter.EscapeJSON("temp.celsius")))

	e1 := `{"temp.celsius": 31, "temp": {"celsius": 12}, "@odata.type": "#item", "@odata": {"type": "nested"}}`
	publish(t, s, jsonEvent("Reading", e1))
	assert.Equal(t, 1, count(s1), "S1 gets E1: the dotted key holds 31")
	assert.Equal(t, 0, count(s2), "S2 does not get E1: its nested value is 12")
	assert.Equal(t, 1, count(s3), "S3 gets E1")
	assert.Equal(t, 1, count(escaped), "EscapeJSON builds S1's path")

	publish(t, s, jsonEvent("Reading", `{"temp": {"celsius": 35}}`))
	assert.Equal(t, 0, count(s1))
	assert.Equal(t, 1, count(s2), "S2 gets E2")
	assert.Equal(t, 0, count(s3))
	assert.Equal(t, 0, count(escaped))
}

// TestCaseB02LargeIntegers runs locally and over a link (mem-remote):
// the wire codec must keep 2^53+1 exact too.
func TestCaseB02LargeIntegers(t *testing.T) {
	variants(t, sion.PlaceConfig{}, func(t *testing.T, w *world) {
		s, pub := w.session(t, "sub"), w.session(t, "pub")
		subs := []*sion.Subscription{
			subscribe(t, s, `{type ⊑ Notice; json(orderId) == 9007199254740993}`),
			subscribe(t, s, `{type ⊑ Notice; json(orderId) > 9007199254740992}`),
			subscribe(t, s, `{type ⊑ Notice; seq == 9007199254740993}`),
		}
		payload := `{"orderId": 9007199254740993}`
		e1 := jsonEvent("Notice", payload)
		e1.Attrs = attrs("seq", int64(9007199254740993))
		publish(t, pub, e1)
		e2 := jsonEvent("Notice", `{"orderId": 9007199254740992}`)
		e2.Attrs = attrs("seq", int64(9007199254740992))
		publish(t, pub, e2)
		settle(t, s)
		for i, sub := range subs {
			got := queued(sub)
			require.Len(t, got, 1, "S%d receives E1 once and never E2", i+1)
			assert.Equal(t, int64(9007199254740993), must(got[0].Event.Value("seq")).Int(), "seq is exact")
			assert.Equal(t, payload, string(got[0].Event.Data), "payload byte-identical")
		}
	})
}

func TestCaseB03IntVsFraction(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	s := open(t, sw, "app")
	subs := []*sion.Subscription{
		subscribe(t, s, `{type ⊑ Reading; json(hits) == 0}`),
		subscribe(t, s, `{type ⊑ Reading; json(hits) == 0.5}`),
		subscribe(t, s, `{type ⊑ Reading; json(hits) >= 1}`),
	}
	for _, c := range []struct {
		x    string
		want [3]int
	}{
		{`0`, [3]int{1, 0, 0}}, {`0.0`, [3]int{1, 0, 0}}, {`0.6`, [3]int{0, 0, 0}},
		{`-0.4`, [3]int{0, 0, 0}}, {`1.0`, [3]int{0, 0, 1}}, {`"0"`, [3]int{0, 0, 0}},
	} {
		t.Run(c.x, func(t *testing.T) {
			publish(t, s, jsonEvent("Reading", `{"hits": `+c.x+`}`))
			for i, sub := range subs {
				assert.Equal(t, c.want[i], count(sub), "S%d", i+1)
			}
		})
	}
}

func TestCaseB04NegativeZeroNaN(t *testing.T) {
	srcs := []string{
		`{type ⊑ Reading; delta == 0}`,
		`{type ⊑ Reading; delta == -0.0}`,
		`{type ⊑ Reading; delta in [-1, 0]}`,
		`{type ⊑ Reading; delta in (0, 1]}`,
	}
	for _, order := range [][]int{{0, 1, 2, 3}, {1, 0, 2, 3}} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			sw := newSwitch(t, sion.PlaceConfig{})
			s := open(t, sw, "app")
			subs := make([]*sion.Subscription, 4)
			for _, i := range order {
				subs[i] = subscribe(t, s, srcs[i])
			}
			check := func(delta float64, want [4]int) {
				t.Helper()
				publish(t, s, &sion.Event{Type: "Reading", Attrs: attrs("delta", delta)})
				for i, sub := range subs {
					assert.Equal(t, want[i], count(sub), "delta %v, S%d", delta, i+1)
				}
			}
			check(0, [4]int{1, 1, 1, 0})
			check(math.Copysign(0, -1), [4]int{1, 1, 1, 0})
			check(-1, [4]int{0, 0, 1, 0})
			check(1, [4]int{0, 0, 0, 1})
			check(5e-324, [4]int{0, 0, 0, 1})
			err := s.Publish(context.Background(), &sion.Event{Type: "Reading", Attrs: attrs("delta", math.NaN())})
			require.ErrorIs(t, err, sion.ErrInvalidEvent)
			assert.Contains(t, err.Error(), `"delta"`, "the error names the attribute")
			for _, sub := range subs {
				assert.Equal(t, 0, count(sub), "NaN delivered nothing")
			}
			check(0, [4]int{1, 1, 1, 0}) // still healthy
		})
	}
}

func TestCaseB06XPathNamespaces(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	s := open(t, sw, "app")
	s1 := subscribe(t, s, `{type ⊑ Reading; xmlns:s = "urn:example:sensors"; xpath(/s:reading[@id='1']/s:value[@unit='C'] > 20)}`)
	xml := func(doc string) *sion.Event {
		return &sion.Event{Type: "Reading", ContentType: "application/xml", Data: []byte(doc)}
	}
	for _, c := range []struct {
		name, doc string
		want      int
	}{
		{"E1 other prefix, same URI", `<r:reading xmlns:r="urn:example:sensors" id="1"><r:value unit="C">21.5</r:value></r:reading>`, 1},
		{"E2 default namespace", `<reading xmlns="urn:example:sensors" id="1"><value unit="C">21.5</value></reading>`, 1},
		{"E3 same prefix, other URI", `<s:reading xmlns:s="urn:example:other" id="1"><s:value unit="C">21.5</s:value></s:reading>`, 0},
		{"E4 no namespace", `<reading id="1"><value unit="C">21.5</value></reading>`, 0},
		{"E5 19.0", `<r:reading xmlns:r="urn:example:sensors" id="1"><r:value unit="C">19.0</r:value></r:reading>`, 0},
	} {
		publish(t, s, xml(c.doc))
		assert.Equal(t, c.want, count(s1), c.name)
	}
	_, err := s.Subscribe(context.Background(), `{xpath(/t:reading)}`)
	require.ErrorIs(t, err, sion.ErrInvalidFilter, "an unbound prefix is refused at Subscribe")
	assert.Contains(t, err.Error(), "t")
}

func TestCaseB08OverlappingSubscriptions(t *testing.T) {
	variants(t, sion.PlaceConfig{}, func(t *testing.T, w *world) {
		p, q, pub := w.session(t, "P"), w.session(t, "Q"), w.session(t, "publisher")
		h1 := subscribe(t, p, `{type ⊑ Changed}`)
		h2 := subscribe(t, p, `{type ⊑ Created}`)
		h3 := subscribe(t, p, `{type ⊑ *; entity == "role"}`)
		h4 := subscribe(t, q, `{type ⊑ Created}`)
		events := []*sion.Event{
			{Type: "Created", Attrs: attrs("entity", "role")},
			{Type: "Changed", Attrs: attrs("entity", "role")},
			{Type: "Created", Attrs: attrs("entity", "user")},
		}
		for _, e := range events {
			publish(t, pub, e)
		}
		settle(t, p, q)
		got := func(sub *sion.Subscription) (out []string) {
			for _, d := range queued(sub) {
				out = append(out, fmt.Sprintf("%s/%s", d.Event.Type, must(d.Event.Value("entity")).Str()))
			}
			return out
		}
		e1, e2, e3 := "Created/role", "Changed/role", "Created/user"
		assert.Equal(t, []string{e1, e2, e3}, got(h1))
		assert.Equal(t, []string{e1, e3}, got(h2))
		assert.Equal(t, []string{e1, e2}, got(h3))
		assert.Equal(t, []string{e1, e3}, got(h4))

		// Session P fired once per event: E1 matched all three of its
		// subscriptions, and each received the same delivery.
		publish(t, pub, events[0])
		settle(t, p, q)
		d1, d2, d3 := queued(h1), queued(h2), queued(h3)
		require.Len(t, d1, 1)
		require.Len(t, d2, 1)
		require.Len(t, d3, 1)
		// Scores count the predicates that hold: the type clause is not one.
		assert.Equal(t, []sion.Match{{Subscription: h1.ID(), Score: 0}, {Subscription: h2.ID(), Score: 0}, {Subscription: h3.ID(), Score: 1}}, d1[0].Matched)
		assert.Same(t, d1[0].Event, d2[0].Event)
		assert.False(t, d1[0].Event.ID.IsZero())
		assert.Equal(t, "sw1", d1[0].Event.Control.Origin)
		assert.Equal(t, []sion.Match{{Subscription: h4.ID()}}, queued(h4)[0].Matched)
		st := w.sw.Stats()
		assert.Equal(t, uint64(4), st.EventsIn)
		assert.Equal(t, uint64(2+1+2+2), st.Fires, "P and Q fire once per event they match")
		assert.Equal(t, uint64(4+2+3+4), st.Deliveries, "one per subscription matched")
	})
}

func must(v ontology.Value, ok bool) ontology.Value {
	if !ok {
		panic("missing value")
	}
	return v
}

func TestCaseB09StaleStateAfterUnsubscribe(t *testing.T) {
	for _, cycles := range []int{0, 1000} {
		t.Run(fmt.Sprintf("cycles=%d", cycles), func(t *testing.T) {
			variants(t, sion.PlaceConfig{}, func(t *testing.T, w *world) {
				s := w.session(t, "app")
				s1 := subscribe(t, s, `{type ⊑ Notice; zone == "Hall.North.3"}`)
				require.NoError(t, s1.Cancel())
				r := rand.New(rand.NewPCG(9, 9))
				for range cycles {
					sub := subscribe(t, s, fmt.Sprintf(`{type ⊑ Notice; zone == "Hall.%x.%d"}`, r.Uint32(), r.IntN(9)))
					require.NoError(t, s.Unsubscribe(sub))
				}
				s2 := subscribe(t, s, `{type ⊑ Notice; zone == "hall"}`)
				s3 := subscribe(t, s, `{type ⊑ Notice; zone prefix "hall."}`)
				zone := func(sub *sion.Subscription) (out []string) {
					for _, d := range queued(sub) {
						out = append(out, must(d.Event.Value("zone")).Str())
					}
					return out
				}
				for _, z := range []string{"hall.north", "hall", "Hall.North.3", "Hall"} {
					publish(t, s, &sion.Event{Type: "Notice", Attrs: attrs("zone", z)})
				}
				settle(t, s)
				assert.Equal(t, []string{"hall"}, zone(s2))
				assert.Equal(t, []string{"hall.north"}, zone(s3))
				assert.Empty(t, queued(s1), "S1 receives nothing")
				require.Eventually(t, func() bool { return w.sw.Stats().Filters == 2 }, 2*time.Second, time.Millisecond,
					"the cancelled filters left the index (a remote Unsubscribe is not waited for)")
			})
		})
	}
}

func TestCaseB14SlowSubscriberIsolated(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	s := open(t, sw, "app")
	slow := checkB14(t, s, s)
	st := slow.Stats()
	assert.Equal(t, uint64(100), st.Matched)
	assert.True(t, st.Slow)
}

// checkB14 runs B14 with both subscriptions on session s and the
// publisher pub (the same session, or one on another switch): S_fast gets
// all 100 events in order while S_slow is blocked; S_slow then has a
// gap-free prefix and reports the rest as dropped. It returns S_slow.
func checkB14(t *testing.T, s, pub *sion.Session) *sion.Subscription {
	t.Helper()
	release := make(chan struct{})
	var mu sync.Mutex
	var slowGot, fastGot []int64
	fastDone := make(chan struct{})
	slow := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(8), sion.WithHandler(func(d sion.Delivery) {
		<-release
		mu.Lock()
		slowGot = append(slowGot, must(d.Event.Value("n")).Int())
		mu.Unlock()
	}))
	subscribe(t, s, `{type ⊑ Reading}`, sion.WithHandler(func(d sion.Delivery) {
		n := must(d.Event.Value("n")).Int()
		mu.Lock()
		fastGot = append(fastGot, n)
		mu.Unlock()
		if n == 100 {
			close(fastDone)
		}
	}))
	for n := 1; n <= 100; n++ {
		publish(t, pub, &sion.Event{Type: "Reading", Attrs: attrs("n", n)}) // returns at once: nothing waits for a handler
	}
	<-fastDone // S_fast got all 100 while S_slow is blocked on n = 1
	mu.Lock()
	require.Len(t, fastGot, 100)
	for i, n := range fastGot {
		require.Equal(t, int64(i+1), n, "in order")
	}
	require.Empty(t, slowGot)
	mu.Unlock()
	close(release)
	require.NoError(t, s.Drain(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	k := len(slowGot)
	require.GreaterOrEqual(t, k, 1)
	for i, n := range slowGot {
		require.Equal(t, int64(i+1), n, "a gap-free, in-order prefix")
	}
	assert.Equal(t, uint64(100-k), slow.Stats().Dropped, "dropped = 100 - k")
	return slow
}

func TestPublishValidation(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{MaxPayloadBytes: 64})
	s := open(t, sw, "app")
	all := subscribe(t, s, `{type ⊑ *}`)
	for _, c := range []struct {
		name    string
		ev      *sion.Event
		is      error
		mention string
	}{
		{"unknown type", &sion.Event{Type: "Gossip"}, sion.ErrUnknownEventType, `"Gossip"`},
		{"wildcard type", &sion.Event{Type: "*"}, sion.ErrUnknownEventType, `"*"`},
		{"unknown attribute", &sion.Event{Type: "Reading", Attrs: attrs("colour", "red")}, sion.ErrInvalidEvent, `"colour"`},
		{"attribute of a subtype", &sion.Event{Type: "Reading", Attrs: attrs("celsius", 3.0)}, sion.ErrInvalidEvent, `"celsius"`},
		{"wrong kind", &sion.Event{Type: "Reading", Attrs: attrs("n", "seven")}, sion.ErrInvalidEvent, `"n"`},
		{"fractional int", &sion.Event{Type: "Reading", Attrs: attrs("n", 1.5)}, sion.ErrInvalidEvent, `"n"`},
		{"NaN", &sion.Event{Type: "Reading", Attrs: attrs("delta", math.NaN())}, sion.ErrInvalidEvent, `"delta"`},
		{"+Inf", &sion.Event{Type: "Reading", Attrs: attrs("delta", math.Inf(1))}, sion.ErrInvalidEvent, `"delta"`},
		{"-Inf", &sion.Event{Type: "Reading", Attrs: attrs("delta", math.Inf(-1))}, sion.ErrInvalidEvent, `"delta"`},
		{"no value", &sion.Event{Type: "Reading", Attrs: []ontology.Attr{{Name: "n"}}}, sion.ErrInvalidEvent, `"n"`},
		{"twice through a synonym", &sion.Event{Type: "TempReading", Attrs: attrs("celsius", 1.0, "tempC", 2.0)}, sion.ErrInvalidEvent, `"celsius"`},
		{"bad JSON", jsonEvent("Reading", `{"a": `), sion.ErrInvalidEvent, "JSON"},
		{"bad XML", &sion.Event{Type: "Reading", ContentType: "text/xml", Data: []byte(`<a><b></a>`)}, sion.ErrInvalidEvent, "XML"},
		{"payload too large", &sion.Event{Type: "Reading", Data: make([]byte, 65)}, sion.ErrInvalidEvent, "65 bytes"},
		{"two XML roots", &sion.Event{Type: "Reading", ContentType: "application/xml", Data: []byte(`<a/><b/>`)}, sion.ErrInvalidEvent, "2 root elements"},
		{"attribute strings too large", &sion.Event{Type: "Notice", Attrs: attrs("zone", strings.Repeat("z", 61))}, sion.ErrInvalidEvent, "65 bytes"},
		{"reserved type", &sion.Event{Type: "sion.LinkRequest"}, sion.ErrInvalidEvent, "reserved"},
		{"nil", nil, sion.ErrInvalidEvent, "nil"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := s.Publish(context.Background(), c.ev)
			require.ErrorIs(t, err, c.is)
			assert.Contains(t, err.Error(), c.mention)
			assert.Equal(t, 0, count(all), "nothing delivered")
		})
	}
	t.Run("synonyms and conversions", func(t *testing.T) {
		publish(t, s, &sion.Event{Type: "TempReading", Attrs: attrs("tempC", 21, "n", 4.0)})
		publish(t, s, &sion.Event{Type: "Fire"})
		got := queued(all)
		require.Len(t, got, 2)
		e := got[0].Event
		assert.Equal(t, "TempReading", e.Type)
		assert.Equal(t, attrs("celsius", 21.0, "n", 4), e.Attrs, "canonical names, declared kinds, sorted")
		assert.Equal(t, "FireAlarm", got[1].Event.Type, "type synonym resolved")
		assert.False(t, e.ID.IsZero())
		assert.NotEqual(t, e.ID, got[1].Event.ID)
		assert.Equal(t, "sw1", e.Control.Origin)
		assert.Equal(t, sion.DefaultTTL, e.Control.TTL)
	})
	t.Run("unknown types when the place accepts them", func(t *testing.T) {
		sw := newSwitch(t, sion.PlaceConfig{AcceptUnknownTypes: true})
		s := open(t, sw, "app")
		any := subscribe(t, s, `{type ⊑ *; zone == "red"}`)
		typed := subscribe(t, s, `{type ⊑ Event}`)
		publish(t, s, &sion.Event{Type: "Gossip", Attrs: attrs("zone", "red", "colour", "blue")})
		assert.Equal(t, 1, count(any))
		assert.Equal(t, 0, count(typed))
	})
}

func TestSubscribeErrors(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	s := open(t, sw, "app")
	ctx := context.Background()
	for _, c := range []struct {
		src string
		is  error
	}{
		{`{type ⊑ Gossip}`, sion.ErrUnknownEventType},
		{`{type ⊑ Reading; colour == "red"}`, sion.ErrInvalidFilter},
		{`{type ⊑ Reading; n == "seven"}`, sion.ErrInvalidFilter},
		{`{type ⊑ Reading; n ==}`, sion.ErrInvalidFilter},
	} {
		_, err := s.Subscribe(ctx, c.src)
		require.ErrorIs(t, err, c.is, c.src)
	}
	_, err := s.Subscribe(ctx, `{type ⊑ Reading; n ==}`)
	require.ErrorIs(t, err, filter.ErrSyntax, "the filter package's error is wrapped too")
	_, err = s.Subscribe(ctx, `{type ⊑ Reading}`, sion.WithQueue(0))
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	_, err = s.Subscribe(ctx, `{type ⊑ Reading}`, sion.WithLookIn(), sion.WithOverflow(sion.Block))
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	assert.Equal(t, 0, sw.Stats().Subscriptions, "nothing half-registered")
	require.NoError(t, s.Close())
	_, err = s.Subscribe(ctx, `{type ⊑ Reading}`)
	require.ErrorIs(t, err, sion.ErrClosed)
	require.True(t, errors.Is(s.Publish(ctx, &sion.Event{Type: "Reading"}), sion.ErrClosed))
}

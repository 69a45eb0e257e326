package sion_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
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
			{Name: "tier", Kind: ontology.KindInt},
		}},
		{Name: "TempReading", Parents: []string{"Reading"}, Attributes: []ontology.Attribute{
			{Name: "celsius", Kind: ontology.KindFloat, Unit: "degC", Synonyms: []string{"tempC"}},
		}},
		{Name: "Alarm", Parents: []string{"Event"}},
		{Name: "FireAlarm", Parents: []string{"Alarm"}, Synonyms: []string{"Fire"}},
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

// newSwitch returns a switch in a place with ONT-1, closed at cleanup.
func newSwitch(t testing.TB, cfg sion.PlaceConfig) *sion.Switch {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	if cfg.Ontology == nil {
		cfg.Ontology = ont1(t)
	}
	p, err := sion.NewEventPlace(cfg)
	require.NoError(t, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "sw1", Place: p})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sw.Close()) })
	return sw
}

func open(t testing.TB, sw *sion.Switch, name string) *sion.Session {
	t.Helper()
	s, err := sw.Open(context.Background(), sion.SessionConfig{Name: name})
	require.NoError(t, err)
	return s
}

func subscribe(t testing.TB, s *sion.Session, src string, opts ...sion.SubscribeOption) *sion.Subscription {
	t.Helper()
	sub, err := s.Subscribe(context.Background(), src, opts...)
	require.NoError(t, err, src)
	return sub
}

func publish(t testing.TB, s *sion.Session, ev *sion.Event) {
	t.Helper()
	require.NoError(t, s.Publish(context.Background(), ev), "%v", ev)
}

// queued returns the deliveries waiting in sub's queue, without waiting:
// Publish hands events to queues before it returns.
func queued(sub *sion.Subscription) []sion.Delivery {
	var out []sion.Delivery
	for {
		select {
		case d, ok := <-sub.C():
			if !ok {
				return out
			}
			out = append(out, d)
		default:
			return out
		}
	}
}

// count returns how many deliveries wait in sub's queue, and drains them.
func count(sub *sion.Subscription) int { return len(queued(sub)) }

func jsonEvent(typ, payload string) *sion.Event {
	return &sion.Event{Type: typ, ContentType: "application/json", Data: []byte(payload)}
}

func attrs(kv ...any) []ontology.Attr {
	var out []ontology.Attr
	for i := 0; i < len(kv); i += 2 {
		var v ontology.Value
		switch x := kv[i+1].(type) {
		case int:
			v = ontology.Int(int64(x))
		case int64:
			v = ontology.Int(x)
		case float64:
			v = ontology.Float(x)
		case string:
			v = ontology.String(x)
		case bool:
			v = ontology.Bool(x)
		case ontology.Value:
			v = x
		}
		out = append(out, ontology.Attr{Name: kv[i].(string), Value: v})
	}
	return out
}

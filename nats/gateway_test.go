package nats_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/nats"
	"github.com/sion-go/sion/ontology"
)

const wait = 10 * time.Second // bound of every Eventually

// natsServer starts an embedded NATS server on 127.0.0.1 and returns it
// and its URL; it is shut down at cleanup.
func natsServer(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	s.Start()
	require.True(t, s.ReadyForConnections(wait), "the NATS server did not start")
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// connectTo returns a NATS connection to s, closed at cleanup.
func connectTo(t *testing.T, s *server.Server, opts ...natsgo.Option) *natsgo.Conn {
	t.Helper()
	nc, err := natsgo.Connect(s.ClientURL(), opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// newSwitch returns a switch of a place named place over o, closed at
// cleanup.
func newSwitch(t *testing.T, place string, o *ontology.Ontology) *sion.Switch {
	t.Helper()
	p, err := sion.NewEventPlace(sion.PlaceConfig{Name: place, Ontology: o})
	require.NoError(t, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: place + "-sw", Place: p})
	require.NoError(t, err)
	t.Cleanup(func() { sw.Close() })
	return sw
}

// newGateway makes a Gateway, closed at cleanup (before the switch and
// the connection, which were made first).
func newGateway(t *testing.T, sw *sion.Switch, cfg nats.GatewayConfig) *nats.Gateway {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	g, err := nats.NewGateway(ctx, sw, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	return g
}

// collector gathers the messages of a plain NATS subscription.
type collector struct {
	mu   sync.Mutex
	msgs []*natsgo.Msg
}

func (c *collector) add(m *natsgo.Msg) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
}

func (c *collector) all() []*natsgo.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*natsgo.Msg(nil), c.msgs...)
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

// subscribe makes a plain NATS subscriber on subject and flushes, so that
// the server has it when subscribe returns.
func subscribe(t *testing.T, nc *natsgo.Conn, subject string) *collector {
	t.Helper()
	c := &collector{}
	s, err := nc.Subscribe(subject, c.add)
	require.NoError(t, err)
	require.NoError(t, s.SetPendingLimits(-1, -1))
	require.NoError(t, nc.Flush())
	t.Cleanup(func() { s.Unsubscribe() })
	return c
}

// alarms is a small ontology with a type of two parents: BGM is-a music
// and is-a seasonal (S1's example), and names that need escaping.
func alarms(t *testing.T) *ontology.Ontology {
	t.Helper()
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "Alarm", Attributes: []ontology.Attribute{{Name: "level", Kind: ontology.KindInt}, {Name: "zone", Kind: ontology.KindString}}},
		{Name: "Fire", Parents: []string{"Alarm"}},
		{Name: "Smoke alarm", Parents: []string{"Fire"}},
		{Name: "Flood", Parents: []string{"Alarm"}},
		{Name: "media", Attributes: []ontology.Attribute{{Name: "level", Kind: ontology.KindInt}}},
		{Name: "music", Parents: []string{"media"}},
		{Name: "seasonal", Parents: []string{"media"}},
		{Name: "BGM", Parents: []string{"music", "seasonal"}},
		{Name: "jingle", Parents: []string{"BGM"}},
	})
	require.NoError(t, err)
	return o
}

func TestSubjectsOfTypes(t *testing.T) {
	nc := connectTo(t, natsServer(t))
	sw := newSwitch(t, "build.ing", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: nc, Prefix: "acme.events"})
	assert.Equal(t, "acme.events.build%2Eing", g.Base())
	for _, c := range []struct {
		typ  string
		want []string
	}{
		{"Alarm", []string{"acme.events.build%2Eing.Alarm"}},
		{"Smoke alarm", []string{"acme.events.build%2Eing.Alarm.Fire.Smoke%20alarm"}},
		{"BGM", []string{"acme.events.build%2Eing.media.music.BGM", "acme.events.build%2Eing.media.seasonal.BGM"}},
		{"jingle", []string{"acme.events.build%2Eing.media.music.BGM.jingle", "acme.events.build%2Eing.media.seasonal.BGM.jingle"}},
		{"Nope", nil},
		{ontology.ControlType, nil},
	} {
		t.Run(c.typ, func(t *testing.T) { assert.Equal(t, c.want, g.Subjects(c.typ)) })
	}
}

// publishIn opens a session on sw and returns a function publishing an
// event there.
func publisher(t *testing.T, sw *sion.Switch) func(ev *sion.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	s, err := sw.Open(ctx, sion.SessionConfig{Name: "publisher"})
	require.NoError(t, err)
	return func(ev *sion.Event) { require.NoError(t, s.Publish(ctx, ev)) }
}

// TestOutAsBinaryCloudEvents: an event published in the place reaches a
// plain NATS subscriber as a binary-mode CloudEvent on each of its
// type's subjects, with one ce-id; a subscriber by type prefix receives
// exactly the events of that type and below.
func TestOutAsBinaryCloudEvents(t *testing.T) {
	srv := natsServer(t)
	nc := connectTo(t, srv)
	sw := newSwitch(t, "hq", alarms(t))
	newGateway(t, sw, nats.GatewayConfig{Conn: nc, Out: &sion.DirectionConfig{Firewall: []string{"{type ⊑ *; level > 0}"}}})
	plain := connectTo(t, srv)
	all := subscribe(t, plain, "sion.hq.>")
	fire := subscribe(t, plain, "sion.hq.Alarm.Fire.>")
	music := subscribe(t, plain, "sion.hq.media.music.>")
	publish := publisher(t, sw)

	publish(&sion.Event{Type: "Smoke alarm", Attrs: []ontology.Attr{{Name: "level", Value: ontology.Int(3)}, {Name: "zone", Value: ontology.String("east wing")}}, ContentType: "application/json", Data: []byte(`{"room": 12}`)})
	publish(&sion.Event{Type: "Flood", Attrs: []ontology.Attr{{Name: "level", Value: ontology.Int(0)}}}) // the firewall stops it
	publish(&sion.Event{Type: "jingle", Attrs: []ontology.Attr{{Name: "level", Value: ontology.Int(1)}}})
	publish(&sion.Event{Type: "Flood", Attrs: []ontology.Attr{{Name: "level", Value: ontology.Int(2)}}})

	require.Eventually(t, func() bool { return all.len() == 4 && fire.len() == 1 && music.len() == 1 }, wait, time.Millisecond)
	m := fire.all()[0]
	assert.Equal(t, "sion.hq.Alarm.Fire.Smoke%20alarm", m.Subject)
	assert.Equal(t, "1.0", m.Header.Get("ce-specversion"))
	assert.Equal(t, "Smoke alarm", m.Header.Get("ce-type"))
	assert.Equal(t, "/sion/hq", m.Header.Get("ce-source"))
	assert.Equal(t, "application/json", m.Header.Get("content-type"))
	assert.Equal(t, "3", m.Header.Get("ce-level"))
	assert.Equal(t, "east wing", m.Header.Get("ce-zone"))
	assert.Len(t, m.Header.Get("ce-id"), 32)
	assert.Equal(t, `{"room": 12}`, string(m.Data))

	var jingles []*natsgo.Msg
	for _, m := range all.all() {
		if m.Header.Get("ce-type") == "jingle" {
			jingles = append(jingles, m)
		}
	}
	require.Len(t, jingles, 2, "one message per path of a type with two parents")
	assert.Equal(t, "sion.hq.media.music.BGM.jingle", jingles[0].Subject)
	assert.Equal(t, "sion.hq.media.seasonal.BGM.jingle", jingles[1].Subject)
	assert.Equal(t, jingles[0].Header.Get("ce-id"), jingles[1].Header.Get("ce-id"), "one ce-id")
	assert.Equal(t, "jingle", music.all()[0].Header.Get("ce-type"))
}

// TestStructuredWhenHeadersCannot: a value a header would change (a
// trailing space) sends the event in structured mode, and it decodes back.
func TestStructuredWhenHeadersCannot(t *testing.T) {
	srv := natsServer(t)
	nc := connectTo(t, srv)
	sw := newSwitch(t, "hq", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: nc})
	all := subscribe(t, connectTo(t, srv), "sion.hq.>")
	publisher(t, sw)(&sion.Event{Type: "Fire", Attrs: []ontology.Attr{{Name: "zone", Value: ontology.String("roof ")}}})
	require.Eventually(t, func() bool { return all.len() == 1 }, wait, time.Millisecond)
	m := all.all()[0]
	assert.Equal(t, "application/cloudevents+json", m.Header.Get("content-type"))
	assert.Empty(t, m.Header.Get("ce-id"))
	assert.Contains(t, string(m.Data), `"zone":"roof "`)
	require.Eventually(t, func() bool { return g.Stats().OutStructured == 1 }, wait, time.Millisecond) // counted after the publish
}

// receiver subscribes in sw's place with src and returns the subscription.
func receiver(t *testing.T, sw *sion.Switch, src string) *sion.Subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := sw.Open(ctx, sion.SessionConfig{Name: "receiver"})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	sub, err := s.Subscribe(ctx, src, sion.WithQueue(1<<14))
	require.NoError(t, err)
	return sub
}

// subscribed waits until g is subscribed on NATS to want (exactly).
func subscribed(t *testing.T, g *nats.Gateway, want ...string) {
	t.Helper()
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, g.Stats().Subjects) }, wait, time.Millisecond, "subjects: %v", g.Stats().Subjects)
}

// drain returns the events sub receives until it has none for a while
// after want events (bounded by wait).
func receive(t *testing.T, sub *sion.Subscription, n int) []*sion.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var out []*sion.Event
	for range n {
		d, err := sub.Next(ctx)
		require.NoError(t, err, "after %d events: %v", len(out), out)
		out = append(out, d.Event)
	}
	return out
}

// nothingMore checks that sub has nothing queued once marker, published
// last, has arrived: the events before it were all delivered already.
func nothingMore(t *testing.T, sub *sion.Subscription, marker string) {
	t.Helper()
	got := receive(t, sub, 1)
	assert.Equal(t, marker, string(got[0].Data), "the marker is the next event: nothing else came through")
}

func ceHeader(typ, id string, ext map[string]string) natsgo.Header {
	h := natsgo.Header{"ce-specversion": {"1.0"}, "ce-type": {typ}, "ce-source": {"/plain"}, "ce-id": {id}}
	for k, v := range ext {
		h["ce-"+k] = []string{v}
	}
	return h
}

// TestInFromPlainPublishers: binary CloudEvents and raw messages from a
// plain NATS publisher come in as events; a subscriber receives exactly
// those its filter matches and the In firewall allows; messages that do
// not map are refused, counted and never delivered.
func TestInFromPlainPublishers(t *testing.T) {
	srv := natsServer(t)
	nc := connectTo(t, srv)
	sw := newSwitch(t, "hq", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: nc,
		In:       &sion.DirectionConfig{Firewall: []string{`{type ⊑ Alarm; zone != "secret"}`, `{type ⊑ Alarm; zone not exists}`, "{type ⊑ media}"}},
		Subjects: []string{"sion.hq.>", "legacy.>"},
		Types:    map[string]string{"legacy.fire": "Fire"},
	})
	subscribed(t, g) // no interest, no subscription
	sub := receiver(t, sw, "{type ⊑ Fire}")
	subscribed(t, g, "legacy.>", "sion.hq.Alarm.Fire", "sion.hq.Alarm.Fire.>")

	pub := connectTo(t, srv)
	send := func(m *natsgo.Msg) { require.NoError(t, pub.PublishMsg(m)) }
	send(&natsgo.Msg{Subject: "sion.hq.Alarm.Fire", Header: ceHeader("Smoke alarm", "a-1", map[string]string{"level": "4", "zone": "lab"}), Data: []byte("one")})
	send(&natsgo.Msg{Subject: "sion.hq.Alarm.Fire.Smoke%20alarm", Data: []byte("two")})                                                                           // raw: type from the path
	send(&natsgo.Msg{Subject: "sion.hq.Alarm.Fire", Header: ceHeader("Smoke alarm", "a-1", map[string]string{"level": "4", "zone": "lab"}), Data: []byte("one")}) // a retry: same source and id
	send(&natsgo.Msg{Subject: "legacy.fire", Header: natsgo.Header{"Content-Type": {"application/json"}}, Data: []byte(`{"three": 3}`)})                          // raw: type from Types
	send(&natsgo.Msg{Subject: "sion.hq.Alarm.Fire", Header: ceHeader("Fire", "s-1", map[string]string{"zone": "secret"}), Data: []byte("firewalled")})
	send(&natsgo.Msg{Subject: "sion.hq.Alarm.Fire", Header: ceHeader("Flood", "f-1", nil), Data: []byte("not wanted")})
	send(&natsgo.Msg{Subject: "sion.hq.Alarm.Fire", Header: ceHeader("Quake", "q-1", nil), Data: []byte("unknown type")})
	send(&natsgo.Msg{Subject: "sion.hq.Alarm.Fire", Header: ceHeader("Fire", "b-1", map[string]string{"level": "high"}), Data: []byte("bad level")})
	send(&natsgo.Msg{Subject: "sion.hq.Alarm.Fire", Header: natsgo.Header{"ce-specversion": {"9.9"}, "ce-type": {"Fire"}}, Data: []byte("bad version")})
	send(&natsgo.Msg{Subject: "sion.hq.Alarm.Fire", Header: ceHeader("Fire", "t-1", map[string]string{"time": "yesterday"}), Data: []byte("bad time")})
	send(&natsgo.Msg{Subject: "legacy.other", Data: []byte("no type")})
	send(&natsgo.Msg{Subject: "sion.hq.Alarm.Fire.Nope", Data: []byte("not a path")})
	send(&natsgo.Msg{Subject: "sion.hq.Alarm.Fire", Header: natsgo.Header{"Content-Type": {"application/json"}}, Data: []byte(`{"broken`)})
	send(&natsgo.Msg{Subject: "sion.hq.Alarm.Fire", Data: []byte("marker")})

	// Messages on different subscriptions come in on goroutines of their
	// own: their order is not kept.
	got := receive(t, sub, 4)
	var data []string
	for _, ev := range got {
		data = append(data, string(ev.Data))
	}
	assert.ElementsMatch(t, []string{"one", "two", `{"three": 3}`, "marker"}, data)
	for _, ev := range got {
		switch string(ev.Data) {
		case "one":
			assert.Equal(t, "Smoke alarm", ev.Type)
			v, _ := ev.Value("level")
			assert.Equal(t, int64(4), v.Int())
			assert.Equal(t, []string{"nats:sion.hq", "hq"}, ev.Control.Path)
		case "two":
			assert.Equal(t, "Smoke alarm", ev.Type)
		case "marker":
			assert.Equal(t, "Fire", ev.Type)
		default:
			assert.Equal(t, "Fire", ev.Type)
			assert.Equal(t, "application/json", ev.ContentType)
		}
	}
	require.Eventually(t, func() bool { return g.Stats().InReceived == 14 }, wait, time.Millisecond)
	send(&natsgo.Msg{Subject: "sion.hq.Alarm.Fire", Data: []byte("marker 2")})
	nothingMore(t, sub, "marker 2")
	// A handler counts after it published or refused: wait for the last.
	require.Eventually(t, func() bool {
		st := g.Stats()
		refused := uint64(0)
		for _, n := range st.InRefused {
			refused += n
		}
		return st.InPublished+refused == 15
	}, wait, time.Millisecond)
	st := g.Stats()
	assert.Equal(t, map[nats.Reason]uint64{nats.ReasonUnknownType: 1, nats.ReasonBadCloudEvent: 3, nats.ReasonNoType: 2, nats.ReasonRefused: 1}, st.InRefused)
	assert.Equal(t, uint64(15), st.InReceived)
	assert.Equal(t, uint64(8), st.InPublished) // one, two, the retry, three, firewalled, not wanted, the markers
	assert.GreaterOrEqual(t, st.InDuplicates, uint64(1))
}

// TestMultipleInheritanceBackIn: an event of a type with two parents
// goes out on two subjects with one ce-id; published back in on both it
// is delivered once — here in another place behind another gateway on
// the same subject space.
func TestMultipleInheritanceBackIn(t *testing.T) {
	srv := natsServer(t)
	o := alarms(t)
	east := newSwitch(t, "east", o)
	west := newSwitch(t, "west", o)
	newGateway(t, east, nats.GatewayConfig{Conn: connectTo(t, srv), Place: "shared", Out: &sion.DirectionConfig{}})
	gw := newGateway(t, west, nats.GatewayConfig{Conn: connectTo(t, srv), Place: "shared", In: &sion.DirectionConfig{}})
	sub := receiver(t, west, "{type ⊑ music}")
	subscribed(t, gw, "sion.shared.media.music", "sion.shared.media.music.>", "sion.shared.media.seasonal.BGM", "sion.shared.media.seasonal.BGM.>")
	copies := subscribe(t, connectTo(t, srv), "sion.shared.>")

	publish := publisher(t, east)
	publish(&sion.Event{Type: "BGM", Data: []byte("bgm")})
	publish(&sion.Event{Type: "jingle", Data: []byte("jingle")})
	publish(&sion.Event{Type: "Fire", Data: []byte("fire")})

	got := receive(t, sub, 2)
	assert.ElementsMatch(t, []string{"bgm", "jingle"}, []string{string(got[0].Data), string(got[1].Data)})
	require.Eventually(t, func() bool { return gw.Stats().InPublished == 4 }, wait, time.Millisecond)
	assert.Equal(t, uint64(2), gw.Stats().InDuplicates, "the second copy of bgm and of jingle")
	publish(&sion.Event{Type: "music", Data: []byte("marker")})
	nothingMore(t, sub, "marker")
	require.Eventually(t, func() bool { return copies.len() == 6 }, wait, time.Millisecond)
	ids := map[string]int{}
	for _, m := range copies.all() {
		ids[m.Header.Get("ce-id")]++
	}
	assert.Len(t, ids, 4)
}

// TestEchoDoesNotComeBack: with the gateway subscribed to the space it
// publishes on, its own messages come back and are dropped by ID.
func TestEchoDoesNotComeBack(t *testing.T) {
	srv := natsServer(t)
	sw := newSwitch(t, "hq", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: connectTo(t, srv)})
	sub := receiver(t, sw, "{type ⊑ *}")
	subscribed(t, g, "sion.hq.>")
	publish := publisher(t, sw)
	publish(&sion.Event{Type: "BGM", Data: []byte("bgm")})
	publish(&sion.Event{Type: "Fire", Data: []byte("fire")})
	got := receive(t, sub, 2)
	assert.Equal(t, "bgm", string(got[0].Data))
	require.Eventually(t, func() bool {
		st := g.Stats()
		return st.InReceived == 3 && st.InDuplicates == 3 && st.OutEvents == 2 && st.OutMessages == 3
	}, wait, time.Millisecond, "three messages out and back, each dropped: %+v", g.Stats())
	// A raw message now is the next delivery: no echo was delivered.
	require.NoError(t, connectTo(t, srv).Publish("sion.hq.Alarm.Flood", []byte("marker")))
	nothingMore(t, sub, "marker")
	assert.Equal(t, uint64(2), g.Stats().OutEvents, "what came in from NATS does not go out again")
}

// subsOn returns the number of subscriptions the server has on subjects
// that start with prefix.
func subsOn(t *testing.T, srv *server.Server, prefix string) int {
	t.Helper()
	sz, err := srv.Subsz(&server.SubszOptions{Subscriptions: true, Limit: 1 << 16})
	require.NoError(t, err)
	n := 0
	for _, s := range sz.Subs {
		if strings.HasPrefix(s.Subject, prefix) {
			n++
		}
	}
	return n
}

// TestInterestDecidesSubscriptions: without a subscriber in the place
// there is no NATS subscription on the space; a subscriber on a type
// brings the subscriptions its paths need; cancelling it takes them away.
func TestInterestDecidesSubscriptions(t *testing.T) {
	srv := natsServer(t)
	sw := newSwitch(t, "hq", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: connectTo(t, srv), Prefix: "acme"})
	assert.Empty(t, g.Stats().Subjects)
	assert.Equal(t, 0, subsOn(t, srv, "acme."))

	cases := []struct {
		name, filter string
		want         []string
	}{
		{"a type", "{type ⊑ Fire}", []string{"acme.hq.Alarm.Fire", "acme.hq.Alarm.Fire.>"}},
		{"a type with two parents", "{type ⊑ BGM; level > 1}", []string{"acme.hq.media.music.BGM", "acme.hq.media.music.BGM.>", "acme.hq.media.seasonal.BGM", "acme.hq.media.seasonal.BGM.>"}},
		{"a parent of a type with two parents", "{type ⊑ seasonal}", []string{"acme.hq.media.music.BGM", "acme.hq.media.music.BGM.>", "acme.hq.media.seasonal", "acme.hq.media.seasonal.>"}},
		{"every type", "{}", []string{"acme.hq.>"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			s, err := sw.Open(ctx, sion.SessionConfig{Name: "interested"})
			require.NoError(t, err)
			defer s.Close()
			sub, err := s.Subscribe(ctx, c.filter)
			require.NoError(t, err)
			granted := time.Now()
			subscribed(t, g, c.want...)
			t.Logf("NATS subscriptions made %v after Subscribe returned", time.Since(granted))
			assert.Equal(t, len(c.want), subsOn(t, srv, "acme."))
			require.NoError(t, sub.Cancel())
			subscribed(t, g)
			require.Eventually(t, func() bool { return subsOn(t, srv, "acme.") == 0 }, wait, time.Millisecond)
		})
	}
}

// recorder keeps the messages of the log records at Warn and above.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, rec.Message)
	r.mu.Unlock()
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// TestCloseIsIdempotent: Close ends the federation (unfederate) before
// the subject switch stops, and neither the Gateway nor the switches log a
// failure: the federating switch does not re-establish the federation it
// is ending (sion's Gateway.Close stops that before it sends the Leave),
// so the subject switch sees no attempt either. Close waits for
// everything the Gateway started (goleak checks at the end) and may be
// called again.
func TestCloseIsIdempotent(t *testing.T) {
	srv := natsServer(t)
	nc := connectTo(t, srv)
	logs, swLogs := &recorder{}, &recorder{}
	p, err := sion.NewEventPlace(sion.PlaceConfig{Name: "hq", Ontology: alarms(t)})
	require.NoError(t, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "hq-sw", Place: p, Logger: slog.New(swLogs)})
	require.NoError(t, err)
	t.Cleanup(func() { sw.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	g, err := nats.NewGateway(ctx, sw, nats.GatewayConfig{Conn: nc, Logger: slog.New(logs)})
	require.NoError(t, err)
	receiver(t, sw, "{}")
	subscribed(t, g, "sion.hq.>")
	require.NoError(t, g.Close())
	require.NoError(t, g.Close())
	assert.Empty(t, sw.Gateways(), "unfederated")
	assert.Empty(t, g.Stats().Subjects)
	require.Eventually(t, func() bool { return subsOn(t, srv, "sion.") == 0 }, wait, time.Millisecond)
	for _, m := range logs.all() {
		assert.False(t, strings.HasPrefix(m, "nats:"), "the Gateway logged %q", m)
		assert.NotContains(t, m, "handshake failed", "the subject switch saw an attempt to re-establish the federation")
	}
	for _, m := range swLogs.all() {
		assert.NotContains(t, m, "re-establishing", "the federating switch logged %q", m)
	}
}

func TestNewGatewayRefusesBadConfig(t *testing.T) {
	nc := connectTo(t, natsServer(t))
	sw := newSwitch(t, "hq", alarms(t))
	for _, c := range []struct {
		name string
		cfg  nats.GatewayConfig
	}{
		{"no connection", nats.GatewayConfig{}},
		{"a wildcard prefix", nats.GatewayConfig{Conn: nc, Prefix: "a.*"}},
		{"an empty token", nats.GatewayConfig{Conn: nc, Prefix: "a..b"}},
		{"a bad subject", nats.GatewayConfig{Conn: nc, Subjects: []string{"a.>.b"}}},
		{"an unknown type", nats.GatewayConfig{Conn: nc, Types: map[string]string{"x": "Nope"}}},
		{"a wildcard Types key", nats.GatewayConfig{Conn: nc, Types: map[string]string{"x.*": "Fire"}}},
		{"a negative interval", nats.GatewayConfig{Conn: nc, WatchInterval: -1}},
		{"too many paths", nats.GatewayConfig{Conn: nc, MaxTypePaths: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := nats.NewGateway(context.Background(), sw, c.cfg)
			assert.ErrorIs(t, err, sion.ErrInvalidConfig)
		})
	}
	assert.Empty(t, sw.Gateways())
}

// TestSubjectOntologyWithMappings: the subject place has an ontology of
// its own; the Out and In Mappings convert as for any gateway, the
// subjects follow the subject place's types, and the interest that
// decides the subscriptions arrives converted.
func TestSubjectOntologyWithMappings(t *testing.T) {
	srv := natsServer(t)
	o := alarms(t)
	so, err := ontology.New([]ontology.TypeDef{
		{Name: "alert", Attributes: []ontology.Attribute{{Name: "severity", Kind: ontology.KindInt}, {Name: "zone", Kind: ontology.KindString}}},
		{Name: "fire", Parents: []string{"alert"}},
		{Name: "smoke", Parents: []string{"fire"}},
	})
	require.NoError(t, err)
	out, err := ontology.NewMapping(o, so, ontology.MappingSpec{
		Types:      []ontology.TypeRule{{From: "Alarm", To: "alert"}, {From: "Fire", To: "fire"}, {From: "Smoke alarm", To: "smoke"}},
		Attributes: []ontology.AttributeRule{{From: "level", To: "severity"}},
	})
	require.NoError(t, err)
	in, err := ontology.NewMapping(so, o, ontology.MappingSpec{
		Types:      []ontology.TypeRule{{From: "alert", To: "Alarm"}, {From: "fire", To: "Fire"}, {From: "smoke", To: "Smoke alarm"}},
		Attributes: []ontology.AttributeRule{{From: "severity", To: "level"}},
	})
	require.NoError(t, err)
	sw := newSwitch(t, "hq", o)
	g := newGateway(t, sw, nats.GatewayConfig{Conn: connectTo(t, srv), Ontology: so, Out: &sion.DirectionConfig{Mapping: out}, In: &sion.DirectionConfig{Mapping: in}})
	assert.Equal(t, []string{"sion.hq.alert.fire.smoke"}, g.Subjects("smoke"))

	plain := connectTo(t, srv)
	fires := subscribe(t, plain, "sion.hq.alert.fire.>")
	publisher(t, sw)(&sion.Event{Type: "Smoke alarm", Attrs: []ontology.Attr{{Name: "level", Value: ontology.Int(3)}}})
	require.Eventually(t, func() bool { return fires.len() == 1 }, wait, time.Millisecond)
	m := fires.all()[0]
	assert.Equal(t, "sion.hq.alert.fire.smoke", m.Subject)
	assert.Equal(t, "smoke", m.Header.Get("ce-type"))
	assert.Equal(t, "3", m.Header.Get("ce-severity"))

	sub := receiver(t, sw, "{type ⊑ Fire; level >= 2}")
	subscribed(t, g, "sion.hq.alert.fire", "sion.hq.alert.fire.>")
	require.NoError(t, plain.PublishMsg(&natsgo.Msg{Subject: "sion.hq.alert.fire.smoke", Data: []byte("no severity")}))
	require.NoError(t, plain.PublishMsg(&natsgo.Msg{Subject: "sion.hq.alert.fire.smoke", Header: ceHeader("smoke", "low", map[string]string{"severity": "1"}), Data: []byte("low")}))
	require.NoError(t, plain.PublishMsg(&natsgo.Msg{Subject: "sion.hq.alert.fire.smoke", Header: ceHeader("smoke", "high", map[string]string{"severity": "4"}), Data: []byte("high")}))
	got := receive(t, sub, 1)[0]
	assert.Equal(t, "Smoke alarm", got.Type)
	assert.Equal(t, "high", string(got.Data))
	v, _ := got.Value("level")
	assert.Equal(t, int64(4), v.Int())
	require.NoError(t, plain.PublishMsg(&natsgo.Msg{Subject: "sion.hq.alert.fire.smoke", Header: ceHeader("fire", "marker", map[string]string{"severity": "2"}), Data: []byte("marker")}))
	nothingMore(t, sub, "marker")
}

// TestInStructured: a structured-mode CloudEvent (content-type
// application/cloudevents+json) comes in like a binary one, and headers
// are read in any case.
func TestInStructured(t *testing.T) {
	srv := natsServer(t)
	sw := newSwitch(t, "hq", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: connectTo(t, srv)})
	sub := receiver(t, sw, "{type ⊑ Alarm}")
	subscribed(t, g, "sion.hq.Alarm", "sion.hq.Alarm.>")
	ce := event.New()
	ce.SetID("s-1")
	ce.SetSource("/plain")
	ce.SetType("Flood")
	ce.SetExtension("level", 2)
	require.NoError(t, ce.SetData("application/json", map[string]int{"cm": 40}))
	data, err := json.Marshal(ce)
	require.NoError(t, err)
	plain := connectTo(t, srv)
	require.NoError(t, plain.PublishMsg(&natsgo.Msg{Subject: "sion.hq.Alarm.Flood", Header: natsgo.Header{"Content-Type": {"application/cloudevents+json; charset=utf-8"}}, Data: data}))
	require.NoError(t, plain.PublishMsg(&natsgo.Msg{Subject: "sion.hq.Alarm.Flood", Header: natsgo.Header{"CE-SpecVersion": {"1.0"}, "Ce-Id": {"b-1"}, "CE-SOURCE": {"/plain"}, "ce-type": {"Fire"}, "Ce-Level": {"5"}}, Data: []byte("binary")}))
	got := receive(t, sub, 2)
	assert.Equal(t, "Flood", got[0].Type)
	assert.JSONEq(t, `{"cm": 40}`, string(got[0].Data))
	v, _ := got[0].Value("level")
	assert.Equal(t, int64(2), v.Int())
	assert.Equal(t, "Fire", got[1].Type)
	v, _ = got[1].Value("level")
	assert.Equal(t, int64(5), v.Int())
}

// TestSyncGivesTheContract: after Subscribe returned and Sync returned, a
// message published on NATS reaches the subscriber — no waiting for the
// watcher (whose interval is an hour here).
func TestSyncGivesTheContract(t *testing.T) {
	srv := natsServer(t)
	sw := newSwitch(t, "hq", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: connectTo(t, srv), WatchInterval: time.Hour})
	plain := connectTo(t, srv)
	for i, filter := range []string{"{type ⊑ Fire}", "{type ⊑ Flood}", "{type ⊑ BGM}"} {
		sub := receiver(t, sw, filter)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		require.NoError(t, g.Sync(ctx))
		cancel()
		typ := strings.TrimSuffix(strings.TrimPrefix(filter, "{type ⊑ "), "}")
		subjects := g.Subjects(typ)
		for _, subj := range subjects {
			require.NoError(t, plain.Publish(subj, []byte(subj)))
		}
		for range subjects {
			got := receive(t, sub, 1)[0]
			assert.Equal(t, typ, got.Type, "filter %d", i)
		}
	}
	require.NoError(t, g.Close())
	assert.ErrorIs(t, g.Sync(context.Background()), sion.ErrClosed)
}

// TestCloseUnderLoad: Close while messages flow both ways returns, and
// leaves no goroutine behind (goleak, TestMain).
func TestCloseUnderLoad(t *testing.T) {
	srv := natsServer(t)
	sw := newSwitch(t, "hq", alarms(t))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	g, err := nats.NewGateway(ctx, sw, nats.GatewayConfig{Conn: connectTo(t, srv)})
	require.NoError(t, err)
	receiver(t, sw, "{}")
	require.NoError(t, g.Sync(ctx))
	plain := connectTo(t, srv)
	publish := publisher(t, sw)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if plain.Publish("sion.hq.Alarm.Flood", []byte("in")) != nil {
				return
			}
		}
	})
	for range 200 {
		publish(&sion.Event{Type: "Fire"})
	}
	require.Eventually(t, func() bool { st := g.Stats(); return st.InReceived > 100 && st.OutEvents == 200 }, wait, time.Millisecond)
	require.NoError(t, g.Close())
	close(stop)
	wg.Wait()
	assert.Empty(t, g.Stats().Subjects)
}

// TestInterestWithConfiguredSubjects: configured subjects narrow the type
// space's subjects, are subscribed whole where they only overlap, and
// outside the space follow any interest (Types keys: interest in their
// type).
func TestInterestWithConfiguredSubjects(t *testing.T) {
	srv := natsServer(t)
	sw := newSwitch(t, "hq", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: connectTo(t, srv),
		Subjects: []string{"sion.hq.Alarm.>", "sion.hq.*.Fire", "legacy.>"},
		Types:    map[string]string{"old.flood": "Flood", "old.bgm": "BGM"},
	})
	subscribed(t, g)
	for _, c := range []struct {
		name, filter string
		want         []string
	}{
		{"narrowed", `{type ⊑ "Smoke alarm"}`, []string{"legacy.>", "sion.hq.Alarm.Fire.Smoke%20alarm", "sion.hq.Alarm.Fire.Smoke%20alarm.>"}},
		{"overlapping", "{type ⊑ Alarm}", []string{"legacy.>", "old.flood", "sion.hq.*.Fire", "sion.hq.Alarm.>"}},
		{"a Types key's type", "{type ⊑ Flood}", []string{"legacy.>", "old.flood", "sion.hq.Alarm.Flood", "sion.hq.Alarm.Flood.>"}},
		// sion.hq.media.Fire is no type path, but a CloudEvent of type
		// media may come on it (its ce-type decides): overlapping is enough.
		{"only overlapping", "{type ⊑ media}", []string{"legacy.>", "old.bgm", "sion.hq.*.Fire"}},
		{"every type", "{}", []string{"legacy.>", "old.bgm", "old.flood", "sion.hq.*.Fire", "sion.hq.Alarm.>"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			s, err := sw.Open(ctx, sion.SessionConfig{Name: "interested"})
			require.NoError(t, err)
			_, err = s.Subscribe(ctx, c.filter)
			require.NoError(t, err)
			require.NoError(t, g.Sync(ctx))
			assert.Equal(t, c.want, g.Stats().Subjects)
			require.NoError(t, s.Close())
			subscribed(t, g)
		})
	}
}

// TestSwitchClosedFirst: the caller's switch may close before the
// Gateway; Close still returns and leaves nothing behind.
func TestSwitchClosedFirst(t *testing.T) {
	srv := natsServer(t)
	p, err := sion.NewEventPlace(sion.PlaceConfig{Name: "hq", Ontology: alarms(t)})
	require.NoError(t, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "hq-sw", Place: p})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	g, err := nats.NewGateway(ctx, sw, nats.GatewayConfig{Conn: connectTo(t, srv)})
	require.NoError(t, err)
	s, err := sw.Open(ctx, sion.SessionConfig{Name: "interested"})
	require.NoError(t, err)
	_, err = s.Subscribe(ctx, "{}")
	require.NoError(t, err)
	require.NoError(t, g.Sync(ctx))
	require.NoError(t, sw.Close())
	require.NoError(t, g.Close())
	assert.Empty(t, g.Stats().Subjects)
}

// TestOutFilters: the subject place's own interest (OutFilters) narrows
// what goes out, as the Out firewall does.
func TestOutFilters(t *testing.T) {
	srv := natsServer(t)
	sw := newSwitch(t, "hq", alarms(t))
	g := newGateway(t, sw, nats.GatewayConfig{Conn: connectTo(t, srv), OutFilters: []string{"{type ⊑ Fire}", "{type ⊑ BGM}"}})
	all := subscribe(t, connectTo(t, srv), "sion.hq.>")
	publish := publisher(t, sw)
	for _, typ := range []string{"Flood", "Fire", "media", "jingle", "Alarm", "Smoke alarm"} {
		publish(&sion.Event{Type: typ, Data: []byte(typ)})
	}
	require.Eventually(t, func() bool { return g.Stats().OutEvents == 3 }, wait, time.Millisecond)
	require.Eventually(t, func() bool { return all.len() == 4 }, wait, time.Millisecond)
	var types []string
	for _, m := range all.all() {
		types = append(types, m.Header.Get("ce-type"))
	}
	assert.ElementsMatch(t, []string{"Fire", "jingle", "jingle", "Smoke alarm"}, types)
	_, err := nats.NewGateway(context.Background(), sw, nats.GatewayConfig{Conn: connectTo(t, srv), Name: "bad", OutFilters: []string{"{type ⊑"}})
	assert.ErrorIs(t, err, sion.ErrInvalidFilter)
}

package sion_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// The source's figures (S3): Fig. 2's topology — publishers P11 on B21
// and P12 on B22, whose events merge at B23, cross the rendezvous switch
// R31 and branch at B24 toward B25 and B26, where the subscribers S42 and
// S41 are — and Fig. 13's loads at R31: 245 events per second of the type
// TemperatureMoreThan20, of which Place = YokohamaStation 160 (GlobalPosition
// ID 0001: 100, 0002: 60), TokyoStation 50 (0003), KawasakiStation 35
// (0004). Bypassing the hottest level-2 class leaves 85 at R31, the
// hottest level-3 class 145.

const fig2Type = "TemperatureMoreThan20"

// fig13 is one second of Fig. 13's traffic, interleaved so that every
// prefix keeps the figure's proportions.
func fig13() []fig13Event {
	groups := []struct {
		place, id string
		lat, lon  float64
		n         int
	}{
		{"YokohamaStation", "0001", 35.4658, 139.6223, 100},
		{"YokohamaStation", "0002", 35.4662, 139.6229, 60},
		{"TokyoStation", "0003", 35.6812, 139.7671, 50},
		{"KawasakiStation", "0004", 35.5313, 139.6969, 35},
	}
	total := 0
	for _, g := range groups {
		total += g.n
	}
	sent := make([]int, len(groups))
	var out []fig13Event
	for i := range total {
		best, deficit := 0, -1.0
		for k, g := range groups {
			if d := float64(g.n*(i+1))/float64(total) - float64(sent[k]); sent[k] < g.n && d > deficit {
				best, deficit = k, d
			}
		}
		g := groups[best]
		sent[best]++
		out = append(out, fig13Event{place: g.place, id: g.id, lat: g.lat, lon: g.lon})
	}
	return out
}

type fig13Event struct {
	place, id string
	lat, lon  float64
}

// event returns the event as S3's Fig. 8 writes it: XML with the place,
// the GlobalPosition (ID, latitude, longitude) and the temperature, and
// the place and position ID as typed attributes too (the classes' levels).
func (f fig13Event) event() *sion.Event {
	xml := fmt.Sprintf(`<Event><EventType Name="%s"/><Place>%s</Place><GlobalPosition ID="%s"><Latitude>%g</Latitude><Longitude>%g</Longitude></GlobalPosition><Notification>21</Notification></Event>`,
		fig2Type, f.place, f.id, f.lat, f.lon)
	return &sion.Event{Type: fig2Type, ContentType: "application/xml", Data: []byte(xml), Attrs: []ontology.Attr{
		{Name: "Place", Value: ontology.String(f.place)},
		{Name: "GlobalPositionID", Value: ontology.String(f.id)},
	}}
}

func fig2Ontology(t testing.TB) *ontology.Ontology {
	o, err := ontology.New([]ontology.TypeDef{{Name: fig2Type, Attributes: []ontology.Attribute{
		{Name: "Place", Kind: ontology.KindString},
		{Name: "GlobalPositionID", Kind: ontology.KindString},
	}}})
	require.NoError(t, err)
	return o
}

// fig2 is the running Fig. 2 network.
type fig2 struct {
	sw       map[string]*sion.Switch
	pub      []*sion.Session // P11, P12
	s41, s42 *sion.Subscription
	clock    *manualClock // the switches' RendezvousConfig.Clock
}

// manualClock is a RendezvousConfig.Clock that moves only when the test
// advances it: the rates S3's switches measure count what the test
// published in a given span of this clock, however long the machine took
// to publish it (on a loaded machine one "second" of Fig. 13's traffic
// took more than a second to publish with the race detector, and the
// figures came out low).
type manualClock struct{ ns atomic.Int64 }

func newManualClock() *manualClock {
	c := &manualClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *manualClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *manualClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// idNear returns the key plus d on the ring (low 64 bits, wrapping).
func idNear(key [16]byte, d int64) [16]byte {
	lo := binary.BigEndian.Uint64(key[8:])
	binary.BigEndian.PutUint64(key[8:], lo+uint64(d))
	return key
}

func newFig2(t *testing.T, level int, release float64) *fig2 {
	clock := newManualClock()
	key := sion.OverlayKey(fig2Type)
	ids := map[string][16]byte{
		"R31": key, // the rendezvous switch: closest to the type's key
		"B23": idNear(key, 1), "B21": idNear(key, 1000), "B22": idNear(key, 2000),
		"B24": idNear(key, -1), "B25": idNear(key, -1000), "B26": idNear(key, -2000),
	}
	neighbours := map[string][]string{
		"R31": {"B23", "B24"},
		"B23": {"R31", "B21", "B22"}, "B21": {"B23"}, "B22": {"B23"},
		"B24": {"R31", "B25", "B26"}, "B25": {"B24"}, "B26": {"B24"},
	}
	routing := sion.RouteByRendezvous(sion.RendezvousConfig{
		Classes:     map[string]sion.ClassLevels{fig2Type: {First: "Place", Leaf: "GlobalPositionID"}},
		Window:      time.Second,
		Threshold:   300,
		BypassLevel: level,
		Release:     release,
		IDs:         ids,
		Neighbours:  neighbours,
		Clock:       clock.now,
	})
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "fig2", Ontology: fig2Ontology(t), Routing: routing})
	require.NoError(t, err)
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	f := &fig2{sw: map[string]*sion.Switch{}, clock: clock}
	ctx := context.Background()
	for _, j := range []struct{ name, via string }{
		{"R31", ""}, {"B23", "R31"}, {"B24", "R31"}, {"B21", "B23"}, {"B22", "B23"}, {"B25", "B24"}, {"B26", "B24"},
	} {
		sw, err := sion.NewSwitch(sion.SwitchConfig{Name: j.name, Place: place})
		require.NoError(t, err)
		l, err := tr.Listen(j.name)
		require.NoError(t, err)
		served := make(chan error, 1)
		go func() { served <- sw.Serve(context.Background(), l) }()
		t.Cleanup(func() {
			require.NoError(t, sw.Close())
			require.NoError(t, <-served)
		})
		require.Eventually(t, func() bool { return sw.State() == sion.Active }, 10*time.Second, time.Millisecond)
		require.NoError(t, sw.Join(ctx, tr, j.via), j.name)
		f.sw[j.name] = sw
	}
	for _, p := range []struct{ name, at string }{{"P11", "B21"}, {"P12", "B22"}} {
		s, err := f.sw[p.at].Open(ctx, sion.SessionConfig{Name: p.name})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		require.NoError(t, s.Advertise(ctx, sion.Advertisement{Type: fig2Type}))
		f.pub = append(f.pub, s)
	}
	// S3 Fig. 10's subscriptions are XPath over the event's XML.
	for _, s := range []struct {
		name, at, filter string
		into             **sion.Subscription
	}{
		{"S41", "B26", `{type ⊑ TemperatureMoreThan20; xpath(/Event/Notification) >= 20}`, &f.s41},
		{"S42", "B25", `{type ⊑ TemperatureMoreThan20; xpath(/Event/Place = 'YokohamaStation')}`, &f.s42},
	} {
		sess, err := f.sw[s.at].Open(ctx, sion.SessionConfig{Name: s.name})
		require.NoError(t, err)
		t.Cleanup(func() { sess.Close() })
		sub, err := sess.Subscribe(ctx, s.filter, sion.WithQueue(1<<14))
		require.NoError(t, err)
		*s.into = sub
	}
	return f
}

// round publishes one second of Fig. 13's traffic, P11 and P12 taking
// turns, at one instant of the switches' clock, and waits until both subscribers have every event they want,
// once, counting each delivery in seen.
func (f *fig2) round(t *testing.T, seen map[delivered]int) {
	t.Helper()
	ctx := context.Background()
	yokohama := 0
	for i, ev := range fig13() {
		require.NoError(t, f.pub[i%2].Publish(ctx, ev.event()))
		if ev.place == "YokohamaStation" {
			yokohama++
		}
	}
	for _, w := range []struct {
		name string
		sub  *sion.Subscription
		n    int
	}{{"S41", f.s41, 245}, {"S42", f.s42, yokohama}} {
		for range w.n {
			d := next(t, w.sub)
			seen[delivered{w.name, d.Event.ID}]++
		}
	}
}

// delivered is an event delivered to a subscriber.
type delivered struct {
	sub string
	id  sion.EventID
}

// overThreshold sends a second of Fig. 13's traffic every 200 ms of the
// switches' clock (within R31's one-second window) until R31 starts a
// bypass, then waits until the bypass is set up.
func (f *fig2) overThreshold(t *testing.T, seen map[delivered]int) {
	t.Helper()
	bypasses := func() []sion.BypassInfo { info, _ := f.sw["R31"].Rendezvous(); return info.Bypasses }
	require.Eventually(t, func() bool {
		f.round(t, seen)
		f.clock.advance(200 * time.Millisecond)
		return len(bypasses()) > 0
	}, 20*time.Second, 200*time.Millisecond)
	require.Eventually(t, func() bool {
		b := bypasses()
		return len(b) == 1 && b[0].Active
	}, 10*time.Second, time.Millisecond)
}

func (f *fig2) load(t *testing.T, name string) float64 {
	info, ok := f.sw[name].Rendezvous()
	require.True(t, ok)
	return info.Load
}

// TestFig2Bypass runs S3's Fig. 2 network with Fig. 13's traffic: the
// rendezvous switch carries 245 events per second; above its threshold it
// finds B24 as the branch point and B23 as the merge point of its hottest
// class, B23 sends that class straight to B24 over a new link, and R31's
// load falls to 85 (level 2, Place = YokohamaStation) or 145 (level 3,
// GlobalPositionID = 0001). Every event reaches its subscribers exactly
// once throughout.
func TestFig2Bypass(t *testing.T) {
	for _, tc := range []struct {
		level int
		class string
		after float64
	}{
		{2, fig2Type + "/Place=YokohamaStation", 85},
		{3, fig2Type + "/GlobalPositionID=0001", 145},
	} {
		t.Run(fmt.Sprintf("level %d", tc.level), func(t *testing.T) {
			f := newFig2(t, tc.level, 0)
			info, _ := f.sw["R31"].Rendezvous()
			require.Equal(t, []string{fig2Type}, info.Types, "R31 is the rendezvous switch")
			seen := map[delivered]int{}

			f.round(t, seen)
			assert.Equal(t, 245.0, f.load(t, "R31"), "load before the bypass")
			assert.Empty(t, info.Bypasses)

			// More traffic within the window takes R31 over its threshold
			// (300): it bypasses its hottest class.
			f.overThreshold(t, seen)
			for name, role := range map[string]string{"R31": "rendezvous", "B24": "branch point", "B23": "merge point"} {
				info, _ := f.sw[name].Rendezvous()
				require.Len(t, info.Bypasses, 1, name)
				assert.Equal(t, sion.BypassInfo{Class: tc.class, Role: role, Active: true}, info.Bypasses[0], name)
			}
			for _, name := range []string{"B21", "B22", "B25", "B26"} {
				info, _ := f.sw[name].Rendezvous()
				assert.Empty(t, info.Bypasses, name)
			}

			// Once the window has slid past that traffic, one second of it
			// loads R31 with what the bypass leaves.
			f.clock.advance(time.Second)
			require.Zero(t, f.load(t, "R31"))
			b24Before := linkTo(f.sw["B24"], "B23").EventsReceived
			f.round(t, seen)
			assert.Equal(t, tc.after, f.load(t, "R31"), "load after the bypass")
			assert.Equal(t, uint64(245-tc.after), linkTo(f.sw["B24"], "B23").EventsReceived-b24Before, "the bypassed class crosses B23→B24")
			for d, n := range seen {
				require.Equal(t, 1, n, "event %s delivered to %s %d times", d.id, d.sub, n)
			}
		})
	}
}

// linkTo returns sw's link to peer (the zero LinkInfo if none).
func linkTo(sw *sion.Switch, peer string) sion.LinkInfo {
	for _, l := range sw.Links() {
		if l.Peer == peer {
			return l
		}
	}
	return sion.LinkInfo{}
}

// TestBypassEndsForANewSubscriber: once R31 bypasses Yokohama's class, a
// subscription to it made off the bypass's path — at R31 itself, or
// upstream at B21 — ends the bypass before Subscribe returns (S2
// contract): an event published right after reaches it, and R31 carries
// the class again.
func TestBypassEndsForANewSubscriber(t *testing.T) {
	for _, at := range []string{"R31", "B21", "B23"} {
		t.Run(at, func(t *testing.T) {
			f := newFig2(t, 2, 0)
			seen := map[delivered]int{}
			f.overThreshold(t, seen)
			ctx := context.Background()
			s, err := f.sw[at].Open(ctx, sion.SessionConfig{Name: "late"})
			require.NoError(t, err)
			defer s.Close()
			sub, err := s.Subscribe(ctx, `{type ⊑ TemperatureMoreThan20; Place == "YokohamaStation"}`)
			require.NoError(t, err)
			for _, name := range []string{"R31", "B23", "B24"} {
				info, _ := f.sw[name].Rendezvous()
				assert.Empty(t, info.Bypasses, "%s: the bypass has ended", name)
			}
			ev := fig13Event{place: "YokohamaStation", id: "0001"}
			require.NoError(t, f.pub[0].Publish(ctx, ev.event()))
			d := next(t, sub)
			place, _ := d.Event.Value("Place")
			assert.Equal(t, "YokohamaStation", place.Str())
		})
	}
}

// TestBypassEndsWhenTrafficFalls: with RendezvousConfig.Release set, a
// bypass whose class's traffic at the merge point has stayed below it for
// a window ends (hysteresis), and the class's events cross R31 again.
func TestBypassEndsWhenTrafficFalls(t *testing.T) {
	f := newFig2(t, 2, 50)
	seen := map[delivered]int{}
	f.overThreshold(t, seen)
	require.Eventually(t, func() bool {
		f.clock.advance(10 * time.Millisecond) // real polls 10 ms apart, as if no event came
		for _, name := range []string{"R31", "B23", "B24"} {
			if info, _ := f.sw[name].Rendezvous(); len(info.Bypasses) > 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	f.clock.advance(time.Second)
	require.Zero(t, f.load(t, "R31"))
	f.round(t, seen)
	assert.Equal(t, 245.0, f.load(t, "R31"), "every class crosses R31 again")
}

package nats_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/nats"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
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

// usgsSubscribers are quakewatch's subscribers (examples/internal/usgs
// .Subscribers) with the number of events of the week each receives
// (DATA.md's ground truth; the CI checks quakewatch against the same).
var usgsSubscribers = []struct {
	name, filter string
	lookIn       bool
	want         int
}{
	{"big", `{type ⊑ hazard; mag >= 4.5}`, false, 81},
	{"blasts", `{type ⊑ anthropogenic}`, false, 36},
	{"alaska", `{type ⊑ hazard; place contains "Alaska"; mag >= 2.5}`, false, 62},
	{"tsunami", `{type ⊑ hazard; tsunami == 1}`, false, 6},
	{"deep", `{type ⊑ seismic; depth > 300}`, true, 13},
	{"felt-widely", `{type ⊑ seismic; match score >= 3; mag >= 5 weight 2; tsunami == 1 weight 2; json(properties.felt) >= 10}`, false, 9},
}

// usgsWeekEvents is the number of features in testdata's week (DATA.md).
const usgsWeekEvents = 2389

// usgsPlace returns a new event place with the hazard ontology, and a
// function that reads the week's events for it, new ones each call.
func usgsPlace(t testing.TB) (*sion.EventPlace, func() []*sion.Event) {
	t.Helper()
	hz, err := os.Open(filepath.Join("testdata", "hazards.json"))
	require.NoError(t, err)
	defer hz.Close()
	o, err := ontology.LoadJSON(hz, "hazards.json")
	require.NoError(t, err)
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "usgs", Ontology: o})
	require.NoError(t, err)
	week, err := os.ReadFile(filepath.Join("testdata", "all_week_2023-04-07.geojson"))
	require.NoError(t, err)
	reader, err := place.NewJSONReader(usgsFields)
	require.NoError(t, err)
	return place, func() []*sion.Event {
		events, err := reader.ReadList(week, "features")
		require.NoError(t, err)
		require.Len(t, events, usgsWeekEvents)
		return events
	}
}

// placeNode is a switch serving on a transport.
type placeNode struct {
	sw     *sion.Switch
	tr     transport.Transport
	addr   string
	served chan error
}

// serve starts a switch named name in place, serving on tr at addr, and
// closes it when the test ends.
func serve(t testing.TB, place *sion.EventPlace, tr transport.Transport, name, addr string) *placeNode {
	t.Helper()
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: name, Place: place})
	require.NoError(t, err)
	l, err := tr.Listen(addr)
	require.NoError(t, err)
	nd := &placeNode{sw: sw, tr: tr, addr: l.Addr().String(), served: make(chan error, 1)}
	go func() { nd.served <- sw.Serve(context.Background(), l) }()
	t.Cleanup(func() {
		assert.NoError(t, sw.Close())
		assert.NoError(t, <-nd.served)
	})
	return nd
}

// linksUp reports whether every switch of nodes has its links up, links
// in all (each counted at both ends), and returns when each came up, by
// switch and peer.
func linksUp(nodes []*placeNode, links int) (map[string]time.Time, bool) {
	since := make(map[string]time.Time)
	n := 0
	for _, nd := range nodes {
		for _, li := range nd.sw.Links() {
			if li.State != sion.LinkUp {
				return nil, false
			}
			since[fmt.Sprintf("%s-%s", nd.sw.Name(), li.Peer)] = li.Since
			n++
		}
	}
	return since, n == 2*links
}

// allLinksUp waits until linksUp, and returns when each link came up.
func allLinksUp(t testing.TB, nodes []*placeNode, links int) map[string]time.Time {
	t.Helper()
	var since map[string]time.Time
	require.Eventually(t, func() bool {
		var ok bool
		since, ok = linksUp(nodes, links)
		return ok
	}, time.Minute, 10*time.Millisecond, "every link up")
	return since
}

// TestPlaceOverNATSCluster runs an event place of 6 switches whose shared
// links all go through a cluster of 3 NATS servers: each switch has its
// own NATS connection, to server i mod 3 first and the others on
// reconnect. Quakewatch's subscribers sit on switches 1 to 5, and the
// USGS week is published at switch 4; each subscriber receives exactly
// its ground truth. Then the NATS server of switches 1 and 4 is killed
// while the week is published again: their clients reconnect to the
// other servers. In the first variant they do so at once, every Conn
// survives (the transport retransmits what the failover lost), and even
// the events published meanwhile arrive exactly. In the second, the
// clients wait 1.5 s before they reconnect, longer than the transport's
// DeadAfter: the Conns of switches 1 and 4 die, sion's links re-form on
// new Conns once the clients are back, and re-send their filters. In
// both, the week published once every link is up again is received
// exactly.
func TestPlaceOverNATSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster of 3 NATS servers and 3 × 2,389 events")
	}
	for _, v := range []struct {
		name string
		cfg  nats.Config
		// reconnectDelay is how long a client waits before it reconnects
		reconnectDelay time.Duration
		// reformed is how many link ends must re-form after the kill
		reformed int
	}{
		{"Conns survive", nats.Config{}, 0, 0},
		{"Conns die and links re-form", nats.Config{PingInterval: 50 * time.Millisecond, DeadAfter: 500 * time.Millisecond},
			1500 * time.Millisecond, 6}, // 1-0, 3-1 and 4-1, both ends
	} {
		t.Run(v.name, func(t *testing.T) {
			testPlaceOverNATSCluster(t, v.cfg, v.reconnectDelay, v.reformed)
		})
	}
}

func testPlaceOverNATSCluster(t *testing.T, cfg nats.Config, reconnectDelay time.Duration, mustReform int) {
	servers := startCluster(t, 3)
	place, readWeek := usgsPlace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg.SubjectPrefix = prefix(t)
	killed := servers[1].ClientURL()
	// Reconnect to the first server of the list that is not the one
	// killed, after reconnectDelay.
	reconnect := natsgo.ReconnectToServer(func(pool []natsgo.Server, _ natsgo.ServerInfo) (*natsgo.Server, time.Duration) {
		for i := range pool {
			if pool[i].URL.String() != killed {
				return &pool[i], reconnectDelay
			}
		}
		return &pool[0], reconnectDelay
	})

	// The tree: 1 and 2 link to 0, 3 and 4 to 1, 5 to 2.
	parents := []int{-1, 0, 0, 1, 1, 2}
	var nodes []*placeNode
	var ncs []*natsgo.Conn
	for i := range parents {
		order := []*server.Server{servers[i%3], servers[(i+1)%3], servers[(i+2)%3]}
		nc := connect(t, urls(order...), reconnect)
		ncs = append(ncs, nc)
		tr := newTransport(t, nc, cfg)
		name := fmt.Sprintf("sw%d", i)
		nodes = append(nodes, serve(t, place, tr, name, name))
	}
	for i, p := range parents {
		if p < 0 {
			continue
		}
		_, err := nodes[i].sw.Link(ctx, nodes[i].tr, nodes[p].addr, sion.LinkConfig{ProbeHops: -1,
			RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond})
		require.NoError(t, err, "link sw%d to sw%d", i, p)
	}
	before := allLinksUp(t, nodes, len(parents)-1)

	type subscriber struct {
		sess *sion.Session
		sub  *sion.Subscription
	}
	subs := make([]subscriber, len(usgsSubscribers))
	for k, s := range usgsSubscribers {
		sw := nodes[1+k%5].sw
		sess, err := sw.Open(ctx, sion.SessionConfig{Name: s.name, SpoolSize: 1 << 14})
		require.NoError(t, err)
		opt := sion.WithQueue(1 << 14)
		if s.lookIn {
			opt = sion.WithLookIn()
		}
		sub, err := sess.Subscribe(ctx, s.filter, opt) // active at every switch when it returns (S2)
		require.NoError(t, err, s.name)
		subs[k] = subscriber{sess, sub}
	}
	publisher := nodes[4].sw
	pub, err := publisher.Open(ctx, sion.SessionConfig{Name: "usgs-feed"})
	require.NoError(t, err)

	// publishWeek publishes the week at switch 4, calling midway when
	// half is published, flushes, and returns how many more events each
	// subscriber holds than before.
	held := make([]int, len(usgsSubscribers))
	publishWeek := func(midway func()) []int {
		t.Helper()
		week := readWeek()
		for i, ev := range week {
			if i == len(week)/2 {
				midway()
			}
			require.NoError(t, pub.Publish(ctx, ev))
		}
		require.NoError(t, publisher.Flush(ctx))
		got := make([]int, len(usgsSubscribers))
		for k, s := range usgsSubscribers {
			n := subs[k].sub.Stats().Queued
			if s.lookIn {
				n = subs[k].sess.Stats().Spooled
			}
			got[k], held[k] = n-held[k], n
			assert.Zero(t, subs[k].sub.Stats().Dropped, "subscriber %s dropped", s.name)
		}
		return got
	}
	requireExact := func(round string, got []int) {
		t.Helper()
		for k, s := range usgsSubscribers {
			assert.Equal(t, s.want, got[k], "%s: subscriber %s", round, s.name)
		}
	}

	requireExact("before the kill", publishWeek(func() {}))

	// Kill the NATS server of switches 1 and 4 while half the week is
	// published: links 1-0, 3-1 and 4-1 lose messages in flight.
	during := publishWeek(func() { kill(servers[1]) })
	var after map[string]time.Time
	reformed := 0
	require.Eventually(t, func() bool {
		var ok bool
		if after, ok = linksUp(nodes, len(parents)-1); !ok {
			return false
		}
		reformed = 0
		for k, s := range before {
			if !after[k].Equal(s) {
				reformed++
			}
		}
		return reformed >= mustReform
	}, time.Minute, 10*time.Millisecond, "every link up, %d ends re-formed", mustReform)
	for k, s := range before {
		if !after[k].Equal(s) {
			t.Logf("link %s re-formed after the kill", k)
		}
	}
	t.Logf("published during the kill: received %v of %v; %d link ends re-formed", during, wants(), reformed)
	if reformed == 0 {
		// Every Conn survived the failover: the transport retransmitted
		// what was lost, so nothing published meanwhile is lost either.
		requireExact("during the kill, no link re-formed", during)
	}
	for i, nc := range ncs {
		require.NotEqual(t, servers[1].ClientURL(), nc.ConnectedUrl(), "sw%d's NATS client still on the killed server", i)
	}
	requireExact("after recovery", publishWeek(func() {}))
}

// wants returns the ground truth of usgsSubscribers.
func wants() []int {
	var out []int
	for _, s := range usgsSubscribers {
		out = append(out, s.want)
	}
	return out
}

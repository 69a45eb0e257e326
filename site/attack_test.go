package site_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/site"
)

// dialManager opens a session named name at the site manager's address,
// as an attacker on the system's network would.
func dialManager(t testing.TB, s *system, name string) *sion.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), tReceive)
	defer cancel()
	sess, err := sion.Dial(ctx, s.net, "manager", sion.SessionConfig{Name: name})
	require.NoError(t, err)
	t.Cleanup(func() { sess.Close() })
	return sess
}

// requestEvent is a request to the site manager of kind (none when
// ""), number n, with data as its JSON payload.
func requestEvent(kind string, n int64, data string) *sion.Event {
	attrs := []ontology.Attr{{Name: "proxy", Value: ontology.String("evil")}, {Name: "req", Value: ontology.Int(n)}}
	if kind != "" {
		attrs = append(attrs, ontology.Attr{Name: "kind", Value: ontology.String(kind)})
	}
	return &sion.Event{Type: site.RequestType, Attrs: attrs, ContentType: "application/json", Data: []byte(data)}
}

// jsonRequest is a request's payload: site and addr, and the lists given.
func jsonRequest(t testing.TB, siteID, addr string, lists map[string][]string) string {
	t.Helper()
	m := map[string]any{"site": siteID, "addr": addr}
	for k, v := range lists {
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return string(b)
}

// figTrafficFlows checks that the Fig. system still carries a new
// subscription's events across sites: TopicB published at B1 reaches a
// subscriber at proxy 0 once each.
func figTrafficFlows(t *testing.T, s *system, tag string) {
	t.Helper()
	sensor := s.session("5", "sensor-"+tag)
	sub := subscribe(t, s.session("0", "process-"+tag), "{type ⊑ TopicB}")
	for i := 1; i <= 3; i++ {
		publish(t, sensor, "TopicB", i)
	}
	got := receive(t, sub, 3)
	slices.Sort(got)
	assert.Equal(t, []int64{1, 2, 3}, got, "the honest proxies' traffic")
}

// TestManagerRefusesMalformedRequests: a session that dials the site
// manager's address and publishes malformed requests — another event
// type, a payload that is not a request, an empty or overlong name, an
// overlong list, an unknown kind — gets a Publish error wrapping
// sion.ErrInvalidEvent for each; the manager keeps nothing of them and
// goes on serving the honest proxies. The other two event types of the
// manager's place (answers, changes), which would mislead proxies, are
// refused too: the manager's switch is a relay's front, which matches
// nothing its sessions publish.
func TestManagerRefusesMalformedRequests(t *testing.T) {
	s := newSystem(t, figSites, fallback("B0"))
	figTrafficFlows(t, s, "before")
	evil := dialManager(t, s, "evil")
	long := strings.Repeat("x", sion.MaxNameBytes+1)
	many := make([]string, 4097)
	for i := range many {
		many[i] = "T" + strconv.Itoa(i)
	}
	ok := jsonRequest(t, "Z", "evil", nil)
	for _, tc := range []struct {
		name string
		ev   *sion.Event
	}{
		{"answer type", &sion.Event{Type: site.AnswerType, ContentType: "application/json",
			Attrs: []ontology.Attr{{Name: "proxy", Value: ontology.String("proxy-0")}, {Name: "req", Value: ontology.Int(1)}},
			Data:  []byte(`{"epoch": 1, "own": {"id": "B0"}, "representative": true}`)}},
		{"change type", &sion.Event{Type: site.ChangeType, ContentType: "application/json",
			Attrs: []ontology.Attr{{Name: "site", Value: ontology.String("B1")}, {Name: "change", Value: ontology.Int(1 << 40)}},
			Data:  []byte(`{"epoch": 1, "change": 1099511627776, "site": "B1", "moved": true, "entry": {"id": "B1", "representative": "evil", "switches": ["evil"]}}`)}},
		{"JSON array", requestEvent("register", 1, `[1, 2, 3]`)},
		{"JSON of wrong kinds", requestEvent("register", 2, `{"site": 5, "addr": ["evil"]}`)},
		{"XML", &sion.Event{Type: site.RequestType, ContentType: "application/xml", Data: []byte(`<site>Z</site>`),
			Attrs: []ontology.Attr{{Name: "kind", Value: ontology.String("register")}}}},
		{"no payload", requestEvent("register", 3, ``)},
		{"empty site", requestEvent("register", 4, jsonRequest(t, "", "evil", nil))},
		{"empty addr", requestEvent("register", 5, jsonRequest(t, "Z", "", nil))},
		{"site over MaxNameBytes", requestEvent("register", 6, jsonRequest(t, long, "evil", nil))},
		{"addr over MaxNameBytes", requestEvent("register", 7, jsonRequest(t, "Z", long, nil))},
		{"type over MaxNameBytes", requestEvent("publish", 8, jsonRequest(t, "Z", "evil", map[string][]string{"types": {long}}))},
		{"empty switch", requestEvent("register", 9, jsonRequest(t, "Z", "evil", map[string][]string{"switches": {""}}))},
		{"published over 4096", requestEvent("register", 10, jsonRequest(t, "Z", "evil", map[string][]string{"published": many}))},
		{"subscribed over 4096", requestEvent("register", 11, jsonRequest(t, "Z", "evil", map[string][]string{"subscribed": many}))},
		{"switches over 4096", requestEvent("register", 12, jsonRequest(t, "Z", "evil", map[string][]string{"switches": many}))},
		{"unreachable over MaxNameBytes", requestEvent("register", 13, `{"site": "Z", "addr": "evil", "unreachable": "`+long+`"}`)},
		{"unknown kind", requestEvent("delete", 14, ok)},
		{"no kind", requestEvent("", 15, ok)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := evil.Publish(context.Background(), tc.ev)
			assert.ErrorIs(t, err, sion.ErrInvalidEvent)
		})
	}
	for _, si := range s.manager.Sites() {
		assert.Contains(t, []string{"B0", "B1", "B2"}, si.ID, "a site the requests named")
		for _, pi := range si.Proxies {
			assert.NotEqual(t, "evil", pi.Name)
		}
	}
	assert.Equal(t, "1", siteInfo(t, s, "B1").Representative)
	figTrafficFlows(t, s, "after")
}

// siteInfo returns the manager's entry for site id.
func siteInfo(t testing.TB, s *system, id string) site.SiteInfo {
	t.Helper()
	sites := s.manager.Sites()
	i := slices.IndexFunc(sites, func(si site.SiteInfo) bool { return si.ID == id })
	require.GreaterOrEqual(t, i, 0, "site %s", id)
	return sites[i]
}

// answers subscribes sess to the site manager's answers to proxy name and
// returns them, decoded, as they come.
func answers(t testing.TB, sess *sion.Session, name string) *sion.Subscription {
	t.Helper()
	sub, err := sess.Subscribe(context.Background(), fmt.Sprintf("{type ⊑ %s; proxy == %q}", site.AnswerType, name), sion.WithQueue(4096))
	require.NoError(t, err)
	return sub
}

// nextAnswerError returns the error of the next answer sub receives.
func nextAnswerError(t testing.TB, sub *sion.Subscription) (req int64, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), tReceive)
	defer cancel()
	d, err := sub.Next(ctx)
	require.NoError(t, err)
	var a struct {
		Error string `json:"error"`
	}
	require.NoError(t, json.Unmarshal(d.Event.Data, &a))
	v, _ := d.Event.Value("req")
	return v.Int(), a.Error
}

// TestManagerSiteFlood: one session that names a new site in each
// request fills the site manager's directory up to its MaxSites (small
// here); past the bound the manager forgets a site no operator set up
// and no reachable proxy serves — the flood's own, each left behind as
// the session moves on — so the flood cannot lock honest sites out: an
// honest proxy of a new site registers and publishes, the directory stays
// within the bound, and the operator's sites and their traffic are
// untouched. A second session under an honest proxy's name, while that
// proxy's session is open, is refused.
func TestManagerSiteFlood(t *testing.T) {
	const maxSites = 64
	s := newSystem(t, figSites, fallback("B0"), func(_ *system, c *site.ManagerConfig) { c.MaxSites = maxSites })
	evil := dialManager(t, s, "evil")
	ans := answers(t, evil, "evil")
	ctx := context.Background()
	const flood = 3 * maxSites
	for i := range flood {
		require.NoError(t, evil.Publish(ctx, requestEvent("register", int64(i), jsonRequest(t, "flood-"+strconv.Itoa(i), "evil", nil))))
	}
	for range flood {
		_, msg := nextAnswerError(t, ans)
		assert.Empty(t, msg)
	}
	assert.LessOrEqual(t, len(s.manager.Sites()), maxSites)
	for _, id := range []string{"B0", "B1", "B2"} {
		siteInfo(t, s, id) // the operator's sites stay
	}

	// An honest proxy of a new site registers and publishes.
	p := s.addProxy(siteSpec{id: "B3"}, "6", func(c *site.ProxyConfig) { c.Switches = []string{"3"} })
	require.Eventually(t, func() bool { st := p.Stats(); return st.ManagerRequests > st.ManagerFailures }, tSettle, 5*time.Millisecond,
		"the new proxy had an answer from the manager")
	sess, err := p.Open(ctx, sion.SessionConfig{Name: "sensor-B3"})
	require.NoError(t, err)
	t.Cleanup(func() { sess.Close() })
	require.NoError(t, sess.Publish(ctx, &sion.Event{Type: "TopicA"}))
	assert.Equal(t, "6", siteInfo(t, s, "B3").Representative)
	assert.LessOrEqual(t, len(s.manager.Sites()), maxSites)

	// The flood's session cannot take an honest proxy's name.
	impostor := dialManager(t, s, s.proxies["1"].Name())
	ians := answers(t, impostor, s.proxies["1"].Name())
	require.NoError(t, impostor.Publish(ctx, requestEvent("register", 1, jsonRequest(t, "B1", "evil-addr", nil))))
	for {
		req, msg := nextAnswerError(t, ians)
		if req == 1 {
			assert.Contains(t, msg, "registered by another session")
			break
		}
	}
	assert.Equal(t, "1", siteInfo(t, s, "B1").Representative)

	figTrafficFlows(t, s, "after")
}

// TestImpostorProxySession: a session on a proxy's front that names itself
// like another site's proxy ("site-proxy/B0/…") is taken for one, and so
// only limits itself. At B1's representative proxy its subscription is
// placed at B1's switches that carry the type and nowhere else: it is
// not sent to other sites (InterSiteSubscribes does not move) nor
// registered with the site manager, so it receives B1's events and not
// B0's, even though an application at the same proxy brings B0's events
// to the front; and nothing it receives goes back to B0 (proxy 0's
// InterSiteEvents counts B1's event only). At a second proxy, which
// carries nothing for other sites, it is placed nowhere and receives
// nothing — until that proxy spreads a publish itself. A session named like a proxy of the front's own site makes
// the front spread its publishes itself, as a representative would: they
// still land once on the site's switches.
func TestImpostorProxySession(t *testing.T) {
	s := newSystem(t, figSites, fallback("B0"))
	atB1, atB0 := s.session("5", "sensor-B1"), s.session("2", "sensor-B2") // B2 publishes at B0's switch
	publish(t, atB1, "TopicB", -1)                                         // both of B1's switches carry TopicB
	publish(t, atB1, "TopicB", -2)
	publish(t, atB0, "TopicB", -3)
	p1 := s.proxies["1"]
	cross := p1.Stats().InterSiteSubscribes

	impostor := s.session("1", "site-proxy/B0/evil")
	fake := subscribe(t, impostor, "{type ⊑ TopicB}")
	fakeA := subscribe(t, impostor, "{type ⊑ TopicA}")
	assert.Equal(t, cross, p1.Stats().InterSiteSubscribes, "the impostor's subscriptions are not sent to other sites")
	since := time.Now()
	require.Eventually(t, func() bool {
		for _, pi := range siteInfo(t, s, "B1").Proxies {
			if pi.Name == p1.Name() {
				return pi.LastSeen.After(since)
			}
		}
		return false
	}, tSettle, 5*time.Millisecond, "proxy 1 registers again")
	for _, pi := range siteInfo(t, s, "B1").Proxies {
		assert.NotContains(t, pi.Subscribed, "TopicA", "%s: the impostor's types are not registered", pi.Name)
	}

	honest := subscribe(t, s.session("1", "process-B1"), "{type ⊑ TopicB}")           // brings B0's TopicB to proxy 1's front
	cloud := subscribe(t, s.session("0", "process-B0"), "{type ⊑ TopicB}")            // its session at proxy 1 is B0's proxy's
	nowhere := subscribe(t, s.session("5", "site-proxy/B0/evil2"), "{type ⊑ TopicB}") // placed nowhere
	interSite := s.interSite()
	publish(t, atB1, "TopicB", 1)
	publish(t, atB0, "TopicB", 2)
	assert.Equal(t, []int64{1}, receive(t, fake, 1), "the impostor: B1's event")
	got := receive(t, honest, 2)
	slices.Sort(got)
	assert.Equal(t, []int64{1, 2}, got, "the application at proxy 1")
	got = receive(t, cloud, 2)
	slices.Sort(got)
	assert.Equal(t, []int64{1, 2}, got, "the application at proxy 0")
	nothingMore(t, map[string]*sion.Subscription{"impostor": fake, "impostor TopicA": fakeA, "impostor at 5": nowhere, "proxy 1": honest, "proxy 0": cloud})
	interSite["0"]++ // n = 1, from B1
	interSite["1"]++ // n = 2, from B0
	assert.Equal(t, interSite, s.interSite(), "no event went back to its site")

	// Named like a proxy of B1 at B1's second proxy: it spreads.
	p5 := s.proxies["5"]
	before := p5.Stats()
	local := s.session("5", "site-proxy/B1/evil3")
	in := s.publishes("4.0") + s.publishes("4.1")
	publish(t, local, "TopicB", 3)
	after := p5.Stats()
	assert.Equal(t, before.ToRepresentative, after.ToRepresentative)
	assert.Equal(t, sum(before.Spread)+1, sum(after.Spread), "proxy 5 spread it")
	assert.Equal(t, in+1, s.publishes("4.0")+s.publishes("4.1"))
	assert.Equal(t, []int64{3}, receive(t, cloud, 1))
	assert.Equal(t, []int64{3}, receive(t, honest, 1))
	assert.Equal(t, []int64{3}, receive(t, fake, 1))
	// Proxy 5 now carries TopicB at the switch it spread to, so it placed
	// the subscriptions of "other sites' proxies" there first.
	assert.Equal(t, []int64{3}, receive(t, nowhere, 1), "the impostor at proxy 5, once proxy 5 spread")
}

func sum(m map[string]uint64) (n uint64) {
	for _, v := range m {
		n += v
	}
	return n
}

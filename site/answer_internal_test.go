package site

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// TestAnswerOlderThanChange: the site manager answers a request and
// announces changes on two subscriptions, so a change announced after
// the manager made an answer may reach the proxy first. The answer must
// not undo it. Seen on a loaded machine after a manager restart: proxy 0
// asked where TopicB is published, the new manager answered "nowhere"
// (B1 had not registered again yet), B1's registration announced TopicB
// at B1 (change 2) before that answer arrived, and proxy 0 cached
// "nowhere" over it and dropped its subscription at B1 for good.
func TestAnswerOlderThanChange(t *testing.T) {
	const epoch = 7
	b1 := siteEntry{ID: "B1", Representative: "1", Switches: []string{"4.0", "4.1"}}
	for _, tc := range []struct {
		name   string
		change change // received first
		answer answer // then the answer to subscribe [TopicB]
		sites  []siteEntry
		isRep  bool
	}{
		{
			name:   "type new at a site after the answer was made",
			change: change{Epoch: epoch, Change: 5, Site: "B1", Types: []string{"TopicB"}, Entry: b1},
			answer: answer{Epoch: epoch, Change: 4, Own: siteEntry{ID: "B0", Representative: "0"}, Representative: true},
			sites:  []siteEntry{b1},
			isRep:  true,
		},
		{
			name:   "representative moved after the answer was made",
			change: change{Epoch: epoch, Change: 5, Site: "B0", Moved: true, Entry: siteEntry{ID: "B0", Representative: "9"}},
			answer: answer{Epoch: epoch, Change: 4, Own: siteEntry{ID: "B0", Representative: "0"}, Representative: true, Sites: []siteEntry{withTypes(b1, "TopicB")}},
			sites:  []siteEntry{b1},
			isRep:  false,
		},
		{
			name:   "answer made after the change",
			change: change{Epoch: epoch, Change: 5, Site: "B0", Moved: true, Entry: siteEntry{ID: "B0", Representative: "9"}},
			answer: answer{Epoch: epoch, Change: 6, Own: siteEntry{ID: "B0", Representative: "0"}, Representative: true},
			sites:  nil,
			isRep:  true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProxy(t)
			ev, err := event(ChangeType, tc.change)
			require.NoError(t, err)
			p.mgr.onChange(sion.Delivery{Event: ev})
			p.mgr.apply(tc.answer, kindSubscribe, []string{"TopicB"}, nil)
			p.mu.Lock()
			defer p.mu.Unlock()
			assert.Equal(t, tc.sites, p.dir.sites["TopicB"])
			assert.Equal(t, tc.isRep, p.dir.isRep)
		})
	}
}

// TestChangesForgotten: when the changes an answer does not hold are no
// longer all kept, the proxy forgets its cache and asks again.
func TestChangesForgotten(t *testing.T) {
	p := newTestProxy(t)
	for n := range int64(maxChangeLog + 1) {
		ev, err := event(ChangeType, change{Epoch: 7, Change: n + 1, Site: "B2", Entry: siteEntry{ID: "B2"}})
		require.NoError(t, err)
		p.mgr.onChange(sion.Delivery{Event: ev})
	}
	p.mgr.apply(answer{Epoch: 7, Change: 0, Own: siteEntry{ID: "B0"}}, kindSubscribe, []string{"TopicB"}, nil)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, cached := p.dir.sites["TopicB"]
	assert.False(t, cached, "an answer older than the changes kept is not cached")
}

func withTypes(e siteEntry, types ...string) siteEntry { e.Types = types; return e }

// newTestProxy returns a proxy of site B0 whose site manager never
// answers (there is none): the test hands it answers and changes.
func newTestProxy(t *testing.T) *Proxy {
	t.Helper()
	o, err := ontology.LoadJSON(strings.NewReader(`{"types": [{"name": "TopicB"}]}`), "test.json")
	require.NoError(t, err)
	n, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	p, err := NewProxy(ProxyConfig{Name: "proxy-0", Site: "B0", Addr: "0", Transport: n, Manager: "manager", Place: sion.PlaceConfig{Ontology: o}})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

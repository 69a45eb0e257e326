package site_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/site"
)

// TestRegistrationServedLate: a proxy sends requests from several
// goroutines, each with its whole registration as it was when the request
// was made, so the site manager may serve an older registration after a
// newer one. It keeps the newer: the older does not take back a type a
// subscription has come to need since (the manager would not hold the
// type's first publish for it), nor one published since.
func TestRegistrationServedLate(t *testing.T) {
	s := newSystem(t, figSites, fallback("B0"))
	sess := dialManager(t, s, "late")
	reg := func(n int64, seq int64, subscribed, published []string) {
		t.Helper()
		b, err := json.Marshal(map[string]any{"site": "B9", "addr": "late-addr", "seq": seq, "subscribed": subscribed, "published": published})
		require.NoError(t, err)
		require.NoError(t, sess.Publish(context.Background(), requestEvent("register", n, string(b))))
	}
	info := func() site.ProxyInfo {
		for _, si := range s.manager.Sites() {
			for _, pi := range si.Proxies {
				if pi.Name == "late" {
					return pi
				}
			}
		}
		return site.ProxyInfo{}
	}
	reg(1, 2, []string{"TopicA", "TopicB"}, []string{"TopicC"}) // taken second, served first
	reg(2, 1, []string{"TopicA"}, nil)                          // taken first, served second
	assert.Equal(t, []string{"TopicA", "TopicB"}, info().Subscribed)
	assert.True(t, info().Reachable)
	reg(3, 3, []string{"TopicA"}, nil) // newer: taken
	assert.Equal(t, []string{"TopicA"}, info().Subscribed)
}

package sion_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// The scenarios of S1 and ../shared/CASES.md that need shared links, over
// every transport of network_test.go.

// overTransports runs body once per transport with a fresh network of
// the given tree.
func overTransports(t *testing.T, cfg sion.PlaceConfig, parent []int, body func(t *testing.T, n *network)) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			tr, addr := tc.make(t)
			body(t, newNetwork(t, tr, addr, cfg, parent))
		})
	}
}

func proxies(n *network, i int) map[string]int {
	out := map[string]int{}
	for _, l := range n.sws[i].Links() {
		out[l.Peer] = l.Proxies
	}
	return out
}

// TestFilterTTLSpread is S1's event-path propagation: a filter with TTL 2
// reaches exactly the switches within two links.
func TestFilterTTLSpread(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, line(5), func(t *testing.T, n *network) {
		s := open(t, n.sws[0], "app")
		sub := subscribe(t, s, `{type ⊑ Alarm}`, sion.WithTTL(2))
		assert.Equal(t, map[string]int{"sw1": 0}, proxies(n, 0))
		assert.Equal(t, map[string]int{"sw0": 1, "sw2": 0}, proxies(n, 1), "one link away: installed")
		assert.Equal(t, map[string]int{"sw1": 1, "sw3": 0}, proxies(n, 2), "two links away: installed")
		assert.Equal(t, map[string]int{"sw2": 0, "sw4": 0}, proxies(n, 3), "three links away: not installed")
		assert.Equal(t, []sion.RouteInfo{{Peer: "sw2", Filter: "{type ⊑ Alarm}", TTL: 0, Refs: 1, Acknowledged: true}}, n.sws[1].Routes())
		assert.Empty(t, n.sws[2].Routes(), "TTL spent: not propagated further")

		// Events from within two links arrive; from three, they do not.
		for i := range n.sws {
			publish(t, open(t, n.sws[i], "pub"), &sion.Event{Type: "FireAlarm"})
		}
		n.flush()
		var from []string
		for _, d := range queued(sub) {
			from = append(from, d.Event.Control.Origin)
		}
		assert.ElementsMatch(t, []string{"sw0", "sw1", "sw2"}, from)
	})
}

// TestReferenceCounts is S1's per-key reference count: a second
// subscriber to a propagated key sends nothing further; the last release
// withdraws it everywhere.
func TestReferenceCounts(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, line(4), func(t *testing.T, n *network) {
		ctlSent := func() (sum uint64) {
			for _, sw := range n.sws {
				for _, l := range sw.Links() {
					sum += l.ControlSent
				}
			}
			return sum
		}
		before := ctlSent()
		a, b := open(t, n.sws[3], "a"), open(t, n.sws[3], "b")
		s1 := subscribe(t, a, `{type ⊑ Notice; zone == "hall"}`)
		first := ctlSent() - before
		assert.Equal(t, uint64(6), first, "a register and its acknowledgement on each of three links")
		s2 := subscribe(t, b, `{type ⊑ Notice; zone == "hall"}`)
		assert.Equal(t, first, ctlSent()-before, "a second subscriber to the key sends nothing")
		assert.Equal(t, 2, n.sws[3].Routes()[0].Refs)
		for i, want := range []int{0, 1, 1, 1} {
			assert.Len(t, n.sws[i].Routes(), want, "routes of sw%d", i)
		}

		require.NoError(t, s1.Cancel())
		assert.Equal(t, first, ctlSent()-before, "releasing one of two sends nothing")
		assert.Equal(t, 1, n.sws[3].Routes()[0].Refs)
		publish(t, open(t, n.sws[0], "pub"), &sion.Event{Type: "Notice", Attrs: attrs("zone", "hall")})
		n.flush()
		assert.Equal(t, 1, count(s2))

		before = ctlSent()
		require.NoError(t, s2.Cancel())
		require.Eventually(t, func() bool {
			for i := range n.sws {
				for _, l := range n.sws[i].Links() {
					if l.Proxies != 0 || l.Routes != 0 {
						return false
					}
				}
			}
			return true
		}, 10*time.Second, time.Millisecond, "the last release withdraws the key everywhere")
		assert.Equal(t, uint64(3), ctlSent()-before, "one release per link")
	})
}

// TestSubscriptionContract is S2's promise: an event published anywhere
// in scope right after Subscribe returned is delivered — 1000 of 1000
// tries at the far end of a line.
func TestSubscriptionContract(t *testing.T) {
	tries := 1000
	if testing.Short() {
		tries = 200
	}
	overTransports(t, sion.PlaceConfig{}, line(5), func(t *testing.T, n *network) {
		ctx := context.Background()
		s, pub := open(t, n.sws[4], "far"), open(t, n.sws[0], "pub")
		delivered := 0
		for k := range tries {
			sub := subscribe(t, s, fmt.Sprintf(`{type ⊑ Reading; n == %d}`, k))
			publish(t, pub, &sion.Event{Type: "Reading", Attrs: attrs("n", k)})
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			d, err := sub.Next(wctx)
			cancel()
			if err == nil && must(d.Event.Value("n")).Int() == int64(k) {
				delivered++
			}
			require.NoError(t, sub.Cancel())
		}
		assert.Equal(t, tries, delivered)
	})
}

// TestSubscriptionContractRemote: the contract holds for a remote
// session too (Dial to the far switch): Subscribe's round trip returns
// once the filter is active everywhere.
func TestSubscriptionContractRemote(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, line(4), func(t *testing.T, n *network) {
		ctx := context.Background()
		s, err := sion.Dial(ctx, n.tr, n.addrs[3], sion.SessionConfig{Name: "far"})
		require.NoError(t, err)
		defer s.Close()
		pub := open(t, n.sws[0], "pub")
		for k := range 200 {
			sub := subscribe(t, s, fmt.Sprintf(`{type ⊑ Reading; n == %d}`, k))
			publish(t, pub, &sion.Event{Type: "Reading", Attrs: attrs("n", k)})
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			d, err := sub.Next(wctx)
			cancel()
			require.NoError(t, err, "try %d", k)
			require.Equal(t, int64(k), must(d.Event.Value("n")).Int())
			require.NoError(t, sub.Cancel())
		}
	})
}

// fakePeer accepts one link on l and answers its handshake, then reads
// control messages and hands them to got without acknowledging anything:
// a switch that never installs what it is sent.
func fakePeer(t *testing.T, n *network, addr string) (<-chan linkctl.Message, string) {
	l, err := n.tr.Listen(addr)
	require.NoError(t, err)
	got := make(chan linkctl.Message, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		l.Close()
		<-done
	})
	go func() {
		defer close(done)
		conn, err := l.Accept(ctx)
		if err != nil {
			return
		}
		defer conn.Close()
		send := func(m wire.Message) {
			f, _ := wire.Encode(nil, m)
			conn.Send(ctx, f)
		}
		recv := func() wire.Message {
			f, err := conn.Recv(ctx)
			if err != nil {
				return nil
			}
			m, _ := wire.Decode(f, wire.DefaultLimits())
			return m
		}
		recv() // hello
		send(&wire.Welcome{Version: 1, Switch: "fake", Place: n.place.Name()})
		recv() // link request
		for _, m := range []linkctl.Message{&linkctl.LinkAccept{Switch: "fake"}, &linkctl.Synced{}} {
			f, _ := linkctl.Encode(m, wire.DefaultLimits())
			conn.Send(ctx, f)
		}
		for {
			m := recv()
			if m == nil {
				return
			}
			if c, ok := m.(*wire.Control); ok {
				if m, err := linkctl.Decode(c); err == nil {
					got <- m
				}
			}
		}
	}()
	return got, l.Addr().String()
}

// TestContractTimeoutRollsBack: a switch in scope that never acknowledges
// makes Subscribe fail with ErrNotGranted after the place's
// ContractTimeout, and what was installed is released.
func TestContractTimeoutRollsBack(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			tr, addr := tc.make(t)
			n := newNetwork(t, tr, addr, sion.PlaceConfig{ContractTimeout: 100 * time.Millisecond}, []int{-1})
			got, at := fakePeer(t, n, addr(1))
			n.addrs = append(n.addrs, at)
			n.parent = append(n.parent, -1)
			n.link(0, 1)
			assert.Equal(t, linkctl.KindSynced, (<-got).Kind())

			s := open(t, n.sws[0], "app")
			_, err := s.Subscribe(context.Background(), `{type ⊑ Alarm}`)
			require.ErrorIs(t, err, sion.ErrNotGranted)
			assert.Contains(t, err.Error(), `"fake" has not acknowledged`)
			reg, rel := <-got, <-got
			assert.Equal(t, linkctl.KindRegister, reg.Kind())
			assert.Equal(t, linkctl.KindRelease, rel.Kind(), "rolled back")
			assert.Empty(t, n.sws[0].Routes())
			assert.Equal(t, 0, n.sws[0].Stats().Subscriptions)

			// A context that ends first refuses it too.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err = s.Subscribe(ctx, `{type ⊑ Notice}`)
			require.ErrorIs(t, err, sion.ErrNotGranted)
			require.ErrorIs(t, err, context.Canceled)
		})
	}
}

// TestTreeRule: a switch makes at most one establishment request and
// accepts any number; every other request is refused with a clear error.
func TestTreeRule(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, []int{-1, 0, 0}, func(t *testing.T, n *network) {
		ctx := context.Background()
		_, err := n.sws[1].Link(ctx, n.tr, n.addrs[2], sion.LinkConfig{})
		require.ErrorIs(t, err, sion.ErrLinkRefused, "a second request from one switch")
		assert.Contains(t, err.Error(), "at most one establishment request")

		_, err = n.sws[0].Link(ctx, n.tr, n.addrs[1], sion.LinkConfig{})
		require.ErrorIs(t, err, sion.ErrLinkRefused, "linking to its own child closes a loop")

		// Another switch with the name of a linked child.
		twin, err := sion.NewSwitch(sion.SwitchConfig{Name: "sw1", Place: n.place})
		require.NoError(t, err)
		defer twin.Close()
		_, err = twin.Link(ctx, n.tr, n.addrs[0], sion.LinkConfig{})
		require.ErrorIs(t, err, sion.ErrLinkRefused)
		assert.Contains(t, err.Error(), `switch "sw1" has a shared link to "sw0" already`)

		// A switch of another place.
		other, err := sion.NewEventPlace(sion.PlaceConfig{Name: "elsewhere", Ontology: n.place.Ontology()})
		require.NoError(t, err)
		stranger, err := sion.NewSwitch(sion.SwitchConfig{Name: "x", Place: other})
		require.NoError(t, err)
		defer stranger.Close()
		_, err = stranger.Link(ctx, n.tr, n.addrs[0], sion.LinkConfig{})
		require.ErrorIs(t, err, sion.ErrLinkRefused)
		assert.Contains(t, err.Error(), `place "net"`)

		// The refusals harmed nothing.
		assert.Len(t, n.sws[0].Links(), 2)
		sub := subscribe(t, open(t, n.sws[2], "app"), `{type ⊑ Alarm}`)
		publish(t, open(t, n.sws[1], "pub"), &sion.Event{Type: "Alarm"})
		n.flush()
		assert.Equal(t, 1, count(sub))

		// Closing the link lets the switch request another.
		require.NoError(t, n.links[1].Close())
		require.NoError(t, n.links[1].Close(), "idempotent")
		n.link(1, 2)
		assert.Len(t, n.sws[1].Links(), 1)
	})
}

func TestLinkAdmission(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			tr, addr := tc.make(t)
			var mu sync.Mutex
			var asked []sion.AdmissionRequest
			n := newNetwork(t, tr, addr, sion.PlaceConfig{Admit: func(_ context.Context, r sion.AdmissionRequest) error {
				assert.NotNil(t, r.Remote, "a remote entity's address")
				r.Remote = nil
				mu.Lock()
				asked = append(asked, r)
				mu.Unlock()
				if r.Link && r.Session == "intruder" {
					return errors.New("not a member")
				}
				return nil
			}}, []int{-1, 0})
			intruder, err := sion.NewSwitch(sion.SwitchConfig{Name: "intruder", Place: n.place})
			require.NoError(t, err)
			defer intruder.Close()
			_, err = intruder.Link(context.Background(), n.tr, n.addrs[0], sion.LinkConfig{})
			require.ErrorIs(t, err, sion.ErrNotAdmitted)
			assert.Contains(t, err.Error(), "not a member")
			mu.Lock()
			assert.Equal(t, []sion.AdmissionRequest{
				{Place: "net", Switch: "sw0", Session: "sw1"}, {Place: "net", Switch: "sw0", Session: "sw1", Link: true},
				{Place: "net", Switch: "sw0", Session: "intruder"}, {Place: "net", Switch: "sw0", Session: "intruder", Link: true},
			}, asked)
			mu.Unlock()
			assert.Len(t, n.sws[0].Links(), 1)
		})
	}
}

// TestCaseB02LargeIntegersOneHop is B02's one-hop run: R1 ⇄ R2,
// subscriptions on R2, events published at R1.
func TestCaseB02LargeIntegersOneHop(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, []int{-1, 0}, func(t *testing.T, n *network) {
		s, pub := open(t, n.sws[1], "sub"), open(t, n.sws[0], "pub")
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
		n.flush()
		for i, sub := range subs {
			got := queued(sub)
			require.Len(t, got, 1, "S%d receives E1 once and never E2", i+1)
			assert.Equal(t, int64(9007199254740993), must(got[0].Event.Value("seq")).Int(), "seq is exact")
			assert.Equal(t, payload, string(got[0].Event.Data), "payload byte-identical")
			assert.Equal(t, 1, got[0].Event.Control.Hops)
		}
	})
}

// TestCaseB08OverlappingSubscriptionsOneHop: publisher on R1, P and Q on
// R2 (Q a remote session, another process's view); each delivery exactly
// once and each event crosses R1→R2 once.
func TestCaseB08OverlappingSubscriptionsOneHop(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, []int{-1, 0}, func(t *testing.T, n *network) {
		p, pub := open(t, n.sws[1], "P"), open(t, n.sws[0], "publisher")
		q, err := sion.Dial(context.Background(), n.tr, n.addrs[1], sion.SessionConfig{Name: "Q"})
		require.NoError(t, err)
		defer q.Close()
		h1 := subscribe(t, p, `{type ⊑ Changed}`)
		h2 := subscribe(t, p, `{type ⊑ Created}`)
		h3 := subscribe(t, p, `{type ⊑ *; entity == "role"}`)
		h4 := subscribe(t, q, `{type ⊑ Created}`)
		for _, e := range []*sion.Event{
			{Type: "Created", Attrs: attrs("entity", "role")},
			{Type: "Changed", Attrs: attrs("entity", "role")},
			{Type: "Created", Attrs: attrs("entity", "user")},
		} {
			publish(t, pub, e)
		}
		n.flush()
		require.NoError(t, q.Sync(context.Background()))
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
		l := n.sws[0].Links()
		require.Len(t, l, 1)
		assert.Equal(t, uint64(3), l[0].EventsSent, "3 event messages for 3 events")
	})
}

// TestCaseB11InterestAfterReestablishment: R1 ⇄ R2, R2 dials R1,
// publisher on R1. Case a: subscriptions made and cancelled while the
// link is down. Case b: a subscription at a random point of R1's restart,
// 50 times. By filter, and with covering and advertisement pruning (the
// publisher advertises after each restart: the subscriptions made while
// R1 was down must reach it then).
func TestCaseB11InterestAfterReestablishment(t *testing.T) {
	for _, cfg := range []sion.PlaceConfig{{}, {Covering: true}, {RequireAdvertisements: true, Covering: true}} {
		t.Run(fmt.Sprintf("covering=%v,advertisements=%v", cfg.Covering, cfg.RequireAdvertisements), func(t *testing.T) {
			checkB11(t, cfg)
		})
	}
}

func checkB11(t *testing.T, cfg sion.PlaceConfig) {
	overTransports(t, cfg, []int{-1, 0}, func(t *testing.T, n *network) {
		ctx := context.Background()
		restart := func() {
			require.NoError(t, n.sws[0].Close())
			require.Eventually(t, func() bool { st, _ := n.links[1].State(); return st == sion.LinkDown }, 10*time.Second, time.Millisecond)
			n.start(0, n.addrs[0])
		}
		up := func() {
			t.Helper()
			require.Eventually(t, func() bool { st, _ := n.links[1].State(); return st == sion.LinkUp }, 10*time.Second, time.Millisecond, "the link is re-established")
		}
		r2 := open(t, n.sws[1], "app")
		t.Run("a", func(t *testing.T) {
			require.NoError(t, n.sws[0].Close()) // stop R1
			require.Eventually(t, func() bool { st, _ := n.links[1].State(); return st == sion.LinkDown }, 10*time.Second, time.Millisecond)
			s1 := subscribe(t, r2, `{type ⊑ Alarm}`)
			s2 := subscribe(t, r2, `{type ⊑ Notice}`)
			require.NoError(t, s2.Cancel())
			n.start(0, n.addrs[0]) // start R1
			up()
			pub := publisher(t, n.sws[0], cfg)
			publish(t, pub, &sion.Event{Type: "Alarm"})
			publish(t, pub, &sion.Event{Type: "Notice"})
			n.flush()
			assert.Equal(t, 1, count(s1), "S1 receives the Alarm exactly once")
			assert.Equal(t, 0, count(s2))
			l := n.sws[0].Links()
			require.Len(t, l, 1)
			assert.Equal(t, uint64(1), l[0].EventsSent, "the Notice does not cross the link")
			require.NoError(t, s1.Cancel())
		})
		t.Run("b", func(t *testing.T) {
			rounds := 50
			if testing.Short() {
				rounds = 10
			}
			rng := rand.New(rand.NewPCG(11, 11))
			for k := 1; k <= rounds; k++ {
				restart()
				time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond) // the scenario's random offset, not a synchronisation
				s3, err := r2.Subscribe(ctx, fmt.Sprintf(`{type ⊑ Reading; n == %d}`, k))
				require.NoError(t, err)
				up()
				publish(t, publisher(t, n.sws[0], cfg), &sion.Event{Type: "Reading", Attrs: attrs("n", k)})
				n.flush()
				assert.Equal(t, 1, count(s3), "round %d", k)
				require.NoError(t, s3.Cancel())
			}
			assert.Equal(t, rounds+2, n.links[1].Establishments())
		})
	})
}

// publisher opens a session on sw that, where the place requires it,
// advertises what B11 publishes.
func publisher(t *testing.T, sw *sion.Switch, cfg sion.PlaceConfig) *sion.Session {
	t.Helper()
	pub := open(t, sw, "pub")
	if cfg.RequireAdvertisements {
		require.NoError(t, pub.Advertise(context.Background(), sion.Advertisement{Type: "Alarm"}, sion.Advertisement{Type: "Notice"}, sion.Advertisement{Type: "Reading"}))
	}
	return pub
}

// TestCaseB14SlowSubscriberAcrossLink is B14's variant: the publisher on
// R1, both subscriptions on R2; the link keeps flowing for S_fast.
func TestCaseB14SlowSubscriberAcrossLink(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, []int{-1, 0}, func(t *testing.T, n *network) {
		checkB14(t, open(t, n.sws[1], "app"), open(t, n.sws[0], "pub"))
	})
}

// TestMiddleSwitchRestart: the middle switch of a line goes away while
// events are published; once its child has re-linked, every event
// published reaches the far end.
func TestMiddleSwitchRestart(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, line(3), func(t *testing.T, n *network) {
		sub := subscribe(t, open(t, n.sws[2], "far"), `{type ⊑ Reading}`, sion.WithQueue(10000))
		pub := open(t, n.sws[0], "pub")
		stopPublishing := publishThrough(pub, 0) // through the outage
		require.NoError(t, n.sws[1].Close())
		n.start(1, n.addrs[1])
		n.link(1, 0)
		require.Eventually(t, func() bool { st, _ := n.links[2].State(); return st == sion.LinkUp }, 10*time.Second, time.Millisecond)
		after := stopPublishing() + 1
		for k := after; k < after+100; k++ {
			publish(t, pub, &sion.Event{Type: "Reading", Attrs: attrs("n", k)})
		}
		n.flush()
		got := map[int64]bool{}
		for _, d := range queued(sub) {
			got[must(d.Event.Value("n")).Int()] = true
		}
		for k := after; k < after+100; k++ {
			assert.True(t, got[int64(k)], "event %d published after the re-link", k)
		}
	})
}

// TestRegisterReleaseChurn: many goroutines subscribe and cancel the same
// filter at once; registers and releases of one key never overtake each
// other on a link, so at the end nothing is left anywhere, and one more
// subscription is installed exactly once at every switch.
func TestRegisterReleaseChurn(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, line(3), func(t *testing.T, n *network) {
		var wg sync.WaitGroup
		for g := range 8 {
			s := open(t, n.sws[2], fmt.Sprint("churn", g))
			wg.Go(func() {
				for range 100 {
					sub, err := s.Subscribe(context.Background(), `{type ⊑ Notice; zone == "hall"}`)
					if assert.NoError(t, err) {
						assert.NoError(t, sub.Cancel())
					}
				}
			})
		}
		wg.Wait()
		settled := func(want int) func() bool {
			return func() bool {
				for i := range n.sws {
					for _, l := range n.sws[i].Links() {
						if !l.Parent && l.Proxies != want {
							return false
						}
					}
				}
				return true
			}
		}
		require.Eventually(t, settled(0), 10*time.Second, time.Millisecond, "no proxy filter left behind")
		sub := subscribe(t, open(t, n.sws[2], "last"), `{type ⊑ Notice; zone == "hall"}`)
		require.Eventually(t, settled(1), 10*time.Second, time.Millisecond, "installed exactly once")
		publish(t, open(t, n.sws[0], "pub"), &sion.Event{Type: "Notice", Attrs: attrs("zone", "hall")})
		n.flush()
		assert.Equal(t, 1, count(sub))
	})
}

// TestRouteTTLGrows: one key per filter and link, registered with the
// largest TTL its subscriptions need; a subscription that needs more
// re-registers it further, under the same key, without a gap.
func TestRouteTTLGrows(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, line(4), func(t *testing.T, n *network) {
		s := open(t, n.sws[3], "app")
		near := subscribe(t, s, `{type ⊑ Alarm}`, sion.WithTTL(1))
		assert.Equal(t, []sion.RouteInfo{{Peer: "sw2", Filter: "{type ⊑ Alarm}", TTL: 0, Refs: 1, Acknowledged: true}}, n.sws[3].Routes())
		assert.Empty(t, n.sws[2].Routes(), "TTL 1: not past sw2")

		far := subscribe(t, s, `{type ⊑ Alarm}`, sion.WithTTL(3))
		assert.Equal(t, []sion.RouteInfo{{Peer: "sw2", Filter: "{type ⊑ Alarm}", TTL: 2, Refs: 2, Acknowledged: true}}, n.sws[3].Routes(), "one key, its TTL raised")
		assert.Equal(t, []sion.RouteInfo{{Peer: "sw1", Filter: "{type ⊑ Alarm}", TTL: 1, Refs: 1, Acknowledged: true}}, n.sws[2].Routes())
		assert.Equal(t, []sion.RouteInfo{{Peer: "sw0", Filter: "{type ⊑ Alarm}", TTL: 0, Refs: 1, Acknowledged: true}}, n.sws[1].Routes())
		for _, l := range n.sws[2].Links() {
			if l.Peer == "sw3" {
				assert.Equal(t, 1, l.Proxies, "the old proxy went out when the new one came in")
			}
		}
		publish(t, open(t, n.sws[0], "pub"), &sion.Event{Type: "FireAlarm"})
		n.flush()
		assert.Equal(t, 1, count(far), "the contract of the larger TTL holds at sw0")
		assert.Equal(t, 1, count(near), "the event is on sw3: every matching subscription there gets it")

		// Two subscribers at different distances share one key upstream.
		mid := subscribe(t, open(t, n.sws[2], "mid"), `{type ⊑ Alarm}`, sion.WithTTL(3))
		assert.Equal(t, []sion.RouteInfo{{Peer: "sw1", Filter: "{type ⊑ Alarm}", TTL: 2, Refs: 2, Acknowledged: true}, {Peer: "sw3", Filter: "{type ⊑ Alarm}", TTL: 2, Refs: 1, Acknowledged: true}}, n.sws[2].Routes())

		// Releases: the TTL is not lowered while the key is needed; the
		// last release withdraws it.
		require.NoError(t, far.Cancel())
		require.NoError(t, near.Cancel())
		require.NoError(t, mid.Cancel())
		require.Eventually(t, func() bool {
			for _, sw := range n.sws {
				if len(sw.Routes()) > 0 {
					return false
				}
			}
			return true
		}, 10*time.Second, time.Millisecond)
	})
}

// TestNoLoops: a request that would close a loop of any length is
// refused — the acceptor probes its ancestors — so the links stay a tree.
func TestNoLoops(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, line(4), func(t *testing.T, n *network) {
		// sw0 is the root; sw3 at the far end. sw0 asking sw3 for a link
		// would close sw0-sw1-sw2-sw3-sw0.
		_, err := n.sws[0].Link(context.Background(), n.tr, n.addrs[3], n.linkCfg)
		require.ErrorIs(t, err, sion.ErrLinkRefused)
		assert.Contains(t, err.Error(), `switch "sw0" is an ancestor of "sw3" (3 links up)`)
		// Still a tree: one event, one delivery.
		sub := subscribe(t, open(t, n.sws[3], "app"), `{type ⊑ Alarm}`)
		publish(t, open(t, n.sws[1], "pub"), &sion.Event{Type: "Alarm"})
		n.flush()
		assert.Equal(t, 1, count(sub))
		for _, sw := range n.sws {
			for _, l := range sw.Links() {
				assert.Zero(t, l.Duplicates, "no event went round")
			}
		}
	})
}

// TestEventsThatCannotCrossAreRefused: whatever Publish accepts fits a
// shared link; the largest events cross intact, larger ones are refused
// at Publish with ErrInvalidEvent instead of vanishing on the way.
func TestEventsThatCannotCrossAreRefused(t *testing.T) {
	overTransports(t, sion.PlaceConfig{AcceptUnknownTypes: true, MaxPayloadBytes: 4 << 20}, []int{-1, 0}, func(t *testing.T, n *network) {
		ctx := context.Background()
		sub := subscribe(t, open(t, n.sws[1], "app"), `{}`)
		pub := open(t, n.sws[0], "pub")
		big := strings.Repeat("x", 64<<10)
		payload := `{"blob":"` + strings.Repeat("y", 900<<10) + `"}`
		publish(t, pub, &sion.Event{Type: "Blob", Attrs: attrs("s", big), ContentType: "application/json", Data: []byte(payload)})
		n.flush()
		got := queued(sub)
		require.Len(t, got, 1, "the largest event crosses")
		assert.Equal(t, payload, string(got[0].Event.Data))
		assert.Equal(t, big, must(got[0].Event.Value("s")).Str())

		many := make([]ontology.Attr, 257)
		for i := range many {
			many[i] = ontology.Attr{Name: fmt.Sprint("a", i), Value: ontology.Int(int64(i))}
		}
		for name, ev := range map[string]*sion.Event{
			"a string over 64 KiB": {Type: "Blob", Attrs: attrs("s", big+"x")},
			"257 attributes":       {Type: "Blob", Attrs: many},
			"over 1 MiB in all":    {Type: "Blob", ContentType: "application/json", Data: []byte(`"` + strings.Repeat("z", 1<<20) + `"`)},
		} {
			err := pub.Publish(ctx, ev)
			require.ErrorIs(t, err, sion.ErrInvalidEvent, name)
			assert.Contains(t, err.Error(), "shared link", name)
		}
		for _, l := range n.sws[0].Links() {
			assert.Zero(t, l.Dropped)
		}
	})
}

// TestSimultaneousLinksNoLoop: switches that ask each other for links at
// the same moment (two, or three in a ring) do not close a loop: an
// acceptor whose own link is being set up waits for it, and refuses
// (retry later) if it does not come up.
func TestSimultaneousLinksNoLoop(t *testing.T) {
	for _, size := range []int{2, 3} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			tr, err := mem.NewNetwork(mem.Config{})
			require.NoError(t, err)
			roots := make([]int, size)
			for i := range roots {
				roots[i] = -1
			}
			n := newNetwork(t, tr, func(i int) string { return fmt.Sprintf("sw%d", i) }, sion.PlaceConfig{}, roots)
			errs := make([]error, size)
			var wg sync.WaitGroup
			for i := range size {
				wg.Go(func() {
					_, errs[i] = n.sws[i].Link(context.Background(), tr, n.addrs[(i+1)%size], n.linkCfg)
				})
			}
			wg.Wait()
			linked := 0
			for i, err := range errs {
				if err == nil {
					linked++
				} else {
					require.ErrorIs(t, err, sion.ErrLinkRefused, "sw%d", i)
				}
			}
			assert.Less(t, linked, size, "not all of a ring's requests can succeed")
			// Whatever formed is a tree: each event reaches each subscriber once.
			subs := make([]*sion.Subscription, size)
			for i := range size {
				subs[i] = subscribe(t, open(t, n.sws[i], "app"), `{type ⊑ Alarm}`)
			}
			for i := range size {
				publish(t, open(t, n.sws[i], "pub"), &sion.Event{Type: "Alarm"})
			}
			for _, sw := range n.sws {
				require.NoError(t, sw.Flush(context.Background()))
			}
			for i, sub := range subs {
				assert.LessOrEqual(t, count(sub), size, "sw%d", i)
			}
			for _, sw := range n.sws {
				assert.Zero(t, sw.Stats().Links.Duplicates, "no event went round a loop")
			}
		})
	}
}

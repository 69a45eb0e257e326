package sion_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
)

// consumerSubs returns the subscriptions of sw's sessions: not the proxy
// filters of its links (the constraints deployed there). Only while no
// agent changes them.
func consumerSubs(sw *sion.Switch) int {
	n := sw.Stats().Subscriptions
	for _, l := range sw.Links() {
		n -= l.Proxies
	}
	return n
}

// TestManagedNoAgentAndRestart: without an agent a subscription is not
// granted (ErrNotGranted once the place's ContractTimeout passes); an
// agent that starts while a Subscribe waits grants it; an agent that
// closes and starts again (the same name) learns the constraints the
// switches have, events keep flowing meanwhile, and it grants new
// subscriptions.
func TestManagedNoAgentAndRestart(t *testing.T) {
	ctx := context.Background()
	t.Run("no agent", func(t *testing.T) {
		n := newMnet(t, sion.PlaceConfig{ContractTimeout: 200 * time.Millisecond}, []int{-1, 0})
		s := open(t, n.sws[1], "c")
		_, err := s.Subscribe(ctx, `{type ⊑ Alarm}`)
		require.ErrorIs(t, err, sion.ErrNotGranted)
		assert.Zero(t, n.sws[1].Stats().Subscriptions, "the refused subscription is gone")
		p := open(t, n.sws[0], "p")
		err = p.Advertise(ctx, sion.Advertisement{Type: "Alarm"})
		require.ErrorIs(t, err, sion.ErrNotGranted)
		require.ErrorIs(t, p.Publish(ctx, &sion.Event{Type: "Alarm"}), sion.ErrNotAdvertised, "a refused advertisement is withdrawn")
	})
	t.Run("restart", func(t *testing.T) {
		// 0 — 1 — 2, producer at 0, consumers at 1 and 2.
		n := newMnet(t, sion.PlaceConfig{ContractTimeout: 20 * time.Second}, []int{-1, 0, 1})
		c := open(t, n.sws[2], "c")
		granted := make(chan error, 1)
		var sub *sion.Subscription
		go func() {
			var err error
			sub, err = c.Subscribe(ctx, `{type ⊑ Reading}`, sion.WithQueue(4096))
			granted <- err
		}()
		require.Eventually(t, func() bool { return consumerSubs(n.sws[2]) == 1 }, 10*time.Second, time.Millisecond)
		select {
		case err := <-granted:
			t.Fatalf("granted with no agent: %v", err)
		default:
		}
		n.startAgent("agent")
		require.NoError(t, <-granted, "the agent grants what waited for it")
		p := open(t, n.sws[0], "p")
		require.NoError(t, p.Advertise(ctx, sion.Advertisement{Type: "Reading"}))
		// The first agent deploys for a while: Alarm from 2 to 0, on and
		// off.
		p2 := open(t, n.sws[2], "p2")
		require.NoError(t, p2.Advertise(ctx, sion.Advertisement{Type: "Alarm"}))
		c3 := open(t, n.sws[0], "c3")
		for range 10 {
			require.NoError(t, subscribe(t, c3, `{type ⊑ Alarm}`).Cancel())
		}
		deployed := map[string][]string{"sw0→sw1": {"{type ⊑ *}"}, "sw1→sw2": {"{type ⊑ *}"}}
		n.settledAt(deployed)

		require.NoError(t, n.agent.Close())
		k := 0
		pub := func(count int) {
			for range count {
				k++
				publish(t, p, &sion.Event{Type: "Reading", Attrs: attrs("n", k)})
			}
		}
		pub(10)
		// Meanwhile a subscription waits for the next agent.
		c1 := open(t, n.sws[1], "c1")
		waiting := make(chan error, 1)
		var sub1 *sion.Subscription
		go func() {
			var err error
			sub1, err = c1.Subscribe(ctx, `{type ⊑ TempReading}`, sion.WithQueue(4096))
			waiting <- err
		}()
		require.Eventually(t, func() bool { return consumerSubs(n.sws[1]) == 1 }, 10*time.Second, time.Millisecond)

		a2 := n.startAgent("agent")
		require.NoError(t, <-waiting, "the new agent grants what waited")
		n.settled()
		assert.Equal(t, deployed, a2.Constraints(), "the new agent learned the deployed constraints")
		pub(10)
		publish(t, p, &sion.Event{Type: "TempReading", Attrs: attrs("n", 100)})
		n.flush(0)
		got := queued(sub)
		assert.Len(t, got, 21, "every event reached the consumer across the restart")
		got1 := queued(sub1)
		if assert.Len(t, got1, 1) {
			assert.Equal(t, "TempReading", got1[0].Event.Type)
		}
		// A new subscription, which needs a new constraint, is granted.
		sub3 := subscribe(t, c3, `{type ⊑ FireAlarm}`)
		n.settled()
		assert.Equal(t, []string{"{type ⊑ FireAlarm}"}, n.constraints()["sw2→sw1"])
		publish(t, p2, &sion.Event{Type: "KitchenFireAlarm"})
		publish(t, p2, &sion.Event{Type: "Alarm"})
		n.flush(2)
		got3 := queued(sub3)
		if assert.Len(t, got3, 1) {
			assert.Equal(t, "KitchenFireAlarm", got3[0].Event.Type)
		}
	})
}

// TestManagedAdmission: an agent goes through the switches' admission
// like any entity — the place's shared key, and Admit, which sees
// AdmissionRequest.Agent for its request to manage; a switch has one
// agent at a time; an agent is for managed places only, and a switch of
// a place that is not managed refuses one.
func TestManagedAdmission(t *testing.T) {
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef")
	agentPlace := func(t *testing.T, name string, key []byte) *sion.EventPlace {
		p, err := sion.NewEventPlace(sion.PlaceConfig{Name: name, Ontology: ont1(t), Routing: sion.RouteManaged, SharedKey: key})
		require.NoError(t, err)
		return p
	}
	start := func(t *testing.T, n *mnet, name string, place *sion.EventPlace) (*sion.Agent, error) {
		a, err := sion.StartAgent(ctx, sion.AgentConfig{Name: name, Place: place, Transport: n.tr, Switches: n.addrs})
		if err == nil {
			t.Cleanup(func() { require.NoError(t, a.Close()) })
		}
		return a, err
	}

	t.Run("shared key", func(t *testing.T) {
		n := newMnet(t, sion.PlaceConfig{SharedKey: key}, []int{-1, 0})
		_, err := start(t, n, "agent", agentPlace(t, "managed", []byte("fedcba9876543210fedcba9876543210")))
		require.ErrorIs(t, err, sion.ErrNotAdmitted)
		_, err = start(t, n, "agent", agentPlace(t, "managed", nil))
		require.ErrorIs(t, err, sion.ErrNotAdmitted)
		require.Eventually(t, func() bool { return n.sws[0].Stats().Refused > 0 }, 10*time.Second, time.Millisecond, "the refusal is counted")
		n.startAgent("agent")
		sub := subscribe(t, open(t, n.sws[1], "c"), `{type ⊑ Alarm}`)
		assert.NotNil(t, sub)
	})

	t.Run("Admit", func(t *testing.T) {
		var mu sync.Mutex
		var seen []sion.AdmissionRequest
		n := newMnet(t, sion.PlaceConfig{Admit: func(_ context.Context, req sion.AdmissionRequest) error {
			mu.Lock()
			seen = append(seen, req)
			mu.Unlock()
			if req.Agent && req.Session == "rogue" {
				return fmt.Errorf("no rogues")
			}
			return nil
		}}, []int{-1, 0})
		_, err := start(t, n, "rogue", n.place)
		require.ErrorIs(t, err, sion.ErrNotAdmitted)
		assert.Contains(t, err.Error(), "no rogues")
		n.startAgent("agent")
		mu.Lock()
		defer mu.Unlock()
		var agents []string
		for _, req := range seen {
			if req.Agent {
				agents = append(agents, req.Switch+" "+req.Session)
				assert.NotNil(t, req.Remote)
				assert.False(t, req.Link)
			}
		}
		assert.ElementsMatch(t, []string{"sw0 rogue", "sw1 rogue", "sw0 agent", "sw1 agent"}, agents)
	})

	t.Run("one agent at a time", func(t *testing.T) {
		n := newMnet(t, sion.PlaceConfig{}, []int{-1, 0})
		first := n.startAgent("first")
		_, err := start(t, n, "second", n.place)
		require.ErrorIs(t, err, sion.ErrLinkRefused)
		assert.Contains(t, err.Error(), `managed by agent "first"`)
		require.Eventually(t, func() bool { return first.Stats().Switches == 2 }, 10*time.Second, time.Millisecond, "the first agent keeps its switches")
		sub := subscribe(t, open(t, n.sws[1], "c"), `{type ⊑ Alarm}`)
		require.NoError(t, sub.Cancel())
		require.NoError(t, first.Close())
		// The switches learn that the first has gone when its connections
		// end at their side, after Close returned.
		var second *sion.Agent
		require.Eventually(t, func() bool {
			second, err = start(t, n, "second", n.place)
			return err == nil
		}, 10*time.Second, time.Millisecond, "once the first has gone: %v", err)
		n.agent = second
		subscribe(t, open(t, n.sws[0], "c"), `{type ⊑ Alarm}`)
	})

	t.Run("not managed", func(t *testing.T) {
		tr, err := mem.NewNetwork(mem.Config{})
		require.NoError(t, err)
		plain := newNetwork(t, tr, func(i int) string { return fmt.Sprintf("plain%d", i) }, sion.PlaceConfig{Name: "plain"}, []int{-1, 0})
		_, err = sion.StartAgent(ctx, sion.AgentConfig{Name: "agent", Place: plain.place, Transport: tr, Switches: plain.addrs})
		require.ErrorIs(t, err, sion.ErrInvalidConfig)
		// An agent that claims a managed place of the same name.
		_, err = sion.StartAgent(ctx, sion.AgentConfig{Name: "agent", Place: agentPlace(t, "plain", nil), Transport: tr, Switches: plain.addrs})
		require.ErrorIs(t, err, sion.ErrLinkRefused)
		assert.Contains(t, err.Error(), "not managed")
		// Nor does a managed switch take an agent of another place.
		n := newMnet(t, sion.PlaceConfig{}, []int{-1})
		_, err = sion.StartAgent(ctx, sion.AgentConfig{Name: "agent", Place: agentPlace(t, "other", nil), Transport: n.tr, Switches: n.addrs})
		require.ErrorIs(t, err, sion.ErrLinkRefused)
		// The places keep working.
		a, b := open(t, plain.sws[0], "a"), open(t, plain.sws[1], "b")
		sub := subscribe(t, b, `{type ⊑ Alarm}`)
		publish(t, a, &sion.Event{Type: "Alarm"})
		plain.flush()
		assert.Len(t, queued(sub), 1)
	})

	t.Run("config", func(t *testing.T) {
		n := newMnet(t, sion.PlaceConfig{}, []int{-1})
		for name, cfg := range map[string]sion.AgentConfig{
			"no place":     {Name: "a", Transport: n.tr, Switches: n.addrs},
			"no transport": {Name: "a", Place: n.place, Switches: n.addrs},
			"no switches":  {Name: "a", Place: n.place, Transport: n.tr},
			"no name":      {Place: n.place, Transport: n.tr, Switches: n.addrs},
			"newline":      {Name: "a\nb", Place: n.place, Transport: n.tr, Switches: n.addrs},
		} {
			_, err := sion.StartAgent(ctx, cfg)
			assert.ErrorIs(t, err, sion.ErrInvalidConfig, name)
		}
	})
}

// TestManagedAgentOfSomeSwitches: an agent that has not heard from a
// switch (not among its Switches, or not connected yet, as while it
// starts) knows neither its consumers nor its producers, so it keeps
// what the switches have deployed toward and from it; once it hears from
// the switch (AddSwitch), it narrows to the optimal constraints.
func TestManagedAgentOfSomeSwitches(t *testing.T) {
	ctx := context.Background()
	// 0 — 1 — 2 — 3, a producer of Reading at 0 and at 3, consumers at 1 and 2.
	n := newMnet(t, sion.PlaceConfig{}, line(4))
	first := n.startAgent("agent")
	p0, p3 := open(t, n.sws[0], "p0"), open(t, n.sws[3], "p3")
	require.NoError(t, p0.Advertise(ctx, sion.Advertisement{Type: "Reading"}))
	require.NoError(t, p3.Advertise(ctx, sion.Advertisement{Type: "Reading"}))
	c1 := subscribe(t, open(t, n.sws[1], "c1"), `{type ⊑ Reading; n > 1}`, sion.WithQueue(4096))
	c2 := subscribe(t, open(t, n.sws[2], "c2"), `{type ⊑ TempReading}`, sion.WithQueue(4096))
	deployed := map[string][]string{
		"sw0→sw1": {"{type ⊑ Reading; n > 1}", "{type ⊑ TempReading}"}, "sw1→sw2": {"{type ⊑ TempReading}"},
		"sw3→sw2": {"{type ⊑ Reading; n > 1}", "{type ⊑ TempReading}"}, "sw2→sw1": {"{type ⊑ Reading; n > 1}"},
	}
	n.settledAt(deployed)
	require.NoError(t, first.Close())

	// The next agent manages 1 and 2 only: it learns of 0 and 3 from
	// their links, and nothing else.
	a, err := sion.StartAgent(ctx, sion.AgentConfig{Name: "agent", Place: n.place, Transport: n.tr, Switches: n.addrs[1:3]})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	n.agent = a
	// 0 and 3 may have consumers that want everything; 1 and 2 forward
	// everything toward them (no constraint), and keep what they receive.
	managed := map[string][]string{"sw1→sw2": {"{type ⊑ *}"}, "sw2→sw1": {"{type ⊑ *}"}, "sw1→sw0": {"{type ⊑ *}"}, "sw2→sw3": {"{type ⊑ *}"}}
	all := maps.Clone(managed)
	all["sw0→sw1"], all["sw3→sw2"] = deployed["sw0→sw1"], deployed["sw3→sw2"] // unknown to the agent, and kept
	n.settledTo(managed, all)
	for k := range 4 {
		publish(t, p0, &sion.Event{Type: "TempReading", Attrs: attrs("n", k)})
		publish(t, p3, &sion.Event{Type: "TempReading", Attrs: attrs("n", k)})
	}
	n.flush(0, 3)
	assert.Len(t, queued(c1), 4, "n > 1 from 0 and 3")
	assert.Len(t, queued(c2), 8)

	require.NoError(t, a.AddSwitch(ctx, n.addrs[0]))
	require.NoError(t, a.AddSwitch(ctx, n.addrs[3]))
	n.settledAt(deployed)
}

// cutTransport dials through tr and can cut the connections to an
// address and refuse new ones until let through again.
type cutTransport struct {
	transport.Transport
	mu      sync.Mutex
	conns   map[string][]transport.Conn
	blocked map[string]bool
}

func (c *cutTransport) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blocked[addr] {
		return nil, fmt.Errorf("cut: %s is cut off", addr)
	}
	conn, err := c.Transport.Dial(ctx, addr)
	if err == nil {
		c.conns[addr] = append(c.conns[addr], conn)
	}
	return conn, err
}

// cut closes the connections to addr and refuses new ones.
func (c *cutTransport) cut(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blocked[addr] = true
	for _, conn := range c.conns[addr] {
		conn.Close()
	}
	c.conns[addr] = nil
}

func (c *cutTransport) mend(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blocked[addr] = false
}

// TestManagedAgentLosesASwitch: the agent's connection to a switch ends
// while the switch and its links stay up. Events keep flowing under the
// constraints deployed; a change that only narrows what the switch
// forwards waits for it (and keeps nobody waiting); a subscription whose
// deployment needs the switch waits for it and is granted once the agent
// is connected again.
func TestManagedAgentLosesASwitch(t *testing.T) {
	ctx := context.Background()
	// 0 — 1 — 2, Reading from 0.
	n := newMnet(t, sion.PlaceConfig{}, line(3))
	ct := &cutTransport{Transport: n.tr, conns: map[string][]transport.Conn{}, blocked: map[string]bool{}}
	n.agentTr = ct
	n.startAgent("agent")
	p := open(t, n.sws[0], "p")
	require.NoError(t, p.Advertise(ctx, sion.Advertisement{Type: "Reading"}))
	c2 := open(t, n.sws[2], "c2")
	big := subscribe(t, c2, `{type ⊑ Reading; n > 5}`, sion.WithQueue(4096))
	small := subscribe(t, c2, `{type ⊑ Reading; n > 8}`, sion.WithQueue(4096))
	both := map[string][]string{"sw0→sw1": {"{type ⊑ Reading; n > 5}"}, "sw1→sw2": {"{type ⊑ Reading; n > 5}"}}
	n.settledAt(both)

	ct.cut(n.addrs[1])
	require.Eventually(t, func() bool { return n.agent.Stats().Switches == 2 }, 10*time.Second, time.Millisecond)
	for k := range 10 {
		publish(t, p, &sion.Event{Type: "Reading", Attrs: attrs("n", k)})
	}
	n.flush(0)
	assert.Len(t, queued(big), 4, "the constraints stay deployed")
	assert.Len(t, queued(small), 1)

	// Narrowing: sw0's filter narrows; sw1's waits for the agent.
	require.NoError(t, big.Cancel())
	n.settledTo(map[string][]string{"sw0→sw1": {"{type ⊑ Reading; n > 8}"}, "sw1→sw2": {"{type ⊑ Reading; n > 5}"}},
		map[string][]string{"sw0→sw1": {"{type ⊑ Reading; n > 8}"}, "sw1→sw2": {"{type ⊑ Reading; n > 5}"}})
	// A subscription that needs sw1 waits; the agent connects again, and
	// grants it.
	granted := make(chan error, 1)
	var wide *sion.Subscription
	go func() {
		var err error
		wide, err = c2.Subscribe(ctx, `{type ⊑ Reading; n > 2}`, sion.WithQueue(4096))
		granted <- err
	}()
	require.Eventually(t, func() bool { return n.agent.Stats().Deployments > 0 && len(n.deployments()) > 0 && inFlight(n) }, 10*time.Second, time.Millisecond)
	ct.mend(n.addrs[1])
	require.NoError(t, <-granted)
	want := map[string][]string{"sw0→sw1": {"{type ⊑ Reading; n > 2}"}, "sw1→sw2": {"{type ⊑ Reading; n > 2}"}}
	n.settledAt(want)
	for k := range 10 {
		publish(t, p, &sion.Event{Type: "Reading", Attrs: attrs("n", k)})
	}
	n.flush(0)
	assert.Len(t, queued(wide), 7)
	assert.Len(t, queued(small), 1)
}

// inFlight reports whether a deployment answering a request is in
// flight: the agent has counted more deployments than have ended.
func inFlight(n *mnet) bool {
	return n.agent.Stats().Deployments > uint64(len(n.deployments()))
}

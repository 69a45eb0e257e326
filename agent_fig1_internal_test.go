package sion

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// S2's Fig. 1 is not in the text we have, only its description: producers
// P1–P4, interconnect nodes N1–N4, consumers C1–C3, and filters F1–F10
// "that filter events passed from each node to downstream links", of
// which "the downstream filters viewed from F2 are F5, F8, F9, F6, and
// F10". The network below is the smallest one that text fits, in sion's
// terms: P1–P4 and N1–N4 are switches (a producer is a node with its own
// filter, F1–F4, on its link to the network); C1 and C2 are consumer
// sessions on N3 and C3 on N4, so F8–F10 are their consumer filters;
// F5 = N1→N3, F6 = N1→N4, F7 = N2→N3. Downstream of F2 (P2→N1) are then
// F5 and, behind it on N3, F8 and F9, and F6 and, behind it on N4, F10 —
// the text's list, in its order (depth first). sion's links carry events
// both ways, so each link has a second direction the figure does not
// draw (N3→N1, …); nothing a consumer wants flows that way here, and
// those filters pass nothing.
type fig1 struct {
	t     *testing.T
	tr    *mem.Network
	place *EventPlace
	sw    map[string]*Switch
	addrs []string
	agent *Agent
	deps  chan Deployment
	// atRecord: what Agent.Constraints returned when each deployment's
	// record was given to OnDeployment, by deployment ID.
	atRecordMu sync.Mutex
	atRecord   map[uint64]map[string][]string
	prod       map[string]*Session
	c1, c2     *Session
	c3         *Session
}

var fig1Links = [][2]string{{"P1", "N1"}, {"P2", "N1"}, {"P3", "N2"}, {"P4", "N2"}, {"N3", "N1"}, {"N4", "N1"}, {"N2", "N3"}}

// The producers' types: P1 Reading, P2 Alarm, P3 Notice, P4 Changed.
var fig1Types = map[string]string{"P1": "Reading", "P2": "Alarm", "P3": "Notice", "P4": "Changed"}

func fig1Ontology(t *testing.T) *ontology.Ontology {
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "Event"},
		{Name: "Reading", Parents: []string{"Event"}, Attributes: []ontology.Attribute{{Name: "n", Kind: ontology.KindInt}}},
		{Name: "Alarm", Parents: []string{"Event"}, Attributes: []ontology.Attribute{{Name: "n", Kind: ontology.KindInt}}},
		{Name: "Notice", Parents: []string{"Event"}, Attributes: []ontology.Attribute{{Name: "n", Kind: ontology.KindInt}}},
		{Name: "Changed", Parents: []string{"Event"}, Attributes: []ontology.Attribute{{Name: "n", Kind: ontology.KindInt}}},
	})
	require.NoError(t, err)
	return o
}

// newFig1 starts the network with C2's subscription to Notice and C3's to
// Reading granted, and the agent.
func newFig1(t *testing.T, timeout time.Duration) *fig1 {
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	place, err := NewEventPlace(PlaceConfig{Name: "fig1", Ontology: fig1Ontology(t), Routing: RouteManaged, ContractTimeout: 10 * time.Second})
	require.NoError(t, err)
	f := &fig1{t: t, tr: tr, place: place, sw: map[string]*Switch{}, deps: make(chan Deployment, 64), atRecord: map[uint64]map[string][]string{}, prod: map[string]*Session{}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, name := range []string{"N1", "N2", "N3", "N4", "P1", "P2", "P3", "P4"} {
		sw := activeSwitch(t, tr, place, name)
		f.sw[name] = sw
		f.addrs = append(f.addrs, name)
	}
	for _, l := range fig1Links {
		_, err := f.sw[l[0]].Link(ctx, tr, l[1], LinkConfig{})
		require.NoError(t, err, "link %s to %s", l[0], l[1])
	}
	var agent atomic.Pointer[Agent]
	f.agent, err = StartAgent(ctx, AgentConfig{Name: "agent", Place: place, Transport: tr, Switches: f.addrs, Timeout: timeout,
		OnDeployment: func(d Deployment) {
			if a := agent.Load(); a != nil {
				f.atRecordMu.Lock()
				f.atRecord[d.ID] = a.Constraints()
				f.atRecordMu.Unlock()
			}
			f.deps <- d
		}})
	require.NoError(t, err)
	agent.Store(f.agent)
	t.Cleanup(func() { require.NoError(t, f.agent.Close()) })
	for p, typ := range fig1Types {
		s, err := f.sw[p].Open(ctx, SessionConfig{Name: p})
		require.NoError(t, err)
		require.NoError(t, s.Advertise(ctx, Advertisement{Type: typ}))
		f.prod[p] = s
	}
	f.c1 = f.open("N3", "C1")
	f.c2 = f.open("N3", "C2")
	f.c3 = f.open("N4", "C3")
	_, err = f.c2.Subscribe(ctx, "{type ⊑ Notice}")
	require.NoError(t, err)
	_, err = f.c3.Subscribe(ctx, "{type ⊑ Reading}")
	require.NoError(t, err)
	f.drain()
	return f
}

func (f *fig1) open(sw, name string) *Session {
	s, err := f.sw[sw].Open(context.Background(), SessionConfig{Name: name})
	require.NoError(f.t, err)
	return s
}

// drain forgets the deployments recorded so far.
func (f *fig1) drain() {
	for {
		select {
		case <-f.deps:
		default:
			return
		}
	}
}

// next returns the next deployment that answered a request.
func (f *fig1) next() Deployment {
	f.t.Helper()
	for {
		select {
		case d := <-f.deps:
			if len(d.Requests) > 0 {
				return d
			}
		case <-time.After(10 * time.Second):
			f.t.Fatal("no deployment answered the request")
		}
	}
}

// agentAtRecord returns what Agent.Constraints returned when the record
// of deployment id was given to OnDeployment.
func (f *fig1) agentAtRecord(id uint64) map[string][]string {
	f.atRecordMu.Lock()
	defer f.atRecordMu.Unlock()
	return f.atRecord[id]
}

// constraints returns what every switch forwards over each of its links,
// by direction ("X→Y"), read from the switches.
func (f *fig1) constraints() map[string][]string {
	out := map[string][]string{}
	for name, sw := range f.sw {
		for peer, fs := range sw.Constraints() {
			out[name+"→"+peer] = fs
		}
	}
	return out
}

// filterNames maps the figure's names to sion's model filters.
var fig1Names = map[string]string{
	"F1": "P1→N1", "F2": "P2→N1", "F3": "P3→N2", "F4": "P4→N2",
	"F5": "N1→N3", "F6": "N1→N4", "F7": "N2→N3",
}

func TestFig1DownstreamOfF2(t *testing.T) {
	f := newFig1(t, 2*time.Second)
	f.agent.mu.Lock()
	md := f.agent.md
	adj := md.adjacency()
	var figure []string
	for _, d := range md.downstream(adj, md.dirs[dirKey{"P2", "N1"}]) {
		name := d.name
		switch name {
		case "N3/C1":
			name = "F8"
		case "N3/C2":
			name = "F9"
		case "N4/C3":
			name = "F10"
		}
		for fig, n := range fig1Names {
			if n == name {
				name = fig
			}
		}
		if name[0] == 'F' {
			figure = append(figure, name)
		}
	}
	f.agent.mu.Unlock()
	// C1 has no subscription yet, so no consumer filter: F8 appears once
	// C1 subscribes (below, TestFig1Grant).
	assert.ElementsMatch(t, []string{"F5", "F9", "F6", "F10"}, figure)
}

func TestFig1Grant(t *testing.T) {
	f := newFig1(t, 2*time.Second)
	before := f.constraints()
	ctx := context.Background()
	sub, err := f.c1.Subscribe(ctx, "{type ⊑ Alarm}")
	require.NoError(t, err)
	d := f.next()
	require.True(t, d.Granted, "%+v", d)
	assert.Equal(t, []string{"P2→N1", "N1→N3"}, sortedLike(d.SetA, "P2→N1", "N1→N3"), "set A")
	c1 := "N3/C1"
	byName := map[string]DeploymentFilter{}
	var names []string
	for _, b := range d.SetB {
		byName[b.Name] = b
		names = append(names, b.Name)
	}
	assert.ElementsMatch(t, []string{"P2→N1", "N1→N3", c1}, names, "set B: F2, F5 and F8")
	// Procedure A: F2's downstream filters of set B are F5 and F8; F5's
	// is F8. Bags: F2 {}, F5 {F2}, F8 {F2, F5}; send flags F2 and F5.
	assert.Empty(t, byName["P2→N1"].Bag)
	assert.Equal(t, []string{"P2→N1"}, byName["N1→N3"].Bag)
	assert.ElementsMatch(t, []string{"P2→N1", "N1→N3"}, byName[c1].Bag)
	assert.True(t, byName["P2→N1"].Send)
	assert.True(t, byName["N1→N3"].Send)
	assert.False(t, byName[c1].Send)
	assert.False(t, byName["P2→N1"].Confirmed, "an empty bag activates at once and confirms nothing")
	assert.True(t, byName["N1→N3"].Confirmed)
	assert.True(t, byName[c1].Confirmed)
	assert.Equal(t, []string{passAll}, byName["P2→N1"].Constraint, "F2: everything P2 makes is wanted — no constraint")
	assert.Equal(t, []string{"{type ⊑ Alarm}"}, byName["N1→N3"].Constraint)

	// The deployed constraints are the optimal ones, at the switches.
	after := f.constraints()
	want := map[string][]string{
		"P1→N1": {passAll},            // F1: C3 wants all P1 makes
		"P2→N1": {passAll},            // F2
		"P3→N2": {passAll},            // F3: C2 wants all P3 makes
		"N1→N3": {"{type ⊑ Alarm}"},   // F5
		"N1→N4": {"{type ⊑ Reading}"}, // F6
		"N2→N3": {"{type ⊑ Notice}"},  // F7: not P4's Changed
	}
	assert.Equal(t, want, after)
	// The agent says so from the end of the deployment on: when its
	// record is given, and so when its verdict wakes the subscriber. (It
	// published them only after it had sent both and started its next
	// deployment, so this read, woken by both, raced with it.)
	assert.Equal(t, want, f.agentAtRecord(d.ID), "Agent.Constraints when the record was given")
	assert.Equal(t, want, f.agent.Constraints())
	delete(after, "P2→N1")
	delete(after, "N1→N3")
	delete(before, "P2→N1")
	assert.Equal(t, before, after, "nothing else changed")

	// The contract: what is published now reaches exactly who wants it,
	// and crosses no link it need not.
	for p, typ := range fig1Types {
		require.NoError(t, f.prod[p].Publish(ctx, &Event{Type: typ, Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(1)}}}))
	}
	got := recvAll(t, sub, 1)
	assert.Equal(t, "Alarm", got[0].Event.Type)
}

func TestFig1TimerRefusesAndRollsBack(t *testing.T) {
	f := newFig1(t, 300*time.Millisecond)
	ctx := context.Background()
	alarm, err := f.c1.Subscribe(ctx, "{type ⊑ Alarm}")
	require.NoError(t, err)
	f.next()
	before := f.constraints()
	subsBefore := f.sw["N3"].Stats().Subscriptions
	// N1 holds its bleeders: F5 (N1→N3) activates but its bleeder never
	// reaches C1's filter, whose confirm flag stays unset.
	f.sw["N1"].routing.(*managedSwitch).hold.Store(true)
	_, err = f.c1.Subscribe(ctx, "{type ⊑ Reading}")
	require.ErrorIs(t, err, ErrNotGranted)
	d := f.next()
	assert.False(t, d.Granted)
	require.Error(t, d.Err)
	assert.Equal(t, []string{"N1→N3"}, d.SetA)
	for _, b := range d.SetB {
		if b.Name == "N1→N3" {
			assert.Equal(t, []string{passAll}, b.Constraint, "Reading and Alarm are all N1's side makes")
			assert.True(t, b.Send)
			assert.Empty(t, b.Bag)
		} else {
			assert.Equal(t, []string{"N1→N3"}, b.Bag)
			assert.False(t, b.Confirmed)
		}
	}
	// Everything rolled back: the constraints, and the subscription.
	require.Eventually(t, func() bool { return equalMaps(before, f.constraints()) }, 5*time.Second, 5*time.Millisecond, "before %v, now %v", before, f.constraints())
	assert.Equal(t, before, f.agent.Constraints())
	assert.Equal(t, subsBefore, f.sw["N3"].Stats().Subscriptions)
	// The contract granted before still holds.
	require.NoError(t, f.prod["P2"].Publish(ctx, &Event{Type: "Alarm"}))
	require.NoError(t, f.prod["P1"].Publish(ctx, &Event{Type: "Reading"}))
	got := recvAll(t, alarm, 1)
	assert.Equal(t, "Alarm", got[0].Event.Type)
}

func recvAll(t *testing.T, sub *Subscription, n int) []Delivery {
	t.Helper()
	var out []Delivery
	for len(out) < n {
		select {
		case d := <-sub.C():
			out = append(out, d)
		case <-time.After(5 * time.Second):
			t.Fatalf("got %d deliveries, want %d", len(out), n)
		}
	}
	select {
	case d := <-sub.C():
		t.Fatalf("an extra delivery: %v", d.Event.Type)
	case <-time.After(50 * time.Millisecond):
	}
	return out
}

func equalMaps(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || len(v) != len(w) {
			return false
		}
		for i := range v {
			if v[i] != w[i] {
				return false
			}
		}
	}
	return true
}

// sortedLike returns the elements of got in the order of want, the
// others after.
func sortedLike(got []string, want ...string) []string {
	var out []string
	for _, w := range want {
		for _, g := range got {
			if g == w {
				out = append(out, g)
			}
		}
	}
	for _, g := range got {
		found := false
		for _, w := range want {
			found = found || g == w
		}
		if !found {
			out = append(out, g)
		}
	}
	return out
}

// TestCaseB28ManagedRefusalRollsBack is B28 in a managed place: a
// subscription the agent's timer refuses (N1 holds its bleeders), and one
// whose caller gives up (its context ends) before the verdict, leave no
// constraint and no reference anywhere; an event of its type crosses no
// link and reaches nobody; subscribed again, it receives the next event
// exactly once.
func TestCaseB28ManagedRefusalRollsBack(t *testing.T) {
	f := newFig1(t, 300*time.Millisecond)
	ctx := context.Background()
	before := f.constraints()
	sentN1N3 := func() uint64 {
		for _, l := range f.sw["N1"].Links() {
			if l.Peer == "N3" {
				return l.EventsSent
			}
		}
		return 0
	}
	n1 := f.sw["N1"].routing.(*managedSwitch)

	n1.hold.Store(true)
	_, err := f.c1.Subscribe(ctx, "{type ⊑ Reading}")
	require.ErrorIs(t, err, ErrNotGranted)
	n1.hold.Store(false)
	require.Eventually(t, func() bool { return equalMaps(before, f.constraints()) }, 5*time.Second, 5*time.Millisecond)

	// The caller gives up before the verdict: the subscription is taken
	// out, and the constraints come back to what they were.
	n1.hold.Store(true)
	gone, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = f.c1.Subscribe(gone, "{type ⊑ Reading}")
	cancel()
	require.ErrorIs(t, err, ErrNotGranted)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	n1.hold.Store(false)
	require.Eventually(t, func() bool { return equalMaps(before, f.constraints()) }, 5*time.Second, 5*time.Millisecond)
	assert.Zero(t, f.c1.subsLen(), "C1 holds no subscription")

	sent := sentN1N3()
	require.NoError(t, f.prod["P1"].Publish(ctx, &Event{Type: "Reading", Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(1)}}}))
	require.NoError(t, f.sw["P1"].Flush(ctx))
	require.NoError(t, f.sw["N1"].Flush(ctx))
	assert.Equal(t, sent, sentN1N3(), "the Reading does not cross N1→N3")

	sub, err := f.c1.Subscribe(ctx, "{type ⊑ Reading}")
	require.NoError(t, err)
	require.NoError(t, f.prod["P1"].Publish(ctx, &Event{Type: "Reading", Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(2)}}}))
	got := recvAll(t, sub, 1)
	v, _ := got[0].Event.Value("n")
	assert.Equal(t, int64(2), v.Int())
}

func (s *Session) subsLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// TestManagedLinkFlap: a managed link that fails and is re-established
// by itself comes back with no network filter on either end; the agent
// hears both ends report it and deploys its constraints again, so the
// granted contract across it holds for what is published after.
// (Found by the new-user trial: the agent kept the old constraint as
// deployed and deployed nothing.)
func TestManagedLinkFlap(t *testing.T) {
	f := newFig1(t, 2*time.Second)
	ctx := context.Background()
	sub, err := f.c1.Subscribe(ctx, "{type ⊑ Alarm}")
	require.NoError(t, err)
	want := f.constraints()
	require.Equal(t, []string{"{type ⊑ Alarm}"}, want["N1→N3"])
	old := routerTo(t, f.sw["N3"], "N1")
	old.conn.Close() // N3 requested the link: it re-establishes it
	require.Eventually(t, func() bool {
		f.sw["N3"].routeMu.Lock()
		defer f.sw["N3"].routeMu.Unlock()
		for _, r := range f.sw["N3"].routers {
			if r.peer == "N1" && r != old {
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "the link comes back")
	require.Eventually(t, func() bool { return equalMaps(want, f.constraints()) }, 10*time.Second, 5*time.Millisecond,
		"the agent deploys the link's constraints again: want %v, have %v", want, f.constraints())
	require.NoError(t, f.prod["P2"].Publish(ctx, &Event{Type: "Alarm"}))
	got := recvAll(t, sub, 1)
	assert.Equal(t, "Alarm", got[0].Event.Type)
}

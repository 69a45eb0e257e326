package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// fig1 walks through S2's Fig. 1 step by step in a managed place
// (sion.RouteManaged): producers P1–P4 and nodes N1–N4 are switches
// (F1–F4 are the producers' links to the network, F5 = N1→N3, F6 =
// N1→N4, F7 = N2→N3), consumers C1 and C2 are sessions on N3 and C3 on N4
// (F8–F10 are their consumer filters), so that the filters downstream of
// F2 are F5, F8, F9, F6 and F10, as the source says. C2 and C3 hold
// contracts already; C1 subscribes to what P2 makes, and the agent's
// deployment record is printed: set A, set B with each filter's bag, send
// flag and confirm flag, the grant, and the constraints deployed. It
// reports whether the contract was granted and C1 receives P2's event.
func fig1(ctx context.Context, _ options) (bool, error) {
	o, err := ontology.New([]ontology.TypeDef{
		{Name: "event"},
		{Name: "reading", Parents: []string{"event"}},
		{Name: "alarm", Parents: []string{"event"}},
		{Name: "notice", Parents: []string{"event"}},
		{Name: "change", Parents: []string{"event"}},
	})
	if err != nil {
		return false, err
	}
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "fig1", Ontology: o, Routing: sion.RouteManaged})
	if err != nil {
		return false, err
	}
	tr, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		return false, err
	}
	names := []string{"N1", "N2", "N3", "N4", "P1", "P2", "P3", "P4"}
	sws := map[string]*sion.Switch{}
	var served []chan error
	defer func() {
		for i, n := range names {
			if sw := sws[n]; sw != nil {
				sw.Close()
				<-served[i]
			}
		}
	}()
	for _, n := range names {
		sw, err := sion.NewSwitch(sion.SwitchConfig{Name: n, Place: place})
		if err != nil {
			return false, err
		}
		l, err := tr.Listen(n)
		if err != nil {
			return false, err
		}
		ch := make(chan error, 1)
		go func() { ch <- sw.Serve(context.Background(), l) }()
		sws[n], served = sw, append(served, ch)
	}
	for _, l := range [][2]string{{"P1", "N1"}, {"P2", "N1"}, {"P3", "N2"}, {"P4", "N2"}, {"N3", "N1"}, {"N4", "N1"}, {"N2", "N3"}} {
		if _, err := sws[l[0]].Link(ctx, tr, l[1], sion.LinkConfig{}); err != nil {
			return false, err
		}
	}
	deps := make(chan sion.Deployment, 16)
	agent, err := sion.StartAgent(ctx, sion.AgentConfig{Name: "agent", Place: place, Transport: tr, Switches: names,
		OnDeployment: func(d sion.Deployment) { deps <- d }})
	if err != nil {
		return false, err
	}
	defer agent.Close()
	open := func(sw, name string) (*sion.Session, error) {
		return sws[sw].Open(ctx, sion.SessionConfig{Name: name})
	}
	prod := map[string]*sion.Session{}
	for p, typ := range map[string]string{"P1": "reading", "P2": "alarm", "P3": "notice", "P4": "change"} {
		s, err := open(p, p)
		if err != nil {
			return false, err
		}
		if err := s.Advertise(ctx, sion.Advertisement{Type: typ}); err != nil {
			return false, err
		}
		prod[p] = s
	}
	c1, err := open("N3", "C1")
	if err != nil {
		return false, err
	}
	for _, c := range []struct{ sw, name, filter string }{{"N3", "C2", "{type ⊑ notice}"}, {"N4", "C3", "{type ⊑ reading}"}} {
		s, err := open(c.sw, c.name)
		if err != nil {
			return false, err
		}
		if _, err := s.Subscribe(ctx, c.filter); err != nil {
			return false, err
		}
	}
	for len(deps) > 0 {
		<-deps
	}

	fmt.Println("fig. 1: F1–F4 = P1→N1, P2→N1, P3→N2, P4→N2; F5 = N1→N3, F6 = N1→N4, F7 = N2→N3; F8, F9 = C1, C2 on N3; F10 = C3 on N4")
	fmt.Println("fig. 1: C2 holds {type ⊑ notice} (P3's), C3 {type ⊑ reading} (P1's); C1 subscribes to {type ⊑ alarm} (P2's)")
	start := time.Now()
	sub, err := c1.Subscribe(ctx, "{type ⊑ alarm}")
	if err != nil {
		return false, err
	}
	var d sion.Deployment
	for d = <-deps; len(d.Requests) == 0; d = <-deps {
	}
	figName := map[string]string{"P1→N1": "F1", "P2→N1": "F2", "P3→N2": "F3", "P4→N2": "F4", "N1→N3": "F5", "N1→N4": "F6", "N2→N3": "F7", "N3/C1": "F8", "N3/C2": "F9", "N4/C3": "F10"}
	label := func(n string) string {
		if f := figName[n]; f != "" {
			return f + " (" + n + ")"
		}
		return n
	}
	// In the figure's order: F2 before F5 before F8.
	byFig := func(a, b string) int {
		na, nb := 99, 99
		fmt.Sscanf(figName[a], "F%d", &na)
		fmt.Sscanf(figName[b], "F%d", &nb)
		return na - nb
	}
	slices.SortFunc(d.SetA, byFig)
	slices.SortFunc(d.SetB, func(a, b sion.DeploymentFilter) int { return byFig(a.Name, b.Name) })
	var setA []string
	for _, n := range d.SetA {
		setA = append(setA, label(n))
	}
	fmt.Printf("fig. 1: the deployment answers %q\n", d.Requests)
	fmt.Printf("fig. 1: set A: %s\n", strings.Join(setA, ", "))
	for _, f := range d.SetB {
		slices.SortFunc(f.Bag, byFig)
		bag := make([]string, len(f.Bag))
		for i, b := range f.Bag {
			bag[i] = figName[b]
		}
		line := fmt.Sprintf("fig. 1: set B: %-14s send flag %-5v bag {%s}  confirm flag %v", label(f.Name), f.Send, strings.Join(bag, ", "), f.Confirmed)
		if f.Constraint != nil || f.Old != nil {
			line += fmt.Sprintf("  constraint %v → %v", f.Old, f.Constraint)
		}
		fmt.Println(line)
	}
	for _, f := range d.SetB {
		step := "activated at once"
		if len(f.Bag) > 0 {
			var from []string
			for _, b := range f.Bag {
				from = append(from, figName[b])
			}
			step = "waited for the bleeders of " + strings.Join(from, " and ") + ", then activated"
			if f.Confirmed {
				step += " and sent \"all bleeders detected\""
			}
		}
		if f.Send {
			step += "; sent its bleeder downstream"
		}
		fmt.Printf("fig. 1: %s %s\n", figName[f.Name], step)
	}
	if !d.Granted {
		fmt.Printf("fig. 1: refused: %v\n", d.Err)
		return false, nil
	}
	fmt.Printf("fig. 1: granted after %v\n", time.Since(start).Round(time.Millisecond))
	deployed := agent.Constraints()
	dirs := slices.Sorted(maps.Keys(deployed))
	slices.SortStableFunc(dirs, byFig)
	for _, n := range dirs {
		fmt.Printf("fig. 1: constraint %s: %v\n", label(n), deployed[n])
	}
	if err := prod["P2"].Publish(ctx, &sion.Event{Type: "alarm"}); err != nil {
		return false, err
	}
	select {
	case dl := <-sub.C():
		fmt.Printf("fig. 1: C1 received P2's %s\n", dl.Event.Type)
		return true, nil
	case <-time.After(10 * time.Second):
		fmt.Println("fig. 1: C1 did not receive P2's event")
		return false, nil
	}
}

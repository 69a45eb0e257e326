package main

import (
	"context"

	"github.com/sion-go/sion"
)

// mode is one row of the comparison table (issue 17, item 6): one way of
// routing the same place, run on the same workload.
type mode struct {
	// name is printed as "mode NAME:"; .ci/run greps for it.
	name string
	// configure sets the mode's fields of the place's configuration;
	// Name, Ontology and TTL are set already.
	configure func(*sion.PlaceConfig)
	// start, when not nil, runs once every switch is linked, before the
	// producers advertise and the consumers subscribe: it starts what the
	// mode needs beside the switches (managed: the agent) and returns
	// what stops it, which runs before the switches close.
	start func(ctx context.Context, net *network) (stop func() error, err error)
	// goal: the goal holds for this mode — at most half of
	// by-filter's control messages per subscription, and no more event
	// messages per event. The test asserts it; main prints it.
	goal bool
}

// modes are the modes the program and its test run, by-filter first
// (the others' ratios are to it).
//
// The other rows of the issue are added here, one line each, as their
// parts land in the root package (none is in this tree yet; a mode is
// never faked):
//
//   - "pruning", S1 + advertisement pruning: needs
//     PlaceConfig.RequireAdvertisements — configure sets it true.
//   - "covering", S1 + covering: needs PlaceConfig.Covering (a filter
//     covered, by filter.Covers, by one already propagated over a link
//     is not propagated) — configure sets it true.
//   - "both", S1 + pruning + covering: configure sets both; goal true.
//   - "managed", the S2 agent: needs the managed routing and its Agent —
//     configure sets PlaceConfig.Routing to it, start starts the agent
//     over net (net.switches, net.tr) and returns its Close; goal true.
//
// The producers advertise their types in every mode already (S1 ignores
// advertisements), so no other part of the harness changes.
var modes = []mode{
	{name: "by-filter", configure: func(c *sion.PlaceConfig) { c.Routing = sion.RouteByFilter }},
	{name: "pruning", configure: func(c *sion.PlaceConfig) { c.Routing, c.RequireAdvertisements = sion.RouteByFilter, true }},
	{name: "covering", configure: func(c *sion.PlaceConfig) { c.Routing, c.Covering = sion.RouteByFilter, true }},
	{name: "both", configure: func(c *sion.PlaceConfig) {
		c.Routing, c.RequireAdvertisements, c.Covering = sion.RouteByFilter, true, true
	}, goal: true},
	{name: "managed", configure: func(c *sion.PlaceConfig) { c.Routing = sion.RouteManaged }, start: startAgent, goal: true},
}

// startAgent starts the place's agent (S2), connected to every switch of
// net.
func startAgent(ctx context.Context, net *network) (func() error, error) {
	addrs := make([]string, len(net.switches))
	for i, sw := range net.switches {
		addrs[i] = sw.Name()
	}
	a, err := sion.StartAgent(ctx, sion.AgentConfig{Name: "agent", Place: net.place, Transport: net.tr, Switches: addrs})
	if err != nil {
		return nil, err
	}
	return a.Close, nil
}

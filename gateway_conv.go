package sion

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// GatewayDirection names a direction of a gateway as the switch that
// requested it sees it.
type GatewayDirection int

const (
	// Import carries events of the remote place into this switch's place
	// (S1: SI-GW_{A,B}, made on A's request, carries B's events to A).
	Import GatewayDirection = iota
	// Export carries events of this switch's place into the remote place.
	Export
)

// String returns "import" or "export".
func (d GatewayDirection) String() string {
	switch d {
	case Import:
		return "import"
	case Export:
		return "export"
	}
	return fmt.Sprintf("GatewayDirection(%d)", int(d))
}

// GatewayCounters counts what one direction of a gateway did with the
// events that reached it (S1 SI-GW statistics). Each event is counted
// once, under the first reason it did not cross, or as Forwarded. Each
// end counts what it does: the requesting end checks the firewall and
// converts (Filtered, Unmapped, Converted are counted there); the other
// end only forwards and delivers. A copy that arrives over a redundant
// gateway crosses and is dropped where it enters (Duplicates).
type GatewayCounters struct {
	// Forwarded: events that crossed (sent by the source side, delivered
	// into the place by the target side); Converted: of those, the ones
	// the Mapping converted.
	Forwarded, Converted uint64
	// Filtered: refused by the firewall filters. Unmapped: their type has
	// no counterpart in the Mapping. Refused: conversion failed, or the
	// target place refused the converted event (logged at Warn).
	Filtered, Unmapped, Refused uint64
	// Expired: their PlaceTTL was spent. Looped: they had been in the
	// place they would enter. Duplicates: they had entered the place
	// already (redundant gateways). Dropped: the gateway's queue was full.
	Expired, Looped, Duplicates, Dropped uint64
}

type gwCounters struct {
	forwarded, converted, filtered, unmapped, refused, expired, looped, duplicates, dropped atomic.Uint64
}

// gatewayKey names a gateway another place requested: its name and that
// place.
type gatewayKey struct{ name, place string }

// maxGatewayCounters bounds the gateways of other places whose counters a
// switch keeps over its life (acceptedCounters).
const maxGatewayCounters = 4096

// acceptedCounters returns the counters of the gateway named name that
// place requested: the same each time it is re-established, so that
// GatewayInfo's counters never decrease for it, as a requested Gateway's
// do not. Beyond 4,096 such gateways a new one gets counters of its own,
// which start from zero.
func (sw *Switch) acceptedCounters(name, place string) *[2]gwCounters {
	k := gatewayKey{name, place}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if c := sw.gwCnt[k]; c != nil {
		return c
	}
	c := new([2]gwCounters)
	if len(sw.gwCnt) < maxGatewayCounters {
		if sw.gwCnt == nil {
			sw.gwCnt = map[gatewayKey]*[2]gwCounters{}
		}
		sw.gwCnt[k] = c
	}
	return c
}

func (c *gwCounters) snapshot() GatewayCounters {
	return GatewayCounters{
		Forwarded: c.forwarded.Load(), Converted: c.converted.Load(),
		Filtered: c.filtered.Load(), Unmapped: c.unmapped.Load(), Refused: c.refused.Load(),
		Expired: c.expired.Load(), Looped: c.looped.Load(), Duplicates: c.duplicates.Load(), Dropped: c.dropped.Load(),
	}
}

// gwConv is one direction's conversion: immutable, replaced whole.
type gwConv struct {
	mapping  *ontology.Mapping
	src      *ontology.Ontology // the source place's ontology
	firewall []*filter.Filter   // resolved against src; nil: all
	index    *filter.Index      // the firewall filters; nil: all
}

// newConv checks one direction's configuration for a gateway of place
// here (whose ontology is local).
func newConv(d GatewayDirection, local *ontology.Ontology, m *ontology.Mapping, firewall []string) (*gwConv, error) {
	c := &gwConv{mapping: m, src: local}
	if m != nil {
		switch {
		case d == Export && m.From() != local:
			return nil, fmt.Errorf("%w: the %v Mapping's source ontology is not this place's", ErrInvalidConfig, d)
		case d == Import && m.To() != local:
			return nil, fmt.Errorf("%w: the %v Mapping's target ontology is not this place's", ErrInvalidConfig, d)
		case d == Import:
			c.src = m.From()
		}
	}
	if firewall == nil {
		return c, nil
	}
	c.index = filter.NewIndex(c.src)
	for i, src := range firewall {
		f, err := filter.Compile(src)
		if err == nil {
			f, err = filter.Resolve(c.src, f)
		}
		if err == nil {
			err = c.index.Add(uint64(i), f)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v firewall filter %d %q: %w", ErrInvalidFilter, d, i, src, err)
		}
		c.firewall = append(c.firewall, f)
	}
	return c, nil
}

// pass reports whether the firewall lets e (over the source ontology)
// cross.
func (c *gwConv) pass(e filter.Event) bool {
	if c.index == nil {
		return true
	}
	ok := false
	c.index.Match(e, func(uint64, float64) { ok = true })
	return ok
}

// derive converts the text of a filter of the target place into the
// filters over the source ontology that select the events whose
// conversion it matches, intersected with the firewall (canonical texts,
// sorted, no duplicates).
func (c *gwConv) derive(text string) ([]string, error) {
	f, err := filter.Compile(text)
	if err != nil {
		return nil, err
	}
	var fs []*filter.Filter
	if c.mapping == nil {
		if f, err = filter.Resolve(c.src, f); err != nil {
			return nil, err
		}
		fs = []*filter.Filter{f}
	} else if fs, err = filter.Derive(f, c.mapping); err != nil {
		return nil, err
	}
	if c.firewall != nil {
		var both []*filter.Filter
		for _, d := range fs {
			for _, w := range c.firewall {
				out, _ := filter.Conjoin(d, w, c.src) // not exact: the firewall is checked again as events cross
				both = append(both, out...)
			}
		}
		fs = both
	}
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.String())
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// convert converts e (canonical over the source ontology) for the target
// place; it counts and returns false when e does not cross.
func (c *gwConv) convert(e *Event, cnt *gwCounters) (typ string, attrs []ontology.Attr, err error, ok bool) {
	if !c.pass(e) {
		cnt.filtered.Add(1)
		return "", nil, nil, false
	}
	if c.mapping == nil {
		return e.Type, e.Attrs, nil, true
	}
	typ, attrs, ok, err = c.mapping.Apply(e.Type, e.Attrs)
	switch {
	case err != nil:
		cnt.refused.Add(1)
		return "", nil, err, false
	case !ok:
		cnt.unmapped.Add(1)
		return "", nil, nil, false
	}
	return typ, attrs, nil, true
}

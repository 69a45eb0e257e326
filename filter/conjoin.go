package filter

import "github.com/sion-go/sion/ontology"

// Conjoin returns filters over ontology o that together match the events
// matching both a and b: a gateway intersects its firewall filter with
// the interest derived from the other event place (S1 SI-GW firewall
// filters; see Derive). The filters are canonical for o and sorted by type
// ID; no filter means that no event can match both.
//
// The event type is exact in every case: the more specific of the two
// types when one is a subtype of the other (AnyType is the identity), or
// else one filter for each maximal common subtype (none when the types
// share no subtype). When both filters are match all, their predicates
// are concatenated and simplified as Derive does (duplicates removed,
// bounds and members on one attribute folded; no filter when they
// contradict) and exact is true; so it is when
// one is match all without predicates, and the other's predicates and mode
// are kept. Otherwise exact is false and the result is a
// sound over-approximation: the predicates and mode of one side only (the
// match all side if there is one, else b), which match every event that
// matches both; the caller must test the other side itself. Two match all
// filters that bind one XML namespace prefix to different URIs are
// conjoined that way too.
//
// a and b must not be nil. A filter that Resolve refuses for o (an
// unknown type or attribute, a literal of the wrong kind) cannot be
// intersected: Conjoin then returns the other filter alone, resolved when
// it can be (b, as it is, when neither resolves), with exact false. Conjoin
// is safe for concurrent use.
func Conjoin(a, b *Filter, o *ontology.Ontology) (out []*Filter, exact bool) {
	if a == nil || b == nil {
		panic("filter: Conjoin of a nil filter")
	}
	ra, errA := Resolve(o, a)
	rb, errB := Resolve(o, b)
	switch {
	case errA != nil && errB != nil:
		return []*Filter{b}, false
	case errA != nil:
		return []*Filter{rb}, false
	case errB != nil:
		return []*Filter{ra}, false
	}
	spec, exact := conjoinSpec(ra, rb)
	if spec.Mode == ModeAll {
		preds, ok := simplifyConj(spec.Predicates)
		if !ok {
			return nil, exact // the predicates contradict each other
		}
		spec.Predicates = preds
	}
	for _, t := range commonTypes(o, ra.typ, rb.typ) {
		spec.Type = t
		f, err := Build(spec)
		if err != nil { // cannot happen: the parts were valid filters
			return []*Filter{rb}, false
		}
		out = append(out, f)
	}
	return out, exact
}

// conjoinSpec returns the spec (type left empty) of a ∧ b, or of one side
// when that cannot be written as one filter.
func conjoinSpec(a, b *Filter) (Spec, bool) {
	switch {
	case a.mode == ModeAll && len(a.preds) == 0:
		return b.Spec(), true
	case b.mode == ModeAll && len(b.preds) == 0:
		return a.Spec(), true
	case a.mode != ModeAll: // b is match all, or neither is
		return b.Spec(), false
	case b.mode != ModeAll:
		return a.Spec(), false
	}
	ns := a.Namespaces()
	for p, uri := range b.Namespaces() {
		if u, ok := ns[p]; ok && u != uri {
			return b.Spec(), false
		}
		ns[p] = uri
	}
	spec := Spec{Mode: ModeAll}
	if len(ns) > 0 {
		spec.Namespaces = ns
	}
	seen := map[string]bool{}
	for _, p := range append(a.Predicates(), b.preds...) {
		if s := formatPredicate(&p); !seen[s] {
			seen[s] = true
			spec.Predicates = append(spec.Predicates, p)
		}
	}
	return spec, true
}

// commonTypes returns the canonical types whose subtypes (with
// themselves) are exactly the types both a and b match, sorted by ID.
func commonTypes(o *ontology.Ontology, a, b string) []string {
	switch {
	case a == AnyType:
		return []string{b}
	case b == AnyType:
		return []string{a}
	}
	ta, _ := o.Lookup(a)
	tb, _ := o.Lookup(b)
	switch {
	case o.IsA(ta.ID, tb.ID):
		return []string{ta.Name}
	case o.IsA(tb.ID, ta.ID):
		return []string{tb.Name}
	}
	var common []int
	da, db := o.Descendants(ta.ID), o.Descendants(tb.ID)
	for i, j := 0, 0; i < len(da) && j < len(db); {
		switch {
		case da[i] == db[j]:
			common = append(common, da[i])
			i++
			j++
		case da[i] < db[j]:
			i++
		default:
			j++
		}
	}
	var out []string
	for _, c := range common {
		top := true
		for _, p := range o.Ancestors(c) {
			if p != c && o.IsA(p, ta.ID) && o.IsA(p, tb.ID) {
				top = false
				break
			}
		}
		if top {
			out = append(out, o.Type(c).Name)
		}
	}
	return out
}

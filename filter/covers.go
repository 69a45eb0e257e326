package filter

import (
	"strings"

	"github.com/sion-go/sion/ontology"
)

// Covers reports whether filter a covers filter b over ontology o: whether
// every event that b matches is also matched by a, with the type test of
// Index and BruteForce (through o) and the predicate semantics of
// Filter.Eval. A router that has propagated a need not propagate b (S1
// filter propagation; DESIGN.md "Network": covering).
//
// Covers is sound: when it returns true, no event matches b and not a,
// whatever its attribute values (NaN, ±Inf and values of an unexpected kind
// included) and payload. It is not complete: false means "not shown", and
// the cases it recognises are these.
//
//   - Types: a is AnyType and b is AnyType or a type none of whose subtypes
//     is reserved (AnyType does not match sion's control types); or b's type
//     is a's type or a descendant of it in o. b on AnyType is covered only
//     by a on AnyType. Type names are looked up in o (synonyms included);
//     with a nil o, typed filters must name the same type.
//   - Equal filters (the same canonical text) cover each other, whatever
//     their mode; so does any a whose type covers b's and which is match
//     all without predicates.
//   - Otherwise each predicate of a is checked against the predicates that
//     must hold whenever b matches: all of b's under match all; all of them
//     under match atleast K of K; under match score, those without which the
//     remaining weights cannot reach the threshold. a covers b when enough
//     of its predicates are implied for a's mode: all of them (match all),
//     at least K (match atleast), or a weight reaching the threshold (match
//     score).
//   - A predicate on an attribute or a JSON path is implied by the
//     conjunction of b's required predicates on the same operand (the same
//     source and the same name or path, as written: resolve synonyms first
//     with Resolve): bounds (<, <=, >, >=, ranges with open and closed ends,
//     and a prefix as a lower bound on strings) are intersected and compared
//     with ontology.Compare, exactly across int and float; when b pins the
//     operand to finitely many values (==, in, a range of one point), every
//     one of them is tested with a's predicate; != v and not in {…} are
//     implied when v can satisfy none of b's constraints; prefix s by a
//     prefix of b that starts with s, suffix s by a suffix that ends with s,
//     contains s by a prefix, suffix or contains that contains s, and an
//     empty s by anything that makes the operand a string; exists by any
//     predicate of b on the operand but not exists; not exists only by not
//     exists; true by anything.
//   - A predicate on an XPath operand, or a boolean XPath predicate, is
//     implied only by the same predicate of b (the same canonical text,
//     weight aside), and only when a and b bind alike every namespace prefix
//     that occurs in its text.
//   - When b's required predicates contradict each other on one operand
//     (disjoint bounds or sets, a value of two kinds, exists and not
//     exists), b matches no event and a covers it, if a's type covers b's.
//
// It does not recognise: implications between different operands or
// different spellings of one JSON path or XPath expression; disjunctions
// (b under match atleast K < N, unless a is equal to b); string bounds
// implied by a range of strings (b: x in ["ab", "ac") does not imply
// x prefix "ab"); gaps between numbers (b: x > 2^53 as a float and
// x < 2^53+1 is not seen to be empty); the declared kinds of attributes
// (Eval does not rely on them: an int attribute may carry a float); XPath
// coercion of any kind.
//
// a and b must not be nil (Covers returns false for nil). Covers is safe for
// concurrent use. Cost: O(len(a) × len(b)) predicate tests, plus the
// members of b's sets times b's predicates on the same operand; it
// allocates a small map per call (not for equal filters or a without
// predicates).
func Covers(o *ontology.Ontology, a, b *Filter) bool {
	if a == nil || b == nil {
		return false
	}
	if a == b || a.String() == b.String() {
		return true
	}
	if !typeCovers(o, a.typ, b.typ) {
		return false
	}
	if a.mode == ModeAll && len(a.preds) == 0 {
		return true
	}
	req := required(b)
	cons, unsat := constrain(b, req)
	if unsat {
		return true // b matches no event
	}
	n, w := 0, 0.0
	for i := range a.preds {
		pa := &a.preds[i]
		if implied(pa, a, b, req, cons) {
			n++
			w += pa.weight()
		} else if a.mode == ModeAll {
			return false
		}
	}
	// Eval sums the weights of the predicates that hold in order; the
	// implied ones are a subset, and a rounded sum of non-negative terms
	// does not shrink when terms are added, so Eval's score is at least w.
	ok, _ := a.decide(n, w)
	return ok
}

// typeCovers reports whether every event type a filter on b matches (in
// Index and BruteForce) is matched by a filter on a.
func typeCovers(o *ontology.Ontology, a, b string) bool {
	if a == AnyType {
		if b == AnyType {
			return true
		}
		if o == nil {
			return false
		}
		tb, ok := o.Lookup(b)
		if !ok {
			return false
		}
		// AnyType leaves out the reserved types (IDs below NumReserved);
		// Descendants includes b itself and is sorted.
		d := o.Descendants(tb.ID)
		return len(d) > 0 && d[0] >= ontology.NumReserved
	}
	if b == AnyType {
		return false
	}
	if a == b {
		return true
	}
	if o == nil {
		return false
	}
	ta, ok := o.Lookup(a)
	if !ok {
		return false
	}
	tb, ok := o.Lookup(b)
	return ok && o.IsA(tb.ID, ta.ID)
}

// required returns the predicates of f that hold for every event f
// matches.
func required(f *Filter) []*Predicate {
	var out []*Predicate
	switch f.mode {
	case ModeAll:
	case ModeAtLeast:
		if f.atLeast < len(f.preds) {
			return nil
		}
	case ModeScore:
		// Predicate i is required when the weights of all the others,
		// summed in order as Eval does, stay below the threshold: the
		// score without i is a rounded sum of a subset of those, no larger.
		for i := range f.preds {
			s := 0.0
			for j := range f.preds {
				if j != i {
					s += f.preds[j].weight()
				}
			}
			if s < f.threshold {
				out = append(out, &f.preds[i])
			}
		}
		return out
	default:
		return nil
	}
	for i := range f.preds {
		out = append(out, &f.preds[i])
	}
	return out
}

// Value classes: values of one class are ordered by ontology.Compare, and
// values of different classes never compare.
const (
	classNone = iota
	classString
	classNumber
	classTime
	classBool
)

func classOf(v ontology.Value) int {
	switch v.Kind() {
	case ontology.KindString:
		return classString
	case ontology.KindInt, ontology.KindFloat:
		return classNumber
	case ontology.KindTime:
		return classTime
	case ontology.KindBool:
		return classBool
	}
	return classNone
}

// opCons is the conjunction of b's required predicates on one attribute or
// JSON operand.
type opCons struct {
	preds   []*Predicate
	present bool // some predicate needs the operand present
	value   bool // some predicate needs a present, non-NaN value (all but true, exists, not exists)
	missing bool // not exists
	class   int  // the value class the operand must have, or classNone

	finite  bool             // the value equals one of members (by ontology.Equal)
	members []ontology.Value // when finite: every value class that satisfies preds

	hasLo, hasHi     bool
	lo, hi           ontology.Value
	loOpen, hiOpen   bool
	prefix, suffix   []string
	contain          []string
	conflictingKinds bool
}

// needClass records that the operand's value must be of class c.
func (c *opCons) needClass(k int) {
	if c.class == classNone {
		c.class = k
	} else if c.class != k {
		c.conflictingKinds = true
	}
}

func (c *opCons) lower(v ontology.Value, open bool) {
	c.needClass(classOf(v))
	if !c.hasLo {
		c.hasLo, c.lo, c.loOpen = true, v, open
		return
	}
	if r, ok := ontology.Compare(v, c.lo); ok && (r > 0 || r == 0 && open) {
		c.lo, c.loOpen = v, open
	}
}

func (c *opCons) upper(v ontology.Value, open bool) {
	c.needClass(classOf(v))
	if !c.hasHi {
		c.hasHi, c.hi, c.hiOpen = true, v, open
		return
	}
	if r, ok := ontology.Compare(v, c.hi); ok && (r < 0 || r == 0 && open) {
		c.hi, c.hiOpen = v, open
	}
}

// satisfies reports whether a present operand of value v satisfies every
// predicate in c. Every predicate's result depends only on v's class of
// ontology.Equal values, so this is also whether any value equal to v does.
func (c *opCons) satisfies(v ontology.Value) bool {
	for _, p := range c.preds {
		if !p.holds(val{v: v, present: true}) {
			return false
		}
	}
	return true
}

// constrain groups the required predicates of b by attribute or JSON
// operand and reports whether they contradict each other (b matches no
// event).
func constrain(b *Filter, req []*Predicate) (map[Operand]*opCons, bool) {
	cons := map[Operand]*opCons{}
	for _, p := range req {
		if p.Op == OpTrue || p.Operand.Source == SourceXPath {
			continue
		}
		c := cons[p.Operand]
		if c == nil {
			c = &opCons{}
			cons[p.Operand] = c
		}
		c.preds = append(c.preds, p)
		switch p.Op {
		case OpNotExists:
			c.missing = true
			continue
		case OpExists:
			c.present = true
			continue
		}
		c.present, c.value = true, true
		switch p.Op {
		case OpEQ:
			c.finite = true
			c.members = append(c.members, p.Value)
		case OpIn:
			c.finite = true
			c.members = append(c.members, p.Set...)
		case OpLT, OpLE:
			c.upper(p.Value, p.Op == OpLT)
		case OpGT, OpGE:
			c.lower(p.Value, p.Op == OpGT)
		case OpRange:
			c.lower(p.Value, p.LoOpen)
			c.upper(p.Hi, p.HiOpen)
		case OpPrefix:
			c.needClass(classString)
			c.prefix = append(c.prefix, p.Value.Str())
			c.lower(p.Value, false) // a string starting with s is ≥ s
		case OpSuffix:
			c.needClass(classString)
			c.suffix = append(c.suffix, p.Value.Str())
		case OpContains:
			c.needClass(classString)
			c.contain = append(c.contain, p.Value.Str())
		}
	}
	for _, c := range cons {
		if c.missing && c.present || c.conflictingKinds {
			return nil, true
		}
		if c.hasLo && c.hasHi {
			r, ok := ontology.Compare(c.lo, c.hi)
			if !ok || r > 0 || r == 0 && (c.loOpen || c.hiOpen) {
				return nil, true
			}
			if r == 0 && !c.finite {
				// A range of one point: the value equals lo.
				c.finite = true
				c.members = append(c.members, c.lo)
			}
		}
		if c.finite {
			// Any value satisfying c equals a member of the first set,
			// which then satisfies c itself: keep those that do.
			kept := c.members[:0]
			for _, m := range c.members {
				if c.satisfies(m) {
					kept = append(kept, m)
				}
			}
			c.members = kept
			if len(kept) == 0 {
				return nil, true
			}
		}
	}
	return cons, false
}

// implied reports whether predicate pa of a holds for every event whose
// values satisfy b's required predicates req (grouped by operand in cons).
func implied(pa *Predicate, a, b *Filter, req []*Predicate, cons map[Operand]*opCons) bool {
	if pa.Op == OpTrue {
		return true
	}
	if pa.Operand.Source == SourceXPath {
		return impliedXPath(pa, a, b, req)
	}
	c := cons[pa.Operand]
	if c == nil {
		return false
	}
	switch pa.Op {
	case OpExists:
		return c.present
	case OpNotExists:
		return c.missing
	}
	if !c.value {
		// b allows a missing operand or NaN, for which every value
		// predicate is false.
		return false
	}
	if c.finite {
		for _, m := range c.members {
			if !pa.holds(val{v: m, present: true}) {
				return false
			}
		}
		return true
	}
	switch pa.Op {
	case OpNE:
		return !c.satisfies(pa.Value)
	case OpNotIn:
		for _, m := range pa.Set {
			if c.satisfies(m) {
				return false
			}
		}
		return true
	case OpGT, OpGE:
		return c.above(pa.Value, pa.Op == OpGT)
	case OpLT, OpLE:
		return c.below(pa.Value, pa.Op == OpLT)
	case OpRange:
		return c.above(pa.Value, pa.LoOpen) && c.below(pa.Hi, pa.HiOpen)
	case OpPrefix, OpSuffix, OpContains:
		s := pa.Value.Str()
		if s == "" {
			return c.class == classString
		}
		return c.affix(pa.Op, s)
	}
	return false // OpEQ, OpIn: b does not pin the value
}

// above reports whether every value satisfying c is > v (open) or ≥ v.
func (c *opCons) above(v ontology.Value, open bool) bool {
	if !c.hasLo {
		return false
	}
	r, ok := ontology.Compare(c.lo, v)
	return ok && (r > 0 || r == 0 && (c.loOpen || !open))
}

// below reports whether every value satisfying c is < v (open) or ≤ v.
func (c *opCons) below(v ontology.Value, open bool) bool {
	if !c.hasHi {
		return false
	}
	r, ok := ontology.Compare(c.hi, v)
	return ok && (r < 0 || r == 0 && (c.hiOpen || !open))
}

// affix reports whether every string satisfying c starts with (OpPrefix),
// ends with (OpSuffix) or contains (OpContains) the non-empty s.
func (c *opCons) affix(op Op, s string) bool {
	switch op {
	case OpPrefix:
		for _, p := range c.prefix {
			if strings.HasPrefix(p, s) {
				return true
			}
		}
		return false
	case OpSuffix:
		for _, q := range c.suffix {
			if strings.HasSuffix(q, s) {
				return true
			}
		}
		return false
	}
	for _, list := range [][]string{c.prefix, c.suffix, c.contain} {
		for _, t := range list {
			if strings.Contains(t, s) {
				return true
			}
		}
	}
	return false
}

// impliedXPath reports whether b requires the same XPath predicate as pa,
// with the same namespace URIs for the prefixes it may use.
func impliedXPath(pa *Predicate, a, b *Filter, req []*Predicate) bool {
	if !sameBindings(a, b, pa.Operand.Name) {
		return false
	}
	want := predicateText(pa)
	for _, pb := range req {
		if pb.Operand.Source == SourceXPath && predicateText(pb) == want {
			return true
		}
	}
	return false
}

// predicateText returns p's canonical text without its weight.
func predicateText(p *Predicate) string {
	q := *p
	q.Weight = 0
	return formatPredicate(&q)
}

// sameBindings reports whether a and b bind every namespace prefix that
// occurs anywhere in the text of expr (a conservative reading of "the
// prefixes expr uses") alike: both to the same URI, or neither.
func sameBindings(a, b *Filter, expr string) bool {
	uri := func(f *Filter, prefix string) (string, bool) {
		for _, n := range f.ns {
			if n.prefix == prefix {
				return n.uri, true
			}
		}
		return "", false
	}
	for _, f := range [2]*Filter{a, b} {
		for _, n := range f.ns {
			if !strings.Contains(expr, n.prefix) {
				continue
			}
			ua, oka := uri(a, n.prefix)
			ub, okb := uri(b, n.prefix)
			if oka != okb || ua != ub {
				return false
			}
		}
	}
	return true
}

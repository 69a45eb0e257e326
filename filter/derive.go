package filter

import (
	"errors"
	"slices"
	"strings"

	"github.com/sion-go/sion/ontology"
)

// Derive returns the filters over m's source ontology that select the
// source events whose conversion by m matches f, a filter over m's target
// ontology (S1: a gateway, SI-GW, subscribes in the source event place
// only for what someone in the target place wants, so that only those
// events cross). f's names may be synonyms; the result is canonical for
// the source ontology (type and attribute names, literals of the source
// attribute's kind), free of duplicates and sorted by source type ID, then
// by String. An empty result means no converted event can match f.
//
// Events are taken as an event place admits them: of a known type, with
// attributes of that type's vocabulary holding values of the declared
// kinds (no NaN or ±Inf).
//
// Soundness, always: for every such source event e that m.Apply converts
// without error into e', if f matches e' then at least one returned filter
// matches e.
//
// Exactness: a returned filter matches e only if f matches e', except in
// the widened cases below. Events that m does not convert (a dropped type,
// a conversion error) may be matched; Apply refuses them at the gateway.
// Per source type S converted into f's type or a subtype (Mapping.SourceTypes),
// each predicate on a target attribute X is inverted through the
// Conversions of S to X:
//   - none: X is never present, so "not exists" always holds (dropped from
//     match all) and every other predicate never holds (S yields no filter
//     under match all);
//   - a rename, pass-through or int→float: the same test on the source
//     attribute, the literal turned into the source kind (x < 2.5 on an int
//     is x < 3; x == 2.5 never holds);
//   - linear, fma(x, Scale, Offset): Apply's result is monotone in x, so the
//     exact boundary is found by search over the source values (one
//     float64 step or one int at a time near the inverse guess, then
//     doubling and bisection), checking Apply's own conversion; a negative
//     Scale flips the comparison. Equality becomes equality with the one
//     source value converting to the literal, a range over the several
//     that round to it, or never; != and not in become the gaps around
//     those values;
//   - a value table: the set of source values converting to the literal(s)
//     (for ==, in, !=, not in, prefix, ranges… alike), plus, with
//     KeepUnmapped, the values outside the table that satisfy the test
//     themselves; exists and not exists test table membership;
//   - two or more source attributes converting to X: the disjunction over
//     them (an event carrying two of them fails to convert);
//   - JSON and XPath operands, and true: unchanged (payloads cross as they are).
//
// Under match all a predicate may become several alternatives (x != c
// around a range of preimages, two source attributes, a table with
// KeepUnmapped); they multiply out into several filters, at most 16 per
// source type: a predicate whose alternatives would pass that bound is
// widened to "its source attribute exists" (when one source attribute
// gives it) or dropped. Tests of one source attribute within a filter are
// then folded exactly (bounds into the tightest, members filtered by the
// other tests), and filters that can never match are left out. Under
// match atleast and match score each predicate must stay one predicate
// with its weight: a predicate that never holds is left out, one that
// always holds becomes true, and one that would need alternatives is
// widened to "its source attribute exists" or to true (weights are
// positive, so holding more never lowers a score). These widenings are
// the inexact cases. A filter that can then never reach K or the
// threshold yields nothing; one that always does becomes type-only.
//
// Source types whose translations are identical collapse to the highest of
// them: {type ⊑ R} stands for R and all its subtypes when they all
// translate alike (subtypes that m does not convert do not count). A source
// type whose converted subtypes translate differently keeps its own filter,
// which also matches those subtypes' events: exactness is lost there,
// since a filter's type always includes its subtypes.
//
// Errors are *BuildError, wrapping ErrInvalid: f or m is nil, or f names an
// event type or attribute that the target ontology does not have (or a
// literal of the wrong kind for it; see Resolve). Derive reads f and m and
// is safe for concurrent use. Cost: up to about 130 conversions per
// numeric literal and source type (tens of microseconds per filter, see
// BenchmarkDerive); it allocates the result.
func Derive(f *Filter, m *ontology.Mapping) ([]*Filter, error) {
	out, _, err := derive(f, m)
	return out, err
}

// maxDerivedConj bounds the filters one source type yields under match all.
const maxDerivedConj = 16

// dnf is a disjunction of conjunctions of source predicates: nil never
// holds, dnf{{}} always does.
type dnf [][]Predicate

func (d dnf) always() bool { return len(d) == 1 && len(d[0]) == 0 }

// product is the conjunction of a and b.
func product(a, b dnf) dnf {
	out := make(dnf, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, append(slices.Clip(x), y...))
		}
	}
	return out
}

type deriver struct {
	m     *ontology.Mapping
	from  *ontology.Ontology
	f     *Filter // resolved against the target ontology
	exact bool
	convs map[[2]string][]ontology.Conversion
}

// derive is Derive, also reporting whether the result is exact.
func derive(f *Filter, m *ontology.Mapping) ([]*Filter, bool, error) {
	if f == nil {
		return nil, false, &BuildError{Index: -1, Msg: "derive: nil filter"}
	}
	if m == nil {
		return nil, false, &BuildError{Index: -1, Msg: "derive: nil mapping"}
	}
	rf, err := Resolve(m.To(), f)
	if err != nil {
		var be *BuildError
		if errors.As(err, &be) {
			e := *be
			e.Msg += " (target ontology)"
			return nil, false, &e
		}
		return nil, false, err
	}
	d := &deriver{m: m, from: m.From(), f: rf, exact: true, convs: map[[2]string][]ontology.Conversion{}}
	n := d.from.NumTypes()
	converted := make([]bool, n)
	var sources []int
	for id := range n {
		_, converted[id] = m.Target(d.from.Type(id).Name)
	}
	if rf.typ == AnyType {
		for id := range n {
			if converted[id] {
				sources = append(sources, id)
			}
		}
	} else {
		for _, name := range m.SourceTypes(rf.typ) {
			t, _ := d.from.Lookup(name)
			sources = append(sources, t.ID)
		}
	}
	// Translate per source type; group the types by translation.
	specs := map[int][]Spec{}
	group := map[int]string{}
	var keys []string
	members := map[string][]int{}
	for _, id := range sources {
		ss, err := d.translateType(id)
		if err != nil {
			return nil, false, err
		}
		if len(ss) == 0 {
			continue
		}
		key, err := specsKey(ss)
		if err != nil {
			return nil, false, err
		}
		specs[id], group[id] = ss, key
		if _, ok := members[key]; !ok {
			keys = append(keys, key)
		}
		members[key] = append(members[key], id)
	}
	type entry struct {
		typeID int
		f      *Filter
	}
	var out []entry
	seen := map[string]bool{}
	for _, key := range keys {
		for _, b := range members[key] {
			top := true
			for _, a := range d.from.Ancestors(b) {
				if a != b && group[a] == key {
					top = false
					break
				}
			}
			if !top {
				continue
			}
			for _, s := range d.from.Descendants(b) {
				if converted[s] && group[s] != key {
					d.exact = false // s's events match b's filter but translate otherwise
				}
			}
			for _, spec := range specs[b] {
				spec.Type = d.from.Type(b).Name
				g, err := Build(spec)
				if err != nil {
					return nil, false, err
				}
				if s := g.String(); !seen[s] {
					seen[s] = true
					out = append(out, entry{b, g})
				}
			}
		}
	}
	slices.SortFunc(out, func(x, y entry) int {
		if x.typeID != y.typeID {
			return x.typeID - y.typeID
		}
		return strings.Compare(x.f.String(), y.f.String())
	})
	fs := make([]*Filter, len(out))
	for i, e := range out {
		fs[i] = e.f
	}
	return fs, d.exact, nil
}

// specsKey is the canonical text of a source type's translation, without
// its type.
func specsKey(ss []Spec) (string, error) {
	texts := make([]string, len(ss))
	for i, s := range ss {
		s.Type = AnyType
		g, err := Build(s)
		if err != nil {
			return "", err
		}
		texts[i] = g.String()
	}
	slices.Sort(texts)
	return strings.Join(texts, "\n"), nil
}

func (d *deriver) conversions(typeName, attr string) []ontology.Conversion {
	k := [2]string{typeName, attr}
	cs, ok := d.convs[k]
	if !ok {
		cs = d.m.Conversions(typeName, attr)
		d.convs[k] = cs
	}
	return cs
}

// translateType returns the specs (type left empty) whose union is f
// translated for events of source type id; none when they can never match.
func (d *deriver) translateType(id int) ([]Spec, error) {
	name := d.from.Type(id).Name
	f := d.f
	var ns map[string]string
	if len(f.ns) > 0 {
		ns = f.Namespaces()
	}
	if f.mode == ModeAll {
		conjs := dnf{{}}
		for i := range f.preds {
			alt := d.translate(name, &f.preds[i])
			if len(alt) == 0 {
				return nil, nil
			}
			if alt.always() {
				continue
			}
			if len(conjs)*len(alt) > maxDerivedConj {
				d.exact = false
				if alt = d.widen(name, &f.preds[i]); alt.always() {
					continue
				}
			}
			conjs = product(conjs, alt)
		}
		var out []Spec
		for _, c := range conjs {
			if c, ok := simplifyConj(c); ok {
				out = append(out, Spec{Mode: ModeAll, Namespaces: ns, Predicates: c})
			}
		}
		return out, nil
	}
	var preds []Predicate
	for i := range f.preds {
		p := &f.preds[i]
		alt := d.translate(name, p)
		var q Predicate
		switch {
		case len(alt) == 0:
			continue // never holds: it adds nothing to a count or a score
		case alt.always():
			q = True()
		case len(alt) == 1 && len(alt[0]) == 1:
			q = alt[0][0]
		default:
			d.exact = false
			q = True()
			if w := d.widen(name, p); len(w) == 1 && len(w[0]) == 1 {
				q = w[0][0]
			}
		}
		q.Weight = p.Weight
		preds = append(preds, q)
	}
	typeOnly := []Spec{{Mode: ModeAll}}
	trues := 0
	var total, trueSum float64 // summed in order, as Eval sums
	for i := range preds {
		total += preds[i].weight()
		if preds[i].Op == OpTrue {
			trues++
			trueSum += preds[i].weight()
		}
	}
	spec := Spec{Mode: f.mode, AtLeast: f.atLeast, Threshold: f.threshold, Namespaces: ns, Predicates: preds}
	switch f.mode {
	case ModeAtLeast:
		switch {
		case f.atLeast > len(preds):
			return nil, nil
		case trues >= f.atLeast:
			return typeOnly, nil
		case f.atLeast == len(preds):
			spec = Spec{Mode: ModeAll, Namespaces: ns}
			for _, p := range preds {
				if p.Op != OpTrue {
					spec.Predicates = append(spec.Predicates, p)
				}
			}
		}
	case ModeScore:
		switch {
		case total < f.threshold:
			return nil, nil
		case trueSum >= f.threshold:
			return typeOnly, nil
		}
	}
	return []Spec{spec}, nil
}

// translate inverts predicate p of f for events of source type typeName.
func (d *deriver) translate(typeName string, p *Predicate) dnf {
	if p.Operand.Source != SourceAttr || p.Op == OpTrue {
		q := *p
		q.Weight = 0
		return dnf{{q}}
	}
	cs := d.conversions(typeName, p.Operand.Name)
	if len(cs) == 0 {
		if p.Op == OpNotExists {
			return dnf{{}}
		}
		return nil
	}
	if p.Op == OpNotExists { // none of the sources gives the attribute
		out := dnf{{}}
		for _, c := range cs {
			out = product(out, translateOne(c, p))
		}
		return out
	}
	var out dnf // one source gives it, and its value passes p
	for _, c := range cs {
		out = append(out, translateOne(c, p)...)
	}
	return out
}

// widen returns a single conjunction that holds whenever p does, for a
// source type: the presence of the one source attribute giving p's
// operand, or always.
func (d *deriver) widen(typeName string, p *Predicate) dnf {
	if p.Operand.Source == SourceAttr && p.Op != OpNotExists && p.Op != OpTrue {
		if cs := d.conversions(typeName, p.Operand.Name); len(cs) == 1 {
			if w := translateOne(cs[0], &Predicate{Operand: p.Operand, Op: OpExists}); len(w) == 1 {
				return w
			}
		}
	}
	return dnf{{}}
}

// translateOne inverts p, a predicate on c.To, through the one conversion c:
// the result holds exactly when the source attribute is present, kept by
// c, and its converted value passes p (for not exists: when it is absent or
// not kept).
func translateOne(c ontology.Conversion, p *Predicate) dnf {
	switch {
	case c.Method == ontology.ConvertTable:
		return tableDNF(c, p)
	case c.FromKind.Numeric():
		return newNumDomain(c).dnf(p)
	}
	return identityDNF(c.From, c.FromKind, p)
}

// identityDNF is p moved to the source attribute n, whose values of kind k
// convert unchanged. Literals of another kind are resolved here: they
// never compare, so the predicate never holds (or, for != and not in,
// holds whenever n is present).
func identityDNF(n string, k ontology.Kind, p *Predicate) dnf {
	q := *p
	q.Operand, q.Weight = Attr(n), 0
	switch p.Op {
	case OpEQ, OpLT, OpLE, OpGT, OpGE:
		if !fits(p.Value, k) {
			return nil
		}
	case OpNE:
		if !fits(p.Value, k) {
			return dnf{{Attr(n).Exists()}}
		}
	case OpRange:
		if !fits(p.Value, k) || !fits(p.Hi, k) {
			return nil
		}
	case OpIn, OpNotIn:
		q.Set = nil
		for _, v := range p.Set {
			if fits(v, k) {
				q.Set = append(q.Set, v)
			}
		}
		switch {
		case len(q.Set) > 0:
		case p.Op == OpIn:
			return nil
		default:
			return dnf{{Attr(n).Exists()}}
		}
	case OpPrefix, OpSuffix, OpContains:
		if k != ontology.KindString {
			return nil
		}
	}
	return dnf{{q}}
}

// tableDNF inverts p through a value table.
func tableDNF(c ontology.Conversion, p *Predicate) dnf {
	n := Attr(c.From)
	keys := make([]string, 0, len(c.Values))
	for k := range c.Values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	keyVals := func(ks []string) []ontology.Value {
		vs := make([]ontology.Value, len(ks))
		for i, k := range ks {
			vs[i] = ontology.String(k)
		}
		return vs
	}
	switch {
	case p.Op == OpNotExists && c.KeepUnmapped:
		return dnf{{n.NotExists()}}
	case p.Op == OpNotExists && len(keys) == 0:
		return dnf{{}}
	case p.Op == OpNotExists:
		return dnf{{n.NotExists()}, {notInPred(n, keyVals(keys))}}
	}
	holds := func(s string) bool { return p.holds(val{v: ontology.String(s), present: true}) }
	var a, aOut, e []string // a: keys converting to a passing value; aOut: those failing p themselves; e: keys passing p themselves but not converted
	for _, k := range keys {
		switch conv, self := holds(c.Values[k]), holds(k); {
		case conv && !self:
			a, aOut = append(a, k), append(aOut, k)
		case conv:
			a = append(a, k)
		case self:
			e = append(e, k)
		}
	}
	if !c.KeepUnmapped {
		if len(a) == 0 {
			return nil
		}
		return dnf{{inPred(n, keyVals(a))}}
	}
	// Values outside the table pass unchanged: they hold when they pass p.
	id := identityDNF(c.From, ontology.KindString, p)
	var out dnf
	switch {
	case len(id) == 0: // no string passes p
		if len(a) > 0 {
			out = dnf{{inPred(n, keyVals(a))}}
		}
		return out
	case len(id[0]) == 1 && id[0][0].Op == OpExists:
		if len(e) == 0 {
			return dnf{{n.Exists()}}
		}
		return dnf{{notInPred(n, keyVals(e))}}
	}
	if len(aOut) > 0 {
		out = append(out, []Predicate{inPred(n, keyVals(aOut))})
	}
	if conj := excludeValues(id[0][0], keyVals(e)); conj != nil {
		out = append(out, conj)
	}
	return out
}

// excludeValues returns q ∧ "the operand is none of ex" (q's operand must
// be present) as a conjunction, folded into one predicate where q is a
// membership test; nil if it can never hold.
func excludeValues(q Predicate, ex []ontology.Value) []Predicate {
	if len(ex) == 0 {
		return []Predicate{q}
	}
	excluded := func(v ontology.Value) bool {
		return slices.ContainsFunc(ex, func(x ontology.Value) bool { return ontology.Equal(x, v) })
	}
	switch q.Op {
	case OpEQ:
		if excluded(q.Value) {
			return nil
		}
		return []Predicate{q}
	case OpIn:
		var keep []ontology.Value
		for _, v := range q.Set {
			if !excluded(v) {
				keep = append(keep, v)
			}
		}
		if len(keep) == 0 {
			return nil
		}
		return []Predicate{inPred(q.Operand, keep)}
	case OpNE:
		return []Predicate{notInPred(q.Operand, append(slices.Clone(ex), q.Value))}
	case OpNotIn:
		return []Predicate{notInPred(q.Operand, append(slices.Clone(ex), q.Set...))}
	}
	return []Predicate{q, notInPred(q.Operand, ex)}
}

// sortValues sorts vs in place (numbers by value, strings by bytes) and
// removes duplicates.
func sortValues(vs []ontology.Value) []ontology.Value {
	slices.SortFunc(vs, func(a, b ontology.Value) int {
		if c, ok := ontology.Compare(a, b); ok {
			return c
		}
		return int(a.Kind()) - int(b.Kind())
	})
	return slices.CompactFunc(vs, ontology.Equal)
}

// inPred is o == v for one value, else o in {vs}.
func inPred(o Operand, vs []ontology.Value) Predicate {
	vs = sortValues(vs)
	if len(vs) == 1 {
		return o.EQ(vs[0])
	}
	return o.In(vs...)
}

// notInPred is o != v for one value, else o not in {vs}.
func notInPred(o Operand, vs []ontology.Value) Predicate {
	vs = sortValues(vs)
	if len(vs) == 1 {
		return o.NE(vs[0])
	}
	return o.NotIn(vs...)
}

// simplifyConj simplifies a conjunction without changing what it
// matches, and reports false when it can never hold. Per attribute: a
// test that it is missing conflicts with any other test of it; equality
// and membership tests fold into one over the members that pass every
// other test; order tests (<, <=, >, >=, ranges) with mutually comparable
// literals fold into the tightest one; "exists" goes when another test
// needs the attribute present. Exact duplicates go. Order is kept: a
// folded test takes the place of the first test of its attribute.
func simplifyConj(c []Predicate) ([]Predicate, bool) {
	var names []string
	byName := map[string][]int{}
	for i := range c {
		if c[i].Operand.Source == SourceAttr && c[i].Op != OpTrue {
			n := c[i].Operand.Name
			if _, ok := byName[n]; !ok {
				names = append(names, n)
			}
			byName[n] = append(byName[n], i)
		}
	}
	drop := make([]bool, len(c))
	repl := map[int]Predicate{}
	for _, n := range names {
		idx := byName[n]
		missing, exists, needs := false, false, false
		for _, i := range idx {
			switch c[i].Op {
			case OpNotExists:
				missing = true
			case OpExists:
				exists = true
			default:
				needs = true
			}
		}
		switch {
		case missing && (exists || needs):
			return nil, false
		case missing || len(idx) == 1:
			continue
		}
		for _, i := range idx {
			if c[i].Op == OpExists {
				drop[i] = needs
			}
		}
		first, ok, folded := foldMembers(c, idx)
		if !ok {
			return nil, false
		}
		if !folded {
			first, ok, folded = foldBounds(c, idx)
			if !ok {
				return nil, false
			}
		}
		if folded {
			at := -1
			for _, i := range idx {
				if !drop[i] && at < 0 {
					at = i
				}
				drop[i] = true
			}
			drop[at] = false
			repl[at] = first
		}
	}
	out := make([]Predicate, 0, len(c))
	seen := map[string]bool{}
	for i := range c {
		if drop[i] {
			continue
		}
		p := c[i]
		if r, ok := repl[i]; ok {
			p = r
		}
		if s := formatPredicate(&p); !seen[s] {
			seen[s] = true
			out = append(out, p)
		}
	}
	return out, true
}

// foldMembers folds the tests c[idx] of one attribute, present, into one
// equality or membership test when there is one among them: an event's
// value equal to a member passes every other test exactly when the member
// does. folded is false when there is no such test; ok is false when no
// member is left.
func foldMembers(c []Predicate, idx []int) (p Predicate, ok, folded bool) {
	var set []ontology.Value
	for _, i := range idx {
		if op := c[i].Op; op == OpEQ || op == OpIn {
			set = []ontology.Value{c[i].Value}
			if op == OpIn {
				set = slices.Clone(c[i].Set)
			}
			folded = true
			break
		}
	}
	if !folded {
		return Predicate{}, true, false
	}
	for _, i := range idx {
		q := &c[i]
		if q.Op == OpExists {
			continue
		}
		set = slices.DeleteFunc(set, func(v ontology.Value) bool { return !q.holds(val{v: v, present: true}) })
	}
	if len(set) == 0 {
		return Predicate{}, false, true
	}
	return inPred(c[idx[0]].Operand, set), true, true
}

// foldBounds folds the order tests among c[idx] (one attribute) into the
// tightest one, when there are two or more and their literals all compare.
func foldBounds(c []Predicate, idx []int) (p Predicate, ok, folded bool) {
	var lo, hi targetBound
	tighten := func(b *targetBound, v ontology.Value, open bool, upper bool) bool {
		if !b.set {
			*b = targetBound{v: v, open: open, set: true}
			return true
		}
		cmp, ok := ontology.Compare(v, b.v)
		if !ok {
			return false
		}
		if upper {
			cmp = -cmp
		}
		if cmp > 0 || cmp == 0 && open && !b.open {
			*b = targetBound{v: v, open: open, set: true}
		}
		return true
	}
	n := 0
	for _, i := range idx {
		q := &c[i]
		good := true
		switch q.Op {
		case OpLT, OpLE:
			good = tighten(&hi, q.Value, q.Op == OpLT, true)
		case OpGT, OpGE:
			good = tighten(&lo, q.Value, q.Op == OpGT, false)
		case OpRange:
			good = tighten(&lo, q.Value, q.LoOpen, false) && tighten(&hi, q.Hi, q.HiOpen, true)
		case OpExists:
			continue
		default:
			return Predicate{}, true, false
		}
		if !good {
			return Predicate{}, true, false
		}
		n++
	}
	if n < 2 {
		return Predicate{}, true, false
	}
	o := c[idx[0]].Operand
	switch {
	case !lo.set && hi.open:
		return o.LT(hi.v), true, true
	case !lo.set:
		return o.LE(hi.v), true, true
	case !hi.set && lo.open:
		return o.GT(lo.v), true, true
	case !hi.set:
		return o.GE(lo.v), true, true
	}
	cmp, comparable := ontology.Compare(lo.v, hi.v)
	switch {
	case !comparable:
		return Predicate{}, true, false
	case cmp > 0 || cmp == 0 && (lo.open || hi.open):
		return Predicate{}, false, true
	case cmp == 0:
		return o.EQ(lo.v), true, true
	}
	return o.Range(lo.v, hi.v, lo.open, hi.open), true, true
}

package filter

import (
	"fmt"
	"math"

	"github.com/sion-go/sion/ontology"
)

// Resolve checks f against ontology o and returns it with canonical names:
// the event type and attribute synonyms are replaced by their canonical
// names (DESIGN.md: synonyms resolve at the edge, never during matching).
// It returns f itself when nothing changes.
//
// It refuses, with a *BuildError wrapping ErrInvalid: an event type o does
// not know; an attribute that neither the type, its ancestors nor its
// descendants declare (for AnyType filters, one that no type declares,
// and kinds are not checked); a literal whose kind does not fit the attribute's declared kind (a string
// compared with a float attribute, prefix on an int). Payload operands are
// not checked: payloads carry no vocabulary.
func Resolve(o *ontology.Ontology, f *Filter) (*Filter, error) {
	f, _, err := resolve(o, f, nil)
	return f, err
}

// attrLookup is what Resolve learns from the ontology about an attribute
// name as a filter on a type spells it.
type attrLookup struct {
	name string             // canonical
	a    ontology.Attribute // the entry AttributeBelow gives (typed filters)
	ok   bool               // the type (AnyType: some type) has it
	// ref is the key of name, once an Index has acquired it through this
	// look-up (Index.vocab; see acquireKey); released when its refs are 0.
	ref *keyRef
	// spelled is the name as the filter spelled it, the key of the
	// look-up in Index.vocab's map: vocab.recent holds it too, rather
	// than a copy of each name it meets.
	spelled string
}

// lookAttr looks name up for filters on type typeID (-1: AnyType).
func lookAttr(o *ontology.Ontology, typeID int, name string) attrLookup {
	l := attrLookup{name: o.CanonicalAttribute(name)}
	if typeID < 0 {
		l.ok = o.HasAttribute(l.name)
		return l
	}
	l.a, l.ok = o.AttributeBelow(typeID, l.name)
	return l
}

// vocab caches Resolve's ontology look-ups that succeeded, by type ID
// + 1 (0: AnyType) and attribute name as filters spell it: one map
// access per predicate instead of two and a binary search. An entry
// also leads to its canonical name's key (see acquireKey). Only the
// writer uses it (Index.mu held).
type vocab struct {
	byType []map[string]*attrLookup
	// recent holds the last look-up of each name in a place chosen by a
	// cheap hash of the name's first and last bytes (recentSlot): a hit
	// there costs that hash and a comparison of the name (none of the
	// bytes when the name is the same string), not a full hash of it and
	// a map probe (the maps cost about 4 % of a W-SPARSE Add at 10⁶). A
	// place holds the spelling its map holds as its key
	// (attrLookup.spelled), so the cache keeps no other memory reachable.
	recent [vocabRecent]recentLookup
}

// vocabRecent is the number of places in vocab.recent.
const vocabRecent = 256

// recentLookup is a place of vocab.recent: the look-up l of name for
// filters on type typ.
type recentLookup struct {
	typ  int
	name string
	l    *attrLookup
}

// recentSlot returns the place in vocab.recent of name, as filters on
// type typeID spell it, from its length and its first and last 8 bytes.
func recentSlot(typeID int, name string) int {
	n := len(name)
	w := uint64(n)<<48 ^ uint64(typeID)<<56
	for i := range min(n, 8) {
		w = w<<8 ^ w>>56 ^ uint64(name[i])
	}
	if n > 8 {
		for i := max(8, n-8); i < n; i++ {
			w = w<<8 ^ w>>56 ^ uint64(name[i])*0x9d
		}
	}
	w *= 0x9e3779b97f4a7c15
	return int(w >> (64 - 8)) // vocabRecent is 1 << 8
}

// lookAttr is lookAttr through the cache x.vocab, for predicate i of the
// filter Add is adding; it notes the cache entry in x.lookups. The
// caller must not change the look-up it returns. mu must be held.
func (x *Index) lookAttr(i, typeID int, name string) *attrLookup {
	v := &x.vocab
	r := &v.recent[recentSlot(typeID, name)]
	var l *attrLookup
	if r.l != nil && r.typ == typeID && r.name == name {
		l = r.l
	} else {
		if v.byType == nil {
			v.byType = make([]map[string]*attrLookup, x.ont.NumTypes()+1)
		}
		m := v.byType[typeID+1]
		var ok bool
		l, ok = m[name]
		if !ok {
			lk := lookAttr(x.ont, typeID, name)
			if !lk.ok {
				return &lk
			}
			if m == nil {
				m = map[string]*attrLookup{}
				v.byType[typeID+1] = m
			}
			lk.spelled = name
			l = &lk
			m[name] = l
		}
		*r = recentLookup{typ: typeID, name: l.spelled, l: l}
	}
	if i < len(x.lookups) {
		x.lookups[i] = l
	}
	return l
}

// resolve is Resolve with the attribute look-ups through x's cache
// (Index.lookAttr) when x is not nil. It also returns the ID of f's event
// type, -1 for AnyType. It takes the look-ups by pointer, not from a
// callback by value: copying them (over 100 bytes each) took about a
// quarter of its time in an Add.
func resolve(o *ontology.Ontology, f *Filter, x *Index) (*Filter, int, error) {
	if f == nil {
		return nil, 0, &BuildError{Index: -1, Msg: "nil filter"}
	}
	var spec *Spec // a copy of f's, made on the first change
	typeID := -1
	if f.typ != AnyType {
		t, ok := o.Lookup(f.typ)
		if !ok {
			return nil, 0, &BuildError{Index: -1, Msg: fmt.Sprintf("unknown event type %q", f.typ)}
		}
		typeID = t.ID
		if t.Name != f.typ {
			spec = specOf(f, spec)
			spec.Type = t.Name
		}
	}
	var own attrLookup // the look-up without an Index
	for i := range f.preds {
		p := &f.preds[i]
		if p.Operand.Source != SourceAttr || p.Op == OpTrue {
			continue
		}
		var l *attrLookup
		if x != nil {
			l = x.lookAttr(i, typeID, p.Operand.Name)
		} else {
			own = lookAttr(o, typeID, p.Operand.Name)
			l = &own
		}
		name := l.name
		if name != p.Operand.Name {
			spec = specOf(f, spec)
			spec.Predicates[i].Operand.Name = name
		}
		if spec != nil {
			p = &spec.Predicates[i]
		}
		if typeID < 0 {
			// Types may declare one name with different kinds: only the
			// name is checked for AnyType filters.
			if !l.ok {
				return nil, 0, &BuildError{Index: i, Pred: formatPredicate(p), Msg: fmt.Sprintf("attribute %q is not in the vocabulary of any event type", name)}
			}
			continue
		}
		if !l.ok {
			return nil, 0, &BuildError{Index: i, Pred: formatPredicate(p), Msg: fmt.Sprintf("attribute %q is not in the vocabulary of event type %q, its ancestors or its subtypes", name, o.Type(typeID).Name)}
		}
		if err := checkKinds(p, &l.a); err != nil {
			return nil, 0, &BuildError{Index: i, Pred: formatPredicate(p), Msg: err.Error()}
		}
	}
	if spec == nil {
		return f, typeID, nil
	}
	f, err := Build(*spec)
	return f, typeID, err
}

// specOf returns spec, or a copy of f's Spec when spec is nil.
func specOf(f *Filter, spec *Spec) *Spec {
	if spec == nil {
		s := f.Spec()
		spec = &s
	}
	return spec
}

func fits(v ontology.Value, k ontology.Kind) bool {
	if v.Kind().Numeric() && k.Numeric() {
		return true
	}
	return v.Kind() == k
}

func checkKinds(p *Predicate, a *ontology.Attribute) error {
	bad := func(v ontology.Value) error {
		return fmt.Errorf("attribute %q is %s; %v is of kind %s", a.Name, a.Kind, v, v.Kind())
	}
	switch p.Op {
	case OpEQ, OpNE, OpLT, OpLE, OpGT, OpGE:
		if !fits(p.Value, a.Kind) {
			return bad(p.Value)
		}
	case OpRange:
		if !fits(p.Value, a.Kind) {
			return bad(p.Value)
		}
		if !fits(p.Hi, a.Kind) {
			return bad(p.Hi)
		}
	case OpIn, OpNotIn:
		for _, m := range p.Set {
			if !fits(m, a.Kind) {
				return bad(m)
			}
		}
	case OpPrefix, OpSuffix, OpContains:
		if a.Kind != ontology.KindString {
			return fmt.Errorf("attribute %q is %s; %s needs a string attribute", a.Name, a.Kind, p.Op)
		}
	}
	return nil
}

// touchFilter loads a word of every cache line of f's predicates and of
// the first member of each set, in a loop whose loads do not wait for
// one another, and returns their sum: a filter Add receives may be cold
// in cache, and its lines then miss together rather than one after
// another as Add reads them. It is not inlined, so that the compiler
// keeps the loads though Add drops the sum (writing it to the Index would
// write a line readers share). Cost: a few loads per predicate.
//
//go:noinline
func touchFilter(f *Filter) uint32 {
	if f == nil {
		return 0
	}
	t := uint32(f.mode)
	for i := range f.preds {
		p := &f.preds[i]
		// A Predicate is 136 bytes; these fields are at most 56 apart.
		t += uint32(p.Operand.Source) + uint32(p.Value.Kind()) + uint32(p.Hi.Kind()) + uint32(len(p.Set)) + uint32(math.Float64bits(p.Weight))
		if len(p.Set) > 0 {
			t += uint32(p.Set[0].Kind())
		}
	}
	return t
}

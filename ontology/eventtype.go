package ontology

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Attribute is one vocabulary entry (S1: the semantic information of an
// event is a set of attributes named by the ontology): a canonical Name,
// the Kind of its values, an optional Unit (free text such as "degC"; ""
// means none or dimensionless) and the Synonyms that resolve to Name.
// Attribute synonyms are ontology-wide: in a loaded Ontology, Synonyms holds
// every synonym of Name, sorted, whichever type declared it.
type Attribute struct {
	Name     string
	Kind     Kind
	Unit     string
	Synonyms []string
}

// Attr is one attribute of an event: a name and a value. Mapping.Apply takes
// and returns them; the root package's events carry them.
type Attr struct {
	Name  string
	Value Value
}

// TypeDef is an event type as a loader or a program declares it, the input
// of New. Parents and Synonyms are names; a parent may be given by a synonym
// of its type. Attributes are the type's own vocabulary entries. Pos is
// where the definition was read (the zero Position for programs); it goes
// into every LoadError about the type.
type TypeDef struct {
	Name       string
	Parents    []string
	Synonyms   []string
	Label      string
	Attributes []Attribute
	Pos        Position
}

// EventType is a type of a loaded Ontology (S1: event types with
// inheritance). ID is its dense index in the Ontology; Parents are canonical
// names, in declaration order, duplicates removed; Attributes are the type's
// own entries only (see Ontology.Vocabulary for own + inherited). An
// EventType is immutable and shared: callers must not modify it or its
// slices.
type EventType struct {
	ID         int
	Name       string
	Parents    []string
	Synonyms   []string
	Label      string
	Attributes []Attribute
	Pos        Position
}

// Ontology is a validated set of event types forming a DAG (multiple
// inheritance: "BGM" is-a "music" and is-a "seasonal", S1), with each type's
// vocabulary inherited by its subtypes, and synonyms for types and
// attributes. It always contains the reserved control types (IDs
// 0..NumReserved-1). An Ontology is immutable after New and safe for
// concurrent use; the slices its methods return are shared and must not be
// modified.
//
// Memory: IsA uses interval labelling (see doc.go): 16 bytes per type plus
// 8 bytes per extra interval; Ancestors and Descendants add 8 bytes per
// related (sub, super) pair each, plus 4 bytes per type each.
type Ontology struct {
	types    []EventType
	byName   map[string]int    // canonical names and type synonyms → ID
	attrSyn  map[string]string // attribute synonym → canonical attribute name
	attrSyns map[string][]string
	declared map[string][]int // canonical attribute → IDs of the types declaring it, ascending
	vocab    [][]Attribute    // own + inherited, sorted by name
	cl       *closure
	descOff  []int32
	desc     []int
	ancOff   []int32
	anc      []int
}

// NumTypes returns the number of types, reserved ones included.
func (o *Ontology) NumTypes() int { return len(o.types) }

// Type returns the type with the given ID (0 <= id < NumTypes()), or nil for
// an ID out of range. The result is shared; do not modify it.
func (o *Ontology) Type(id int) *EventType {
	if id < 0 || id >= len(o.types) {
		return nil
	}
	return &o.types[id]
}

// Lookup returns the type named name, a canonical name or a type synonym.
// Names are case-sensitive.
func (o *Ontology) Lookup(name string) (*EventType, bool) {
	id, ok := o.byName[name]
	if !ok {
		return nil, false
	}
	return &o.types[id], true
}

// IsA reports whether sub == super or super is an ancestor of sub. It is
// false for IDs out of range. Cost: two comparisons when super has one
// interval (always, for a tree), else a binary search over super's
// intervals; no allocation.
func (o *Ontology) IsA(sub, super int) bool {
	if uint(sub) >= uint(len(o.types)) || uint(super) >= uint(len(o.types)) {
		return false
	}
	return o.cl.isA(sub, super)
}

// Overlap reports whether event types a and b have a common descendant —
// one is the other, one is a subtype of the other, or a type inherits
// from both — so that some event is of both; false for IDs out of range.
// Cost: two IsA checks when one is under the other, else one merge of
// their sorted descendants; no allocation.
func (o *Ontology) Overlap(a, b int) bool {
	if o.IsA(a, b) || o.IsA(b, a) {
		return true
	}
	da, db := o.Descendants(a), o.Descendants(b)
	for i, j := 0, 0; i < len(da) && j < len(db); {
		switch {
		case da[i] == db[j]:
			return true
		case da[i] < db[j]:
			i++
		default:
			j++
		}
	}
	return false
}

// Ancestors returns id itself and every ancestor of it, sorted ascending, or
// nil for an ID out of range. The slice is shared: callers must not modify it.
func (o *Ontology) Ancestors(id int) []int {
	if uint(id) >= uint(len(o.types)) {
		return nil
	}
	a, b := o.ancOff[id], o.ancOff[id+1]
	return o.anc[a:b:b]
}

// Descendants returns id itself and every descendant of it, sorted
// ascending, or nil for an ID out of range. The slice is shared: callers
// must not modify it.
func (o *Ontology) Descendants(id int) []int {
	if uint(id) >= uint(len(o.types)) {
		return nil
	}
	a, b := o.descOff[id], o.descOff[id+1]
	return o.desc[a:b:b]
}

// CanonicalAttribute returns the canonical attribute name for name, which
// may be a synonym; unknown names and canonical names are returned
// unchanged. Synonyms resolve here, at the edge, never during matching.
func (o *Ontology) CanonicalAttribute(name string) string {
	if c, ok := o.attrSyn[name]; ok {
		return c
	}
	return name
}

// Attribute returns the vocabulary entry for name (canonical or synonym) of
// type typeID, own or inherited. ok is false when the type does not have the
// attribute or typeID is out of range. Cost: a map lookup and a binary
// search; no allocation.
func (o *Ontology) Attribute(typeID int, name string) (Attribute, bool) {
	if uint(typeID) >= uint(len(o.types)) {
		return Attribute{}, false
	}
	name = o.CanonicalAttribute(name)
	v := o.vocab[typeID]
	i, ok := slices.BinarySearchFunc(v, name, func(a Attribute, n string) int { return strings.Compare(a.Name, n) })
	if !ok {
		return Attribute{}, false
	}
	return v[i], true
}

// AttributeBelow returns the entry for name (canonical or synonym) declared
// by typeID, one of its ancestors, or any of its descendants: a filter on a
// supertype may test an attribute only its subtypes have. The type's own
// vocabulary wins; otherwise the declaring descendant with the smallest ID
// gives the entry (descendants may, in principle, declare the same name with
// different kinds).
func (o *Ontology) AttributeBelow(typeID int, name string) (Attribute, bool) {
	if a, ok := o.Attribute(typeID, name); ok {
		return a, true
	}
	if uint(typeID) >= uint(len(o.types)) {
		return Attribute{}, false
	}
	name = o.CanonicalAttribute(name)
	for _, d := range o.declared[name] {
		if o.cl.isA(d, typeID) {
			return o.Attribute(d, name)
		}
	}
	return Attribute{}, false
}

// Vocabulary returns the type's attributes, own and inherited, sorted by
// name, or nil for an ID out of range. The slice is shared: callers must not
// modify it.
func (o *Ontology) Vocabulary(typeID int) []Attribute {
	if uint(typeID) >= uint(len(o.types)) {
		return nil
	}
	return o.vocab[typeID]
}

// HasAttribute reports whether any type of the ontology declares the
// attribute name (canonical or synonym).
func (o *Ontology) HasAttribute(name string) bool {
	_, ok := o.declared[o.CanonicalAttribute(name)]
	return ok
}

// ExtraIntervals returns how many intervals the IsA labelling holds beyond
// one per type: 0 for a tree. Memory of IsA is 16*NumTypes() +
// 8*ExtraIntervals() bytes.
func (o *Ontology) ExtraIntervals() int { return o.cl.extraIntervals() }

func loadErr(d *TypeDef, err error) *LoadError {
	return &LoadError{Pos: d.Pos, Type: d.Name, Err: err}
}

// New validates defs and builds an Ontology holding the reserved control
// types (IDs 0..NumReserved-1) followed by defs in order (IDs NumReserved,
// NumReserved+1, …). defs is not retained. The error is a *LoadError naming
// the type and its Pos, wrapping one of: ErrEmptyName, ErrReserved,
// ErrDuplicateType, ErrSynonym, ErrUnknownParent, ErrCycle (the message
// shows the cycle "A -> B -> A"), ErrVocabulary, ErrInvalidKind. Of several
// problems, the first in definition order is reported.
func New(defs []TypeDef) (*Ontology, error) {
	all := make([]TypeDef, 0, len(reservedDefs)+len(defs))
	all = append(all, reservedDefs...)
	for i := range defs {
		d := &defs[i]
		if IsReserved(d.Name) {
			return nil, loadErr(d, fmt.Errorf("%w: names beginning %q belong to sion", ErrReserved, ReservedPrefix))
		}
		for _, s := range d.Synonyms {
			if IsReserved(s) {
				return nil, loadErr(d, fmt.Errorf("%w: synonym %q: names beginning %q belong to sion", ErrReserved, s, ReservedPrefix))
			}
		}
		for _, a := range d.Attributes {
			for _, n := range append([]string{a.Name}, a.Synonyms...) {
				if IsReserved(n) {
					return nil, loadErr(d, fmt.Errorf("%w: attribute %q: names beginning %q belong to sion", ErrReserved, n, ReservedPrefix))
				}
			}
		}
		all = append(all, *d)
	}
	o := &Ontology{
		types:    make([]EventType, len(all)),
		byName:   make(map[string]int, len(all)),
		attrSyn:  map[string]string{},
		attrSyns: map[string][]string{},
		declared: map[string][]int{},
	}
	// Names and synonyms.
	for id := range all {
		d := &all[id]
		if d.Name == "" {
			return nil, loadErr(d, fmt.Errorf("%w: type %d has no name", ErrEmptyName, id-NumReserved))
		}
		if d.Name == "*" || slices.Contains(d.Synonyms, "*") {
			return nil, loadErr(d, fmt.Errorf("%w: \"*\" stands for every event type in filters", ErrReserved))
		}
		if prev, dup := o.byName[d.Name]; dup {
			if all[prev].Name == d.Name {
				return nil, loadErr(d, fmt.Errorf("%w: already defined at %s", ErrDuplicateType, all[prev].Pos))
			}
			return nil, loadErr(d, fmt.Errorf("%w: type name is a synonym of type %q", ErrSynonym, all[prev].Name))
		}
		o.byName[d.Name] = id
	}
	for id := range all {
		d := &all[id]
		for _, s := range d.Synonyms {
			if s == "" {
				return nil, loadErr(d, fmt.Errorf("%w: empty type synonym", ErrEmptyName))
			}
			if prev, dup := o.byName[s]; dup {
				if all[prev].Name == s {
					return nil, loadErr(d, fmt.Errorf("%w: synonym %q is the name of type %q", ErrSynonym, s, s))
				}
				return nil, loadErr(d, fmt.Errorf("%w: synonym %q is already a synonym of type %q", ErrSynonym, s, all[prev].Name))
			}
			o.byName[s] = id
		}
	}
	// Parents.
	parents := make([][]int, len(all))
	listed := make([]int, len(all)) // parent ID → 1 + the last type listing it
	for id := range all {
		d := &all[id]
		for _, p := range d.Parents {
			if p == "" {
				return nil, loadErr(d, fmt.Errorf("%w: empty parent name", ErrEmptyName))
			}
			pid, ok := o.byName[p]
			if !ok {
				return nil, loadErr(d, fmt.Errorf("%w %q", ErrUnknownParent, p))
			}
			if listed[pid] != id+1 {
				listed[pid] = id + 1
				parents[id] = append(parents[id], pid)
			}
		}
	}
	topo, err := topoOrder(all, parents)
	if err != nil {
		return nil, err
	}
	if err := o.buildVocabulary(all, parents, topo); err != nil {
		return nil, err
	}
	for id := range all {
		d := &all[id]
		t := EventType{ID: id, Name: d.Name, Label: d.Label, Pos: d.Pos,
			Synonyms: slices.Clip(slices.Clone(d.Synonyms))}
		for _, p := range parents[id] {
			t.Parents = append(t.Parents, all[p].Name)
		}
		for _, a := range d.Attributes {
			a.Synonyms = o.attrSyns[a.Name]
			t.Attributes = append(t.Attributes, a)
		}
		o.types[id] = t
	}
	o.cl = newClosure(parents, topo)
	if pairs := o.cl.pairs(); pairs > MaxClosurePairs {
		return nil, &LoadError{Err: fmt.Errorf("%w: %d (type, ancestor) pairs, more than %d: the hierarchy is too deep for its size", ErrTooLarge, pairs, MaxClosurePairs)}
	}
	o.descOff, o.desc = o.cl.descendants()
	o.ancOff, o.anc = invert(len(all), o.descOff, o.desc)
	return o, nil
}

// topoOrder returns the types with parents before children, or an ErrCycle
// LoadError naming a type on the cycle; the search starts from the types in
// ID order, so the report is deterministic.
func topoOrder(all []TypeDef, parents [][]int) ([]int, error) {
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(all))
	topo := make([]int, 0, len(all))
	type frame struct{ t, next int }
	var stack []frame
	for root := range all {
		if color[root] != white {
			continue
		}
		stack = append(stack[:0], frame{t: root})
		color[root] = grey
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next < len(parents[f.t]) {
				p := parents[f.t][f.next]
				f.next++
				switch color[p] {
				case white:
					color[p] = grey
					stack = append(stack, frame{t: p})
				case grey: // back edge: the cycle is p … f.t -> p on the stack
					var path []string
					start := 0
					for i := range stack {
						if stack[i].t == p {
							start = i
						}
					}
					for _, s := range stack[start:] {
						path = append(path, strconv.Quote(all[s.t].Name))
					}
					path = append(path, strconv.Quote(all[p].Name))
					d := &all[p]
					return nil, loadErr(d, fmt.Errorf("%w: %s (each name is a parent of the one before it)", ErrCycle, strings.Join(path, " -> ")))
				}
				continue
			}
			color[f.t] = black
			topo = append(topo, f.t) // post-order over parents: parents first
			stack = stack[:len(stack)-1]
		}
	}
	return topo, nil
}

// buildVocabulary checks attribute declarations and synonyms and fills
// o.vocab, o.attrSyn, o.attrSyns and o.declared.
func (o *Ontology) buildVocabulary(all []TypeDef, parents [][]int, topo []int) error {
	synOwner := map[string]int{} // synonym → type that first declared it
	for id := range all {
		d := &all[id]
		seen := map[string]bool{}
		for _, a := range d.Attributes {
			if a.Name == "" {
				return loadErr(d, fmt.Errorf("%w: attribute with no name", ErrEmptyName))
			}
			if a.Kind == KindInvalid || a.Kind > KindTime {
				return loadErr(d, fmt.Errorf("%w: attribute %q has kind %v", ErrInvalidKind, a.Name, a.Kind))
			}
			if seen[a.Name] {
				return loadErr(d, fmt.Errorf("%w: attribute %q declared twice", ErrVocabulary, a.Name))
			}
			seen[a.Name] = true
			o.declared[a.Name] = append(o.declared[a.Name], id) // ascending: id grows, and seen refuses a second one
		}
	}
	for id := range all {
		d := &all[id]
		for _, a := range d.Attributes {
			if c, ok := o.attrSyn[a.Name]; ok {
				return loadErr(d, fmt.Errorf("%w: attribute %q is a synonym of attribute %q (declared by type %q)", ErrSynonym, a.Name, c, all[synOwner[a.Name]].Name))
			}
			for _, s := range a.Synonyms {
				switch c, ok := o.attrSyn[s]; {
				case s == "":
					return loadErr(d, fmt.Errorf("%w: empty synonym of attribute %q", ErrEmptyName, a.Name))
				case ok && c != a.Name:
					return loadErr(d, fmt.Errorf("%w: %q is a synonym of attribute %q and of attribute %q (declared by type %q)", ErrSynonym, s, a.Name, c, all[synOwner[s]].Name))
				case ok:
					continue
				}
				if decl, isAttr := o.declared[s]; isAttr {
					return loadErr(d, fmt.Errorf("%w: synonym %q of attribute %q is an attribute of type %q", ErrSynonym, s, a.Name, all[decl[0]].Name))
				}
				o.attrSyn[s] = a.Name
				o.attrSyns[a.Name] = append(o.attrSyns[a.Name], s)
				synOwner[s] = id
			}
		}
	}
	for _, s := range o.attrSyns {
		slices.Sort(s)
	}
	o.vocab = make([][]Attribute, len(all))
	// A type's vocabulary merges its parents' and its own attributes:
	// sorted by name (then by where they come from: parents in order, each
	// parent's vocabulary by name, then the type's own in declaration
	// order), each name's first entry stands, and the earliest entry that
	// disagrees with it is the error. Sorting keeps a type with many
	// attributes linearithmic.
	type entry struct {
		a    Attribute
		from int // the parent it is inherited from; -1: the type's own
		seq  int // where it comes from, as above
	}
	var merge []entry
	entries := 0
	for _, id := range topo {
		d := &all[id]
		if len(d.Attributes) == 0 && len(parents[id]) == 1 {
			// Nothing declared, one parent: share its vocabulary, so that
			// deep and wide hierarchies do not copy it into every type.
			o.vocab[id] = o.vocab[parents[id][0]]
			continue
		}
		merge = merge[:0]
		for _, p := range parents[id] {
			for _, a := range o.vocab[p] {
				merge = append(merge, entry{a: a, from: p, seq: len(merge)})
			}
		}
		for _, a := range d.Attributes {
			a.Synonyms = o.attrSyns[a.Name]
			merge = append(merge, entry{a: a, from: -1, seq: len(merge)})
		}
		slices.SortFunc(merge, func(x, y entry) int {
			if c := strings.Compare(x.a.Name, y.a.Name); c != 0 {
				return c
			}
			return x.seq - y.seq
		})
		var v []Attribute
		bad, first := -1, -1 // the earliest disagreeing entry, and its name's first
		for i := 0; i < len(merge); {
			j := i + 1
			for ; j < len(merge) && merge[j].a.Name == merge[i].a.Name; j++ {
				a, b := merge[j].a, merge[i].a
				if (a.Kind != b.Kind || a.Unit != b.Unit) && (bad < 0 || merge[j].seq < merge[bad].seq) {
					bad, first = j, i
				}
			}
			v = append(v, merge[i].a)
			i = j
		}
		if bad >= 0 {
			a, b := merge[bad], merge[first]
			if a.from < 0 {
				return loadErr(d, fmt.Errorf("%w: attribute %q redeclared as %s, inherited as %s from %q",
					ErrVocabulary, a.a.Name, descAttr(a.a), descAttr(b.a), all[b.from].Name))
			}
			return loadErr(d, fmt.Errorf("%w: attribute %q inherited as %s from %q and as %s from %q",
				ErrVocabulary, a.a.Name, descAttr(b.a), all[b.from].Name, descAttr(a.a), all[a.from].Name))
		}
		o.vocab[id] = slices.Clip(v)
		if entries += len(v); entries > MaxClosurePairs {
			return loadErr(d, fmt.Errorf("%w: the vocabularies hold more than %d inherited attributes", ErrTooLarge, MaxClosurePairs))
		}
	}
	return nil
}

// descAttr describes an attribute's kind and unit for error messages.
func descAttr(a Attribute) string {
	if a.Unit == "" {
		return a.Kind.String()
	}
	return a.Kind.String() + " [" + a.Unit + "]"
}

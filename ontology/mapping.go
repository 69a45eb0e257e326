package ontology

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
)

// MappingSpec is a conversion table between two ontologies (S1: a gateway,
// SI-GW, converts events between event places with a conversion table).
// NewMapping validates it against both.
type MappingSpec struct {
	Types      []TypeRule
	Attributes []AttributeRule
}

// TypeRule maps the source type From (a name or synonym in the source
// ontology) to the target type To (in the target ontology). With Drop set,
// To must be "" and events of From — and of its subtypes that have no rule
// of their own — are not converted.
type TypeRule struct {
	From, To string
	Drop     bool
}

// AttributeRule converts one source attribute. Type restricts the rule to
// events of that source type and its subtypes ("" = any type); From is the
// source attribute (name or synonym); To the target attribute ("" = the same
// name as From). At most one conversion applies:
//   - Drop: the attribute is left out (To, Scale, Offset, Values must be zero);
//   - linear, when Scale != 0: out = in*Scale + Offset, both attributes
//     numeric (e.g. °C→°F: Scale 1.8, Offset 32);
//   - Values: a string-to-string table; a value not in it is dropped, or
//     passed unchanged when KeepUnmapped is set;
//   - none: a rename; the kinds must be equal, except int → float.
type AttributeRule struct {
	Type         string
	From, To     string
	Scale        float64
	Offset       float64
	Values       map[string]string
	KeepUnmapped bool
	Drop         bool
}

// MappingError is the error of NewMapping: Rule says which rule
// ("Types[2]", "Attributes[0]") and Err what is wrong with it.
type MappingError struct {
	Rule string
	Err  error
}

// Error returns "ontology: mapping Rule: what".
func (e *MappingError) Error() string { return "ontology: mapping " + e.Rule + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *MappingError) Unwrap() error { return e.Err }

// ErrConversion is wrapped by the errors of Mapping.Apply.
var ErrConversion = errors.New("ontology: conversion")

// Mapping converts events of a source ontology into events of a target
// ontology. Build it with NewMapping. A Mapping is immutable and safe for
// concurrent use.
//
// Type rules apply through inheritance: an event whose type has no rule uses
// the rule of its nearest ruled ancestor (an ancestor with a rule that no
// other ruled ancestor of the type lies below); two nearest ancestors whose
// rules disagree make NewMapping fail for that type. An event whose type and
// ancestors have no rule, or whose nearest rule is a Drop, is not converted.
//
// Attributes: for each attribute of the event, the most specific applicable
// AttributeRule (a rule for the nearest type beats a rule for an ancestor,
// which beats a rule with Type "") converts it; without a rule, the attribute
// passes unchanged if the target type's vocabulary has it (by name or
// synonym) with a compatible kind (the same, or both numeric), and is dropped
// otherwise.
type Mapping struct {
	from, to *Ontology
	target   []int // source type ID → target type ID, -1 = not converted
	attrs    []attrRule
}

type attrRule struct {
	AttributeRule
	idx      int
	typeID   int // -1 = any
	from, to string
	fromKind Kind
	toKind   Kind
}

// NewMapping validates spec against the source ontology from and the target
// ontology to. spec is copied. The error is a *MappingError naming the rule:
// an unknown type or attribute in either ontology, a duplicate rule, a
// linear conversion on a non-numeric attribute, a value table on a
// non-string one, a kind mismatch between source and target attribute, or a
// source type whose nearest ruled ancestors disagree.
func NewMapping(from, to *Ontology, spec MappingSpec) (*Mapping, error) {
	m := &Mapping{from: from, to: to, target: make([]int, from.NumTypes())}
	rule := make([]int, from.NumTypes()) // source type → own type rule index, -1 none
	for i := range rule {
		rule[i] = -1
	}
	tgt := make([]int, len(spec.Types)) // rule → target ID, -1 for Drop
	for i, r := range spec.Types {
		name := "Types[" + strconv.Itoa(i) + "]"
		bad := func(format string, a ...any) error {
			return &MappingError{Rule: name, Err: fmt.Errorf(format, a...)}
		}
		st, ok := from.Lookup(r.From)
		if !ok {
			return nil, bad("unknown type %q in the source ontology", r.From)
		}
		if rule[st.ID] >= 0 {
			return nil, bad("type %q already has rule Types[%d]", st.Name, rule[st.ID])
		}
		rule[st.ID] = i
		switch {
		case r.Drop && r.To != "":
			return nil, bad("a Drop rule has no target type (To is %q)", r.To)
		case r.Drop:
			tgt[i] = -1
		default:
			tt, ok := to.Lookup(r.To)
			if !ok {
				return nil, bad("unknown type %q in the target ontology", r.To)
			}
			tgt[i] = tt.ID
		}
	}
	// Nearest ruled ancestors.
	for id := range m.target {
		m.target[id] = -1
		best := -1
		for _, a := range from.Ancestors(id) {
			if rule[a] < 0 || a != id && rule[id] >= 0 {
				continue
			}
			nearest := true
			for _, b := range from.Ancestors(id) {
				if b != a && rule[b] >= 0 && from.IsA(b, a) {
					nearest = false
					break
				}
			}
			if !nearest {
				continue
			}
			if best >= 0 && tgt[rule[a]] != tgt[rule[best]] {
				return nil, &MappingError{Rule: "Types[" + strconv.Itoa(rule[a]) + "]", Err: fmt.Errorf(
					"source type %q inherits it and rule Types[%d], which disagree; add a rule for %q",
					from.Type(id).Name, rule[best], from.Type(id).Name)}
			}
			best = a
		}
		if best >= 0 {
			m.target[id] = tgt[rule[best]]
		}
	}
	for i, r := range spec.Attributes {
		ar, err := m.checkAttrRule(i, r)
		if err != nil {
			return nil, err
		}
		for _, prev := range m.attrs {
			if prev.from != ar.from || (prev.typeID < 0) != (ar.typeID < 0) {
				continue
			}
			if prev.typeID == ar.typeID {
				return nil, &MappingError{Rule: "Attributes[" + strconv.Itoa(i) + "]", Err: fmt.Errorf("attribute %q already has rule Attributes[%d] for the same type", ar.from, prev.idx)}
			}
			if !from.IsA(prev.typeID, ar.typeID) && !from.IsA(ar.typeID, prev.typeID) && from.Overlap(prev.typeID, ar.typeID) {
				return nil, &MappingError{Rule: "Attributes[" + strconv.Itoa(i) + "]", Err: fmt.Errorf(
					"attribute %q: types %q and %q (rule Attributes[%d]) share a subtype, which would have two rules",
					ar.from, from.Type(ar.typeID).Name, from.Type(prev.typeID).Name, prev.idx)}
			}
		}
		m.attrs = append(m.attrs, ar)
	}
	return m, nil
}

// kindOf returns the kind of attribute name for type t (-1: any type) of o,
// looking below t too; ok is false if o has no such attribute there.
func kindOf(o *Ontology, t int, name string) (Kind, bool) {
	if t >= 0 {
		a, ok := o.AttributeBelow(t, name)
		return a.Kind, ok
	}
	decl := o.declared[o.CanonicalAttribute(name)]
	if len(decl) == 0 {
		return KindInvalid, false
	}
	a, _ := o.Attribute(decl[0], name)
	return a.Kind, true
}

func (m *Mapping) checkAttrRule(i int, r AttributeRule) (attrRule, error) {
	name := "Attributes[" + strconv.Itoa(i) + "]"
	bad := func(format string, a ...any) (attrRule, error) {
		return attrRule{}, &MappingError{Rule: name, Err: fmt.Errorf(format, a...)}
	}
	ar := attrRule{AttributeRule: r, idx: i, typeID: -1, from: m.from.CanonicalAttribute(r.From)}
	ar.Values = cloneMap(r.Values)
	targetType := -1
	if r.Type != "" {
		st, ok := m.from.Lookup(r.Type)
		if !ok {
			return bad("unknown type %q in the source ontology", r.Type)
		}
		ar.typeID = st.ID
		targetType = m.target[st.ID]
	}
	var ok bool
	if ar.fromKind, ok = kindOf(m.from, ar.typeID, ar.from); !ok {
		if r.Type != "" {
			return bad("type %q of the source ontology has no attribute %q", r.Type, r.From)
		}
		return bad("the source ontology has no attribute %q", r.From)
	}
	if r.Drop {
		if r.To != "" || r.Scale != 0 || r.Offset != 0 || r.Values != nil || r.KeepUnmapped {
			return bad("a Drop rule for %q has a conversion", r.From)
		}
		return ar, nil
	}
	ar.to = r.To
	if ar.to == "" {
		ar.to = r.From
	}
	ar.to = m.to.CanonicalAttribute(ar.to)
	if ar.toKind, ok = kindOf(m.to, targetType, ar.to); !ok {
		if targetType >= 0 {
			return bad("target type %q has no attribute %q", m.to.Type(targetType).Name, ar.to)
		}
		return bad("the target ontology has no attribute %q", ar.to)
	}
	switch {
	case r.Scale != 0 && r.Values != nil:
		return bad("both a linear conversion and a value table")
	case r.Scale == 0 && r.Offset != 0:
		return bad("Offset %v without Scale (Scale 0 means no linear conversion)", r.Offset)
	case math.IsNaN(r.Scale) || math.IsInf(r.Scale, 0) || math.IsNaN(r.Offset) || math.IsInf(r.Offset, 0):
		return bad("Scale and Offset must be finite")
	case r.Scale != 0 && (!ar.fromKind.Numeric() || !ar.toKind.Numeric()):
		return bad("linear conversion on a non-numeric attribute: %q is %v, %q is %v", ar.from, ar.fromKind, ar.to, ar.toKind)
	case r.Values != nil && (ar.fromKind != KindString || ar.toKind != KindString):
		return bad("value table on a non-string attribute: %q is %v, %q is %v", ar.from, ar.fromKind, ar.to, ar.toKind)
	case r.KeepUnmapped && r.Values == nil:
		return bad("KeepUnmapped without a value table")
	case r.Scale == 0 && r.Values == nil && ar.fromKind != ar.toKind && !(ar.fromKind == KindInt && ar.toKind == KindFloat):
		return bad("kind mismatch: source %q is %v, target %q is %v", ar.from, ar.fromKind, ar.to, ar.toKind)
	}
	return ar, nil
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Target returns the canonical name of the target type that events of the
// source type typeName (a name or synonym) convert to; ok is false when they
// are not converted or the type is unknown.
func (m *Mapping) Target(typeName string) (string, bool) {
	st, ok := m.from.Lookup(typeName)
	if !ok || m.target[st.ID] < 0 {
		return "", false
	}
	return m.to.Type(m.target[st.ID]).Name, true
}

// Apply converts an event of source type typeName (name or synonym) with
// attributes attrs (names may be synonyms) into the target ontology. It
// returns the target type's canonical name and the converted attributes in
// input order, under canonical target names; attrs is not modified or kept.
// ok is false, with a nil error, when the type has no counterpart (see
// Mapping). Errors wrap ErrConversion: an unknown source type, a value whose
// kind does not fit its rule, two attributes converted to the same target
// name, or a linear result that does not fit an int target.
//
// Linear conversions compute in float64 with one rounding (math.FMA), so
// 21.5 °C → 70.7 °F exactly but 37 °C → 98.60000000000001 °F. The result is
// a float, except for an int target: an int input with integral Scale and
// Offset is computed exactly in int64 (overflow is an error); otherwise the
// float result must be an integer within int64 range, else an error. A float
// target gets a float even when the result is integral.
func (m *Mapping) Apply(typeName string, attrs []Attr) (outType string, out []Attr, ok bool, err error) {
	st, found := m.from.Lookup(typeName)
	if !found {
		return "", nil, false, fmt.Errorf("%w: unknown source type %q", ErrConversion, typeName)
	}
	tt := m.target[st.ID]
	if tt < 0 {
		return "", nil, false, nil
	}
	out = make([]Attr, 0, len(attrs))
	for _, a := range attrs {
		name := m.from.CanonicalAttribute(a.Name)
		r := m.rule(st.ID, name)
		var v Value
		var keep bool
		switch {
		case r == nil:
			name = m.to.CanonicalAttribute(name)
			ta, has := m.to.Attribute(tt, name)
			v, keep = a.Value, has && (ta.Kind == a.Value.Kind() || ta.Kind.Numeric() && a.Value.Kind().Numeric())
		case r.Drop:
			continue
		default:
			name = r.to
			v, keep, err = r.convert(a.Value)
			if err != nil {
				return "", nil, false, fmt.Errorf("%w: type %q, attribute %q: %w", ErrConversion, st.Name, a.Name, err)
			}
		}
		if !keep {
			continue
		}
		if slices.ContainsFunc(out, func(o Attr) bool { return o.Name == name }) {
			return "", nil, false, fmt.Errorf("%w: type %q: two attributes convert to %q", ErrConversion, st.Name, name)
		}
		out = append(out, Attr{Name: name, Value: v})
	}
	return m.to.Type(tt).Name, out, true, nil
}

// rule returns the most specific rule for canonical attribute name on
// source type t, or nil.
func (m *Mapping) rule(t int, name string) *attrRule {
	var best *attrRule
	for i := range m.attrs {
		r := &m.attrs[i]
		if r.from != name || r.typeID >= 0 && !m.from.IsA(t, r.typeID) {
			continue
		}
		if best == nil || best.typeID < 0 || r.typeID >= 0 && m.from.IsA(r.typeID, best.typeID) {
			best = r
		}
	}
	return best
}

func (r *attrRule) convert(v Value) (Value, bool, error) {
	switch {
	case r.Values != nil:
		if v.Kind() != KindString {
			return Value{}, false, fmt.Errorf("value %v is not a string", v)
		}
		if s, ok := r.Values[v.Str()]; ok {
			return String(s), true, nil
		}
		return v, r.KeepUnmapped, nil
	case r.Scale != 0:
		return r.linear(v)
	case v.Kind() == r.toKind:
		return v, true, nil
	case v.Kind() == KindInt && r.toKind == KindFloat:
		return Float(v.Float()), true, nil
	}
	return Value{}, false, fmt.Errorf("value %v does not fit %v attribute %q", v, r.toKind, r.to)
}

func (r *attrRule) linear(v Value) (Value, bool, error) {
	if !v.Kind().Numeric() {
		return Value{}, false, fmt.Errorf("value %v is not numeric", v)
	}
	if r.toKind == KindInt && v.Kind() == KindInt {
		if s, o := integral(r.Scale), integral(r.Offset); s != nil && o != nil {
			hi, lo := bits.Mul64(uint64(abs(v.Int())), uint64(abs(*s)))
			neg := (v.Int() < 0) != (*s < 0)
			if hi == 0 && lo <= math.MaxInt64 {
				p := int64(lo)
				if neg {
					p = -p
				}
				if sum := p + *o; (*o >= 0) == (sum >= p) {
					return Int(sum), true, nil
				}
			}
			return Value{}, false, fmt.Errorf("%v*%v%+v overflows int64", v, r.Scale, r.Offset)
		}
	}
	f := math.FMA(v.Float(), r.Scale, r.Offset)
	if r.toKind != KindInt {
		return Float(f), true, nil
	}
	if f != math.Trunc(f) || f < -0x1p63 || f >= 0x1p63 {
		return Value{}, false, fmt.Errorf("%v*%v%+v = %v does not fit int attribute %q", v, r.Scale, r.Offset, FormatFloat(f), r.to)
	}
	return Int(int64(f)), true, nil
}

// integral returns f as an int64 if it is an integer within range.
func integral(f float64) *int64 {
	if f != math.Trunc(f) || f < -0x1p62 || f >= 0x1p62 {
		return nil
	}
	i := int64(f)
	return &i
}

func abs(i int64) int64 {
	if i < 0 {
		return -i
	}
	return i
}

// SourceTypes returns the canonical names of the source types whose events
// convert to targetType (name or synonym in the target ontology) or to one
// of its descendants, sorted by source type ID; nil for an unknown target
// type. Gateways use it to derive the interest to register on the source
// side from a filter on the target side.
func (m *Mapping) SourceTypes(targetType string) []string {
	tt, ok := m.to.Lookup(targetType)
	if !ok {
		return nil
	}
	var out []string
	for id, t := range m.target {
		if t >= 0 && m.to.IsA(t, tt.ID) {
			out = append(out, m.from.Type(id).Name)
		}
	}
	return out
}

// From returns the source ontology: the one whose events Apply converts.
func (m *Mapping) From() *Ontology { return m.from }

// To returns the target ontology: the one Apply converts events into.
func (m *Mapping) To() *Ontology { return m.to }

// ConversionMethod says how a Conversion computes a target value from a
// source value.
type ConversionMethod uint8

const (
	// ConvertPass: no AttributeRule applies and the target type has the
	// attribute with a compatible kind (the same, or both numeric), so the
	// value passes unchanged — an int stays an int even in a float
	// attribute, and a float in an int attribute stays a float.
	ConvertPass ConversionMethod = iota
	// ConvertRename: a rule without conversion; the value is unchanged,
	// except that an int into a float attribute becomes the nearest float64
	// (exact up to 2^53 in magnitude).
	ConvertRename
	// ConvertLinear: out = fma(in, Scale, Offset), computed as Apply says:
	// one rounding, and exact int64 arithmetic for an int into an int
	// attribute with integral Scale and Offset.
	ConvertLinear
	// ConvertTable: the string value table Values; a value not in it is
	// dropped, or passed unchanged when KeepUnmapped is set.
	ConvertTable
)

var methodNames = [...]string{"pass", "rename", "linear", "table"}

// String returns "pass", "rename", "linear" or "table".
func (c ConversionMethod) String() string {
	if int(c) < len(methodNames) {
		return methodNames[c]
	}
	return "ConversionMethod(" + strconv.Itoa(int(c)) + ")"
}

// Conversion is one row of the conversion table as it applies to events of
// one source type (S1: the SI-GW converts with a conversion table): the
// source attribute From, of the kind FromKind that the source type
// declares, becomes the target attribute To, whose kind is ToKind, by
// Method. Scale and Offset are set for ConvertLinear; Values and
// KeepUnmapped for ConvertTable. Mapping.Conversions returns them; a
// gateway inverts them to derive, from a filter over the target ontology,
// the filters to register on the source side.
//
// A Conversion is a plain value, determined by its exported fields. Values
// is shared with the Mapping and must not be modified; apart from that, a
// Conversion is immutable and safe for concurrent use.
type Conversion struct {
	Type         string // canonical name of the source type
	From         string // canonical source attribute
	FromKind     Kind
	To           string // canonical target attribute
	ToKind       Kind
	Method       ConversionMethod
	Scale        float64
	Offset       float64
	Values       map[string]string
	KeepUnmapped bool
}

// Conversions returns how events of the source type sourceType (name or
// synonym) obtain the target attribute targetAttr (name or synonym in the
// target ontology): one Conversion for each attribute in the source type's
// vocabulary (own and inherited) that Apply turns into targetAttr, by a
// rule or by passing it unchanged (ConvertPass: no rule applies and the
// converted type has targetAttr with a kind compatible with the declared
// source kind), sorted by source attribute name. Attributes that a Drop
// rule removes are not listed. The result is nil when the type is unknown,
// is not converted, or nothing becomes targetAttr — then converted events
// of that type never have targetAttr. With two or more entries, an event
// carrying more than one of those attributes (kept by their conversions)
// fails to convert (Apply: two attributes convert to one name). Cost: a
// scan of the type's vocabulary and of the rules; it allocates the result.
func (m *Mapping) Conversions(sourceType, targetAttr string) []Conversion {
	st, ok := m.from.Lookup(sourceType)
	if !ok || m.target[st.ID] < 0 {
		return nil
	}
	tt := m.target[st.ID]
	want := m.to.CanonicalAttribute(targetAttr)
	var out []Conversion
	for _, a := range m.from.Vocabulary(st.ID) {
		c := Conversion{Type: st.Name, From: a.Name, FromKind: a.Kind}
		r := m.rule(st.ID, a.Name)
		switch {
		case r == nil:
			c.To = m.to.CanonicalAttribute(a.Name)
			ta, has := m.to.Attribute(tt, c.To)
			if c.To != want || !has || !(ta.Kind == a.Kind || ta.Kind.Numeric() && a.Kind.Numeric()) {
				continue
			}
			c.ToKind, c.Method = ta.Kind, ConvertPass
		case r.Drop || r.to != want:
			continue
		default:
			c.To, c.ToKind = r.to, r.toKind
			c.Scale, c.Offset, c.Values, c.KeepUnmapped = r.Scale, r.Offset, r.Values, r.KeepUnmapped
			switch {
			case r.Values != nil:
				c.Method = ConvertTable
			case r.Scale != 0:
				c.Method = ConvertLinear
			default:
				c.Method = ConvertRename
			}
		}
		out = append(out, c)
	}
	return out
}

// Convert converts one value of the source attribute exactly as Apply does
// for an event of c.Type: it returns the target value and whether the
// attribute is kept (false: it is left out of the converted event, as for
// a value missing from a table without KeepUnmapped, or a value whose kind
// the target attribute cannot take under ConvertPass). The error wraps
// ErrConversion: a value whose kind does not fit the conversion, or a
// linear result that does not fit an int target.
func (c Conversion) Convert(v Value) (Value, bool, error) {
	if c.Method == ConvertPass {
		return v, c.ToKind == v.Kind() || c.ToKind.Numeric() && v.Kind().Numeric(), nil
	}
	r := c.rule()
	out, keep, err := r.convert(v)
	if err != nil {
		return Value{}, false, fmt.Errorf("%w: type %q, attribute %q: %w", ErrConversion, c.Type, c.From, err)
	}
	return out, keep, nil
}

// Unbounded returns what Convert returns for v when it succeeds and keeps
// the value, and the zero Value when it drops it. Where Convert fails
// because a linear result does not fit an int target, Unbounded returns
// the result as if the target were a float: ±Inf when exact int64
// arithmetic overflows, else the float64 result. For a numeric FromKind and
// a ConvertPass, ConvertRename or ConvertLinear conversion it is therefore
// a monotone function of v's numeric value over values of kind FromKind:
// non-decreasing, or non-increasing for a negative Scale. Filters use it to
// invert a conversion by search.
func (c Conversion) Unbounded(v Value) Value {
	out, keep, err := c.Convert(v)
	switch {
	case err == nil && keep:
		return out
	case err == nil || c.Method != ConvertLinear || !v.Kind().Numeric():
		return Value{}
	}
	if c.ToKind == KindInt && v.Kind() == KindInt && integral(c.Scale) != nil && integral(c.Offset) != nil {
		// Exact int64 arithmetic overflowed: the result has the sign of
		// v*Scale (an overflowing sum has the sign of both terms).
		if (v.Int() < 0) != (c.Scale < 0) {
			return Float(math.Inf(-1))
		}
		return Float(math.Inf(1))
	}
	return Float(math.FMA(v.Float(), c.Scale, c.Offset))
}

// rule returns the attribute rule c stands for, so that Convert runs the
// code Apply runs.
func (c Conversion) rule() *attrRule {
	r := &attrRule{from: c.From, to: c.To, fromKind: c.FromKind, toKind: c.ToKind}
	switch c.Method {
	case ConvertLinear:
		r.Scale, r.Offset = c.Scale, c.Offset
	case ConvertTable:
		r.Values, r.KeepUnmapped = c.Values, c.KeepUnmapped
		if r.Values == nil {
			r.Values = map[string]string{}
		}
	}
	return r
}

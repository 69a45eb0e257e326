package filter

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/sion-go/sion/ontology"
)

// AnyType is the event type of a filter that matches every event type but
// the reserved ones (names beginning with ontology.ReservedPrefix: sion's
// own control traffic, whether the ontology knows the type or not), which
// only a filter naming them or an ancestor matches.
const AnyType = "*"

// anyTypeMatches reports whether AnyType filters match events of the type
// named name, which the ontology knows as t when known.
func anyTypeMatches(t *ontology.EventType, known bool, name string) bool {
	if known {
		return t.ID >= ontology.NumReserved
	}
	return !ontology.IsReserved(name)
}

// Mode says how many of a filter's predicates must hold for it to match
// (S1: complete, partial and weighted matching).
type Mode uint8

const (
	// ModeAll matches when every predicate holds (S1 complete match). It is
	// the default. The score is the number of predicates.
	ModeAll Mode = iota
	// ModeAtLeast matches when at least K of the N predicates hold (S1
	// partial match). The score is the number of predicates that hold.
	ModeAtLeast
	// ModeScore matches when the sum of the weights of the predicates that
	// hold reaches the threshold (S1 weighted match). The score is that sum,
	// added in the filter's predicate order (float64 addition is not
	// associative, so a threshold equal to the total weight to the last bit
	// may hold in one order of the predicates and not in another; Build
	// refuses a threshold above the total so added).
	ModeScore
)

// Source says where a predicate's operand is read from.
type Source uint8

const (
	// SourceAttr reads a typed attribute of the event by name.
	SourceAttr Source = iota
	// SourceJSON reads a JSON payload with a tidwall/gjson path.
	SourceJSON
	// SourceXPath evaluates an antchfx/xpath XPath 1.0 expression over an XML
	// payload; comparisons follow XPath 1.0 coercion.
	SourceXPath
	// sourceNone is the operand of the constant predicate `true`.
	sourceNone
)

// Operand names the value a predicate tests: an attribute, a JSON path or
// an XPath expression. Build one with Attr, JSON or XPath.
type Operand struct {
	Source Source
	// Name is the attribute name, the gjson path (with its escapes, such as
	// `temp\.celsius`) or the XPath expression.
	Name string
}

// Attr returns the operand for the event attribute name.
func Attr(name string) Operand { return Operand{Source: SourceAttr, Name: name} }

// JSON returns the operand for a gjson path into a JSON payload. Use
// EscapeJSON to build a path that names a key containing '.', '*', '?',
// '@', '#', '|' or '\'.
func JSON(path string) Operand { return Operand{Source: SourceJSON, Name: path} }

// XPath returns the operand for an XPath 1.0 expression over an XML payload.
func XPath(expr string) Operand { return Operand{Source: SourceXPath, Name: expr} }

// EscapeJSON returns the gjson path that names the single object key
// name, escaping the characters gjson treats as path syntax. For example
// EscapeJSON("temp.celsius") is `temp\.celsius`.
func EscapeJSON(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '.', '*', '?', '@', '#', '|', '\\', '!', '=', '<', '>', '%', '(', ')', '[', ']', '{', '}', ',', ':', '"', '~':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Op is a predicate's operator.
type Op uint8

// The predicate operators of DESIGN.md "Attribute predicates".
const (
	OpTrue      Op = iota // always holds; has no operand
	OpEQ                  // operand = Value
	OpNE                  // operand present and ≠ Value
	OpLT                  // operand < Value
	OpLE                  // operand ≤ Value
	OpGT                  // operand > Value
	OpGE                  // operand ≥ Value
	OpRange               // Value ≤ operand ≤ Hi, each end inclusive unless LoOpen / HiOpen
	OpIn                  // operand equals one of Set
	OpNotIn               // operand present and equals none of Set
	OpPrefix              // string operand starts with Value
	OpSuffix              // string operand ends with Value
	OpContains            // string operand contains Value
	OpExists              // operand present
	OpNotExists           // operand missing
	OpXPath               // the XPath operand, converted to boolean, is true
)

var opNames = [...]string{"true", "==", "!=", "<", "<=", ">", ">=", "in", "in", "not in", "prefix", "suffix", "contains", "exists", "not exists", "xpath"}

// String returns the operator as written in filter source.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Predicate is one condition of a filter. Build predicates with the
// methods of Operand (Attr("mag").GE(ontology.Float(4.5))) or True and
// XPathTrue; a Predicate is a plain value and may be copied. Set must not be
// modified after the predicate is passed to Build.
type Predicate struct {
	Operand Operand
	Op      Op
	// Value is the literal of a comparison, the lower end of a range, or the
	// string of prefix, suffix and contains.
	Value ontology.Value
	// Hi is the upper end of a range.
	Hi ontology.Value
	// LoOpen and HiOpen make a range end exclusive.
	LoOpen, HiOpen bool
	// Set holds the members of In and NotIn.
	Set []ontology.Value
	// Weight counts toward a ModeScore filter's threshold when the predicate
	// holds. Zero means 1. It must be finite and positive; other modes
	// require it to be zero or 1.
	Weight float64
}

func (o Operand) pred(op Op, v ontology.Value) Predicate {
	return Predicate{Operand: o, Op: op, Value: v}
}

// EQ returns the predicate operand = v.
func (o Operand) EQ(v ontology.Value) Predicate { return o.pred(OpEQ, v) }

// NE returns the predicate operand ≠ v; it is false when the operand is missing.
func (o Operand) NE(v ontology.Value) Predicate { return o.pred(OpNE, v) }

// LT returns the predicate operand < v.
func (o Operand) LT(v ontology.Value) Predicate { return o.pred(OpLT, v) }

// LE returns the predicate operand ≤ v.
func (o Operand) LE(v ontology.Value) Predicate { return o.pred(OpLE, v) }

// GT returns the predicate operand > v.
func (o Operand) GT(v ontology.Value) Predicate { return o.pred(OpGT, v) }

// GE returns the predicate operand ≥ v.
func (o Operand) GE(v ontology.Value) Predicate { return o.pred(OpGE, v) }

// Range returns the predicate lo ≤ operand ≤ hi; loOpen and hiOpen make
// the matching end exclusive.
func (o Operand) Range(lo, hi ontology.Value, loOpen, hiOpen bool) Predicate {
	return Predicate{Operand: o, Op: OpRange, Value: lo, Hi: hi, LoOpen: loOpen, HiOpen: hiOpen}
}

// In returns the predicate "operand is one of set".
func (o Operand) In(set ...ontology.Value) Predicate {
	return Predicate{Operand: o, Op: OpIn, Set: set}
}

// NotIn returns the predicate "operand is present and none of set".
func (o Operand) NotIn(set ...ontology.Value) Predicate {
	return Predicate{Operand: o, Op: OpNotIn, Set: set}
}

// Prefix returns the predicate "string operand starts with s".
func (o Operand) Prefix(s string) Predicate { return o.pred(OpPrefix, ontology.String(s)) }

// Suffix returns the predicate "string operand ends with s".
func (o Operand) Suffix(s string) Predicate { return o.pred(OpSuffix, ontology.String(s)) }

// Contains returns the predicate "string operand contains s".
func (o Operand) Contains(s string) Predicate { return o.pred(OpContains, ontology.String(s)) }

// Exists returns the predicate "operand is present".
func (o Operand) Exists() Predicate { return Predicate{Operand: o, Op: OpExists} }

// NotExists returns the predicate "operand is missing".
func (o Operand) NotExists() Predicate { return Predicate{Operand: o, Op: OpNotExists} }

// True returns the predicate that always holds.
func True() Predicate { return Predicate{Operand: Operand{Source: sourceNone}, Op: OpTrue} }

// XPathTrue returns the predicate that holds when the XPath 1.0 expression
// expr, converted with boolean(), is true for the XML payload.
func XPathTrue(expr string) Predicate {
	return Predicate{Operand: XPath(expr), Op: OpXPath}
}

// WithWeight returns p with weight w, for ModeScore filters.
func (p Predicate) WithWeight(w float64) Predicate { p.Weight = w; return p }

// MaxPredicates is the most predicates a filter may have: Build refuses
// more with a *BuildError. (A set predicate counts once, whatever its
// members.) Over a shared link the frame limit bounds a filter's source
// well below it.
const MaxPredicates = 1<<16 - 1

// Spec is everything a filter says, as the builder API takes it. Build
// validates it; Compile parses filter source into one.
type Spec struct {
	// Type is the event type the filter matches, with all its subtypes, or
	// AnyType. Empty means AnyType.
	Type string
	Mode Mode
	// AtLeast is K of a ModeAtLeast filter: 1 ≤ K ≤ len(Predicates).
	AtLeast int
	// Threshold is the score a ModeScore filter must reach; finite and > 0.
	Threshold float64
	// Namespaces binds XML namespace prefixes used by XPath operands to
	// namespace URIs. An XPath that uses an unbound prefix is refused.
	Namespaces map[string]string
	// Predicates are the filter's conditions, in order.
	Predicates []Predicate
}

// Filter is a compiled, validated filter: an event type (or AnyType), a
// match mode and predicates. A *Filter is immutable and safe for concurrent
// use by any number of goroutines; String gives its canonical source, which
// Compile reads back to an equal filter.
type Filter struct {
	typ       string
	mode      Mode
	atLeast   int
	threshold float64
	ns        []nsBinding // sorted by prefix
	preds     []Predicate
	xexprs    []*xpathExpr // per predicate: the boolean XPath evaluated; nil when no predicate reads XPath
	src       atomic.Pointer[string]
}

type nsBinding struct{ prefix, uri string }

// Type returns the filter's event type, or AnyType.
func (f *Filter) Type() string { return f.typ }

// Mode returns the filter's match mode.
func (f *Filter) Mode() Mode { return f.mode }

// AtLeast returns K of a ModeAtLeast filter, or 0.
func (f *Filter) AtLeast() int { return f.atLeast }

// Threshold returns the threshold of a ModeScore filter, or 0.
func (f *Filter) Threshold() float64 { return f.threshold }

// Predicates returns a copy of the filter's predicates, their sets
// included: changing it leaves the filter as it was.
func (f *Filter) Predicates() []Predicate {
	ps := append([]Predicate(nil), f.preds...)
	for i := range ps {
		if ps[i].Set != nil {
			ps[i].Set = append([]ontology.Value(nil), ps[i].Set...)
		}
	}
	return ps
}

// Namespaces returns a copy of the filter's XML namespace bindings.
func (f *Filter) Namespaces() map[string]string {
	m := make(map[string]string, len(f.ns))
	for _, b := range f.ns {
		m[b.prefix] = b.uri
	}
	return m
}

// Spec returns the filter as a Spec, for building a changed copy.
func (f *Filter) Spec() Spec {
	s := Spec{Type: f.typ, Mode: f.mode, AtLeast: f.atLeast, Threshold: f.threshold, Predicates: f.Predicates()}
	if len(f.ns) > 0 {
		s.Namespaces = f.Namespaces()
	}
	return s
}

// String returns the filter's canonical source text.
func (f *Filter) String() string {
	if p := f.src.Load(); p != nil {
		return *p
	}
	s := format(f) // made on first use: filters held by the million need not keep their text
	f.src.Store(&s)
	return s
}

// ErrInvalid is wrapped by every error Build (and so Compile) returns for a
// filter that is well-formed text but not a valid filter; test with
// errors.Is(err, filter.ErrInvalid).
var ErrInvalid = errors.New("filter: invalid filter")

// BuildError reports what is wrong with a Spec: Index is the position of
// the offending predicate in Spec.Predicates, or -1 for the filter as a whole.
type BuildError struct {
	Index int
	Pred  string // the predicate as source text, when Index ≥ 0
	Msg   string
}

// Error returns "filter: predicate N (source): what is wrong", or
// "filter: what is wrong" for the filter as a whole.
func (e *BuildError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("filter: predicate %d (%s): %s", e.Index+1, e.Pred, e.Msg)
	}
	return "filter: " + e.Msg
}

// Unwrap returns ErrInvalid.
func (e *BuildError) Unwrap() error { return ErrInvalid }

// Build validates spec and returns the filter it describes. It refuses, with
// a *BuildError naming the predicate: NaN or ±Inf literals; ordering (<, ≤,
// >, ≥, ranges) on bools or between kinds that do not compare; a range whose
// ends are out of order; string operators with non-string literals; empty
// sets; empty ranges; a score threshold above the total weight; an XPath
// that does not compile or uses an unbound namespace prefix
// (DESIGN.md "Values at the edges": a prefix matches by namespace URI, so
// an unbound one could match nothing); a bad mode, K or threshold;
// weights outside ModeScore. Build copies what it keeps of spec.
func Build(spec Spec) (*Filter, error) {
	f := &Filter{typ: spec.Type, mode: spec.Mode, atLeast: spec.AtLeast, threshold: spec.Threshold}
	if f.typ == "" {
		f.typ = AnyType
	}
	n := len(spec.Predicates)
	if n > MaxPredicates {
		return nil, &BuildError{Index: -1, Msg: fmt.Sprintf("%d predicates; a filter has at most %d", n, MaxPredicates)}
	}
	switch spec.Mode {
	case ModeAll:
		if spec.AtLeast != 0 || spec.Threshold != 0 {
			return nil, &BuildError{Index: -1, Msg: "AtLeast and Threshold apply only to their modes"}
		}
	case ModeAtLeast:
		if spec.AtLeast < 1 || spec.AtLeast > n {
			return nil, &BuildError{Index: -1, Msg: fmt.Sprintf("match atleast %d needs 1 ≤ K ≤ %d (the number of predicates)", spec.AtLeast, n)}
		}
	case ModeScore:
		if !(spec.Threshold > 0) || math.IsInf(spec.Threshold, 0) {
			return nil, &BuildError{Index: -1, Msg: fmt.Sprintf("match score threshold must be finite and > 0, not %v", spec.Threshold)}
		}
		total := 0.0
		for i := range spec.Predicates {
			total += spec.Predicates[i].weight()
		}
		if total < spec.Threshold {
			return nil, &BuildError{Index: -1, Msg: fmt.Sprintf("match score threshold %v is above the total weight %v: the filter could never match", spec.Threshold, total)}
		}
	default:
		return nil, &BuildError{Index: -1, Msg: fmt.Sprintf("unknown mode %d", spec.Mode)}
	}
	for p, uri := range spec.Namespaces {
		if !validNCName(p) {
			return nil, &BuildError{Index: -1, Msg: fmt.Sprintf("namespace prefix %q is not an XML name", p)}
		}
		f.ns = append(f.ns, nsBinding{p, uri})
	}
	sort.Slice(f.ns, func(i, j int) bool { return f.ns[i].prefix < f.ns[j].prefix })
	f.preds = make([]Predicate, n)
	for i, p := range spec.Predicates {
		if len(p.Set) > 0 {
			p.Set = append([]ontology.Value(nil), p.Set...)
		}
		if err := checkPredicate(&p, spec.Mode); err != nil {
			return nil, &BuildError{Index: i, Pred: formatPredicate(&p), Msg: err.Error()}
		}
		if p.Weight == 1 {
			p.Weight = 0 // the default, which String leaves out
		}
		if p.Operand.Source == SourceXPath {
			src, err := xpathSource(&p)
			if err != nil {
				return nil, &BuildError{Index: i, Pred: formatPredicate(&p), Msg: err.Error()}
			}
			x, err := compileXPath(src, f.Namespaces())
			if err != nil {
				return nil, &BuildError{Index: i, Pred: formatPredicate(&p), Msg: "xpath: " + err.Error()}
			}
			if f.xexprs == nil {
				f.xexprs = make([]*xpathExpr, n)
			}
			f.xexprs[i] = x
		}
		f.preds[i] = p
	}
	return f, nil
}

// xexpr returns the compiled XPath of predicate i, or nil.
func (f *Filter) xexpr(i int) *xpathExpr {
	if f.xexprs == nil {
		return nil
	}
	return f.xexprs[i]
}

// MustBuild is like Build but panics if spec is invalid. It simplifies
// initialisation of global filters and tests.
func MustBuild(spec Spec) *Filter {
	f, err := Build(spec)
	if err != nil {
		panic(err)
	}
	return f
}

func checkValue(v ontology.Value, what string) error {
	if !v.IsValid() {
		return fmt.Errorf("%s is missing", what)
	}
	if !v.IsFinite() {
		return fmt.Errorf("%s %v is not a finite number", what, v.Float())
	}
	return nil
}

func checkPredicate(p *Predicate, mode Mode) error {
	if p.Weight != 0 {
		if mode != ModeScore && p.Weight != 1 {
			return errors.New("weight applies only to a filter with match score")
		}
		if !(p.Weight > 0) || math.IsInf(p.Weight, 0) {
			return fmt.Errorf("weight must be finite and > 0, not %v", p.Weight)
		}
	}
	if p.Op == OpTrue {
		if p.Operand.Source != sourceNone || p.Operand.Name != "" {
			return errors.New("true takes no operand")
		}
		return nil
	}
	switch p.Operand.Source {
	case SourceAttr, SourceJSON, SourceXPath:
	default:
		return fmt.Errorf("unknown operand source %d", p.Operand.Source)
	}
	if p.Operand.Name == "" {
		return errors.New("empty operand name")
	}
	if strings.ContainsRune(p.Operand.Name, 0) {
		return errors.New("operand name contains a NUL byte")
	}
	switch p.Op {
	case OpEQ, OpNE:
		return checkValue(p.Value, "value")
	case OpLT, OpLE, OpGT, OpGE:
		if err := checkValue(p.Value, "value"); err != nil {
			return err
		}
		if p.Value.Kind() == ontology.KindBool {
			return fmt.Errorf("%s is not defined on bool values", p.Op)
		}
	case OpRange:
		if err := checkValue(p.Value, "lower end"); err != nil {
			return err
		}
		if err := checkValue(p.Hi, "upper end"); err != nil {
			return err
		}
		if p.Value.Kind() == ontology.KindBool || p.Hi.Kind() == ontology.KindBool {
			return errors.New("ranges are not defined on bool values")
		}
		c, ok := ontology.Compare(p.Value, p.Hi)
		if !ok {
			return fmt.Errorf("range ends %v and %v are of kinds that do not compare", p.Value, p.Hi)
		}
		if c > 0 {
			return fmt.Errorf("range lower end %v is above upper end %v", p.Value, p.Hi)
		}
		if c == 0 && (p.LoOpen || p.HiOpen) {
			return fmt.Errorf("range with equal ends %v and an open end is empty", p.Value)
		}
	case OpIn, OpNotIn:
		if len(p.Set) == 0 {
			return errors.New("empty set")
		}
		for _, v := range p.Set {
			if err := checkValue(v, "set member"); err != nil {
				return err
			}
		}
	case OpPrefix, OpSuffix, OpContains:
		if p.Value.Kind() != ontology.KindString {
			return fmt.Errorf("%s needs a string, not %v", p.Op, p.Value)
		}
	case OpExists, OpNotExists:
	case OpXPath:
		if p.Operand.Source != SourceXPath {
			return errors.New("a boolean xpath predicate needs an xpath operand")
		}
	default:
		return fmt.Errorf("unknown operator %d", p.Op)
	}
	return nil
}

func validNCName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= 0x80:
		case i > 0 && (r == '-' || r == '.' || r >= '0' && r <= '9'):
		default:
			return false
		}
	}
	return true
}

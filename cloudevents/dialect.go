package cloudevents

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// MaxFilters is the most filters CompileFilters returns for one
// expression, and the most conjunctions any step of its expansion into
// disjunctive normal form may hold: an expression that needs more is
// refused (ErrFilterUnsupported) at the construct where the count passed
// it.
const MaxFilters = 64

// MaxFilterDepth is the deepest nesting CompileFilters reads, of JSON
// arrays and objects and of filter expressions (all, any, not), and
// MaxFilterTests the most attribute tests (keys of exact, prefix and
// suffix objects) in one expression: more is refused
// (ErrFilterUnsupported) where it passed the limit, so that hostile
// input costs bounded time and memory (each nesting level lengthens
// every path below it, and each test is carried through every
// conjunction).
const (
	MaxFilterDepth = 64
	MaxFilterTests = 256
)

// Errors of CompileFilters. Each comes wrapped in a *FilterError that
// names the place in the expression; test with errors.Is.
var (
	// ErrFilterInvalid: the expression breaks the CloudEvents
	// Subscriptions API (a wrong JSON shape, an unknown dialect, an empty
	// attribute name or value, an empty all or any, a duplicate key) or
	// CESQL's grammar (a parse error).
	ErrFilterInvalid = errors.New("cloudevents: invalid filter expression")
	// ErrFilterUnsupported: the expression is valid but sion's filters
	// cannot say exactly what it says (a type test that would take in
	// subtypes it excludes, a negated prefix or suffix, an attribute sion
	// does not carry, a CESQL construct outside the compiled subset,
	// more than MaxFilters filters, nesting deeper than MaxFilterDepth,
	// more than MaxFilterTests tests, CESQL longer than MaxSQLBytes).
	ErrFilterUnsupported = errors.New("cloudevents: filter expression not expressible in sion")
	// ErrFilterNeverHolds: a test can never hold on a CloudEvent this
	// Codec writes — a type value that selects no type of the ontology,
	// an extension no event carries, an exact value not in the form the
	// Codec writes — or the expression as a whole matches no event.
	ErrFilterNeverHolds = errors.New("cloudevents: filter expression never holds")
)

// FilterError reports what CompileFilters or CompileSQL refused and where. Path is the
// place in the expression, from "filters": "filters[1].any[0].prefix"
// for a construct, with ".key" added for one attribute test
// ("filters[0].exact.type"). Err is ErrFilterInvalid,
// ErrFilterUnsupported or ErrFilterNeverHolds.
//
// In the sql dialect Pos is the 1-based byte offset in the CESQL
// expression of the construct refused, and Msg starts with "at Pos: ";
// Pos is 0 elsewhere, and for a refusal of the whole expression.
// CompileSQL's errors have Path "sql".
type FilterError struct {
	Path string
	Pos  int
	Msg  string
	Err  error
}

// Error returns "cloudevents: path: what is wrong".
func (e *FilterError) Error() string { return "cloudevents: " + e.Path + ": " + e.Msg }

// Unwrap returns e.Err.
func (e *FilterError) Unwrap() error { return e.Err }

func ferr(sentinel error, path, format string, args ...any) *FilterError {
	return &FilterError{Path: path, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

// CompileFilters compiles a CloudEvents Subscriptions API "filters" value
// (subscriptions spec, section 3.2.4: the dialects exact, prefix, suffix,
// all, any, not and sql) into sion filters against the Codec's ontology. An
// event of this Codec passes the CloudEvents filters — as ToCloudEvent
// writes it — exactly when at least one returned filter matches it
// (their OR). The filters are resolved (filter.Resolve) against the
// ontology, ready for Session.SubscribeFilters, which holds them as one
// subscription (their OR, S1: one or more filters per subscription) that
// receives each event once however many of the filters match it; an
// empty array gives one filter that matches every event ({type ⊑ *}).
//
// filters is JSON text ([]byte or json.RawMessage: the array, or one
// filter expression, which counts as an array of one) or the same value
// as encoding/json decodes it into an any ([]any or map[string]any with
// string leaves; also []map[string]any). The bytes are not kept. A
// duplicate key in a JSON object is refused.
//
// Semantics, kept exact; what cannot be is refused:
//
//   - The array's expressions must all hold (AND); all is AND, any is
//     OR, not is NOT, pushed inward by De Morgan's laws. The result is a
//     disjunction of conjunctions, one filter each (or one per type, see
//     below); more than MaxFilters at any step is refused, naming the
//     construct. Conjunctions with the same attribute tests share their
//     type tests (any of exact types is one union).
//   - exact, prefix and suffix compare the attribute's string form,
//     case-sensitively; an object with several keys needs them all to
//     hold (the spec's "MUST all ... match"); a missing attribute makes
//     the test false, so its not holds. Keys and values must not be
//     empty, and an object must name at least one key.
//   - type: the value selects the set S of the ontology's types whose
//     CloudEvents type (Config.TypePrefix + canonical name; synonyms are
//     never written) passes the test; not takes S's complement. sion
//     says "type ⊑ T" (T and all its subtypes), so the filters are "type
//     ⊑ M" for the maximal members M of S when S is closed under
//     subtypes, and no type clause when S holds every type; otherwise
//     the expression is refused (ErrFilterUnsupported), naming the type
//     tests and a subtype S leaves out that "type ⊑" would take in (an
//     exact type that has subtypes). A type value that selects no type
//     is refused (ErrFilterNeverHolds), in a not too: it is most likely
//     a mistake in the prefix or the name.
//   - An extension key names the attribute that travels as it
//     (Config.Extensions renames; otherwise the canonical name, never a
//     synonym); time and subject name Config.TimeAttribute and
//     SubjectAttribute. exact is "attr == v", v read as the attribute's
//     kind; a value that is not the string the Codec writes for that
//     value ("05" for an int, "1.50" for a float, a time not in UTC
//     RFC 3339 with nanoseconds trimmed) could never be equal and is
//     refused (ErrFilterNeverHolds), as is a float "0" or "-0" (sion
//     compares 0 and -0 equal; their strings differ:
//     ErrFilterUnsupported). not exact is "attr != v" OR "attr not
//     exists" (two filters). prefix and suffix apply to string
//     attributes only, and not prefix or not suffix is refused (sion
//     has no negated prefix). A test of an attribute that a type's
//     subtree lacks is decided per type: false, or true for a missing
//     attribute.
//   - Context attributes the Codec makes constant are decided at compile
//     time: specversion ("1.0"), source when Config.Source is set (as
//     the Codec writes it), and the ones it never writes: dataschema
//     (and 0.3's schemaurl and datacontentencoding), time without
//     Config.TimeAttribute, subject without Config.SubjectAttribute
//     (missing: a test on them is false, its not true). id,
//     datacontenttype, source when it follows the event's place, the
//     sion* control extensions (never trusted) and data are refused
//     (ErrFilterUnsupported). An extension key
//     that no attribute travels as is refused (ErrFilterNeverHolds).
//   - sql holds a CESQL expression, compiled as CompileSQL compiles it;
//     the filter holds when the expression is TRUE without an
//     evaluation error, and not around it holds otherwise (an error
//     included), as the subscriptions spec (3.2.4.1.2) defines the sql
//     filter's result. See the package documentation (CESQL).
//   - When no conjunction is left — the expression can never hold for
//     a type of the ontology — it is refused (ErrFilterNeverHolds,
//     path "filters"). Contradictory attribute tests within one
//     conjunction (x == 1 and x == 2) are not detected: the filter
//     simply never matches.
//
// Errors are *FilterError values wrapping ErrFilterInvalid,
// ErrFilterUnsupported or ErrFilterNeverHolds; test with errors.Is and
// errors.As. CompileFilters only reads the Codec and is safe for
// concurrent use.
func (c *Codec) CompileFilters(filters any) ([]*filter.Filter, error) {
	v := filters
	switch raw := filters.(type) {
	case json.RawMessage:
		v = []byte(raw)
	}
	if b, ok := v.([]byte); ok {
		var err error
		if v, err = decodeJSON(b); err != nil {
			return nil, err
		}
	}
	var list []any
	switch x := v.(type) {
	case []any:
		list = x
	case map[string]any:
		list = []any{x}
	case []map[string]any:
		for _, m := range x {
			list = append(list, m)
		}
	default:
		return nil, ferr(ErrFilterInvalid, "filters", "want an array of filter expressions, got %s", describe(v))
	}
	root := &expr{op: opAll, path: "filters"}
	var ps parser
	for i, e := range list {
		k, err := ps.parseExpr(e, fmt.Sprintf("filters[%d]", i), 0)
		if err != nil {
			return nil, err
		}
		root.kids = append(root.kids, k)
	}
	d, err := c.dnf(root, false)
	if err != nil {
		return nil, err
	}
	return c.build(d, "filters")
}

// conj is one conjunction of the disjunctive normal form: a type set
// (nil: every type) and attribute predicates, sorted by key, without
// duplicates.
type conj struct {
	types  []bool     // by type ID; only IDs ≥ ontology.NumReserved are ever set
	leaves []typeTest // the type tests that made types, for errors
	preds  []filter.Predicate
	keys   []string // predKey of each of preds
}

// typeTest is a type test as errors name it; pos is its offset in a sql
// expression (0 elsewhere).
type typeTest struct {
	path, text string
	pos        int
}

// dnf is a disjunction of conjunctions; nil is false, {{}} is true.
type dnf []conj

var dnfTrue = dnf{{}}

// predKey identifies p: its operator, operand and every value (a range's
// ends and openness, a set's members).
func predKey(p filter.Predicate) string {
	var b strings.Builder
	b.WriteString(p.Op.String() + "\x00" + p.Operand.Name)
	for _, v := range append([]ontology.Value{p.Value, p.Hi}, p.Set...) {
		b.WriteString("\x00" + v.Kind().String() + "\x00" + v.String())
	}
	b.WriteString("\x00" + strconv.FormatBool(p.LoOpen) + strconv.FormatBool(p.HiOpen))
	return b.String()
}

func single(p filter.Predicate) dnf {
	return dnf{{preds: []filter.Predicate{p}, keys: []string{predKey(p)}}}
}

// dnf returns e (negated when neg) in disjunctive normal form. The sql
// dialect's trees share nodes, so each node keeps its results.
func (c *Codec) dnf(e *expr, neg bool) (dnf, error) {
	i := 0
	if neg {
		i = 1
	}
	if m := e.memo[i]; m != nil {
		return m.d, m.err
	}
	d, err := c.dnfOf(e, neg)
	e.memo[i] = &dnfMemo{d, err}
	return d, err
}

type dnfMemo struct {
	d   dnf
	err error
}

func (c *Codec) dnfOf(e *expr, neg bool) (dnf, error) {
	switch e.op {
	case opSQL:
		t, err := c.compileSQL(e)
		if err != nil {
			return nil, err
		}
		return c.dnf(t, neg)
	case opAtom:
		if e.atom.err != nil {
			return nil, e.atom.err
		}
		if neg {
			d, err := c.negate(e.atom.d, e.path)
			if fe, ok := err.(*FilterError); ok && e.pos > 0 {
				fe.Pos, fe.Msg = e.pos, fmt.Sprintf("at %d: %s", e.pos, fe.Msg)
			}
			return d, err
		}
		return e.atom.d, nil
	case opLeaf:
		return c.leaf(e, neg)
	case opNot:
		return c.dnf(e.kids[0], !neg)
	}
	and := (e.op == opAll) != neg
	var acc dnf
	if and {
		acc = dnfTrue
	}
	for _, k := range e.kids {
		d, err := c.dnf(k, neg)
		if err != nil {
			return nil, err
		}
		if and {
			acc = c.and(acc, d)
		} else {
			acc = or(acc, d)
		}
		if len(acc) > MaxFilters {
			fe := ferr(ErrFilterUnsupported, e.path, "more than %d filters in disjunctive normal form (MaxFilters)", MaxFilters)
			if e.pos > 0 {
				fe.Pos, fe.Msg = e.pos, fmt.Sprintf("at %d: %s", e.pos, fe.Msg)
			}
			return nil, fe
		}
	}
	return acc, nil
}

// or returns a OR b; a true conjunction makes it true.
func or(a, b dnf) dnf {
	isTrue := func(x conj) bool { return x.types == nil && len(x.preds) == 0 }
	if slices.ContainsFunc(a, isTrue) || slices.ContainsFunc(b, isTrue) {
		return dnfTrue
	}
	return append(slices.Clip(a), b...)
}

// and returns a AND b, dropping conjunctions whose type sets do not meet.
func (c *Codec) and(a, b dnf) dnf {
	var out dnf
	for _, x := range a {
		for _, y := range b {
			z := conj{leaves: append(slices.Clip(x.leaves), y.leaves...)}
			switch {
			case x.types == nil:
				z.types = y.types
			case y.types == nil:
				z.types = x.types
			default:
				z.types = make([]bool, len(x.types))
				empty := true
				for i := range z.types {
					z.types[i] = x.types[i] && y.types[i]
					empty = empty && !z.types[i]
				}
				if empty {
					continue
				}
			}
			z.preds, z.keys = slices.Clip(x.preds), slices.Clip(x.keys)
			for i, k := range y.keys {
				j, found := slices.BinarySearch(z.keys, k)
				if !found {
					z.keys = slices.Insert(z.keys, j, k)
					z.preds = slices.Insert(z.preds, j, y.preds[i])
				}
			}
			out = append(out, z)
		}
	}
	return out
}

// constant returns the DNF of a test whose outcome is known.
func constant(holds bool) dnf {
	if holds {
		return dnfTrue
	}
	return nil
}

func test(dialect, s, v string) bool {
	switch dialect {
	case "exact":
		return s == v
	case "prefix":
		return strings.HasPrefix(s, v)
	}
	return strings.HasSuffix(s, v)
}

// leaf returns the DNF of one exact, prefix or suffix test, negated when
// neg.
func (c *Codec) leaf(e *expr, neg bool) (dnf, error) {
	switch e.key {
	case "type":
		return c.typeLeaf(e, neg)
	case "specversion":
		return constant(test(e.dialect, event1, e.value) != neg), nil
	case "source":
		if c.cfg.Source == "" {
			return nil, ferr(ErrFilterUnsupported, e.path, "the source follows each event's place (Config.Source is empty), which sion's filters do not read")
		}
		u, err := url.Parse(c.cfg.Source)
		if err != nil {
			return nil, ferr(ErrFilterUnsupported, e.path, "Config.Source %q: %v", c.cfg.Source, err)
		}
		return constant(test(e.dialect, (&types.URIRef{URL: *u}).String(), e.value) != neg), nil
	case "dataschema", "schemaurl", "datacontentencoding":
		return constant(neg), nil // never written: missing
	case "id", "datacontenttype":
		return nil, ferr(ErrFilterUnsupported, e.path, "sion's filters do not read the CloudEvent's %s", e.key)
	case "data":
		return nil, ferr(ErrFilterUnsupported, e.path, "data is the payload, not an attribute (sion's json() and xpath() operands read payloads)")
	case "time", "subject":
		attr, kind := c.timeAttr, ontology.KindTime
		if e.key == "subject" {
			attr, kind = c.subjAttr, ontology.KindString
		}
		if attr == "" {
			return constant(neg), nil // the Codec leaves it out
		}
		k, err := c.attrKind(e, attr)
		if err != nil {
			return nil, err
		}
		if k != kind {
			return nil, ferr(ErrFilterUnsupported, e.path, "attribute %q travels as the CloudEvent's %s but is %s", attr, e.key, k)
		}
		return c.attrLeaf(e, neg, attr, k)
	}
	if strings.HasPrefix(e.key, controlPrefix) {
		return nil, ferr(ErrFilterUnsupported, e.path, "the sion* extensions carry control information, which is never trusted and cannot be filtered")
	}
	attr, why := c.extensionAttribute(e.key)
	if why != "" {
		return nil, ferr(ErrFilterNeverHolds, e.path, "no CloudEvent of this Codec carries extension %q: %s", e.key, why)
	}
	k, err := c.attrKind(e, attr)
	if err != nil {
		return nil, err
	}
	return c.attrLeaf(e, neg, attr, k)
}

// event1 is the specversion ToCloudEvent writes.
const event1 = "1.0"

// extensionAttribute returns the attribute that travels as extension
// name, or why none does.
func (c *Codec) extensionAttribute(name string) (string, string) {
	if a, ok := c.fromExt[name]; ok {
		switch a {
		case c.timeAttr:
			return "", fmt.Sprintf("attribute %q travels as the CloudEvent's time", a)
		case c.subjAttr:
			return "", fmt.Sprintf("attribute %q travels as the CloudEvent's subject", a)
		}
		return a, ""
	}
	switch {
	case !c.o.HasAttribute(name):
		return "", "no type of the ontology has such an attribute"
	case c.o.CanonicalAttribute(name) != name:
		return "", fmt.Sprintf("it is a synonym; attribute %q travels under its canonical name", c.o.CanonicalAttribute(name))
	case c.toExt[name] != "":
		return "", fmt.Sprintf("attribute %q travels as extension %q", name, c.toExt[name])
	case name == c.timeAttr:
		return "", fmt.Sprintf("attribute %q travels as the CloudEvent's time", name)
	case name == c.subjAttr:
		return "", fmt.Sprintf("attribute %q travels as the CloudEvent's subject", name)
	}
	if p := extNameProblem(name); p != "" {
		return "", "its name " + p
	}
	return name, ""
}

// attrKind returns the kind of attribute attr, refusing one declared
// with different kinds by different types.
func (c *Codec) attrKind(e *expr, attr string) (ontology.Kind, error) {
	var kinds []ontology.Kind
	for id := ontology.NumReserved; id < c.o.NumTypes(); id++ {
		if a, ok := c.o.Attribute(id, attr); ok && !slices.Contains(kinds, a.Kind) {
			kinds = append(kinds, a.Kind)
		}
	}
	switch len(kinds) {
	case 0:
		return 0, ferr(ErrFilterNeverHolds, e.path, "no type of the ontology has attribute %q", attr)
	case 1:
		return kinds[0], nil
	}
	return 0, ferr(ErrFilterUnsupported, e.path, "attribute %q has the kinds %s and %s in different types", attr, kinds[0], kinds[1])
}

// attrLeaf returns the DNF of a test on attribute attr of kind k.
func (c *Codec) attrLeaf(e *expr, neg bool, attr string, k ontology.Kind) (dnf, error) {
	op := filter.Attr(attr)
	if e.dialect != "exact" {
		if k != ontology.KindString {
			return nil, ferr(ErrFilterUnsupported, e.path, "%s on attribute %q, which is %s: sion's %s tests strings only", e.dialect, attr, k, e.dialect)
		}
		if neg {
			return nil, ferr(ErrFilterUnsupported, e.path, "not %s: sion has no negated %s", e.dialect, e.dialect)
		}
		if e.dialect == "prefix" {
			return single(op.Prefix(e.value)), nil
		}
		return single(op.Suffix(e.value)), nil
	}
	v, err := exactValue(e, attr, k)
	if err != nil {
		return nil, err
	}
	if neg {
		return append(single(op.NE(v)), single(op.NotExists())...), nil
	}
	return single(op.EQ(v)), nil
}

// exactValue reads s, the value of an exact test on attribute attr of
// kind k, refusing a string the Codec never writes for a value of k.
func exactValue(e *expr, attr string, k ontology.Kind) (ontology.Value, error) {
	s := e.value
	never := func(canon string, why string) (ontology.Value, error) {
		if canon != "" {
			why = fmt.Sprintf("the Codec writes that value as %q", canon)
		}
		return ontology.Value{}, ferr(ErrFilterNeverHolds, e.path, "%q can never equal attribute %q (%s): %s", s, attr, k, why)
	}
	switch k {
	case ontology.KindString:
		return ontology.String(s), nil
	case ontology.KindInt:
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return never("", "not a decimal int64")
		}
		if c := strconv.FormatInt(i, 10); c != s {
			return never(c, "")
		}
		return ontology.Int(i), nil
	case ontology.KindFloat:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return never("", "not a finite float64")
		}
		if c := strconv.FormatFloat(f, 'g', -1, 64); c != s {
			return never(c, "")
		}
		if f == 0 {
			return ontology.Value{}, ferr(ErrFilterUnsupported, e.path, "%q on float attribute %q: sion compares 0 and -0 equal, their CloudEvents strings differ", s, attr)
		}
		return ontology.Float(f), nil
	case ontology.KindBool:
		if s != "true" && s != "false" {
			return never("", "not true or false")
		}
		return ontology.Bool(s == "true"), nil
	case ontology.KindTime:
		t, err := types.ParseTime(s)
		if err != nil {
			return never("", "not an RFC 3339 time")
		}
		if !ontology.TimeInRange(t) {
			return never("", "outside 1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z, the times sion holds")
		}
		if c := types.FormatTime(t); c != s {
			return never(c, "")
		}
		return ontology.Time(t), nil
	}
	return never("", "unknown kind")
}

// typeLeaf returns the DNF of a test on the CloudEvent's type.
func (c *Codec) typeLeaf(e *expr, neg bool) (dnf, error) {
	set := make([]bool, c.o.NumTypes())
	n := 0
	for id := ontology.NumReserved; id < len(set); id++ {
		if test(e.dialect, c.cfg.TypePrefix+c.o.Type(id).Name, e.value) {
			set[id] = true
			n++
		}
	}
	if n == 0 {
		return nil, ferr(ErrFilterNeverHolds, e.path, "%q selects no type of the ontology (a CloudEvent's type is %q followed by a canonical type name)", e.value, c.cfg.TypePrefix)
	}
	if neg {
		for id := ontology.NumReserved; id < len(set); id++ {
			set[id] = !set[id]
		}
		if n == len(set)-ontology.NumReserved {
			return nil, nil // not of every type: false
		}
	}
	desc := fmt.Sprintf("%s %q", e.path, e.value)
	if neg {
		desc = "not " + desc
	}
	return dnf{{types: set, leaves: []typeTest{{path: e.path, text: desc}}}}, nil
}

// group is the conjunctions of the DNF that share their predicates, with
// the union of their type sets.
type group struct {
	types  []bool // nil: every type
	leaves []typeTest
	preds  []filter.Predicate
}

// build turns the DNF into filters; path names the whole expression in
// errors.
func (c *Codec) build(d dnf, path string) ([]*filter.Filter, error) {
	var groups []*group
	byKey := map[string]*group{}
	for _, x := range d {
		k := strings.Join(x.keys, "\x01")
		g := byKey[k]
		if g == nil {
			g = &group{preds: x.preds}
			if x.types != nil {
				g.types = make([]bool, len(x.types))
			}
			byKey[k] = g
			groups = append(groups, g)
		}
		switch {
		case x.types == nil:
			g.types = nil
		case g.types != nil:
			for i, in := range x.types {
				g.types[i] = g.types[i] || in
			}
		}
		for _, l := range x.leaves {
			if !slices.Contains(g.leaves, l) {
				g.leaves = append(g.leaves, l)
			}
		}
	}
	var out []*filter.Filter
	for _, g := range groups {
		roots, err := c.roots(g)
		if err != nil {
			return nil, err
		}
		for _, r := range roots {
			preds, ok := c.predsBelow(r, g.preds)
			if !ok {
				continue
			}
			spec := filter.Spec{Predicates: preds}
			if r >= 0 {
				spec.Type = c.o.Type(r).Name
			}
			f, err := filter.Build(spec)
			if err == nil {
				f, err = filter.Resolve(c.o, f)
			}
			if err != nil {
				return nil, ferr(ErrFilterUnsupported, path, "%v", err)
			}
			out = append(out, f)
		}
	}
	if len(out) > MaxFilters {
		return nil, ferr(ErrFilterUnsupported, path, "%d filters, more than %d (MaxFilters)", len(out), MaxFilters)
	}
	if len(out) == 0 {
		return nil, ferr(ErrFilterNeverHolds, path, "the expression matches no event of any type of the ontology")
	}
	return out, nil
}

// roots returns the maximal types of g's type set (-1: every type),
// refusing a set that is not closed under subtypes.
func (c *Codec) roots(g *group) ([]int, error) {
	if g.types == nil {
		return []int{-1}, nil
	}
	all := true
	for id := ontology.NumReserved; id < len(g.types); id++ {
		all = all && g.types[id]
	}
	if all {
		return []int{-1}, nil
	}
	var roots []int
	for id := ontology.NumReserved; id < len(g.types); id++ {
		if !g.types[id] {
			continue
		}
		for _, d := range c.o.Descendants(id) {
			if !g.types[d] {
				texts := make([]string, len(g.leaves))
				for i, l := range g.leaves {
					texts[i] = l.text
				}
				fe := ferr(ErrFilterUnsupported, g.leaves[0].path, "the types selected by %s include %q but not its subtype %q, and sion's type ⊑ %s would deliver %q events too",
					strings.Join(texts, " and "), c.o.Type(id).Name, c.o.Type(d).Name, c.o.Type(id).Name, c.o.Type(d).Name)
				if l := g.leaves[0]; l.pos > 0 {
					fe.Pos, fe.Msg = l.pos, fmt.Sprintf("at %d: %s", l.pos, fe.Msg)
				}
				return nil, fe
			}
		}
		maximal := true
		for _, a := range c.o.Ancestors(id) {
			if a != id && g.types[a] {
				maximal = false
				break
			}
		}
		if maximal {
			roots = append(roots, id)
		}
	}
	return roots, nil
}

// predsBelow returns preds for a filter on type r (-1: every type):
// a test of an attribute that neither r, its ancestors nor its
// descendants have is decided — "not exists" holds and goes, any other
// never holds (ok false).
func (c *Codec) predsBelow(r int, preds []filter.Predicate) ([]filter.Predicate, bool) {
	if r < 0 {
		return preds, true
	}
	var out []filter.Predicate
	for _, p := range preds {
		if _, has := c.o.AttributeBelow(r, p.Operand.Name); has {
			out = append(out, p)
		} else if p.Op != filter.OpNotExists {
			return nil, false
		}
	}
	return out, true
}

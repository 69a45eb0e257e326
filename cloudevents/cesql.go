package cloudevents

// The compilation of a CESQL expression (cesql_parse.go) into the DNF of
// dialect.go. Each boolean node becomes a pair of trees: t holds where
// the node is true without an evaluation error, f where it is false
// without one; where neither holds, CESQL raised an error (a missing
// attribute, a failed cast), and a filter whose expression raised one
// never passes (subscriptions spec 3.2.4.1.2).

import (
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// CompileSQL compiles a CloudEvents SQL expression (CESQL v1) into sion
// filters, as CompileFilters compiles {"sql": src}: an event of this
// Codec passes the expression — it evaluates to TRUE on the CloudEvent
// ToCloudEvent writes, without an evaluation error — exactly when at
// least one returned filter matches it. The subset compiled, what is
// refused and why are in the package documentation (CESQL). Errors
// are *FilterError values with Path "sql" and Pos the byte offset of the
// construct refused, wrapping ErrFilterInvalid, ErrFilterUnsupported or
// ErrFilterNeverHolds. CompileSQL only reads the Codec and is safe for
// concurrent use. Source: CloudEvents CESQL v1 and S1's filters.
func (c *Codec) CompileSQL(src string) ([]*filter.Filter, error) {
	var tests int
	n, err := parseSQL(src, "sql", 0, &tests)
	if err != nil {
		return nil, err
	}
	d, err := c.dnf(&expr{op: opSQL, path: "sql", sql: n}, false)
	if err != nil {
		return nil, err
	}
	return c.build(d, "sql")
}

// atom is a DNF as a leaf of an expr tree, or the error that refuses it
// where it is needed.
type atom struct {
	d   dnf
	err error
}

func atomOf(d dnf) *expr      { return &expr{op: opAtom, atom: &atom{d: d}} }
func atomErr(err error) *expr { return &expr{op: opAtom, atom: &atom{err: err}} }

// pair is a boolean node: t where it is true, f where it is false, both
// without error.
type pair struct{ t, f *expr }

func constPair(b bool) pair {
	if b {
		return pair{atomOf(dnfTrue), atomOf(nil)}
	}
	return pair{atomOf(nil), atomOf(dnfTrue)}
}

// errPair is a node that is an evaluation error on every event.
func errPair() pair { return pair{atomOf(nil), atomOf(nil)} }

// conjOf returns the DNF of the conjunction of preds.
func conjOf(preds ...filter.Predicate) dnf {
	x := conj{}
	for _, p := range preds {
		k := predKey(p)
		j, found := slices.BinarySearch(x.keys, k)
		if !found {
			x.keys = slices.Insert(x.keys, j, k)
			x.preds = slices.Insert(x.preds, j, p)
		}
	}
	return dnf{x}
}

// sqlCompiler compiles one sql expression at path.
type sqlCompiler struct {
	c    *Codec
	path string
}

func (sc *sqlCompiler) fail(sentinel error, pos int, format string, args ...any) error {
	e := ferr(sentinel, sc.path, format, args...)
	e.Pos = pos
	e.Msg = "at " + strconv.Itoa(pos) + ": " + e.Msg
	return e
}

// at adds pos to a FilterError made by dialect.go's helpers.
func (sc *sqlCompiler) at(err error, pos int) error {
	if fe, ok := err.(*FilterError); ok && fe.Pos == 0 {
		fe.Path, fe.Pos, fe.Msg = sc.path, pos, "at "+strconv.Itoa(pos)+": "+fe.Msg
	}
	return err
}

// node names the trees of node n for errors.
func (sc *sqlCompiler) node(n *sqlNode, t, f *expr) pair {
	t.path, f.path = sc.path, sc.path
	if t.pos == 0 {
		t.pos = n.pos
	}
	if f.pos == 0 {
		f.pos = n.pos
	}
	return pair{t, f}
}

// compileSQL returns the tree of where e's expression passes, and keeps
// it as e's one kid.
func (c *Codec) compileSQL(e *expr) (*expr, error) {
	if len(e.kids) == 1 {
		return e.kids[0], nil
	}
	sc := &sqlCompiler{c: c, path: e.path}
	n := e.sql
	var p pair
	var err error
	switch n.kind {
	case sqlLit:
		if n.val.typ != sqlBoolean {
			return nil, sc.fail(ErrFilterNeverHolds, n.pos, "the expression is the %s %s, not a Boolean: it never passes", n.val.typ, n.val)
		}
	case sqlIdent:
		o, err := sc.operand(n)
		if err != nil {
			return nil, err
		}
		if o.kind != opdAttr || o.k != ontology.KindBool {
			return nil, sc.fail(ErrFilterNeverHolds, n.pos, "the expression is attribute %s, which is not a Boolean: it never passes", n.name)
		}
	}
	if p, err = sc.boolean(n); err != nil {
		return nil, err
	}
	e.kids = []*expr{p.t}
	return p.t, nil
}

// boolean compiles n where CESQL expects a Boolean.
func (sc *sqlCompiler) boolean(n *sqlNode) (pair, error) {
	switch n.kind {
	case sqlLit:
		if n.val.typ != sqlBoolean {
			return pair{}, sc.fail(ErrFilterUnsupported, n.pos, "the %s %s where a Boolean is expected: CESQL's casts to Boolean are not compiled (its spec and its TCK disagree on Integers)", n.val.typ, n.val)
		}
		return constPair(n.val.b), nil
	case sqlIdent:
		o, err := sc.operand(n)
		if err != nil {
			return pair{}, err
		}
		switch {
		case o.kind == opdMissing:
			return errPair(), nil
		case o.kind == opdAttr && o.k == ontology.KindBool:
			op := filter.Attr(o.attr)
			return sc.node(n, atomOf(single(op.EQ(ontology.Bool(true)))), atomOf(single(op.EQ(ontology.Bool(false))))), nil
		}
		return pair{}, sc.fail(ErrFilterUnsupported, n.pos, "attribute %s where a Boolean is expected: only a bool attribute is compiled there", n.name)
	case sqlNot:
		p, err := sc.boolean(n.kids[0])
		return pair{p.f, p.t}, err
	case sqlLogic:
		return sc.logic(n)
	case sqlCmp:
		return sc.cmp(n)
	case sqlLike:
		p, err := sc.like(n)
		if n.not {
			p.t, p.f = p.f, p.t
		}
		return p, err
	case sqlIn:
		p, err := sc.in(n)
		if n.not {
			p.t, p.f = p.f, p.t
		}
		return p, err
	}
	return sc.exists(n)
}

// logic folds a chain of one operator left to right. AND and OR are
// short-circuit (CESQL 3.4.2): false AND x is false and true OR x true
// whatever x, even an error; XOR reads both sides.
func (sc *sqlCompiler) logic(n *sqlNode) (pair, error) {
	acc, err := sc.boolean(n.kids[0])
	if err != nil {
		return pair{}, err
	}
	for _, k := range n.kids[1:] {
		b, err := sc.boolean(k)
		if err != nil {
			return pair{}, err
		}
		both := func(x, y *expr) *expr { return &expr{op: opAll, path: sc.path, pos: n.pos, kids: []*expr{x, y}} }
		either := func(x, y *expr) *expr { return &expr{op: opAny, path: sc.path, pos: n.pos, kids: []*expr{x, y}} }
		switch n.op {
		case "AND":
			acc = sc.node(n, both(acc.t, b.t), either(acc.f, both(acc.t, b.f)))
		case "OR":
			acc = sc.node(n, either(acc.t, both(acc.f, b.t)), both(acc.f, b.f))
		default:
			acc = sc.node(n, either(both(acc.t, b.f), both(acc.f, b.t)), either(both(acc.t, b.t), both(acc.f, b.f)))
		}
	}
	return acc, nil
}

type operandKind uint8

const (
	opdConst   operandKind = iota // the same value on every event: val
	opdMissing                    // never written: an error on every event
	opdType                       // the CloudEvent's type
	opdAttr                       // attribute attr of kind k
)

type operand struct {
	kind operandKind
	val  sqlValue
	attr string
	k    ontology.Kind
}

// operand resolves identifier n as dialect.go's leaf resolves a key.
func (sc *sqlCompiler) operand(n *sqlNode) (operand, error) {
	c := sc.c
	switch n.name {
	case "type":
		return operand{kind: opdType}, nil
	case "specversion":
		return operand{kind: opdConst, val: sqlValue{typ: sqlString, s: event1}}, nil
	case "source":
		if c.cfg.Source == "" {
			return operand{}, sc.fail(ErrFilterUnsupported, n.pos, "the source follows each event's place (Config.Source is empty), which sion's filters do not read")
		}
		u, err := url.Parse(c.cfg.Source)
		if err != nil {
			return operand{}, sc.fail(ErrFilterUnsupported, n.pos, "Config.Source %q: %v", c.cfg.Source, err)
		}
		return operand{kind: opdConst, val: sqlValue{typ: sqlString, s: (&types.URIRef{URL: *u}).String()}}, nil
	case "dataschema", "schemaurl", "datacontentencoding":
		return operand{kind: opdMissing}, nil
	case "id", "datacontenttype":
		return operand{}, sc.fail(ErrFilterUnsupported, n.pos, "sion's filters do not read the CloudEvent's %s", n.name)
	case "data":
		return operand{}, sc.fail(ErrFilterUnsupported, n.pos, "data is the payload, not an attribute (CESQL does not read it either)")
	case "time", "subject":
		attr, kind := c.timeAttr, ontology.KindTime
		if n.name == "subject" {
			attr, kind = c.subjAttr, ontology.KindString
		}
		if attr == "" {
			return operand{kind: opdMissing}, nil
		}
		k, err := c.attrKind(&expr{path: sc.path}, attr)
		if err != nil {
			return operand{}, sc.at(err, n.pos)
		}
		if k != kind {
			return operand{}, sc.fail(ErrFilterUnsupported, n.pos, "attribute %q travels as the CloudEvent's %s but is %s", attr, n.name, k)
		}
		return operand{kind: opdAttr, attr: attr, k: k}, nil
	}
	if strings.HasPrefix(n.name, controlPrefix) {
		return operand{}, sc.fail(ErrFilterUnsupported, n.pos, "%s: the sion* extensions carry control information, which is never trusted and cannot be filtered", n.name)
	}
	attr, why := c.extensionAttribute(n.name)
	if why != "" {
		return operand{}, sc.fail(ErrFilterNeverHolds, n.pos, "no CloudEvent of this Codec carries extension %q: %s", n.name, why)
	}
	k, err := c.attrKind(&expr{path: sc.path}, attr)
	if err != nil {
		return operand{}, sc.at(err, n.pos)
	}
	return operand{kind: opdAttr, attr: attr, k: k}, nil
}

// exists compiles EXISTS n.name.
func (sc *sqlCompiler) exists(n *sqlNode) (pair, error) {
	switch n.name {
	case "id", "type", "specversion", "source":
		return constPair(true), nil // required (CESQL 3.4.4)
	}
	o, err := sc.operand(n)
	if err != nil {
		return pair{}, err
	}
	switch o.kind {
	case opdConst, opdType:
		return constPair(true), nil
	case opdMissing:
		return constPair(false), nil
	}
	op := filter.Attr(o.attr)
	return sc.node(n, atomOf(single(op.Exists())), atomOf(single(op.NotExists()))), nil
}

// side returns the attribute and the literal of a two-sided operation,
// refusing what is neither.
func (sc *sqlCompiler) side(n, k *sqlNode, what string) error {
	switch k.kind {
	case sqlLit, sqlIdent:
		return nil
	case sqlNot:
		return sc.fail(ErrFilterUnsupported, k.pos, "NOT applies to %s alone (it binds tighter than %s): write NOT ( … ) around the whole test", describeSQL(k.kids[0]), what)
	}
	return sc.fail(ErrFilterUnsupported, k.pos, "%s as an operand of %s: sion's filters compare an attribute with literals", describeSQL(k), what)
}

func describeSQL(n *sqlNode) string {
	switch n.kind {
	case sqlLit:
		return n.val.String()
	case sqlIdent:
		return n.name
	case sqlNot:
		return "NOT " + describeSQL(n.kids[0])
	case sqlCmp:
		return describeSQL(n.kids[0]) + " " + n.op + " " + describeSQL(n.kids[1])
	case sqlLogic:
		return "(… " + n.op + " …)"
	case sqlLike:
		return describeSQL(n.kids[0]) + notWord(n.not) + " LIKE " + strconv.Quote(n.pattern)
	case sqlIn:
		return describeSQL(n.kids[0]) + notWord(n.not) + " IN (…)"
	}
	return "EXISTS " + n.name
}

func notWord(not bool) string {
	if not {
		return " NOT"
	}
	return ""
}

// cmp compiles a comparison.
func (sc *sqlCompiler) cmp(n *sqlNode) (pair, error) {
	l, r := n.kids[0], n.kids[1]
	for _, k := range n.kids {
		if err := sc.side(n, k, n.op); err != nil {
			return pair{}, err
		}
	}
	if l.kind == sqlIdent && r.kind == sqlIdent {
		hint := ""
		for _, k := range []*sqlNode{l, r} {
			if isDigit(k.name[0]) {
				// tsunami = 1e3: CESQL reads 1e3 as an attribute's name.
				hint = " (" + k.name + " is an attribute's name: CESQL's numbers are decimal integers, without exponent, fraction or hexadecimal)"
			}
		}
		return pair{}, sc.fail(ErrFilterUnsupported, n.pos, "%s %s %s compares two attributes: sion's filters compare an attribute with literals%s", l.name, n.op, r.name, hint)
	}
	if l.kind == sqlLit && r.kind == sqlLit {
		res, st := sqlCompare(l.val, n.op, r.val)
		return sc.outcome(n, res, st)
	}
	id, lit, attrLeft := l, r.val, true
	if l.kind == sqlLit {
		id, lit, attrLeft = r, l.val, false
	}
	o, err := sc.operand(id)
	if err != nil {
		return pair{}, err
	}
	ordering := n.op != "=" && n.op != "!=" && n.op != "<>"
	eval := func(v sqlValue, op string) (bool, castStatus) {
		if attrLeft {
			return sqlCompare(v, op, lit)
		}
		return sqlCompare(lit, op, v)
	}
	if o.kind != opdAttr || o.k == ontology.KindBool {
		eq := "="
		if ordering {
			eq = n.op
		}
		p, err := sc.finite(n, o, func(v sqlValue) (bool, castStatus) { return eval(v, eq) }, ordering)
		if err != nil || ordering || n.op == "=" {
			return p, err
		}
		return pair{p.f, p.t}, nil
	}
	var p pair
	if ordering {
		p, err = sc.order(n, o, lit, attrLeft)
	} else {
		p, err = sc.equal(n, o, lit, attrLeft)
		if n.op != "=" {
			p.t, p.f = p.f, p.t
		}
	}
	return p, err
}

// outcome is the pair of a comparison of two literals.
func (sc *sqlCompiler) outcome(n *sqlNode, res bool, st castStatus) (pair, error) {
	switch st {
	case castContested:
		return pair{}, sc.contested(n)
	case castFailed:
		return errPair(), nil
	}
	return constPair(res), nil
}

func (sc *sqlCompiler) contested(n *sqlNode) error {
	return sc.fail(ErrFilterUnsupported, n.pos, "%s casts an Integer to a Boolean, which CESQL's spec allows and its TCK refuses (NOT 10 is a cast error)", describeSQL(n))
}

// finite compiles a test of an operand whose values are few — a
// constant, a missing attribute, the type, a bool attribute — by
// evaluating it on each value. ordering says whether an error on every
// value is the refusal (an ordering) rather than a test that never holds.
func (sc *sqlCompiler) finite(n *sqlNode, o operand, test func(sqlValue) (bool, castStatus), ordering bool) (pair, error) {
	c := sc.c
	var vals []sqlValue
	switch o.kind {
	case opdMissing:
		return errPair(), nil
	case opdConst:
		vals = []sqlValue{o.val}
	case opdType:
		for id := ontology.NumReserved; id < c.o.NumTypes(); id++ {
			vals = append(vals, sqlValue{typ: sqlString, s: c.cfg.TypePrefix + c.o.Type(id).Name})
		}
	default:
		vals = []sqlValue{{typ: sqlBoolean, b: false}, {typ: sqlBoolean, b: true}}
	}
	ts, fs := make([]bool, len(vals)), make([]bool, len(vals))
	nt, nerr := 0, 0
	for i, v := range vals {
		res, st := test(v)
		switch st {
		case castContested:
			return pair{}, sc.contested(n)
		case castFailed:
			nerr++
			continue
		}
		ts[i], fs[i] = res, !res
		if res {
			nt++
		}
	}
	switch {
	case o.kind == opdConst:
		if nerr > 0 {
			return errPair(), nil
		}
		return constPair(ts[0]), nil
	case nerr == len(vals):
		return pair{}, sc.fail(ErrFilterNeverHolds, n.pos, "%s is an evaluation error (a failed cast) on every event", describeSQL(n))
	case nt == 0 && !ordering && o.kind == opdType:
		return pair{}, sc.fail(ErrFilterNeverHolds, n.pos, "%s holds for no type of the ontology (a CloudEvent's type is %q followed by a canonical type name)", describeSQL(n), c.cfg.TypePrefix)
	case nt == 0 && !ordering:
		return pair{}, sc.fail(ErrFilterNeverHolds, n.pos, "%s holds for no value of bool attribute %s", describeSQL(n), o.attr)
	}
	if o.kind == opdType {
		typeSet := func(in []bool) *expr {
			set := make([]bool, c.o.NumTypes())
			any := false
			for i, b := range in {
				set[ontology.NumReserved+i] = b
				any = any || b
			}
			if !any {
				return atomOf(nil)
			}
			text := describeSQL(n)
			return atomOf(dnf{{types: set, leaves: []typeTest{{path: sc.path, text: text, pos: n.pos}}}})
		}
		return sc.node(n, typeSet(ts), typeSet(fs)), nil
	}
	boolSet := func(in []bool) *expr {
		op := filter.Attr(o.attr)
		switch {
		case in[0] && in[1]:
			return atomOf(single(op.Exists()))
		case in[0]:
			return atomOf(single(op.EQ(ontology.Bool(false))))
		case in[1]:
			return atomOf(single(op.EQ(ontology.Bool(true))))
		}
		return atomOf(nil)
	}
	return sc.node(n, boolSet(ts), boolSet(fs)), nil
}

const (
	minInt32 = math.MinInt32
	maxInt32 = math.MaxInt32
)

// in32 is "attr is an Integer in the CloudEvent": the Codec writes an int
// attribute beyond 32 bits as its decimal String.
func in32(op filter.Operand) filter.Predicate {
	return op.Range(ontology.Int(minInt32), ontology.Int(maxInt32), false, false)
}

// equal compiles attr = lit (or lit = attr when !attrLeft) for an
// attribute of kind string, int, float or time. CESQL casts the left
// operand to the right one's type (3.7).
func (sc *sqlCompiler) equal(n *sqlNode, o operand, lit sqlValue, attrLeft bool) (pair, error) {
	op := filter.Attr(o.attr)
	// stringEq: the attribute's CloudEvents string equals s.
	stringEq := func(s string) (pair, error) {
		v, err := exactValue(&expr{path: sc.path, value: s}, o.attr, o.k)
		if err != nil {
			return pair{}, sc.at(err, n.pos)
		}
		return sc.node(n, atomOf(single(op.EQ(v))), atomOf(single(op.NE(v)))), nil
	}
	if !attrLeft {
		// lit is cast to the attribute's type: a String, or, for an int
		// attribute within 32 bits, an Integer.
		s, _ := sqlCast(lit, sqlString)
		if o.k != ontology.KindInt {
			return stringEq(s.s)
		}
		if i, st := sqlCast(lit, sqlInteger); st == castOK {
			v := ontology.Int(i.i)
			return sc.node(n, atomOf(single(op.EQ(v))), atomOf(single(op.NE(v)))), nil
		}
		// a cast error on every Integer; equal to a String beyond 32 bits
		d, err := strconv.ParseInt(lit.s, 10, 64)
		if err != nil || strconv.FormatInt(d, 10) != lit.s {
			return pair{}, sc.fail(ErrFilterNeverHolds, n.pos, "%s: %q is not an int the Codec writes, and CESQL casts it to an Integer to compare with %s", describeSQL(n), lit.s, o.attr)
		}
		v := ontology.Int(d)
		f := append(conjOf(op.LT(ontology.Int(minInt32)), op.NE(v)), conjOf(op.GT(ontology.Int(maxInt32)), op.NE(v))...)
		return sc.node(n, atomOf(single(op.EQ(v))), atomOf(f)), nil
	}
	switch lit.typ {
	case sqlString:
		return stringEq(lit.s)
	case sqlBoolean:
		if o.k == ontology.KindInt {
			return pair{}, sc.contested(n)
		}
		if o.k == ontology.KindString {
			return pair{}, sc.fail(ErrFilterUnsupported, n.pos, "%s casts string attribute %s to a Boolean, which takes any case (\"True\", \"tRUE\", …)", describeSQL(n), o.attr)
		}
		return pair{}, sc.fail(ErrFilterNeverHolds, n.pos, "%s casts %s attribute %s to a Boolean, which fails on every value the Codec writes", describeSQL(n), o.k, o.attr)
	}
	// lit is an Integer: the attribute is cast to an Integer.
	c := ontology.Int(lit.i)
	switch o.k {
	case ontology.KindInt:
		return sc.node(n, atomOf(single(op.EQ(c))), atomOf(conjOf(in32(op), op.NE(c)))), nil
	case ontology.KindFloat:
		s := strconv.FormatFloat(float64(lit.i), 'g', -1, 64)
		if i, err := strconv.ParseInt(s, 10, 32); err != nil || i != lit.i {
			return pair{}, sc.fail(ErrFilterNeverHolds, n.pos, "%s: the Codec writes %s of float attribute %s as %q, which is not an Integer", describeSQL(n), s, o.attr, s)
		}
		return sc.node(n, atomOf(single(op.EQ(ontology.Float(float64(lit.i))))),
			atomErr(sc.fail(ErrFilterUnsupported, n.pos, "NOT of %s: false needs float attribute %s to be written as an Integer (whole, below 10^6), which sion cannot test", describeSQL(n), o.attr))), nil
	case ontology.KindString:
		return pair{}, sc.fail(ErrFilterUnsupported, n.pos, "%s casts string attribute %s to an Integer, which infinitely many strings (\"5\", \"05\", \"+5\") give", describeSQL(n), o.attr)
	}
	return pair{}, sc.fail(ErrFilterNeverHolds, n.pos, "%s casts %s attribute %s to an Integer, which fails on every value the Codec writes", describeSQL(n), o.k, o.attr)
}

// order compiles an ordering (<, <=, >, >=), which CESQL defines on
// Integers only: both sides are cast to Integers.
func (sc *sqlCompiler) order(n *sqlNode, o operand, lit sqlValue, attrLeft bool) (pair, error) {
	i, st := sqlCast(lit, sqlInteger)
	if st != castOK {
		return pair{}, sc.fail(ErrFilterNeverHolds, n.pos, "%s: %s cannot be cast to an Integer, an evaluation error on every event", describeSQL(n), lit)
	}
	switch o.k {
	case ontology.KindTime:
		return pair{}, sc.fail(ErrFilterNeverHolds, n.pos, "%s: CESQL orders Integers only, and time attribute %s is a String (RFC 3339) that never casts to one", describeSQL(n), o.attr)
	case ontology.KindString, ontology.KindFloat:
		return pair{}, sc.fail(ErrFilterUnsupported, n.pos, "%s: CESQL orders Integers only, casting %s attribute %s's String to one, which sion cannot test", describeSQL(n), o.k, o.attr)
	}
	opr := n.op
	if !attrLeft {
		opr = map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<="}[opr]
	}
	op := filter.Attr(o.attr)
	neg := map[string]string{"<": ">=", "<=": ">", ">": "<=", ">=": "<"}
	return sc.node(n, atomOf(range32(op, opr, i.i)), atomOf(range32(op, neg[opr], i.i))), nil
}

// range32 is "attr op c" where attr is an Integer (within 32 bits): one
// range, or false when it is empty.
func range32(op filter.Operand, rel string, c int64) dnf {
	lo, hi, loOpen, hiOpen := int64(minInt32), int64(maxInt32), false, false
	switch rel {
	case "<":
		hi, hiOpen = c, true
	case "<=":
		hi = c
	case ">":
		lo, loOpen = c, true
	default:
		lo = c
	}
	if lo == hi && (loOpen || hiOpen) {
		return nil
	}
	return single(op.Range(ontology.Int(lo), ontology.Int(hi), loOpen, hiOpen))
}

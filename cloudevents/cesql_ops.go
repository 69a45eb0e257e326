package cloudevents

// CESQL's LIKE and IN, its casts and comparisons as the compiler
// evaluates them on known values, and the negation of a compiled
// expression for the not dialect (see cesql.go).

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// likeItem is one element of a LIKE pattern: a literal rune, '%' or '_'.
type likeItem struct {
	r        rune
	wildcard bool
}

// likePattern reads a LIKE pattern: \% and \_ are the characters,
// another backslash is itself (CESQL 3.4.3; its TCK matches 'ab\c' by
// 'ab\c'); \\ is refused, since the spec does not say whether it escapes
// the backslash.
func (sc *sqlCompiler) likePattern(n *sqlNode) ([]likeItem, error) {
	rs := []rune(n.pattern)
	var out []likeItem
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\\' && i+1 < len(rs) && (rs[i+1] == '%' || rs[i+1] == '_'):
			out = append(out, likeItem{r: rs[i+1]})
			i++
		case r == '\\' && i+1 < len(rs) && rs[i+1] == '\\':
			return nil, sc.fail(ErrFilterUnsupported, n.pos, "the LIKE pattern %q has \\\\, which CESQL's spec leaves unclear (an escaped backslash, or two)", n.pattern)
		case r == '%' || r == '_':
			out = append(out, likeItem{r: r, wildcard: true})
		default:
			out = append(out, likeItem{r: r})
		}
	}
	return out, nil
}

func likeRegexp(items []likeItem) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)^`)
	for _, it := range items {
		switch {
		case it.wildcard && it.r == '%':
			b.WriteString(`.*`)
		case it.wildcard:
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(it.r)))
		}
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

// like compiles x LIKE pattern (the caller swaps for NOT LIKE). The left
// side is cast to a String, which never fails.
func (sc *sqlCompiler) like(n *sqlNode) (pair, error) {
	k := n.kids[0]
	if err := sc.side(n, k, "LIKE"); err != nil {
		return pair{}, err
	}
	items, err := sc.likePattern(n)
	if err != nil {
		return pair{}, err
	}
	re := likeRegexp(items)
	test := func(v sqlValue) (bool, castStatus) {
		s, _ := sqlCast(v, sqlString)
		return re.MatchString(s.s), castOK
	}
	if k.kind == sqlLit {
		return constPair(re.MatchString(mustString(k.val))), nil
	}
	o, err := sc.operand(k)
	if err != nil {
		return pair{}, err
	}
	if o.kind != opdAttr || o.k == ontology.KindBool {
		return sc.finite(n, o, test, false)
	}
	// The shape: literal text between leading and trailing runs of %.
	lo, hi := 0, len(items)
	for lo < hi && items[lo].wildcard && items[lo].r == '%' {
		lo++
	}
	for hi > lo && items[hi-1].wildcard && items[hi-1].r == '%' {
		hi--
	}
	var lit strings.Builder
	for _, it := range items[lo:hi] {
		if it.wildcard {
			return pair{}, sc.fail(ErrFilterUnsupported, n.pos, "the LIKE pattern %q has %q inside it: sion tests a prefix, a suffix or a substring, not a pattern", n.pattern, string(it.r))
		}
		lit.WriteRune(it.r)
	}
	s := lit.String()
	op := filter.Attr(o.attr)
	lead, trail := lo > 0, hi < len(items)
	switch {
	case len(items) > 0 && lo == len(items): // only %: any String
		return sc.node(n, atomOf(single(op.Exists())), atomOf(nil)), nil
	case !lead && !trail:
		return sc.equal(n, o, sqlValue{typ: sqlString, s: s}, true)
	case o.k == ontology.KindTime && !lead && trail:
		return sc.timePrefix(n, o, s)
	case o.k != ontology.KindString:
		return pair{}, sc.fail(ErrFilterUnsupported, n.pos, "LIKE %q on %s attribute %s: sion tests prefixes, suffixes and substrings of strings only", n.pattern, o.k, o.attr)
	}
	var t filter.Predicate
	what := "substring"
	switch {
	case lead && trail:
		t = op.Contains(s)
	case lead:
		t, what = op.Suffix(s), "suffix"
	default:
		t, what = op.Prefix(s), "prefix"
	}
	return sc.node(n, atomOf(single(t)), atomErr(sc.fail(ErrFilterUnsupported, n.pos, "NOT of LIKE %q: sion has no negated %s", n.pattern, what))), nil
}

// timeFields are the prefixes of a time's CloudEvents string that end
// at a field: its layout, the separator that follows it, and the end of
// the interval that starts at t.
var timeFields = []struct {
	layout, sep string
	next        func(t time.Time) time.Time
}{
	{"2006", "-", func(t time.Time) time.Time { return t.AddDate(1, 0, 0) }},
	{"2006-01", "-", func(t time.Time) time.Time { return t.AddDate(0, 1, 0) }},
	{"2006-01-02", "T", func(t time.Time) time.Time { return t.AddDate(0, 0, 1) }},
	{"2006-01-02T15", ":", func(t time.Time) time.Time { return t.Add(time.Hour) }},
	{"2006-01-02T15:04", ":", func(t time.Time) time.Time { return t.Add(time.Minute) }},
	{"2006-01-02T15:04:05", "", func(t time.Time) time.Time { return t.Add(time.Second) }},
}

// timePrefix compiles t LIKE 'p%' on a time attribute: the Codec writes
// a time as RFC 3339 in UTC with a four-digit year, so a prefix that
// ends at a field (a year, a month, … a second, with or without the
// separator after it) selects one interval [lo, hi).
func (sc *sqlCompiler) timePrefix(n *sqlNode, o operand, p string) (pair, error) {
	for _, f := range timeFields {
		s := p
		if f.sep != "" && len(s) == len(f.layout)+1 && strings.HasSuffix(s, f.sep) {
			s = s[:len(s)-1]
		}
		if len(s) != len(f.layout) {
			continue
		}
		lo, err := time.Parse(f.layout, s)
		if err != nil || lo.Format(f.layout) != s {
			return pair{}, sc.fail(ErrFilterNeverHolds, n.pos, "%s: no time the Codec writes (RFC 3339, UTC) starts with %q", describeSQL(n), p)
		}
		hi := f.next(lo)
		if lo.Before(ontology.MinTime) || hi.After(ontology.MaxTime) {
			return pair{}, sc.fail(ErrFilterUnsupported, n.pos, "%s: the times it selects reach beyond 1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z, the times sion holds", describeSQL(n))
		}
		op := filter.Attr(o.attr)
		tlo, thi := ontology.Time(lo), ontology.Time(hi)
		return sc.node(n, atomOf(single(op.Range(tlo, thi, false, true))), atomOf(append(single(op.LT(tlo)), single(op.GE(thi))...))), nil
	}
	return pair{}, sc.fail(ErrFilterUnsupported, n.pos, "LIKE %q on time attribute %s: only a prefix that ends at a field (a year, a month, … a second) selects an interval sion can test", n.pattern, o.attr)
}

func mustString(v sqlValue) string {
	s, _ := sqlCast(v, sqlString)
	return s.s
}

// in compiles x IN (…) (the caller swaps for NOT IN). Each member is cast
// to x's type (CESQL 3.4.5); a member whose cast can fail is refused,
// since CESQL does not say whether a failed cast is an error when
// another member matches.
func (sc *sqlCompiler) in(n *sqlNode) (pair, error) {
	k := n.kids[0]
	if err := sc.side(n, k, "IN"); err != nil {
		return pair{}, err
	}
	set := n.kids[1:]
	for _, m := range set {
		if m.kind != sqlLit {
			return pair{}, sc.fail(ErrFilterUnsupported, m.pos, "%s in an IN list: sion's filters compare an attribute with literals", describeSQL(m))
		}
	}
	member := func(x sqlValue) (bool, castStatus) {
		for _, m := range set {
			v, st := sqlCast(m.val, x.typ)
			if st != castOK {
				return false, st
			}
			if v == x {
				return true, castOK
			}
		}
		return false, castOK
	}
	if k.kind == sqlLit {
		res, st := member(k.val)
		return sc.outcome(n, res, st)
	}
	o, err := sc.operand(k)
	if err != nil {
		return pair{}, err
	}
	if o.kind != opdAttr || o.k == ontology.KindBool {
		failed := false
		strict := func(x sqlValue) (bool, castStatus) {
			res, st := member(x)
			if st == castFailed {
				failed = true
			}
			return res, st
		}
		p, err := sc.finite(n, o, strict, false)
		if failed {
			return pair{}, sc.fail(ErrFilterUnsupported, n.pos, "a member of the IN list cannot be cast to the type of %s, and CESQL does not say whether that is an error when another member matches", k.name)
		}
		return p, err
	}
	op := filter.Attr(o.attr)
	var vals []ontology.Value
	for _, m := range set {
		if o.k == ontology.KindInt {
			// An Integer within 32 bits takes the member cast to an
			// Integer; beyond, the String never equals a member that
			// casts to one.
			i, st := sqlCast(m.val, sqlInteger)
			if st != castOK {
				return pair{}, sc.fail(ErrFilterUnsupported, m.pos, "%s cannot be cast to an Integer, which int attribute %s is within 32 bits, and CESQL does not say whether that is an error when another member matches", describeSQL(m), o.attr)
			}
			vals = append(vals, ontology.Int(i.i))
			continue
		}
		s, _ := sqlCast(m.val, sqlString)
		if o.k == ontology.KindString {
			vals = append(vals, ontology.String(s.s))
			continue
		}
		v, err := exactValue(&expr{path: sc.path, value: s.s}, o.attr, o.k)
		if err != nil {
			return pair{}, sc.at(err, m.pos)
		}
		vals = append(vals, v)
	}
	return sc.node(n, atomOf(single(op.In(vals...))), atomOf(single(op.NotIn(vals...)))), nil
}

type castStatus uint8

const (
	castOK        castStatus = iota
	castFailed               // a CastError
	castContested            // Integer to Boolean: see contested
)

// sqlCast casts v to t as CESQL 3.7 says.
func sqlCast(v sqlValue, t sqlType) (sqlValue, castStatus) {
	if v.typ == t {
		return v, castOK
	}
	switch t {
	case sqlString:
		if v.typ == sqlInteger {
			return sqlValue{typ: t, s: strconv.FormatInt(v.i, 10)}, castOK
		}
		return sqlValue{typ: t, s: strconv.FormatBool(v.b)}, castOK
	case sqlInteger:
		if v.typ == sqlBoolean {
			if v.b {
				return sqlValue{typ: t, i: 1}, castOK
			}
			return sqlValue{typ: t}, castOK
		}
		i, err := strconv.ParseInt(v.s, 10, 32)
		if err != nil {
			return sqlValue{typ: t}, castFailed
		}
		return sqlValue{typ: t, i: i}, castOK
	}
	if v.typ == sqlInteger {
		return sqlValue{typ: t}, castContested
	}
	switch strings.ToLower(v.s) {
	case "true":
		return sqlValue{typ: t, b: true}, castOK
	case "false":
		return sqlValue{typ: t}, castOK
	}
	return sqlValue{typ: t}, castFailed
}

// sqlCompare evaluates x op y: equality casts x to y's type, an ordering
// both to Integers (CESQL 3.4.2, 3.7).
func sqlCompare(x sqlValue, op string, y sqlValue) (bool, castStatus) {
	switch op {
	case "=", "!=", "<>":
		cx, st := sqlCast(x, y.typ)
		if st != castOK {
			return false, st
		}
		return (cx == y) == (op == "="), castOK
	}
	cx, st := sqlCast(x, sqlInteger)
	if st != castOK {
		return false, st
	}
	cy, st := sqlCast(y, sqlInteger)
	if st != castOK {
		return false, st
	}
	switch op {
	case "<":
		return cx.i < cy.i, castOK
	case "<=":
		return cx.i <= cy.i, castOK
	case ">":
		return cx.i > cy.i, castOK
	}
	return cx.i >= cy.i, castOK
}

// negate returns NOT d, for the not dialect around a sql expression:
// each predicate's negation, or-ed with its attribute missing.
func (c *Codec) negate(d dnf, path string) (dnf, error) {
	acc := dnfTrue
	for _, x := range d {
		var alts dnf
		if x.types != nil {
			set := make([]bool, len(x.types))
			some := false
			for id := ontology.NumReserved; id < len(set); id++ {
				set[id] = !x.types[id]
				some = some || set[id]
			}
			if some {
				leaves := make([]typeTest, len(x.leaves))
				for i, l := range x.leaves {
					leaves[i] = typeTest{path: l.path, text: "not " + l.text, pos: l.pos}
				}
				alts = append(alts, conj{types: set, leaves: leaves})
			}
		}
		for _, p := range x.preds {
			np, err := negPred(p, path)
			if err != nil {
				return nil, err
			}
			alts = append(alts, np...)
		}
		acc = c.and(acc, alts)
		if len(acc) > MaxFilters {
			return nil, ferr(ErrFilterUnsupported, path, "not: more than %d filters in disjunctive normal form (MaxFilters)", MaxFilters)
		}
	}
	return acc, nil
}

// negPred returns NOT p as a DNF.
func negPred(p filter.Predicate, path string) (dnf, error) {
	op := p.Operand
	missing := single(op.NotExists())
	switch p.Op {
	case filter.OpExists:
		return missing, nil
	case filter.OpNotExists:
		return single(op.Exists()), nil
	case filter.OpEQ:
		return append(single(op.NE(p.Value)), missing...), nil
	case filter.OpNE:
		return append(single(op.EQ(p.Value)), missing...), nil
	case filter.OpLT:
		return append(single(op.GE(p.Value)), missing...), nil
	case filter.OpLE:
		return append(single(op.GT(p.Value)), missing...), nil
	case filter.OpGT:
		return append(single(op.LE(p.Value)), missing...), nil
	case filter.OpGE:
		return append(single(op.LT(p.Value)), missing...), nil
	case filter.OpIn:
		return append(single(op.NotIn(p.Set...)), missing...), nil
	case filter.OpNotIn:
		return append(single(op.In(p.Set...)), missing...), nil
	case filter.OpRange:
		lo, hi := op.LT(p.Value), op.GT(p.Hi)
		if p.LoOpen {
			lo = op.LE(p.Value)
		}
		if p.HiOpen {
			hi = op.GE(p.Hi)
		}
		return append(append(single(lo), single(hi)...), missing...), nil
	}
	return nil, ferr(ErrFilterUnsupported, path, "not around a sql expression that tests %s %s: sion has no negated %s", op.Name, p.Op, p.Op)
}

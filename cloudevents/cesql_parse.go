package cloudevents

// The parsing of a CloudEvents SQL expression (CESQL v1, cesql/spec.md)
// into sqlNode trees (see CompileSQL). Only the subset CompileSQL
// compiles gets a tree; functions and arithmetic are refused where they
// are read.

import (
	"strconv"
	"strings"
)

// MaxSQLBytes is the longest CESQL expression CompileSQL and the sql
// dialect read, in bytes; a longer one is refused (ErrFilterUnsupported)
// before it is parsed, so that a giant string literal or a deep nest of
// parentheses costs no more than reading this many bytes.
const MaxSQLBytes = 1 << 16

// sqlType is a CESQL primitive type (spec 3.1).
type sqlType uint8

const (
	sqlString sqlType = iota
	sqlInteger
	sqlBoolean
)

func (t sqlType) String() string {
	return [...]string{"String", "Integer", "Boolean"}[t]
}

// sqlValue is a CESQL value: a String, a 32-bit Integer or a Boolean.
type sqlValue struct {
	typ sqlType
	s   string
	i   int64 // within int32 for an Integer
	b   bool
}

func (v sqlValue) String() string {
	switch v.typ {
	case sqlInteger:
		return strconv.FormatInt(v.i, 10)
	case sqlBoolean:
		return strings.ToUpper(strconv.FormatBool(v.b))
	}
	return strconv.Quote(v.s)
}

type sqlKind uint8

const (
	sqlLit    sqlKind = iota // val
	sqlIdent                 // name
	sqlNot                   // NOT kids[0]
	sqlLogic                 // kids[0] op kids[1] op …, one op of AND, OR, XOR
	sqlCmp                   // kids[0] op kids[1]
	sqlLike                  // kids[0] [NOT] LIKE pattern
	sqlIn                    // kids[0] [NOT] IN (kids[1:])
	sqlExists                // EXISTS name
)

// sqlNode is a parsed CESQL expression. pos is the 1-based byte offset
// of the construct in the expression, for errors.
type sqlNode struct {
	kind    sqlKind
	pos     int
	op      string // sqlLogic, sqlCmp
	name    string // sqlIdent, sqlExists: lower-case
	val     sqlValue
	pattern string // sqlLike, unescaped as a string literal
	not     bool   // NOT LIKE, NOT IN
	kids    []*sqlNode
}

type sqlTok struct {
	kind byte // 'w' word, 'i' integer, 's' string, 'o' operator or punctuation, 0 end
	text string
	pos  int
	val  sqlValue
}

// sqlParser reads one expression. path names it in errors; depth and
// tests count against MaxFilterDepth and MaxFilterTests.
type sqlParser struct {
	src   string
	path  string
	off   int
	tok   sqlTok
	depth int
	tests *int
}

func (p *sqlParser) fail(sentinel error, pos int, format string, args ...any) error {
	e := ferr(sentinel, p.path, format, args...)
	e.Pos = pos
	e.Msg = "at " + strconv.Itoa(pos) + ": " + e.Msg
	return e
}

// parseSQL parses src, already counted depth deep in a filter
// expression, adding its attribute tests to *tests.
func parseSQL(src, path string, depth int, tests *int) (*sqlNode, error) {
	p := &sqlParser{src: src, path: path, depth: depth, tests: tests}
	if len(src) > MaxSQLBytes {
		return nil, p.fail(ErrFilterUnsupported, 1, "the expression is %d bytes, more than %d (MaxSQLBytes)", len(src), MaxSQLBytes)
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind == 0 {
		return nil, p.fail(ErrFilterInvalid, 1, "the expression is empty")
	}
	n, err := p.parseLogic()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != 0 {
		return nil, p.fail(ErrFilterInvalid, p.tok.pos, "expected an operator or the end, found %s", p.tok.text)
	}
	return n, nil
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// next reads the next token into p.tok.
func (p *sqlParser) next() error {
	s := p.src
	for p.off < len(s) && strings.IndexByte(" \t\r\n", s[p.off]) >= 0 {
		p.off++
	}
	start := p.off
	p.tok = sqlTok{pos: start + 1}
	if start == len(s) {
		p.tok.text = "the end"
		return nil
	}
	c := s[start]
	switch {
	case c == '\'' || c == '"':
		var b strings.Builder
		i := start + 1
		for ; i < len(s) && s[i] != c; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				// \' in '…' and \" in "…" stand for the quote; any
				// other backslash is itself (CESQL spec 2.2; the
				// grammar's lexer takes the next byte with it).
				if s[i+1] != c {
					b.WriteByte('\\')
				}
				i++
			}
			b.WriteByte(s[i])
		}
		if i == len(s) {
			return p.fail(ErrFilterInvalid, start+1, "the string literal is not closed")
		}
		p.off = i + 1
		p.tok.kind, p.tok.text, p.tok.val = 's', s[start:p.off], sqlValue{typ: sqlString, s: b.String()}
		return nil
	case isDigit(c) || (c == '+' || c == '-') && start+1 < len(s) && isDigit(s[start+1]):
		i := start + 1
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i < len(s) && isWordByte(s[i]) && c != '+' && c != '-' {
			break // a word that starts with digits: an identifier
		}
		if i < len(s) && s[i] == '.' {
			return p.fail(ErrFilterInvalid, start+1, "CESQL has no decimal numbers: write %s as a string ('%s')", s[start:i]+".…", s[start:i]+".…")
		}
		p.off = i
		p.tok.kind, p.tok.text = 'i', s[start:i]
		n, err := strconv.ParseInt(p.tok.text, 10, 32)
		if err != nil {
			return p.fail(ErrFilterInvalid, start+1, "integer literal %s is not a 32-bit integer", p.tok.text)
		}
		p.tok.val = sqlValue{typ: sqlInteger, i: n}
		return nil
	case !isWordByte(c):
		for _, op := range []string{"!=", "<>", "<=", ">=", "=", "<", ">", "(", ")", ",", "+", "-", "*", "/", "%"} {
			if strings.HasPrefix(s[start:], op) {
				p.off += len(op)
				p.tok.kind, p.tok.text = 'o', op
				return nil
			}
		}
		return p.fail(ErrFilterInvalid, start+1, "unexpected character %q", s[start:start+1])
	}
	i := start
	for i < len(s) && isWordByte(s[i]) {
		i++
	}
	p.off = i
	p.tok.kind, p.tok.text = 'w', s[start:i]
	return nil
}

// keyword reports whether the current token is keyword kw (case-insensitive).
func (p *sqlParser) keyword(kw string) bool {
	return p.tok.kind == 'w' && strings.EqualFold(p.tok.text, kw)
}

func (p *sqlParser) isOp(op string) bool { return p.tok.kind == 'o' && p.tok.text == op }

var sqlKeywords = []string{"AND", "OR", "XOR", "NOT", "LIKE", "EXISTS", "IN", "TRUE", "FALSE"}

func (p *sqlParser) logicOp() string {
	for _, kw := range sqlKeywords[:3] {
		if p.keyword(kw) {
			return kw
		}
	}
	return ""
}

func (p *sqlParser) deeper(pos int) error {
	if p.depth++; p.depth > MaxFilterDepth {
		return p.fail(ErrFilterUnsupported, pos, "expressions nested more than %d deep (MaxFilterDepth)", MaxFilterDepth)
	}
	return nil
}

func (p *sqlParser) count(pos int) error {
	if *p.tests++; *p.tests > MaxFilterTests {
		return p.fail(ErrFilterUnsupported, pos, "more than %d attribute tests (MaxFilterTests)", MaxFilterTests)
	}
	return nil
}

// parseLogic reads operands joined by AND, OR or XOR. CESQL gives the
// three one precedence; the spec (3.6) evaluates them left to right but
// its grammar (CESQLParser.g4) associates them to the right, so a chain
// that mixes them is refused: parentheses decide.
func (p *sqlParser) parseLogic() (*sqlNode, error) {
	first, err := p.parseCmp()
	if err != nil {
		return nil, err
	}
	op := p.logicOp()
	if op == "" {
		return first, nil
	}
	n := &sqlNode{kind: sqlLogic, pos: p.tok.pos, op: op, kids: []*sqlNode{first}}
	for {
		if o := p.logicOp(); o != op {
			if o != "" {
				return nil, p.fail(ErrFilterUnsupported, p.tok.pos, "%s after %s without parentheses: CESQL's spec reads them left to right, its grammar right to left; write the parentheses", o, op)
			}
			return n, nil
		}
		if err := p.count(p.tok.pos); err != nil {
			return nil, err
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		k, err := p.parseCmp()
		if err != nil {
			return nil, err
		}
		n.kids = append(n.kids, k)
	}
}

var sqlCmpOps = []string{"=", "!=", "<>", "<", "<=", ">", ">="}

func (p *sqlParser) arithmetic() error {
	if p.tok.kind == 'o' && strings.Contains("+-*/%", p.tok.text) {
		return p.fail(ErrFilterUnsupported, p.tok.pos, "arithmetic (%s): sion's filters compare attributes with values, they do not compute", p.tok.text)
	}
	if p.tok.kind == 'i' && (p.tok.text[0] == '-' || p.tok.text[0] == '+') {
		return p.fail(ErrFilterUnsupported, p.tok.pos, "arithmetic (%s %s): sion's filters compare attributes with values, they do not compute", p.tok.text[:1], p.tok.text[1:])
	}
	return nil
}

// parseCmp reads comparisons, left to right.
func (p *sqlParser) parseCmp() (*sqlNode, error) {
	n, err := p.parsePostfix()
	if err != nil {
		return nil, err
	}
	for {
		if err := p.arithmetic(); err != nil {
			return nil, err
		}
		if p.tok.kind != 'o' {
			return n, nil
		}
		op := p.tok.text
		found := false
		for _, o := range sqlCmpOps {
			found = found || o == op
		}
		if !found {
			return n, nil
		}
		pos := p.tok.pos
		if err := p.count(pos); err != nil {
			return nil, err
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		r, err := p.parsePostfix()
		if err != nil {
			return nil, err
		}
		n = &sqlNode{kind: sqlCmp, pos: pos, op: op, kids: []*sqlNode{n, r}}
	}
}

// parsePostfix reads an operand followed by [NOT] LIKE and [NOT] IN.
func (p *sqlParser) parsePostfix() (*sqlNode, error) {
	n, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for {
		pos, not := p.tok.pos, false
		if p.keyword("NOT") {
			not = true
			if err := p.next(); err != nil {
				return nil, err
			}
			if !p.keyword("LIKE") && !p.keyword("IN") {
				return nil, p.fail(ErrFilterInvalid, p.tok.pos, "expected LIKE or IN after NOT, found %s", p.tok.text)
			}
		}
		switch {
		case p.keyword("LIKE"):
			if err := p.count(pos); err != nil {
				return nil, err
			}
			if err := p.next(); err != nil {
				return nil, err
			}
			if p.tok.kind != 's' {
				return nil, p.fail(ErrFilterInvalid, p.tok.pos, "the pattern of LIKE must be a string literal, found %s", p.tok.text)
			}
			n = &sqlNode{kind: sqlLike, pos: pos, not: not, pattern: p.tok.val.s, kids: []*sqlNode{n}}
			if err := p.next(); err != nil {
				return nil, err
			}
		case p.keyword("IN"):
			if err := p.next(); err != nil {
				return nil, err
			}
			if !p.isOp("(") {
				return nil, p.fail(ErrFilterInvalid, p.tok.pos, "expected ( after IN, found %s", p.tok.text)
			}
			if err := p.deeper(p.tok.pos); err != nil {
				return nil, err
			}
			in := &sqlNode{kind: sqlIn, pos: pos, not: not, kids: []*sqlNode{n}}
			for {
				if err := p.next(); err != nil {
					return nil, err
				}
				if err := p.count(p.tok.pos); err != nil {
					return nil, err
				}
				k, err := p.parseLogic()
				if err != nil {
					return nil, err
				}
				in.kids = append(in.kids, k)
				if !p.isOp(",") {
					break
				}
			}
			if !p.isOp(")") {
				return nil, p.fail(ErrFilterInvalid, p.tok.pos, "expected , or ) in the IN list, found %s", p.tok.text)
			}
			p.depth--
			if err := p.next(); err != nil {
				return nil, err
			}
			n = in
		default:
			return n, nil
		}
	}
}

// parseUnary reads NOT, EXISTS, a parenthesised expression, a literal or
// an identifier, and refuses unary minus and function invocations.
func (p *sqlParser) parseUnary() (*sqlNode, error) {
	t := p.tok
	switch {
	case p.keyword("NOT"):
		if err := p.deeper(t.pos); err != nil {
			return nil, err
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		k, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		p.depth--
		return &sqlNode{kind: sqlNot, pos: t.pos, kids: []*sqlNode{k}}, nil
	case p.keyword("EXISTS"):
		if err := p.count(t.pos); err != nil {
			return nil, err
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		name, ok := p.identifier()
		if !ok {
			return nil, p.fail(ErrFilterInvalid, p.tok.pos, "expected an attribute name after EXISTS, found %s", p.tok.text)
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		return &sqlNode{kind: sqlExists, pos: t.pos, name: name}, nil
	case p.keyword("TRUE"), p.keyword("FALSE"):
		if err := p.next(); err != nil {
			return nil, err
		}
		return &sqlNode{kind: sqlLit, pos: t.pos, val: sqlValue{typ: sqlBoolean, b: strings.EqualFold(t.text, "TRUE")}}, nil
	case t.kind == 's', t.kind == 'i':
		if err := p.next(); err != nil {
			return nil, err
		}
		return &sqlNode{kind: sqlLit, pos: t.pos, val: t.val}, nil
	case p.isOp("("):
		if err := p.deeper(t.pos); err != nil {
			return nil, err
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		n, err := p.parseLogic()
		if err != nil {
			return nil, err
		}
		if !p.isOp(")") {
			return nil, p.fail(ErrFilterInvalid, p.tok.pos, "expected ) to close the ( at %d, found %s", t.pos, p.tok.text)
		}
		p.depth--
		return n, p.next()
	case p.isOp("-"), p.isOp("+"):
		return nil, p.arithmetic()
	case t.kind == 'w':
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.isOp("(") {
			return nil, p.fail(ErrFilterUnsupported, t.pos, "function %s(…): sion's filters compare attributes with values, they do not call functions", strings.ToUpper(t.text))
		}
		p.tok, p.off = t, t.pos-1+len(t.text) // step back to read the name
		name, ok := p.identifier()
		if !ok {
			return nil, p.fail(ErrFilterInvalid, t.pos, "expected an expression, found %s", t.text)
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		return &sqlNode{kind: sqlIdent, pos: t.pos, name: name}, nil
	}
	return nil, p.fail(ErrFilterInvalid, t.pos, "expected an expression, found %s", t.text)
}

// identifier returns the current token as an attribute name, lower-cased
// (CESQL keywords and, in its TCK and the SDK, identifiers are
// case-insensitive; CloudEvents attribute names are lower-case), when it
// is one: letters and digits, not a keyword.
func (p *sqlParser) identifier() (string, bool) {
	if p.tok.kind != 'w' || strings.Contains(p.tok.text, "_") {
		return "", false
	}
	for _, kw := range sqlKeywords {
		if p.keyword(kw) {
			return "", false
		}
	}
	return strings.ToLower(p.tok.text), true
}

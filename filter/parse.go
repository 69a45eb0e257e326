package filter

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sion-go/sion/ontology"
)

// Compile parses filter source text and returns the filter it describes.
// See the package documentation and SYNTAX.md for the grammar. Malformed
// text gives a *SyntaxError, which wraps ErrSyntax; well-formed text that is
// not a valid filter gives Build's *BuildError, which wraps ErrInvalid.
func Compile(src string) (*Filter, error) {
	spec, err := Parse(src)
	if err != nil {
		return nil, err
	}
	return Build(spec)
}

// MustCompile is like Compile but panics if src does not compile. It
// simplifies initialisation of global filters and tests.
func MustCompile(src string) *Filter {
	f, err := Compile(src)
	if err != nil {
		panic(err)
	}
	return f
}

// ErrSyntax is wrapped by every error Parse (and so Compile) returns for
// text that does not follow the filter grammar; test with
// errors.Is(err, filter.ErrSyntax).
var ErrSyntax = errors.New("filter: syntax error")

// SyntaxError reports where filter source text breaks the grammar and why.
type SyntaxError struct {
	Offset int    // byte offset into the source of the offending token
	Line   int    // 1-based line of Offset
	Col    int    // 1-based column of Offset, counted in runes
	Msg    string // what was expected and what was found
}

// Error returns "filter: line:col: " followed by Msg.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("filter: %d:%d: %s", e.Line, e.Col, e.Msg)
}

// Unwrap returns ErrSyntax.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// Parse reads filter source text into a Spec without validating it beyond
// the grammar: a well-formed filter can still be refused by Build (a NaN
// literal cannot be written, but an unordered range, an unbound namespace
// prefix or a weight outside match score can). It returns a *SyntaxError
// wrapping ErrSyntax. The empty text and "{}" give the zero Spec, which
// matches every event. Parse runs in time linear in len(src).
func Parse(src string) (Spec, error) {
	p := &parser{src: src}
	if !utf8.ValidString(src) {
		// Go's unquoting would turn a stray byte inside "…" into U+FFFD,
		// a different value; write bytes that are not UTF-8 as \x escapes.
		bad := 0
		for bad < len(src) {
			r, n := utf8.DecodeRuneInString(src[bad:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			bad += n
		}
		return Spec{}, p.errAt(bad, "byte 0x%02x is not UTF-8 (write bytes that are not UTF-8 in strings as \\x escapes)", src[bad])
	}
	if err := p.parse(); err != nil {
		return Spec{}, err
	}
	return p.spec, nil
}

// token kinds.
const (
	tokEOF     = iota
	tokWord    // a bare name or keyword
	tokString  // a "..." or `...` literal; val holds the unquoted text
	tokNumber  // [-]digits[.digits][e[±]digits]
	tokPunct   // one of { } [ ] ( ) ; , : * = == != < <= <: > >= ⊑
	tokIllegal // a malformed string or number; val holds the message
	tokOther   // a character that starts no token
)

type token struct {
	kind       int
	text       string // the source text of the token
	val        string // unquoted string, or the error message of tokIllegal
	start, end int    // byte offsets in the source
}

func (t token) is(kind int, text string) bool { return t.kind == kind && t.text == text }
func (t token) punct(text string) bool        { return t.is(tokPunct, text) }
func (t token) word(text string) bool         { return t.is(tokWord, text) }

// describe returns how an error message names t.
func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of input"
	case tokString:
		return "string " + clip(t.text)
	}
	return strconv.Quote(clip(t.text))
}

// clip shortens s to at most 24 runes for an error message.
func clip(s string) string {
	n := 0
	for i := range s {
		if n == 24 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// nameStart and nameRune define the characters of a bare name; they agree
// with isBareName.
func nameStart(r rune) bool {
	return r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= 0x80 && isLetter(r)
}

func nameRune(r rune) bool {
	return nameStart(r) || r >= '0' && r <= '9' || r == '.' || r == '-' || r == ':'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skipSpace returns the offset of the first non-space byte at or after i.
func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// lex returns the token starting at or after offset i of s.
func lex(s string, i int) token {
	i = skipSpace(s, i)
	if i >= len(s) {
		return token{kind: tokEOF, start: len(s), end: len(s)}
	}
	tok := func(kind, end int) token { return token{kind: kind, text: s[i:end], start: i, end: end} }
	c := s[i]
	switch c {
	case '{', '}', '[', ']', '(', ')', ';', ',', ':', '*':
		return tok(tokPunct, i+1)
	case '=', '!', '>':
		if i+1 < len(s) && s[i+1] == '=' {
			return tok(tokPunct, i+2)
		}
		if c == '!' {
			return tok(tokOther, i+1)
		}
		return tok(tokPunct, i+1)
	case '<':
		if i+1 < len(s) && (s[i+1] == '=' || s[i+1] == ':') {
			return tok(tokPunct, i+2)
		}
		return tok(tokPunct, i+1)
	case '"', '`':
		return lexString(s, i)
	}
	if isDigit(c) || c == '-' && i+1 < len(s) && isDigit(s[i+1]) {
		return lexNumber(s, i)
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == '⊑' {
		return tok(tokPunct, i+n)
	}
	if !nameStart(r) {
		return tok(tokOther, i+n)
	}
	j := i + n
	for j < len(s) {
		r, n := utf8.DecodeRuneInString(s[j:])
		if !nameRune(r) {
			break
		}
		j += n
	}
	return tok(tokWord, j)
}

// lexString scans a Go interpreted ("...") or raw (`...`) string literal.
func lexString(s string, i int) token {
	q := s[i]
	j := i + 1
	for j < len(s) && s[j] != q {
		if q == '"' {
			if s[j] == '\n' {
				break
			}
			if s[j] == '\\' && j+1 < len(s) {
				j++
			}
		}
		j++
	}
	if j >= len(s) || s[j] != q {
		return token{kind: tokIllegal, text: s[i:j], start: i, end: j, val: "string literal not terminated"}
	}
	t := token{kind: tokString, text: s[i : j+1], start: i, end: j + 1}
	v, err := strconv.Unquote(t.text)
	if err != nil {
		t.kind, t.val = tokIllegal, "invalid escape in string literal "+clip(t.text)
		return t
	}
	t.val = v
	return t
}

// lexNumber scans [-]digits[.digits][(e|E)[+|-]digits]; a number that runs
// into a letter, digit, '_' or '.' is malformed.
func lexNumber(s string, i int) token {
	j := i
	if s[j] == '-' {
		j++
	}
	digits := func() {
		for j < len(s) && isDigit(s[j]) {
			j++
		}
	}
	digits()
	if j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
		j++
		digits()
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			j = k
			digits()
		}
	}
	if j < len(s) {
		if r, _ := utf8.DecodeRuneInString(s[j:]); nameRune(r) {
			e := j
			for e < len(s) {
				r, n := utf8.DecodeRuneInString(s[e:])
				if !nameRune(r) && r != '+' {
					break
				}
				e += n
			}
			return token{kind: tokIllegal, text: s[i:e], start: i, end: e, val: "malformed number " + strconv.Quote(clip(s[i:e]))}
		}
	}
	return token{kind: tokNumber, text: s[i:j], start: i, end: j}
}

type parser struct {
	src      string
	pos      int // offset just after the last token consumed
	spec     Spec
	sawType  bool
	sawMatch bool
	prev     token // the last token consumed, for error messages
}

func (p *parser) peek() token { return lex(p.src, p.pos) }

// peek2 returns the token after the next one.
func (p *parser) peek2() token { return lex(p.src, p.peek().end) }

func (p *parser) next() token {
	t := p.peek()
	p.pos, p.prev = t.end, t
	return t
}

// errAt returns a *SyntaxError at byte offset off.
func (p *parser) errAt(off int, format string, args ...any) error {
	line, lineStart := 1, 0
	for i := 0; i < off && i < len(p.src); i++ {
		if p.src[i] == '\n' {
			line, lineStart = line+1, i+1
		}
	}
	return &SyntaxError{
		Offset: off,
		Line:   line,
		Col:    utf8.RuneCountInString(p.src[lineStart:off]) + 1,
		Msg:    fmt.Sprintf(format, args...),
	}
}

// expected returns the error "expected what, found t"; a lexical error in t
// is reported as itself.
func (p *parser) expected(what string, t token) error {
	if t.kind == tokIllegal {
		return p.errAt(t.start, "%s", t.val)
	}
	return p.errAt(t.start, "expected %s, found %s", what, t.describe())
}

// after names the previous token for "expected X after Y" messages.
func (p *parser) after() string { return strconv.Quote(clip(p.prev.text)) }

func (p *parser) parse() error {
	braced := p.peek().punct("{")
	if braced {
		p.next()
	}
	end := func(t token) bool {
		if braced {
			return t.punct("}")
		}
		return t.kind == tokEOF
	}
	if !end(p.peek()) {
		for {
			if err := p.clause(); err != nil {
				return err
			}
			t := p.peek()
			if end(t) {
				break
			}
			if !t.punct(";") {
				if braced {
					return p.expected(`";" or "}"`, t)
				}
				return p.expected(`";" or end of input`, t)
			}
			p.next()
			if end(p.peek()) {
				break
			}
		}
	}
	if braced {
		p.next() // the "}"
		if t := p.peek(); t.kind != tokEOF {
			return p.expected(`end of input after "}"`, t)
		}
	}
	return nil
}

// clause parses one type, match or xmlns clause or one predicate.
func (p *parser) clause() error {
	t := p.peek()
	if t.kind == tokWord {
		switch {
		case t.text == "type":
			if n := p.peek2(); n.punct("⊑") || n.punct("<:") {
				return p.typeClause()
			}
		case t.text == "match":
			if n := p.peek2(); n.word("all") || n.word("atleast") || n.word("score") {
				return p.matchClause()
			}
		case strings.HasPrefix(t.text, "xmlns"):
			if ok, err := p.xmlnsClause(t); ok || err != nil {
				return err
			}
		}
	}
	return p.predicate()
}

func (p *parser) typeClause() error {
	kw := p.next()
	if p.sawType {
		return p.errAt(kw.start, "a filter has at most one type clause")
	}
	p.sawType = true
	p.next() // ⊑ or <:
	what := "an event type name or * after " + p.after()
	t := p.next()
	switch {
	case t.punct("*"):
		p.spec.Type = AnyType
	case t.kind == tokWord && p.peek().kind == tokWord:
		// {type ⊑ volcanic eruption}: a name with a space, unquoted.
		n := p.peek()
		return p.errAt(n.start, "expected \";\" after the type name %s, found %s (a name with spaces is quoted: %q)",
			p.after(), n.describe(), p.src[t.start:n.end])
	case t.kind == tokWord, t.kind == tokString:
		p.spec.Type = t.text
		if t.kind == tokString {
			p.spec.Type = t.val
		}
	default:
		return p.expected(what, t)
	}
	return nil
}

// quoted returns the source between two offsets, trimmed and quoted.
func (p *parser) quoted(from, to int) string {
	return strconv.Quote(clip(strings.TrimSpace(p.src[from:to])))
}

func (p *parser) matchClause() error {
	kw := p.next()
	if p.sawMatch {
		return p.errAt(kw.start, "a filter has at most one match clause")
	}
	p.sawMatch = true
	switch m := p.next(); m.text {
	case "all":
		p.spec.Mode = ModeAll
	case "atleast":
		p.spec.Mode = ModeAtLeast
		t := p.next()
		if t.kind != tokNumber || strings.ContainsAny(t.text, ".eE") {
			return p.expected(`an integer after "match atleast"`, t)
		}
		k, err := strconv.Atoi(t.text)
		if err != nil {
			return p.errAt(t.start, "integer %s out of range", t.text)
		}
		p.spec.AtLeast = k
	case "score":
		p.spec.Mode = ModeScore
		if t := p.next(); !t.punct(">=") {
			return p.expected(`">=" after "match score"`, t)
		}
		f, err := p.number(`a number after "match score >="`)
		if err != nil {
			return err
		}
		p.spec.Threshold = f
	}
	return nil
}

// number parses an integer or float token as a float64, for thresholds and
// weights.
func (p *parser) number(what string) (float64, error) {
	t := p.next()
	if t.kind != tokNumber {
		return 0, p.expected(what, t)
	}
	f, err := strconv.ParseFloat(t.text, 64)
	if err != nil && math.IsInf(f, 0) {
		return 0, p.errAt(t.start, "number %s out of the float64 range", clip(t.text))
	}
	if f == 0 && nonzeroDigits(t.text) {
		// A weight of 0 means the default 1, and a threshold must be > 0.
		return 0, p.errAt(t.start, "number %s rounds to 0", clip(t.text))
	}
	return f, nil
}

// nonzeroDigits reports whether number token text has a nonzero digit
// before its exponent.
func nonzeroDigits(text string) bool {
	mant, _, _ := strings.Cut(strings.ToLower(text), "e")
	return strings.ContainsAny(mant, "123456789")
}

// xmlnsClause parses `xmlns:prefix = "uri"` when the text at the next token
// has that shape: "xmlns", ':', a prefix, then a single '='. It reports
// false, and consumes nothing, when the text is something else (such as a
// predicate on an attribute spelt xmlns:x, which must use "==").
func (p *parser) xmlnsClause(kw token) (bool, error) {
	s := p.src
	i := skipSpace(s, kw.start+len("xmlns"))
	if i >= len(s) || s[i] != ':' {
		return false, nil
	}
	i = skipSpace(s, i+1)
	ps := i
	for i < len(s) && !isSpace(s[i]) && !strings.ContainsRune("=;{}\"`", rune(s[i])) {
		i++
	}
	prefix := s[ps:i]
	i = skipSpace(s, i)
	if i >= len(s) || s[i] != '=' || i+1 < len(s) && s[i+1] == '=' {
		return false, nil
	}
	if !validNCName(prefix) {
		if prefix == "" {
			return true, p.errAt(ps, `expected a namespace prefix after "xmlns:", found "="`)
		}
		return true, p.errAt(ps, "namespace prefix %q is not an XML name", prefix)
	}
	if _, dup := p.spec.Namespaces[prefix]; dup {
		return true, p.errAt(ps, "namespace prefix %q bound twice", prefix)
	}
	p.pos = i + 1
	p.prev = token{kind: tokPunct, text: "=", start: i, end: i + 1}
	t := p.next()
	if t.kind != tokString {
		return true, p.expected(`a namespace URI string after "xmlns:`+prefix+` ="`, t)
	}
	if p.spec.Namespaces == nil {
		p.spec.Namespaces = make(map[string]string)
	}
	p.spec.Namespaces[prefix] = t.val
	return true, nil
}

// endOfPredicate reports whether t ends a predicate (before an optional
// weight).
func endOfPredicate(t token) bool {
	return t.kind == tokEOF || t.punct(";") || t.punct("}") || t.word("weight")
}

func (p *parser) predicate() error {
	t := p.peek()
	var pr Predicate
	if t.word("true") && endOfPredicate(p.peek2()) {
		p.next()
		pr = True()
	} else {
		start := t.start
		o, err := p.operand()
		if err != nil {
			return err
		}
		opnd := p.quoted(start, p.pos)
		pr.Operand = o
		if err := p.operator(&pr, opnd); err != nil {
			return err
		}
	}
	if p.peek().word("weight") {
		p.next()
		at := p.peek().start
		w, err := p.number(`a number after "weight"`)
		if err != nil {
			return err
		}
		if w == 0 {
			// In a Spec a zero weight means the default, 1; written out it
			// is a mistake.
			return p.errAt(at, "a weight must be greater than 0")
		}
		pr.Weight = w
	}
	p.spec.Predicates = append(p.spec.Predicates, pr)
	return nil
}

// operand parses a name, json(path) or xpath(expr).
func (p *parser) operand() (Operand, error) {
	t := p.next()
	switch t.kind {
	case tokWord:
		if (t.text == "json" || t.text == "xpath") && p.peek().punct("(") {
			paren := p.next()
			name, err := p.raw(t.text == "xpath", paren)
			if err != nil {
				return Operand{}, err
			}
			if t.text == "xpath" {
				return XPath(name), nil
			}
			return JSON(name), nil
		}
		return Attr(t.text), nil
	case tokString:
		return Attr(t.val), nil
	}
	return Operand{}, p.expected("an attribute name, json(...), xpath(...) or a type, match or xmlns clause", t)
}

// raw parses the path or expression of json( or xpath( and the closing
// ')': a string literal followed by ')', or else the raw text up to the
// balancing ')', trimmed of surrounding spaces.
func (p *parser) raw(xpathMode bool, paren token) (string, error) {
	what, kw := "a JSON path", "json("
	if xpathMode {
		what, kw = "an XPath expression", "xpath("
	}
	s := p.src
	i := skipSpace(s, paren.end)
	if i < len(s) && s[i] == '"' {
		if t := lexString(s, i); t.kind == tokString {
			if c := lex(s, t.end); c.punct(")") {
				p.pos, p.prev = c.end, c
				return t.val, nil
			}
		}
	}
	end, ok := scanRaw(s, i, xpathMode)
	if !ok {
		return "", p.errAt(paren.start, "expected %q to close %q, found end of input", ")", kw)
	}
	name := trimRawRight(s[i:end], xpathMode)
	if name == "" {
		return "", p.errAt(end, "expected %s after %q, found %q", what, kw, ")")
	}
	p.pos, p.prev = end+1, token{kind: tokPunct, text: ")", start: end, end: end + 1}
	return name, nil
}

// trimRawRight trims trailing spaces from a raw path, keeping one that a
// JSON path escapes with a backslash.
func trimRawRight(r string, xpathMode bool) string {
	j := len(r)
	for j > 0 && isSpace(r[j-1]) {
		j--
	}
	if j < len(r) && !xpathMode {
		k := j
		for k > 0 && r[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 1 {
			j++
		}
	}
	return r[:j]
}

// operator parses what follows an operand: a comparison and a value, a
// range, a set, a string operator, exists or not exists. A bare xpath
// operand is a boolean predicate.
func (p *parser) operator(pr *Predicate, opnd string) error {
	t := p.peek()
	if pr.Operand.Source == SourceXPath && endOfPredicate(t) {
		pr.Op = OpXPath
		return nil
	}
	p.next()
	var err error
	switch {
	case t.kind == tokPunct:
		switch t.text {
		case "=", "==":
			pr.Op = OpEQ
		case "!=":
			pr.Op = OpNE
		case "<":
			pr.Op = OpLT
		case "<=":
			pr.Op = OpLE
		case ">":
			pr.Op = OpGT
		case ">=":
			pr.Op = OpGE
		default:
			return p.expected("an operator after "+opnd, t)
		}
		pr.Value, err = p.literal()
		return err
	case t.word("in"):
		return p.inClause(pr, false)
	case t.word("not"):
		switch n := p.next(); {
		case n.word("in"):
			return p.inClause(pr, true)
		case n.word("exists"):
			pr.Op = OpNotExists
			return nil
		default:
			return p.expected(`"in" or "exists" after "not"`, n)
		}
	case t.word("exists"):
		pr.Op = OpExists
		return nil
	case t.word("prefix"), t.word("suffix"), t.word("contains"):
		pr.Op = map[string]Op{"prefix": OpPrefix, "suffix": OpSuffix, "contains": OpContains}[t.text]
		what := "a string after " + p.after()
		s := p.next()
		if s.kind != tokString {
			return p.expected(what, s)
		}
		pr.Value = ontology.String(s.val)
		return nil
	}
	return p.expected("an operator after "+opnd, t)
}

// inClause parses the range or set after "in" (or "not in" when not).
func (p *parser) inClause(pr *Predicate, not bool) error {
	kw := p.after()
	if not {
		kw = `"not in"`
	}
	open := p.next()
	switch {
	case open.punct("{"):
		pr.Op = OpIn
		if not {
			pr.Op = OpNotIn
		}
		for {
			v, err := p.literal()
			if err != nil {
				return err
			}
			pr.Set = append(pr.Set, v)
			t := p.next()
			if t.punct("}") {
				return nil
			}
			if !t.punct(",") {
				return p.expected(`"," or "}" in a set`, t)
			}
		}
	case !not && (open.punct("[") || open.punct("(")):
		pr.Op = OpRange
		pr.LoOpen = open.text == "("
		var err error
		if pr.Value, err = p.literal(); err != nil {
			return err
		}
		if t := p.next(); !t.punct(",") {
			return p.expected(`"," between the ends of a range`, t)
		}
		if pr.Hi, err = p.literal(); err != nil {
			return err
		}
		t := p.next()
		if !t.punct("]") && !t.punct(")") {
			return p.expected(`"]" or ")" to close a range`, t)
		}
		pr.HiOpen = t.text == ")"
		return nil
	}
	if not {
		return p.expected(`"{" after `+kw, open)
	}
	return p.expected(`"[", "(" or "{" after `+kw, open)
}

// The instants a time Value can hold: int64 nanoseconds since the epoch.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// literal parses a string, integer, float, true, false or time("...").
func (p *parser) literal() (ontology.Value, error) {
	what := "a value after " + p.after()
	t := p.next()
	switch t.kind {
	case tokString:
		return ontology.String(t.val), nil
	case tokNumber:
		if !strings.ContainsAny(t.text, ".eE") {
			i, err := strconv.ParseInt(t.text, 10, 64)
			if err != nil {
				return ontology.Value{}, p.errAt(t.start, "integer %s out of the int64 range", clip(t.text))
			}
			return ontology.Int(i), nil
		}
		// Rounded to the nearest float64, as Go and JSON read numbers:
		// 1e-400 is 0, as it is in an event's JSON payload.
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil && math.IsInf(f, 0) {
			return ontology.Value{}, p.errAt(t.start, "number %s out of the float64 range", clip(t.text))
		}
		return ontology.Float(f), nil
	case tokWord:
		switch t.text {
		case "true", "false":
			return ontology.Bool(t.text == "true"), nil
		case "time":
			if !p.peek().punct("(") {
				break
			}
			p.next()
			s := p.next()
			if s.kind != tokString {
				return ontology.Value{}, p.expected(`a string after "time("`, s)
			}
			if c := p.next(); !c.punct(")") {
				return ontology.Value{}, p.expected(`")" to close "time("`, c)
			}
			tm, err := time.Parse(time.RFC3339Nano, s.val)
			if err != nil {
				return ontology.Value{}, p.errAt(s.start, "time %s is not RFC 3339 (such as \"2006-01-02T15:04:05Z\")", clip(s.text))
			}
			if tm.Before(minTime) || tm.After(maxTime) {
				return ontology.Value{}, p.errAt(s.start, "time %s is outside 1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z, the times sion holds", clip(s.text))
			}
			return ontology.Time(tm), nil
		case "NaN", "Inf", "Infinity", "inf", "nan":
			return ontology.Value{}, p.errAt(t.start, "expected %s, found %q (NaN and infinities are not values)", what, t.text)
		}
	}
	return ontology.Value{}, p.expected(what, t)
}

package cloudevents_test

// A reference CESQL v1 evaluator, written from the spec (cesql/spec.md)
// apart from the package's parser and compiler: it parses with the
// grammar's precedence (CESQLParser.g4) and evaluates on a CloudEvent in
// fail-fast mode (spec 4.1), with AND and OR short-circuit. It covers
// the subset CompileSQL compiles; functions and arithmetic panic.

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
)

// refVal is a CESQL value: string, int64 (32-bit) or bool.
type refVal = any

type refExpr func(ce event.Event) (refVal, bool) // value, ok (no error)

type refParser struct {
	toks []string
	i    int
}

func refTokens(src string) []string {
	var out []string
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '\'' || c == '"':
			j := i + 1
			for src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			out = append(out, src[i:j+1])
			i = j + 1
		case strings.HasPrefix(src[i:], "!=") || strings.HasPrefix(src[i:], "<>") || strings.HasPrefix(src[i:], "<=") || strings.HasPrefix(src[i:], ">="):
			out = append(out, src[i:i+2])
			i += 2
		case strings.ContainsRune("=<>(),", rune(c)):
			out = append(out, src[i:i+1])
			i++
		default:
			j := i + 1
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z') {
				j++
			}
			out = append(out, src[i:j])
			i = j
		}
	}
	return out
}

func (p *refParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *refParser) take() string { p.i++; return p.toks[p.i-1] }

func (p *refParser) is(kw string) bool { return strings.EqualFold(p.peek(), kw) }

// refCompile parses src.
func refCompile(src string) refExpr {
	p := &refParser{toks: refTokens(src)}
	e := p.logic()
	if p.i != len(p.toks) {
		panic("ref: trailing " + p.peek() + " in " + src)
	}
	return e
}

// logic: AND, OR, XOR, one precedence, right-associative as in the grammar.
func (p *refParser) logic() refExpr {
	l := p.cmp()
	for _, op := range []string{"AND", "OR", "XOR"} {
		if p.is(op) {
			p.take()
			r := p.logic()
			return func(ce event.Event) (refVal, bool) {
				lv, ok := l(ce)
				if !ok {
					return false, false
				}
				lb, ok := refCast(lv, false).(bool)
				if !ok {
					return false, false
				}
				if op == "AND" && !lb {
					return false, true
				}
				if op == "OR" && lb {
					return true, true
				}
				rv, ok := r(ce)
				if !ok {
					return false, false
				}
				rb, ok := refCast(rv, false).(bool)
				if !ok {
					return false, false
				}
				if op == "XOR" {
					return lb != rb, true
				}
				return rb, true
			}
		}
	}
	return l
}

func (p *refParser) cmp() refExpr {
	l := p.postfix()
	for {
		op := p.peek()
		switch op {
		case "=", "!=", "<>", "<", "<=", ">", ">=":
		default:
			return l
		}
		p.take()
		r, ll := p.postfix(), l
		l = func(ce event.Event) (refVal, bool) {
			x, ok := ll(ce)
			if !ok {
				return false, false
			}
			y, ok := r(ce)
			if !ok {
				return false, false
			}
			switch op {
			case "=", "!=", "<>":
				cx := refCast(x, y) // to y's type
				if cx == nil {
					return false, false
				}
				return (cx == y) == (op == "="), true
			}
			xi, ok1 := refCast(x, int64(0)).(int64)
			yi, ok2 := refCast(y, int64(0)).(int64)
			if !ok1 || !ok2 {
				return false, false
			}
			return map[string]bool{"<": xi < yi, "<=": xi <= yi, ">": xi > yi, ">=": xi >= yi}[op], true
		}
	}
}

func (p *refParser) postfix() refExpr {
	x := p.unary()
	for {
		not := false
		if p.is("NOT") {
			p.take()
			not = true
		}
		switch {
		case p.is("LIKE"):
			p.take()
			pat := refString(p.take())
			inner := x
			x = func(ce event.Event) (refVal, bool) {
				v, ok := inner(ce)
				if !ok {
					return false, false
				}
				return refLike([]rune(refCast(v, "").(string)), []rune(pat)) != not, true
			}
		case p.is("IN"):
			p.take()
			p.take() // (
			var set []refExpr
			for {
				set = append(set, p.logic())
				if p.take() == ")" {
					break
				}
			}
			inner := x
			x = func(ce event.Event) (refVal, bool) {
				v, ok := inner(ce)
				if !ok {
					return false, false
				}
				for _, m := range set {
					mv, ok := m(ce)
					if !ok {
						return false, false
					}
					cm := refCast(mv, v)
					if cm == nil {
						return false, false
					}
					if cm == v {
						return !not, true
					}
				}
				return not, true
			}
		default:
			if not {
				panic("ref: NOT without LIKE or IN")
			}
			return x
		}
	}
}

func (p *refParser) unary() refExpr {
	t := p.take()
	switch {
	case strings.EqualFold(t, "NOT"):
		x := p.unary()
		return func(ce event.Event) (refVal, bool) {
			v, ok := x(ce)
			if !ok {
				return false, false
			}
			b, ok := refCast(v, false).(bool)
			return !b, ok
		}
	case strings.EqualFold(t, "EXISTS"):
		name := strings.ToLower(p.take())
		return func(ce event.Event) (refVal, bool) {
			_, ok := refAttr(ce, name)
			return ok, true
		}
	case strings.EqualFold(t, "TRUE"), strings.EqualFold(t, "FALSE"):
		b := strings.EqualFold(t, "TRUE")
		return func(event.Event) (refVal, bool) { return b, true }
	case t == "(":
		x := p.logic()
		if p.take() != ")" {
			panic("ref: unbalanced")
		}
		return x
	case t[0] == '\'' || t[0] == '"':
		s := refString(t)
		return func(event.Event) (refVal, bool) { return s, true }
	}
	if i, err := strconv.ParseInt(t, 10, 32); err == nil {
		return func(event.Event) (refVal, bool) { return i, true }
	}
	name := strings.ToLower(t)
	return func(ce event.Event) (refVal, bool) { return refAttr(ce, name) }
}

// refString unquotes a string literal: \' in '…' and \" in "…" are the
// quote; other backslashes stay (spec 2.2, TCK literals).
func refString(t string) string {
	q := t[:1]
	return strings.ReplaceAll(t[1:len(t)-1], `\`+q, q)
}

// refCast casts v to the type of like (spec 3.7); nil is a cast error.
func refCast(v, like refVal) refVal {
	switch like.(type) {
	case string:
		switch x := v.(type) {
		case int64:
			return strconv.FormatInt(x, 10)
		case bool:
			return strconv.FormatBool(x)
		}
		return v
	case int64:
		switch x := v.(type) {
		case string:
			i, err := strconv.ParseInt(x, 10, 32)
			if err != nil {
				return nil
			}
			return i
		case bool:
			if x {
				return int64(1)
			}
			return int64(0)
		}
		return v
	}
	switch x := v.(type) {
	case string:
		switch strings.ToLower(x) {
		case "true":
			return true
		case "false":
			return false
		}
		return nil
	case int64:
		return x != 0
	}
	return v
}

// refLike matches s against a LIKE pattern: % any run, _ one character,
// \% and \_ the characters themselves, any other \ itself.
func refLike(s, pat []rune) bool {
	if len(pat) == 0 {
		return len(s) == 0
	}
	switch {
	case pat[0] == '\\' && len(pat) > 1 && (pat[1] == '%' || pat[1] == '_'):
		return len(s) > 0 && s[0] == pat[1] && refLike(s[1:], pat[2:])
	case pat[0] == '%':
		for i := 0; i <= len(s); i++ {
			if refLike(s[i:], pat[1:]) {
				return true
			}
		}
		return false
	case pat[0] == '_':
		return len(s) > 0 && refLike(s[1:], pat[1:])
	}
	return len(s) > 0 && s[0] == pat[0] && refLike(s[1:], pat[1:])
}

// refAttr is attribute name of ce as a CESQL value (spec 3.2): an
// extension keeps its CloudEvents type when it is a Boolean, an Integer
// or a String; anything else (a Timestamp, a URI) is its String.
func refAttr(ce event.Event, name string) (refVal, bool) {
	switch name {
	case "specversion", "id", "source", "type", "subject", "time", "datacontenttype", "dataschema":
		s, ok := ceAttr(ce, name)
		return s, ok
	}
	v, ok := ce.Extensions()[name]
	if !ok {
		return false, false
	}
	switch x := v.(type) {
	case bool:
		return x, true
	case int32:
		return int64(x), true
	case string:
		return x, true
	}
	s, err := types.Format(v)
	if err != nil {
		panic(err)
	}
	if !utf8.ValidString(s) {
		panic(fmt.Sprintf("ref: %q", s))
	}
	return s, true
}

// refPasses is the subscriptions spec's sql filter result: TRUE without
// an error.
func refPasses(e refExpr, ce event.Event) bool {
	v, ok := e(ce)
	b, isBool := v.(bool)
	return ok && isBool && b
}

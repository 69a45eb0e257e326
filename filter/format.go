package filter

import (
	"strconv"
	"strings"

	"github.com/sion-go/sion/ontology"
)

// keywords are words with a meaning in filter source; a name spelled like
// one is written quoted.
var keywords = map[string]bool{
	"type": true, "match": true, "all": true, "atleast": true, "score": true,
	"true": true, "false": true, "json": true, "xpath": true, "xmlns": true,
	"not": true, "in": true, "exists": true, "prefix": true, "suffix": true,
	"contains": true, "weight": true, "time": true,
}

// isBareName reports whether s can be written without quotes: an
// identifier of letters, digits, '_', '.', '-' and ':' starting with a
// letter or '_', and not a keyword.
func isBareName(s string) bool {
	if s == "" || keywords[s] {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z':
		case r >= 0x80 && isLetter(r):
		case i > 0 && (r >= '0' && r <= '9' || r == '.' || r == '-' || r == ':'):
		default:
			return false
		}
	}
	return true
}

func formatName(s string) string {
	if isBareName(s) {
		return s
	}
	return strconv.Quote(s)
}

// scanRaw scans a raw json(...) path or xpath(...) expression starting at
// s[i], just after the '('. It returns the index of the closing ')' that
// balances it. In a JSON path a backslash escapes the next byte and only
// "..." is a string; in XPath there are no escapes and both '...' and
// "..." are strings. ok is false if the text ends first.
func scanRaw(s string, i int, xpathMode bool) (end int, ok bool) {
	depth := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\\' && !xpathMode:
			i += 2
			continue
		case c == '"' || c == '\'' && xpathMode:
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' && !xpathMode {
					j++
				}
				j++
			}
			if j >= len(s) {
				return 0, false
			}
			i = j + 1
			continue
		case c == '(':
			depth++
		case c == ')':
			if depth == 0 {
				return i, true
			}
			depth--
		}
		i++
	}
	return 0, false
}

// formatRaw writes a path or expression raw when it reads back unchanged,
// else as a quoted string.
func formatRaw(s string, xpathMode bool) string {
	if s != "" && s == strings.TrimSpace(s) && s[0] != '"' {
		if end, ok := scanRaw(s+")", 0, xpathMode); ok && end == len(s) {
			return s
		}
	}
	return strconv.Quote(s)
}

func formatOperand(o Operand) string {
	switch o.Source {
	case SourceJSON:
		return "json(" + formatRaw(o.Name, false) + ")"
	case SourceXPath:
		return "xpath(" + formatRaw(o.Name, true) + ")"
	}
	return formatName(o.Name)
}

func formatValue(v ontology.Value) string { return v.String() }

func formatPredicate(p *Predicate) string {
	var b strings.Builder
	switch p.Op {
	case OpTrue:
		b.WriteString("true")
	case OpXPath:
		b.WriteString(formatOperand(p.Operand))
	default:
		b.WriteString(formatOperand(p.Operand))
		b.WriteByte(' ')
		switch p.Op {
		case OpRange:
			b.WriteString("in ")
			if p.LoOpen {
				b.WriteByte('(')
			} else {
				b.WriteByte('[')
			}
			b.WriteString(formatValue(p.Value))
			b.WriteString(", ")
			b.WriteString(formatValue(p.Hi))
			if p.HiOpen {
				b.WriteByte(')')
			} else {
				b.WriteByte(']')
			}
		case OpIn, OpNotIn:
			b.WriteString(p.Op.String())
			b.WriteString(" {")
			for i, m := range p.Set {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(formatValue(m))
			}
			b.WriteByte('}')
		case OpExists, OpNotExists:
			b.WriteString(p.Op.String())
		default:
			b.WriteString(p.Op.String())
			b.WriteByte(' ')
			b.WriteString(formatValue(p.Value))
		}
	}
	if p.Weight != 0 && p.Weight != 1 {
		b.WriteString(" weight ")
		b.WriteString(strconv.FormatFloat(p.Weight, 'g', -1, 64))
	}
	return b.String()
}

// format returns the canonical source of f: the type clause, the match
// clause unless it is "all", namespace bindings sorted by prefix, then the
// predicates in order.
func format(f *Filter) string {
	var b strings.Builder
	b.WriteString("{type ⊑ ")
	if f.typ == AnyType {
		b.WriteString("*")
	} else {
		b.WriteString(formatName(f.typ))
	}
	switch f.mode {
	case ModeAtLeast:
		b.WriteString("; match atleast ")
		b.WriteString(strconv.Itoa(f.atLeast))
	case ModeScore:
		b.WriteString("; match score >= ")
		b.WriteString(strconv.FormatFloat(f.threshold, 'g', -1, 64))
	}
	for _, ns := range f.ns {
		b.WriteString("; xmlns:")
		b.WriteString(ns.prefix)
		b.WriteString(" = ")
		b.WriteString(strconv.Quote(ns.uri))
	}
	for i := range f.preds {
		b.WriteString("; ")
		b.WriteString(formatPredicate(&f.preds[i]))
	}
	b.WriteByte('}')
	return b.String()
}

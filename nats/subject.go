package nats

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

// EscapeToken returns name as one NATS subject token: every byte other
// than an ASCII letter, an ASCII digit, '-', '_' and '~' is written as '%'
// and two upper-case hexadecimal digits (so "ice quake" becomes
// "ice%20quake", "sion.Control" "sion%2EControl", "a*b" "a%2Ab" and "é"
// "%C3%A9"). The result is never empty for a non-empty name, holds no
// '.', '*', '>' or white space, and UnescapeToken reverses it.
func EscapeToken(name string) string {
	n := 0
	for i := 0; i < len(name); i++ {
		if !plain(name[i]) {
			n++
		}
	}
	if n == 0 {
		return name
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(name) + 2*n)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// UnescapeToken reverses EscapeToken. It accepts upper- and lower-case
// hexadecimal digits and leaves other bytes as they are, and returns an
// error for a '%' not followed by two hexadecimal digits.
func UnescapeToken(tok string) (string, error) {
	if !strings.Contains(tok, "%") {
		return tok, nil
	}
	b := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); i++ {
		if tok[i] != '%' {
			b = append(b, tok[i])
			continue
		}
		if i+2 >= len(tok) || unhex(tok[i+1]) < 0 || unhex(tok[i+2]) < 0 {
			return "", fmt.Errorf("nats: subject token %q: '%%' not followed by two hexadecimal digits", tok)
		}
		b = append(b, byte(unhex(tok[i+1])<<4|unhex(tok[i+2])))
		i += 2
	}
	return string(b), nil
}

func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '~'
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// checkLiteral returns an error unless s is a NATS subject without
// wildcards: non-empty tokens separated by '.', no white space, no '*' or
// '>' token.
func checkLiteral(what, s string) error {
	if err := checkPattern(what, s); err != nil {
		return err
	}
	for _, t := range strings.Split(s, ".") {
		if t == "*" || t == ">" {
			return fmt.Errorf("%s %q has a wildcard token", what, s)
		}
	}
	return nil
}

// checkPattern returns an error unless s is a NATS subject, wildcards
// allowed ('*' for one token, '>' last for one or more).
func checkPattern(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if strings.ContainsAny(s, " \t\r\n\f\v\x00") {
		return fmt.Errorf("%s %q contains white space", what, s)
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		switch {
		case t == "":
			return fmt.Errorf("%s %q has an empty token", what, s)
		case t == ">" && i != len(toks)-1:
			return fmt.Errorf("%s %q has '>' before its last token", what, s)
		}
	}
	return nil
}

// covers reports whether every subject pattern b matches is matched by
// pattern a (NATS wildcards: '*' one token, '>' one or more at the end).
func covers(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i, t := range at {
		switch {
		case t == ">":
			return i < len(bt)
		case i >= len(bt) || bt[i] == ">":
			return false
		case t == "*":
		case t != bt[i]:
			return false
		}
	}
	return len(at) == len(bt)
}

// overlaps reports whether some subject is matched by both patterns.
func overlaps(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(at) && i < len(bt); i++ {
		switch {
		case at[i] == ">" || bt[i] == ">":
			return true
		case at[i] == "*" || bt[i] == "*" || at[i] == bt[i]:
		default:
			return false
		}
	}
	return len(at) == len(bt)
}

// minimal returns the patterns of set that no other pattern of set
// covers, sorted and without duplicates: one NATS subscription per
// pattern then receives each message at most once when the patterns are
// from the type space (where patterns that overlap cover one another).
func minimal(set []string) []string {
	slices.Sort(set)
	set = slices.Compact(set)
	out := set[:0:0]
	for i, s := range set {
		covered := false
		for j, o := range set {
			if i != j && covers(o, s) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, s)
		}
	}
	return out
}

// typeSpace is a place's subject space: the base subject
// "<prefix>.<place>" and, per event type of the ontology, its paths from a
// root of the ontology as escaped tokens.
type typeSpace struct {
	base  string
	o     *ontology.Ontology
	paths [][]string // by type ID: each path's tokens joined by '.'; nil for reserved types
}

// newTypeSpace enumerates the paths of every user type of o, refusing an
// ontology where a type has more than maxPaths of them.
func newTypeSpace(base string, o *ontology.Ontology, maxPaths int) (*typeSpace, error) {
	ts := &typeSpace{base: base, o: o, paths: make([][]string, o.NumTypes())}
	done := make([]bool, o.NumTypes())
	var walk func(id int) error
	walk = func(id int) error {
		if done[id] {
			return nil
		}
		t := o.Type(id)
		tok := EscapeToken(t.Name)
		var ps []string
		if len(t.Parents) == 0 {
			ps = []string{tok}
		}
		for _, pn := range t.Parents {
			p, _ := o.Lookup(pn)
			if err := walk(p.ID); err != nil {
				return err
			}
			for _, pp := range ts.paths[p.ID] {
				ps = append(ps, pp+"."+tok)
			}
			if len(ps) > maxPaths {
				return fmt.Errorf("event type %q has more than %d paths from a root of the ontology (GatewayConfig.MaxTypePaths)", t.Name, maxPaths)
			}
		}
		ts.paths[id] = ps
		done[id] = true
		return nil
	}
	for id := ontology.NumReserved; id < o.NumTypes(); id++ {
		if err := walk(id); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// subjects returns the subjects an event of type id is published on, one
// per path, in the order of the type's paths (parents in declaration
// order, depth first).
func (ts *typeSpace) subjects(id int) []string {
	ps := ts.paths[id]
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = ts.base + "." + p
	}
	return out
}

// typeOf returns the event type a subject of the space names: its tokens
// after the base must be a path from a root of the ontology, and the
// type is the last. ok is false when subj is not under the base.
func (ts *typeSpace) typeOf(subj string) (t *ontology.EventType, under bool, err error) {
	rest, ok := strings.CutPrefix(subj, ts.base+".")
	if !ok {
		return nil, false, nil
	}
	var prev *ontology.EventType
	for tok := range strings.SplitSeq(rest, ".") {
		name, err := UnescapeToken(tok)
		if err != nil {
			return nil, true, err
		}
		t, ok := ts.o.Lookup(name)
		switch {
		case !ok:
			return nil, true, fmt.Errorf("nats: subject %q: no event type %q in the ontology", subj, name)
		case t.ID < ontology.NumReserved:
			return nil, true, fmt.Errorf("nats: subject %q: event type %q is reserved", subj, name)
		case prev == nil && len(t.Parents) > 0:
			return nil, true, fmt.Errorf("nats: subject %q: event type %q is not a root of the ontology", subj, t.Name)
		case prev != nil && !slices.Contains(t.Parents, prev.Name):
			return nil, true, fmt.Errorf("nats: subject %q: event type %q is not a child of %q", subj, t.Name, prev.Name)
		}
		prev = t
	}
	return prev, true, nil
}

// wanted returns the subject patterns of the space that carry events of
// type typ (filter.AnyType: all) or of its descendants, fewest first: for
// each path of each descendant, its prefix up to the first type that is
// a descendant, exact and followed by ".>". With multiple inheritance a
// descendant may have paths that avoid typ (BGM under seasonal as well as
// music): those are listed too.
func (ts *typeSpace) wanted(typ string) ([]string, error) {
	if typ == filter.AnyType {
		return []string{ts.base + ".>"}, nil
	}
	t, ok := ts.o.Lookup(typ)
	if !ok {
		return nil, fmt.Errorf("nats: no event type %q in the subject place's ontology", typ)
	}
	var out []string
	for _, d := range ts.o.Descendants(t.ID) {
		for _, p := range ts.paths[d] {
			toks := strings.Split(p, ".")
			k := 0
			for ; k < len(toks); k++ {
				name, _ := UnescapeToken(toks[k])
				u, _ := ts.o.Lookup(name)
				if ts.o.IsA(u.ID, t.ID) {
					break
				}
			}
			s := ts.base + "." + strings.Join(toks[:k+1], ".")
			out = append(out, s, s+".>")
		}
	}
	return out, nil
}

package filter

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/antchfx/xmlquery"
	"github.com/tidwall/gjson"

	"github.com/sion-go/sion/ontology"
)

// operand values as the matcher sees them: missing, present with a typed
// value, or present but not comparable (a JSON object or array).
type val struct {
	v       ontology.Value
	present bool
}

// holds reports whether predicate p holds for operand value x. It defines
// predicate semantics; Eval uses it, and the index's records evaluate
// through rpred.holds (record.go), which makes the same calls on the same
// literals — TestRecordHolds keeps the two equal on every operator and
// value kind.
// A missing operand makes every predicate false except NotExists (and
// True); NaN makes every value predicate false.
func (p *Predicate) holds(x val) bool {
	switch p.Op {
	case OpTrue:
		return true
	case OpExists:
		return x.present
	case OpNotExists:
		return !x.present
	}
	if !x.present || x.v.IsNaN() {
		return false
	}
	v := x.v
	switch p.Op {
	case OpEQ:
		return ontology.Equal(v, p.Value)
	case OpNE:
		return !ontology.Equal(v, p.Value)
	case OpLT:
		c, ok := ontology.Compare(v, p.Value)
		return ok && c < 0
	case OpLE:
		c, ok := ontology.Compare(v, p.Value)
		return ok && c <= 0
	case OpGT:
		c, ok := ontology.Compare(v, p.Value)
		return ok && c > 0
	case OpGE:
		c, ok := ontology.Compare(v, p.Value)
		return ok && c >= 0
	case OpRange:
		c, ok := ontology.Compare(v, p.Value)
		if !ok || c < 0 || c == 0 && p.LoOpen {
			return false
		}
		c, ok = ontology.Compare(v, p.Hi)
		return ok && (c < 0 || c == 0 && !p.HiOpen)
	case OpIn:
		for _, m := range p.Set {
			if ontology.Equal(v, m) {
				return true
			}
		}
		return false
	case OpNotIn:
		for _, m := range p.Set {
			if ontology.Equal(v, m) {
				return false
			}
		}
		return true
	case OpPrefix:
		return v.Kind() == ontology.KindString && strings.HasPrefix(v.Str(), p.Value.Str())
	case OpSuffix:
		return v.Kind() == ontology.KindString && strings.HasSuffix(v.Str(), p.Value.Str())
	case OpContains:
		return v.Kind() == ontology.KindString && strings.Contains(v.Str(), p.Value.Str())
	}
	return false
}

// jsonValue converts a gjson result to an operand value. JSON null and a
// missing path are missing; numbers written as integers that fit int64 are
// KindInt (exact above 2^53), other numbers KindFloat; objects and arrays
// are present but compare with nothing. A JSON string is always a string,
// never a number or a time ("0" is not 0: DESIGN.md "Values at the
// edges").
func jsonValue(r gjson.Result) val {
	switch r.Type {
	case gjson.Null:
		return val{}
	case gjson.False:
		return val{v: ontology.Bool(false), present: true}
	case gjson.True:
		return val{v: ontology.Bool(true), present: true}
	case gjson.String:
		return val{v: ontology.String(r.Str), present: true}
	case gjson.Number:
		if isIntLiteral(r.Raw) {
			if i, err := strconv.ParseInt(r.Raw, 10, 64); err == nil {
				return val{v: ontology.Int(i), present: true}
			}
		}
		if f, err := strconv.ParseFloat(r.Raw, 64); err == nil {
			return val{v: ontology.Float(f), present: true}
		}
		return val{v: ontology.Float(r.Num), present: true}
	case gjson.JSON:
		return val{present: true}
	}
	return val{}
}

func isIntLiteral(s string) bool {
	if s != "" && s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseXML parses an XML payload once per event; nil when it does not
// parse (see readXML).
func parseXML(data []byte) *xmlquery.Node {
	doc, err := readXML(data)
	if err != nil {
		return nil
	}
	return doc
}

// readXML parses an XML document: the one parse of XML payloads for
// matching (parseXML), checking (CheckPayload) and reading events
// (XMLElements). Beyond well-formedness it refuses a prefix declared with
// an empty namespace name (xmlns:p=""), which Namespaces in XML 1.0 forbids
// and which xmlquery would otherwise attach to unprefixed attributes.
func readXML(data []byte) (*xmlquery.Node, error) {
	doc, err := xmlquery.Parse(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	for n := doc; n != nil; n = nextNode(n) {
		for _, a := range n.Attr {
			if a.Name.Space == "xmlns" && a.Value == "" {
				return nil, fmt.Errorf("prefix %q declared with an empty namespace name on <%s> (Namespaces in XML 1.0 forbids it)", a.Name.Local, n.Data)
			}
		}
	}
	return doc, nil
}

// nextNode returns the node after n in document order, or nil.
func nextNode(n *xmlquery.Node) *xmlquery.Node {
	if n.FirstChild != nil {
		return n.FirstChild
	}
	for ; n != nil; n = n.Parent {
		if n.NextSibling != nil {
			return n.NextSibling
		}
	}
	return nil
}

// xpathSource returns the boolean XPath 1.0 expression that a predicate on
// an XPath operand stands for, so that comparisons follow XPath 1.0
// coercion (node-sets compare existentially, strings and numbers convert as
// XPath says). A range is (E >= lo and E <= hi); a set is a disjunction of
// equalities; not in is a conjunction of !=; exists is boolean(E) and not
// exists is not(E). Time literals have no XPath 1.0 form and are refused.
func xpathSource(p *Predicate) (string, error) {
	e := "(" + p.Operand.Name + ")"
	lit := func(v ontology.Value) (string, error) { return xpathLiteral(v) }
	bin := func(op string, v ontology.Value) (string, error) {
		l, err := lit(v)
		if err != nil {
			return "", err
		}
		if v.Kind() == ontology.KindBool {
			// XPath 1.0 compares with a boolean after converting the other
			// side with boolean(); antchfx/xpath does not for node-sets.
			return "boolean" + e + " " + op + " " + l, nil
		}
		return e + " " + op + " " + l, nil
	}
	switch p.Op {
	case OpXPath, OpExists:
		return "boolean" + e, nil
	case OpNotExists:
		return "not" + e, nil
	case OpEQ:
		return bin("=", p.Value)
	case OpNE:
		return bin("!=", p.Value)
	case OpLT:
		return bin("<", p.Value)
	case OpLE:
		return bin("<=", p.Value)
	case OpGT:
		return bin(">", p.Value)
	case OpGE:
		return bin(">=", p.Value)
	case OpRange:
		lo, hi := ">=", "<="
		if p.LoOpen {
			lo = ">"
		}
		if p.HiOpen {
			hi = "<"
		}
		a, err := bin(lo, p.Value)
		if err != nil {
			return "", err
		}
		b, err := bin(hi, p.Hi)
		if err != nil {
			return "", err
		}
		return "(" + a + ") and (" + b + ")", nil
	case OpIn, OpNotIn:
		op, join := "=", " or "
		if p.Op == OpNotIn {
			op, join = "!=", " and "
		}
		parts := make([]string, len(p.Set))
		for i, m := range p.Set {
			s, err := bin(op, m)
			if err != nil {
				return "", err
			}
			parts[i] = "(" + s + ")"
		}
		return strings.Join(parts, join), nil
	case OpPrefix, OpSuffix, OpContains:
		fn := map[Op]string{OpPrefix: "starts-with", OpSuffix: "ends-with", OpContains: "contains"}[p.Op]
		l, err := lit(p.Value)
		if err != nil {
			return "", err
		}
		return fn + "(" + p.Operand.Name + ", " + l + ")", nil
	}
	return "", fmt.Errorf("%s has no XPath form", p.Op)
}

func xpathLiteral(v ontology.Value) (string, error) {
	switch v.Kind() {
	case ontology.KindString:
		s := v.Str()
		switch {
		case !strings.Contains(s, `"`):
			return `"` + s + `"`, nil
		case !strings.Contains(s, `'`):
			return `'` + s + `'`, nil
		}
		parts := strings.Split(s, `"`)
		for i := range parts {
			parts[i] = `"` + parts[i] + `"`
		}
		return "concat(" + strings.Join(parts, `, '"', `) + ")", nil
	case ontology.KindInt:
		return strconv.FormatInt(v.Int(), 10), nil
	case ontology.KindFloat:
		return strconv.FormatFloat(v.Float(), 'f', -1, 64), nil
	case ontology.KindBool:
		if v.Bool() {
			return "true()", nil
		}
		return "false()", nil
	}
	return "", fmt.Errorf("a value of kind %s cannot be compared in XPath 1.0", v.Kind())
}

// evalCtx caches the parsed payload of one event for Eval.
type evalCtx struct {
	ev      Event
	kind    payloadKind
	data    []byte
	xml     *xmlquery.Node
	xmlDone bool
}

func (c *evalCtx) operand(f *Filter, i int) val {
	p := &f.preds[i]
	switch p.Operand.Source {
	case SourceAttr:
		for j, n := 0, c.ev.NumAttrs(); j < n; j++ {
			if name, v := c.ev.Attr(j); name == p.Operand.Name {
				return val{v: v, present: v.IsValid()}
			}
		}
		return val{}
	case SourceJSON:
		if c.kind != payloadJSON {
			return val{}
		}
		return jsonValue(gjson.GetBytes(c.data, p.Operand.Name))
	}
	return val{}
}

func (c *evalCtx) xpathTrue(f *Filter, i int) bool {
	if c.kind != payloadXML {
		return false
	}
	if !c.xmlDone {
		c.xml, c.xmlDone = parseXML(c.data), true
	}
	if c.xml == nil {
		return false
	}
	return f.xexprs[i].holds(c.xml)
}

// Eval evaluates f against ev one predicate at a time, ignoring the event
// type (the type test needs an ontology; see Index). It returns whether the
// predicates satisfy the filter's mode, and the score (see Mode). Eval is
// the reference the Index is tested against, and is what patronage
// conditions use against a receiver's profile; it parses an XML payload on
// every call. Safe for concurrent use.
func (f *Filter) Eval(ev Event) (ok bool, score float64) {
	ct, data := ev.Payload()
	c := evalCtx{ev: ev, kind: classify(ct, data), data: data}
	n := 0
	for i := range f.preds {
		p := &f.preds[i]
		var h bool
		if p.Operand.Source == SourceXPath {
			h = c.xpathTrue(f, i)
		} else {
			h = p.holds(c.operand(f, i))
		}
		if h {
			n++
			score += p.weight()
		} else if f.mode == ModeAll {
			return false, 0
		}
	}
	return f.decide(n, score)
}

func (p *Predicate) weight() float64 {
	if p.Weight == 0 {
		return 1
	}
	return p.Weight
}

// decide applies the mode to n holding predicates with weight sum w.
func (f *Filter) decide(n int, w float64) (bool, float64) {
	return decide(f.mode, len(f.preds), f.atLeast, f.threshold, n, w)
}

// decide applies a filter's mode (with its number of predicates, K and
// threshold) to n holding predicates with weight sum w: the one
// definition that Eval and the index's records share.
func decide(mode Mode, npreds, atLeast int, threshold float64, n int, w float64) (bool, float64) {
	switch mode {
	case ModeAll:
		return n == npreds, float64(n)
	case ModeAtLeast:
		return n >= atLeast, float64(n)
	}
	return w >= threshold, w
}

const kindString = ontology.KindString

func boolValue(b bool) ontology.Value { return ontology.Bool(b) }

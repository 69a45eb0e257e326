package filter

import (
	"encoding/xml"
	"fmt"

	"github.com/antchfx/xmlquery"
	"github.com/antchfx/xpath"
)

// XMLPath is a compiled XPath 1.0 expression with its namespace prefix
// bindings, for reading values out of XML documents (see XMLElements). It
// matches names by namespace URI, as xpath(...) operands do; an unbound
// prefix is a compile error. An XMLPath is immutable and safe for
// concurrent use.
type XMLPath struct {
	expr *xpathExpr
}

// CompileXMLPath compiles expr with the prefix → namespace URI bindings ns.
// Errors wrap ErrInvalid and quote the expression.
func CompileXMLPath(expr string, ns map[string]string) (*XMLPath, error) {
	if ns == nil {
		ns = map[string]string{} // a nil map would let prefixes match as text
	}
	x, err := compileXPath(expr, ns)
	if err != nil {
		return nil, fmt.Errorf("%w: xpath %q: %v", ErrInvalid, expr, err)
	}
	return &XMLPath{expr: x}, nil
}

// String returns the expression's source.
func (x *XMLPath) String() string { return x.expr.String() }

// XMLElement is one element of a parsed XML document (see XMLElements).
// It is not safe for concurrent use: evaluate on one goroutine at a time.
type XMLElement struct {
	node *xmlquery.Node
}

// XMLElements parses the XML document doc and returns the nodes that sel
// selects, in document order; element nodes only. A document that does
// not parse returns an error wrapping ErrPayload. Cost: one parse of doc.
func XMLElements(doc []byte, sel *XMLPath) ([]XMLElement, error) {
	root, err := readXML(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: not well-formed XML: %v", ErrPayload, err)
	}
	var out []XMLElement
	left := int64(XPathStepBudget)
	x := sel.expr.get()
	it := x.Select(&budgetNav{nav: xmlquery.CreateXPathNavigator(root), left: &left})
	for it.MoveNext() {
		if n := it.Current().(*budgetNav).nav.Current(); n.Type == xmlquery.ElementNode {
			out = append(out, XMLElement{node: n})
		}
	}
	sel.expr.put(x) // the iterator is done with
	if left <= 0 {
		xpathOverBudget.Add(1)
		return nil, fmt.Errorf("%w: selecting %q took more than XPathStepBudget steps", ErrPayload, sel.String())
	}
	return out, nil
}

// Value returns the XPath 1.0 string value of x evaluated with the
// element as context node (string(x)); ok is false when x selects
// nothing. An evaluation that passes XPathStepBudget returns an error
// wrapping ErrPayload (and is counted by XPathOverBudget).
func (e XMLElement) Value(x *XMLPath) (s string, ok bool, err error) {
	left := int64(XPathStepBudget)
	xe := x.expr.get()
	r := xe.Evaluate(&budgetNav{nav: xmlquery.CreateXPathNavigator(e.node), left: &left})
	switch v := r.(type) {
	case *xpath.NodeIterator:
		if v.MoveNext() {
			s, ok = v.Current().Value(), true
		}
	case string:
		s, ok = v, true
	case float64:
		s, ok = fmt.Sprint(v), true
	case bool:
		s, ok = "false", true
		if v {
			s = "true"
		}
	}
	x.expr.put(xe) // the node iterator is done with
	if left <= 0 {
		xpathOverBudget.Add(1)
		return "", false, fmt.Errorf("%w: evaluating %q took more than XPathStepBudget steps", ErrPayload, x.String())
	}
	return s, ok, nil
}

// OuterXML returns the element and its content as a document of its own:
// the namespace declarations in scope from its ancestors are declared on
// it, so that the names in it keep their namespace URIs.
func (e XMLElement) OuterXML() []byte {
	n := e.node
	declared := map[string]bool{}
	for _, a := range n.Attr {
		if p, ok := xmlnsPrefix(a.Name); ok {
			declared[p] = true
		}
	}
	saved := n.Attr
	extra := []xmlquery.Attr{}
	for p := n.Parent; p != nil; p = p.Parent {
		for _, a := range p.Attr {
			if prefix, ok := xmlnsPrefix(a.Name); ok && !declared[prefix] {
				declared[prefix] = true
				extra = append(extra, a)
			}
		}
	}
	n.Attr = append(append([]xmlquery.Attr(nil), saved...), extra...)
	out := n.OutputXMLWithOptions(xmlquery.WithOutputSelf())
	n.Attr = saved
	return []byte(out)
}

// xmlnsPrefix reports whether an attribute name declares a namespace, and
// the prefix it declares ("" for the default namespace).
func xmlnsPrefix(n xml.Name) (string, bool) {
	switch {
	case n.Space == "xmlns":
		return n.Local, true
	case n.Space == "" && n.Local == "xmlns":
		return "", true
	}
	return "", false
}

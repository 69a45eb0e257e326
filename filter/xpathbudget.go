package filter

import (
	"sync/atomic"

	"github.com/antchfx/xmlquery"
	"github.com/antchfx/xpath"
)

// XPathStepBudget is how much work one XPath evaluation over one payload
// may do: navigation steps (moving to a parent, child, sibling or
// attribute), plus one step per 16 bytes of the string values it reads. An
// expression such as //a[. = //a[last()]] costs the square of the number
// of elements; past the budget the evaluation is cut short and its
// predicate is false (XPathOverBudget counts those). About 10–50 ms of
// work on the machines sion is measured on.
const XPathStepBudget = 1 << 20

var xpathOverBudget atomic.Uint64

// XPathOverBudget returns how many XPath evaluations this process has cut
// short for passing XPathStepBudget (each made its predicate false).
// Safe for concurrent use.
func XPathOverBudget() uint64 { return xpathOverBudget.Load() }

// evalXPath evaluates x over doc within XPathStepBudget. over reports
// that it was cut short; the result is then meaningless.
func evalXPath(x *xpath.Expr, doc *xmlquery.Node) (result any, over bool) {
	left := int64(XPathStepBudget)
	r := x.Evaluate(&budgetNav{nav: xmlquery.CreateXPathNavigator(doc), left: &left})
	if left <= 0 {
		xpathOverBudget.Add(1)
		return nil, true
	}
	return r, false
}

// budgetNav is an xpath.NodeNavigator over an xmlquery document that
// charges every step to a budget shared by its copies, and stops moving
// when the budget is spent.
type budgetNav struct {
	nav  *xmlquery.NodeNavigator
	left *int64
}

var _ xpath.NodeNavigator = (*budgetNav)(nil)

func (b *budgetNav) spend(n int64) bool {
	if *b.left <= 0 {
		return false
	}
	*b.left -= n
	return true
}

func (b *budgetNav) NodeType() xpath.NodeType { return b.nav.NodeType() }
func (b *budgetNav) LocalName() string        { return b.nav.LocalName() }
func (b *budgetNav) Prefix() string           { return b.nav.Prefix() }
func (b *budgetNav) NamespaceURL() string     { return b.nav.NamespaceURL() }

func (b *budgetNav) Value() string {
	if *b.left <= 0 {
		return ""
	}
	v := b.nav.Value()
	*b.left -= int64(len(v)/16) + 1
	return v
}

func (b *budgetNav) Copy() xpath.NodeNavigator {
	return &budgetNav{nav: b.nav.Copy().(*xmlquery.NodeNavigator), left: b.left}
}

func (b *budgetNav) MoveToRoot() { b.nav.MoveToRoot() }

func (b *budgetNav) MoveToParent() bool        { return b.spend(1) && b.nav.MoveToParent() }
func (b *budgetNav) MoveToNextAttribute() bool { return b.spend(1) && b.nav.MoveToNextAttribute() }
func (b *budgetNav) MoveToChild() bool         { return b.spend(1) && b.nav.MoveToChild() }
func (b *budgetNav) MoveToFirst() bool         { return b.spend(1) && b.nav.MoveToFirst() }
func (b *budgetNav) MoveToNext() bool          { return b.spend(1) && b.nav.MoveToNext() }
func (b *budgetNav) MoveToPrevious() bool      { return b.spend(1) && b.nav.MoveToPrevious() }

func (b *budgetNav) MoveTo(other xpath.NodeNavigator) bool {
	o, ok := other.(*budgetNav)
	return ok && b.nav.MoveTo(o.nav)
}

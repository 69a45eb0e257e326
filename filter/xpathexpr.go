package filter

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/antchfx/xmlquery"
	"github.com/antchfx/xpath"
)

// xpathExpr is a compiled XPath 1.0 expression that any number of
// goroutines may evaluate at once. An *xpath.Expr may not be: evaluating
// one resets and advances iterator state kept in its compiled query tree
// (absoluteQuery.count, childQuery.iterator, …), and the node iterators
// that Evaluate and Select return share parts of that tree (function
// arguments are not cloned). So an xpathExpr holds compiled copies of its
// source, and each evaluation takes a copy for itself and gives it back.
//
// The copy compiled by compileXPath stays in home for the expression's
// life; copies for goroutines evaluating at the same time go to a
// sync.Pool. The garbage collector empties a sync.Pool, and recompiling
// costs about three evaluations, so a pool alone would recompile on most
// evaluations of a filter whose events come more rarely than the
// collector runs.
//
// Cost: an atomic swap and compare-and-swap per evaluation,
// allocation-free; an evaluation that finds home taken uses the pool, and
// compiles a copy when the pool is empty too.
type xpathExpr struct {
	src  string
	ns   map[string]string          // prefix → namespace URI; never modified
	home atomic.Pointer[xpath.Expr] // a copy not in use, or nil
	pool sync.Pool                  // more *xpath.Expr copies not in use
}

// compileXPath compiles src with the prefix → namespace URI bindings ns
// (copied; nil and empty differ to xpath.CompileWithNS). The error is
// xpath's, so a filter's compile errors still come from Compile and Build.
func compileXPath(src string, ns map[string]string) (*xpathExpr, error) {
	x, err := xpath.CompileWithNS(src, ns)
	if err != nil {
		return nil, err
	}
	e := &xpathExpr{src: src, ns: maps.Clone(ns)}
	e.home.Store(x)
	return e, nil
}

// String returns the expression's source.
func (e *xpathExpr) String() string { return e.src }

// get returns a compiled copy of e that no other goroutine holds. Give it
// back with put once it, and every iterator it returned, is done with.
func (e *xpathExpr) get() *xpath.Expr {
	if x := e.home.Swap(nil); x != nil {
		return x
	}
	if x, ok := e.pool.Get().(*xpath.Expr); ok {
		return x
	}
	x, err := xpath.CompileWithNS(e.src, e.ns)
	if err != nil { // it compiled in compileXPath
		panic(fmt.Sprintf("filter: recompiling xpath %q: %v", e.src, err))
	}
	return x
}

// put gives back a copy that get returned.
func (e *xpathExpr) put(x *xpath.Expr) {
	if !e.home.CompareAndSwap(nil, x) {
		e.pool.Put(x)
	}
}

// holds evaluates e over doc within XPathStepBudget (see evalXPath) and
// reports whether the result is the boolean true: false when the
// evaluation is cut short or the result is not a boolean.
func (e *xpathExpr) holds(doc *xmlquery.Node) bool {
	x := e.get()
	r, _ := evalXPath(x, doc)
	e.put(x)
	b, _ := r.(bool)
	return b
}

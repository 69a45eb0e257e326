package filter

import (
	"fmt"

	"github.com/sion-go/sion/ontology"
)

// CompileCondition compiles a patronage condition (S1 "patronage", reverse
// matching): a filter that an event carries and that is evaluated against
// each receiver's profile — the attributes declared on its session — so
// that, for example, only sessions whose tier ≥ 2 receive the event. A
// condition has no event type (or AnyType) and only attribute operands:
// `{tier >= 2; region in {"eu", "us"}}`. Its modes and operators are those
// of any filter. Errors are those of Compile, plus a *BuildError wrapping
// ErrInvalid for a type clause or a payload operand.
func CompileCondition(src string) (*Filter, error) {
	f, err := Compile(src)
	if err != nil {
		return nil, err
	}
	if err := checkCondition(f); err != nil {
		return nil, err
	}
	return f, nil
}

func checkCondition(f *Filter) error {
	if f.typ != AnyType {
		return &BuildError{Index: -1, Msg: fmt.Sprintf("a patronage condition has no event type, not %q", f.typ)}
	}
	for i := range f.preds {
		p := &f.preds[i]
		if p.Operand.Source == SourceJSON || p.Operand.Source == SourceXPath {
			return &BuildError{Index: i, Pred: formatPredicate(p), Msg: "a patronage condition reads the receiver's profile attributes, not a payload"}
		}
	}
	return nil
}

// MatchProfile reports whether the patronage condition f holds for a
// receiver whose profile is the attribute set profile (names canonical,
// values typed). A nil condition holds for every profile. It refuses, with
// an error wrapping ErrInvalid, a filter with a type or payload operands
// (use CompileCondition to catch that early). It evaluates predicate by
// predicate; safe for concurrent use.
func (f *Filter) MatchProfile(profile []ontology.Attr) (bool, error) {
	if f == nil {
		return true, nil
	}
	if err := checkCondition(f); err != nil {
		return false, err
	}
	ok, _ := f.Eval(&BasicEvent{Type: AnyType, Attrs: profile})
	return ok, nil
}

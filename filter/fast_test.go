package filter

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// TestFastPredAgreesWithHolds checks the compact form that posting lists
// keep inline against Predicate.holds, on every pair of a predicate and a
// value from boundary-heavy lists: set bitmaps at both ends of their 64
// values, ints beyond 2^53, floats that are and are not integral, values of
// other kinds, NaN and a missing value; and holdsInt, which Match uses
// for integer values within ±posLimit, against the same.
func TestFastPredAgreesWithHolds(t *testing.T) {
	a := Attr("a")
	i, f := ontology.Int, ontology.Float
	big := int64(1) << 53
	preds := []Predicate{
		a.EQ(i(3)), a.EQ(f(math.Copysign(0, -1))), a.EQ(i(big)), a.NE(i(3)), a.NE(f(2.5)),
		a.LT(i(0)), a.LE(f(1.5)), a.GT(i(-7)), a.GE(i(big)),
		a.Range(i(-2), i(5), false, true), a.Range(f(0.5), f(0.75), true, false),
		a.In(i(3)), a.In(i(0), i(63)), a.In(i(-10), i(53)), a.In(f(4), i(5), f(-1)),
		a.In(i(big-64), i(big-1)), a.In(i(-big), i(-big+63)),
		a.NotIn(i(1), i(2)), a.NotIn(i(0), i(63)), a.NotIn(f(7), i(-3)),
		a.Exists(), a.NotExists(),
		JSON("x").In(i(1), i(9)), JSON("x").NotIn(i(2)),
		a.LE(i(3)), a.GE(i(-7)), a.LT(i(5)), a.GT(i(3)), a.Range(i(0), i(63), true, false), a.Range(f(-3), f(9), false, false),
		a.EQ(i(posLimit)), a.LT(f(posLimit - 0.5)), a.Range(i(-posLimit), f(-posLimit+0.5), true, false), a.In(i(posLimit-63), i(posLimit)),
	}
	vals := []val{{}}
	for _, v := range []ontology.Value{
		i(0), i(1), i(2), i(3), i(4), i(5), i(7), i(9), i(53), i(54), i(62), i(63), i(64), i(-1), i(-3), i(-7), i(-10), i(-11), i(-2),
		i(big), i(big + 1), i(big - 1), i(big - 64), i(big - 65), i(-big), i(-big + 63), i(-big + 64), i(math.MaxInt64), i(math.MinInt64),
		f(0), f(math.Copysign(0, -1)), f(3), f(3.5), f(63), f(64), f(-1), f(2.5), f(0.5), f(0.75), f(1.5), f(float64(big)), f(1e300), f(-1e300),
		f(math.Inf(1)), f(math.NaN()), f(5e-324),
		ontology.String("3"), ontology.Bool(true), ontology.TimeNanos(3),
		i(posLimit), i(posLimit - 1), i(posLimit + 1), i(-posLimit), i(-posLimit + 1), f(posLimit), f(-posLimit), f(posLimit - 0.5),
	} {
		vals = append(vals, val{v: v, present: true})
	}
	compact, ints := 0, 0
	for _, p := range preds {
		fp, ok := makeFast(&p, 0)
		if !ok {
			continue
		}
		compact++
		for _, x := range vals {
			require.Equal(t, p.holds(x), fp.holds(x), "%s on %v (present %v)", p.Op, x.v, x.present)
			if x.present {
				// What Match tests by position: integers within ±posLimit.
				if n := headPos(x.v); n > posOther {
					require.Equal(t, p.holds(x), fp.holdsInt(n), "holdsInt: %s on %v", p.Op, x.v)
					ints++
				}
			}
		}
	}
	require.Equal(t, len(preds), compact, "every predicate above has a compact form")
	require.Greater(t, ints, 20*len(preds), "most values above are integers within ±posLimit")

	// Sets that do not fit a bitmap, or hold non-integral or non-numeric
	// members, have none.
	for _, p := range []Predicate{a.In(i(0), i(64)), a.In(f(0.5)), a.In(ontology.String("x")), a.NotIn(i(-big - 1)), a.In(i(math.MaxInt64))} {
		_, ok := makeFast(&p, 0)
		require.False(t, ok, fmt.Sprint(p.Op, p.Set))
	}
}

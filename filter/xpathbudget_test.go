package filter

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestXPathBudget: an expression whose cost is the square of the payload's
// size is cut short on a large payload (its predicate is false, and
// counted) and evaluates normally on a small one, in Eval and in Index.
func TestXPathBudget(t *testing.T) {
	f := MustCompile(`{xpath(//a[. = //a[last()]])}`)
	doc := func(n int) *BasicEvent {
		return &BasicEvent{Type: "Reading", ContentType: "application/xml", Data: []byte("<r>" + strings.Repeat("<a>1</a>", n) + "</r>")}
	}
	o := ont1(t)
	ix := NewIndex(o)
	require.NoError(t, ix.Add(1, f))
	matches := func(ev Event) bool {
		hit := false
		ix.Match(ev, func(uint64, float64) { hit = true })
		return hit
	}

	small := doc(20)
	before := XPathOverBudget()
	ok, _ := f.Eval(small)
	assert.True(t, ok, "within the budget the expression is evaluated")
	assert.True(t, matches(small))
	assert.Equal(t, before, XPathOverBudget())

	large := doc(4000) // 16 million steps
	ok, _ = f.Eval(large)
	assert.False(t, ok, "cut short: the predicate is false")
	assert.False(t, matches(large))
	assert.Equal(t, before+2, XPathOverBudget(), "both cuts are counted")

	// A linear expression over the same large payload stays within it.
	lin := MustCompile(`{xpath(count(//a) = 4000)}`)
	ok, _ = lin.Eval(large)
	assert.True(t, ok)
	assert.Equal(t, before+2, XPathOverBudget())
}

package filter

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// xpathCase is one XML event of the concurrency test and benchmark: a
// Place element (absent when "") and a Notification element (absent when
// negative) under /Event.
type xpathCase struct {
	place string
	n     int
}

func (c xpathCase) event() *BasicEvent {
	var b strings.Builder
	b.WriteString("<Event>")
	if c.place != "" {
		fmt.Fprintf(&b, "<Place>%s</Place>", c.place)
	}
	if c.n >= 0 {
		fmt.Fprintf(&b, "<Notification>%d</Notification>", c.n)
	}
	b.WriteString("</Event>")
	return &BasicEvent{Type: "Event", ContentType: "application/xml", Data: []byte(b.String())}
}

// elements is what XMLElements(/Event/*) and Value(.) read from the event.
func (c xpathCase) elements() []string {
	var out []string
	if c.place != "" {
		out = append(out, c.place)
	}
	if c.n >= 0 {
		out = append(out, fmt.Sprint(c.n))
	}
	return out
}

// xpathFilters are XPath filters over xpathCase events, each with the
// result Go computes for it. Filters 1 and 3 share a key in an Index, as
// do 2 and 3.
var xpathFilters = []struct {
	src  string
	want func(c xpathCase) bool
}{
	{`{xpath(/Event/Place = 'X')}`, func(c xpathCase) bool { return c.place == "X" }},
	{`{xpath(/Event/Notification) >= 20}`, func(c xpathCase) bool { return c.n >= 20 }},
	{`{xpath(/Event/Place = 'X'); xpath(/Event/Notification) >= 20}`, func(c xpathCase) bool { return c.place == "X" && c.n >= 20 }},
	{`{xpath(//Notification) in [10, 30]}`, func(c xpathCase) bool { return c.n >= 10 && c.n <= 30 }},
	{`{xpath(/Event/Place) != "X"}`, func(c xpathCase) bool { return c.place != "" && c.place != "X" }},
	{`{xpath(count(/Event/*) = 2)}`, func(c xpathCase) bool { return c.place != "" && c.n >= 0 }},
	{`{xpath(/Event/Notification) not exists}`, func(c xpathCase) bool { return c.n < 0 }},
}

func xpathCases() []xpathCase {
	var cs []xpathCase
	for _, p := range []string{"X", "Y", ""} {
		for _, n := range []int{-1, 5, 20, 40} {
			cs = append(cs, xpathCase{p, n})
		}
	}
	return cs
}

// TestXPathConcurrent: goroutines evaluating the same compiled XPath
// expressions at once — through Index.Match and Filter.Eval, as a switch
// does for events from several links, and through XMLPath — each get the
// result one goroutine alone gets. antchfx/xpath keeps evaluation state in
// a compiled expression, so sharing one between goroutines races (go test
// -race reports it) and can give wrong results.
func TestXPathConcurrent(t *testing.T) {
	const goroutines, rounds = 8, 50
	cases := xpathCases()
	ix := NewIndex(ont1(t))
	fs := make([]*Filter, len(xpathFilters))
	for i, xf := range xpathFilters {
		fs[i] = MustCompile(xf.src)
		require.NoError(t, ix.Add(uint64(i+1), fs[i]))
	}
	sel, err := CompileXMLPath("/Event/*", nil)
	require.NoError(t, err)
	self, err := CompileXMLPath(".", nil)
	require.NoError(t, err)

	type want struct {
		ids   []uint64 // sorted
		evals []bool   // per filter
		elems []string
	}
	wants := make([]want, len(cases))
	for i, c := range cases {
		w := want{evals: make([]bool, len(fs)), elems: c.elements()}
		for j, xf := range xpathFilters {
			if w.evals[j] = xf.want(c); w.evals[j] {
				w.ids = append(w.ids, uint64(j+1))
			}
		}
		wants[i] = w
	}

	bodies := map[string]func(t *testing.T, c xpathCase, w want) bool{
		"Index.Match": func(t *testing.T, c xpathCase, w want) bool {
			var got []uint64
			ix.Match(c.event(), func(id uint64, _ float64) { got = append(got, id) })
			slices.Sort(got)
			return assert.Equal(t, w.ids, got, "%+v", c)
		},
		"Filter.Eval": func(t *testing.T, c xpathCase, w want) bool {
			ev := c.event()
			for j, f := range fs {
				ok, _ := f.Eval(ev)
				if !assert.Equal(t, w.evals[j], ok, "%s on %+v", f, c) {
					return false
				}
			}
			return true
		},
		"XMLPath": func(t *testing.T, c xpathCase, w want) bool {
			elems, err := XMLElements(c.event().Data, sel)
			if !assert.NoError(t, err) {
				return false
			}
			var got []string
			for _, e := range elems {
				s, ok, err := e.Value(self)
				if !assert.NoError(t, err) || !assert.True(t, ok) {
					return false
				}
				got = append(got, s)
			}
			return assert.Equal(t, w.elems, got, "%+v", c)
		},
	}
	for _, name := range []string{"Index.Match", "Filter.Eval", "XMLPath", "all"} {
		t.Run(name, func(t *testing.T) {
			check := func(t *testing.T, g, i int) bool {
				if name == "all" {
					name := [...]string{"Index.Match", "Filter.Eval", "XMLPath"}[(g+i)%3]
					return bodies[name](t, cases[i], wants[i])
				}
				return bodies[name](t, cases[i], wants[i])
			}
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for r := range rounds {
						for k := range cases {
							if i := (k + g + r) % len(cases); !check(t, g, i) {
								return // one report per goroutine is enough
							}
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// BenchmarkXPath measures XPath filters over XML events, on one goroutine
// and on all (b.RunParallel), where goroutines evaluate the same compiled
// expressions at once. Index.Match and Filter.Eval parse the payload on
// every call; Evaluate is one evaluation over a parsed document.
func BenchmarkXPath(b *testing.B) {
	cases := xpathCases()
	evs := make([]*BasicEvent, len(cases))
	for i, c := range cases {
		evs[i] = c.event()
	}
	ix := NewIndex(ont1(b))
	fs := make([]*Filter, len(xpathFilters))
	for i, xf := range xpathFilters {
		fs[i] = MustCompile(xf.src)
		if err := ix.Add(uint64(i+1), fs[i]); err != nil {
			b.Fatal(err)
		}
	}
	match := func(i int) {
		ix.Match(evs[i%len(evs)], func(uint64, float64) {})
	}
	eval := func(i int) {
		fs[i%len(fs)].Eval(evs[i%len(evs)])
	}
	doc := parseXML(evs[len(evs)/2].Data)
	f := fs[1]
	evaluate := func(int) {
		f.xexprs[0].holds(doc)
	}
	for _, bm := range []struct {
		name string
		op   func(i int)
	}{{"Match", match}, {"Eval", eval}, {"Evaluate", evaluate}} {
		b.Run(bm.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				bm.op(i)
				i++
			}
		})
		b.Run(bm.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					bm.op(i)
					i++
				}
			})
		})
	}
}

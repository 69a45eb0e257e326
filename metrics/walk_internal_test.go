package metrics

import (
	"runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
)

// TestCount checks the monotonic guard over sequences of raw reads.
func TestCount(t *testing.T) {
	a, b := new(sion.Switch), new(sion.Switch) // identities only: never used
	sw1, sw2 := weak.Make(a), weak.Make(b)
	type read struct {
		sw   weak.Pointer[sion.Switch]
		raw  uint64
		want float64
	}
	for _, tc := range []struct {
		name  string
		reads []read
	}{
		{"rising", []read{{sw1, 0, 0}, {sw1, 3, 3}, {sw1, 7, 7}}},
		{"correction held", []read{{sw1, 5, 5}, {sw1, 4, 5}, {sw1, 6, 6}}},
		{"switch replaced", []read{{sw1, 8, 8}, {sw2, 0, 8}, {sw2, 1, 9}}},
		{"switch replaced, already past", []read{{sw1, 5, 5}, {sw2, 9, 14}}},
		{"back and forth", []read{{sw1, 5, 5}, {sw2, 1, 6}, {sw1, 6, 12}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st state
			lv := []string{"s", "p"}
			for i, r := range tc.reads {
				assert.Equal(t, r.want, st.count(fEventsIn, lv, r.sw, r.raw), "read %d", i)
			}
			assert.Equal(t, float64(0), st.count(fFires, lv, sw1, 0), "another family is another series")
		})
		runtime.KeepAlive(a)
		runtime.KeepAlive(b)
	}
}

// TestForget: what a Collector remembers of a series its switch no
// longer has goes at the end of the walk that missed it; what it
// remembers of switches it no longer holds stays, for one of the same
// name and place to continue.
func TestForget(t *testing.T) {
	o, err := ontology.New([]ontology.TypeDef{{Name: "Alarm"}})
	require.NoError(t, err)
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "p", Ontology: o})
	require.NoError(t, err)
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "s", Place: place})
	require.NoError(t, err)
	t.Cleanup(func() { sw.Close() })

	var st state
	require.NoError(t, st.add(sw))
	gone := monoKey{f: fLinkEventsSent, lv: [maxLabels]string{"s", "p", "peer-gone"}}
	removed := monoKey{f: fEventsIn, lv: [maxLabels]string{"old", "p"}}
	st.mono = map[monoKey]monoVal{gone: {last: 7}, removed: {last: 9}}
	st.walk(func(*family, []string, float64) {}, nil)
	assert.NotContains(t, st.mono, gone, "a series s no longer has is forgotten")
	assert.Contains(t, st.mono, removed, "a switch not held is remembered")
	assert.Contains(t, st.mono, monoKey{f: fEventsIn, lv: [maxLabels]string{"s", "p"}}, "a series s has is remembered")
}

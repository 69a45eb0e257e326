package metrics

import (
	"runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"

	"github.com/sion-go/sion"
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

package metrics

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sion-go/sion"
)

// TestCount checks the monotonic guard over sequences of raw reads.
func TestCount(t *testing.T) {
	sw1, sw2 := new(sion.Switch), new(sion.Switch) // identities only: never used
	type read struct {
		ep   epoch
		raw  uint64
		want float64
	}
	for _, tc := range []struct {
		name  string
		reads []read
	}{
		{"rising", []read{{epoch{sw1, 0}, 0, 0}, {epoch{sw1, 0}, 3, 3}, {epoch{sw1, 0}, 7, 7}}},
		{"correction held", []read{{epoch{sw1, 0}, 5, 5}, {epoch{sw1, 0}, 4, 5}, {epoch{sw1, 0}, 6, 6}}},
		{"new incarnation from zero", []read{{epoch{sw1, 1}, 5, 5}, {epoch{sw1, 2}, 0, 5}, {epoch{sw1, 2}, 2, 7}}},
		{"new incarnation already past", []read{{epoch{sw1, 1}, 5, 5}, {epoch{sw1, 2}, 9, 14}}},
		{"down then up", []read{{epoch{sw1, 1}, 5, 5}, {epoch{sw1, 0}, 0, 5}, {epoch{sw1, 3}, 1, 6}}},
		{"switch replaced", []read{{epoch{sw1, 0}, 8, 8}, {epoch{sw2, 0}, 1, 9}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st state
			lv := []string{"s", "p"}
			for i, r := range tc.reads {
				assert.Equal(t, r.want, st.count(fEventsIn, lv, r.ep, r.raw), "read %d", i)
			}
			assert.Equal(t, float64(0), st.count(fFires, lv, epoch{sw1, 0}, 0), "another family is another series")
		})
	}
}

package filter

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/sion-go/sion/ontology"
)

// TestUSGSWeek matches the real USGS week of 2023-04-07 (2,389 events,
// ../testdata/README.md) through JSON payload filters, in the Index and in the
// oracle, and checks the counts against the dataset's ground truth.
func TestUSGSWeek(t *testing.T) {
	raw, err := os.ReadFile("../examples/internal/usgs/all_week_2023-04-07.geojson")
	require.NoError(t, err)
	o, err := ontology.New([]ontology.TypeDef{{Name: "Quake"}})
	require.NoError(t, err)

	features := gjson.GetBytes(raw, "features").Array()
	require.Len(t, features, 2389)
	events := make([]*BasicEvent, len(features))
	for i, f := range features {
		events[i] = &BasicEvent{Type: "Quake", ContentType: "application/json", Data: []byte(f.Raw)}
	}

	cases := []struct {
		name, src string
		want      int
	}{
		{"mag at least 4.5", `{type ⊑ Quake; json(properties.mag) >= 4.5}`, 81},
		{"mag exactly 4.5", `{type ⊑ Quake; json(properties.mag) == 4.5}`, 14},
		{"mag above 4.5", `{type ⊑ Quake; json(properties.mag) > 4.5}`, 67},
		{"not an earthquake", `{type ⊑ Quake; json(properties.type) != "earthquake"}`, 43},
		{"Alaska", `{type ⊑ Quake; json(properties.place) contains "Alaska"}`, 1082},
		{"Alaska and mag 2.5", `{json(properties.place) contains "Alaska"; json(properties.mag) >= 2.5}`, 62},
		{"tsunami flag", `{json(properties.tsunami) == 1}`, 6},
		{"alert", `{json(properties.alert) in {"yellow", "orange", "red"}}`, 1},
		{"man-made", `{json(properties.type) in {"explosion", "quarry blast", "chemical explosion"}}`, 36},
		{"deep", `{json(geometry.coordinates.2) > 300}`, 13},
		{"felt", `{json(properties.felt) >= 10}`, 29},
		{"big or deep, 1 of 2", `{match atleast 1; json(properties.mag) >= 4.5; json(geometry.coordinates.2) > 300}`, 81 + 13 - overlap(events, 4.5, 300)},
	}
	ix, bf := NewIndex(o), NewBruteForce(o)
	for i, c := range cases {
		f, err := Compile(c.src)
		require.NoError(t, err, c.src)
		require.NoError(t, ix.Add(uint64(i), f))
		require.NoError(t, bf.Add(uint64(i), f))
	}
	gotIx, gotBF := make([]int, len(cases)), make([]int, len(cases))
	for _, ev := range events {
		ix.Match(ev, func(id uint64, _ float64) { gotIx[id]++ })
		bf.Match(ev, func(id uint64, _ float64) { gotBF[id]++ })
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, gotIx[i], "index: %s", c.src)
			assert.Equal(t, c.want, gotBF[i], "oracle: %s", c.src)
		})
	}
}

// overlap counts events with mag ≥ m and depth > d, read directly with gjson.
func overlap(events []*BasicEvent, m, d float64) int {
	n := 0
	for _, ev := range events {
		if gjson.GetBytes(ev.Data, "properties.mag").Float() >= m && gjson.GetBytes(ev.Data, "geometry.coordinates.2").Float() > d {
			n++
		}
	}
	return n
}

package traffic

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const temp = "TemperatureMoreThan20"

// fig13 records, within one second, the traffic of S3's Fig. 13 at a
// rendezvous switch: 245 TemperatureMoreThan20 events, of which 160 at
// Place YokohamaStation (100 from GlobalPosition ID 0001, 60 from 0002),
// 50 at TokyoStation (0003) and 35 at KawasakiStation (0004).
func fig13(m *Meter, at time.Time) {
	for _, g := range []struct {
		place, id string
		n         int
	}{{"YokohamaStation", "0001", 100}, {"YokohamaStation", "0002", 60}, {"TokyoStation", "0003", 50}, {"KawasakiStation", "0004", 35}} {
		for range g.n {
			m.Record(at, Class{Level: LevelType, Type: temp},
				Class{Level: LevelUpper, Type: temp, Attr: "Place", Value: g.place},
				Class{Level: LevelLowest, Type: temp, Attr: "GlobalPositionID", Value: g.id})
		}
	}
}

// TestFig13: the source's own figures — load 245; bypassing the hottest
// level-2 class (Place YokohamaStation, 160) leaves 85, the hottest
// level-3 class (GlobalPosition ID 0001, 100) leaves 145.
func TestFig13(t *testing.T) {
	m := New(Config{Window: time.Second, Buckets: 10})
	now := time.Unix(1000, 0)
	fig13(m, now)
	assert.Equal(t, 245.0, m.Load(now))
	h2, ok := m.Hottest(now, LevelUpper)
	require.True(t, ok)
	assert.Equal(t, Rate{Class{LevelUpper, temp, "Place", "YokohamaStation"}, 160}, h2)
	assert.Equal(t, 85.0, m.Load(now)-h2.Rate)
	h3, ok := m.Hottest(now, LevelLowest)
	require.True(t, ok)
	assert.Equal(t, Rate{Class{LevelLowest, temp, "GlobalPositionID", "0001"}, 100}, h3)
	assert.Equal(t, 145.0, m.Load(now)-h3.Rate)
	assert.Equal(t, "TemperatureMoreThan20/Place=YokohamaStation", h2.Class.String())
	var names []string
	for _, r := range m.Rates(now, LevelUpper) {
		names = append(names, fmt.Sprint(r.Class.Value, " ", r.Rate))
	}
	assert.Equal(t, []string{"YokohamaStation 160", "TokyoStation 50", "KawasakiStation 35"}, names, "hottest first")
}

func TestWindowSlides(t *testing.T) {
	m := New(Config{Window: 10 * time.Second, Buckets: 10})
	c := Class{Level: LevelType, Type: "A"}
	t0 := time.Unix(2000, 0)
	for s := range 10 { // 5 events in each of ten seconds
		for range 5 {
			m.Record(t0.Add(time.Duration(s)*time.Second), c)
		}
	}
	at := t0.Add(9 * time.Second)
	assert.Equal(t, 5.0, m.Rate(at, c), "50 events over 10 s")
	assert.Equal(t, 4.5, m.Rate(at.Add(time.Second), c), "the first second left the window")
	assert.Equal(t, 0.5, m.Rate(at.Add(9*time.Second), c))
	assert.Equal(t, 0.0, m.Rate(at.Add(10*time.Second), c), "all of it left")
	assert.Empty(t, m.Rates(at.Add(10*time.Second), LevelType))
	_, ok := m.Hottest(at.Add(10*time.Second), LevelType)
	assert.False(t, ok)
	assert.Equal(t, 0.0, m.Rate(at, Class{Level: LevelType, Type: "never"}))
}

func TestBoundedClasses(t *testing.T) {
	m := New(Config{Window: time.Second, Buckets: 2, MaxClasses: 3})
	at := time.Unix(3000, 0)
	cls := func(i int) Class { return Class{Level: LevelLowest, Type: "T", Attr: "id", Value: fmt.Sprint(i)} }
	for i := range 5 {
		m.Record(at, cls(i))
	}
	assert.Len(t, m.Rates(at, LevelLowest), 3, "no more than MaxClasses")
	assert.Equal(t, uint64(2), m.Dropped(), "the two it could not keep are counted")
	later := at.Add(2 * time.Second) // the window is empty: the old classes give way
	m.Record(later, cls(9))
	assert.Equal(t, []Rate{{cls(9), 1}}, m.Rates(later, LevelLowest))
	assert.Equal(t, uint64(2), m.Dropped())
}

func TestConcurrentRecord(t *testing.T) {
	m := New(Config{})
	at := time.Unix(4000, 0)
	c := Class{Level: LevelType, Type: "A"}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				m.Record(at, c)
				m.Rates(at, LevelType)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 400.0, m.Rate(at, c), "4000 events over the default 10 s")
}

func BenchmarkRecord(b *testing.B) {
	m := New(Config{})
	at := time.Unix(5000, 0)
	cs := []Class{{Level: LevelType, Type: temp}, {Level: LevelUpper, Type: temp, Attr: "Place", Value: "YokohamaStation"}, {Level: LevelLowest, Type: temp, Attr: "GlobalPositionID", Value: "0001"}}
	b.ReportAllocs()
	for b.Loop() {
		m.Record(at, cs...)
	}
}

// Package traffic measures the traffic of events per event class, as a
// rendezvous switch of S3 does (its traffic monitoring unit and specific
// event determination unit): every event that crosses the switch counts
// for its class at three levels of the identification hierarchy — the
// event type (level 1); the type and a first-level attribute's value, S3's
// Place = "YokohamaStation" (level 2); the type and a lowest-level
// attribute's value, S3's GlobalPosition data ID (level 3) — and the
// switch finds the hottest class of a level when its load (the level-1
// total) is over a threshold, to take that class off itself with a bypass.
//
// Rates are events per second over a sliding window, kept in a ring of
// buckets per class. The caller passes the time, so that tests and
// simulations control it. The package imports only the standard library.
package traffic

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Level is a level of the identification hierarchy of events (S3).
type Level int

const (
	// LevelType identifies events by their event type.
	LevelType Level = 1
	// LevelUpper identifies them by type and the value of a first-level
	// attribute (S3's upper event identification: Place).
	LevelUpper Level = 2
	// LevelLowest identifies them by type and the value of a lowest-level
	// attribute (S3's lower event identification: GlobalPosition's ID).
	LevelLowest Level = 3
)

// Class is an event class: the events of Type (Level 1), or those whose
// attribute Attr has the value Value as text (Levels 2 and 3). It is
// comparable.
type Class struct {
	Level Level
	Type  string
	Attr  string
	Value string
}

// String returns "Type" or "Type/Attr=Value".
func (c Class) String() string {
	if c.Level == LevelType {
		return c.Type
	}
	return c.Type + "/" + c.Attr + "=" + c.Value
}

// Rate is a class's traffic in events per second.
type Rate struct {
	Class Class
	Rate  float64
}

// DefaultMaxClasses bounds the classes a Meter keeps (MaxClasses when 0).
const DefaultMaxClasses = 4096

// Config configures a Meter; the zero value of each field means its
// default.
type Config struct {
	// Window is how far back a rate looks; default 10 s.
	Window time.Duration
	// Buckets divides the window; default 10. A rate is exact for events
	// older than one bucket and counts the current bucket whole.
	Buckets int
	// MaxClasses bounds the classes kept at once (memory: about 100 bytes
	// plus 8 per bucket each, and the names). A new class when the meter
	// is full first evicts the classes whose window is empty; if none is,
	// the event still counts for the classes the meter has, and Dropped
	// counts the class it could not keep. Default DefaultMaxClasses.
	MaxClasses int
}

// A Meter counts events per class over a sliding window. A Meter is safe
// for concurrent use.
type Meter struct {
	width   time.Duration // of a bucket
	buckets int
	max     int

	mu      sync.Mutex
	classes map[Class]*counts // mu
	dropped uint64            // mu
}

// counts is one class's ring of buckets: n[i] counts the events of the
// bucket numbered epoch[i] (a bucket number is time / width).
type counts struct {
	n     []uint64
	epoch []int64
}

// New returns a Meter for cfg.
func New(cfg Config) *Meter {
	cfg.Window = cmp.Or(cfg.Window, 10*time.Second)
	cfg.Buckets = cmp.Or(cfg.Buckets, 10)
	cfg.MaxClasses = cmp.Or(cfg.MaxClasses, DefaultMaxClasses)
	return &Meter{width: cfg.Window / time.Duration(cfg.Buckets), buckets: cfg.Buckets, max: cfg.MaxClasses, classes: map[Class]*counts{}}
}

// Record counts one event at now for each of its classes (one per level
// the place identifies it at).
func (m *Meter) Record(now time.Time, classes ...Class) {
	b := now.UnixNano() / int64(m.width)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range classes {
		cs := m.classes[c]
		if cs == nil {
			if len(m.classes) >= m.max && !m.evict(b) {
				m.dropped++
				continue
			}
			cs = &counts{n: make([]uint64, m.buckets), epoch: make([]int64, m.buckets)}
			m.classes[c] = cs
		}
		i := int(b % int64(m.buckets))
		if cs.epoch[i] != b {
			cs.epoch[i], cs.n[i] = b, 0
		}
		cs.n[i]++
	}
}

// evict removes the classes with no event in the window ending at bucket
// b and reports whether it removed any. mu must be held.
func (m *Meter) evict(b int64) bool {
	n := len(m.classes)
	for c, cs := range m.classes {
		if m.sum(cs, b) == 0 {
			delete(m.classes, c)
		}
	}
	return len(m.classes) < n
}

// sum returns the events of cs in the window ending at bucket b. mu must
// be held.
func (m *Meter) sum(cs *counts, b int64) uint64 {
	var s uint64
	for i, e := range cs.epoch {
		if e > b-int64(m.buckets) && e <= b {
			s += cs.n[i]
		}
	}
	return s
}

// Rate returns class c's rate at now, in events per second over the
// window.
func (m *Meter) Rate(now time.Time, c Class) float64 {
	b := now.UnixNano() / int64(m.width)
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := m.classes[c]
	if cs == nil {
		return 0
	}
	return m.perSecond(m.sum(cs, b))
}

func (m *Meter) perSecond(n uint64) float64 {
	return float64(n) / (time.Duration(m.buckets) * m.width).Seconds()
}

// Load returns the switch's load at now: the sum of the rates of the
// level-1 classes (every event counts once at level 1).
func (m *Meter) Load(now time.Time) float64 {
	var s float64
	for _, r := range m.Rates(now, LevelType) {
		s += r.Rate
	}
	return s
}

// Rates returns the rates of the classes of level at now, hottest first
// (ties by class), leaving out those with none in the window.
func (m *Meter) Rates(now time.Time, level Level) []Rate {
	b := now.UnixNano() / int64(m.width)
	m.mu.Lock()
	var out []Rate
	for c, cs := range m.classes {
		if c.Level == level {
			if n := m.sum(cs, b); n > 0 {
				out = append(out, Rate{Class: c, Rate: m.perSecond(n)})
			}
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Rate) int {
		return cmp.Or(cmp.Compare(b.Rate, a.Rate), cmp.Compare(a.Class.Type, b.Class.Type),
			cmp.Compare(a.Class.Attr, b.Class.Attr), cmp.Compare(a.Class.Value, b.Class.Value))
	})
	return out
}

// Hottest returns the class of level with the highest rate at now (S3's
// specific event information), and false when the level has none.
func (m *Meter) Hottest(now time.Time, level Level) (Rate, bool) {
	rs := m.Rates(now, level)
	if len(rs) == 0 {
		return Rate{}, false
	}
	return rs[0], true
}

// Dropped returns how many times a class could not be kept because the
// meter was full of classes with traffic in the window.
func (m *Meter) Dropped() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped
}

package filter

import (
	"fmt"
	"sync"

	"github.com/sion-go/sion/ontology"
)

// BruteForce matches by evaluating every filter in turn with Filter.Eval.
// It has Index's API and semantics and is the oracle Index is tested
// against, and the baseline the benchmarks compare with. Safe for
// concurrent use; Match holds a read lock, so unlike Index it waits for
// writers.
type BruteForce struct {
	ont *ontology.Ontology
	mu  sync.RWMutex
	ids map[uint64]int // id → position in fs
	fs  []bfEntry
}

type bfEntry struct {
	id     uint64
	f      *Filter
	typeID int // -1 for AnyType
}

// NewBruteForce returns an empty BruteForce for ontology o (not nil).
func NewBruteForce(o *ontology.Ontology) *BruteForce {
	return &BruteForce{ont: o, ids: map[uint64]int{}}
}

// Add adds f under id, resolved against the ontology as Index.Add does.
func (b *BruteForce) Add(id uint64, f *Filter) error {
	f, err := Resolve(b.ont, f)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, dup := b.ids[id]; dup {
		return fmt.Errorf("%w %d", ErrDuplicateID, id)
	}
	e := bfEntry{id: id, f: f, typeID: -1}
	if f.typ != AnyType {
		t, _ := b.ont.Lookup(f.typ)
		e.typeID = t.ID
	}
	b.ids[id] = len(b.fs)
	b.fs = append(b.fs, e)
	return nil
}

// Remove removes the filter with id and reports whether it was there.
func (b *BruteForce) Remove(id uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i, ok := b.ids[id]
	if !ok {
		return false
	}
	last := len(b.fs) - 1
	b.fs[i] = b.fs[last]
	b.ids[b.fs[i].id] = i
	b.fs = b.fs[:last]
	delete(b.ids, id)
	return true
}

// Len returns the number of filters.
func (b *BruteForce) Len() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.fs)
}

// Match calls fn for every filter ev matches, as Index.Match does.
func (b *BruteForce) Match(ev Event, fn func(id uint64, score float64)) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	evType := -1
	name := ev.EventType()
	t, known := b.ont.Lookup(name)
	if known {
		evType = t.ID
	}
	anyType := anyTypeMatches(t, known, name)
	for _, e := range b.fs {
		if e.typeID >= 0 && (evType < 0 || !b.ont.IsA(evType, e.typeID)) {
			continue
		}
		if e.typeID < 0 && !anyType {
			continue // AnyType does not match sion's own (reserved) types
		}
		if ok, score := e.f.Eval(ev); ok {
			fn(e.id, score)
		}
	}
}

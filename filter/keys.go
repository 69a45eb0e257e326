package filter

// Operand keys: the small integer IDs the writer gives operands, counted
// by reference (Index.keys, Index.attrRefs). mu must be held for all of
// them.

// keyNameOf returns the name of the operand key of predicate i of f.
func keyNameOf(f *Filter, i int) keyName {
	p := &f.preds[i]
	switch p.Operand.Source {
	case SourceXPath:
		name := f.xexprs[i].String() // SourceXPath: set by Build
		for _, b := range f.ns {
			name += "\x00" + b.prefix + "=" + b.uri
		}
		return keyName{SourceXPath, name}
	case sourceNone:
		return keyName{sourceNone, ""}
	}
	return keyName{p.Operand.Source, p.Operand.Name}
}

const noKey = ^uint32(0)

// acquireKey returns the key ID of predicate i of f, counting a reference.
// An attribute's key is found through the look-up resolve noted for the
// predicate (x.lookups) while that key lives, else by name (x.attrRefs),
// and then noted there: a string map access less per predicate of each
// Add (2 % of a W-SPARSE Add at 10⁶). mu must be held.
func (x *Index) acquireKey(f *Filter, i int) uint32 {
	var l *attrLookup
	if i < len(x.lookups) {
		l = x.lookups[i]
	}
	if l != nil && l.ref != nil && l.ref.refs > 0 {
		l.ref.refs++
		return l.ref.id
	}
	if p := &f.preds[i]; p.Operand.Source == SourceAttr {
		if r, ok := x.attrRefs[p.Operand.Name]; ok {
			r.refs++
			if l != nil {
				l.ref = r
			}
			return r.id
		}
	}
	kn := keyNameOf(f, i)
	if kn.src == sourceNone {
		return noKey
	}
	if r, ok := x.keys[kn]; ok {
		r.refs++
		return r.id
	}
	var id uint32
	if n := len(x.freeKey); n > 0 {
		id = x.freeKey[n-1]
		x.freeKey = x.freeKey[:n-1]
	} else {
		id = x.nextKey
		x.nextKey++
	}
	if kn.src == SourceAttr {
		r := &keyRef{id: id, refs: 1}
		x.attrRefs[kn.name] = r
		if l != nil {
			l.ref = r
		}
	} else {
		x.keys[kn] = &keyRef{id: id, refs: 1}
	}
	return id
}

// releaseKey drops a reference to a key and reports whether it was the
// last; the caller then forgets the key in both copies. mu must be held.
func (x *Index) releaseKey(kn keyName) (uint32, bool) {
	if kn.src == sourceNone {
		return 0, false
	}
	var r *keyRef
	if kn.src == SourceAttr {
		r = x.attrRefs[kn.name]
	} else {
		r = x.keys[kn]
	}
	if r.refs--; r.refs > 0 {
		return 0, false
	}
	if kn.src == SourceAttr {
		delete(x.attrRefs, kn.name)
	} else {
		delete(x.keys, kn)
	}
	x.freeKey = append(x.freeKey, r.id)
	return r.id, true
}

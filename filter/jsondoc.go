package filter

import (
	"github.com/tidwall/gjson"

	"github.com/sion-go/sion/ontology"
)

// JSONValue returns the value at the gjson path in the JSON document doc,
// exactly as a json(path) operand sees it (see the package doc, "Values at
// the edges"): integers that fit int64 are KindInt, exact above 2^53;
// other numbers KindFloat; strings KindString, never numbers or times;
// true and false KindBool. ok is false for a missing path, JSON null, an
// object or an array. doc is read, not kept; the cost is one gjson.Get.
func JSONValue(doc []byte, path string) (v ontology.Value, ok bool) {
	x := jsonValue(gjson.GetBytes(doc, path))
	if !x.present || !x.v.IsValid() {
		return ontology.Value{}, false
	}
	return x.v, true
}

// JSONElements returns the raw JSON of each element of the array at the
// gjson path in doc, in order, as slices of doc (not copies); ok is false
// when there is no array there. It lets a program turn a feed such as a
// GeoJSON FeatureCollection into one event per element.
func JSONElements(doc []byte, path string) (elems [][]byte, ok bool) {
	r := gjson.GetBytes(doc, path)
	if !r.IsArray() {
		return nil, false
	}
	for _, e := range r.Array() {
		if e.Index > 0 && e.Index+len(e.Raw) <= len(doc) {
			elems = append(elems, doc[e.Index:e.Index+len(e.Raw)])
		} else {
			elems = append(elems, []byte(e.Raw))
		}
	}
	return elems, true
}

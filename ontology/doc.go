// Package ontology holds sion's event types: a DAG of types with multiple
// inheritance, each with a vocabulary of typed attributes inherited by its
// subtypes, synonyms for types and attributes, loaders for a JSON format and
// for RDF/XML (OWL/RDFS), and Mapping, the conversion table a gateway uses
// between two ontologies (S1: ontology of event types with inheritance;
// SI-GW conversion table). It imports no other package of sion.
//
// # Terms
//
// An event type (EventType) has a canonical name, parents, synonyms, a label
// and its own attributes. Its vocabulary is its own attributes plus those of
// all its ancestors. An Attribute is a name, a Kind (string, int, float,
// bool, time), an optional unit and synonyms. Type synonyms and attribute
// synonyms resolve to canonical names at the edge (Lookup,
// CanonicalAttribute), never during matching. Names are case-sensitive.
// Names beginning "sion." are reserved: every Ontology contains the control
// types of reserved.go, and user types cannot use such names.
//
// Load errors (*LoadError) name the type and its position "file:line:col":
// cycles (with the cycle's path), unknown parents, duplicate types, synonym
// collisions, conflicting vocabulary, invalid kinds, empty and reserved
// names. Test them with errors.Is against the Err* sentinels.
//
// # JSON format
//
// LoadJSON reads one object with a single field "types", an array of type
// objects. A type has "name" (required) and optionally "parents" (names or
// synonyms of other types), "synonyms", "label" and "attributes"; an
// attribute has "name" and "kind" (required; "string", "int", "float",
// "bool", "time", or the aliases "integer", "double", "boolean") and
// optionally "unit" and "synonyms". Types may appear in any order. Any other
// field, a field given twice, or a value of the wrong JSON type is an error
// with its line and column:
//
//	{"types": [
//	  {"name": "Event"},
//	  {"name": "Reading", "parents": ["Event"], "synonyms": ["Measurement"],
//	   "label": "a sensor reading",
//	   "attributes": [
//	     {"name": "celsius", "kind": "float", "unit": "degC", "synonyms": ["temp"]},
//	     {"name": "station", "kind": "string"}]},
//	  {"name": "BGM", "parents": ["music", "seasonal"]},
//	  {"name": "music"}, {"name": "seasonal"}, {"name": "popular", "parents": ["music"]}
//	]}
//
// # RDF/XML
//
// LoadRDFXML reads OWL and RDFS ontologies written as RDF/XML (rdf:RDF root;
// DTD entities such as &owl; are expanded):
//
//   - Classes are owl:Class and rdfs:Class elements with rdf:about (resolved
//     against xml:base) or rdf:ID (relative to xml:base), anywhere in the
//     document; also any element with rdf:about that has an rdf:type of
//     owl:Class or rdfs:Class, or an rdfs:subClassOf or owl:equivalentClass
//     child. Several descriptions of one IRI are merged. Anonymous classes
//     (blank nodes) are not types. The content of an rdfs:label is its
//     text: elements inside a label describe nothing.
//   - rdfs:subClassOf with rdf:resource, or with a named element inside, is
//     a parent. A subClassOf holding a blank node (owl:Restriction,
//     owl:unionOf …) is not a parent and is ignored.
//   - Classes referenced (as a parent or an equivalent) but not described in
//     the file — e.g. DOLCE classes of an imported ontology — become implicit
//     root types with no label, positioned at their first reference, so
//     real-world files load.
//   - owl:equivalentClass joins classes into one type. The canonical member
//     is the one described first in the document (a class described in the
//     file beats one only referenced); the other members become synonyms.
//     Their parents are merged; a parent inside the group is dropped.
//   - Names: a class's name is the local name of its IRI (after the last '#',
//     else the last '/') when no other class IRI of the file has the same
//     local name; otherwise "prefix:local" with the shortest (then
//     alphabetically first) non-empty xmlns prefix the root element binds to
//     the IRI's namespace; otherwise the full IRI. Every member's full IRI is
//     also a synonym, so Lookup accepts IRIs. In ssnx.rdf, for instance,
//     http://purl.oclc.org/NET/ssnx/ssn#Deployment is "oldssn:Deployment"
//     with synonyms "ssn:Deployment" and both IRIs, while
//     ssnx#DeploymentRelatedProcess is plainly "DeploymentRelatedProcess".
//   - rdfs:label becomes Label, preferring xml:lang "en" (or "en-…"), then no
//     language, then the first other.
//   - Properties are not read: RDF-loaded types have no attributes.
//   - A type's Pos is the line and column of the '<' of the first element
//     describing the class, or of the first reference to a class not
//     described.
//   - Reading the document takes time about linear in its size; the
//     tables New builds grow with the hierarchy (MaxClosurePairs).
//
// # IsA encoding and memory
//
// IsA answers from the compressed transitive closure of Agrawal, Borgida and
// Jagadish (SIGMOD 1989). Types are numbered in post-order over a spanning
// tree of the DAG (a type's first parent is its tree parent); a type's label
// is a set of intervals of post-order numbers: its tree subtree's interval
// merged with the intervals of its DAG children. sub is-a super exactly when
// post(sub) lies in one of super's intervals. A tree has exactly one
// interval per type, so IsA is two comparisons; a DAG type with k intervals
// costs a binary search. Memory: 16 bytes per type (post-order number,
// offset, one interval) plus 8 bytes per extra interval
// (Ontology.ExtraIntervals). Ancestors and Descendants are precomputed in two
// shared arrays: 8 bytes per (sub, super) pair each plus 4 bytes per type.
//
// # Concurrency
//
// Ontology and Mapping are immutable after construction and safe for
// concurrent use; there are no locks. Slices returned by their methods are
// shared and must not be modified.
package ontology

// Package filter compiles sion filters and matches events against them.
//
// A Filter selects events by event type and content (S1 "filter"): an event
// type T, which also matches every subtype of T, or AnyType ("*"); a match
// mode (all predicates, at least K of them, or a weighted score reaching a
// threshold); and predicates over the event's typed attributes and over
// its JSON or XML payload. Compile reads a filter from source text, Build
// from a Spec; both return an immutable *Filter whose String method gives
// its canonical source. An Index holds many filters and finds the ones an
// Event matches.
//
// # Syntax
//
// Filter source is one line or many; SYNTAX.md in this directory is the
// user reference, with examples. For example:
//
//	{type ⊑ Reading; json(temp\.celsius) > 30}
//	{type <: Quake; match score >= 2; mag >= 6 weight 2; tsunami == 1}
//	{xmlns:s = "urn:example:sensors"; xpath(/s:reading/s:value > 20)}
//
// The grammar, in EBNF (as in the Go specification). Tokens may be
// separated by spaces, tabs, carriage returns and newlines; there are no
// comments.
//
//	filter    = "{" [ clauses ] "}" | [ clauses ] .
//	clauses   = clause { ";" clause } [ ";" ] .
//	clause    = type | match | xmlns | predicate [ "weight" number ] .
//	type      = "type" ( "⊑" | "<:" ) ( name | "*" ) .
//	match     = "match" ( "all" | "atleast" int | "score" ">=" number ) .
//	xmlns     = "xmlns" ":" prefix "=" string .
//	predicate = "true"
//	          | "xpath" "(" path ")"
//	          | operand op literal
//	          | operand "in" ( "[" | "(" ) literal "," literal ( "]" | ")" )
//	          | operand [ "not" ] "in" "{" literal { "," literal } "}"
//	          | operand ( "prefix" | "suffix" | "contains" ) string
//	          | operand [ "not" ] "exists" .
//	operand   = name | "json" "(" path ")" | "xpath" "(" path ")" .
//	op        = "==" | "=" | "!=" | "<" | "<=" | ">" | ">=" .
//	literal   = string | int | float | "true" | "false" | "time" "(" string ")" .
//	number    = int | float .
//	name      = bare | string .
//	path      = string | raw .
//
//	bare      = ( letter | "_" ) { letter | digit | "_" | "." | "-" | ":" } .
//	int       = [ "-" ] digit { digit } .
//	float     = [ "-" ] digit { digit } ( "." digit { digit } [ exp ] | exp ) .
//	exp       = ( "e" | "E" ) [ "+" | "-" ] digit { digit } .
//	string    = a Go interpreted "..." or raw `...` string literal .
//	raw       = the text up to the ")" that balances the "(" .
//	prefix    = an XML NCName .
//
// A filter has at most one type clause (the default is "*") and at most one
// match clause (the default is "match all"); a namespace prefix is bound at
// most once. The words type, match, xmlns, true, json and xpath start their
// clause only when followed by what it needs ("type" by ⊑ or <:, "json" and
// "xpath" by "(", "true" by ";", "}", "weight" or the end); otherwise, like
// every other word at the start of a predicate, they name an attribute. A
// name that is a keyword or is not bare is written quoted ("quarry blast").
// `xmlns:t = "urn"` always binds a prefix; compare an attribute spelt
// xmlns:t with "==".
//
// An int is an int64 and a float a float64: an integer outside the int64
// range is an error, never silently a float, and -0.0 keeps its sign. NaN
// and infinities cannot be written. A time is RFC 3339, with or without
// fractional seconds and with any offset; it is kept to the nanosecond.
// A raw JSON path keeps its backslash escapes as written (gjson syntax:
// temp\.celsius names the key "temp.celsius"); in a raw XPath a string in
// '...' or "..." may hold parentheses. Spaces around a raw path are
// dropped.
//
// # Semantics
//
// A filter on type T matches events of T and of every descendant of T in
// the ontology (multiple inheritance included); AnyType matches every
// event but those of the reserved "sion." types (sion's control traffic,
// such as discovery), which only filters naming them match. Values are typed (string, int64, float64, bool, time):
// integers and floats compare by exact mathematical value (2^53+1 as an
// int is not 2^53 as a float; 0 = 0.0 = -0.0), strings by bytes and case
// sensitively, times as instants. NaN matches nothing (but exists holds).
// A missing operand makes every predicate false except "not exists" and
// "true"; "!=" and "not in" need the operand present and hold for a value
// of another kind ("0" != 0). A JSON payload is read with gjson: numbers
// written as integers that fit int64 are ints, other numbers floats, a
// string is never a number, null is missing, objects and arrays are
// present but equal nothing. XPath predicates follow XPath 1.0 coercion
// (node-sets compare existentially; a range is two comparisons, each
// existential) and hold only for an XML payload. Each filter reports a
// score: the number of predicates (match all), the number that hold
// (match atleast), or the sum of their weights (match score).
//
// # Matching
//
// Derive converts a filter over one ontology back through an
// ontology.Mapping into the filters over the source ontology whose events
// convert to ones it matches (a gateway's interest, S1 SI-GW): never
// narrower than that, exact for type tests, renames, linear conversions
// and value tables (see Derive for the cases it widens); Conjoin
// intersects two filters (a firewall and derived interest); Covers reports
// whether one filter matches every event another matches (sound: false
// when unsure), so that a covered filter need not be propagated (S2,
// DESIGN.md "Network").
//
// Index is the matcher; BruteForce, which evaluates every filter in turn,
// is its oracle. Index groups filters by event type and, inside a group,
// uses one of two engines per filter:
//
//   - The access engine enters a filter under a few of its predicates —
//     enough that the filter cannot match unless one of them holds — chosen
//     by estimated cost: equality and set membership by hash of the value,
//     prefix and suffix by hash of the affix, anything else by presence of
//     the operand. Each list entry carries, in the list, a signature of
//     the attributes its filter needs and up to two of its small-domain
//     integer predicates as 64-bit bitmaps (or a signature of the values
//     it needs), and, in the entry the list leads to, up to four of its
//     predicates in compact form, so most entries are rejected, and many
//     matched, without reading the filter; only the rest are verified, from the
//     filter's record: its predicates in a few bytes each (varints,
//     float64 bits, strings inline), not its *Filter. A set of more than
//     8 members also keeps its members' offsets in sorted order, so that
//     membership costs a binary search, not a scan.
//   - The dense engine takes filters made only of numeric comparisons and
//     ranges on attributes ("match all", and "at least" or "score" with
//     integral weights 1–15), once a group has 32 of them. It keeps each
//     as a record of a few bytes per predicate, not as a *Filter, finds
//     the filters an event fails with checkpoint bitsets per attribute
//     (REIN, HEM), ORed fullest first in engines of more than 4,096
//     slots (the first 16 in one pass over the engine, the rest only
//     into the words still unmarked; all of them, unordered, in smaller
//     engines), and verifies exactly the few filters they leave
//     unmarked. Removal is lazy (dead slots are dropped
//     when they outnumber live ones, by a new layout that holds the writer
//     for time proportional to the live filters, 1.3 s at 10⁶ on a quiet
//     2-core machine, up to 3.8 s under load;
//     readers never wait).
//
// A removed filter's record stays in its block until removed records
// outweigh live ones; then the writer copies the live records into new
// blocks and moves each entry's record pointer, holding the writer for
// time proportional to the live filters (0.18 s at 10⁶ filters on
// posting lists on a quiet machine, up to 0.7 s under load), about
// 0.4 µs per Remove over time. bench's IndexChurn
// measures both kinds of upkeep.
//
// An XPath evaluation is bounded by XPathStepBudget navigation steps; past
// it, the predicate is false (counted by XPathOverBudget), so that one
// filter cannot stall every publisher with a quadratic expression.
//
// Each distinct payload path is extracted once per event, and only when
// some filter reached needs it. Match never blocks on Add and Remove
// (posting lists and dense engines are one copy updated in place, with
// atomic live bits and published lengths; the maps that lead to the lists
// are kept in two copies, left-right), and allocates nothing in steady
// state except for XML payloads, JSON strings with escapes and JSON
// numbers beyond float64. The benchmarks in bench/ give the figures.
//
// Memory is about 215 bytes per numeric-interval filter and 350 per
// filter on posting lists (bench/README.md). A removed filter's entry
// (128 bytes) and the short arrays of lists that move or empty are kept
// and reused by later Adds, not given back: an index holds the entries
// of the most filters on posting lists it has held at once. An index of
// millions of dense-engine filters reads about 2 bytes per filter per
// event (19 MB at 9 million), in streams: its time per event is bound by
// the memory's bandwidth once its bitsets no longer stay in the
// last-level cache from one event to the next.
//
// # Errors
//
// Compile returns a *SyntaxError, wrapping ErrSyntax, for text that breaks
// the grammar; it gives the line and column and says what was expected and
// what was found. It returns a *BuildError, wrapping ErrInvalid, for
// well-formed text that is not a valid filter (see Build). Test with
// errors.Is.
package filter

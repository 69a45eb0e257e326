// Package cloudevents converts between sion events and CloudEvents 1.0
// events of the sdk-go SDK (github.com/cloudevents/sdk-go/v2/event.Event),
// both ways, with a Codec built from a Config. It is a nested module: its
// dependency on the SDK stays out of sion's core go.mod. It imports the
// root package and ontology; nothing of sion imports it.
//
// # Mapping
//
// Each choice below holds both ways unless it says otherwise.
//
//   - type: Config.TypePrefix followed by the canonical name of the event
//     type (a synonym is written as its canonical name). On the way in a
//     type that lacks the prefix, is not in the ontology, or is one of
//     sion's reserved "sion." types is refused with an error naming it
//     (wrapping sion.ErrUnknownEventType).
//   - id: the EventID as 32 lower-case hexadecimal digits. An event with a
//     zero ID (not yet published) gets a new random ID on the way out, as
//     Publish would give it one. On the way in an id of exactly 32
//     lower-case hex digits, not all zero, is taken as the EventID, so a
//     sion event sent out and back keeps its identity and deduplicates. Any
//     other id becomes the first 16 bytes of SHA-256 over the source and
//     the id (each prefixed with its length), so every retry of one
//     CloudEvent — same source, same id — gets the same EventID and a
//     switch drops the copies (see sion.Event.ID). A 32-hex id is taken
//     whatever its source: two producers that both use such ids share one
//     ID space, as they would publishing to sion directly.
//   - source: Config.Source on the way out; when empty, "/sion/" followed
//     by the path-escaped name of the event's place (Control.Place), or
//     "/sion" when the event has none. On the way in the source only feeds
//     the derived ID above; sion's Event has no field for it.
//   - time and subject: sion's Event has no such fields. When
//     Config.TimeAttribute names an attribute (kind time), its value is the
//     CloudEvent's time and the CloudEvent's time comes back as that
//     attribute; likewise Config.SubjectAttribute (kind string) and
//     subject. When the name is empty, or the event type's vocabulary
//     lacks the attribute, the context attribute is left out on the way
//     out and dropped on the way in. CloudEvents forbids an empty or blank
//     subject, so such a subject attribute is an error on the way out. An
//     extension carrying the time or subject attribute is refused on the
//     way in.
//   - datacontenttype and data: Event.ContentType and Event.Data, bytes
//     unchanged (copied both ways). An empty ContentType leaves
//     datacontenttype out. In the SDK's structured JSON encoding a JSON
//     payload (application/json or text/json) is written inline, an XML
//     payload that is valid UTF-8 as a string, anything else (a "+json"
//     type too, which the SDK would write as a string; or a payload
//     without a content type) as data_base64. On the way in
//     Codec.FromStructured (and so Handler) takes an inline JSON value of
//     any JSON type, "+json" too, as the payload's bytes, as written (the
//     SDK's own reader takes a "+json" value for a string and refuses an
//     object). The SDK's MarshalJSON keeps JSON payload
//     bytes, while encoding/json's Marshal compacts them (whitespace
//     goes, the value stays).
//   - dataschema (and 0.3's schemaurl and datacontentencoding) have no
//     counterpart: never written, and on the way in ignored (the SDK has
//     already decoded a 0.3 base64 payload).
//   - attributes and extensions: each attribute is an extension attribute
//     named like it, or as Config.Extensions renames it. CloudEvents
//     extension names are lower-case ASCII letters and digits; an
//     attribute whose name is not one, that is a context attribute's name
//     (specversion, id, source, type, subject, time, datacontenttype,
//     dataschema, datacontentencoding, schemaurl, data), or that starts
//     with "sion" is an error naming it, unless Config.Extensions renames
//     it (the time and subject attributes excepted: they travel in their
//     context attributes). Kinds out: bool → Boolean; time → Timestamp
//     (RFC 3339 with nanoseconds); int → Integer when the value fits in 32
//     bits, otherwise its decimal string; float → the string
//     strconv.FormatFloat(v, 'g', -1, 64), which reads back to the same
//     bits (-0 stays "-0"); string → String.
//   - On the way in the vocabulary of the event type decides each
//     extension's kind, as Publish does: an extension whose attribute the
//     type's vocabulary lacks is refused, like an attribute Publish
//     refuses (wrapping sion.ErrInvalidEvent and naming the extension).
//     Because CloudEvents bindings (HTTP binary mode, structured JSON)
//     carry values as strings or JSON numbers, each kind accepts its
//     canonical string as well: an int from an Integer or a decimal string
//     (parsed exactly, never through float64); a float from a decimal string
//     (finite; NaN and ±Inf are refused as Publish refuses them) or an
//     Integer; a bool from a Boolean or exactly "true" or "false"; a time
//     from a Timestamp or an RFC 3339 string, from 1677-09-21 to
//     2262-04-11 (ontology.TimeInRange); a string only from a String in
//     valid UTF-8 (a CloudEvents String is Unicode; ToCloudEvent refuses
//     one that is not, too). Anything else is an error naming the
//     extension. Attribute synonyms resolve to
//     canonical names; the attributes come back sorted by name, as Publish
//     stores them.
//   - A limit of the SDK, before the Codec sees the event: its structured
//     JSON reader (event.Event's UnmarshalJSON) turns an extension that is
//     a JSON number into a 32-bit Integer, cutting a fraction silently
//     ("mag": 5.7 arrives as 5) and refusing a number beyond 32 bits. The
//     Codec writes floats and large ints as strings, so sion's own events
//     come back exact; a foreign producer must send fractional or large
//     numbers as strings ("mag": "5.7") to keep them.
//   - control: on the way out the event's control information travels as
//     extensions sionorigin, sionplace, sionpath (the places joined by
//     ","), sionhops, sionttl, sionplacehops and sionplacettl (zero values
//     and empty strings left out), and a patronage condition as
//     sioncondition (its canonical source), unless Config.OmitControl is
//     set. They are for people and logs. On the way in every extension
//     whose name starts with "sion" is dropped: never trusted, never an
//     attribute; the event's Control comes back zero and the receiving
//     switch sets it, as it does for any published event (S1: entities
//     cannot forge control information).
//   - traceparent and tracestate: the Distributed Tracing extension
//     carries the event's W3C trace context, sion.Event.TraceParent and
//     TraceState, both ways and as they are (ce-traceparent and
//     ce-tracestate headers in HTTP binary mode, members in structured
//     mode), Config.OmitControl or not; an empty field is left out. On
//     the way in a value that is not a String is refused, as is (by
//     Handler, 400) a ce-traceparent or ce-tracestate header sent twice;
//     Publish checks the rest. No attribute may travel under these two
//     names.
//
// # HTTP
//
// Handler is an http.Handler that publishes each POSTed CloudEvent, in
// binary or structured mode, into a session, answering 204 once Publish
// returned (a retry of the same CloudEvent is a duplicate by ID and is
// delivered once, while the switch remembers the ID: its last
// 65,536–131,072) and 4xx with a body naming what was wrong. In
// structured mode it refuses an extension that is a JSON number with a
// fraction or beyond 32 bits, which the SDK would change (see above).
// The body is capped (DefaultMaxBodyBytes, 1 MiB, unless
// Handler.MaxBodyBytes says otherwise).
//
// Sender delivers a subscription's events to an HTTP endpoint, one at a
// time in order, in binary or structured mode, retrying network errors,
// 408, 429 and 5xx with exponential backoff and jitter (and Retry-After).
// It drops an event only when the endpoint refuses it (another 4xx, or a
// redirect the client followed with a GET) or after
// SenderConfig.MaxAttempts, counting it and calling SenderConfig.Dropped;
// an event in flight when Run's context ends is sent first by the next
// Run.
//
// In binary mode both follow the HTTP binding (1.0.2, 3.1.3.2), which the
// SDK does not: the Sender percent-encodes the values of the ce- headers
// (space, '"', '%' and every byte outside printable ASCII as %XX), so a
// value with leading or trailing white space or a control character
// travels unchanged, and the Handler decodes them once; a '%' that starts
// no escape stays as it is ("100% sure" from a producer that does not
// encode). A receiver built on the SDK alone sees the escapes.
//
// # Filters
//
// Codec.CompileFilters compiles the filters of a CloudEvents
// Subscriptions API subscription (the dialects exact, prefix, suffix,
// all, any, not and sql) into sion filters whose OR passes exactly the events
// the expression passes, and refuses, naming the construct and its path
// ("filters[1].any[0].prefix"), what sion cannot say exactly (errors
// wrapping ErrFilterInvalid, ErrFilterUnsupported or
// ErrFilterNeverHolds). Hostile input costs bounded time and memory:
// nesting beyond MaxFilterDepth, more than MaxFilterTests attribute
// tests and more than MaxFilters filters are refused.
//
// # CESQL
//
// The sql dialect and Codec.CompileSQL compile a subset of the
// CloudEvents SQL Expression Language (CESQL v1.0.0, cesql/spec.md) into
// sion filters; an event passes exactly when its CloudEvent, as
// ToCloudEvent writes it, makes the expression TRUE without an
// evaluation error. Every node is compiled to where it is true and where
// it is false, each without error; where neither holds CESQL raised an
// error (a missing attribute, a failed cast), which fails the filter.
// NOT swaps the two; AND and OR short-circuit left to right as the spec
// requires (FALSE AND x is FALSE even when x is an error, but an error
// on the left is the result); XOR reads both sides. The attributes
// CESQL sees are those ToCloudEvent writes, named as the other dialects
// name them (Config.TypePrefix, TimeAttribute, SubjectAttribute,
// Extensions): a bool attribute is a Boolean; an int attribute an
// Integer within 32 bits and its decimal String beyond (the Codec writes
// it so); float, string and time attributes, type, source and
// specversion Strings (a time in RFC 3339, UTC, as types.FormatTime
// writes it). So for an int attribute n beyond 32 bits n = 5 and n < 5
// are errors (n is cast to an Integer and fails), 5 = n is false (5 is
// cast to n's String), and n = '8589934592' compares the decimal
// Strings. The filters decide on the CloudEvent as ToCloudEvent writes
// it, where a subscription manager evaluates the expression; a consumer
// that evaluates it again on the event as received in HTTP binary mode
// sees every extension as a String and may decide otherwise where a cast
// depends on the type ('05' = n is TRUE for the Integer 5, FALSE for the
// String "5").
//
// Compiled:
//
//   - comparisons =, != and <> between an attribute and a literal, either
//     side, with the spec's implicit casts (3.7: the left operand takes
//     the right one's type), and literal against literal;
//   - <, <=, > and >= (Integers: both sides cast) on int and bool
//     attributes: an int beyond 32 bits fails the cast, so neither holds;
//   - LIKE and NOT LIKE with a literal pattern: on a string attribute
//     'text', 'text%', '%text' and '%text%' (equal, prefix, suffix,
//     contains) and '%' (any); on int, float and time attributes 'text'
//     and '%'; on a time attribute also a prefix that ends at a field
//     ('2023-04-07%', '2023-04-07T17:%': the Codec writes UTC with a
//     four-digit year, so it selects an interval of times); on the
//     type, a bool attribute or a constant any pattern
//     (% and _; \% and \_ stand for the characters, another backslash
//     for itself);
//   - IN and NOT IN with a list of literals, each cast to the attribute's
//     type; EXISTS; NOT; AND, OR and XOR; parentheses; string literals
//     in '…' or "…" (\' and \" escape the quote; other backslashes stay),
//     32-bit integers, TRUE and FALSE; keywords and attribute names in
//     any case (names are lower-cased, as the spec's TCK reads
//     EXISTS SOURCE).
//
// Tests of the type, a bool attribute or a constant (specversion;
// source when Config.Source is set) are decided by evaluating them on
// every value; those of a context attribute the Codec never writes
// (dataschema; time and subject without their Config fields) are an
// error on every event, and EXISTS of it is FALSE.
//
// Refused (ErrFilterUnsupported, naming the construct and its offset),
// because sion's filters cannot say it exactly: functions (UPPER, ABS,
// INT, …) and arithmetic (+ - * / %, unary minus); a comparison of two
// attributes or of an expression; a LIKE pattern with _ or an inner % on
// an attribute of many values, or \\ (the spec does not say whether it
// escapes a backslash); NOT LIKE of a prefix, suffix or substring (sion has no
// negated prefix); a string attribute compared with an Integer or a
// Boolean (the cast takes "5", "05" and "+5", or "True" and "TRUE");
// an Integer cast to a Boolean (the spec's table allows it, its TCK
// makes NOT 10 a cast error); orderings of string and float attributes
// (their Strings cast to Integers); the false side of a float attribute
// = an Integer (it needs "written as a whole number below 10^6"); an IN
// member whose cast can fail (the spec does not say whether that is an
// error when another member matches); a non-Boolean operand of NOT, AND,
// OR or XOR other than a bool attribute; a chain mixing AND, OR and XOR
// without parentheses (the spec evaluates them left to right at one
// precedence, its grammar associates them to the right); id,
// datacontenttype, data, the sion* extensions and a source that follows
// the place; type sets not closed under subtypes (as in the other
// dialects); an expression longer than MaxSQLBytes, nested deeper than
// MaxFilterDepth or with more than MaxFilterTests tests (each
// comparison, LIKE, EXISTS, IN member, AND, OR and XOR counts). NOT
// binds tighter than a comparison: NOT a = 1 is (NOT a) = 1, refused;
// write NOT (a = 1).
//
// Refused as never holding (ErrFilterNeverHolds), as the other dialects
// refuse a likely mistake even under a NOT: an extension no event
// carries; a value the Codec never writes in that form (tsunami = '05',
// mag = '1.50', a time not in UTC), or that no type of the ontology
// matches; a test that is an evaluation error on every event (time < 5);
// an expression whose value is not a Boolean ('x', a string attribute);
// and an expression that passes no event at all.
//
// # Errors
//
// NewCodec returns errors wrapping sion.ErrInvalidConfig. ToCloudEvent and
// FromCloudEvent return errors wrapping sion.ErrUnknownEventType (the type)
// or sion.ErrInvalidEvent (anything else), with the attribute or extension
// named in the message; test them with errors.Is. Messages start with
// "cloudevents:".
//
// # Concurrency
//
// A Codec is immutable after NewCodec and safe for concurrent use.
package cloudevents

package ontology

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/antchfx/xmlquery"
)

// Namespaces the RDF/XML loader reads.
const (
	nsRDF  = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
	nsRDFS = "http://www.w3.org/2000/01/rdf-schema#"
	nsOWL  = "http://www.w3.org/2002/07/owl#"
	nsXML  = "http://www.w3.org/XML/1998/namespace"
)

// LoadRDFXML reads an OWL or RDFS ontology written as RDF/XML from r and
// builds it with New; file names the input in positions. The whole input is
// read; r is not closed. How classes become event types — names, parents,
// synonyms, labels, classes defined elsewhere — is described in the package
// documentation ("RDF/XML"). Positions are those of the first element
// describing the class, or of the first reference to an implicit class.
//
// Errors are *LoadError: ErrSyntax for XML that is not well-formed or has no
// rdf:RDF root, and every error of New (a cycle of rdfs:subClassOf, a class
// named "sion.…").
func LoadRDFXML(r io.Reader, file string) (*Ontology, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &LoadError{Pos: Position{File: file}, Err: fmt.Errorf("%w: reading: %w", ErrSyntax, err)}
	}
	defs, err := rdfTypeDefs(data, file)
	if err != nil {
		return nil, err
	}
	return New(defs)
}

var entityDecl = regexp.MustCompile(`<!ENTITY\s+([A-Za-z_][\w.-]*)\s+(?:"([^"]*)"|'([^']*)')\s*>`)

// rdfClass collects what the document says about one class IRI.
type rdfClass struct {
	iri     string
	order   int  // first mention in document order
	defined bool // described by an element, not only referenced
	pos     Position
	parents []string
	equiv   []string
	labels  []rdfLabel
}

type rdfLabel struct{ lang, text string }

type rdfReader struct {
	lines   []int
	offsets map[*xmlquery.Node]int // element → offset of its '<'
	file    string
	base    string
	classes map[string]*rdfClass
	order   []*rdfClass
}

func rdfTypeDefs(data []byte, file string) ([]TypeDef, error) {
	// DTD entities (<!ENTITY owl "http://…#">, used as "&owl;Class") are
	// common in OWL files; encoding/xml needs them given.
	entities := map[string]string{}
	if i := bytes.Index(data, []byte("<!DOCTYPE")); i >= 0 {
		for _, m := range entityDecl.FindAllSubmatch(data[i:], -1) {
			entities[string(m[1])] = string(m[2]) + string(m[3])
		}
	}
	if expansion := entityExpansion(data, entities); expansion > MaxEntityExpansion {
		return nil, &LoadError{Pos: Position{File: file}, Err: fmt.Errorf("%w: entity references would expand to %d bytes, more than %d", ErrTooLarge, expansion, MaxEntityExpansion)}
	}
	// No WithLineNumbers: xmlquery's line count rescans the line table
	// for every token, quadratic in a document with many lines and many
	// tokens between them. Positions come from elementOffsets instead.
	doc, err := xmlquery.ParseWithOptions(bytes.NewReader(data), xmlquery.ParserOptions{
		Decoder: &xmlquery.DecoderOptions{Strict: true, Entity: entities},
	})
	if err != nil {
		pos := Position{File: file}
		var se *xml.SyntaxError
		if errors.As(err, &se) {
			pos.Line = se.Line
		}
		return nil, &LoadError{Pos: pos, Err: fmt.Errorf("%w: %w", ErrSyntax, err)}
	}
	rd := &rdfReader{lines: lineStarts(data), file: file, classes: map[string]*rdfClass{}}
	rd.offsets = elementOffsets(doc, data)
	var root *xmlquery.Node
	for n := doc.FirstChild; n != nil; n = n.NextSibling {
		if n.Type == xmlquery.ElementNode {
			root = n
			break
		}
	}
	if root == nil || root.NamespaceURI != nsRDF || root.Data != "RDF" {
		pos := Position{File: file}
		if root != nil {
			pos = rd.pos(root)
			pos.Col = 0
		}
		return nil, &LoadError{Pos: pos, Err: fmt.Errorf("%w: the document element is not rdf:RDF", ErrSyntax)}
	}
	rd.base = attr(root, nsXML, "base")
	prefixes := map[string]string{} // namespace → shortest, then smallest, non-empty prefix
	for _, a := range root.Attr {
		if a.Name.Space == "xmlns" && a.Name.Local != "" {
			if p, ok := prefixes[a.Value]; !ok || len(a.Name.Local) < len(p) || len(a.Name.Local) == len(p) && a.Name.Local < p {
				prefixes[a.Value] = a.Name.Local
			}
		}
	}
	rd.walk(root)
	return rd.typeDefs(prefixes), nil
}

// entityExpansion returns how many bytes the references in data to
// entities would expand to, in one pass over data.
func entityExpansion(data []byte, entities map[string]string) int {
	if len(entities) == 0 {
		return 0
	}
	n := 0
	for i := 0; i < len(data); {
		j := bytes.IndexByte(data[i:], '&')
		if j < 0 {
			break
		}
		i += j + 1
		end := i
		for end < len(data) && isEntityNameByte(data[end]) {
			end++
		}
		if end < len(data) && data[end] == ';' {
			n += len(entities[string(data[i:end])])
			if n > MaxEntityExpansion {
				break
			}
		}
		i = end
	}
	return n
}

// isEntityNameByte reports whether c may be part of an entity name as
// entityDecl reads them.
func isEntityNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// elementOffsets returns the byte offset in data of the '<' of each
// element of doc, the tree xmlquery parsed from data: startTags finds the
// start tags, and the tree's elements in document order take them in
// turn. The result is nil (no positions) if the two disagree.
func elementOffsets(doc *xmlquery.Node, data []byte) map[*xmlquery.Node]int {
	offs := startTags(data)
	m := make(map[*xmlquery.Node]int, len(offs))
	for n := range elements(doc) {
		if len(m) == len(offs) {
			return nil
		}
		m[n] = offs[len(m)]
	}
	if len(m) != len(offs) {
		return nil
	}
	return m
}

// startTags returns the offset of the '<' of each start tag in data, a
// document that encoding/xml reads without error: every '<' that begins
// no end tag, comment, CDATA section, processing instruction or directive
// (<!DOCTYPE …>, whose quoted strings, nested declarations and comments
// it skips as encoding/xml does). In such a document, text and attribute
// values hold no '<'. One pass over data.
func startTags(data []byte) []int {
	var offs []int
	for i := 0; i < len(data); {
		j := bytes.IndexByte(data[i:], '<')
		if j < 0 {
			break
		}
		i += j
		switch rest := data[i:]; {
		case bytes.HasPrefix(rest, []byte("<!--")):
			i = skipPast(data, i+len("<!--"), "-->")
		case bytes.HasPrefix(rest, []byte("<![CDATA[")):
			i = skipPast(data, i+len("<![CDATA["), "]]>")
		case bytes.HasPrefix(rest, []byte("<?")):
			i = skipPast(data, i+len("<?"), "?>")
		case bytes.HasPrefix(rest, []byte("<!")):
			// encoding/xml takes the byte after "<!" as it is, then reads.
			i = skipDirective(data, min(i+len("<!")+1, len(data)))
		case bytes.HasPrefix(rest, []byte("</")):
			i = skipPast(data, i+len("</"), ">")
		default:
			offs = append(offs, i)
			i = skipTag(data, i+1)
		}
	}
	return offs
}

// skipPast returns the offset after the first end in data from i on, or
// len(data).
func skipPast(data []byte, i int, end string) int {
	if j := bytes.Index(data[i:], []byte(end)); j >= 0 {
		return i + j + len(end)
	}
	return len(data)
}

// skipTag returns the offset after the '>' that ends the tag whose name
// begins at i, past quoted attribute values.
func skipTag(data []byte, i int) int {
	var quote byte
	for ; i < len(data); i++ {
		switch b := data[i]; {
		case quote != 0:
			if b == quote {
				quote = 0
			}
		case b == '"' || b == '\'':
			quote = b
		case b == '>':
			return i + 1
		}
	}
	return i
}

// skipDirective returns the offset after the '>' that ends the directive
// read from i on: quoted '<' and '>' do not count, nested ones do, and
// comments are skipped.
func skipDirective(data []byte, i int) int {
	var quote byte
	depth := 0
	for ; i < len(data); i++ {
		switch b := data[i]; {
		case quote != 0:
			if b == quote {
				quote = 0
			}
		case b == '"' || b == '\'':
			quote = b
		case b == '>':
			if depth == 0 {
				return i + 1
			}
			depth--
		case b == '<' && bytes.HasPrefix(data[i+1:], []byte("!--")):
			i = skipPast(data, i+len("<!--"), "-->") - 1
		case b == '<':
			depth++
		}
	}
	return i
}

// elements yields the elements below n in document order, without
// recursion (a document may nest deeper than a goroutine's stack).
func elements(n *xmlquery.Node) func(yield func(*xmlquery.Node) bool) {
	return func(yield func(*xmlquery.Node) bool) {
		for c := n.FirstChild; c != nil; c = next(n, c, true) {
			if c.Type == xmlquery.ElementNode && !yield(c) {
				return
			}
		}
	}
}

// innerText is n.InnerText() without recursion: the text and CDATA
// below n, in document order.
func innerText(n *xmlquery.Node) string {
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = next(n, c, true) {
		if c.Type == xmlquery.TextNode || c.Type == xmlquery.CharDataNode {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}

// next returns the node after c in document order within root's
// subtree, or nil; with descend false, it skips c's subtree.
func next(root, c *xmlquery.Node, descend bool) *xmlquery.Node {
	if descend && c.FirstChild != nil {
		return c.FirstChild
	}
	for c != root && c.NextSibling == nil {
		c = c.Parent
	}
	if c == root {
		return nil
	}
	return c.NextSibling
}

func attr(n *xmlquery.Node, ns, local string) string {
	for _, a := range n.Attr {
		if a.NamespaceURI == ns && a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// resolve makes ref absolute against the document's xml:base.
func (rd *rdfReader) resolve(ref string) string {
	if rd.base == "" || strings.Contains(ref, "://") || strings.HasPrefix(ref, "urn:") {
		return ref
	}
	b, err1 := url.Parse(rd.base)
	r, err2 := url.Parse(ref)
	if err1 != nil || err2 != nil {
		return rd.base + ref
	}
	return b.ResolveReference(r).String()
}

// subject returns the IRI an element describes (rdf:about, or rdf:ID
// relative to the base), or "" for a blank node.
func (rd *rdfReader) subject(n *xmlquery.Node) string {
	if a := attr(n, nsRDF, "about"); a != "" {
		return rd.resolve(a)
	}
	if id := attr(n, nsRDF, "ID"); id != "" {
		return rd.resolve("#" + id)
	}
	return ""
}

// object returns the named class a property element points to: its
// rdf:resource, or the rdf:about of a named element inside it; "" when the
// object is a blank node (an owl:Restriction, an anonymous owl:unionOf …).
func (rd *rdfReader) object(p *xmlquery.Node) string {
	if r := attr(p, nsRDF, "resource"); r != "" {
		return rd.resolve(r)
	}
	for c := p.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == xmlquery.ElementNode {
			return rd.subject(c)
		}
	}
	return ""
}

// pos returns the position of element n: that of its '<', or the file
// alone when elementOffsets could not tell.
func (rd *rdfReader) pos(n *xmlquery.Node) Position {
	off, ok := rd.offsets[n]
	if !ok {
		return Position{File: rd.file}
	}
	return posAt(rd.file, rd.lines, off)
}

func (rd *rdfReader) mention(iri string, n *xmlquery.Node) *rdfClass {
	c, ok := rd.classes[iri]
	if !ok {
		c = &rdfClass{iri: iri, order: len(rd.order), pos: rd.pos(n)}
		rd.classes[iri] = c
		rd.order = append(rd.order, c)
	}
	return c
}

// isClassElement reports whether n describes a class: owl:Class,
// rdfs:Class, or any element typed so by an rdf:type child, or carrying
// rdfs:subClassOf or owl:equivalentClass (whose domain is rdfs:Class).
func isClassElement(n *xmlquery.Node) bool {
	if n.NamespaceURI == nsOWL && n.Data == "Class" || n.NamespaceURI == nsRDFS && n.Data == "Class" {
		return true
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != xmlquery.ElementNode {
			continue
		}
		switch {
		case c.NamespaceURI == nsRDF && c.Data == "type":
			if t := attr(c, nsRDF, "resource"); t == nsOWL+"Class" || t == nsRDFS+"Class" {
				return true
			}
		case c.NamespaceURI == nsRDFS && c.Data == "subClassOf", c.NamespaceURI == nsOWL && c.Data == "equivalentClass":
			return true
		}
	}
	return false
}

// walk describes the classes among the elements below root, in document
// order. It does not look inside rdfs:label, whose content is the label's
// text: so each element is read once, as a description or as part of a
// label, however labels and classes nest.
func (rd *rdfReader) walk(root *xmlquery.Node) {
	for e := root.FirstChild; e != nil; {
		descend := e.Type == xmlquery.ElementNode && !(e.NamespaceURI == nsRDFS && e.Data == "label")
		if e.Type == xmlquery.ElementNode {
			if iri := rd.subject(e); iri != "" && isClassElement(e) {
				rd.describe(e, iri)
			}
		}
		e = next(root, e, descend)
	}
}

func (rd *rdfReader) describe(e *xmlquery.Node, iri string) {
	c := rd.mention(iri, e)
	if !c.defined {
		c.defined = true
		c.pos = rd.pos(e)
	}
	for p := e.FirstChild; p != nil; p = p.NextSibling {
		if p.Type != xmlquery.ElementNode {
			continue
		}
		switch {
		case p.NamespaceURI == nsRDFS && p.Data == "subClassOf":
			if o := rd.object(p); o != "" {
				rd.mention(o, p)
				c.parents = append(c.parents, o)
			}
		case p.NamespaceURI == nsOWL && p.Data == "equivalentClass":
			if o := rd.object(p); o != "" {
				rd.mention(o, p)
				c.equiv = append(c.equiv, o)
			}
		case p.NamespaceURI == nsRDFS && p.Data == "label":
			c.labels = append(c.labels, rdfLabel{lang: attr(p, nsXML, "lang"), text: strings.TrimSpace(innerText(p))})
		}
	}
}

// localName is the part of iri after the last '#', else the last '/', else
// the last ':'; "" if that part is empty.
func localName(iri string) string {
	if i := strings.LastIndexByte(iri, '#'); i >= 0 {
		return iri[i+1:]
	}
	return iri[strings.LastIndexAny(iri, "/:")+1:]
}

func labelRank(lang string) int {
	switch l := strings.ToLower(lang); {
	case l == "en" || strings.HasPrefix(l, "en-"):
		return 0
	case l == "":
		return 1
	}
	return 2
}

func (rd *rdfReader) typeDefs(prefixes map[string]string) []TypeDef {
	// Names: the local name where unique among all class IRIs of the file,
	// else prefix:local, else the full IRI.
	count := map[string]int{}
	for _, c := range rd.order {
		count[localName(c.iri)]++
	}
	name := map[string]string{}
	for _, c := range rd.order {
		l := localName(c.iri)
		switch p, ok := prefixes[strings.TrimSuffix(c.iri, l)]; {
		case l != "" && count[l] == 1:
			name[c.iri] = l
		case l != "" && ok:
			name[c.iri] = p + ":" + l
		default:
			name[c.iri] = c.iri
		}
	}
	// Equivalence groups (union-find); the representative is the member
	// defined first in the document, else the member mentioned first.
	rep := map[string]string{}
	find := func(x string) string {
		r := x
		for p, ok := rep[r]; ok && p != r; p, ok = rep[r] {
			r = p
		}
		for x != r { // path compression
			p := rep[x]
			rep[x] = r
			x = p
		}
		return r
	}
	better := func(a, b *rdfClass) bool { // a should represent rather than b
		if a.defined != b.defined {
			return a.defined
		}
		return a.order < b.order
	}
	for _, c := range rd.order {
		for _, e := range c.equiv {
			a, b := find(c.iri), find(e)
			if a == b {
				continue
			}
			if better(rd.classes[b], rd.classes[a]) {
				a, b = b, a
			}
			rep[b] = a
		}
	}
	members := map[string][]*rdfClass{}
	for _, c := range rd.order {
		r := find(c.iri)
		members[r] = append(members[r], c)
	}
	var defs []TypeDef
	for _, c := range rd.order {
		if find(c.iri) != c.iri {
			continue
		}
		d := TypeDef{Name: name[c.iri], Pos: c.pos}
		best := 3
		group := append([]*rdfClass{c}, slices.DeleteFunc(members[c.iri], func(m *rdfClass) bool { return m == c })...)
		for _, m := range group {
			if m != c {
				d.Synonyms = append(d.Synonyms, name[m.iri])
			}
			if m.iri != d.Name {
				d.Synonyms = append(d.Synonyms, m.iri)
			}
			for _, p := range m.parents {
				if pn := name[find(p)]; pn != d.Name {
					d.Parents = append(d.Parents, pn)
				}
			}
			for _, l := range m.labels {
				if r := labelRank(l.lang); r < best {
					best, d.Label = r, l.text
				}
			}
		}
		d.Synonyms, d.Parents = firstOfEach(d.Synonyms), firstOfEach(d.Parents)
		defs = append(defs, d)
	}
	return defs
}

// firstOfEach removes the repeated strings of s, keeping the first of
// each in order, in place.
func firstOfEach(s []string) []string {
	if len(s) < 2 {
		return s
	}
	seen := make(map[string]bool, len(s))
	out := s[:0]
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

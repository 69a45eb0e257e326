// Command filedeps counts the arrows between the files of the root
// package sion. An arrow A → B means that non-test file A uses a
// package-level identifier (func, type, var, const) or a method or field,
// as go/types resolves it, that non-test file B ≠ A declares.
//
// Run it from the repository's root; it needs the standard library only
// and no network:
//
//	go run ./.ci/filedeps [-v] [dir]
//
// dir defaults to ".". It prints the number of files and arrows, the
// arrows that run back up, the files missing from layers, and the cycles
// (strongly connected components of more than one file); -v prints every
// arrow, with the identifiers each one stands for.
//
// layers lists the files by concept, lowest layer first: a file uses the
// files listed before it (callers above callees). An arrow A → B runs
// back up when B comes after A in layers: a lower layer reaches up for a
// higher one. A file not in layers is reported as unplaced, and each
// arrow into it counts as running back up, so keep the list current when
// files are added or renamed; files listed but absent are passed over.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// layers is the root package's files, lowest layer first: by concept,
// and within that the order with the fewest back arrows. When it was
// written, that was one back arrow per pair of files that use each other
// (30 pairs) and one more, gateway.go → entity.go (isDiscoveryKey, which
// only gateway.go uses).
var layers = []string{
	// events and places
	"errors.go",
	"event.go",
	"seen.go",
	"eventplace.go",
	"reader.go",
	// one switch: subscriptions, sessions, where their matches go, delivery
	"queue.go",
	"subscription.go",
	"session.go",
	"sink.go",
	"relay.go",
	"wireconv.go",
	"switch.go",
	"handshake.go",
	// links: routing, the link-end seam and its two ends, requesting and accepting
	"router.go",
	"routes_cover.go",
	"routing.go",
	"routing_filter.go",
	"routing_type.go",
	"routing_flood.go",
	"routing_advertised.go",
	"link.go",
	"gateway_conv.go",
	"gateway_end.go",
	"linkinfo.go",
	"advertised_info.go",
	"requester.go",
	"sharedlink.go",
	"gateway.go",
	"membership.go",
	"accept.go",
	"serve.go",
	// rendezvous routing (S3): the overlay, its link end, advertisements, the bypass
	"routing_rendezvous.go",
	"advert.go",
	"bypass.go",
	"overlay_member.go",
	"overlay_end.go",
	"rendezvous_info.go",
	"routing_managed.go",
	"agent_conn.go",
	"agent_model.go",
	"agent.go",
	"agent_deploy.go",
	// remote sessions: the stream, the switch's side, the entity's
	"remote_stream.go",
	"remote_switch.go",
	"remote.go",
	"remote_reconnect.go",
	// entities: discovery and event-place search
	"entity.go",
	"discovery.go",
	"search.go",
	"doc.go",
}

func main() {
	verbose := flag.Bool("v", false, "print every arrow")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./.ci/filedeps [-v] [dir]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	dir := "."
	switch flag.NArg() {
	case 0:
	case 1:
		dir = flag.Arg(0)
	default:
		flag.Usage()
		os.Exit(2)
	}
	g, err := load(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "filedeps:", err)
		os.Exit(1)
	}
	g.report(os.Stdout, dir, *verbose)
}

// graph is the files of one package and the arrows between them.
type graph struct {
	pkg    string
	files  []string                      // base names, sorted
	arrows map[[2]string]map[string]bool // (from, to) → identifiers used
	out    map[string][]string           // from → to, sorted
	errs   []string                      // type errors (missing imports, mostly)
}

// load parses and type-checks the non-test Go files of the package in
// dir and collects the arrows between them.
func load(dir string) (*graph, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	byPkg := map[string][]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(abs, name); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(abs, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		byPkg[f.Name.Name] = append(byPkg[f.Name.Name], f)
	}
	var files []*ast.File
	pkgName := ""
	for name, fs := range byPkg { // the package most files belong to
		if len(fs) > len(files) || len(fs) == len(files) && name < pkgName {
			pkgName, files = name, fs
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	g := &graph{pkg: pkgName, arrows: map[[2]string]map[string]bool{}, out: map[string][]string{}}
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "source", nil),
		// Go on after errors: an import that cannot be loaded (offline,
		// no module cache) hides no arrow between this package's files.
		Error: func(err error) { g.errs = append(g.errs, err.Error()) },
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	pkg, _ := conf.Check(pkgName, fset, files, info)

	fileOf := func(pos token.Pos) string {
		if f := fset.File(pos); f != nil {
			return filepath.Base(f.Name())
		}
		return ""
	}
	owners := fieldOwners(pkg)
	use := func(at token.Pos, obj types.Object) {
		if obj == nil || obj.Pkg() != pkg || !declared(pkg, obj) {
			return
		}
		from, to := fileOf(at), fileOf(obj.Pos())
		if from == "" || to == "" || from == to {
			return
		}
		k := [2]string{from, to}
		if g.arrows[k] == nil {
			g.arrows[k] = map[string]bool{}
		}
		g.arrows[k][describe(obj, owners)] = true
	}
	for id, obj := range info.Uses {
		use(id.Pos(), obj)
	}
	// A field or method promoted through embedded fields uses them too.
	for sel, s := range info.Selections {
		t := s.Recv()
		for _, i := range s.Index()[:len(s.Index())-1] {
			st, ok := deref(t).Underlying().(*types.Struct)
			if !ok {
				break
			}
			f := st.Field(i)
			use(sel.Sel.Pos(), f)
			t = f.Type()
		}
	}
	for _, f := range files {
		g.files = append(g.files, filepath.Base(fset.File(f.Pos()).Name()))
	}
	slices.Sort(g.files)
	for k := range g.arrows {
		g.out[k[0]] = append(g.out[k[0]], k[1])
	}
	for _, to := range g.out {
		slices.Sort(to)
	}
	slices.Sort(g.errs)
	return g, nil
}

// declared reports whether obj is one of the package's package-level
// objects, or a method or field.
func declared(pkg *types.Package, obj types.Object) bool {
	switch obj := obj.(type) {
	case *types.Func:
		if sig, ok := obj.Type().(*types.Signature); ok && sig.Recv() != nil {
			return true
		}
	case *types.Var:
		if obj.IsField() {
			return true
		}
	}
	return obj.Parent() == pkg.Scope()
}

// fieldOwners maps the fields of the package's named struct types to the
// names of those types.
func fieldOwners(pkg *types.Package) map[*types.Var]string {
	out := map[*types.Var]string{}
	if pkg == nil {
		return out
	}
	for _, name := range pkg.Scope().Names() {
		tn, ok := pkg.Scope().Lookup(name).(*types.TypeName)
		if !ok {
			continue
		}
		if st, ok := tn.Type().Underlying().(*types.Struct); ok {
			for f := range st.Fields() {
				out[f] = name
			}
		}
	}
	return out
}

// describe names obj for -v: Name, Type.Method or Type.field.
func describe(obj types.Object, owners map[*types.Var]string) string {
	switch obj := obj.(type) {
	case *types.Func:
		if sig, ok := obj.Type().(*types.Signature); ok && sig.Recv() != nil {
			if n, ok := deref(sig.Recv().Type()).(*types.Named); ok {
				return n.Obj().Name() + "." + obj.Name()
			}
			return "?." + obj.Name()
		}
	case *types.Var:
		if obj.IsField() {
			if owner, ok := owners[obj]; ok {
				return owner + "." + obj.Name()
			}
			return "?." + obj.Name()
		}
	}
	return obj.Name()
}

func deref(t types.Type) types.Type {
	if p, ok := t.(*types.Pointer); ok {
		return p.Elem()
	}
	return t
}

// report prints the summary, and with verbose every arrow.
func (g *graph) report(w io.Writer, dir string, verbose bool) {
	rank := map[string]int{}
	var absent []string
	for _, f := range layers {
		if slices.Contains(g.files, f) {
			if _, dup := rank[f]; !dup {
				rank[f] = len(rank)
			}
		} else {
			absent = append(absent, f)
		}
	}
	var unplaced []string
	for _, f := range g.files {
		if _, ok := rank[f]; !ok {
			unplaced = append(unplaced, f)
		}
	}
	back := func(from, to string) bool {
		rt, placed := rank[to]
		if !placed {
			return true
		}
		rf, placed := rank[from]
		return placed && rt > rf
	}
	keys := make([][2]string, 0, len(g.arrows))
	for k := range g.arrows {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	var backs [][2]string
	for _, k := range keys {
		if back(k[0], k[1]) {
			backs = append(backs, k)
		}
	}
	cycles := g.cycles()

	fmt.Fprintf(w, "package %s in %s: %d files, %d arrows, %d run back up, %d unplaced, %d cycles\n",
		g.pkg, dir, len(g.files), len(keys), len(backs), len(unplaced), len(cycles))
	idents := func(k [2]string) string {
		ids := make([]string, 0, len(g.arrows[k]))
		for id := range g.arrows[k] {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return strings.Join(ids, ", ")
	}
	if len(backs) > 0 {
		fmt.Fprintln(w, "\nrun back up (A → B, B after A in layers, or unplaced):")
		for _, k := range backs {
			fmt.Fprintf(w, "  %s → %s: %s\n", k[0], k[1], idents(k))
		}
	}
	if len(unplaced) > 0 {
		fmt.Fprintln(w, "\nunplaced (add them to layers):")
		for _, f := range unplaced {
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
	if len(absent) > 0 {
		fmt.Fprintf(w, "\nlisted in layers, absent: %s\n", strings.Join(absent, " "))
	}
	if len(cycles) > 0 {
		fmt.Fprintln(w, "\ncycles (strongly connected components of more than one file):")
		for _, c := range cycles {
			fmt.Fprintf(w, "  %d files: %s\n", len(c), strings.Join(c, " "))
		}
	}
	if verbose {
		fmt.Fprintln(w, "\narrows:")
		for _, k := range keys {
			mark := ""
			if back(k[0], k[1]) {
				mark = " (back up)"
			}
			fmt.Fprintf(w, "  %s → %s%s: %s\n", k[0], k[1], mark, idents(k))
		}
	}
	if len(g.errs) > 0 {
		fmt.Fprintf(os.Stderr, "filedeps: %d type errors (an import that cannot be loaded hides no arrow between these files); the first: %s\n", len(g.errs), g.errs[0])
	}
}

// cycles returns the strongly connected components of more than one
// file (Tarjan), each sorted, in order of their first file.
func (g *graph) cycles() [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range g.out[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var c []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			c = append(c, w)
			if w == v {
				break
			}
		}
		if len(c) > 1 {
			slices.Sort(c)
			out = append(out, c)
		}
	}
	for _, f := range g.files {
		if _, seen := index[f]; !seen {
			visit(f)
		}
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return out
}

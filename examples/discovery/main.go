// Command discovery shows S1 entities finding each other with no address
// configured but a UDP port, and an event-place search walking from place
// to place to reach one that no discovery event from the base place can.
//
//	go run ./examples/discovery [-n 10] [-port P]
//
// It starts n entities, e0 … e(n-1), each in a child process of its own
// (the same binary, started with the internal -child flag), all on
// loopback: each listens on 127.0.0.1 and knows only the discovery port
// (-port, by default a UDP port free on 127.0.0.1 now). They broadcast
// probes and link to the Active entities that answer. In order:
//
//   - e1 (attribute topic=weather) starts alone, founds the base place
//     "base" (nobody answers its probes) and then place "alpha";
//   - e(n-1), the beta entity (topic=weather too), has alpha as its base
//     place: its probes find e1, the one member of alpha, and it links
//     there; then it founds place "beta". It is not in the base place;
//   - the other n-2 (topic=traffic) start together and form one tree of
//     shared links in the base place with e1.
//
// Finally a newcomer entity, in this process, discovers the base place the
// same way and searches for an entity with topic=weather in place beta:
// in the base place only e1 answers (beta is nowhere to be seen), so it
// joins alpha through e1, searches again there, and the beta entity
// answers. It prints what discovery and the search cost (time, UDP
// datagrams, discovery events and answers, shared-link frames, summed over
// every entity) and ends with the path the search took:
//
//	reached beta: base → alpha (through e1 at 127.0.0.1:42055) → beta (through e9 at 127.0.0.1:41437)
//
// It exits non-zero when the search did not reach beta. The child
// processes exit when their stdin closes, so none outlives this one.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/tcp"
)

const (
	basePlace = "base"
	// step bounds each stage (every entity Active, one tree, a role's
	// setup, the newcomer's search).
	step = 30 * time.Second
)

// searchOpts are the options of the newcomer's search.
var searchOpts = sion.SearchOptions{Wait: 300 * time.Millisecond}

func main() {
	n := flag.Int("n", 10, "entities to start (at least 3)")
	port := flag.Int("port", 0, "discovery UDP `port` (default: one free on 127.0.0.1)")
	child := flag.Int("child", -1, "internal: run entity e`i` (a child process)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: discovery [-n entities] [-port P]\n")
		flag.VisitAll(func(f *flag.Flag) {
			if f.Name != "child" {
				name, usage := flag.UnquoteUsage(f)
				fmt.Fprintf(flag.CommandLine.Output(), "  -%s %s\n    \t%s\n", f.Name, name, usage)
			}
		})
	}
	flag.Parse()
	log.SetFlags(0)
	if *n < 3 {
		log.Fatal("discovery: -n must be at least 3")
	}
	if *port < 0 || *port > 65535 {
		log.Fatal("discovery: -port must be 0 to 65535")
	}
	var err error
	if *child >= 0 {
		err = runChild(*child, *n, uint16(*port))
	} else {
		err = run(*n, uint16(*port))
	}
	if err != nil {
		log.Fatal("discovery: ", err)
	}
}

// ontologyOf is the entities' tiny ontology: every place they join uses
// it (the discovery event types are added by the library).
func ontologyOf() (*ontology.Ontology, error) {
	return ontology.New([]ontology.TypeDef{
		{Name: "Event"},
		{Name: "Notice", Parents: []string{"Event"}, Attributes: []ontology.Attribute{{Name: "text", Kind: ontology.KindString}}},
	})
}

// newEntity starts an entity on loopback that knows nothing but the
// discovery port.
func newEntity(name, base string, port uint16, attrs map[string]string) (*sion.Entity, error) {
	o, err := ontologyOf()
	if err != nil {
		return nil, err
	}
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		return nil, err
	}
	return sion.NewEntity(sion.EntityConfig{
		Name: name, Attributes: attrs, Ontology: o, Transport: tr,
		BasePlace: base, ListenHost: "127.0.0.1", DiscoveryPort: port,
		// No periodic probes for alternative parents, so that the link
		// frames counted are those of discovery and search alone.
		Link: sion.LinkConfig{ProbeHops: -1},
	})
}

// role returns entity i's attributes.
func role(i, n int) map[string]string {
	if i == 1 || i == n-1 {
		return map[string]string{"topic": "weather"}
	}
	return map[string]string{"topic": "traffic"}
}

// counters are one entity's figures, as a child reports them in a
// "stats" line.
type counters struct {
	parent string // its base link's peer, "-" for a root
	values map[string]uint64
}

// statsLine formats e's counters: its parent in the base place, its UDP
// datagrams, its discovery events and answers, and the frames its
// switches sent over shared links.
func statsLine(e *sion.Entity) string {
	parent := "-"
	if sw := e.Switch(basePlace); sw != nil {
		for _, l := range sw.Links() {
			if l.Parent {
				parent = l.Peer
			}
		}
	}
	s := e.Stats()
	var frames uint64
	for _, p := range e.Places() {
		if sw := e.Switch(p); sw != nil {
			t := sw.Stats().Links
			frames += t.EventsSent + t.ControlSent
		}
	}
	return fmt.Sprintf("stats parent=%s probes=%d probe-answers=%d discovery-sent=%d discovery-received=%d answers-sent=%d answers-received=%d frames=%d",
		parent, s.ProbesSent, s.ProbeAnswersSent, s.DiscoverySent, s.DiscoveryReceived, s.AnswersSent, s.AnswersReceived, frames)
}

func parseStats(line string) (counters, error) {
	c := counters{values: map[string]uint64{}}
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "stats" {
		return c, fmt.Errorf("not a stats line: %q", line)
	}
	for _, kv := range f[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return c, fmt.Errorf("bad field %q in %q", kv, line)
		}
		if k == "parent" {
			c.parent = v
			continue
		}
		u, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return c, fmt.Errorf("bad field %q in %q", kv, line)
		}
		c.values[k] = u
	}
	return c, nil
}

// sum adds up counter k over cs.
func sum(cs []counters, k string) uint64 {
	var t uint64
	for _, c := range cs {
		t += c.values[k]
	}
	return t
}

// runChild is entity e(i) in a child process. It prints "active MS
// probes=P answers=A" once Active (MS after it started; the probes it
// broadcast and the probe answers it received), then serves commands
// read from stdin, one a line: "stats" (prints a stats line) and "setup"
// (takes its role: e1 founds alpha, the beta entity joins alpha by a
// search and founds beta; prints "ready …"). When stdin closes it closes
// the entity and exits.
func runChild(i, n int, port uint16) error {
	ctx := context.Background()
	start := time.Now()
	attrs := role(i, n)
	base := basePlace
	if i == n-1 {
		base = "alpha" // the beta entity's entry point is place alpha
	}
	e, err := newEntity(fmt.Sprintf("e%d", i), base, port, attrs)
	if err != nil {
		return err
	}
	defer e.Close()
	actx, cancel := context.WithTimeout(ctx, step)
	err = e.WaitState(actx, sion.Active)
	cancel()
	if err != nil {
		return err
	}
	s := e.Stats()
	fmt.Printf("active %d probes=%d answers=%d\n", time.Since(start).Milliseconds(), s.ProbesSent, s.ProbeAnswersReceived)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "stats":
			fmt.Println(statsLine(e))
		case "setup":
			line, err := setup(ctx, e, i, n)
			if err != nil {
				return err
			}
			fmt.Println(line)
		default:
			return fmt.Errorf("e%d: unknown command %q", i, in.Text())
		}
	}
	return e.Close()
}

// setup gives entity i its role and returns its "ready" line.
func setup(ctx context.Context, e *sion.Entity, i, n int) (string, error) {
	switch i {
	case 1:
		if err := e.Join(ctx, "alpha", ""); err != nil {
			return "", err
		}
		if err := flushAll(ctx, e); err != nil {
			return "", err
		}
		return fmt.Sprintf("ready founded alpha at %s", e.Addr("alpha")), nil
	case n - 1:
		// Its base place is alpha: its probes found e1, the one Active
		// member of alpha, which answered with its alpha switch.
		parent := ""
		for _, l := range e.Switch("alpha").Links() {
			if l.Parent {
				parent = l.Peer
			}
		}
		if err := e.Join(ctx, "beta", ""); err != nil {
			return "", err
		}
		if err := flushAll(ctx, e); err != nil {
			return "", err
		}
		return fmt.Sprintf("ready found alpha by broadcast through %s, founded beta at %s", parent, e.Addr("beta")), nil
	}
	return "ready", nil
}

// flushAll flushes e's switches: its advertisement filters have spread
// once it returns.
func flushAll(ctx context.Context, e *sion.Entity) error {
	ctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	for _, p := range e.Places() {
		if err := e.Switch(p).Flush(ctx); err != nil {
			return fmt.Errorf("%s: flush place %s: %w", e.Name(), p, err)
		}
	}
	return nil
}

// child is an entity's process as the parent sees it.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // its stdout, line by line; closed at EOF
	done  chan error  // cmd.Wait's result
}

func startChild(exe string, i, n int, port uint16) (*child, error) {
	cmd := exec.Command(exe, "-child", fmt.Sprint(i), "-n", fmt.Sprint(n), "-port", fmt.Sprint(port))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{name: fmt.Sprintf("e%d", i), cmd: cmd, stdin: stdin, lines: make(chan string, 16), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.done <- cmd.Wait() // after stdout's EOF, as Wait requires
	}()
	return c, nil
}

// expect returns the child's next line, which must start with prefix.
func (c *child) expect(ctx context.Context, prefix string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	select {
	case l, ok := <-c.lines:
		if !ok {
			return "", fmt.Errorf("%s exited before saying %q", c.name, prefix)
		}
		if !strings.HasPrefix(l, prefix) {
			return "", fmt.Errorf("%s said %q, want %q…", c.name, l, prefix)
		}
		return l, nil
	case <-ctx.Done():
		return "", fmt.Errorf("%s: waiting for %q: %w", c.name, prefix, ctx.Err())
	}
}

// ask sends a command and returns the child's answer line.
func (c *child) ask(ctx context.Context, cmd, prefix string) (string, error) {
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		return "", fmt.Errorf("%s: %s: %w", c.name, cmd, err)
	}
	return c.expect(ctx, prefix)
}

// stopAll ends every child: it closes their stdin (they close their
// entities and exit), or kills them right away when kill is set, and
// waits for all of them; one that has not exited after a while is killed.
func stopAll(cs []*child, kill bool) error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range cs {
		if kill {
			c.cmd.Process.Kill()
		}
		c.stdin.Close()
		wg.Go(func() {
			go func() { // drain its stdout, so it never blocks writing
				for range c.lines {
				}
			}()
			var err error
			select {
			case err = <-c.done:
			case <-time.After(10 * time.Second):
				c.cmd.Process.Kill()
				err = fmt.Errorf("did not exit in 10s; killed (%v)", <-c.done)
			}
			if err != nil && !kill {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// freePort returns a UDP port free on 127.0.0.1 now.
func freePort() (uint16, error) {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port), nil
}

func run(n int, port uint16) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if port == 0 {
		if port, err = freePort(); err != nil {
			return err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("%d entities on 127.0.0.1, discovery port %d, base place %q; no addresses configured\n", n, port, basePlace)

	// e1 starts alone and founds the base place (nobody answers its
	// probes), then alpha; the beta entity starts next, finds alpha by
	// broadcast and founds beta. Then the other n-2 start together.
	start := time.Now()
	var cs []*child
	defer func() {
		if serr := stopAll(cs, err != nil); err == nil {
			err = serr
		}
	}()
	byIndex := make([]*child, n)
	startGroup := func(idx ...int) (time.Duration, error) {
		t0 := time.Now()
		var group []*child
		for _, i := range idx {
			c, err := startChild(exe, i, n, port)
			if err != nil {
				return 0, err
			}
			cs = append(cs, c)
			byIndex[i] = c
			group = append(group, c)
		}
		for _, c := range group {
			l, err := c.expect(ctx, "active ")
			if err != nil {
				return 0, err
			}
			fmt.Printf("%s %s\n", c.name, l)
		}
		return time.Since(t0), nil
	}
	d1, err := startGroup(1)
	if err != nil {
		return err
	}
	if err := setupChild(ctx, byIndex[1]); err != nil {
		return err
	}
	d9, err := startGroup(n - 1)
	if err != nil {
		return err
	}
	if err := setupChild(ctx, byIndex[n-1]); err != nil {
		return err
	}
	var rest []int
	for i := range n {
		if i != 1 && i != n-1 {
			rest = append(rest, i)
		}
	}
	dr, err := startGroup(rest...)
	if err != nil {
		return err
	}
	allActive := time.Since(start)
	fmt.Printf("all %d entities active in %v: e1 alone in %v, e%d in %v, the other %d together in %v\n",
		n, allActive.Round(time.Millisecond), d1.Round(time.Millisecond), n-1, d9.Round(time.Millisecond), len(rest), dr.Round(time.Millisecond))
	stats := func() ([]counters, error) {
		out := make([]counters, n)
		for i, c := range byIndex {
			l, err := c.ask(ctx, "stats", "stats ")
			if err != nil {
				return nil, err
			}
			if out[i], err = parseStats(l); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	s0, err := stats()
	if err != nil {
		return err
	}
	fmt.Printf("discovery of the %d entities: %d UDP messages (%d probes, %d answers)\n",
		n, sum(s0, "probes")+sum(s0, "probe-answers"), sum(s0, "probes"), sum(s0, "probe-answers"))

	// Entities that founded apart merge (their roots probe every
	// CheckInterval): wait for one tree, one root.
	deadline := time.Now().Add(step)
	for {
		var roots []string
		for i, c := range s0 {
			if c.parent == "-" && i != n-1 { // the beta entity is not in the base place
				roots = append(roots, byIndex[i].name)
			}
		}
		if len(roots) == 1 {
			fmt.Printf("one tree in %v: root %s\n", time.Since(start).Round(time.Millisecond), roots[0])
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the base place is not one tree after %v: roots %v", step, roots)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if s0, err = stats(); err != nil {
			return err
		}
	}

	// The newcomer.
	s1, err := stats()
	if err != nil {
		return err
	}
	nstart := time.Now()
	nc, err := newEntity("newcomer", basePlace, port, nil)
	if err != nil {
		return err
	}
	defer nc.Close()
	wctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	if err := nc.WaitState(wctx, sion.Active); err != nil {
		return err
	}
	ndisc := time.Since(nstart)
	ns := nc.Stats()
	fmt.Printf("newcomer active in %v: %d probes, %d answers received\n", ndisc.Round(time.Millisecond), ns.ProbesSent, ns.ProbeAnswersReceived)

	s2, err := stats()
	if err != nil {
		return err
	}
	before := parseNewcomer(nc)
	res, err := nc.Search(wctx, sion.Need{Attributes: map[string]string{"topic": "weather"}, Place: "beta"}, searchOpts)
	if err != nil {
		return err
	}
	s3, err := stats()
	if err != nil {
		return err
	}
	after := parseNewcomer(nc)
	delta := func(k string) uint64 { return sum(s3, k) - sum(s2, k) + after.values[k] - before.values[k] }
	fmt.Printf("UDP messages while the newcomer joined: %d (%d probes, %d answers, over all entities)\n",
		sum(s2, "probes")+sum(s2, "probe-answers")-sum(s1, "probes")-sum(s1, "probe-answers")+ns.ProbesSent,
		sum(s2, "probes")-sum(s1, "probes")+ns.ProbesSent, sum(s2, "probe-answers")-sum(s1, "probe-answers"))
	fmt.Printf("search: met=%v found=%s place=%s rounds=%d answers=%d elapsed=%v\n",
		res.Met, res.Found.Name, res.Place, res.Rounds, res.Answers, res.Elapsed.Round(time.Millisecond))
	fmt.Printf("search messages: %d discovery events sent, %d received; %d answers sent, %d received; %d shared-link frames\n",
		delta("discovery-sent"), delta("discovery-received"), delta("answers-sent"), delta("answers-received"), delta("frames"))
	if !res.Met || res.Place != "beta" {
		return fmt.Errorf("the search did not reach beta: %+v", res)
	}
	fmt.Printf("newcomer belongs to %s\n", strings.Join(sortedPlaces(nc), ", "))
	fmt.Printf("reached beta: %s\n", res)
	return nil
}

// setupChild has c take its role and prints its "ready" line.
func setupChild(ctx context.Context, c *child) error {
	l, err := c.ask(ctx, "setup", "ready")
	if err == nil {
		fmt.Printf("%s %s\n", c.name, l)
	}
	return err
}

// parseNewcomer returns the newcomer's counters as a child reports its
// own.
func parseNewcomer(e *sion.Entity) counters {
	c, err := parseStats(statsLine(e))
	if err != nil {
		panic(err) // statsLine's own format
	}
	return c
}

func sortedPlaces(e *sion.Entity) []string {
	ps := e.Places()
	sort.Strings(ps)
	return ps
}

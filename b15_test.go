package sion_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// CASES.md B15 — discovery on multi-homed hosts. The test builds two
// network namespaces H1 and H2, each with a private net0 and a shared
// broadcast domain net1 (a veth pair), and runs the test binary itself in
// each (TestB15Child) as router r1 and r2, listening on 0.0.0.0 without an
// advertise address. The children report on stdout, one "b15 <key>
// <value>" line each: "addr", "active", "parent", "peers", "links",
// "ownprobes", "routed", "dial" (every Dial, before dialing), "got",
// "published", "error".

const (
	b15Prefix = "b15 "
	b15Port   = "47515" // the discovery port; the namespaces are fresh, so any port is free
)

var b15Seq atomic.Int64

// b15IP is the net1 address of each router's host.
var b15IP = map[string]string{"r1": "10.20.0.1", "r2": "10.20.0.2"}

func TestCaseB15MultiHomedDiscovery(t *testing.T) {
	t.Run("listen-any", func(t *testing.T) { runB15(t, false) })
	// Variant: r1 advertises 10.20.0.1 explicitly; r2, started once r1
	// is Active, connects to exactly that address.
	t.Run("advertise-host", func(t *testing.T) { runB15(t, true) })
}

func runB15(t *testing.T, variant bool) {
	ip, h1, h2 := b15Netns(t)
	base := fmt.Sprintf("b15-%d-%d", os.Getpid(), b15Seq.Add(1))
	start := time.Now()
	deadline := start.Add(5 * time.Second)
	env := []string{"SION_B15_PORT=" + b15Port, "SION_B15_BASE=" + base}
	env1 := env
	if variant {
		env1 = append(slices.Clone(env), "SION_B15_ADVERTISE=10.20.0.1")
	}
	r1 := b15Start(t, ip, h1, "r1", env1)
	if variant {
		r1.waitFor(t, deadline, "r1 Active before r2 starts", func(s b15Snap) bool { return s.has("active") })
	}
	r2 := b15Start(t, ip, h2, "r2", env)
	kids := []*b15Child{r1, r2}

	// Exactly one link r1–r2 within 5 s; each received its own
	// broadcasts; neither linked to itself.
	b15WaitAll(t, deadline, "one link r1–r2, own probes seen", kids, func(s map[string]b15Snap) bool {
		for _, me := range []string{"r1", "r2"} {
			other := b15Other(me)
			st := s[me]
			if !st.has("active") || st.last("links") != "1" || st.last("peers") != other || st.num("ownprobes") == 0 {
				return false
			}
		}
		p1, p2 := s["r1"].last("parent"), s["r2"].last("parent")
		return (p1 == "r2" && p2 == "") || (p1 == "" && p2 == "r1")
	})
	t.Logf("one link after %v", time.Since(start).Round(time.Millisecond))
	ports := map[string]string{"r1": r1.port(t), "r2": r2.port(t)}
	dialer := "r2"
	if r1.snap().last("parent") == "r2" {
		dialer = "r1"
	}
	if variant {
		assert.Equal(t, "r2", dialer, "r2, started after r1 was Active, links to it")
	}
	b15CheckDials(t, kids, ports)
	require.NotEmpty(t, b15ChildOf(kids, dialer).snap().all("dial"), "%s dialed its parent", dialer)
	if variant {
		assert.Empty(t, r1.snap().all("dial"), "r1 dials nobody")
		for _, d := range r2.snap().all("dial") {
			assert.Equal(t, "10.20.0.1:"+ports["r1"], d, "r2 connects to exactly r1's advertised address")
		}
	}

	// Subscribe S on r2 {type ⊑ Notice} (done at start; wait until r1
	// acknowledged its route), publish Notice seq 1 at r1: exactly once.
	pubDeadline := time.Now().Add(5 * time.Second)
	r2.waitFor(t, pubDeadline, "r2's Notice route acknowledged by r1", func(s b15Snap) bool { return s.last("routed") == "1" })
	r1.send(t, "publish")
	r1.waitFor(t, pubDeadline, "r1 published", func(s b15Snap) bool { return s.has("published") })
	r2.waitFor(t, pubDeadline, "r2 got the Notice", func(s b15Snap) bool { return s.has("got") })
	time.Sleep(time.Second) // a duplicate would arrive meanwhile
	assert.Equal(t, []string{"1"}, r2.snap().all("got"), "S receives the Notice exactly once")
	assert.Empty(t, r1.snap().all("got"))
	for _, k := range kids {
		s := k.snap()
		assert.Equal(t, "1", s.last("links"), "%s still has exactly one link", k.name)
		assert.Empty(t, s.all("error"), k.name)
	}

	// Children close their entities and exit (goleak runs in each);
	// every dial, up to the end, went to the peer's net1 address.
	for _, k := range kids {
		k.closeStdin()
	}
	for _, k := range kids {
		assert.NoError(t, k.wait(15*time.Second), "%s exits cleanly", k.name)
	}
	b15CheckDials(t, kids, ports)
}

// b15CheckDials: every dial of each child is the other router's net1
// address and listening port — never unspecified, loopback, net0, nor
// itself.
func b15CheckDials(t *testing.T, kids []*b15Child, ports map[string]string) {
	t.Helper()
	net1 := netip.MustParsePrefix("10.20.0.0/24")
	for _, k := range kids {
		other := b15Other(k.name)
		for _, d := range k.snap().all("dial") {
			ap, err := netip.ParseAddrPort(d)
			if !assert.NoError(t, err, "%s dialed %q", k.name, d) {
				continue
			}
			ip := ap.Addr().Unmap()
			assert.False(t, ip.IsUnspecified() || ip.IsLoopback(), "%s dialed %s", k.name, d)
			assert.False(t, netip.MustParsePrefix("10.10.0.0/16").Contains(ip), "%s dialed a net0 address %s", k.name, d)
			assert.True(t, net1.Contains(ip), "%s dialed %s, not a net1 address", k.name, d)
			assert.Equal(t, b15IP[other]+":"+ports[other], d, "%s dials %s's net1 address only", k.name, other)
		}
	}
}

func b15Other(name string) string {
	if name == "r1" {
		return "r2"
	}
	return "r1"
}

func b15ChildOf(kids []*b15Child, name string) *b15Child {
	for _, k := range kids {
		if k.name == name {
			return k
		}
	}
	return nil
}

// b15Netns makes namespaces H1 and H2 (and, without the dummy link type,
// a private one holding net0's other ends), deleted at cleanup; it skips
// the test when namespaces cannot be made.
func b15Netns(t *testing.T) (ip, h1, h2 string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("B15 needs network namespaces: not root")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		if _, err2 := os.Stat("/usr/sbin/ip"); err2 != nil {
			t.Skipf("B15 needs network namespaces: iproute2 ip not found: %v", err)
		}
		ip = "/usr/sbin/ip"
	}
	run := func(args ...string) error {
		out, err := exec.Command(ip, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	must := func(args ...string) {
		t.Helper()
		require.NoError(t, run(args...))
	}
	id := fmt.Sprintf("sionb15-%d-%d", os.Getpid(), b15Seq.Add(1))
	mkns := func(ns string) {
		t.Helper()
		if err := run("netns", "add", ns); err != nil {
			t.Skipf("B15 needs network namespaces: %v", err)
		}
		t.Cleanup(func() {
			if err := run("netns", "del", ns); err != nil {
				t.Logf("cleanup: %v", err)
			}
		})
	}
	h1, h2 = id+"-h1", id+"-h2"
	priv := ""
	for i, ns := range []string{h1, h2} {
		mkns(ns)
		must("-n", ns, "link", "set", "lo", "up")
		if err := run("-n", ns, "link", "add", "net0", "type", "dummy"); err != nil {
			if priv == "" {
				priv = id + "-p"
				mkns(priv)
			}
			if err := run("-n", ns, "link", "add", "net0", "type", "veth", "peer", "name", fmt.Sprintf("p%d", i+1), "netns", priv); err != nil {
				t.Skipf("B15 needs dummy or veth links in network namespaces: %v", err)
			}
			must("-n", priv, "link", "set", fmt.Sprintf("p%d", i+1), "up")
		}
		must("-n", ns, "addr", "add", fmt.Sprintf("10.10.%d.1/24", i+1), "brd", "+", "dev", "net0")
		must("-n", ns, "link", "set", "net0", "up")
	}
	if err := run("-n", h1, "link", "add", "net1", "type", "veth", "peer", "name", "net1", "netns", h2); err != nil {
		t.Skipf("B15 needs veth links between network namespaces: %v", err)
	}
	must("-n", h1, "addr", "add", "10.20.0.1/24", "brd", "+", "dev", "net1")
	must("-n", h2, "addr", "add", "10.20.0.2/24", "brd", "+", "dev", "net1")
	must("-n", h1, "link", "set", "net1", "up")
	must("-n", h2, "link", "set", "net1", "up")
	return ip, h1, h2
}

// b15Child is a router process in a namespace.
type b15Child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed once the process exited and its output was read
	err   error         // the process's exit error; set before done closes

	mu     sync.Mutex
	output []string            // every line, stdout and stderr
	vals   map[string][]string // "b15 key value" lines, by key
	stdinC sync.Once
}

// b15Snap is a copy of a child's reported values.
type b15Snap map[string][]string

func (s b15Snap) has(k string) bool { return len(s[k]) > 0 }
func (s b15Snap) all(k string) []string {
	return s[k]
}
func (s b15Snap) last(k string) string {
	if v := s[k]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}
func (s b15Snap) num(k string) int {
	n, _ := strconv.Atoi(s.last(k))
	return n
}

func b15Start(t *testing.T, ip, ns, role string, env []string) *b15Child {
	t.Helper()
	cmd := exec.Command(ip, "netns", "exec", ns, os.Args[0], "-test.run=^TestB15Child$", "-test.v", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(append(os.Environ(), "SION_B15_ROLE="+role), env...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	c := &b15Child{name: role, cmd: cmd, stdin: stdin, done: make(chan struct{}), vals: map[string][]string{}}
	cmd.Stderr = lineWriter(func(l string) { c.add("stderr: " + l) })
	require.NoError(t, cmd.Start(), "start %s in %s", role, ns)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.add(sc.Text())
		}
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.closeStdin()
		if c.wait(10*time.Second) != nil || t.Failed() {
			c.mu.Lock()
			t.Logf("%s output:\n\t%s", c.name, strings.Join(c.output, "\n\t"))
			c.mu.Unlock()
		}
	})
	return c
}

func (c *b15Child) add(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.output = append(c.output, line)
	if rest, ok := strings.CutPrefix(line, b15Prefix); ok {
		k, v, _ := strings.Cut(rest, " ")
		c.vals[k] = append(c.vals[k], v)
	}
}

func (c *b15Child) snap() b15Snap {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := b15Snap{}
	for k, v := range c.vals {
		s[k] = slices.Clone(v)
	}
	return s
}

func (c *b15Child) send(t *testing.T, cmd string) {
	t.Helper()
	_, err := io.WriteString(c.stdin, cmd+"\n")
	require.NoError(t, err, "%s: %s", c.name, cmd)
}

func (c *b15Child) closeStdin() { c.stdinC.Do(func() { c.stdin.Close() }) }

// wait waits for the process to exit, killing it after d; it returns its
// exit error.
func (c *b15Child) wait(d time.Duration) error {
	select {
	case <-c.done:
		return c.err
	case <-time.After(d):
	}
	c.cmd.Process.Kill()
	<-c.done
	return fmt.Errorf("%s killed after %v: %v", c.name, d, c.err)
}

func (c *b15Child) port(t *testing.T) string {
	t.Helper()
	ap, err := netip.ParseAddrPort(c.snap().last("addr"))
	require.NoError(t, err, "%s's listening address", c.name)
	return strconv.Itoa(int(ap.Port()))
}

func (c *b15Child) waitFor(t *testing.T, deadline time.Time, what string, cond func(b15Snap) bool) {
	t.Helper()
	b15WaitAll(t, deadline, what, []*b15Child{c}, func(s map[string]b15Snap) bool { return cond(s[c.name]) })
}

// b15WaitAll polls the children's reports until cond holds, and fails
// the test at deadline (or when a child exits meanwhile).
func b15WaitAll(t *testing.T, deadline time.Time, what string, kids []*b15Child, cond func(map[string]b15Snap) bool) {
	t.Helper()
	for {
		s := map[string]b15Snap{}
		for _, k := range kids {
			s[k.name] = k.snap()
		}
		if cond(s) {
			return
		}
		for _, k := range kids {
			select {
			case <-k.done:
				t.Fatalf("%s: %s exited early (%v); reports %v", what, k.name, k.err, s)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within the deadline; reports %v", what, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lineWriter calls f with each line written to it.
type lineWriter func(string)

func (f lineWriter) Write(b []byte) (int, error) {
	for l := range strings.SplitSeq(strings.TrimRight(string(b), "\n"), "\n") {
		f(l)
	}
	return len(b), nil
}

// b15Transport is tcp that reports every Dial before dialing it.
type b15Transport struct {
	transport.Transport
	report func(key, value string)
}

func (d b15Transport) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	d.report("dial", addr)
	return d.Transport.Dial(ctx, addr)
}

// TestB15Child is a router of TestCaseB15MultiHomedDiscovery, run in a
// network namespace; it skips unless SION_B15_ROLE is set.
func TestB15Child(t *testing.T) {
	role := os.Getenv("SION_B15_ROLE")
	if role == "" {
		t.Skip("helper process of TestCaseB15MultiHomedDiscovery (SION_B15_ROLE unset)")
	}
	var outMu sync.Mutex
	report := func(key, value string) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(os.Stdout, "%s%s %s\n", b15Prefix, key, value)
	}
	port, err := strconv.ParseUint(os.Getenv("SION_B15_PORT"), 10, 16)
	require.NoError(t, err)
	base := os.Getenv("SION_B15_BASE")
	tr, err := tcp.New(tcp.Config{})
	require.NoError(t, err)
	e, err := sion.NewEntity(sion.EntityConfig{
		Name: role, Ontology: ont1(t), Transport: b15Transport{tr, report}, BasePlace: base,
		ListenHost: "0.0.0.0", AdvertiseHost: os.Getenv("SION_B15_ADVERTISE"), DiscoveryPort: uint16(port),
		ProbeWait: 100 * time.Millisecond, CheckInterval: 300 * time.Millisecond,
	})
	require.NoError(t, err)
	defer e.Close()
	report("addr", e.Addr(base))
	sw := e.Switch(base)
	ctx := context.Background()
	var pub *sion.Session
	if role == "r2" {
		s, err := sw.Open(ctx, sion.SessionConfig{Name: "S"})
		require.NoError(t, err)
		_, err = s.Subscribe(ctx, `{type ⊑ Notice}`, sion.WithHandler(func(d sion.Delivery) {
			v, _ := d.Event.Value("seq")
			report("got", fmt.Sprint(v.Int()))
		}))
		require.NoError(t, err)
	} else {
		pub, err = sw.Open(ctx, sion.SessionConfig{Name: "pub"})
		require.NoError(t, err)
	}

	cmds := make(chan string)
	go func() {
		defer close(cmds)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmds <- sc.Text()
		}
	}()
	last := map[string]string{}
	state := func() {
		st := e.Stats()
		links := sw.Links()
		var peers []string
		parent := ""
		for _, l := range links {
			peers = append(peers, l.Peer)
			if l.Parent {
				parent = l.Peer
			}
		}
		routed := "0"
		for _, r := range sw.Routes() {
			if strings.Contains(r.Filter, "Notice") && r.Acknowledged {
				routed = "1"
			}
		}
		now := map[string]string{
			"parent": parent, "peers": strings.Join(peers, ","), "links": fmt.Sprint(len(links)),
			"ownprobes": fmt.Sprint(st.OwnProbes), "routed": routed,
		}
		if st.State == sion.Active {
			now["active"] = ""
		}
		for _, k := range []string{"active", "parent", "peers", "links", "ownprobes", "routed"} {
			if v, ok := now[k]; ok && (last[k] != v || !hasKey(last, k)) {
				last[k] = v
				report(k, v)
			}
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			state()
		case c, ok := <-cmds:
			if !ok {
				require.NoError(t, e.Close())
				return
			}
			if c != "publish" || pub == nil {
				report("error", "unexpected command "+c)
				continue
			}
			fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := sw.Flush(fctx)
			if err == nil {
				err = pub.Publish(fctx, &sion.Event{Type: "Notice", Attrs: kv("seq", 1)})
			}
			cancel()
			if err != nil {
				report("error", "publish: "+err.Error())
				continue
			}
			report("published", "1")
		}
	}
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

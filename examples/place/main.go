// Command place runs quakewatch's subscribers on an event place of several
// sion switches linked over TCP on loopback: the switches form a line
// (switch i requests its shared link to switch i-1), subscriber k sits on
// switch 1 + k mod (n-1), and the real USGS events are published at
// switch 0, the far end. Every subscriber must receive what it receives
// on one switch (quakewatch's counts), whichever routing mode the place
// uses; the program runs the place once per mode and reports the control
// and event messages each cost.
//
//	go run ./examples/place [-n 4] [-procs]
//
// With -procs, switches 1..n-1 run in child processes of this program
// (the same binary started with -switch), each linked to the previous one
// over TCP, and report their subscribers' counts back on stdout.
//
// It ends with one line per subscriber ("subscriber NAME received N
// events", the counts of the last mode run) after one line per routing
// mode ("routing MODE: C control messages, E event messages over L
// links").
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/examples/internal/usgs"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// linkConfig turns off the periodic probes for alternative parents, so
// that the control messages counted are those of filter propagation (and
// of the final Flush) alone.
var linkConfig = sion.LinkConfig{ProbeHops: -1}

var modes = []sion.Routing{sion.RouteUnconditional, sion.RouteByEventType, sion.RouteByFilter}

func main() {
	n := flag.Int("n", 4, "switches in the place (at least 2)")
	procs := flag.Bool("procs", false, "run switches 1..n-1 as child processes")
	child := flag.Int("switch", 0, "internal: run switch `i` as a child process")
	parent := flag.String("parent", "", "internal: the parent switch's address (with -switch)")
	mode := flag.String("mode", "", "internal: the routing, by name (with -switch)")
	flag.Parse()
	log.SetFlags(0)
	if *n < 2 {
		log.Fatal("place: -n must be at least 2")
	}
	var err error
	if *child > 0 {
		err = runChild(*child, *n, *parent, routingNamed(*mode))
	} else {
		err = run(*n, *procs)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// routingNamed returns the routing of modes called name (nil: the default).
func routingNamed(name string) sion.Routing {
	for _, m := range modes {
		if m.String() == name {
			return m
		}
	}
	return nil
}

func newPlace(mode sion.Routing) (*sion.EventPlace, error) {
	ont, err := ontology.LoadJSON(bytes.NewReader(usgs.Hazards), "hazards.json")
	if err != nil {
		return nil, err
	}
	return sion.NewEventPlace(sion.PlaceConfig{Name: "usgs", Ontology: ont, Routing: mode})
}

// node is one switch serving on TCP.
type node struct {
	sw     *sion.Switch
	addr   string
	served chan error
}

func startSwitch(tr transport.Transport, place *sion.EventPlace, i int) (*node, error) {
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: fmt.Sprintf("sw%d", i), Place: place})
	if err != nil {
		return nil, err
	}
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		sw.Close()
		return nil, err
	}
	nd := &node{sw: sw, addr: l.Addr().String(), served: make(chan error, 1)}
	go func() { nd.served <- sw.Serve(context.Background(), l) }()
	return nd, nil
}

func (nd *node) close() error {
	err := nd.sw.Close()
	return errors.Join(err, <-nd.served)
}

// subscriber is one of quakewatch's subscribers on a switch.
type subscriber struct {
	idx  int
	sess *sion.Session
	sub  *sion.Subscription
}

// subscribe opens the subscribers that live on switch i of n.
func subscribe(ctx context.Context, sw *sion.Switch, i, n int) ([]subscriber, error) {
	var out []subscriber
	for k, s := range usgs.Subscribers {
		if 1+k%(n-1) != i {
			continue
		}
		sess, err := sw.Open(ctx, sion.SessionConfig{Name: s.Name, SpoolSize: 1 << 14})
		if err != nil {
			return nil, err
		}
		opts := []sion.SubscribeOption{sion.WithLookIn()}
		if !s.LookIn {
			opts = []sion.SubscribeOption{sion.WithQueue(1 << 14)}
		}
		sub, err := sess.Subscribe(ctx, s.Filter, opts...) // returns once active at every switch (S2)
		if err != nil {
			return nil, fmt.Errorf("subscriber %s: %w", s.Name, err)
		}
		out = append(out, subscriber{idx: k, sess: sess, sub: sub})
	}
	return out, nil
}

// report returns "subscriber NAME received N events" lines for subs; the
// events are in their queues and spools already (the publisher flushed).
func report(ctx context.Context, subs []subscriber) ([]string, error) {
	var lines []string
	for _, s := range subs {
		got := 0
		if usgs.Subscribers[s.idx].LookIn {
			if s.sess.Stats().Spooled > 0 {
				ds, err := s.sess.Pull(ctx, 0)
				if err != nil {
					return nil, err
				}
				got = len(ds)
			}
		} else {
			got = s.sub.Stats().Queued
		}
		if st := s.sub.Stats(); st.Dropped > 0 {
			lines = append(lines, fmt.Sprintf("subscriber %s dropped %d events", usgs.Subscribers[s.idx].Name, st.Dropped))
		}
		lines = append(lines, fmt.Sprintf("subscriber %s received %d events", usgs.Subscribers[s.idx].Name, got))
	}
	return lines, nil
}

func run(n int, procs bool) error {
	ctx := context.Background()
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		return err
	}
	var lines []string
	for _, mode := range modes {
		var err error
		if lines, err = runMode(ctx, tr, n, mode, procs); err != nil {
			return fmt.Errorf("routing %v: %w", mode, err)
		}
	}
	slices.SortFunc(lines, func(a, b string) int { return order(a) - order(b) })
	for _, l := range lines {
		fmt.Println(l)
	}
	return nil
}

// order sorts report lines in the order of subscribers.
func order(line string) int {
	for k, s := range usgs.Subscribers {
		if strings.HasPrefix(line, "subscriber "+s.Name+" ") {
			return k
		}
	}
	return len(usgs.Subscribers)
}

// runMode runs the place once with routing mode and returns the
// subscribers' lines.
func runMode(ctx context.Context, tr transport.Transport, n int, mode sion.Routing, procs bool) ([]string, error) {
	place, err := newPlace(mode)
	if err != nil {
		return nil, err
	}
	root, err := startSwitch(tr, place, 0)
	if err != nil {
		return nil, err
	}
	defer root.close()

	var lines []string
	var finish []func() ([]string, error)
	prev := root.addr
	for i := 1; i < n; i++ {
		if procs {
			c, addr, err := startChild(i, n, prev, mode)
			if err != nil {
				return nil, err
			}
			finish = append(finish, c)
			prev = addr
			continue
		}
		nd, err := startSwitch(tr, place, i)
		if err != nil {
			return nil, err
		}
		defer nd.close()
		if _, err := nd.sw.Link(ctx, tr, prev, linkConfig); err != nil {
			return nil, err
		}
		subs, err := subscribe(ctx, nd.sw, i, n)
		if err != nil {
			return nil, err
		}
		finish = append(finish, func() ([]string, error) {
			lines, err := report(ctx, subs)
			return append(lines, linkLine(nd.sw)), err
		})
		prev = nd.addr
	}

	// Publish the feed at switch 0 and wait until it has reached every
	// switch's queues.
	events, err := readFeed(place)
	if err != nil {
		return nil, err
	}
	pub, err := root.sw.Open(ctx, sion.SessionConfig{Name: "usgs-feed"})
	if err != nil {
		return nil, err
	}
	var refused error
	for _, ev := range events {
		if err := pub.Publish(ctx, ev); err != nil {
			refused = errors.Join(refused, err)
		}
	}
	if refused != nil {
		log.Printf("some events were refused: %v", refused)
	}
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := root.sw.Flush(fctx); err != nil {
		return nil, err
	}
	lines = append(lines, linkLine(root.sw)) // before the children go away
	for _, f := range finish {
		l, err := f()
		if err != nil {
			return nil, err
		}
		lines = append(lines, l...)
	}
	// Each switch counts the messages of the links to its children.
	var ctl, evs uint64
	for _, l := range lines {
		var c, e uint64
		if _, err := fmt.Sscanf(l, "links %d %d", &c, &e); err == nil {
			ctl, evs = ctl+c, evs+e
		}
	}
	lines = slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "links ") })
	fmt.Printf("routing %v: %d control messages, %d event messages over %d links\n", mode, ctl, evs, n-1)
	return lines, nil
}

// readFeed turns the USGS features into events, as quakewatch does.
func readFeed(place *sion.EventPlace) ([]*sion.Event, error) {
	reader, err := place.NewJSONReader(usgs.Fields)
	if err != nil {
		return nil, err
	}
	events, err := reader.ReadList(usgs.Week, "features")
	if err != nil && len(events) == 0 {
		return nil, err
	}
	if err != nil {
		log.Printf("some features were skipped: %v", err)
	}
	return events, nil
}

// startChild starts switch i as a child process linked to parent, waits
// until it is linked and its subscriptions are granted, and returns a
// function that asks it to report and collects its lines.
func startChild(i, n int, parent string, mode sion.Routing) (func() ([]string, error), string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(exe, "-switch", fmt.Sprint(i), "-n", fmt.Sprint(n), "-parent", parent, "-mode", mode.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	out := bufio.NewScanner(stdout)
	if !out.Scan() || !strings.HasPrefix(out.Text(), "ready ") {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, "", fmt.Errorf("switch %d did not start: %q", i, out.Text())
	}
	addr := strings.TrimPrefix(out.Text(), "ready ")
	return func() ([]string, error) {
		stdin.Close() // report and exit
		var lines []string
		for out.Scan() {
			lines = append(lines, out.Text())
		}
		return lines, cmd.Wait()
	}, addr, nil
}

// runChild is switch i in a child process: it links to parent, opens its
// subscribers, says "ready ADDR", and when its stdin closes, reports its
// subscribers' counts and its link counters ("links C E": control
// messages sent and received, events sent, over its link to its child).
func runChild(i, n int, parent string, mode sion.Routing) error {
	ctx := context.Background()
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		return err
	}
	place, err := newPlace(mode)
	if err != nil {
		return err
	}
	nd, err := startSwitch(tr, place, i)
	if err != nil {
		return err
	}
	defer nd.close()
	if _, err := nd.sw.Link(ctx, tr, parent, linkConfig); err != nil {
		return err
	}
	subs, err := subscribe(ctx, nd.sw, i, n)
	if err != nil {
		return err
	}
	fmt.Printf("ready %s\n", nd.addr)
	io.Copy(io.Discard, os.Stdin) // until the parent closes it; it has flushed by then
	lines, err := report(ctx, subs)
	if err != nil {
		return err
	}
	for _, l := range append(lines, linkLine(nd.sw)) {
		fmt.Println(l)
	}
	return nil
}

// linkLine returns "links C E": the control messages sent and received,
// and the events sent, on sw's links to its children.
func linkLine(sw *sion.Switch) string {
	var ctl, evs uint64
	for _, l := range sw.Links() {
		if !l.Parent {
			ctl += l.ControlSent + l.ControlReceived
			evs += l.EventsSent
		}
	}
	return fmt.Sprintf("links %d %d", ctl, evs)
}

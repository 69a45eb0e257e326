// Command federation joins two event places with different ontologies by a
// gateway (S1 SI-GW) and sends real air-quality readings across it.
//
// Place "beijing" speaks the vocabulary of the Beijing multi-site
// air-quality data (UCI; examples/internal/beijing): AirQualityReading
// events with station, pm25 and temp in °C. Place "monitoring" speaks
// another: AirQualityObservation with site, pm2_5 and air_temp_f in °F.
// A switch of beijing federates with a switch of monitoring (export only);
// the gateway's firewall lets only hazardous PM2.5 (> 250 µg/m³) and
// below-freezing readings out, and its Mapping converts them (type,
// attribute names, station → site names, °C → °F). Subscribers in
// monitoring subscribe in their own vocabulary; the gateway derives from
// their filters, through the Mapping, the filters it subscribes with in
// beijing, so only events someone wants cross.
//
//	go run ./examples/federation [-procs]
//
// With -procs, place monitoring runs in a child process (the same binary
// started with -monitor) and the gateway crosses TCP between the two
// processes. Either way it ends with one line per subscriber ("subscriber
// NAME received N events"), which the tests check against the data:
// 714 hazardous readings, 873 below freezing, 1,586 in all.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/examples/internal/beijing"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/tcp"
)

// firewall is what the gateway lets out of beijing, in beijing's
// vocabulary.
var firewall = []string{
	fmt.Sprintf("{type ⊑ %s; pm25 > %d}", beijing.SourceType, beijing.HazardousPM25),
	fmt.Sprintf("{type ⊑ %s; temp < 0}", beijing.SourceType),
}

// subscribers live in monitoring and speak its vocabulary.
var subscribers = []struct{ name, filter string }{
	{"hazardous-pm25", fmt.Sprintf("{type ⊑ %s; pm2_5 > %d}", beijing.TargetType, beijing.HazardousPM25)},
	{"below-freezing", fmt.Sprintf("{type ⊑ %s; air_temp_f < 32}", beijing.TargetType)},
	{"all-observations", "{type ⊑ Observation}"},
}

func main() {
	procs := flag.Bool("procs", false, "run place monitoring in a child process")
	monitor := flag.Bool("monitor", false, "internal: run place monitoring (the child process)")
	flag.Parse()
	log.SetFlags(0)
	var err error
	if *monitor {
		err = runMonitor()
	} else {
		err = run(*procs)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// monitoring is place monitoring: one switch serving on loopback TCP,
// with the subscribers.
type monitoring struct {
	sw     *sion.Switch
	addr   string
	served chan error
	subs   []*counter
}

// counter counts what one subscriber receives and keeps the first event.
type counter struct {
	name  string
	sub   *sion.Subscription
	n     atomic.Int64
	once  sync.Once
	first *sion.Event
}

func startMonitoring(ctx context.Context) (*monitoring, error) {
	place, err := sion.NewEventPlace(sion.PlaceConfig{
		Name:     beijing.TargetPlace,
		Ontology: beijing.TargetOntology(),
		// Consent: only beijing may send events here, and nothing goes back.
		Federation: func(_ context.Context, r sion.FederationRequest) error {
			if r.Place != beijing.SourcePlace || r.Import {
				return fmt.Errorf("only exports from place %q are welcome", beijing.SourcePlace)
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "monitoring-1", Place: place})
	if err != nil {
		return nil, err
	}
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		return nil, err
	}
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		sw.Close()
		return nil, err
	}
	m := &monitoring{sw: sw, addr: l.Addr().String(), served: make(chan error, 1)}
	go func() { m.served <- sw.Serve(context.Background(), l) }()
	for _, s := range subscribers {
		sess, err := sw.Open(ctx, sion.SessionConfig{Name: s.name})
		if err != nil {
			return nil, errors.Join(err, m.close())
		}
		c := &counter{name: s.name}
		c.sub, err = sess.Subscribe(ctx, s.filter, sion.WithQueue(1<<15), sion.WithHandler(func(d sion.Delivery) {
			c.once.Do(func() { c.first = d.Event })
			c.n.Add(1)
		}))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("subscriber %s: %w", s.name, err), m.close())
		}
		m.subs = append(m.subs, c)
	}
	return m, nil
}

func (m *monitoring) close() error {
	return errors.Join(m.sw.Close(), <-m.served)
}

// report returns the subscribers' lines once their handlers have seen
// every event delivered to them (the publisher has flushed by then).
func (m *monitoring) report() []string {
	deadline := time.Now().Add(10 * time.Second)
	var lines []string
	for _, c := range m.subs {
		for c.n.Load() < int64(c.sub.Stats().Delivered) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if st := c.sub.Stats(); st.Dropped > 0 {
			lines = append(lines, fmt.Sprintf("subscriber %s dropped %d events", c.name, st.Dropped))
		}
		lines = append(lines, fmt.Sprintf("subscriber %s received %d events", c.name, c.n.Load()))
	}
	for _, c := range m.subs {
		if c.name == "below-freezing" && c.first != nil {
			lines = append(lines, "first below-freezing observation in monitoring: "+describe(c.first))
		}
	}
	return lines
}

// describe formats a converted observation.
func describe(e *sion.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s{", e.Type)
	for i, a := range e.Attrs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %v", a.Name, a.Value)
	}
	fmt.Fprintf(&b, "} path %s", strings.Join(e.Control.Path, " → "))
	return b.String()
}

func run(procs bool) error {
	ctx := context.Background()
	var addr string
	var finish func() ([]string, error)
	if procs {
		var err error
		if finish, addr, err = startChild(); err != nil {
			return err
		}
	} else {
		m, err := startMonitoring(ctx)
		if err != nil {
			return err
		}
		defer m.close()
		addr = m.addr
		finish = func() ([]string, error) { return m.report(), nil }
	}

	// Place beijing: one switch, and the gateway it requests.
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: beijing.SourcePlace, Ontology: beijing.SourceOntology()})
	if err != nil {
		return err
	}
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "beijing-1", Place: place})
	if err != nil {
		return err
	}
	defer sw.Close()
	mapping, err := ontology.NewMapping(beijing.SourceOntology(), beijing.TargetOntology(), beijing.MappingSpec())
	if err != nil {
		return err
	}
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		return err
	}
	gw, err := sw.Federate(ctx, tr, addr, sion.GatewayConfig{
		Name:   "beijing→monitoring",
		Export: &sion.DirectionConfig{Mapping: mapping, Firewall: firewall},
	})
	if err != nil {
		return err
	}
	defer gw.Close()
	fmt.Printf("gateway %s: firewall %s\n", gw.Name(), strings.Join(firewall, " | "))
	fmt.Printf("filters derived in beijing from monitoring's subscribers: %s\n", strings.Join(gw.Info().Filters, " | "))

	// Publish every reading in beijing, then wait until the gateway has
	// delivered what crossed (Flush: a marker follows the events).
	readings, err := beijing.Readings()
	if err != nil {
		return err
	}
	pub, err := sw.Open(ctx, sion.SessionConfig{Name: "stations"})
	if err != nil {
		return err
	}
	for _, r := range readings {
		typ, attrs := beijing.Event(r)
		if err := pub.Publish(ctx, &sion.Event{Type: typ, Attrs: attrs}); err != nil {
			return fmt.Errorf("reading %s %v: %w", r.Station, r.Time, err)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := sw.Flush(fctx); err != nil {
		return err
	}
	info := gw.Info()
	c := info.Export
	fmt.Printf("gateway %s: %d readings published in beijing, %d crossed to monitoring (%d converted)\n", gw.Name(), len(readings), c.Forwarded, c.Converted)
	if lost := c.Filtered + c.Unmapped + c.Refused + c.Dropped + c.Expired; lost > 0 {
		fmt.Printf("gateway %s: refused or dropped %d events that reached it: %+v\n", gw.Name(), lost, c)
	}
	lines, err := finish()
	if err != nil {
		return err
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	return nil
}

// startChild starts place monitoring in a child process, waits until it
// serves and its subscriptions are granted, and returns a function that
// asks it to report and collects its lines.
func startChild() (func() ([]string, error), string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(exe, "-monitor")
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
		return nil, "", fmt.Errorf("place monitoring did not start: %q", out.Text())
	}
	return func() ([]string, error) {
		stdin.Close() // report and exit
		var lines []string
		for out.Scan() {
			lines = append(lines, out.Text())
		}
		return lines, cmd.Wait()
	}, strings.TrimPrefix(out.Text(), "ready "), nil
}

// runMonitor is place monitoring in a child process: it says "ready
// ADDR", and when its stdin closes (the parent has flushed), reports its
// subscribers' counts.
func runMonitor() error {
	m, err := startMonitoring(context.Background())
	if err != nil {
		return err
	}
	fmt.Printf("ready %s\n", m.addr)
	io.Copy(io.Discard, os.Stdin)
	for _, l := range m.report() {
		fmt.Println(l)
	}
	return m.close()
}

// Command nats runs an event place whose shared links ride a NATS cluster,
// and shows that place to plain NATS clients through a gateway (issue 19;
// the nats module's package doc). In one process it starts:
//
//   - a cluster of three embedded NATS servers, n0, n1 and n2, on loopback
//     ports chosen by the system, with routes between them;
//   - four sion switches of the place "usgs" (the USGS hazard ontology) in
//     a tree — sw1 and sw2 link to sw0, sw3 links to sw1 — each with a NATS
//     connection of its own, sw i to server n(i mod 3) first: every shared
//     link is a nats.Transport Conn, and each crosses a route of the cluster;
//   - quakewatch's six subscribers (examples/internal/usgs) on sw1, sw2
//     and sw3;
//   - a nats.Gateway (S1's S/x-GW) on sw2, which publishes the place's
//     events as binary-mode CloudEvents on subjects named by their type
//     path, "sion.usgs.hazard.natural.seismic.earthquake";
//   - a plain nats.go client, not sion, connected to n0, that subscribes
//     to "sion.usgs.hazard.natural.seismic.>" and checks each message's
//     CloudEvents headers.
//
// Then it publishes the USGS week of 2023-04-07 (2,389 events; see
// ../internal/usgs/DATA.md) at sw3, waits until every subscriber has its
// events, prints the counts and closes everything. Run it from this
// directory, a Go module of its own so that the NATS server and client
// stay out of sion's go.mod (its import path, below examples/, still lets
// it use examples/internal/usgs):
//
//	cd examples/nats && go run .
//
// It prints "published N events", one line per subscriber ("subscriber
// NAME received N events": quakewatch's counts, DATA.md's ground truth),
// and "nats subscriber SUBJECT received N events". If an event is
// dropped or refused on the way, or a goroutine outlives the Close calls,
// it says so and exits with status 1.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/examples/internal/usgs"
	"github.com/sion-go/sion/nats"
	"github.com/sion-go/sion/ontology"
)

// seismic is the plain NATS client's subject: every event of type seismic
// or below (earthquake, ice quake), by the gateway's subject scheme.
const seismic = "sion.usgs.hazard.natural.seismic.>"

func main() {
	log.SetFlags(0)
	err := run(context.Background())
	// run closed everything it started: no goroutine is left but main's.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if left := waitFor(ctx, "every goroutine to end", func() bool { return runtime.NumGoroutine() == 1 }); left != nil {
		err = errors.Join(err, fmt.Errorf("%w: %d goroutines left", left, runtime.NumGoroutine()))
	}
	if err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	// The NATS cluster. Deferred calls close everything in reverse order:
	// the gateway, the switches, the NATS connections, the servers.
	servers, err := startCluster(ctx, 3)
	for _, s := range servers {
		defer func() { s.Shutdown(); s.WaitForShutdown() }()
	}
	if err != nil {
		return err
	}

	// The place: each switch listens on a nats.Transport of its own under
	// its name ("sw0", "sw1", …) and requests its shared link to its
	// parent by name, over NATS.
	ont, err := ontology.LoadJSON(bytes.NewReader(usgs.Hazards), "hazards.json")
	if err != nil {
		return err
	}
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "usgs", Ontology: ont})
	if err != nil {
		return err
	}
	parents := []int{-1, 0, 0, 1}
	switches := make([]*sion.Switch, len(parents))
	conns := make([]*natsgo.Conn, len(parents))
	for i, p := range parents {
		nc, err := connect(servers[i%3], servers...)
		if err != nil {
			return err
		}
		defer nc.Close()
		tr, err := nats.New(nats.Config{Conn: nc})
		if err != nil {
			return err
		}
		sw, err := sion.NewSwitch(sion.SwitchConfig{Name: fmt.Sprintf("sw%d", i), Place: place})
		if err != nil {
			return err
		}
		l, err := tr.Listen(sw.Name())
		if err != nil {
			sw.Close()
			return err
		}
		served := make(chan error, 1)
		go func() { served <- sw.Serve(context.Background(), l) }()
		defer func() { sw.Close(); <-served }()
		if p >= 0 {
			if _, err := sw.Link(ctx, tr, switches[p].Name(), sion.LinkConfig{}); err != nil { // returns once the link is up
				return fmt.Errorf("link %s to %s: %w", sw.Name(), switches[p].Name(), err)
			}
		}
		switches[i], conns[i] = sw, nc
	}

	// Quakewatch's subscribers: subscriber k on switch 1 + k mod 3.
	// Subscribe returns once the filter is active at every switch (S2).
	subs := make([]*sion.Subscription, len(usgs.Subscribers))
	for k, s := range usgs.Subscribers {
		sess, err := switches[1+k%3].Open(ctx, sion.SessionConfig{Name: s.Name, SpoolSize: 1 << 14})
		if err != nil {
			return err
		}
		opt := sion.WithQueue(1 << 14)
		if s.LookIn {
			opt = sion.WithLookIn()
		}
		if subs[k], err = sess.Subscribe(ctx, s.Filter, opt); err != nil {
			return fmt.Errorf("subscriber %s: %w", s.Name, err)
		}
	}

	// The S/x-GW on sw2, on sw2's NATS connection, out only (sion → NATS):
	// the place's time and place attributes become ce-time and ce-subject.
	gw, err := nats.NewGateway(ctx, switches[2], nats.GatewayConfig{Conn: conns[2], Out: &sion.DirectionConfig{},
		CloudEvents: cloudevents.Config{TimeAttribute: "time", SubjectAttribute: "place"}})
	if err != nil {
		return err
	}
	defer gw.Close()

	// The plain NATS client on n0. Its subscription must reach n2, where
	// the gateway publishes, over the cluster's route before the events do.
	plain, err := connect(servers[0])
	if err != nil {
		return err
	}
	defer plain.Close()
	var received, unexpected atomic.Int64
	var first atomic.Pointer[natsgo.Msg]
	sub, err := plain.Subscribe(seismic, func(m *natsgo.Msg) {
		first.CompareAndSwap(nil, m)
		if t := m.Header.Get("ce-type"); m.Header.Get("ce-specversion") == "1.0" && (t == "earthquake" || t == "ice quake") {
			received.Add(1)
		} else {
			unexpected.Add(1)
		}
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	if err := plain.Flush(); err != nil {
		return err
	}
	if err := waitFor(ctx, "the plain subscription on n2", func() bool {
		return servers[2].GlobalAccount().SubscriptionInterest("sion.usgs.hazard.natural.seismic.earthquake")
	}); err != nil {
		return err
	}

	// Publish the week at sw3, and count the seismic events among it: the
	// plain client must receive each of them once.
	reader, err := place.NewJSONReader(usgs.Fields)
	if err != nil {
		return err
	}
	events, err := reader.ReadList(usgs.Week, "features")
	if err != nil {
		return fmt.Errorf("the USGS week: %w", err)
	}
	pub, err := switches[3].Open(ctx, sion.SessionConfig{Name: "usgs-feed"})
	if err != nil {
		return err
	}
	seismicType, _ := ont.Lookup("seismic")
	var problems []error
	published, wantSeismic := 0, int64(0)
	for _, ev := range events {
		if err := pub.Publish(ctx, ev); err != nil {
			problems = append(problems, fmt.Errorf("event refused: %w", err))
			continue
		}
		published++
		if t, ok := ont.Lookup(ev.Type); ok && ont.IsA(t.ID, seismicType.ID) {
			wantSeismic++
		}
	}
	fmt.Printf("published %d events\n", published)

	// Flush returns once every event sw3 forwarded has reached the
	// subscriptions of every switch, and of the gateway's side. The
	// gateway then publishes on NATS; wait for the plain client's count.
	if err := switches[3].Flush(ctx); err != nil {
		return err
	}
	for k, s := range usgs.Subscribers {
		st := subs[k].Stats()
		if st.Dropped > 0 {
			problems = append(problems, fmt.Errorf("subscriber %s dropped %d events", s.Name, st.Dropped))
		}
		fmt.Printf("subscriber %s received %d events\n", s.Name, st.Delivered)
	}
	if err := waitFor(ctx, "the gateway and the plain NATS client", func() bool {
		st := gw.Stats()
		return received.Load() >= wantSeismic && st.OutEvents+st.OutFailed+st.OutDropped >= uint64(published)
	}); err != nil {
		problems = append(problems, err)
	}
	if m := first.Load(); m != nil {
		h := m.Header
		fmt.Printf("first message: %s ce-type %q ce-time %s ce-subject %q ce-mag %s, %d bytes of %s\n", m.Subject,
			h.Get("ce-type"), h.Get("ce-time"), h.Get("ce-subject"), h.Get("ce-mag"), len(m.Data), h.Get("content-type"))
	}
	fmt.Printf("nats subscriber %s received %d events\n", seismic, received.Load())
	if st := gw.Stats(); st.OutEvents != uint64(published) {
		problems = append(problems, fmt.Errorf("the gateway sent %d of %d events: %d dropped, %d failed", st.OutEvents, published, st.OutDropped, st.OutFailed))
	}
	dropped, _ := sub.Dropped()
	if n := received.Load(); n != wantSeismic || dropped > 0 || unexpected.Load() > 0 {
		problems = append(problems, fmt.Errorf("nats subscriber received %d of %d seismic events (%d dropped) and %d other messages",
			n, wantSeismic, dropped, unexpected.Load()))
	}
	return errors.Join(problems...)
}

// startCluster starts n NATS servers on 127.0.0.1 ports the system picks,
// routed to the first, and waits until each has a route to every other.
// It returns the servers started, also on error.
func startCluster(ctx context.Context, n int) ([]*server.Server, error) {
	var servers []*server.Server
	for i := range n {
		opts := &server.Options{ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "sion-example", Host: "127.0.0.1", Port: server.RANDOM_PORT}}
		if i > 0 {
			opts.Routes = server.RoutesFromStr("nats://" + servers[0].ClusterAddr().String())
		}
		s, err := server.NewServer(opts)
		if err != nil {
			return servers, err
		}
		go s.Start()
		servers = append(servers, s)
		if !s.ReadyForConnections(10 * time.Second) {
			return servers, fmt.Errorf("NATS server n%d not ready", i)
		}
	}
	return servers, waitFor(ctx, "the cluster's routes", func() bool {
		for _, s := range servers {
			if s.NumRemotes() != n-1 {
				return false
			}
		}
		return true
	})
}

// connect connects to first, and to the others on reconnection.
func connect(first *server.Server, others ...*server.Server) (*natsgo.Conn, error) {
	urls := first.ClientURL()
	for _, s := range others {
		if s != first {
			urls += "," + s.ClientURL()
		}
	}
	return natsgo.Connect(urls, natsgo.DontRandomize(), natsgo.MaxReconnects(-1))
}

// waitFor polls cond until it holds, or returns an error naming what it
// waited for when ctx ends first.
func waitFor(ctx context.Context, what string, cond func() bool) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Command quakewatch runs one sion switch on a real USGS earthquake feed:
// it loads a small hazard ontology, opens a session per subscriber, turns
// every feature of the feed into an event (type from properties.type;
// attributes mag, place, depth, tsunami, alert and time; the feature's JSON
// as payload), publishes them all, and reports what each subscriber
// received.
//
//	go run ./examples/quakewatch [-data FILE.geojson]
//
// The default feed is the week of 2023-04-07 bundled with the examples (USGS,
// public domain; see ../internal/usgs/DATA.md). It ends with one line per subscriber:
// "subscriber NAME received N events".
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sync/atomic"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/examples/internal/usgs"
	"github.com/sion-go/sion/ontology"
)

func main() {
	data := flag.String("data", "", "USGS GeoJSON feed to read (default: the bundled week of 2023-04-07)")
	flag.Parse()
	log.SetFlags(0)
	feed := usgs.Week
	if *data != "" {
		b, err := os.ReadFile(*data)
		if err != nil {
			log.Fatal(err)
		}
		feed = b
	}
	if err := run(context.Background(), feed); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, feed []byte) error {
	ont, err := ontology.LoadJSON(bytes.NewReader(usgs.Hazards), "hazards.json")
	if err != nil {
		return err
	}
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "usgs", Ontology: ont})
	if err != nil {
		return err
	}
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "quakewatch", Place: place})
	if err != nil {
		return err
	}
	defer sw.Close()

	// The subscribers: a handler counts push deliveries; the look-in
	// subscriber's events wait in its session's spool until it pulls.
	counts := make([]atomic.Int64, len(usgs.Subscribers))
	sessions := make([]*sion.Session, len(usgs.Subscribers))
	subs := make([]*sion.Subscription, len(usgs.Subscribers))
	for i, s := range usgs.Subscribers {
		sess, err := sw.Open(ctx, sion.SessionConfig{Name: s.Name, SpoolSize: 1 << 14})
		if err != nil {
			return err
		}
		opts := []sion.SubscribeOption{sion.WithLookIn()}
		if !s.LookIn {
			opts = []sion.SubscribeOption{sion.WithQueue(1 << 14), sion.WithHandler(func(sion.Delivery) { counts[i].Add(1) })}
		}
		sub, err := sess.Subscribe(ctx, s.Filter, opts...)
		if err != nil {
			return fmt.Errorf("subscriber %s: %w", s.Name, err)
		}
		sessions[i], subs[i] = sess, sub
	}

	// The feed: one event per GeoJSON feature, read with paths declared once.
	reader, err := place.NewJSONReader(usgs.Fields)
	if err != nil {
		return err
	}
	events, err := reader.ReadList(feed, "features")
	if err != nil && len(events) == 0 {
		return err
	}
	if err != nil {
		log.Printf("some features were skipped: %v", err)
	}
	pub, err := sw.Open(ctx, sion.SessionConfig{Name: "usgs-feed"})
	if err != nil {
		return err
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

	// Let the handlers finish, pull the look-in spool, and report.
	for i, s := range usgs.Subscribers {
		if s.LookIn && sessions[i].Stats().Spooled > 0 {
			got, err := sessions[i].Pull(ctx, 0)
			if err != nil {
				return err
			}
			counts[i].Add(int64(len(got)))
		}
		if err := sessions[i].Drain(ctx); err != nil {
			return err
		}
	}
	fmt.Printf("published %d events\n", len(events))
	for i, s := range usgs.Subscribers {
		if st := subs[i].Stats(); st.Dropped > 0 {
			fmt.Printf("subscriber %s dropped %d events\n", s.Name, st.Dropped)
		}
		fmt.Printf("subscriber %s received %d events\n", s.Name, counts[i].Load())
	}
	return nil
}

// Command alerts runs one sion switch on a real National Weather Service
// alert feed (Atom with CAP 1.1 fields, XML): it loads a small alert
// ontology, reads one event per Atom entry with XPath (type from cap:event;
// attributes severity, urgency, certainty, …; the entry's XML as payload),
// publishes them, and reports what each subscriber received. Several
// filters read the XML payload with XPath, with their own namespace
// bindings.
//
//	go run ./examples/alerts [-data FILE.xml]
//
// The default feed is the one of 2018-08-15 bundled with the example (NWS,
// public domain; see DATA.md). It ends with one line per subscriber:
// "subscriber NAME received N events".
package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sync/atomic"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
)

//go:embed alerts.json
var alertTypes []byte

//go:embed nws_cap_atom_2018-08-15.xml
var feed2018 []byte

// The filters' namespace bindings: a document may use any prefixes (here
// the default namespace is Atom); names match by namespace URI.
const ns = `xmlns:atom = "http://www.w3.org/2005/Atom"; xmlns:cap = "urn:oasis:names:tc:emergency:cap:1.1"`

var subscribers = []struct {
	name, filter string
	lookIn       bool
}{
	{name: "flash-flood", filter: `{type ⊑ alert; ` + ns + `; xpath(/atom:entry/cap:event = 'Flash Flood Warning')}`},
	{name: "flood-related", filter: `{type ⊑ flood}`},
	{name: "severe-immediate", filter: `{type ⊑ alert; ` + ns + `; xpath(/atom:entry[cap:severity = 'Severe' and cap:urgency = 'Immediate'])}`},
	{name: "fire-northwest", filter: `{type ⊑ fire; ` + ns + `; xpath(/atom:entry/cap:geocode/atom:value[starts-with(., 'OR') or starts-with(., 'WA')])}`},
	{name: "hail", filter: `{type ⊑ weather; ` + ns + `; xpath(contains(translate(/atom:entry/atom:summary, 'HAIL', 'hail'), 'hail'))}`, lookIn: true},
	{name: "weighted", filter: `{type ⊑ alert; match score >= 2; severity == "Severe"; urgency == "Immediate"; certainty in {"Observed", "Likely"}}`},
}

func main() {
	data := flag.String("data", "", "NWS CAP Atom feed to read (default: the bundled feed of 2018-08-15)")
	flag.Parse()
	log.SetFlags(0)
	feed := feed2018
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
	ont, err := ontology.LoadJSON(bytes.NewReader(alertTypes), "alerts.json")
	if err != nil {
		return err
	}
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "nws", Ontology: ont})
	if err != nil {
		return err
	}
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "alerts", Place: place})
	if err != nil {
		return err
	}
	defer sw.Close()

	counts := make([]atomic.Int64, len(subscribers))
	sessions := make([]*sion.Session, len(subscribers))
	subs := make([]*sion.Subscription, len(subscribers))
	for i, s := range subscribers {
		sess, err := sw.Open(ctx, sion.SessionConfig{Name: s.name, SpoolSize: 1 << 12})
		if err != nil {
			return err
		}
		opts := []sion.SubscribeOption{sion.WithLookIn()}
		if !s.lookIn {
			opts = []sion.SubscribeOption{sion.WithQueue(1 << 12), sion.WithHandler(func(sion.Delivery) { counts[i].Add(1) })}
		}
		sub, err := sess.Subscribe(ctx, s.filter, opts...)
		if err != nil {
			return fmt.Errorf("subscriber %s: %w", s.name, err)
		}
		sessions[i], subs[i] = sess, sub
	}

	// One event per Atom entry, read with XPath declared once.
	reader, err := place.NewXMLReader(sion.XMLFields{
		Namespaces: map[string]string{"atom": "http://www.w3.org/2005/Atom", "cap": "urn:oasis:names:tc:emergency:cap:1.1"},
		TypePath:   "cap:event",
		Attrs: []sion.AttrPath{
			{Name: "severity", Path: "cap:severity"},
			{Name: "urgency", Path: "cap:urgency"},
			{Name: "certainty", Path: "cap:certainty"},
			{Name: "status", Path: "cap:status"},
			{Name: "msgType", Path: "cap:msgType"},
			{Name: "category", Path: "cap:category"},
			{Name: "area", Path: "cap:areaDesc"},
			{Name: "effective", Path: "cap:effective"},
			{Name: "expires", Path: "cap:expires"},
		},
	})
	if err != nil {
		return err
	}
	events, err := reader.ReadList(feed, "/atom:feed/atom:entry")
	if err != nil && len(events) == 0 {
		return err
	}
	if err != nil {
		log.Printf("some entries were skipped: %v", err)
	}
	pub, err := sw.Open(ctx, sion.SessionConfig{Name: "nws-feed"})
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

	for i, s := range subscribers {
		if s.lookIn && sessions[i].Stats().Spooled > 0 {
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
	for i, s := range subscribers {
		if st := subs[i].Stats(); st.Dropped > 0 {
			fmt.Printf("subscriber %s dropped %d events\n", s.name, st.Dropped)
		}
		fmt.Printf("subscriber %s received %d events\n", s.name, counts[i].Load())
	}
	return nil
}

// Command cloudevents carries a real USGS earthquake feed between two sion
// switches as CloudEvents over HTTP, and subscribes at the far end with a
// CESQL expression and with the CloudEvents Subscriptions API's filter
// dialects (package github.com/sion-go/sion/cloudevents).
//
//	cd examples/cloudevents && go run . [-structured]
//
// The switch "feed" publishes every feature of the bundled USGS week
// (2,389 events; see ../internal/usgs/DATA.md). A cloudevents.Sender
// delivers a subscription of every hazard to an HTTP endpoint in binary
// mode (-structured: structured JSON), where a cloudevents.Handler
// publishes each CloudEvent into the switch "inbox". There the events are
// compared with the originals by ID, and two subscribers count what their
// filters receive. It ends with the lines CI checks:
//
//	sent N events as CloudEvents
//	inbox received N events, N equal to the original
//	subscriber NAME received N events
//
// It lives in a module of its own because it imports the cloudevents
// module, whose dependencies stay out of sion's core go.mod.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/cloudevents"
	"github.com/sion-go/sion/examples/internal/usgs"
	"github.com/sion-go/sion/ontology"
)

// typePrefix starts every CloudEvents type: "gov.usgs.quarry blast".
const typePrefix = "gov.usgs."

// subscribers are the inbox's subscribers: a CESQL expression, and a
// Subscriptions API filter (the dialects any, exact and suffix). DATA.md
// gives the ground truth: 6 events with tsunami == 1, 20 explosions, 16
// quarry blasts.
var subscribers = []struct {
	name    string
	filters any // a Subscriptions API "filters" value
}{
	{"cesql-tsunami-or-explosion", []any{map[string]any{"sql": "tsunami = 1 OR type LIKE '%explosion'"}}},
	{"dialect-blasts", json.RawMessage(`[{"any": [{"suffix": {"type": "explosion"}}, {"exact": {"type": "gov.usgs.quarry blast"}}]}]`)},
}

func main() {
	structured := flag.Bool("structured", false, "send in structured mode (JSON) instead of binary mode")
	flag.Parse()
	log.SetFlags(0)
	if err := run(context.Background(), *structured); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, structured bool) error {
	ont, err := ontology.LoadJSON(bytes.NewReader(usgs.Hazards), "hazards.json")
	if err != nil {
		return err
	}
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "usgs", Ontology: ont})
	if err != nil {
		return err
	}
	codec, err := cloudevents.NewCodec(cloudevents.Config{Ontology: ont, TypePrefix: typePrefix, TimeAttribute: "time"})
	if err != nil {
		return err
	}
	feed, err := sion.NewSwitch(sion.SwitchConfig{Name: "feed", Place: place})
	if err != nil {
		return err
	}
	defer feed.Close()
	inbox, err := sion.NewSwitch(sion.SwitchConfig{Name: "inbox", Place: place})
	if err != nil {
		return err
	}
	defer inbox.Close()

	// The inbox: an HTTP endpoint that publishes each CloudEvent POSTed to
	// it, and the subscribers.
	in, err := inbox.Open(ctx, sion.SessionConfig{Name: "http"})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: &cloudevents.Handler{Codec: codec, Session: in}, ReadHeaderTimeout: 10 * time.Second}
	var serving sync.WaitGroup
	serving.Go(func() { srv.Serve(ln) })
	defer func() { srv.Close(); serving.Wait() }()

	readers, err := inbox.Open(ctx, sion.SessionConfig{Name: "readers"})
	if err != nil {
		return err
	}
	counts := make([]atomic.Int64, len(subscribers))
	subs := make([]*sion.Subscription, len(subscribers))
	for i, s := range subscribers {
		fs, err := codec.CompileFilters(s.filters)
		if err != nil {
			return fmt.Errorf("subscriber %s: %w", s.name, err)
		}
		// One subscription however many filters the expression compiles
		// to: an event matching several arrives once.
		subs[i], err = readers.SubscribeFilters(ctx, fs, sion.WithQueue(1<<12), sion.WithHandler(func(sion.Delivery) { counts[i].Add(1) }))
		if err != nil {
			return fmt.Errorf("subscriber %s: %w", s.name, err)
		}
	}
	// Every event the inbox receives, kept to compare with the original.
	var mu sync.Mutex
	var arrived []*sion.Event
	_, err = readers.Subscribe(ctx, `{type ⊑ hazard}`, sion.WithQueue(1<<12), sion.WithHandler(func(d sion.Delivery) {
		mu.Lock()
		arrived = append(arrived, d.Event)
		mu.Unlock()
	}))
	if err != nil {
		return err
	}

	// The feed: a Sender delivers a subscription of every hazard to the
	// inbox's endpoint, then every feature is published.
	sender, err := cloudevents.NewSender(cloudevents.SenderConfig{Codec: codec, Target: "http://" + ln.Addr().String() + "/", Structured: structured})
	if err != nil {
		return err
	}
	out, err := feed.Open(ctx, sion.SessionConfig{Name: "sender"})
	if err != nil {
		return err
	}
	toInbox, err := out.Subscribe(ctx, `{type ⊑ hazard}`, sion.WithQueue(1<<12), sion.WithOverflow(sion.Block))
	if err != nil {
		return err
	}
	// The originals as the feed's switch published them (with their IDs).
	originals := map[sion.EventID]*sion.Event{}
	_, err = out.Subscribe(ctx, `{type ⊑ hazard}`, sion.WithQueue(1<<12), sion.WithHandler(func(d sion.Delivery) {
		mu.Lock()
		originals[d.Event.ID] = d.Event
		mu.Unlock()
	}))
	if err != nil {
		return err
	}
	sent := make(chan error, 1)
	go func() { sent <- sender.Run(ctx, toInbox) }()

	reader, err := place.NewJSONReader(usgs.Fields)
	if err != nil {
		return err
	}
	events, err := reader.ReadList(usgs.Week, "features")
	if err != nil {
		return err
	}
	pub, err := feed.Open(ctx, sion.SessionConfig{Name: "usgs-feed"})
	if err != nil {
		return err
	}
	for _, ev := range events {
		if err := pub.Publish(ctx, ev); err != nil {
			return err
		}
	}

	// The sender's queue empties, then its subscription ends with its
	// session and Run returns; each event it sent was published in the
	// inbox before its POST was answered.
	if err := out.Drain(ctx); err != nil {
		return err
	}
	if err := <-sent; err != nil && !errors.Is(err, sion.ErrClosed) {
		return err
	}
	if err := readers.Drain(ctx); err != nil {
		return err
	}
	equal := 0
	for _, ev := range arrived {
		if orig := originals[ev.ID]; orig != nil && sameEvent(orig, ev) {
			equal++
		}
	}
	st := sender.Stats()
	fmt.Printf("published %d events\n", len(events))
	if st.Dropped > 0 {
		fmt.Printf("sender dropped %d events\n", st.Dropped)
	}
	fmt.Printf("sent %d events as CloudEvents\n", st.Sent)
	fmt.Printf("inbox received %d events, %d equal to the original\n", len(arrived), equal)
	for i, s := range subscribers {
		if d := subs[i].Stats().Dropped; d > 0 {
			fmt.Printf("subscriber %s dropped %d events\n", s.name, d)
		}
		fmt.Printf("subscriber %s received %d events\n", s.name, counts[i].Load())
	}
	return nil
}

// sameEvent reports whether b, an event as the inbox received it, carries
// what a, the original, did: type, content type, payload bytes, and each
// attribute with its kind and exact value (in any order).
func sameEvent(a, b *sion.Event) bool {
	if a.Type != b.Type || a.ContentType != b.ContentType || !bytes.Equal(a.Data, b.Data) || len(a.Attrs) != len(b.Attrs) {
		return false
	}
	for _, at := range a.Attrs {
		v, ok := b.Value(at.Name)
		if !ok || v.Kind() != at.Value.Kind() || v.Key() != at.Value.Key() {
			return false
		}
	}
	return true
}

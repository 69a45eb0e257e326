package metrics_test

import (
	"context"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/metrics"
	"github.com/sion-go/sion/ontology"
)

// A switch's counters as Prometheus scrapes them.
func ExampleNewCollector() {
	o, _ := ontology.New([]ontology.TypeDef{{Name: "Alarm"}})
	place, _ := sion.NewEventPlace(sion.PlaceConfig{Name: "plant", Ontology: o})
	sw, _ := sion.NewSwitch(sion.SwitchConfig{Name: "sw1", Place: place})
	defer sw.Close()
	s, _ := sw.Open(context.Background(), sion.SessionConfig{Name: "panel"})
	sub, _ := s.Subscribe(context.Background(), "{type ⊑ Alarm}")
	defer sub.Cancel()
	for range 3 {
		_ = s.Publish(context.Background(), &sion.Event{Type: "Alarm"})
	}

	c, err := metrics.NewCollector(sw) // or metrics.Handler(sw) for /metrics
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	text, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, "sion_events_published_total", "sion_events_delivered_total")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Print(string(text))
	// Output:
	// # HELP sion_events_delivered_total Events handed over to subscriptions, one per subscription and event (Stats.Deliveries).
	// # TYPE sion_events_delivered_total counter
	// sion_events_delivered_total{place="plant",switch="sw1"} 3
	// # HELP sion_events_published_total Events the switch's sessions (local and remote) published and the place admitted (Stats.Published).
	// # TYPE sion_events_published_total counter
	// sion_events_published_total{place="plant",switch="sw1"} 3
}

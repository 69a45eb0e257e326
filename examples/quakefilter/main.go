// Command quakefilter runs sion's matcher alone on a real USGS earthquake
// feed: it loads a small hazard ontology, turns every feature of the feed
// into an event (type from properties.type, typed attributes, the feature's
// JSON as payload), and counts what each filter matches.
//
//	go run ./examples/quakefilter [-data FILE.geojson]
//
// The default feed is testdata/all_week_2023-04-07.geojson (USGS, public
// domain; see testdata/README.md). It prints one line per filter:
// "filter NAME matched N events".
package main

import (
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"runtime"

	"github.com/tidwall/gjson"

	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/ontology"
)

var filters = []struct{ name, src string }{
	{"big", `{type ⊑ hazard; mag >= 4.5}`},
	{"blasts", `{type ⊑ anthropogenic}`},
	{"alaska", `{type ⊑ hazard; place contains "Alaska"; mag >= 2.5}`},
	{"tsunami", `{type ⊑ hazard; tsunami == 1}`},
	{"deep", `{type ⊑ seismic; depth > 300}`},
	{"felt-widely", `{type ⊑ seismic; match score >= 3; mag >= 5 weight 2; tsunami == 1 weight 2; json(properties.felt) >= 10}`},
}

func main() {
	data := flag.String("data", defaultPath("testdata/all_week_2023-04-07.geojson"), "USGS GeoJSON feed to read")
	flag.Parse()
	log.SetFlags(0)

	f, err := os.Open(defaultPath("examples/quakefilter/hazards.json"))
	if err != nil {
		log.Fatal(err)
	}
	ont, err := ontology.LoadJSON(f, "hazards.json")
	f.Close()
	if err != nil {
		log.Fatal(err)
	}
	raw, err := os.ReadFile(*data)
	if err != nil {
		log.Fatal(err)
	}
	if !gjson.ValidBytes(raw) {
		log.Fatalf("%s: not valid JSON", *data)
	}

	ix := filter.NewIndex(ont)
	for i, fl := range filters {
		c, err := filter.Compile(fl.src)
		if err != nil {
			log.Fatalf("filter %s: %v", fl.name, err)
		}
		if err := ix.Add(uint64(i), c); err != nil {
			log.Fatalf("filter %s: %v", fl.name, err)
		}
	}

	counts := make([]int, len(filters))
	skipped := 0
	for _, feat := range gjson.GetBytes(raw, "features").Array() {
		ev, err := event(ont, feat)
		if err != nil {
			skipped++
			log.Printf("skipping feature %s: %v", feat.Get("id").String(), err)
			continue
		}
		ix.Match(ev, func(id uint64, _ float64) { counts[id]++ })
	}
	for i, fl := range filters {
		fmt.Printf("filter %s matched %d events\n", fl.name, counts[i])
	}
	if skipped > 0 {
		fmt.Printf("%d features skipped\n", skipped)
	}
}

// event turns one GeoJSON feature into an event of the hazard ontology.
func event(ont *ontology.Ontology, feat gjson.Result) (*filter.BasicEvent, error) {
	p := feat.Get("properties")
	t, ok := ont.Lookup(p.Get("type").String())
	if !ok {
		return nil, fmt.Errorf("unknown event type %q", p.Get("type").String())
	}
	ev := &filter.BasicEvent{Type: t.Name, ContentType: "application/json", Data: []byte(feat.Raw)}
	add := func(name string, v ontology.Value) { ev.Attrs = append(ev.Attrs, ontology.Attr{Name: name, Value: v}) }
	if m := p.Get("mag"); m.Type == gjson.Number && !math.IsNaN(m.Float()) {
		add("mag", ontology.Float(m.Float()))
	}
	if s := p.Get("place"); s.Type == gjson.String {
		add("place", ontology.String(s.Str))
	}
	if d := feat.Get("geometry.coordinates.2"); d.Type == gjson.Number {
		add("depth", ontology.Float(d.Float()))
	}
	if ts := p.Get("tsunami"); ts.Type == gjson.Number {
		add("tsunami", ontology.Int(ts.Int()))
	}
	if a := p.Get("alert"); a.Type == gjson.String {
		add("alert", ontology.String(a.Str))
	}
	if tm := p.Get("time"); tm.Type == gjson.Number {
		add("time", ontology.TimeNanos(tm.Int()*1e6))
	}
	return ev, nil
}

// defaultPath finds a file of the repository whether the program runs from
// the repository root (go run ./examples/quakefilter) or elsewhere inside it.
func defaultPath(rel string) string {
	dir, _ := os.Getwd()
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			_, file, _, _ := runtime.Caller(0)
			return filepath.Join(filepath.Dir(file), "..", "..", rel)
		}
		dir = parent
	}
}

package bench

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/mem"
)

// Gateways (S1 SI-GW): what converting an event costs, and what a gateway
// hop costs against a plain shared link.
//
// Data: the real Beijing readings of examples/internal/beijing (17,568
// hourly readings of 12 stations, CC BY 4.0, see its DATA.md), its two
// ontologies ("beijing", "monitoring") and its conversion table. That
// package is internal to the examples, which this module may not import,
// so gwReadings parses its CSV files from ../examples/internal/beijing and
// gwSourceOntology, gwTargetOntology and gwMappingSpec copy its
// SourceOntology, TargetOntology and MappingSpec (keep them in step);
// TestGatewayData checks the parse against the package's ground truth.
//
//   - BenchmarkConversion: one reading through ontology.Mapping.Apply
//     (station → site by value table, renames, two °C → °F, two drops)
//     against copying its attributes unchanged, cycling through the
//     readings. x-copy is the ratio mapping/copy.
//   - BenchmarkGatewayHop: publish → deliver over transport/mem. gateway:
//     a switch of place "beijing" Federate(Export, the Mapping) to a
//     switch of place "monitoring", whose subscriber {type ⊑ Observation}
//     counts in its handler. link: two switches of place "beijing" joined
//     by Switch.Link, the subscriber {type ⊑ Reading} on the other one.
//     An op publishes one reading, at most gwWindow (2,048) ahead of the
//     subscriber's count (a burst of b.N overflows the link's outgoing
//     queue of 4,096 frames, which drops); after b.N of them the
//     publisher's switch Flushes and the benchmark waits until the subscriber has
//     counted them all, so ns/op is per event at full throughput. Nothing
//     may drop (subscriber queue, link or gateway queue): the benchmark
//     fails otherwise. x-link is the ratio gateway/link.

const gwDataDir = "../examples/internal/beijing"

// gwReadings returns the events of the readings (type AirQualityReading,
// attributes as beijing.Event builds them), sorted by time then station.
var gwReadings = sync.OnceValues(func() ([][]ontology.Attr, error) {
	names, err := filepath.Glob(filepath.Join(gwDataDir, "PRSA_Data_*.csv"))
	if err != nil {
		return nil, err
	}
	if len(names) != 12 {
		return nil, fmt.Errorf("%s: %d station files, want 12", gwDataDir, len(names))
	}
	type row struct {
		t       time.Time
		station string
		attrs   []ontology.Attr
	}
	var rows []row
	zone := time.FixedZone("CST", 8*60*60)
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, rec := range recs[1:] {
			var ints [4]int
			for i := range ints {
				if ints[i], err = strconv.Atoi(rec[1+i]); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
			}
			t := time.Date(ints[0], time.Month(ints[1]), ints[2], ints[3], 0, 0, 0, zone)
			attrs := make([]ontology.Attr, 0, 14)
			attrs = append(attrs,
				ontology.Attr{Name: "station", Value: ontology.String(rec[17])},
				ontology.Attr{Name: "time", Value: ontology.Time(t)})
			num := func(name, s string) error {
				if s == "NA" {
					return nil
				}
				v, err := strconv.ParseFloat(s, 64)
				if err == nil {
					attrs = append(attrs, ontology.Attr{Name: name, Value: ontology.Float(v)})
				}
				return err
			}
			for i, n := range []string{"pm25", "pm10", "so2", "no2", "co", "o3", "temp", "pres", "dewp", "rain"} {
				if err := num(n, rec[5+i]); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
			}
			if rec[15] != "NA" {
				attrs = append(attrs, ontology.Attr{Name: "wd", Value: ontology.String(rec[15])})
			}
			if err := num("wspm", rec[16]); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			rows = append(rows, row{t, rec[17], attrs})
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		if c := a.t.Compare(b.t); c != 0 {
			return c
		}
		return strings.Compare(a.station, b.station)
	})
	out := make([][]ontology.Attr, len(rows))
	for i, r := range rows {
		out[i] = r.attrs
	}
	return out, nil
})

// gwSourceOntology is beijing.SourceOntology.
var gwSourceOntology = sync.OnceValues(func() (*ontology.Ontology, error) {
	f := func(name, unit, synonym string) ontology.Attribute {
		return ontology.Attribute{Name: name, Kind: ontology.KindFloat, Unit: unit, Synonyms: []string{synonym}}
	}
	return ontology.New([]ontology.TypeDef{
		{Name: "Reading", Attributes: []ontology.Attribute{
			{Name: "station", Kind: ontology.KindString},
			{Name: "time", Kind: ontology.KindTime},
		}},
		{Name: "AirQualityReading", Parents: []string{"Reading"}, Attributes: []ontology.Attribute{
			f("pm25", "ug/m3", "PM2.5"), f("pm10", "ug/m3", "PM10"), f("so2", "ug/m3", "SO2"),
			f("no2", "ug/m3", "NO2"), f("co", "ug/m3", "CO"), f("o3", "ug/m3", "O3"),
			f("temp", "degC", "TEMP"), f("pres", "hPa", "PRES"), f("dewp", "degC", "DEWP"),
			f("rain", "mm", "RAIN"), {Name: "wd", Kind: ontology.KindString}, f("wspm", "m/s", "WSPM"),
		}},
	})
})

// gwTargetOntology is beijing.TargetOntology.
var gwTargetOntology = sync.OnceValues(func() (*ontology.Ontology, error) {
	f := func(name, unit string) ontology.Attribute {
		return ontology.Attribute{Name: name, Kind: ontology.KindFloat, Unit: unit}
	}
	return ontology.New([]ontology.TypeDef{
		{Name: "Observation", Attributes: []ontology.Attribute{
			{Name: "site", Kind: ontology.KindString},
			{Name: "observed_at", Kind: ontology.KindTime},
		}},
		{Name: "AirQualityObservation", Parents: []string{"Observation"}, Attributes: []ontology.Attribute{
			f("pm2_5", "ug/m3"), f("pm10", "ug/m3"), f("so2", "ug/m3"), f("no2", "ug/m3"),
			f("co", "ug/m3"), f("o3", "ug/m3"), f("air_temp_f", "degF"), f("dew_point_f", "degF"),
			f("pressure_mb", "mbar"), f("wind_speed", "m/s"),
		}},
	})
})

// gwMappingSpec is beijing.MappingSpec.
func gwMappingSpec() ontology.MappingSpec {
	sites := map[string]string{
		"Aotizhongxin": "Olympic Sports Center, Chaoyang", "Changping": "Changping Town, Changping",
		"Dingling": "Dingling Tomb, Changping", "Dongsi": "Dongsi, Dongcheng",
		"Guanyuan": "Guanyuan, Xicheng", "Gucheng": "Gucheng, Shijingshan",
		"Huairou": "Huairou Town, Huairou", "Nongzhanguan": "Agricultural Exhibition Center, Chaoyang",
		"Shunyi": "Shunyi New Town, Shunyi", "Tiantan": "Temple of Heaven, Dongcheng",
		"Wanliu": "Wanliu, Haidian", "Wanshouxigong": "Wanshou West Palace, Xicheng",
	}
	const src = "AirQualityReading"
	return ontology.MappingSpec{
		Types: []ontology.TypeRule{{From: "Reading", To: "Observation"}, {From: src, To: "AirQualityObservation"}},
		Attributes: []ontology.AttributeRule{
			{Type: "Reading", From: "station", To: "site", Values: sites},
			{Type: "Reading", From: "time", To: "observed_at"},
			{Type: src, From: "pm25", To: "pm2_5"},
			{Type: src, From: "temp", To: "air_temp_f", Scale: 1.8, Offset: 32},
			{Type: src, From: "dewp", To: "dew_point_f", Scale: 1.8, Offset: 32},
			{Type: src, From: "pres", To: "pressure_mb"},
			{Type: src, From: "wspm", To: "wind_speed"},
			{Type: src, From: "rain", Drop: true},
			{Type: src, From: "wd", Drop: true},
		},
	}
}

// gwData returns the readings and the Mapping.
func gwData(tb testing.TB) ([][]ontology.Attr, *ontology.Mapping) {
	tb.Helper()
	evs, err := gwReadings()
	require.NoError(tb, err)
	from, err := gwSourceOntology()
	require.NoError(tb, err)
	to, err := gwTargetOntology()
	require.NoError(tb, err)
	m, err := ontology.NewMapping(from, to, gwMappingSpec())
	require.NoError(tb, err)
	return evs, m
}

// TestGatewayData checks the parse against beijing's ground truth
// (NumReadings, Hazardous, Freezing) and that the Mapping converts every
// reading.
func TestGatewayData(t *testing.T) {
	evs, m := gwData(t)
	require.Len(t, evs, 17568)
	hazardous, freezing := 0, 0
	for _, attrs := range evs {
		for _, a := range attrs {
			switch {
			case a.Name == "pm25" && a.Value.Float() > 250:
				hazardous++
			case a.Name == "temp" && a.Value.Float() < 0:
				freezing++
			}
		}
		typ, out, ok, err := m.Apply("AirQualityReading", attrs)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "AirQualityObservation", typ)
		require.NotEmpty(t, out)
	}
	require.Equal(t, 714, hazardous)
	require.Equal(t, 873, freezing)
}

var gwSink []ontology.Attr

func BenchmarkConversion(b *testing.B) {
	evs, m := gwData(b)
	var copyNs float64
	b.Run("convert=copy", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			attrs := evs[i%len(evs)]
			out := make([]ontology.Attr, len(attrs))
			copy(out, attrs)
			gwSink = out
		}
		copyNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("convert=mapping", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, out, ok, err := m.Apply("AirQualityReading", evs[i%len(evs)])
			if err != nil || !ok {
				b.Fatalf("reading %d: ok %v, err %v", i%len(evs), ok, err)
			}
			gwSink = out
		}
		if ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N); copyNs > 0 {
			b.ReportMetric(ns/copyNs, "x-copy")
		}
	})
}

// gwRig is a publisher's switch and session and the subscriber's count;
// dropped sums what was lost on the way.
type gwRig struct {
	pubSw   *sion.Switch
	pub     *sion.Session
	got     *atomic.Int64
	dropped func() uint64
}

// newGatewayRig builds the gateway or the link rig (see the top of this
// file); it closes at cleanup.
func newGatewayRig(tb testing.TB, gateway bool) gwRig {
	tb.Helper()
	ctx := context.Background()
	_, m := gwData(tb)
	src, err := gwSourceOntology()
	require.NoError(tb, err)
	net, err := mem.NewNetwork(mem.Config{})
	require.NoError(tb, err)

	// The subscriber's switch serves; the publisher's switch connects.
	subPlace := sion.PlaceConfig{Name: "beijing", Ontology: src}
	filter := "{type ⊑ Reading}"
	if gateway {
		subPlace = sion.PlaceConfig{Name: "monitoring", Ontology: m.To(),
			Federation: func(context.Context, sion.FederationRequest) error { return nil }}
		filter = "{type ⊑ Observation}"
	}
	sp, err := sion.NewEventPlace(subPlace)
	require.NoError(tb, err)
	subSw, err := sion.NewSwitch(sion.SwitchConfig{Name: "sub", Place: sp})
	require.NoError(tb, err)
	l, err := net.Listen("sub")
	require.NoError(tb, err)
	served := make(chan error, 1)
	go func() { served <- subSw.Serve(ctx, l) }()
	subSess, err := subSw.Open(ctx, sion.SessionConfig{Name: "subscriber"})
	require.NoError(tb, err)
	got := new(atomic.Int64)
	sub, err := subSess.Subscribe(ctx, filter, sion.WithQueue(sion.MaxQueue),
		sion.WithHandler(func(sion.Delivery) { got.Add(1) }))
	require.NoError(tb, err)

	pp := subPlace
	if gateway {
		pp = sion.PlaceConfig{Name: "beijing", Ontology: src}
	}
	place := sp
	if gateway {
		place, err = sion.NewEventPlace(pp)
		require.NoError(tb, err)
	}
	pubSw, err := sion.NewSwitch(sion.SwitchConfig{Name: "pub", Place: place})
	require.NoError(tb, err)
	var dropped func() uint64
	if gateway {
		gw, err := pubSw.Federate(ctx, net, "sub", sion.GatewayConfig{
			Name: "beijing→monitoring", Export: &sion.DirectionConfig{Mapping: m}})
		require.NoError(tb, err)
		dropped = func() uint64 {
			c := gw.Info().Export
			return c.Dropped + c.Refused + c.Filtered + c.Unmapped + c.Expired + c.Duplicates
		}
	} else {
		_, err := pubSw.Link(ctx, net, "sub", sion.LinkConfig{})
		require.NoError(tb, err)
		dropped = func() uint64 {
			a, b := pubSw.Stats().Links, subSw.Stats().Links
			return a.Dropped + a.Refused + a.Expired + a.Duplicates + b.Dropped + b.Refused + b.Expired + b.Duplicates
		}
	}
	pub, err := pubSw.Open(ctx, sion.SessionConfig{Name: "stations"})
	require.NoError(tb, err)
	tb.Cleanup(func() {
		require.NoError(tb, pubSw.Close())
		require.NoError(tb, subSw.Close())
		require.NoError(tb, <-served)
	})
	sub0 := dropped
	dropped = func() uint64 { return sub0() + sub.Stats().Dropped }
	return gwRig{pubSw: pubSw, pub: pub, got: got, dropped: dropped}
}

// gwWindow bounds the events in flight: the publisher waits while this
// many are published and not yet counted, so the link's (or gateway's)
// outgoing queue, 4,096 data frames, never overflows and drops.
const gwWindow = 2048

// run publishes n readings from the i-th on (at most gwWindow ahead of the
// subscriber) and waits until the subscriber has counted them (i+n in
// all).
func (r gwRig) run(tb testing.TB, evs [][]ontology.Attr, i, n int) {
	ctx := context.Background()
	for j := i; j < i+n; j++ {
		for int64(j)-r.got.Load() >= gwWindow {
			runtime.Gosched()
		}
		if err := r.pub.Publish(ctx, &sion.Event{Type: "AirQualityReading", Attrs: evs[j%len(evs)]}); err != nil {
			tb.Fatal(err)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := r.pubSw.Flush(fctx); err != nil {
		tb.Fatal(err)
	}
	want := int64(i + n)
	for deadline := time.Now().Add(30 * time.Second); r.got.Load() < want; {
		if d := r.dropped(); d > 0 {
			tb.Fatalf("%d events dropped or refused on the way", d)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("only %d of %d events arrived within 30 s", r.got.Load(), want)
		}
		time.Sleep(20 * time.Microsecond)
	}
	if d := r.dropped(); d > 0 {
		tb.Fatalf("%d events dropped or refused on the way", d)
	}
}

func BenchmarkGatewayHop(b *testing.B) {
	evs, _ := gwData(b)
	var linkNs float64
	for _, gateway := range []bool{false, true} {
		name := "hop=link"
		if gateway {
			name = "hop=gateway"
		}
		b.Run(name, func(b *testing.B) {
			if !gateway {
				linkNs = 0
			}
			r := newGatewayRig(b, gateway)
			r.run(b, evs, 0, 200) // warm up
			b.ReportAllocs()
			b.ResetTimer()
			r.run(b, evs, 200, b.N)
			b.StopTimer()
			if b.Failed() {
				return
			}
			el := b.Elapsed()
			b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
			ns := float64(el.Nanoseconds()) / float64(b.N)
			if !gateway {
				linkNs = ns
			} else if linkNs > 0 {
				b.ReportMetric(ns/linkNs, "x-link")
			}
		})
	}
}

// TestGatewayHop runs each rig with a few hundred events (not a benchmark).
func TestGatewayHop(t *testing.T) {
	evs, _ := gwData(t)
	for _, gateway := range []bool{false, true} {
		t.Run(fmt.Sprint("gateway=", gateway), func(t *testing.T) {
			newGatewayRig(t, gateway).run(t, evs, 0, 500)
		})
	}
}

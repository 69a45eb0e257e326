package beijing

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// sums are the SHA-256 digests of the files in /work/shared/data/SHA256SUMS
// (DATA.md): the embedded files are byte-for-byte copies.
var sums = map[string]string{
	"PRSA_Data_Aotizhongxin_20130301-20130430.csv":  "c2d35db91f7a59df100ce20f90d23872f9726b453a606e83ec765c4f0bcaeb7d",
	"PRSA_Data_Changping_20130301-20130430.csv":     "5a1dc8b43ff231efdd54fa412a3eed64f9781b290a6d367b114280a1a5cd77d0",
	"PRSA_Data_Dingling_20130301-20130430.csv":      "df31ac97d9da7eda464beac6eb5315eab358222c178704691684b909339ce55a",
	"PRSA_Data_Dongsi_20130301-20130430.csv":        "300e4e293545cba39a4dcb1fe31c7ded3a8cf4207b268ed2b6c9d672a13f5262",
	"PRSA_Data_Guanyuan_20130301-20130430.csv":      "e9b54346bb5eafb242325e7c9548ab1ca67ba974d6cb680d5c9f7fe908f26a74",
	"PRSA_Data_Gucheng_20130301-20130430.csv":       "7a2f6c805d0480f6d74aa0611fd18831adef1d5085cd95631e1d34e7589a1463",
	"PRSA_Data_Huairou_20130301-20130430.csv":       "4a414d070e2fb22359f98838389ecda42272a7ee675961fbbac459369ce787e6",
	"PRSA_Data_Nongzhanguan_20130301-20130430.csv":  "fcf8cc93f635b2a892906b64cf55554d035862af223414fb46bfda6dd5dc0ed6",
	"PRSA_Data_Shunyi_20130301-20130430.csv":        "718f09bd611c9ab50a44246e791201618236accaea5819455abed886f00f4b64",
	"PRSA_Data_Tiantan_20130301-20130430.csv":       "7ad746db94d67fa704346491229fd0419ae7b5497d72889d2aa80c235d9a1316",
	"PRSA_Data_Wanliu_20130301-20130430.csv":        "524c74260e05acd963dd18955bf831cc66f48f55990e130038259e80d5a5e46d",
	"PRSA_Data_Wanshouxigong_20130301-20130430.csv": "8d49506d7d8a5664c5c8408bf90d1010abe540b37b42d772b9a17c5967bc65e7",
}

func TestFilesUnchanged(t *testing.T) {
	names, err := fs.Glob(files, "*")
	require.NoError(t, err)
	require.Len(t, names, len(sums))
	for _, name := range names {
		b, err := files.ReadFile(name)
		require.NoError(t, err)
		d := sha256.Sum256(b)
		assert.Equal(t, sums[name], hex.EncodeToString(d[:]), name)
	}
}

func readings(t *testing.T) []Reading {
	t.Helper()
	rs, err := Readings()
	require.NoError(t, err)
	require.Len(t, rs, NumReadings)
	return rs
}

func TestReadingsShape(t *testing.T) {
	rs := readings(t)
	first := time.Date(2013, 3, 1, 0, 0, 0, 0, Zone)
	assert.True(t, rs[0].Time.Equal(first))
	assert.Equal(t, "2013-02-28T16:00:00Z", rs[0].Time.UTC().Format(time.RFC3339))
	assert.True(t, rs[len(rs)-1].Time.Equal(time.Date(2013, 4, 30, 23, 0, 0, 0, Zone)))
	assert.True(t, slices.IsSortedFunc(rs, func(a, b Reading) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		if a.Station < b.Station {
			return -1
		}
		return 1 // equal (time, station) pairs would be duplicates
	}), "sorted by time, then station, no duplicates")
	perStation := map[string]int{}
	for i, r := range rs {
		perStation[r.Station]++
		// 12 stations per hour, in name order.
		assert.True(t, r.Time.Equal(first.Add(time.Duration(i/12)*time.Hour)), "reading %d", i)
		assert.Equal(t, i/12+1, r.No, "reading %d", i)
	}
	var names []string
	for _, s := range Stations() {
		names = append(names, s.Name)
		assert.Equal(t, 1464, perStation[s.Name], s.Name)
	}
	assert.Len(t, perStation, 12)
	assert.True(t, slices.IsSorted(names))
	for i := range 12 {
		assert.Equal(t, names[i], rs[i].Station)
	}
	// The first Dongsi row, as in the CSV:
	// 1,2013,3,1,0,9,9,3,17,300,89,-0.5,1024.5,-21.4,0,"NNW",5.7,"Dongsi"
	n := func(v float64) Number { return Number{V: v, OK: true} }
	assert.Equal(t, Reading{No: 1, Station: "Dongsi", Time: first,
		PM25: n(9), PM10: n(9), SO2: n(3), NO2: n(17), CO: n(300), O3: n(89),
		Temp: n(-0.5), Pres: n(1024.5), Dewp: n(-21.4), Rain: n(0), WD: "NNW", WSPM: n(5.7)}, rs[3])
}

// TestGroundTruth checks the counts of DATA.md (from data/README.md section
// 3, and those this package adds), computed from the parsed readings.
func TestGroundTruth(t *testing.T) {
	rs := readings(t)
	gt := func(n Number, x float64) bool { return n.OK && n.V > x }
	lt := func(n Number, x float64) bool { return n.OK && n.V < x }
	hazardous := func(r Reading) bool { return gt(r.PM25, HazardousPM25) }
	freezing := func(r Reading) bool { return lt(r.Temp, 0) }
	north := func(r Reading) bool { return r.WD == "N" || r.WD == "NNW" || r.WD == "NW" }
	for _, tc := range []struct {
		name string
		want int
		pred func(Reading) bool
	}{
		{"TEMP > 20 at Dongsi", 85, func(r Reading) bool { return r.Station == "Dongsi" && gt(r.Temp, 20) }},
		{"TEMP > 20", 1009, func(r Reading) bool { return gt(r.Temp, 20) }},
		{"PM2.5 > 250 (Hazardous)", Hazardous, hazardous},
		{"PM2.5 > 250 (data README)", 714, hazardous},
		{"PM2.5 missing", 111, func(r Reading) bool { return !r.PM25.OK }},
		{"RAIN > 0 at Huairou", 37, func(r Reading) bool { return r.Station == "Huairou" && gt(r.Rain, 0) }},
		{"WSPM >= 8, wd in {N, NNW, NW}", 39, func(r Reading) bool { return r.WSPM.OK && r.WSPM.V >= 8 && north(r) }},
		{"WSPM >= 8", 57, func(r Reading) bool { return r.WSPM.OK && r.WSPM.V >= 8 }},
		{"TEMP < 0 at Changping", 68, func(r Reading) bool { return r.Station == "Changping" && freezing(r) }},
		{"CO >= 5000", 105, func(r Reading) bool { return r.CO.OK && r.CO.V >= 5000 }},
		{"TEMP - DEWP < 2", 765, func(r Reading) bool { return r.Temp.OK && r.Dewp.OK && r.Temp.V-r.Dewp.V < 2 }},
		{"TEMP < 0 (Freezing)", Freezing, freezing},
		{"TEMP < 0 (awk)", 873, freezing},
		{"PM2.5 > 250 or TEMP < 0 (Forwarded)", Forwarded, func(r Reading) bool { return hazardous(r) || freezing(r) }},
		{"PM2.5 > 250 or TEMP < 0 (awk)", 1586, func(r Reading) bool { return hazardous(r) || freezing(r) }},
		{"PM2.5 > 250 and TEMP < 0", 1, func(r Reading) bool { return hazardous(r) && freezing(r) }},
		{"PM10 missing", 94, func(r Reading) bool { return !r.PM10.OK }},
		{"SO2 missing", 143, func(r Reading) bool { return !r.SO2.OK }},
		{"NO2 missing", 530, func(r Reading) bool { return !r.NO2.OK }},
		{"CO missing", 1053, func(r Reading) bool { return !r.CO.OK }},
		{"O3 missing", 360, func(r Reading) bool { return !r.O3.OK }},
		{"TEMP, PRES, DEWP, RAIN, WSPM or wd missing", 0, func(r Reading) bool {
			return !r.Temp.OK || !r.Pres.OK || !r.Dewp.OK || !r.Rain.OK || !r.WSPM.OK || r.WD == ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for _, r := range rs {
				if tc.pred(r) {
					n++
				}
			}
			assert.Equal(t, tc.want, n)
		})
	}
	t.Run("TEMP > 20 per station in [70, 90]", func(t *testing.T) {
		per := map[string]int{}
		for _, r := range rs {
			if gt(r.Temp, 20) {
				per[r.Station]++
			}
		}
		require.Len(t, per, 12)
		for s, n := range per {
			assert.True(t, n >= 70 && n <= 90, "%s: %d", s, n)
		}
	})
	t.Run("ranges", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			field  func(Reading) Number
			lo, hi float64
		}{
			{"TEMP", func(r Reading) Number { return r.Temp }, -7.2, 29.4},
			{"PM2.5", func(r Reading) Number { return r.PM25 }, 2, 558},
			{"WSPM", func(r Reading) Number { return r.WSPM }, 0, 13.2},
		} {
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, r := range rs {
				if n := tc.field(r); n.OK {
					lo, hi = min(lo, n.V), max(hi, n.V)
				}
			}
			assert.Equal(t, tc.lo, lo, tc.name)
			assert.Equal(t, tc.hi, hi, tc.name)
		}
	})
}

func TestOntologies(t *testing.T) {
	src, dst := SourceOntology(), TargetOntology()
	require.Same(t, src, SourceOntology(), "built once")
	for _, tc := range []struct {
		o          *ontology.Ontology
		typ, attr  string
		kind       ontology.Kind
		unit, name string
	}{
		{src, SourceType, "PM2.5", ontology.KindFloat, "ug/m3", "pm25"},
		{src, SourceType, "TEMP", ontology.KindFloat, "degC", "temp"},
		{src, SourceType, "WSPM", ontology.KindFloat, "m/s", "wspm"},
		{src, SourceType, "station", ontology.KindString, "", "station"},
		{src, SourceType, "time", ontology.KindTime, "", "time"},
		{src, "Reading", "station", ontology.KindString, "", "station"},
		{dst, TargetType, "air_temp_f", ontology.KindFloat, "degF", "air_temp_f"},
		{dst, TargetType, "observed_at", ontology.KindTime, "", "observed_at"},
		{dst, "Observation", "site", ontology.KindString, "", "site"},
	} {
		t.Run(tc.typ+"."+tc.attr, func(t *testing.T) {
			typ, ok := tc.o.Lookup(tc.typ)
			require.True(t, ok)
			a, ok := tc.o.Attribute(typ.ID, tc.attr)
			require.True(t, ok)
			assert.Equal(t, tc.name, a.Name)
			assert.Equal(t, tc.kind, a.Kind)
			assert.Equal(t, tc.unit, a.Unit)
		})
	}
	rd, _ := src.Lookup("Reading")
	aq, _ := src.Lookup(SourceType)
	assert.True(t, src.IsA(aq.ID, rd.ID))
	sites := map[string]bool{}
	for _, s := range Stations() {
		assert.False(t, sites[s.Site()], "site names are unique: %s", s.Site())
		sites[s.Site()] = true
	}
}

// TestEvent checks that every reading becomes a valid source event: known
// attributes of the declared kinds, finite numbers, missing values left out.
func TestEvent(t *testing.T) {
	rs := readings(t)
	src := SourceOntology()
	aq, _ := src.Lookup(SourceType)
	missing := 0
	for _, r := range rs {
		typ, attrs := Event(r)
		require.Equal(t, SourceType, typ)
		missing += 14 - len(attrs)
		for _, a := range attrs {
			decl, ok := src.Attribute(aq.ID, a.Name)
			require.True(t, ok, a.Name)
			require.Equal(t, decl.Name, a.Name, "canonical")
			require.Equal(t, decl.Kind, a.Value.Kind(), a.Name)
			require.True(t, a.Value.IsFinite(), a.Name)
		}
	}
	assert.Equal(t, 111+94+143+530+1053+360, missing)
	_, attrs := Event(Reading{Station: "Dongsi", Time: time.Date(2013, 3, 1, 0, 0, 0, 0, Zone), PM25: Number{V: 7, OK: true}})
	assert.Equal(t, []string{"station", "time", "pm25"}, names(attrs))
}

func names(attrs []ontology.Attr) []string {
	var out []string
	for _, a := range attrs {
		out = append(out, a.Name)
	}
	return out
}

func TestMapping(t *testing.T) {
	m, err := ontology.NewMapping(SourceOntology(), TargetOntology(), MappingSpec())
	require.NoError(t, err)
	target, ok := m.Target(SourceType)
	require.True(t, ok)
	assert.Equal(t, TargetType, target)
	target, ok = m.Target("Reading")
	require.True(t, ok)
	assert.Equal(t, "Observation", target)

	rs := readings(t)
	t.Run("first Dongsi row", func(t *testing.T) {
		r := rs[3]
		require.Equal(t, "Dongsi", r.Station)
		typ, out, ok, err := m.Apply(Event(r))
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, TargetType, typ)
		f := ontology.Float
		want := []ontology.Attr{
			{Name: "site", Value: ontology.String("Dongsi, Dongcheng")},
			{Name: "observed_at", Value: ontology.Time(time.Date(2013, 2, 28, 16, 0, 0, 0, time.UTC))},
			{Name: "pm2_5", Value: f(9)},
			{Name: "pm10", Value: f(9)},
			{Name: "so2", Value: f(3)},
			{Name: "no2", Value: f(17)},
			{Name: "co", Value: f(300)},
			{Name: "o3", Value: f(89)},
			// -0.5 °C: FMA(-0.5, 1.8, 32) is the float64 nearest 31.1.
			{Name: "air_temp_f", Value: f(31.1)},
			{Name: "pressure_mb", Value: f(1024.5)},
			// -21.4 °C: FMA rounds the exact value of float64(-21.4)*1.8+32
			// once; rounding twice (the product, then the sum) would give
			// -6.519999999999996 (checked below).
			{Name: "dew_point_f", Value: f(-6.519999999999999)},
			{Name: "wind_speed", Value: f(5.7)},
		}
		// Values compare exactly here: kind and float64 bits.
		assert.Equal(t, want, out)
		assert.Equal(t, math.Float64bits(31.1), math.Float64bits(out[8].Value.Float()))
		assert.Equal(t, math.Float64bits(-6.519999999999999), math.Float64bits(out[10].Value.Float()))
		c := r.Dewp.V
		twice := float64(c*1.8) + 32 // the conversion forces rounding of the product
		assert.Equal(t, -6.519999999999996, twice)
		assert.NotEqual(t, twice, out[10].Value.Float(), "Apply rounds once")
	})
	t.Run("every reading", func(t *testing.T) {
		// The gateway's rule in target terms: pm2_5 > 250 or air_temp_f < 32.
		dst := TargetOntology()
		aq, _ := dst.Lookup(TargetType)
		forwarded := 0
		for _, r := range rs {
			typ, out, ok, err := m.Apply(Event(r))
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, TargetType, typ)
			var pm, temp ontology.Value
			for _, a := range out {
				decl, ok := dst.Attribute(aq.ID, a.Name)
				require.True(t, ok, a.Name)
				require.Equal(t, decl.Kind, a.Value.Kind(), a.Name)
				require.True(t, a.Value.IsFinite(), a.Name)
				switch a.Name {
				case "pm2_5":
					pm = a.Value
				case "air_temp_f":
					temp = a.Value
				case "site":
					require.NotEmpty(t, a.Value.Str())
				}
			}
			require.True(t, temp.IsValid())
			if pm.IsValid() && pm.Float() > HazardousPM25 || temp.Float() < 32 {
				forwarded++
			}
		}
		assert.Equal(t, Forwarded, forwarded)
	})
}

package beijing

import (
	"sync"

	"github.com/sion-go/sion/ontology"
)

// The names of the two event places and of the event types the federation
// example publishes and receives.
const (
	// SourcePlace is the event place of the stations; its ontology is
	// SourceOntology.
	SourcePlace = "beijing"
	// TargetPlace is the English-speaking monitoring place; its ontology is
	// TargetOntology.
	TargetPlace = "monitoring"
	// SourceType is the type of the events Event builds, in SourceOntology.
	SourceType = "AirQualityReading"
	// TargetType is the type MappingSpec converts SourceType to, in
	// TargetOntology.
	TargetType = "AirQualityObservation"
)

// Station is one of the 12 monitoring stations: Name as the CSV spells it
// (the pinyin of the Chinese name), the Chinese name, an English rendering
// and the district of Beijing the station lies in. The renderings and
// districts are not part of the dataset; DATA.md says where they come from.
type Station struct {
	Name, Chinese, English, District string
}

// Site returns the station's name in the target place: "English, District",
// e.g. "Temple of Heaven, Dongcheng", so that a filter there can select a
// district with `site suffix ", Dongcheng"`.
func (s Station) Site() string { return s.English + ", " + s.District }

// Stations returns the 12 stations in the order of their names (bytes), a
// new slice on each call.
func Stations() []Station {
	return []Station{
		{"Aotizhongxin", "奥体中心", "Olympic Sports Center", "Chaoyang"},
		{"Changping", "昌平镇", "Changping Town", "Changping"},
		{"Dingling", "定陵", "Dingling Tomb", "Changping"},
		{"Dongsi", "东四", "Dongsi", "Dongcheng"},
		{"Guanyuan", "官园", "Guanyuan", "Xicheng"},
		{"Gucheng", "古城", "Gucheng", "Shijingshan"},
		{"Huairou", "怀柔镇", "Huairou Town", "Huairou"},
		{"Nongzhanguan", "农展馆", "Agricultural Exhibition Center", "Chaoyang"},
		{"Shunyi", "顺义新城", "Shunyi New Town", "Shunyi"},
		{"Tiantan", "天坛", "Temple of Heaven", "Dongcheng"},
		{"Wanliu", "万柳", "Wanliu", "Haidian"},
		{"Wanshouxigong", "万寿西宫", "Wanshou West Palace", "Xicheng"},
	}
}

// Units of the attributes, as ontology.Attribute.Unit strings.
const (
	unitConc = "ug/m3" // µg/m³
	unitDegC = "degC"
	unitDegF = "degF"
)

var sourceOntology = sync.OnceValue(func() *ontology.Ontology {
	f := func(name, unit, synonym string) ontology.Attribute {
		return ontology.Attribute{Name: name, Kind: ontology.KindFloat, Unit: unit, Synonyms: []string{synonym}}
	}
	return must(ontology.New([]ontology.TypeDef{
		{Name: "Reading", Label: "an hourly reading of a monitoring station", Attributes: []ontology.Attribute{
			{Name: "station", Kind: ontology.KindString},
			{Name: "time", Kind: ontology.KindTime},
		}},
		{Name: SourceType, Parents: []string{"Reading"}, Label: "pollutant concentrations and weather of one station and hour", Attributes: []ontology.Attribute{
			f("pm25", unitConc, "PM2.5"),
			f("pm10", unitConc, "PM10"),
			f("so2", unitConc, "SO2"),
			f("no2", unitConc, "NO2"),
			f("co", unitConc, "CO"),
			f("o3", unitConc, "O3"),
			f("temp", unitDegC, "TEMP"),
			f("pres", "hPa", "PRES"),
			f("dewp", unitDegC, "DEWP"),
			f("rain", "mm", "RAIN"),
			{Name: "wd", Kind: ontology.KindString},
			f("wspm", "m/s", "WSPM"),
		}},
	}))
})

// SourceOntology returns the ontology of SourcePlace, the stations'
// vocabulary. Type "Reading" has station (string, the CSV's name) and time
// (time, the start of the hour). Its subtype "AirQualityReading" adds the
// CSV's numeric columns as floats, named in lower case with the CSV header
// as a synonym: pm25 ("PM2.5"), pm10, so2, no2, co, o3 (unit "ug/m3"), temp
// and dewp ("degC"), pres ("hPa"), rain ("mm"), wspm ("m/s"), and wd
// (string, a 16-point compass direction). The Ontology is built once and
// shared; it is immutable. It panics if ontology.New refuses the
// definitions, which the tests rule out.
func SourceOntology() *ontology.Ontology { return sourceOntology() }

var targetOntology = sync.OnceValue(func() *ontology.Ontology {
	f := func(name, unit string) ontology.Attribute {
		return ontology.Attribute{Name: name, Kind: ontology.KindFloat, Unit: unit}
	}
	return must(ontology.New([]ontology.TypeDef{
		{Name: "Observation", Label: "an observation at a monitoring site", Attributes: []ontology.Attribute{
			{Name: "site", Kind: ontology.KindString},
			{Name: "observed_at", Kind: ontology.KindTime},
		}},
		{Name: TargetType, Parents: []string{"Observation"}, Label: "air quality and weather at a site", Attributes: []ontology.Attribute{
			f("pm2_5", unitConc),
			f("pm10", unitConc),
			f("so2", unitConc),
			f("no2", unitConc),
			f("co", unitConc),
			f("o3", unitConc),
			f("air_temp_f", unitDegF),
			f("dew_point_f", unitDegF),
			f("pressure_mb", "mbar"),
			f("wind_speed", "m/s"),
		}},
	}))
})

// TargetOntology returns the ontology of TargetPlace, an English-speaking
// monitoring place. Type "Observation" has site (string, see Station.Site)
// and observed_at (time). Its subtype "AirQualityObservation" adds floats:
// pm2_5, pm10, so2, no2, co, o3 (unit "ug/m3"), air_temp_f and dew_point_f
// ("degF"), pressure_mb ("mbar") and wind_speed ("m/s"). It has no rain and
// no wind direction. The Ontology is built once and shared; it is
// immutable. It panics if ontology.New refuses the definitions, which the
// tests rule out.
func TargetOntology() *ontology.Ontology { return targetOntology() }

// MappingSpec returns the conversion table from SourceOntology to
// TargetOntology, a new value on each call (the caller may modify it):
//
//   - types: Reading → Observation, AirQualityReading → AirQualityObservation;
//   - station → site through a value table built from Stations (e.g.
//     "Tiantan" → "Temple of Heaven, Dongcheng"); an unknown station is
//     dropped;
//   - time → observed_at, pm25 → pm2_5, pres → pressure_mb (1 hPa = 1 mbar),
//     wspm → wind_speed: renames;
//   - temp → air_temp_f and dewp → dew_point_f: °C → °F, Scale 1.8,
//     Offset 32 (computed with one rounding, see ontology.Mapping.Apply);
//   - rain and wd: dropped (the target has no counterpart);
//   - pm10, so2, no2, co, o3: no rule; they pass under the same name.
func MappingSpec() ontology.MappingSpec {
	sites := make(map[string]string, 12)
	for _, s := range Stations() {
		sites[s.Name] = s.Site()
	}
	return ontology.MappingSpec{
		Types: []ontology.TypeRule{
			{From: "Reading", To: "Observation"},
			{From: SourceType, To: TargetType},
		},
		Attributes: []ontology.AttributeRule{
			{Type: "Reading", From: "station", To: "site", Values: sites},
			{Type: "Reading", From: "time", To: "observed_at"},
			{Type: SourceType, From: "pm25", To: "pm2_5"},
			{Type: SourceType, From: "temp", To: "air_temp_f", Scale: 1.8, Offset: 32},
			{Type: SourceType, From: "dewp", To: "dew_point_f", Scale: 1.8, Offset: 32},
			{Type: SourceType, From: "pres", To: "pressure_mb"},
			{Type: SourceType, From: "wspm", To: "wind_speed"},
			{Type: SourceType, From: "rain", Drop: true},
			{Type: SourceType, From: "wd", Drop: true},
		},
	}
}

// Event returns the source event of r: type SourceType and its attributes
// under their canonical names in SourceOntology, in the order station,
// time, pm25, pm10, so2, no2, co, o3, temp, pres, dewp, rain, wd, wspm.
// Missing values are left out (never NaN), so a filter predicate on them is
// false and `not exists` holds. The slice is new on each call.
func Event(r Reading) (typeName string, attrs []ontology.Attr) {
	attrs = make([]ontology.Attr, 0, 14)
	attrs = append(attrs,
		ontology.Attr{Name: "station", Value: ontology.String(r.Station)},
		ontology.Attr{Name: "time", Value: ontology.Time(r.Time)})
	num := func(name string, n Number) {
		if n.OK {
			attrs = append(attrs, ontology.Attr{Name: name, Value: ontology.Float(n.V)})
		}
	}
	num("pm25", r.PM25)
	num("pm10", r.PM10)
	num("so2", r.SO2)
	num("no2", r.NO2)
	num("co", r.CO)
	num("o3", r.O3)
	num("temp", r.Temp)
	num("pres", r.Pres)
	num("dewp", r.Dewp)
	num("rain", r.Rain)
	if r.WD != "" {
		attrs = append(attrs, ontology.Attr{Name: "wd", Value: ontology.String(r.WD)})
	}
	num("wspm", r.WSPM)
	return SourceType, attrs
}

// must panics on an error building a fixed ontology, which the tests rule
// out.
func must(o *ontology.Ontology, err error) *ontology.Ontology {
	if err != nil {
		panic("beijing: " + err.Error())
	}
	return o
}

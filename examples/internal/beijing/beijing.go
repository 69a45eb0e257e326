// Package beijing holds the real data the federation example runs on: two
// months (2013-03-01 to 2013-04-30) of hourly readings from the 12 national
// air-quality monitoring stations in Beijing, the ontology of the place that
// publishes them ("beijing"), the ontology of an English-speaking monitoring
// place that receives some of them in °F ("monitoring"), and the conversion
// table (ontology.MappingSpec) a gateway between the two uses. See DATA.md
// for provenance, licence (CC BY 4.0, attribution required) and the ground
// truth the tests check.
package beijing

import (
	"embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// files holds the 12 station files, PRSA_Data_<Station>_20130301-20130430.csv,
// byte-for-byte as published (CRLF line endings).
//
//go:embed PRSA_Data_*.csv
var files embed.FS

// Ground truth, verified by the tests against Readings and independently
// with awk on the CSV files (DATA.md gives the commands).
const (
	// NumReadings is the number of readings: 12 stations × 1,464 hours.
	NumReadings = 17568
	// HazardousPM25 is the PM2.5 concentration, in µg/m³, above which
	// (strictly) a reading is hazardous here: about where the US AQI
	// "hazardous" band starts (250.5 µg/m³).
	HazardousPM25 = 250
	// Hazardous is the number of readings with PM2.5 > HazardousPM25, at
	// any station.
	Hazardous = 714
	// Freezing is the number of readings with TEMP < 0 °C, at any station.
	Freezing = 873
	// Forwarded is the number of readings that are hazardous or freezing
	// (PM2.5 > 250 or TEMP < 0; one reading is both): the events the
	// federation example's gateway carries from "beijing" to "monitoring".
	Forwarded = 1586
)

// Zone is China Standard Time, UTC+8 without daylight saving time, in which
// the year, month, day and hour columns are read. The dataset does not name
// a zone; the stations are in Beijing.
var Zone = time.FixedZone("CST", 8*60*60)

// Number is one numeric column of a reading. OK reports whether the CSV had
// a value; for a missing one (the token NA), OK is false and V is 0. V is
// never NaN or ±Inf.
type Number struct {
	V  float64
	OK bool
}

// Reading is one row of a station file: one station, one hour. Units:
// pollutant concentrations (PM25, PM10, SO2, NO2, CO, O3) in µg/m³, Temp
// and Dewp (dew point) in °C, Pres in hPa, Rain in mm (over the hour), WSPM
// (wind speed) in m/s. WD is the wind direction, a 16-point compass
// direction such as "NNW", or "" when missing.
type Reading struct {
	// No is the row number within the station file, from 1.
	No int
	// Station is the station name as the CSV spells it, e.g. "Dongsi".
	Station string
	// Time is the start of the hour, in Zone.
	Time time.Time

	PM25, PM10, SO2, NO2, CO, O3 Number
	Temp, Pres, Dewp, Rain       Number
	WD                           string
	WSPM                         Number
}

// header is the first line of every file.
var header = []string{"No", "year", "month", "day", "hour", "PM2.5", "PM10", "SO2", "NO2", "CO", "O3", "TEMP", "PRES", "DEWP", "RAIN", "wd", "WSPM", "station"}

// Readings parses the 12 embedded station files and returns their
// NumReadings readings, sorted by time, then by station name (bytes). Each
// call parses the files again (about 30 ms) and returns a new slice the
// caller owns. The error, which the tests rule out for the embedded data,
// names the file and line of a malformed row: a wrong header, a field that
// is neither a finite number nor NA, an hour that does not exist, or a
// station column that disagrees with the file name.
func Readings() ([]Reading, error) {
	names, err := fs.Glob(files, "PRSA_Data_*.csv")
	if err != nil {
		return nil, fmt.Errorf("beijing: %w", err)
	}
	out := make([]Reading, 0, NumReadings)
	for _, name := range names {
		if out, err = readFile(out, name); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(out, func(a, b Reading) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Station, b.Station)
	})
	return out, nil
}

// readFile appends the readings of one station file to out.
func readFile(out []Reading, name string) ([]Reading, error) {
	f, err := files.Open(name)
	if err != nil {
		return nil, fmt.Errorf("beijing: %w", err)
	}
	defer f.Close()
	station := strings.TrimPrefix(path.Base(name), "PRSA_Data_")
	station, _, _ = strings.Cut(station, "_")
	r := csv.NewReader(f)
	r.FieldsPerRecord = len(header)
	r.ReuseRecord = true
	rec, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("beijing: %s: %w", name, err)
	}
	if !slices.Equal(rec, header) {
		return nil, fmt.Errorf("beijing: %s: header %q, want %q", name, rec, header)
	}
	for {
		rec, err = r.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("beijing: %s: %w", name, err)
		}
		line, _ := r.FieldPos(0)
		rd, err := parseRecord(rec, station)
		if err != nil {
			return nil, fmt.Errorf("beijing: %s:%d: %w", name, line, err)
		}
		out = append(out, rd)
	}
}

// parseRecord turns one CSV record (in header order) into a Reading.
func parseRecord(rec []string, station string) (Reading, error) {
	var ints [5]int // No, year, month, day, hour
	for i := range ints {
		n, err := strconv.Atoi(rec[i])
		if err != nil {
			return Reading{}, fmt.Errorf("column %s: %w", header[i], err)
		}
		ints[i] = n
	}
	y, mo, d, h := ints[1], ints[2], ints[3], ints[4]
	t := time.Date(y, time.Month(mo), d, h, 0, 0, 0, Zone)
	if t.Year() != y || int(t.Month()) != mo || t.Day() != d || t.Hour() != h {
		return Reading{}, fmt.Errorf("no such hour: %d-%d-%d %d:00", y, mo, d, h)
	}
	if rec[17] != station {
		return Reading{}, fmt.Errorf("station %q in a file of station %q", rec[17], station)
	}
	rd := Reading{No: ints[0], Station: station, Time: t}
	nums := []*Number{&rd.PM25, &rd.PM10, &rd.SO2, &rd.NO2, &rd.CO, &rd.O3, &rd.Temp, &rd.Pres, &rd.Dewp, &rd.Rain}
	for i, p := range nums {
		n, err := parseNumber(rec[5+i])
		if err != nil {
			return Reading{}, fmt.Errorf("column %s: %w", header[5+i], err)
		}
		*p = n
	}
	if rec[15] != "NA" {
		rd.WD = rec[15]
	}
	n, err := parseNumber(rec[16])
	if err != nil {
		return Reading{}, fmt.Errorf("column WSPM: %w", err)
	}
	rd.WSPM = n
	return rd, nil
}

// parseNumber reads a finite number or NA.
func parseNumber(s string) (Number, error) {
	if s == "NA" {
		return Number{}, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return Number{}, err
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Number{}, fmt.Errorf("%q is not a finite number", s)
	}
	return Number{V: f, OK: true}, nil
}

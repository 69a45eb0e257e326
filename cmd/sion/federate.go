package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
)

// FederateConfig is one gateway (S1 SI-GW) that serve requests to a switch
// of another place: an entry of Config.Federate, or one -federate flag (an
// address, or this object in JSON). The other place must accept it (its
// serve's accept_federation).
//
// With neither Import nor Export the gateway is two-way and converts
// nothing: every event someone in the other place subscribes to crosses
// unchanged, both ways — for places that share an ontology, or whose
// ontologies name the same types and attributes. With one or both, only
// those directions are open.
type FederateConfig struct {
	// Addr is the address of a switch of the other place (required).
	Addr string `json:"addr"`
	// Name is the gateway's name on both switches; default
	// "<switch>→<addr>".
	Name string `json:"name"`
	// Ontology is the other place's ontology file (sion JSON, or RDF/XML
	// with .rdf or .owl); a Mapping needs it.
	Ontology string `json:"ontology"`
	// KeyFile holds the other place's shared key, when it has one.
	KeyFile string `json:"key_file"`
	// Import is the direction from the other place into this one; Export
	// from this place into the other.
	Import *DirectionConfig `json:"import"`
	Export *DirectionConfig `json:"export"`
}

// DirectionConfig is one direction of a gateway: its conversion table and
// its firewall (sion.DirectionConfig).
type DirectionConfig struct {
	// Mapping converts events from the direction's source ontology into
	// its target's: a MappingFile in JSON, given as the name of a file
	// or as the object itself. Events of types it does not convert do
	// not cross. Without it, events cross unchanged.
	Mapping json.RawMessage `json:"mapping"`
	// Firewall lists filters over the source place's ontology: an event
	// crosses only if one of them matches it. Absent (null), every event
	// the Mapping converts may cross; [] lets nothing cross.
	Firewall []string `json:"firewall"`
}

// MappingFile is a conversion table (ontology.MappingSpec) in JSON:
//
//	{"types": [{"from": "seismic", "to": "QuakeAlert"}, {"from": "explosion", "drop": true}],
//	 "attributes": [{"from": "mag", "to": "magnitude"},
//	                {"from": "depth", "to": "depth_m", "scale": 1000},
//	                {"from": "alert", "to": "level", "values": {"red": "severe"}, "keep_unmapped": true},
//	                {"type": "earthquake", "from": "tsunami", "drop": true}]}
//
// A type rule maps a source type (and its subtypes without a rule of their
// own) to a target type, or drops it. An attribute rule, for events of
// Type and its subtypes ("" any), renames From to To, or converts it
// linearly (out = in × scale + offset), or through a table of string
// values (a value not in it is dropped, unless keep_unmapped), or drops
// it. Attributes without a rule pass under their name if the target type
// has them.
type MappingFile struct {
	Types      []TypeRule      `json:"types"`
	Attributes []AttributeRule `json:"attributes"`
}

// TypeRule is ontology.TypeRule in JSON.
type TypeRule struct {
	From string `json:"from"`
	To   string `json:"to"`
	Drop bool   `json:"drop"`
}

// AttributeRule is ontology.AttributeRule in JSON.
type AttributeRule struct {
	Type         string            `json:"type"`
	From         string            `json:"from"`
	To           string            `json:"to"`
	Scale        float64           `json:"scale"`
	Offset       float64           `json:"offset"`
	Values       map[string]string `json:"values"`
	KeepUnmapped bool              `json:"keep_unmapped"`
	Drop         bool              `json:"drop"`
}

// spec returns m as an ontology.MappingSpec.
func (m MappingFile) spec() ontology.MappingSpec {
	var s ontology.MappingSpec
	for _, r := range m.Types {
		s.Types = append(s.Types, ontology.TypeRule(r))
	}
	for _, r := range m.Attributes {
		s.Attributes = append(s.Attributes, ontology.AttributeRule(r))
	}
	return s
}

// parseFederate reads a -federate flag: an address, or a FederateConfig
// in JSON (its files relative to the working directory).
func parseFederate(v string) (FederateConfig, error) {
	if !strings.HasPrefix(strings.TrimSpace(v), "{") {
		if v == "" || strings.ContainsAny(v, " \t\n\"") {
			return FederateConfig{}, fmt.Errorf("-federate %q: want an address (host:port) or a JSON object", v)
		}
		return FederateConfig{Addr: v}, nil
	}
	var fc FederateConfig
	if err := decodeStrict([]byte(v), "-federate", &fc); err != nil {
		return fc, err
	}
	return fc, nil
}

// rebase makes fc's file names relative to dir, unless absolute.
func (fc *FederateConfig) rebase(dir string) {
	fc.Ontology = rebase(dir, fc.Ontology)
	fc.KeyFile = rebase(dir, fc.KeyFile)
	for _, d := range []*DirectionConfig{fc.Import, fc.Export} {
		if d == nil {
			continue
		}
		var file string
		if json.Unmarshal(d.Mapping, &file) == nil && file != "" {
			d.Mapping, _ = json.Marshal(rebase(dir, file))
		}
	}
}

// rebase returns file relative to dir, unless it is "" or absolute.
func rebase(dir, file string) string {
	if file == "" || filepath.IsAbs(file) {
		return file
	}
	return filepath.Join(dir, file)
}

// gatewayConfig builds the sion.GatewayConfig of fc for a switch of a
// place with ontology own. where names fc in errors ("federate[0]",
// "-federate").
func (fc FederateConfig) gatewayConfig(own *ontology.Ontology, where string) (sion.GatewayConfig, error) {
	if fc.Addr == "" {
		return sion.GatewayConfig{}, fmt.Errorf("%s: no addr: the address of a switch of the other place", where)
	}
	where += " (" + fc.Addr + ")"
	cfg := sion.GatewayConfig{Name: fc.Name}
	key, err := readKey(fc.KeyFile)
	if err != nil {
		return cfg, fmt.Errorf("%s: key_file: %w", where, err)
	}
	cfg.SharedKey = key
	if fc.Import == nil && fc.Export == nil {
		cfg.Import, cfg.Export = &sion.DirectionConfig{}, &sion.DirectionConfig{}
		return cfg, nil
	}
	var peer *ontology.Ontology
	for _, d := range []struct {
		name string
		in   *DirectionConfig
		out  **sion.DirectionConfig
	}{{"import", fc.Import, &cfg.Import}, {"export", fc.Export, &cfg.Export}} {
		if d.in == nil {
			continue
		}
		dc := &sion.DirectionConfig{Firewall: d.in.Firewall}
		if len(d.in.Mapping) > 0 && string(d.in.Mapping) != "null" {
			if fc.Ontology == "" {
				return cfg, fmt.Errorf("%s: %s.mapping needs ontology, the other place's ontology file", where, d.name)
			}
			if peer == nil {
				if peer, err = loadOntology(fc.Ontology); err != nil {
					return cfg, fmt.Errorf("%s: ontology: %w", where, err)
				}
			}
			from, to := peer, own
			if d.name == "export" {
				from, to = own, peer
			}
			if dc.Mapping, err = readMapping(d.in.Mapping, from, to); err != nil {
				return cfg, fmt.Errorf("%s: %s.mapping: %w", where, d.name, err)
			}
		}
		*d.out = dc
	}
	return cfg, nil
}

// readMapping builds a Mapping from from to to out of raw: the name of a
// MappingFile, or one inline.
func readMapping(raw json.RawMessage, from, to *ontology.Ontology) (*ontology.Mapping, error) {
	var file string
	var mf MappingFile
	if json.Unmarshal(raw, &file) == nil {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		if err := decodeStrict(b, file, &mf); err != nil {
			return nil, err
		}
	} else if err := decodeStrict(raw, "the mapping object", &mf); err != nil {
		return nil, err
	}
	m, err := ontology.NewMapping(from, to, mf.spec())
	if err != nil && file != "" {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return m, err
}

// acceptFederation returns the place's PlaceConfig.Federation for serve:
// it approves requests from the places named in accept ("*": any) and
// refuses the others, saying how to accept them.
func acceptFederation(place string, accept []string) func(context.Context, sion.FederationRequest) error {
	return func(_ context.Context, r sion.FederationRequest) error {
		if slices.Contains(accept, "*") || slices.Contains(accept, r.Place) {
			return nil
		}
		if len(accept) == 0 {
			return fmt.Errorf("place %q accepts no federation (its sion serve has no -accept-federation %s)", place, r.Place)
		}
		return fmt.Errorf("place %q accepts federation only from %s (sion serve -accept-federation)", place, strings.Join(accept, ", "))
	}
}

// decodeStrict decodes the JSON of b into v, refusing unknown fields
// and data after the value; an error names src (a file, a flag) and the
// line and column (in bytes) where it is, when encoding/json says.
func decodeStrict(b []byte, src string, v any) error {
	off, err := strictJSON(b, v)
	switch {
	case err == nil:
		return nil
	case off >= 0:
		return fmt.Errorf("%s:%s: %w", src, lineCol(b, off), err)
	}
	return fmt.Errorf("%s: %w", src, err)
}

// strictJSON decodes the one JSON value of b into v, refusing unknown
// fields (encoding/json's DisallowUnknownFields) and anything but white
// space after the value. It returns the error and the byte offset in b
// where it is, or -1 when that is not known.
func strictJSON(b []byte, v any) (int, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	err := d.Decode(v)
	if err == nil {
		end := int(d.InputOffset())
		if rest := bytes.TrimLeft(b[end:], " \t\r\n"); len(rest) > 0 {
			return len(b) - len(rest), errors.New("data after the JSON value")
		}
		return -1, nil
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return int(se.Offset) - 1, err
	case errors.As(err, &te):
		return int(te.Offset) - 1, err
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json does not say where; the first place where the
		// field's quoted name is a key is.
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return keyOffset(b, name), fmt.Errorf("unknown field %s", name)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return -1, fmt.Errorf("the JSON ends early (%w)", err)
	}
	return -1, err
}

// keyOffset returns the offset in b of the first occurrence of quoted (a
// JSON string as encoding/json quotes it) followed by a colon, or -1.
func keyOffset(b []byte, quoted string) int {
	for off := 0; ; {
		i := bytes.Index(b[off:], []byte(quoted))
		if i < 0 {
			return -1
		}
		i += off
		after := bytes.TrimLeft(b[i+len(quoted):], " \t\r\n")
		if len(after) > 0 && after[0] == ':' {
			return i
		}
		off = i + 1
	}
}

// lineCol returns "line:col" (1-based; col in bytes) of offset off of b.
func lineCol(b []byte, off int) string {
	off = max(min(off, len(b)), 0)
	line := bytes.Count(b[:off], []byte("\n")) + 1
	col := off - bytes.LastIndexByte(b[:off], '\n')
	return fmt.Sprintf("%d:%d", line, col)
}

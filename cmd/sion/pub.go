package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport"
)

// pub is "sion pub": it publishes one event (-type, -attr, -payload) on
// the switch at -server, or, without -type, one per JSON line of
// standard input: {"type": T, "attrs": {…}, "content_type": …, "data": …}.
func pub(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sion pub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", DefaultAddr, "the switch's address")
	keyFile := fs.String("key-file", "", "a file holding the place's shared key, if it has one")
	var tf tlsFiles
	tf.clientFlags(fs)
	typ := fs.String("type", "", "the event type; without it, events are read as JSON lines from standard input")
	var attrs stringList
	fs.Var(&attrs, "attr", "an attribute name=value (an int, float, bool, RFC 3339 time or string, as it reads); may be repeated")
	payload := fs.String("payload", "", "a file whose bytes are the payload, or - for standard input")
	contentType := fs.String("content-type", "", "the payload's media type (default: sniffed, JSON or XML)")
	reconnect := fs.Int("reconnect", 10, "attempts to reconnect when the connection to the switch fails, before pub exits with status 1 (0: exit at once)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *reconnect < 0 {
		errorf(stderr, "sion pub: -reconnect %d: want a number of attempts, or 0 for none\n", *reconnect)
		return 2
	}
	if fs.NArg() != 0 || (*typ == "" && (len(attrs) > 0 || *payload != "")) {
		fmt.Fprintln(stderr, "sion pub: want -type T [-attr k=v …] [-payload FILE|-], or JSON lines on standard input")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var one *sion.Event // the event of the flags, if -type is given
	if *typ != "" {
		ev := &sion.Event{Type: *typ, ContentType: *contentType}
		for _, kv := range attrs {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				errorf(stderr, "sion pub: -attr %q: want name=value\n", kv)
				return 2
			}
			ev.Attrs = append(ev.Attrs, ontology.Attr{Name: k, Value: guessValue(v)})
		}
		switch *payload {
		case "":
		case "-":
			b, err := io.ReadAll(io.LimitReader(stdin, maxPayloadBytes+1))
			if err != nil {
				errorf(stderr, "sion pub: reading the payload: %v\n", err)
				return 1
			}
			if len(b) > maxPayloadBytes {
				errorf(stderr, "sion pub: -payload -: standard input holds more than %d bytes; %s\n", maxPayloadBytes, payloadLimit)
				return 1
			}
			ev.Data = b
		default:
			b, err := readPayload(*payload)
			if err != nil {
				errorf(stderr, "sion pub: %v\n", err)
				return 1
			}
			ev.Data = b
		}
		one = ev
	}
	s, err := dial(ctx, *server, "sion-pub", *keyFile, tf, reconnectPolicy("sion pub", *reconnect, stderr))
	if err != nil {
		errorf(stderr, "sion pub: %s: %v\n", *server, err)
		return 1
	}
	defer s.Close()
	if one != nil {
		if err := s.Publish(ctx, one); err != nil {
			errorf(stderr, "sion pub: %v\n", err)
			return 1
		}
		return 0
	}
	in := bufio.NewReaderSize(stdin, 64<<10)
	failed := false
	for line := 1; ; line++ {
		text, tooLong, err := readLine(in, maxLineBytes)
		switch {
		case tooLong:
			errorf(stderr, "sion pub: line %d: longer than %d bytes (%d MiB), the limit of a line of standard input; skipped\n", line, maxLineBytes, maxLineBytes>>20)
			failed = true
		case len(bytes.TrimSpace(text)) > 0:
			ev, perr := eventOfJSON(text)
			if perr == nil {
				perr = s.Publish(ctx, ev)
			}
			if perr != nil {
				errorf(stderr, "sion pub: line %d: %v\n", line, perr)
				failed = true
				if errors.Is(perr, sion.ErrClosed) || ctx.Err() != nil {
					errorf(stderr, "sion pub: lines after %d were not published\n", line)
					return 1
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			errorf(stderr, "sion pub: line %d: %v\n", line, err)
			return 1
		}
	}
	if failed {
		return 1
	}
	return 0
}

// readLine reads one line of r, without its newline: at most max bytes
// of it are kept; a longer line is read to its end and reported tooLong.
// err is io.EOF after the last line.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull && err != io.EOF {
			return nil, tooLong, err
		}
		if !tooLong {
			line = append(line, chunk...)
			if len(bytes.TrimSuffix(line, []byte("\n"))) > max {
				tooLong, line = true, nil
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if err == io.EOF && len(line) == 0 && !tooLong {
			return nil, false, io.EOF
		}
		return line, tooLong, err // err is nil or io.EOF
	}
}

// maxLineBytes bounds a JSON line of pub's standard input, newline
// excluded.
const maxLineBytes = 4 << 20

// maxPayloadBytes is the largest -payload pub sends: the payload limit
// of a place that serve runs (sion.DefaultMaxPayloadBytes), which keeps an
// event with its attributes within the transport's frame limit
// (transport.DefaultMaxFrameBytes, 1 MiB).
const maxPayloadBytes = sion.DefaultMaxPayloadBytes

// payloadLimit explains maxPayloadBytes in pub's errors.
var payloadLimit = fmt.Sprintf("a payload is at most %d bytes, so that the event fits the transport's frame of %d bytes", maxPayloadBytes, transport.DefaultMaxFrameBytes)

// readPayload returns the bytes of file, refusing one larger than
// maxPayloadBytes before reading it.
func readPayload(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > maxPayloadBytes {
		return nil, fmt.Errorf("-payload %s: %d bytes; %s", file, fi.Size(), payloadLimit)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPayloadBytes+1))
	if err != nil {
		return nil, fmt.Errorf("-payload %s: %w", file, err)
	}
	if len(b) > maxPayloadBytes {
		return nil, fmt.Errorf("-payload %s: more than %d bytes; %s", file, maxPayloadBytes, payloadLimit)
	}
	return b, nil
}

// guessValue reads an attribute value typed on a command line: an int, a
// float, true or false, an RFC 3339 time, or else a string.
func guessValue(s string) ontology.Value {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ontology.Int(i)
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xX_") {
		return ontology.Float(f)
	}
	if b, err := strconv.ParseBool(s); err == nil && (s == "true" || s == "false") {
		return ontology.Bool(b)
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil && ontology.TimeInRange(t) {
		return ontology.Time(t)
	}
	return ontology.String(s)
}

// eventOfJSON reads one line of "sion pub"'s standard input.
func eventOfJSON(line []byte) (*sion.Event, error) {
	var j struct {
		Type        string                     `json:"type"`
		Attrs       map[string]json.RawMessage `json:"attrs"`
		ContentType string                     `json:"content_type"`
		Data        json.RawMessage            `json:"data"`
		TraceParent string                     `json:"traceparent"`
		TraceState  string                     `json:"tracestate"`
	}
	if off, err := strictJSON(line, &j); err != nil {
		if off >= 0 {
			return nil, fmt.Errorf("column %d: %w", off+1, err)
		}
		return nil, err
	}
	if j.Type == "" {
		return nil, errors.New(`no "type"`)
	}
	ev := &sion.Event{Type: j.Type, ContentType: j.ContentType, TraceParent: j.TraceParent, TraceState: j.TraceState}
	for k, raw := range j.Attrs {
		v, err := jsonAttr(raw)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
		ev.Attrs = append(ev.Attrs, ontology.Attr{Name: k, Value: v})
	}
	if len(j.Data) > 0 {
		var s string
		if json.Unmarshal(j.Data, &s) == nil {
			ev.Data = []byte(s) // a string: its text
		} else {
			ev.Data = j.Data // a JSON value: its bytes
			if ev.ContentType == "" {
				ev.ContentType = "application/json"
			}
		}
	}
	return ev, nil
}

// jsonAttr reads an attribute's JSON value: a string (an RFC 3339 time if
// it reads as one), a number (an int if it is written as one), or a bool.
func jsonAttr(raw json.RawMessage) (ontology.Value, error) {
	var x any
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return ontology.Value{}, err
	}
	switch x := x.(type) {
	case string:
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil && ontology.TimeInRange(t) {
			return ontology.Time(t), nil
		}
		return ontology.String(x), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return ontology.Int(i), nil
		}
		f, err := x.Float64()
		if err != nil {
			return ontology.Value{}, fmt.Errorf("the number %s is not a float64", x)
		}
		return ontology.Float(f), nil
	case bool:
		return ontology.Bool(x), nil
	}
	return ontology.Value{}, fmt.Errorf("%s is not a string, number or bool", raw)
}

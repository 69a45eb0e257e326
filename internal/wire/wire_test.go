package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/ontology"
)

// Float values whose bits must survive the wire.
var (
	negZero   = math.Copysign(0, -1)
	nanFrames = math.Float64frombits(0x7ff8_0000_dead_beef) // quiet NaN with a payload
	nanSignal = math.Float64frombits(0xfff0_0000_0000_0001) // negative signalling NaN
	subnormal = math.Float64frombits(1)                     // smallest positive subnormal
)

func testID(first byte) [16]byte {
	var id [16]byte
	for i := range id {
		id[i] = first + byte(i)
	}
	return id
}

func realisticEvent() Event {
	return Event{
		ID:   testID(0xa0),
		Type: "music.BGM",
		Attrs: []ontology.Attr{
			{Name: "title", Value: ontology.String("Spring Breeze")},
			{Name: "tempo", Value: ontology.Int(120)},
			{Name: "loudness", Value: ontology.Float(-14.5)},
			{Name: "licensed", Value: ontology.Bool(true)},
			{Name: "released", Value: ontology.TimeNanos(1_700_000_000_123_456_789)},
			{Name: "季節", Value: ontology.String("春")},
		},
		ContentType: "application/json",
		Data:        []byte(`{"artist":"Quartet","duration":184,"tags":["calm","piano"]}`),
		Condition:   "tier >= 2",
		TTL:         7, Hops: 1, PlaceTTL: 2, PlaceHops: 0,
		Origin: "sw-tokyo-1", Place: "shibuya", Path: []string{"shibuya", "渋谷"},
	}
}

func extremeEvent() Event {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	return Event{
		ID:   [16]byte{0: 0xff, 15: 0xff},
		Type: strings.Repeat("型", 100),
		Attrs: []ontology.Attr{
			{Name: "min", Value: ontology.Int(math.MinInt64)},
			{Name: "max", Value: ontology.Int(math.MaxInt64)},
			{Name: "2^53+1", Value: ontology.Int(1<<53 + 1)},
			{Name: "-0", Value: ontology.Float(negZero)},
			{Name: "nan", Value: ontology.Float(nanFrames)},
			{Name: "snan", Value: ontology.Float(nanSignal)},
			{Name: "subnormal", Value: ontology.Float(subnormal)},
			{Name: "+inf", Value: ontology.Float(math.Inf(1))},
			{Name: "-inf", Value: ontology.Float(math.Inf(-1))},
			{Name: "maxfloat", Value: ontology.Float(math.MaxFloat64)},
			{Name: "false", Value: ontology.Bool(false)},
			{Name: "tmin", Value: ontology.TimeNanos(math.MinInt64)},
			{Name: "tmax", Value: ontology.TimeNanos(math.MaxInt64)},
			{Name: "", Value: ontology.String("")},
			{Name: "bytes", Value: ontology.String("\xff\xfe\x00")}, // string values may be any bytes
		},
		ContentType: "application/octet-stream",
		Data:        all,
		TTL:         math.MinInt32, Hops: math.MaxInt32, PlaceTTL: -1, PlaceHops: math.MaxInt32,
		Origin: "o", Place: strings.Repeat("p", 1000), Path: slices.Repeat([]string{"", strings.Repeat("q", 300)}, MaxPath/2),
		// The codec carries any UTF-8 here; the switch checks the grammar.
		TraceParent: "ff-痕跡", TraceState: strings.Repeat("ß", 300),
	}
}

// tracedEvent is realisticEvent with a W3C trace context.
func tracedEvent() Event {
	ev := realisticEvent()
	ev.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ev.TraceState = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
	return ev
}

type sample struct {
	name string
	msg  Message
}

// samples returns one or more messages of every kind, realistic and
// extreme, including zero values and empty (non-nil) slices.
func samples() []sample {
	profile := []ontology.Attr{
		{Name: "tier", Value: ontology.Int(2)},
		{Name: "lang", Value: ontology.String("ja")},
	}
	matched := []Match{{Sub: 1, Score: 1}, {Sub: 9, Score: 0.75}}
	extremeMatched := []Match{
		{Sub: 0, Score: negZero}, {Sub: math.MaxUint64, Score: nanFrames},
		{Sub: 1 << 63, Score: subnormal}, {Sub: 2, Score: math.Inf(-1)},
	}
	return []sample{
		{"Hello/realistic", &Hello{Version: 1, Session: "kiosk-7", Profile: profile, Token: []byte("s3cr3t")}},
		{"Hello/zero", &Hello{}},
		{"Hello/empty slices", &Hello{Profile: []ontology.Attr{}, Token: []byte{}}},
		{"Hello/extreme", &Hello{Version: math.MaxUint16, Session: "セッション", Profile: extremeEvent().Attrs, Token: []byte{0, 0xff},
			Resume: bytes.Repeat([]byte{0xab}, 16), Received: math.MaxUint64, RetentionMillis: math.MaxUint64, RetentionBytes: math.MaxUint64,
			SpoolSize: math.MaxUint32, SpoolRetentionMillis: math.MaxUint64}},
		{"Hello/resume", &Hello{Version: 2, Session: "kiosk-7", Resume: []byte("0123456789abcdef"), Received: 4711, RetentionMillis: 60000, RetentionBytes: 8 << 20, SpoolSize: 1024}},
		{"Welcome/realistic", &Welcome{Version: 1, Switch: "sw-tokyo-1", Place: "shibuya"}},
		{"Welcome/zero", &Welcome{}},
		{"Welcome/extreme", &Welcome{Version: math.MaxUint16, Switch: strings.Repeat("s", 300), Place: "∀", Token: []byte{0xff},
			Resumed: true, Expired: true, Requests: math.MaxUint64, Lost: []Count{{Sub: math.MaxUint64, N: math.MaxUint64}, {}},
			MaxPayloadBytes: math.MaxUint64, RetentionMillis: math.MaxUint64, RetentionBytes: math.MaxUint64}},
		{"Welcome/resumed", &Welcome{Version: 2, Switch: "sw-tokyo-1", Place: "shibuya", Token: []byte("0123456789abcdef"), Resumed: true, Requests: 42,
			Lost: []Count{{Sub: 3, N: 17}}, MaxPayloadBytes: 960 << 10, RetentionMillis: 60000, RetentionBytes: 8 << 20}},
		{"Welcome/empty lost", &Welcome{Lost: []Count{}}},
		{"Publish/realistic", &Publish{Seq: 42, Event: realisticEvent()}},
		{"Publish/extreme", &Publish{Seq: math.MaxUint64, Event: extremeEvent()}},
		{"Publish/traced", &Publish{Seq: 44, Event: tracedEvent()}},
		{"Forward/traced", &Forward{Event: tracedEvent()}},
		{"Deliver/traced", &Deliver{Event: tracedEvent(), Matched: matched}},
		{"Publish/zero", &Publish{}},
		{"Publish/empty slices", &Publish{Event: Event{Attrs: []ontology.Attr{}, Data: []byte{}}}},
		{"Subscribe/realistic", &Subscribe{Seq: 43, Sub: 1, Filter: `music.BGM && tempo >= 120`, Queue: 256, Overflow: 1, TTL: 3}},
		{"Subscribe/extreme", &Subscribe{Seq: math.MaxUint64, Sub: math.MaxUint64, Filter: strings.Repeat("a", 4096), Queue: math.MaxUint32, Overflow: 255, LookIn: true, TTL: math.MinInt32}},
		{"Subscribe/zero", &Subscribe{}},
		{"Unsubscribe/realistic", &Unsubscribe{Seq: 44, Sub: 1}},
		{"Unsubscribe/extreme", &Unsubscribe{Seq: math.MaxUint64, Sub: math.MaxUint64}},
		{"SetProfile/realistic", &SetProfile{Seq: 45, Profile: profile}},
		{"SetProfile/nil", &SetProfile{Seq: 1}},
		{"SetProfile/empty", &SetProfile{Seq: 1, Profile: []ontology.Attr{}}},
		{"SetProfile/minimal attributes", &SetProfile{Profile: []ontology.Attr{{Value: ontology.Bool(false)}, {Value: ontology.String("")}}}},
		{"Pull/realistic", &Pull{Seq: 46, Max: 100}},
		{"Pull/extreme", &Pull{Seq: math.MaxUint64, Max: math.MaxUint32}},
		{"Deliver/realistic", &Deliver{Event: realisticEvent(), Matched: matched}},
		{"Deliver/extreme", &Deliver{Event: extremeEvent(), Matched: extremeMatched}},
		{"Deliver/empty", &Deliver{Matched: []Match{}}},
		{"PullReply/realistic", &PullReply{Seq: 46, Deliveries: []Delivery{
			{Event: realisticEvent(), Matched: matched},
			{Event: Event{ID: testID(1), Type: "news"}, Matched: matched[:1]},
			{Event: extremeEvent(), Matched: extremeMatched},
		}}},
		{"PullReply/nil", &PullReply{Seq: 1}},
		{"PullReply/empty", &PullReply{Seq: 1, Deliveries: []Delivery{}}},
		{"PullReply/empty delivery", &PullReply{Deliveries: []Delivery{{Matched: []Match{}}}}},
		{"Ack/zero", &Ack{}},
		{"Ack/max", &Ack{Seq: math.MaxUint64}},
		{"Error/realistic", &Error{Seq: 43, Code: 400, Message: `filter: unknown attribute "tempoo"`}},
		{"Error/extreme", &Error{Seq: math.MaxUint64, Code: math.MaxUint16, Message: "bad \xff bytes"}},
		{"Error/zero", &Error{}},
		{"Bye", &Bye{}},
		{"Forward/realistic", &Forward{Event: realisticEvent()}},
		{"Forward/extreme", &Forward{Event: extremeEvent()}},
		{"Forward/empty", &Forward{}},
		{"Challenge/realistic", &Challenge{Nonce: bytes.Repeat([]byte{7}, 32), Proof: bytes.Repeat([]byte{0xfe}, 32)}},
		{"Challenge/empty", &Challenge{}},
		{"Response/realistic", &Response{Proof: bytes.Repeat([]byte{1}, 32)}},
		{"Response/empty", &Response{}},
		{"Received/zero", &Received{}},
		{"Received/max", &Received{Frames: math.MaxUint64}},
		{"Lost/realistic", &Lost{Lost: []Count{{Sub: 1, N: 3}, {Sub: 9, N: 1}}}},
		{"Lost/empty", &Lost{Lost: []Count{}}},
		{"Control/realistic", &Control{Body: []byte("\x04\x01\x07\x0e{type ⊑ X}\x06\x00")}},
		{"Control/zero", &Control{}},
		{"Control/empty", &Control{Body: []byte{}}},
		{"Control/any bytes", &Control{Body: []byte{0, 0xff, 0x80, FrameVersion, byte(KindControl)}}},
		{"Control/large", &Control{Body: bytes.Repeat([]byte{0xa5}, 64<<10)}},
		{"Advertise/realistic", &Advertise{Seq: 47, Type: "music.BGM", Attrs: []ontology.Attr{{Name: "季節", Value: ontology.String("春")}, {Name: "tempo", Value: ontology.Int(120)}}}},
		{"Advertise/type only", &Advertise{Seq: 1, Type: "Alarm"}},
		{"Advertise/empty attributes", &Advertise{Seq: 1, Type: "Alarm", Attrs: []ontology.Attr{}}},
		{"Advertise/zero", &Advertise{}},
		{"Advertise/extreme", &Advertise{Seq: math.MaxUint64, Type: strings.Repeat("型", 100), Attrs: extremeEvent().Attrs}},
	}
}

// normal returns a deep copy of m as Decode returns it: every empty slice
// nil (the format does not tell nil from empty), and every Match.Score set
// to 0, its bits returned separately so that floats compare bit for bit
// (reflect.DeepEqual compares ontology.Value's float by its bits already).
func normal(m Message) (Message, []uint64) {
	var bits []uint64
	attrs := func(as []ontology.Attr) []ontology.Attr {
		if len(as) == 0 {
			return nil
		}
		return append([]ontology.Attr(nil), as...)
	}
	data := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		return append([]byte(nil), b...)
	}
	event := func(ev Event) Event {
		ev.Attrs, ev.Data = attrs(ev.Attrs), data(ev.Data)
		return ev
	}
	matches := func(ms []Match) []Match {
		if len(ms) == 0 {
			return nil
		}
		out := make([]Match, len(ms))
		for i, mt := range ms {
			bits = append(bits, math.Float64bits(mt.Score))
			out[i] = Match{Sub: mt.Sub}
		}
		return out
	}
	switch m := m.(type) {
	case *Hello:
		c := *m
		c.Profile, c.Token, c.Resume = attrs(m.Profile), data(m.Token), data(m.Resume)
		return &c, nil
	case *Welcome:
		c := *m
		c.Token = data(m.Token)
		if len(c.Lost) == 0 {
			c.Lost = nil
		}
		return &c, nil
	case *Control:
		return &Control{Body: data(m.Body)}, nil
	case *Lost:
		if len(m.Lost) == 0 {
			return &Lost{}, nil
		}
		return m, nil
	case *SetProfile:
		return &SetProfile{Seq: m.Seq, Profile: attrs(m.Profile)}, nil
	case *Advertise:
		return &Advertise{Seq: m.Seq, Type: m.Type, Attrs: attrs(m.Attrs)}, nil
	case *Publish:
		return &Publish{Seq: m.Seq, Event: event(m.Event)}, nil
	case *Deliver:
		return &Deliver{Event: event(m.Event), Matched: matches(m.Matched)}, bits
	case *PullReply:
		out := &PullReply{Seq: m.Seq}
		for _, d := range m.Deliveries {
			out.Deliveries = append(out.Deliveries, Delivery{Event: event(d.Event), Matched: matches(d.Matched)})
		}
		return out, bits
	}
	return m, nil
}

// assertSameMessage asserts that got is want as Decode returns it.
func assertSameMessage(t *testing.T, want, got Message) {
	t.Helper()
	wantN, wantBits := normal(want)
	gotN, gotBits := normal(got)
	assert.Equal(t, wantN, gotN)
	assert.Equal(t, wantBits, gotBits, "Match.Score bits")
}

// assertOneSentinel asserts that err is a *FrameError wrapping target and
// no other sentinel.
func assertOneSentinel(t *testing.T, err, target error) {
	t.Helper()
	var fe *FrameError
	require.ErrorAs(t, err, &fe)
	for _, s := range []error{ErrMalformed, ErrTooLarge, ErrVersion} {
		assert.Equal(t, s == target, errors.Is(err, s), "errors.Is(%v, %v)", err, s)
	}
}

func encode(t testing.TB, m Message) []byte {
	t.Helper()
	frame, err := Encode(nil, m)
	require.NoError(t, err)
	return frame
}

func TestRoundTrip(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			frame := encode(t, s.msg)
			require.GreaterOrEqual(t, len(frame), 2)
			assert.Equal(t, byte(FrameVersion), frame[0])
			assert.Equal(t, byte(s.msg.Kind()), frame[1])

			got, err := Decode(frame, Limits{})
			require.NoError(t, err)
			assertSameMessage(t, s.msg, got)

			again := encode(t, got)
			assert.Equal(t, frame, again, "encoding is canonical")

			if f, ok := s.msg.(*Forward); ok {
				out, err := EncodeForward([]byte("xyz"), &f.Event, Limits{})
				require.NoError(t, err)
				assert.Equal(t, append([]byte("xyz"), frame...), out, "EncodeForward")
			}
			reused := &Forward{Event: extremeEvent()} // overwritten by a Forward frame
			got, err = DecodeReusing(frame, Limits{}, reused)
			require.NoError(t, err)
			assertSameMessage(t, s.msg, got)
			if _, ok := s.msg.(*Forward); ok {
				assert.Same(t, reused, got, "DecodeReusing")
			}
			if h := sizeHint(s.msg); h > 0 { // the frame is made in one allocation
				assert.GreaterOrEqual(t, h, len(frame), "sizeHint")
				assert.LessOrEqual(t, h, 2*len(frame)+64, "sizeHint")
			}

			out, err := Encode([]byte("xyz"), s.msg)
			require.NoError(t, err)
			assert.Equal(t, append([]byte("xyz"), frame...), out, "Encode appends")
		})
	}
}

func TestValuesBitExact(t *testing.T) {
	tests := []struct {
		name string
		v    ontology.Value
	}{
		{"int min", ontology.Int(math.MinInt64)},
		{"int max", ontology.Int(math.MaxInt64)},
		{"int 2^53+1", ontology.Int(1<<53 + 1)},
		{"int -1", ontology.Int(-1)},
		{"time min", ontology.TimeNanos(math.MinInt64)},
		{"time max", ontology.TimeNanos(math.MaxInt64)},
		{"float -0", ontology.Float(negZero)},
		{"float +0", ontology.Float(0)},
		{"float NaN payload", ontology.Float(nanFrames)},
		{"float signalling NaN", ontology.Float(nanSignal)},
		{"float subnormal", ontology.Float(subnormal)},
		{"float -subnormal", ontology.Float(-subnormal)},
		{"float +Inf", ontology.Float(math.Inf(1))},
		{"float -Inf", ontology.Float(math.Inf(-1))},
		{"float 2^53+2", ontology.Float(1<<53 + 2)},
		{"bool true", ontology.Bool(true)},
		{"string bytes", ontology.String("\x00\xff")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Deliver{
				Event:   Event{Attrs: []ontology.Attr{{Name: "v", Value: tt.v}}},
				Matched: []Match{{Sub: 1, Score: tt.v.Float()}},
			}
			got, err := Decode(encode(t, m), Limits{})
			require.NoError(t, err)
			d := got.(*Deliver)
			v := d.Event.Attrs[0].Value
			assert.Equal(t, tt.v.Kind(), v.Kind())
			assert.Equal(t, tt.v.Int(), v.Int())
			assert.Equal(t, tt.v.Str(), v.Str())
			assert.Equal(t, tt.v.Bool(), v.Bool())
			assert.Equal(t, math.Float64bits(tt.v.Float()), math.Float64bits(v.Float()))
			assert.Equal(t, math.Float64bits(tt.v.Float()), math.Float64bits(d.Matched[0].Score))
		})
	}
}

func TestNilAndEmptyDecodeAsNil(t *testing.T) {
	empty := &Publish{Event: Event{Attrs: []ontology.Attr{}, Data: []byte{}}}
	frame := encode(t, empty)
	assert.Equal(t, encode(t, &Publish{}), frame, "nil and empty encode alike")
	got, err := Decode(frame, Limits{})
	require.NoError(t, err)
	ev := got.(*Publish).Event
	assert.Nil(t, ev.Attrs)
	assert.Nil(t, ev.Data)
}

func TestDecodeDoesNotKeepFrame(t *testing.T) {
	m := &Publish{Event: realisticEvent()}
	frame := encode(t, m)
	got, err := Decode(frame, Limits{})
	require.NoError(t, err)
	for i := range frame {
		frame[i] = 0xee
	}
	assertSameMessage(t, m, got)
}

// TestGoldenPublish pins the format: if this fails, the encoding changed,
// which needs a new FrameVersion.
func TestGoldenPublish(t *testing.T) {
	m := &Publish{Seq: 1, Event: Event{
		ID:   testID(0),
		Type: "news",
		Attrs: []ontology.Attr{
			{Name: "n", Value: ontology.Int(-1)},
			{Name: "x", Value: ontology.Float(1.5)},
		},
		Data:   []byte("{}"),
		TTL:    3,
		Origin: "sw1",
	}}
	want := []byte{
		0x07, 0x03, // version 7, KindPublish
		0x01,                                                                                           // Seq 1
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, // ID
		0x04, 'n', 'e', 'w', 's', // Type
		0x02,                  // 2 attributes
		0x01, 'n', 0x02, 0x01, // "n": int, zigzag(-1) = 1
		0x01, 'x', 0x03, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, // "x": float 1.5, little-endian bits
		0x00,           // ContentType ""
		0x02, '{', '}', // Data
		0x00,                   // Condition ""
		0x06, 0x00, 0x00, 0x00, // TTL zigzag(3) = 6, Hops, PlaceTTL, PlaceHops
		0x03, 's', 'w', '1', // Origin
		0x00, // Place ""
		0x00, // Path: no places
		0x00, // TraceParent ""
		0x00, // TraceState ""
	}
	assert.Equal(t, want, encode(t, m))
	got, err := Decode(want, Limits{})
	require.NoError(t, err)
	assertSameMessage(t, m, got)
}

// TestGoldenAdvertise pins the Advertise frame (kind 19, new in version
// 6; unchanged in 7): if this fails, the encoding changed, which needs a new FrameVersion.
func TestGoldenAdvertise(t *testing.T) {
	m := &Advertise{Seq: 2, Type: "Alarm", Attrs: []ontology.Attr{{Name: "zone", Value: ontology.String("hall")}}}
	want := []byte{
		0x07, 0x13, // version 7, KindAdvertise
		0x02,                          // Seq 2
		0x05, 'A', 'l', 'a', 'r', 'm', // Type
		0x01,                                                     // 1 attribute
		0x04, 'z', 'o', 'n', 'e', 0x01, 0x04, 'h', 'a', 'l', 'l', // "zone": string "hall"
	}
	assert.Equal(t, want, encode(t, m))
	got, err := Decode(want, Limits{})
	require.NoError(t, err)
	assertSameMessage(t, m, got)
}

func TestTruncatedFramesFail(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			frame := encode(t, s.msg)
			for i := range len(frame) {
				if s.msg.Kind() == KindControl && i >= 2 {
					break // the body is the rest of the frame: see TestControlTruncated
				}
				m, err := Decode(frame[:i:i], Limits{})
				if !assert.Error(t, err, "prefix of %d bytes", i) {
					continue
				}
				assert.Nil(t, m)
				assert.ErrorIs(t, err, ErrMalformed, "prefix of %d bytes", i)
			}
		})
	}
}

// builder hand-writes frames for the malformed cases.
type builder []byte

func newFrame(k Kind) builder           { return builder{FrameVersion, byte(k)} }
func (b builder) u(v uint64) builder    { return binary.AppendUvarint(b, v) }
func (b builder) z(v int64) builder     { return binary.AppendVarint(b, v) }
func (b builder) raw(p ...byte) builder { return append(b, p...) }
func (b builder) s(s string) builder    { return append(b.u(uint64(len(s))), s...) }
func (b builder) id() builder           { return append(b, make([]byte, 16)...) }
func (b builder) eventTail() builder {
	return b.s("").u(0).s("").z(0).z(0).z(0).z(0).s("").s("").u(0).s("").s("")
}
func (b builder) eventAfterType() builder { return b.u(0).eventTail() }

func TestDecodeMalformed(t *testing.T) {
	publish := newFrame(KindPublish).u(0).id() // up to the event's type
	attrs3 := publish.s("t").u(4)
	for i := range 3 {
		attrs3 = attrs3.s(fmt.Sprint("a", i)).raw(valBool, 1)
	}
	exampleOff := len(attrs3)
	example := attrs3.u(900).raw(make([]byte, 12)...)

	tests := []struct {
		name  string
		frame []byte
		err   error
		text  string // a substring of the error
	}{
		{"empty frame", nil, ErrMalformed, "wire: malformed frame: version: truncated at offset 0"},
		{"no kind", []byte{FrameVersion}, ErrMalformed, "kind: truncated at offset 1"},
		{"version 0", []byte{0, byte(KindBye)}, ErrVersion, "version: version 0, want 7 at offset 0"},
		{"version 2", []byte{2, byte(KindBye)}, ErrVersion, "version 2, want 7"},
		{"version 4, before Control", []byte{4, byte(KindBye)}, ErrVersion, "version 4, want 7"},
		{"version 4 Control", []byte{4, byte(KindControl), 1}, ErrVersion, "wire: frame of an unsupported version: version: version 4, want 7"},
		{"version 5, before Advertise", []byte{5, byte(KindBye)}, ErrVersion, "version 5, want 7"},
		{"version 5 Advertise", []byte{5, byte(KindAdvertise), 1, 1, 'A', 0}, ErrVersion, "wire: frame of an unsupported version: version: version 5, want 7"},
		{"version 6, before trace context", []byte{6, byte(KindBye)}, ErrVersion, "version 6, want 7"},
		{"version 6 Publish", []byte{6, byte(KindPublish), 1}, ErrVersion, "wire: frame of an unsupported version: version: version 6, want 7"},
		{"version 8", []byte{8, byte(KindBye)}, ErrVersion, "version 8, want 7"},
		{"version 255 truncated", []byte{255}, ErrVersion, "version 255"},
		{"kind 0", newFrame(0), ErrMalformed, "kind: unknown kind 0 at offset 1"},
		{"kind 20", newFrame(20), ErrMalformed, "unknown kind 20"},
		{"kind 255", newFrame(255).u(1), ErrMalformed, "unknown kind 255"},
		{"trailing byte after Bye", newFrame(KindBye).raw(0), ErrMalformed, "wire: malformed Bye frame: end: 1 trailing bytes at offset 2"},
		{"trailing byte after Ack", newFrame(KindAck).u(7).raw(0), ErrMalformed, "1 trailing bytes at offset 3"},
		{"length prefix 2^62 for type", publish.u(1 << 62), ErrMalformed, "event type: length 4611686018427387904 exceeds remaining 0 bytes at offset 19"},
		{"length prefix 2^62 for data", publish.s("t").u(0).s("").u(1 << 62), ErrMalformed, "event data: length 4611686018427387904 exceeds remaining"},
		{"attribute count 2^62", publish.s("t").u(1 << 62), ErrMalformed, "event attribute count: count 4611686018427387904 needs at least 3 bytes per element"},
		{"delivery count 2^62", newFrame(KindPullReply).u(0).u(1 << 62), ErrMalformed, "delivery count: count 4611686018427387904"},
		{"path count over the limit", newFrame(KindPublish).u(0).id().s("t").u(0).s("").u(0).s("").z(0).z(0).z(0).z(0).s("").s("").u(MaxPath + 1).raw(bytes.Repeat([]byte{0}, MaxPath+1)...), ErrTooLarge, "path count: count 65 exceeds limit 64"},
		{"match count 2^62", newFrame(KindDeliver).id().s("t").eventAfterType().u(1 << 62), ErrMalformed, "match count"},
		{"the doc's example", example, ErrMalformed, fmt.Sprintf("wire: malformed Publish frame: event attribute 3 name: length 900 exceeds remaining 12 bytes at offset %d", exampleOff)},
		{"invalid UTF-8 in attribute name", publish.s("t").u(1).s("a\xffb").raw(valBool, 0).eventTail(), ErrMalformed, "event attribute 0 name: invalid UTF-8"},
		{"invalid UTF-8 in type", publish.s("\xc0\x80").eventAfterType(), ErrMalformed, "event type: invalid UTF-8"},
		{"invalid UTF-8 in profile name", newFrame(KindSetProfile).u(0).u(1).s("\xed\xa0\x80").raw(valBool, 0), ErrMalformed, "profile attribute 0 name: invalid UTF-8"},
		{"invalid UTF-8 in filter", newFrame(KindSubscribe).u(0).u(0).s("\xff").u(0).raw(0, 0), ErrMalformed, "filter: invalid UTF-8"},
		{"truncated ID", newFrame(KindPublish).u(0).raw(1, 2, 3), ErrMalformed, "event id: needs 16 bytes, 3 remain"},
		{"non-minimal varint", newFrame(KindAck).raw(0x80, 0x00), ErrMalformed, "seq: non-minimal varint at offset 2"},
		{"non-minimal 10-byte varint", newFrame(KindAck).raw(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00), ErrMalformed, "non-minimal varint"},
		{"varint overflows", newFrame(KindAck).raw(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02), ErrMalformed, "varint overflows 64 bits"},
		{"11-byte varint", newFrame(KindAck).raw(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01), ErrMalformed, "varint longer than 10 bytes"},
		{"truncated varint", newFrame(KindAck).raw(0x80), ErrMalformed, "seq: truncated varint"},
		{"TTL above int32", publish.s("t").u(0).s("").u(0).s("").z(1 << 31), ErrMalformed, "event ttl: value 2147483648 out of int32 range"},
		{"place hops below int32", publish.s("t").u(0).s("").u(0).s("").z(0).z(0).z(0).z(math.MinInt32 - 1), ErrMalformed, "event place hops: value -2147483649 out of int32 range"},
		{"Hello version 65536", newFrame(KindHello).u(1 << 16).s("").u(0).u(0), ErrMalformed, "version: value 65536 exceeds 65535"},
		{"Error code 65536", newFrame(KindError).u(0).u(1 << 16).s(""), ErrMalformed, "code: value 65536 exceeds 65535"},
		{"Subscribe queue 2^32", newFrame(KindSubscribe).u(0).u(0).s("").u(1<<32).raw(0, 0), ErrMalformed, "queue: value 4294967296 exceeds 4294967295"},
		{"Pull max 2^32", newFrame(KindPull).u(0).u(1 << 32), ErrMalformed, "max: value 4294967296"},
		{"Hello spool size 2^32", newFrame(KindHello).u(2).s("").u(0).u(0).u(0).u(0).u(0).u(0).u(1 << 32).u(0), ErrMalformed, "spool size: value 4294967296"},
		{"Welcome bool byte 2", newFrame(KindWelcome).u(2).s("").s("").u(0).raw(2), ErrMalformed, "resumed: bool byte 2"},
		{"Lost count beyond the frame", newFrame(KindLost).u(3).u(1).u(1), ErrMalformed, "lost count: count 3 needs at least 2 bytes per element, 2 remain"},
		{"Received truncated", newFrame(KindReceived).raw(0x80), ErrMalformed, "frames: truncated varint"},
		{"bool byte 2", newFrame(KindSubscribe).u(0).u(0).s("").u(0).raw(0, 2), ErrMalformed, "look-in: bool byte 2"},
		{"bool value byte 2", publish.s("t").u(1).s("b").raw(valBool, 2).eventTail(), ErrMalformed, "event attribute 0 value: bool byte 2"},
		{"value kind 0", publish.s("t").u(1).s("v").raw(0).eventTail(), ErrMalformed, "event attribute 0 value: invalid value kind 0"},
		{"value kind 6", publish.s("t").u(1).s("v").raw(6, 0).eventTail(), ErrMalformed, "invalid value kind 6"},
		{"truncated float", publish.s("t").u(1).s("f").raw(valFloat, 1, 2, 3, 4, 5, 6, 7), ErrMalformed, "event attribute 0 value: float needs 8 bytes, 7 remain"},
		{"truncated before traceparent", publish.s("t").u(0).s("").u(0).s("").z(0).z(0).z(0).z(0).s("").s("").u(0), ErrMalformed, "event traceparent: truncated"},
		{"invalid UTF-8 in traceparent", publish.s("t").u(0).s("").u(0).s("").z(0).z(0).z(0).z(0).s("").s("").u(0).s("\xff").s(""), ErrMalformed, "event traceparent: invalid UTF-8"},
		{"tracestate beyond the frame", publish.s("t").u(0).s("").u(0).s("").z(0).z(0).z(0).z(0).s("").s("").u(0).s("").u(64<<10 + 1), ErrMalformed, "event tracestate: length 65537 exceeds remaining 0 bytes at offset 33"},
		{"match count beyond the frame", newFrame(KindDeliver).id().s("t").eventAfterType().u(1).u(1).raw(1, 2, 3, 4, 5, 6, 7), ErrMalformed, "match count: count 1 needs at least 9 bytes per element, 8 remain"},
		{"delivery event error names its place", newFrame(KindPullReply).u(0).u(1).id().s("\xff").eventAfterType().u(0), ErrMalformed, "wire: malformed PullReply frame: delivery 0 event type: invalid UTF-8"},
		{"Advertise empty body", newFrame(KindAdvertise), ErrMalformed, "wire: malformed Advertise frame: seq: truncated"},
		{"Advertise without attributes", newFrame(KindAdvertise).u(1).s("Alarm"), ErrMalformed, "attribute count: truncated"},
		{"invalid UTF-8 in advertised type", newFrame(KindAdvertise).u(1).s("\xff").u(0), ErrMalformed, "wire: malformed Advertise frame: type: invalid UTF-8 at offset 3"},
		{"invalid UTF-8 in advertised attribute name", newFrame(KindAdvertise).u(1).s("Alarm").u(1).s("\xc0\x80").raw(valBool, 1), ErrMalformed, "Advertise frame: attribute 0 name: invalid UTF-8"},
		{"advertised attribute count beyond the frame", newFrame(KindAdvertise).u(1).s("Alarm").u(2).s("a").raw(valBool, 1), ErrMalformed, "attribute count: count 2 needs at least 3 bytes per element"},
		{"advertised value kind 0", newFrame(KindAdvertise).u(1).s("Alarm").u(1).s("a").raw(0), ErrMalformed, "attribute 0 value: invalid value kind 0"},
		{"advertised bool byte 2", newFrame(KindAdvertise).u(1).s("Alarm").u(1).s("a").raw(valBool, 2), ErrMalformed, "attribute 0 value: bool byte 2"},
		{"Advertise seq non-minimal", newFrame(KindAdvertise).raw(0x81, 0x00).s("Alarm").u(0), ErrMalformed, "seq: non-minimal varint at offset 2"},
		{"trailing byte after Advertise", newFrame(KindAdvertise).u(1).s("Alarm").u(0).raw(0), ErrMalformed, "wire: malformed Advertise frame: end: 1 trailing bytes at offset 10"},
		{"advertised attribute count over the limit", newFrame(KindAdvertise).u(1).s("A").u(257).raw(bytes.Repeat([]byte{0, valBool, 0}, 257)...), ErrTooLarge, "attribute count: count 257 exceeds limit 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(tt.frame, Limits{})
			require.Error(t, err)
			assert.Nil(t, m)
			assertOneSentinel(t, err, tt.err)
			assert.Contains(t, err.Error(), tt.text)
		})
	}
}

// TestControl checks that a Control frame is the kind byte followed by
// the body as is, and that the decoded body is the caller's to keep.
func TestControl(t *testing.T) {
	tests := []struct {
		name  string
		body  []byte
		frame []byte
	}{
		{"nil", nil, []byte{FrameVersion, byte(KindControl)}},
		{"empty", []byte{}, []byte{FrameVersion, byte(KindControl)}},
		{"one byte", []byte{0}, []byte{FrameVersion, byte(KindControl), 0}},
		{"no length prefix", []byte("abc"), []byte{FrameVersion, byte(KindControl), 'a', 'b', 'c'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame := encode(t, &Control{Body: tt.body})
			assert.Equal(t, tt.frame, frame)

			got, err := Decode(frame, Limits{})
			require.NoError(t, err)
			c, ok := got.(*Control)
			require.True(t, ok, "%T", got)
			if len(tt.body) == 0 {
				assert.Nil(t, c.Body, "an empty body decodes as nil")
				return
			}
			assert.Equal(t, tt.body, c.Body)
			for i := range frame {
				frame[i] = 0xee
			}
			assert.Equal(t, tt.body, c.Body, "the body does not share the frame's memory")
		})
	}
}

// TestControlTruncated documents that the wire cannot tell a truncated
// Control body, which has no length prefix: every prefix after the kind
// byte is a shorter body, and the transport's whole frames are what keep
// it intact (internal/linkctl's grammar then refuses a short message).
func TestControlTruncated(t *testing.T) {
	frame := encode(t, &Control{Body: []byte("abcdef")})
	for i := 2; i <= len(frame); i++ {
		m, err := Decode(frame[:i:i], Limits{})
		require.NoError(t, err, "prefix of %d bytes", i)
		assertSameMessage(t, &Control{Body: frame[2:i]}, m)
	}
}

func TestControlOversizedNotCopied(t *testing.T) {
	lim := Limits{MaxFrameBytes: 64}
	_, err := EncodeLimits(nil, &Control{Body: make([]byte, 63)}, lim)
	assertOneSentinel(t, err, ErrTooLarge)
	assert.Equal(t, "wire: cannot encode Control frame: frame: length 65 exceeds limit 64 at offset 0", err.Error())

	frame := append([]byte{FrameVersion, byte(KindControl)}, make([]byte, 63)...)
	_, err = Decode(frame, lim)
	assertOneSentinel(t, err, ErrTooLarge)
	assert.Equal(t, "wire: oversized Control frame: frame: length 65 exceeds limit 64 at offset 0", err.Error())

	dst := []byte("keep")
	out, err := EncodeLimits(dst, &Control{Body: make([]byte, 1<<20)}, Limits{})
	assertOneSentinel(t, err, ErrTooLarge)
	assert.Equal(t, []byte("keep"), out)
}

func TestFrameError(t *testing.T) {
	_, err := Decode(newFrame(KindPublish).u(0).id().s("\xff"), Limits{})
	var fe *FrameError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, &FrameError{Kind: KindPublish, Field: "event type", Offset: 19, Reason: "invalid UTF-8", Err: ErrMalformed}, fe)
	assert.Equal(t, "wire: malformed Publish frame: event type: invalid UTF-8 at offset 19", err.Error())
}

func TestEncodeRefuses(t *testing.T) {
	zero := []ontology.Attr{{Name: "z"}}
	tests := []struct {
		name string
		msg  Message
		text string
	}{
		{"nil Message", nil, "wire: cannot encode frame: message: nil Message"},
		{"nil *Publish", (*Publish)(nil), "cannot encode Publish frame: message: nil *Publish at offset 0"},
		{"nil *Bye", (*Bye)(nil), "nil *Bye"},
		{"nil *Control", (*Control)(nil), "cannot encode Control frame: message: nil *Control at offset 0"},
		{"zero Value in event", &Publish{Event: Event{Attrs: zero}}, "event attribute 0 value: zero Value"},
		{"zero Value in profile", &SetProfile{Profile: zero}, "profile attribute 0 value: zero Value"},
		{"zero Value in advertisement", &Advertise{Type: "Alarm", Attrs: zero}, "cannot encode Advertise frame: attribute 0 value: zero Value"},
		{"invalid UTF-8 in advertised type", &Advertise{Type: "\xff"}, "cannot encode Advertise frame: type: invalid UTF-8 at offset 3"},
		{"nil *Advertise", (*Advertise)(nil), "cannot encode Advertise frame: message: nil *Advertise at offset 0"},
		{"zero Value in delivery", &PullReply{Deliveries: []Delivery{{}, {Event: Event{Attrs: zero}}}}, "delivery 1 event attribute 0 value: zero Value"},
		{"invalid UTF-8 in type", &Publish{Event: Event{Type: "\xff"}}, "event type: invalid UTF-8 at offset 19"},
		{"invalid UTF-8 in name", &Deliver{Event: Event{Attrs: []ontology.Attr{{Name: "\xff", Value: ontology.Int(1)}}}}, "event attribute 0 name: invalid UTF-8"},
		{"invalid UTF-8 in session", &Hello{Session: "\xff"}, "session: invalid UTF-8"},
		{"invalid UTF-8 in filter", &Subscribe{Filter: "\xff"}, "filter: invalid UTF-8"},
		{"invalid UTF-8 in condition", &Publish{Event: Event{Condition: "\xff"}}, "event condition: invalid UTF-8"},
		{"invalid UTF-8 in origin", &Publish{Event: Event{Origin: "\xff"}}, "event origin: invalid UTF-8"},
		{"invalid UTF-8 in traceparent", &Forward{Event: Event{TraceParent: "\xff"}}, "event traceparent: invalid UTF-8"},
		{"invalid UTF-8 in tracestate", &Deliver{Event: Event{TraceState: "a=\xff"}}, "event tracestate: invalid UTF-8"},
		{"invalid UTF-8 in place", &Welcome{Place: "\xff"}, "place: invalid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]byte, 3, 64)
			out, err := Encode(dst, tt.msg)
			require.Error(t, err)
			assertOneSentinel(t, err, ErrMalformed)
			assert.Contains(t, err.Error(), tt.text)
			assert.Equal(t, dst, out, "dst comes back unchanged")
		})
	}
}

func TestLimits(t *testing.T) {
	str := func(n int) string { return strings.Repeat("x", n) }
	attrs := func(n int) []ontology.Attr {
		as := make([]ontology.Attr, n)
		for i := range as {
			as[i] = ontology.Attr{Name: fmt.Sprint(i), Value: ontology.Int(int64(i))}
		}
		return as
	}
	frameLen := len(encode(t, &Publish{Event: Event{Data: make([]byte, 100)}}))
	tests := []struct {
		name     string
		lim      Limits
		at, over Message
		field    string
	}{
		{"MaxFrameBytes", Limits{MaxFrameBytes: frameLen}, &Publish{Event: Event{Data: make([]byte, 100)}}, &Publish{Event: Event{Data: make([]byte, 101)}}, "frame"},
		{"MaxAttrs event", Limits{MaxAttrs: 2}, &Publish{Event: Event{Attrs: attrs(2)}}, &Publish{Event: Event{Attrs: attrs(3)}}, "event attribute count"},
		{"MaxAttrs profile", Limits{MaxAttrs: 2}, &Hello{Profile: attrs(2)}, &Hello{Profile: attrs(3)}, "profile attribute count"},
		{"MaxAttrs advertisement", Limits{MaxAttrs: 2}, &Advertise{Attrs: attrs(2)}, &Advertise{Attrs: attrs(3)}, "attribute count"},
		{"MaxStringBytes advertised type", Limits{MaxStringBytes: 8}, &Advertise{Type: str(8)}, &Advertise{Type: str(9)}, "type"},
		{"MaxStringBytes type", Limits{MaxStringBytes: 8}, &Publish{Event: Event{Type: str(8)}}, &Publish{Event: Event{Type: str(9)}}, "event type"},
		{"MaxStringBytes value", Limits{MaxStringBytes: 8}, &Publish{Event: Event{Attrs: []ontology.Attr{{Name: "s", Value: ontology.String(str(8))}}}}, &Publish{Event: Event{Attrs: []ontology.Attr{{Name: "s", Value: ontology.String(str(9))}}}}, "event attribute 0 value"},
		{"MaxStringBytes token", Limits{MaxStringBytes: 8}, &Hello{Token: make([]byte, 8)}, &Hello{Token: make([]byte, 9)}, "token"},
		{"MaxStringBytes resume", Limits{MaxStringBytes: 8}, &Hello{Resume: make([]byte, 8)}, &Hello{Resume: make([]byte, 9)}, "resume"},
		{"MaxMatches lost", Limits{MaxMatches: 2}, &Lost{Lost: make([]Count, 2)}, &Lost{Lost: make([]Count, 3)}, "lost count"},
		{"MaxMatches welcome lost", Limits{MaxMatches: 2}, &Welcome{Lost: make([]Count, 2)}, &Welcome{Lost: make([]Count, 3)}, "lost count"},
		{"MaxStringBytes filter", Limits{MaxStringBytes: 8}, &Subscribe{Filter: str(8)}, &Subscribe{Filter: str(9)}, "filter"},
		{"MaxStringBytes error message", Limits{MaxStringBytes: 8}, &Error{Message: str(8)}, &Error{Message: str(9)}, "message"},
		{"MaxDataBytes", Limits{MaxDataBytes: 4}, &Deliver{Event: Event{Data: make([]byte, 4)}}, &Deliver{Event: Event{Data: make([]byte, 5)}}, "event data"},
		{"MaxMatches", Limits{MaxMatches: 2}, &Deliver{Matched: make([]Match, 2)}, &Deliver{Matched: make([]Match, 3)}, "match count"},
		{"MaxMatches in PullReply", Limits{MaxMatches: 2}, &PullReply{Deliveries: []Delivery{{Matched: make([]Match, 2)}}}, &PullReply{Deliveries: []Delivery{{}, {Matched: make([]Match, 3)}}}, "delivery 1 match count"},
		{"MaxFrameBytes Control", Limits{MaxFrameBytes: 10}, &Control{Body: make([]byte, 8)}, &Control{Body: make([]byte, 9)}, "frame"},
		{"MaxDeliveries", Limits{MaxDeliveries: 2}, &PullReply{Deliveries: make([]Delivery, 2)}, &PullReply{Deliveries: make([]Delivery, 3)}, "delivery count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame, err := EncodeLimits(nil, tt.at, tt.lim)
			require.NoError(t, err, "at the limit")
			_, err = Decode(frame, tt.lim)
			require.NoError(t, err, "at the limit")

			_, err = EncodeLimits(nil, tt.over, tt.lim)
			assertOneSentinel(t, err, ErrTooLarge)
			assert.Contains(t, err.Error(), "wire: cannot encode "+tt.over.Kind().String()+" frame: "+tt.field+": ")

			_, err = Decode(encode(t, tt.over), tt.lim)
			assertOneSentinel(t, err, ErrTooLarge)
			assert.Contains(t, err.Error(), "wire: oversized "+tt.over.Kind().String()+" frame: "+tt.field+": ")
			assert.Contains(t, err.Error(), "exceeds limit")
		})
	}
}

func TestLimitsDefaults(t *testing.T) {
	tests := []struct {
		name string
		lim  Limits
	}{
		{"zero", Limits{}},
		{"negative", Limits{MaxFrameBytes: -1, MaxAttrs: -1, MaxStringBytes: -1, MaxDataBytes: -1, MaxMatches: -1, MaxDeliveries: -1}},
		{"explicit", DefaultLimits()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, DefaultLimits(), tt.lim.norm())
		})
	}
	d := DefaultLimits()
	_, err := Encode(nil, &Publish{Event: Event{Data: make([]byte, d.MaxFrameBytes)}})
	assertOneSentinel(t, err, ErrTooLarge)
	_, err = Decode(make([]byte, d.MaxFrameBytes+1), Limits{})
	assertOneSentinel(t, err, ErrTooLarge)
}

// TestShortFrameAllocatesLittle checks that lengths and counts are checked
// against the bytes remaining before anything is allocated, even when the
// limits would allow them.
func TestShortFrameAllocatesLittle(t *testing.T) {
	huge := Limits{MaxFrameBytes: 1 << 30, MaxAttrs: 1 << 30, MaxStringBytes: 1 << 30, MaxDataBytes: 1 << 30, MaxMatches: 1 << 30, MaxDeliveries: 1 << 30}
	publish := newFrame(KindPublish).u(0).id()
	tests := []struct {
		name  string
		frame []byte
	}{
		{"type length", publish.u(1 << 28)},
		{"attribute count", publish.s("t").u(1 << 28)},
		{"data length", publish.s("t").u(0).s("").u(1 << 28)},
		{"delivery count", newFrame(KindPullReply).u(0).u(1 << 28)},
		{"match count", newFrame(KindDeliver).id().s("t").eventAfterType().u(1 << 28)},
		{"profile count", newFrame(KindSetProfile).u(0).u(1 << 28)},
		{"advertised type length", newFrame(KindAdvertise).u(0).u(1 << 28)},
		{"advertised attribute count", newFrame(KindAdvertise).u(0).s("t").u(1 << 28)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const runs = 100
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range runs {
				_, err := Decode(tt.frame, huge)
				assert.ErrorIs(t, err, ErrMalformed)
			}
			runtime.ReadMemStats(&after)
			perRun := (after.TotalAlloc - before.TotalAlloc) / runs
			assert.Less(t, perRun, uint64(4<<10), "bytes allocated per Decode of a %d-byte frame", len(tt.frame))
		})
	}
}

func TestKind(t *testing.T) {
	names := []string{"Hello", "Welcome", "Publish", "Subscribe", "Unsubscribe", "SetProfile", "Pull", "Deliver", "PullReply", "Ack", "Error", "Bye", "Forward", "Challenge", "Response", "Received", "Lost", "Control", "Advertise"}
	for i, name := range names {
		k := Kind(i + 1)
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, name, k.String())
			m := newMessage(k)
			require.NotNil(t, m)
			assert.Equal(t, k, m.Kind())
		})
	}
	for _, k := range []Kind{0, 20, 255} {
		t.Run(k.String(), func(t *testing.T) {
			assert.Equal(t, fmt.Sprintf("Kind(%d)", k), k.String())
			assert.Nil(t, newMessage(k))
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	m := &PullReply{Seq: 1, Deliveries: []Delivery{{Event: realisticEvent()}, {Event: extremeEvent()}}}
	want := encode(t, m)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				frame, err := Encode(nil, m)
				assert.NoError(t, err)
				assert.Equal(t, want, frame)
				_, err = Decode(want, Limits{})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
}

// small are limits low enough for the fuzzer to reach every ErrTooLarge.
var small = Limits{MaxFrameBytes: 512, MaxAttrs: 3, MaxStringBytes: 16, MaxDataBytes: 8, MaxMatches: 2, MaxDeliveries: 2}

func FuzzDecode(f *testing.F) {
	for _, s := range samples() {
		f.Add(encode(f, s.msg))
	}
	f.Add([]byte{})
	f.Add([]byte{FrameVersion, byte(KindPublish)})
	f.Add([]byte{2, byte(KindBye)})
	f.Add([]byte(newFrame(KindAck).raw(0x80, 0x00)))
	f.Add([]byte{FrameVersion, byte(KindAdvertise)})
	f.Add([]byte(newFrame(KindAdvertise).u(1).s("Alarm").u(1).s("zone").raw(valString).s("hall")))
	f.Add([]byte(newFrame(KindAdvertise).u(1).s("Alarm").u(4).s("a").raw(valBool, 1)))
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := Decode(frame, Limits{})
		if err != nil {
			require.Nil(t, m)
			var fe *FrameError
			require.ErrorAs(t, err, &fe)
			n := 0
			for _, s := range []error{ErrMalformed, ErrTooLarge, ErrVersion} {
				if errors.Is(err, s) {
					n++
				}
			}
			require.Equal(t, 1, n, "exactly one sentinel: %v", err)
			return
		}
		out, err := Encode(nil, m)
		require.NoError(t, err, "what decodes encodes")
		require.Equal(t, frame, out, "the encoding is canonical")
		m2, err := Decode(out, Limits{})
		require.NoError(t, err)
		assertSameMessage(t, m, m2)

		// Encode refuses exactly what Decode refuses, for other limits too.
		ms, errD := Decode(frame, small)
		outS, errE := EncodeLimits(nil, m, small)
		if errD != nil {
			require.ErrorIs(t, errD, ErrTooLarge)
			require.ErrorIs(t, errE, ErrTooLarge)
			return
		}
		require.NoError(t, errE)
		require.Equal(t, frame, outS)
		assertSameMessage(t, m, ms)
	})
}

func BenchmarkEncodeDecodePublish(b *testing.B) {
	m := &Publish{Seq: 42, Event: realisticEvent()}
	buf := encode(b, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = Encode(buf[:0], m)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Decode(buf, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSharedDeliverMatchesEncode(t *testing.T) {
	ev := Event{Type: "Reading", Attrs: []ontology.Attr{{Name: "n", Value: ontology.Int(-1 << 63)}}, Data: []byte("{}"), Origin: "sw"}
	sd, err := NewSharedDeliver(&ev, Limits{})
	require.NoError(t, err)
	for _, ms := range [][]Match{nil, {{Sub: 1}}, {{Sub: 1 << 62, Score: math.Copysign(0, -1)}, {Sub: 7, Score: 2.5}}} {
		want, err := Encode(nil, &Deliver{Event: ev, Matched: ms})
		require.NoError(t, err)
		got, err := sd.Frame(ms)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	small, err := NewSharedDeliver(&ev, Limits{MaxMatches: 1})
	require.NoError(t, err)
	_, err = small.Frame([]Match{{Sub: 1}, {Sub: 2}})
	require.ErrorIs(t, err, ErrTooLarge)
}

// BenchmarkForward encodes a shared link's Forward frame into a new
// buffer and decodes it into a reused Forward, as a link's two ends do.
func BenchmarkForward(b *testing.B) {
	ev := realisticEvent()
	var fwd Forward
	b.ReportAllocs()
	for b.Loop() {
		buf, err := EncodeForward(nil, &ev, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeReusing(buf, Limits{}, &fwd); err != nil {
			b.Fatal(err)
		}
	}
}

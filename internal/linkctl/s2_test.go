package linkctl

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/internal/wire"
)

// s2Samples returns messages of every kind of a managed place (S2), as
// samples does.
func s2Samples() []sample {
	long := strings.Repeat("長", 2000)
	return []sample{
		{"Manage/zero", &Manage{}},
		{"Manage/realistic", &Manage{Agent: "agent-1", Place: "quakes"}},
		{"Model/zero", &Model{}},
		{"Model/realistic", &Model{
			Switch:      "N1",
			Links:       []ModelLink{{Peer: "P1", Addr: "P1"}, {Peer: "N3"}},
			Constraints: []Constraint{{Peer: "N3", Filters: []string{"{}", "{type ⊑ a}\n"}}, {Peer: "P1"}},
			Follow:      3,
			Deployment:  12,
		}},
		{"Model/extreme", &Model{Switch: long, Constraints: []Constraint{{Peer: long, Filters: []string{long}}}, Follow: math.MaxUint64}},
		{"ModelChange/subscribe", &ModelChange{Op: ChangeSubscribe, Key: 7, Session: 5, Name: "C1", Text: `{type ⊑ hazard.Earthquake} && mag >= 4.5`}},
		{"ModelChange/link up", &ModelChange{Op: ChangeLinkUp, Peer: "N3", Addr: "10.0.0.3:7010"}},
		{"ModelChange/advertise", &ModelChange{Op: ChangeAdvertise, Key: 3, Session: 2, Text: "hazard.Earthquake", Attrs: []AttrDetail{{"net", `"ak"`}}}},
		{"ModelChange/cancel", &ModelChange{Op: ChangeCancel, Key: math.MaxUint64}},
		{"Deploy/zero", &Deploy{}},
		{"Deploy/fig1", &Deploy{Deployment: 3,
			Filters: []DeployFilter{{ID: 5, Peer: "N3", Constraint: []string{"{type ⊑ a}"}, Bag: []uint64{2}, Send: true},
				{ID: 8, Session: 9, Bag: []uint64{2, 5}}},
			Relays: []Relay{{Bleeder: 2, To: []string{"N3"}}}}},
		{"Bleeder/realistic", &Bleeder{Deployment: 3, Filter: 2}},
		{"Detected/max", &Detected{Deployment: math.MaxUint64, Filter: math.MaxUint64}},
		{"Verdict/grant", &Verdict{Key: 7}},
		{"Verdict/refuse", &Verdict{Key: 7, Advert: true, Error: "bad \xff bytes"}},
	}
}

func TestDecodeMalformedS2(t *testing.T) {
	model := newBody(KindModel).s("N1")                                    // up to links
	deploy := newBody(KindDeploy).u(3).u(1).u(5).s("N3").u(0).u(1).s("{}") // up to the first filter's bag
	tests := []struct {
		name  string
		body  []byte
		kind  Kind
		field string
		off   int
		text  string
	}{
		{"manage agent invalid UTF-8", newBody(KindManage).s("\xff").s("p"), KindManage, "agent", 1, "linkctl: malformed manage message: agent: invalid UTF-8 at offset 1"},
		{"model links count beyond the end", model.u(3).s("a"), KindModel, "links count", len(model), "links count: count 3 needs at least 2 bytes per entry"},
		{"model links 1 peer invalid UTF-8", model.u(2).s("a").s("").s("\xff").s(""), KindModel, "links 1 peer", len(model) + 4, "linkctl: malformed model message: links 1 peer: invalid UTF-8"},
		{"model follow truncated", model.u(0).u(0).raw(0x80), KindModel, "follow", len(model) + 2, "follow: truncated varint"},
		{"model constraints 0 filters 1 text invalid UTF-8", model.u(0).u(1).s("N3").u(2).s("{}").s("\xff"), KindModel, "constraints 0 filters 1 text", len(model) + 9, "constraints 0 filters 1 text: invalid UTF-8"},
		{"model change op 0", newBody(KindModelChange).raw(0), KindModelChange, "op", 1, "linkctl: malformed model change message: op: value 0 out of range 1…6 at offset 1"},
		{"model change op 7", newBody(KindModelChange).raw(7), KindModelChange, "op", 1, "op: value 7 out of range 1…6"},
		{"deploy bag count beyond the end", deploy.u(9), KindDeploy, "filters 0 bag count", len(deploy), "filters 0 bag count: count 9 needs at least 1 bytes per entry, 0 remain"},
		{"deploy filters over MaxNames", newBody(KindDeploy).u(1).u(MaxNames + 1).raw(make([]byte, 6*(MaxNames+1))...), KindDeploy, "filters count", 2, "filters count: count 65537 exceeds 65536"},
		{"deploy send byte 2", deploy.u(0).raw(2).u(0), KindDeploy, "filters 0 send", len(deploy) + 1, "filters 0 send: bool byte 2"},
		{"deploy relays 0 to 0 newline", deploy.u(0).raw(0).u(1).u(2).u(1).s("a\nb"), KindDeploy, "relays 0 to 0", len(deploy) + 5, "relays 0 to 0: contains a newline"},
		{"bleeder trailing byte", newBody(KindBleeder).u(1).u(2).raw(0), KindBleeder, "end", 3, "linkctl: malformed bleeder message: end: 1 trailing bytes at offset 3"},
		{"detected filter truncated", newBody(KindDetected).u(1).raw(0x80), KindDetected, "filter", 2, "filter: truncated varint"},
		{"verdict advert byte 9", newBody(KindVerdict).u(1).raw(9).s(""), KindVerdict, "advert", 2, "advert: bool byte 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(&wire.Control{Body: tt.body})
			require.Error(t, err)
			assert.Nil(t, m)
			assert.ErrorIs(t, err, ErrMalformed)
			var me *MessageError
			require.ErrorAs(t, err, &me)
			assert.Equal(t, tt.kind, me.Kind)
			assert.Equal(t, tt.field, me.Field)
			assert.Equal(t, tt.off, me.Offset)
			assert.Contains(t, err.Error(), tt.text)
		})
	}
}

func TestEncodeRefusesS2(t *testing.T) {
	tests := []struct {
		name  string
		msg   Message
		field string
	}{
		{"model change op 0", &ModelChange{}, "op"},
		{"model change op 7", &ModelChange{Op: 7}, "op"},
		{"model links 1 addr invalid UTF-8", &Model{Links: []ModelLink{{}, {Addr: "\xff"}}}, "links 1 addr"},
		{"model constraints 0 filters 2 text", &Model{Constraints: []Constraint{{Filters: []string{"", "", "\xff"}}}}, "constraints 0 filters 2 text"},
		{"deploy relays 0 to 0 NUL", &Deploy{Relays: []Relay{{To: []string{"a\x00"}}}}, "relays 0 to 0"},
		{"deploy filters over MaxNames", &Deploy{Filters: make([]DeployFilter, MaxNames+1)}, "filters count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Encode(tt.msg, wire.Limits{MaxFrameBytes: 1 << 30})
			require.Error(t, err)
			assert.Nil(t, f)
			var me *MessageError
			require.ErrorAs(t, err, &me)
			assert.True(t, me.Encoding)
			assert.Equal(t, tt.field, me.Field)
		})
	}
}

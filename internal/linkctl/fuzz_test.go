package linkctl

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/internal/wire"
)

// FuzzDecode feeds whole frames through wire.Decode and Decode: no
// panics, every error a *MessageError wrapping ErrMalformed, and every
// message that decodes encodes back to the same frame.
func FuzzDecode(f *testing.F) {
	seen := map[Kind]bool{}
	for _, s := range samples() {
		if seen[s.msg.Kind()] {
			continue // one frame per kind; the extremes are too long to mutate well
		}
		seen[s.msg.Kind()] = true
		f.Add(encode(f, s.msg))
	}
	f.Add(encode(f, &Register{Key: 13, Ack: 41, Filter: "{}", TTL: 2, Places: []string{"kanto", "kansai"}}))
	f.Add(encode(f, &ProbeReply{ID: 77, Hops: 2, Path: []string{"sw-a", "sw-b"}, Switch: "sw-c", Addr: "10.0.0.3:7010", End: true}))
	for _, m := range s3Seeds() { // a realistic seed per S3 kind
		f.Add(encode(f, m))
	}
	f.Add([]byte{wire.FrameVersion, byte(wire.KindControl)})                                                                  // empty body
	f.Add([]byte{wire.FrameVersion, byte(wire.KindControl), 21})                                                              // unknown kind
	f.Add([]byte{wire.FrameVersion, byte(wire.KindControl), byte(KindSynced), 0})                                             // trailing byte
	f.Add([]byte{wire.FrameVersion, byte(wire.KindControl), byte(KindRelease), 0x80, 0x00})                                   // non-minimal varint
	f.Add([]byte(append(body{wire.FrameVersion, byte(wire.KindControl)}, newBody(KindProbe).u(1).z(2).z(3).u(0)...)))         // dir 3
	f.Add([]byte(append(body{wire.FrameVersion, byte(wire.KindControl)}, newBody(KindRegister).register(3).names("a\n")...))) // newline in a place
	f.Fuzz(func(t *testing.T, frame []byte) {
		wm, err := wire.Decode(frame, wire.Limits{})
		if err != nil {
			return
		}
		c, ok := wm.(*wire.Control)
		if !ok {
			return
		}
		m, err := Decode(c)
		if err != nil {
			require.Nil(t, m)
			var me *MessageError
			require.ErrorAs(t, err, &me)
			require.False(t, me.Encoding)
			require.True(t, errors.Is(err, ErrMalformed))
			require.LessOrEqual(t, me.Offset, len(c.Body))
			return
		}
		out, err := Encode(m, wire.Limits{})
		require.NoError(t, err, "what decodes encodes")
		require.Equal(t, frame, out, "the encoding is canonical")
		m2, err := Decode(&wire.Control{Body: out[2:]})
		require.NoError(t, err)
		require.Equal(t, m, m2)
	})
}

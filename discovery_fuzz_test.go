package sion

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// padProbe pads msg with spaces to probeBytes, as probeRound does.
func padProbe(msg []byte) []byte {
	if len(msg) < probeBytes {
		msg = append(msg, bytes.Repeat([]byte{' '}, probeBytes-len(msg))...)
	}
	return msg
}

// FuzzDecodeProbe checks decodeProbe, the decoder of the datagrams of the
// probe protocol, which reads whatever reaches the discovery port: it must
// not panic; what it accepts is a probe or an answer of probeVersion with
// an ID, which encodes (as probeRound and answerProbes encode) and decodes
// to the same message, padded or not.
//
//	go test -run=^$ -fuzz=FuzzDecodeProbe -fuzztime=1m .
func FuzzDecodeProbe(f *testing.F) {
	for _, m := range []probeMsg{
		{V: probeVersion, Kind: "probe", ID: 1, Name: "alpha", Base: "home", Nonce: 7},
		{V: probeVersion, Kind: "probe", ID: 1<<64 - 1, Name: "root", Base: "home", Nonce: 1 << 63, Roots: true},
		{V: probeVersion, Kind: "answer", ID: 42, Name: "beta", Base: "home", Nonce: 7, Active: true, Root: true, Addr: "10.0.0.2:4100"},
		{V: probeVersion, Kind: "answer", ID: 43, Name: "gamma \u00e9\u0000<&>", Base: "", Nonce: 0},
	} {
		b, err := json.Marshal(m)
		require.NoError(f, err)
		f.Add(b)
		f.Add(padProbe(b))
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"v": 1}`,
		`{"v": 1, "kind": "probe", "id": "0"}`,
		`{"v": 2, "kind": "probe", "id": "1"}`,
		`{"v": 1, "kind": "hello", "id": "1"}`,
		`{"v": 1, "kind": "probe", "id": 1}`,
		`{"v": 1, "kind": "probe", "id": "18446744073709551616"}`,
		`{"V": 1, "KIND": "answer", "Id": "5", "id": "6", "addr": "[::1]:1", "nonce": "-1"}`,
		`{"v": 1, "kind": "probe", "id": "9"} x`,
		"{\"v\": 1, \"kind\": \"probe\", \"id\": \"9\", \"name\": \"\xff\xfe\"}\t\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeProbe(b)
		if err != nil {
			return
		}
		require.Equal(t, probeVersion, m.V)
		require.Contains(t, []string{"probe", "answer"}, m.Kind)
		require.NotZero(t, m.ID)
		out, err := json.Marshal(m)
		require.NoError(t, err)
		for _, enc := range [][]byte{out, padProbe(out)} {
			again, err := decodeProbe(enc)
			require.NoError(t, err, "%q", enc)
			require.Equal(t, m, again)
		}
	})
}

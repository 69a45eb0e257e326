package tcp_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// How a stream of records ends, for FuzzFrames's model of the wire.
const (
	endEOF      = iota // at a record's boundary: the peer closed
	endCut             // within a record: the connection is lost
	endProtocol        // at a length over the limit: ErrProtocol
)

// parseRecords returns the frames that data carries after the preamble,
// as the package doc's "Wire format" defines them, with frames of at most
// limit bytes, and how the stream ends.
func parseRecords(data []byte, limit int) (frames [][]byte, end int) {
	for {
		switch {
		case len(data) == 0:
			return frames, endEOF
		case len(data) < 4:
			return frames, endCut
		}
		n := binary.BigEndian.Uint32(data)
		data = data[4:]
		switch {
		case n == 0xFFFF_FFFF: // a heartbeat
			continue
		case n > uint32(limit):
			return frames, endProtocol
		case len(data) < int(n):
			return frames, endCut
		}
		frames = append(frames, data[:n])
		data = data[n:]
	}
}

func FuzzFrames(f *testing.F) {
	// A raw peer completes the preamble, then sends data as its stream of
	// records: the accepted Conn, admitted or not, returns exactly the
	// whole frames the stream carries, each within its limit, then an
	// error saying how the stream ended; it never panics.
	const limit, budget = 1024, 256
	tr, err := tcp.New(tcp.Config{MaxFrameBytes: limit, PendingReadBytes: budget})
	require.NoError(f, err)
	l, err := tr.Listen("")
	require.NoError(f, err)
	f.Cleanup(func() { l.Close() })

	rec := func(n uint32, body string) []byte {
		return append(binary.BigEndian.AppendUint32(nil, n), body...)
	}
	heartbeat := rec(0xFFFF_FFFF, "")
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, seed := range []struct {
		data  []byte
		admit bool
	}{
		{nil, false},
		{heartbeat, false},
		{cat(heartbeat, heartbeat, rec(2, "hi"), heartbeat), true},
		{rec(0, ""), false}, // an empty frame
		{cat(rec(0, ""), rec(0, ""), rec(3, "abc")), true},
		{cat(rec(5, "hello"), rec(limit+1, "")), true},                      // over MaxFrameBytes
		{cat(rec(5, "hello"), rec(1<<31, "")), true},                        // over 2^31
		{rec(0xFFFF_FFFE, ""), true},                                        // just under a heartbeat
		{rec(budget, string(bytes.Repeat([]byte("b"), budget))), false},     // at the budget
		{rec(budget+1, string(bytes.Repeat([]byte("b"), budget+1))), false}, // over the budget before Admit
		{rec(budget+1, string(bytes.Repeat([]byte("b"), budget+1))), true},  // over the budget after Admit
		{rec(limit, string(bytes.Repeat([]byte("m"), limit))), true},        // at MaxFrameBytes
		{[]byte{0, 0}, false},                                               // a length cut short
		{cat(rec(2, "ok"), rec(16, "abc")), true},                           // a frame cut short
		{cat(rec(16, "abc"), heartbeat), false},                             // a heartbeat inside a frame is its bytes
		{[]byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"), false},      // another protocol
		{bytes.Repeat(rec(20, "twenty bytes of body"), 64), false},          // more than the budget holds at once
	} {
		f.Add(seed.data, seed.admit)
	}

	f.Fuzz(func(t *testing.T, data []byte, admit bool) {
		ctx := testCtx(t)
		nc, err := net.Dial("tcp", l.Addr().String())
		require.NoError(t, err)
		defer nc.Close()
		_, err = nc.Write(preamble(limit))
		require.NoError(t, err)
		sc, err := l.Accept(ctx)
		require.NoError(t, err)
		s := sc.(*tcp.Conn)
		written := make(chan struct{})
		defer func() {
			nc.Close() // fails a Write still blocked
			s.Close()
			<-written
			await(t, s.Done(), "end of the Conn")
		}()
		want, end := parseRecords(data, budget)
		if admit {
			s.Admit()
			want, end = parseRecords(data, limit)
		}
		go func() { // while Recv takes what the budget does not hold
			defer close(written)
			nc.Write(data) // fails if the Conn refused data and closed
			nc.(*net.TCPConn).CloseWrite()
		}()

		var got [][]byte
		for {
			f, err := s.Recv(ctx)
			if err != nil {
				require.ErrorIs(t, err, transport.ErrClosed)
				switch end {
				case endEOF:
					assert.ErrorIs(t, err, io.EOF)
				case endCut:
					assert.True(t, errors.Is(err, io.ErrUnexpectedEOF), "a stream cut within a record: %v", err)
				case endProtocol:
					assert.ErrorIs(t, err, tcp.ErrProtocol)
				}
				break
			}
			require.LessOrEqual(t, len(f), s.MaxFrameBytes(), "frame %d", len(got))
			got = append(got, f)
		}
		require.Equal(t, len(want), len(got), "frames received")
		for i := range want {
			require.True(t, bytes.Equal(want[i], got[i]), "frame %d of %d altered", i, len(want))
		}
	})
}

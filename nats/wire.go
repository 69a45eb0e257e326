package nats

import (
	"encoding/binary"
	"fmt"
)

// Kinds of message, the first byte of each (see the package doc, "Wire
// format").
const (
	kindHello = 'H' // Dial's request to a Listener
	kindProbe = 'Q' // Listen's question: does anyone listen here?
	kindAcc   = 'A' // a Listener's reply: accepted
	kindBusy  = 'B' // a Listener's reply: backlog full, try again
	kindInUse = 'U' // a Listener's reply to a probe
	kindData  = 'D' // a chunk of a frame, or the end-of-stream marker
	kindAck   = 'K' // an acknowledgement, credit and keepalive
	kindAbort = 'X' // the connection is given up at once
)

// protocolVersion is the version byte of a hello.
const protocolVersion = 1

// Flags of a data message.
const (
	flagLast = 1 << 0 // the last chunk of its frame
	flagEnd  = 1 << 1 // the end-of-stream marker: no frame, nothing after
)

// Sizes, in bytes, of the fixed parts of messages.
const (
	dataHeaderBytes = 10          // kind, flags, seq
	ackBytes        = 1 + 8*4 + 1 // kind, received, consumed messages, consumed bytes, window bytes, gap
	helloBytes      = 2 + 4 + 4 + 4
	accBytes        = 1 + 4 + 4 + 4
	maxIDBytes      = 64
)

// params are what each end announces when the connection is made: its
// MaxFrameBytes and its receive window.
type params struct {
	maxFrameBytes, windowFrames, windowBytes int
}

func putParams(b []byte, p params) {
	binary.BigEndian.PutUint32(b[0:], uint32(p.maxFrameBytes))
	binary.BigEndian.PutUint32(b[4:], uint32(p.windowFrames))
	binary.BigEndian.PutUint32(b[8:], uint32(p.windowBytes))
}

func getParams(b []byte) (params, error) {
	p := params{
		maxFrameBytes: int(binary.BigEndian.Uint32(b[0:])),
		windowFrames:  int(binary.BigEndian.Uint32(b[4:])),
		windowBytes:   int(binary.BigEndian.Uint32(b[8:])),
	}
	if p.maxFrameBytes > maxUint32Field || p.windowFrames < 1 || p.windowFrames > maxUint32Field ||
		p.windowBytes < 1 || p.windowBytes > maxUint32Field {
		return params{}, fmt.Errorf("%w: parameters out of range %+v", ErrProtocol, p)
	}
	return p, nil
}

// hello is Dial's request: version, parameters, then the connection's ID.
func encodeHello(id string, p params) []byte {
	b := make([]byte, helloBytes, helloBytes+len(id))
	b[0], b[1] = kindHello, protocolVersion
	putParams(b[2:], p)
	return append(b, id...)
}

func decodeHello(b []byte) (id string, p params, err error) {
	if len(b) < helloBytes || b[0] != kindHello {
		return "", params{}, fmt.Errorf("%w: malformed dial request", ErrProtocol)
	}
	if b[1] != protocolVersion {
		return "", params{}, fmt.Errorf("%w: dial request of version %d, want %d", ErrProtocol, b[1], protocolVersion)
	}
	id = string(b[helloBytes:])
	if !validID(id) {
		return "", params{}, fmt.Errorf("%w: connection ID %q", ErrProtocol, id)
	}
	p, err = getParams(b[2:])
	return id, p, err
}

// validID reports whether id is a connection ID a peer may choose: 1 to
// maxIDBytes letters or digits, so that it is one subject token.
func validID(id string) bool {
	if id == "" || len(id) > maxIDBytes {
		return false
	}
	for i := range len(id) {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

func encodeAccept(p params) []byte {
	b := make([]byte, accBytes)
	b[0] = kindAcc
	putParams(b[1:], p)
	return b
}

// ack is what a receiver tells its sender: every message before received
// has arrived; the application has taken consumed messages holding
// consumedBytes bytes of frames; its window is windowBytes.
// gap reports that a message arrived after a gap: those from received on
// were lost, and the sender resends them at once.
type ack struct {
	received, consumed, consumedBytes uint64
	windowBytes                       uint64
	gap                               bool
}

func encodeAck(a ack) []byte {
	b := make([]byte, ackBytes)
	b[0] = kindAck
	binary.BigEndian.PutUint64(b[1:], a.received)
	binary.BigEndian.PutUint64(b[9:], a.consumed)
	binary.BigEndian.PutUint64(b[17:], a.consumedBytes)
	binary.BigEndian.PutUint64(b[25:], a.windowBytes)
	if a.gap {
		b[33] = 1
	}
	return b
}

func decodeAck(b []byte) (ack, error) {
	if len(b) != ackBytes {
		return ack{}, fmt.Errorf("%w: acknowledgement of %d bytes", ErrProtocol, len(b))
	}
	return ack{
		received:      binary.BigEndian.Uint64(b[1:]),
		consumed:      binary.BigEndian.Uint64(b[9:]),
		consumedBytes: binary.BigEndian.Uint64(b[17:]),
		windowBytes:   binary.BigEndian.Uint64(b[25:]),
		gap:           b[33] != 0,
	}, nil
}

// encodeData returns a data message: header, then chunk.
func encodeData(seq uint64, flags byte, chunk []byte) []byte {
	b := make([]byte, dataHeaderBytes+len(chunk))
	b[0], b[1] = kindData, flags
	binary.BigEndian.PutUint64(b[2:], seq)
	copy(b[dataHeaderBytes:], chunk)
	return b
}

package tcp

import (
	"encoding/binary"
	"fmt"
)

// The preamble, sent by each end right after the connection (and its TLS
// handshake) is established; see the package doc, "Wire format".
const (
	preambleMagic   = "SION"
	protocolVersion = 1
	preambleBytes   = len(preambleMagic) + 1 + 4
)

// Records after the preamble: a length prefix, then that many bytes of
// frame; the prefix heartbeatLength stands alone.
const (
	prefixBytes     = 4
	heartbeatLength = 0xFFFF_FFFF
)

// appendPreamble appends the preamble announcing maxFrameBytes to b.
func appendPreamble(b []byte, maxFrameBytes int) []byte {
	b = append(b, preambleMagic...)
	b = append(b, protocolVersion)
	return binary.BigEndian.AppendUint32(b, uint32(maxFrameBytes))
}

// parsePreamble returns the frame limit p announces, or an error wrapping
// ErrProtocol if p is not a preamble of this protocol version.
func parsePreamble(p [preambleBytes]byte) (maxFrameBytes int, err error) {
	if magic := string(p[:len(preambleMagic)]); magic != preambleMagic {
		return 0, fmt.Errorf("%w: preamble starts with %q, want %q", ErrProtocol, magic, preambleMagic)
	}
	if v := p[len(preambleMagic)]; v != protocolVersion {
		return 0, fmt.Errorf("%w: peer speaks protocol version %d, want %d", ErrProtocol, v, protocolVersion)
	}
	n := binary.BigEndian.Uint32(p[len(preambleMagic)+1:])
	return int(min(n, MaxFrameBytesLimit)), nil
}

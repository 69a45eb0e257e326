package manage

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"EventsSent": "events_sent", "TTL": "ttl", "ID": "id", "CoveredBy": "covered_by",
		"TLSState": "tls_state", "PeerPlace": "peer_place", "Import": "import", "MaxFrameBytes": "max_frame_bytes",
		"Level2Hits": "level2_hits",
	} {
		assert.Equal(t, want, snake(in), in)
	}
}

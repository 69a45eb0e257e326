package transporttest

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/transport"
)

// admission checks the receive budget of an accepted Conn that implements
// transport.Admitter (Caps.PendingFrameBytes): until Admit, a frame of
// PendingFrameBytes arrives and a larger one breaks the Conn; after
// Admit, called twice and concurrently with a Recv, a frame of
// MaxFrameBytes arrives. The dialed end is admitted from the start.
func (s *suite) admission(e *env) {
	budget, max := e.caps.PendingFrameBytes, e.caps.MaxFrameBytes
	if budget == 0 {
		e.t.Skip("Caps.PendingFrameBytes is 0: no receive budget before Admit")
	}
	l := e.listen()
	c, sc := e.dialPending(l)
	_, ok := sc.(transport.Admitter)
	require.True(e.t, ok, "Caps.PendingFrameBytes is %d, but the accepted %T does not implement transport.Admitter", budget, sc)
	big := makeFrame(1, 0, max)
	e.send(sc, big)
	require.True(e.t, bytes.Equal(big, e.recv(c)), "frame of MaxFrameBytes to the dialed end, admitted from the start")
	at := makeFrame(0, 0, budget)
	e.send(c, at)
	require.True(e.t, bytes.Equal(at, e.recv(sc)), "frame of PendingFrameBytes to the accepted end before Admit")
	if budget < max {
		e.send(c, make([]byte, budget+1))
		_, err := sc.Recv(e.ctx)
		require.ErrorIs(e.t, err, transport.ErrClosed, "Recv of a frame over PendingFrameBytes before Admit")
	}

	c, sc = e.dialPending(l)
	got := goCall(func() error {
		f, err := sc.Recv(e.ctx)
		if err == nil && !bytes.Equal(big, f) {
			err = fmt.Errorf("a frame of %d bytes arrived, not the one sent", len(f))
		}
		return err
	})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(sc.(transport.Admitter).Admit)
	}
	wg.Wait()
	e.send(c, big)
	require.NoError(e.t, await(e.t, got, "Recv of a frame of MaxFrameBytes after Admit"))
}

package tcp_test

import (
	"encoding/binary"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/internal/testenv"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

func TestAnnouncedFramesCostOnlyWhatArrives(t *testing.T) {
	// 1,000 established connections each announce a frame of 1 MiB and
	// send a few bytes of it: the Listener's heap grows by what arrived
	// (and a first chunk per frame), not by the 1 GiB announced. Admitted
	// Conns read the frame; not admitted ones refuse it, which is over
	// PendingReadBytes, and close.
	const (
		announced = 1 << 20
		sent      = "a few bytes"
		maxGrowth = 256 << 20
	)
	testenv.NeedFiles(t, 2*floodConns+256)
	for _, tc := range []struct {
		name  string
		admit bool
	}{
		{"admitted", true},
		{"not admitted", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			tr := newTransport(t, tcp.Config{})
			l := listen(t, tr)
			var peers []net.Conn
			var conns []*tcp.Conn
			t.Cleanup(func() {
				for _, c := range conns {
					c.Close()
				}
				for _, c := range conns {
					await(t, c.Done(), "end of the Conn's goroutines")
				}
			})
			t.Cleanup(func() { // first: a Conn closes at once once its peer has
				for _, nc := range peers {
					nc.Close()
				}
			})
			for i := range floodConns {
				nc, err := net.Dial("tcp", l.Addr().String())
				require.NoError(t, err, "peer %d", i)
				peers = append(peers, nc)
				_, err = nc.Write(preamble(transport.DefaultMaxFrameBytes))
				require.NoError(t, err)
				s, err := l.Accept(ctx)
				require.NoError(t, err, "Accept %d", i)
				conns = append(conns, s.(*tcp.Conn))
				if tc.admit {
					conns[i].Admit()
				}
			}
			before := heapBytes()

			wire := append(binary.BigEndian.AppendUint32(nil, announced), sent...)
			for i, nc := range peers {
				_, err := nc.Write(wire)
				require.NoError(t, err, "peer %d", i)
			}
			if tc.admit {
				// Every byte sent has left the peers' queues and been read
				// from the Conns' sockets.
				require.Eventually(t, func() bool {
					for i := range peers {
						if queued(t, peers[i], syscall.TIOCOUTQ) > 0 || queued(t, tcp.RawConn(conns[i]), syscall.TIOCINQ) > 0 {
							return false
						}
					}
					return true
				}, waitTimeout, 10*time.Millisecond, "the Conns read what their peers sent")
			} else {
				for i, c := range conns {
					_, err := c.Recv(ctx)
					require.ErrorIs(t, err, tcp.ErrProtocol, "Conn %d", i)
				}
			}
			growth := int64(heapBytes()) - int64(before)
			t.Logf("heap grew by %.1f MiB for %d frames of %d bytes announced", float64(growth)/(1<<20), floodConns, announced)
			assert.Less(t, growth, int64(maxGrowth), "heap growth, bytes")
		})
	}
}

// heapBytes returns the bytes of the heap's live objects, after a
// garbage collection.
func heapBytes() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// queued returns the bytes in nc's kernel queue that req asks for:
// TIOCINQ, received and not yet read; TIOCOUTQ, sent and not yet
// acknowledged. A closed socket has none.
func queued(t *testing.T, nc net.Conn, req uintptr) int {
	t.Helper()
	sc, err := nc.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var n int32
	var errno syscall.Errno
	cerr := sc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(unsafe.Pointer(&n)))
	})
	if cerr != nil {
		return 0
	}
	require.Zero(t, errno, "ioctl")
	return int(n)
}

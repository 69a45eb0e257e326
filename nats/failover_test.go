package nats_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/nats"
	"github.com/sion-go/sion/transport"
)

// numbered returns frame i of a stream: its number, then filler.
func numbered(i, n int) []byte {
	f := bytes.Repeat([]byte{byte(i)}, n)
	binary.BigEndian.PutUint32(f, uint32(i))
	return f
}

// stream sends n frames on c and returns where its error arrives.
func stream(ctx context.Context, c transport.Conn, n, size int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if err := c.Send(ctx, numbered(i, size)); err != nil {
				done <- fmt.Errorf("Send %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	return done
}

// expectStream receives n frames of stream on c, calling at(i) before
// frame i, and checks each arrives once, in order, intact.
func expectStream(ctx context.Context, c transport.Conn, n, size int, at func(i int)) error {
	for i := range n {
		at(i)
		f, err := c.Recv(ctx)
		if err != nil {
			return fmt.Errorf("Recv %d: %w", i, err)
		}
		if !bytes.Equal(f, numbered(i, size)) {
			return fmt.Errorf("frame %d: got frame %d of %d bytes", i, binary.BigEndian.Uint32(f), len(f))
		}
	}
	return nil
}

// TestServerFailover streams frames both ways over a Conn whose dialing
// end's NATS server is killed midway: its client reconnects to another
// server of the cluster, the messages lost meanwhile are retransmitted,
// and every frame arrives once and in order on the same Conn.
func TestServerFailover(t *testing.T) {
	servers := startCluster(t, 3)
	ncA := connect(t, urls(servers[0], servers[1])) // on servers[0] first
	ncB := connect(t, urls(servers[2]))
	cfg := nats.Config{SubjectPrefix: prefix(t), PingInterval: 200 * time.Millisecond, DeadAfter: 10 * time.Second,
		RetransmitTimeout: 50 * time.Millisecond}
	trA, trB := newTransport(t, ncA, cfg), newTransport(t, ncB, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	l, err := trB.Listen("far")
	require.NoError(t, err)
	defer l.Close()
	a, err := trA.Dial(ctx, "far")
	require.NoError(t, err)
	defer a.Close()
	b, err := l.Accept(ctx)
	require.NoError(t, err)
	defer b.Close()

	const n, size = 3000, 700
	sentAB, sentBA := stream(ctx, a, n, size), stream(ctx, b, n, size)
	killed := make(chan struct{})
	gotBA := make(chan error, 1)
	go func() { gotBA <- expectStream(ctx, a, n, size, func(int) {}) }()
	err = expectStream(ctx, b, n, size, func(i int) {
		if i == n/3 {
			kill(servers[0])
			close(killed)
		}
	})
	require.NoError(t, err, "A to B")
	require.NoError(t, <-gotBA, "B to A")
	require.NoError(t, <-sentAB)
	require.NoError(t, <-sentBA)
	<-killed
	assert.Equal(t, servers[1].ClientURL(), ncA.ConnectedUrl(), "A's client moved to the next server")
}

// TestPeerDies checks that a Conn whose peer vanishes — its NATS
// connection closed without a word, or its only NATS server killed —
// fails its pending Recv and Send with ErrPeerDead within DeadAfter.
func TestPeerDies(t *testing.T) {
	for _, tc := range []struct {
		name string
		// vanish makes the accepted end's peer vanish
		vanish func(t *testing.T, s *peerSetup)
	}{
		{"NATS connection closed", func(t *testing.T, s *peerSetup) { s.ncB.Close() }},
		{"NATS server killed for good", func(t *testing.T, s *peerSetup) { kill(s.servers[1]) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newPeerSetup(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			// Fill the peer's window so that a Send blocks too.
			var sendErr <-chan error
			{
				errs := make(chan error, 1)
				go func() {
					for {
						if err := s.a.Send(ctx, make([]byte, 100)); err != nil {
							errs <- err
							return
						}
					}
				}()
				sendErr = errs
			}
			recvErr := make(chan error, 1)
			go func() {
				_, err := s.a.Recv(ctx)
				recvErr <- err
			}()
			tc.vanish(t, s)
			for what, ch := range map[string]<-chan error{"Recv": recvErr, "Send": sendErr} {
				err := <-ch
				assert.ErrorIs(t, err, nats.ErrPeerDead, what)
				assert.ErrorIs(t, err, transport.ErrClosed, what)
				assert.False(t, errors.Is(err, context.DeadlineExceeded), what)
			}
			_, err := s.b.Recv(ctx) // the vanished end fails too
			assert.ErrorIs(t, err, transport.ErrClosed)
		})
	}
}

type peerSetup struct {
	servers []*server.Server
	ncB     *natsgo.Conn
	a, b    transport.Conn // a dialed on servers[0], b accepted on servers[1]
}

func newPeerSetup(t *testing.T) *peerSetup {
	servers := startCluster(t, 2)
	// Each client knows its own server alone: it would otherwise learn the
	// others from the cluster and reconnect to them.
	ncA := connect(t, urls(servers[0]), natsgo.IgnoreDiscoveredServers())
	ncB := connect(t, urls(servers[1]), natsgo.IgnoreDiscoveredServers())
	cfg := nats.Config{SubjectPrefix: prefix(t), PingInterval: 20 * time.Millisecond, DeadAfter: 300 * time.Millisecond,
		WindowFrames: 16}
	l, err := newTransport(t, ncB, cfg).Listen("")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	a, err := newTransport(t, ncA, cfg).Dial(t.Context(), l.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	b, err := l.Accept(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return &peerSetup{servers: servers, ncB: ncB, a: a, b: b}
}

// TestProtocolViolation: a message of no known kind on a Conn's subject
// closes that Conn with ErrProtocol, and no other; a malformed Dial
// request gets no reply, and the Listener goes on.
func TestProtocolViolation(t *testing.T) {
	s := startServer(t, nil)
	nc := connect(t, s.ClientURL())
	pfx := prefix(t)
	tr := newTransport(t, nc, nats.Config{SubjectPrefix: pfx})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	l, err := tr.Listen("target")
	require.NoError(t, err)
	defer l.Close()
	pair := func() (transport.Conn, transport.Conn) {
		c, err := tr.Dial(ctx, "target")
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		a, err := l.Accept(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { a.Close() })
		return c, a
	}
	c1, a1 := pair()
	c2, a2 := pair()

	// The accepted end receives on the dialed end's subject, ".d" → ".a".
	d := c1.LocalAddr().String()
	require.NoError(t, nc.Publish(d[:len(d)-1]+"a", []byte("Z garbage")))
	_, err = a1.Recv(ctx)
	require.ErrorIs(t, err, nats.ErrProtocol)
	require.ErrorIs(t, err, transport.ErrClosed)

	rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer rcancel()
	bad, err := nc.RequestWithContext(rctx, pfx+".listen.target", []byte("H\x07nonsense"))
	require.ErrorIs(t, err, context.DeadlineExceeded, "reply %v to a malformed dial request", bad)

	require.NoError(t, c2.Send(ctx, []byte("still here")))
	f, err := a2.Recv(ctx)
	require.NoError(t, err)
	assert.Equal(t, "still here", string(f))
	c3, a3 := pair()
	require.NoError(t, a3.Send(ctx, []byte("and here")))
	f, err = c3.Recv(ctx)
	require.NoError(t, err)
	assert.Equal(t, "and here", string(f))
}

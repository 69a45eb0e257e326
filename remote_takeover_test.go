package sion_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
)

// deafListener hands the switch connections that do not notice their
// peer going away: once the peer closed, Recv blocks and Send succeeds
// until the switch itself closes the connection — a switch under load
// that has not read the end yet, or a TCP connection whose FIN is late.
type deafListener struct{ transport.Listener }

func (l deafListener) Accept(ctx context.Context) (transport.Conn, error) {
	c, err := l.Listener.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return &deafConn{Conn: c, closed: make(chan struct{})}, nil
}

type deafConn struct {
	transport.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *deafConn) Recv(ctx context.Context) ([]byte, error) {
	f, err := c.Conn.Recv(ctx)
	if err != nil && ctx.Err() == nil {
		select { // the peer is gone: hear nothing until closed here
		case <-c.closed:
		case <-ctx.Done():
		}
	}
	return f, err
}

func (c *deafConn) Send(ctx context.Context, f []byte) error {
	err := c.Conn.Send(ctx, f)
	select {
	case <-c.closed:
		return err
	default:
		return nil
	}
}

func (c *deafConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestDisconnectCountedWhenTakenOver: Stats.Disconnects counts each
// connection of a remote session that ended with the session kept, also
// when its entity returns on a new connection before the switch has
// noticed the old one end (the new connection takes the session over).
// Before, only a departure the switch saw itself was counted, and a
// busy switch undercounted (metrics' TestCaseB34: 247 of 250).
func TestDisconnectCountedWhenTakenOver(t *testing.T) {
	network, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	l, err := network.Listen("sw")
	require.NoError(t, err)
	sw := newSwitch(t, sion.PlaceConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- sw.Serve(ctx, deafListener{l}) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-served)
		require.NoError(t, sw.Close())
	})

	cut := &cutTransport{Transport: network, conns: map[string][]transport.Conn{}, blocked: map[string]bool{}}
	s, err := sion.Dial(context.Background(), cut, "sw", sion.SessionConfig{Name: "roamer", Reconnect: fastReconnect})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	sub := subscribe(t, s, "{type ⊑ Reading}")
	pub := open(t, sw, "pub")

	for i := 1; i <= 3; i++ {
		cut.cut("sw") // the entity's end of its connection
		cut.mend("sw")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			st := sw.Stats()
			assert.Equal(c, uint64(i), st.Disconnects, "departure %d counted once", i)
			assert.Zero(c, st.Away, "back at once: the switch never saw it away")
		}, 10*time.Second, time.Millisecond)
		syncCtx, done := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, s.Sync(syncCtx), "the session works on its new connection")
		publish(t, pub, reading(i))
		d, err := sub.Next(syncCtx)
		done()
		require.NoError(t, err)
		v, _ := d.Event.Value("n")
		assert.Equal(t, int64(i), v.Int())
	}
}

package nats_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/nats"
)

// startServer starts an embedded NATS server on a random 127.0.0.1 port
// and shuts it down, waiting for it, when the test ends.
func startServer(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	if opts == nil {
		opts = &server.Options{}
	}
	opts.Host = "127.0.0.1"
	if opts.Port == 0 {
		opts.Port = -1
	}
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	go s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	require.True(t, s.ReadyForConnections(10*time.Second), "NATS server not ready")
	return s
}

// connect returns a NATS connection to urls (the first, then the others
// on reconnect), closed when the test ends.
func connect(t testing.TB, urls string, opts ...natsgo.Option) *natsgo.Conn {
	t.Helper()
	opts = append([]natsgo.Option{natsgo.MaxReconnects(-1), natsgo.ReconnectWait(20 * time.Millisecond),
		natsgo.DontRandomize(), natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {})}, opts...)
	nc, err := natsgo.Connect(urls, opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// newTransport returns a Transport over nc with cfg (its Conn set).
func newTransport(t testing.TB, nc *natsgo.Conn, cfg nats.Config) *nats.Transport {
	t.Helper()
	cfg.Conn = nc
	tr, err := nats.New(cfg)
	require.NoError(t, err)
	return tr
}

// prefix returns a subject prefix of its own for test t.
func prefix(t testing.TB) string {
	return fmt.Sprintf("sion%d", time.Now().UnixNano())
}

// startCluster starts n embedded NATS servers clustered on random
// 127.0.0.1 ports, and waits until each has a route to every other.
func startCluster(t testing.TB, n int) []*server.Server {
	t.Helper()
	name := fmt.Sprintf("sion-%d", time.Now().UnixNano())
	clusterOpts := func(i int) *server.Options {
		return &server.Options{ServerName: fmt.Sprintf("n%d", i),
			Cluster: server.ClusterOpts{Name: name, Host: "127.0.0.1", Port: -1}}
	}
	seed := startServer(t, clusterOpts(0))
	servers := []*server.Server{seed}
	routes := server.RoutesFromStr("nats://" + seed.ClusterAddr().String())
	for i := 1; i < n; i++ {
		opts := clusterOpts(i)
		opts.Routes = routes
		servers = append(servers, startServer(t, opts))
	}
	require.Eventually(t, func() bool {
		for _, s := range servers {
			if s.NumRemotes() != n-1 {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "cluster routes")
	return servers
}

// urls returns the client URLs of servers, comma-separated.
func urls(servers ...*server.Server) string {
	var out string
	for i, s := range servers {
		if i > 0 {
			out += ","
		}
		out += s.ClientURL()
	}
	return out
}

// kill shuts s down and waits for it.
func kill(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}

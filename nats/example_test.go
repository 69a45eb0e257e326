package nats_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	"github.com/sion-go/sion/nats"
)

// A Listener on "switch-a" and a Conn dialed to it, over an embedded NATS
// server; sion's Switch.Serve and Switch.Link take the Listener and the
// Transport as they take transport/tcp's.
func Example() {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		log.Fatal(err)
	}
	go s.Start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	if !s.ReadyForConnections(10 * time.Second) {
		log.Fatal("NATS server not ready")
	}
	nc, err := natsgo.Connect(s.ClientURL(), natsgo.MaxReconnects(-1))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	tr, err := nats.New(nats.Config{Conn: nc}) // subjects under "sion."
	if err != nil {
		log.Fatal(err)
	}
	l, err := tr.Listen("switch-a") // on _sion.listen.switch-a
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx := context.Background()
	c, err := tr.Dial(ctx, "switch-a")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	a, err := l.Accept(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()

	if err := c.Send(ctx, []byte("hello")); err != nil {
		log.Fatal(err)
	}
	f, err := a.Recv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s from %v to %v, frames up to %d bytes\n", f, a.RemoteAddr().Network(), a.LocalAddr(), a.MaxFrameBytes())
	// Output: hello from nats to switch-a, frames up to 1048576 bytes
}

package tcp_test

import (
	"context"
	"fmt"

	"github.com/sion-go/sion/transport/tcp"
)

func ExampleTransport() {
	ctx := context.Background()
	var tr tcp.Transport    // the zero Transport has the defaults: plain TCP
	l, err := tr.Listen("") // 127.0.0.1, a port the system picks
	if err != nil {
		panic(err)
	}
	defer l.Close()
	c, err := tr.Dial(ctx, l.Addr().String()) // returns once established
	if err != nil {
		panic(err)
	}
	defer c.Close()
	s, err := l.Accept(ctx)
	if err != nil {
		panic(err)
	}
	defer s.Close()

	if err := c.Send(ctx, []byte("hello")); err != nil {
		panic(err)
	}
	frame, err := s.Recv(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s over %s, frames up to %d bytes\n", frame, s.LocalAddr().Network(), s.MaxFrameBytes())
	// Output: hello over tcp, frames up to 1048576 bytes
}

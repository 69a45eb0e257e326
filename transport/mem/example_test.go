package mem_test

import (
	"context"
	"fmt"

	"github.com/sion-go/sion/transport/mem"
)

func ExampleNetwork() {
	ctx := context.Background()
	var n mem.Network // the zero Network has the defaults
	l, err := n.Listen("switch-1")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	c, err := n.Dial(ctx, "switch-1") // queued until Accept
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
	fmt.Printf("%s from %v over %s\n", frame, s.RemoteAddr(), s.LocalAddr().Network())
	// Output: hello from @1 over mem
}

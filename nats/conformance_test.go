package nats_test

import (
	"testing"

	"github.com/sion-go/sion/nats"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/transporttest"
)

func TestConformance(t *testing.T) {
	s := startServer(t, nil)
	for _, v := range []struct {
		name string
		cfg  nats.Config
	}{
		{"defaults", nats.Config{}},
		{"small window", nats.Config{WindowFrames: 8, WindowBytes: 4 << 10, MaxFrameBytes: 1 << 10}},
	} {
		t.Run(v.name, func(t *testing.T) {
			frames := v.cfg.WindowFrames
			if frames == 0 {
				frames = nats.DefaultWindowFrames
			}
			transporttest.Run(t, func(t *testing.T) (transport.Transport, string) {
				nc := connect(t, s.ClientURL())
				return newTransport(t, nc, v.cfg), "switch-a"
			}, transporttest.Caps{MaxFrameBytes: v.cfg.MaxFrameBytes, BufferFrames: frames})
		})
	}
}

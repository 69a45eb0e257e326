package nats_test

import (
	"cmp"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/nats"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/transporttest"
)

func TestConformance(t *testing.T) {
	s := startServer(t, nil)
	small := startServer(t, &server.Options{MaxPayload: 4 << 10}) // frames of 1 MiB in 257 chunks
	for _, v := range []struct {
		name string
		s    *server.Server
		cfg  nats.Config
	}{
		{"defaults", s, nats.Config{}},
		{"small window", s, nats.Config{WindowFrames: 8, WindowBytes: 4 << 10, MaxFrameBytes: 1 << 10}},
		{"max_payload 4 KiB", small, nats.Config{}},
		{"default prefix", s, nats.Config{SubjectPrefix: nats.DefaultSubjectPrefix}},
		{"short timers", s, nats.Config{PingInterval: 10 * time.Millisecond, DeadAfter: 5 * time.Second,
			RetransmitTimeout: time.Millisecond, CloseTimeout: time.Second}},
	} {
		t.Run(v.name, func(t *testing.T) {
			s := v.s
			frames := v.cfg.WindowFrames
			if frames == 0 {
				frames = nats.DefaultWindowFrames
			}
			transporttest.Run(t, func(t *testing.T) (transport.Transport, string) {
				nc := connect(t, s.ClientURL())
				cfg := v.cfg
				if cfg.SubjectPrefix == "" {
					cfg.SubjectPrefix = prefix(t) // not the last subtest's, which its server may still be removing
				}
				return newTransport(t, nc, cfg), "switch-a"
			}, transporttest.Caps{MaxFrameBytes: v.cfg.MaxFrameBytes, BufferFrames: frames,
				PendingFrameBytes: min(nats.DefaultPendingReadBytes, cmp.Or(v.cfg.MaxFrameBytes, transport.DefaultMaxFrameBytes))})
		})
	}
}

func TestNew(t *testing.T) {
	nc := connect(t, startServer(t, nil).ClientURL())
	for _, tc := range []struct {
		name    string
		cfg     nats.Config
		wantErr string // a regexp; "" for none
	}{
		{"zero means defaults", nats.Config{Conn: nc}, ""},
		{"set", nats.Config{Conn: nc, SubjectPrefix: "a.b", MaxFrameBytes: 10, WindowFrames: 1, WindowBytes: 1,
			PingInterval: 1, DeadAfter: 2, RetransmitTimeout: 1, CloseTimeout: 1, HandshakeTimeout: 1}, ""},
		{"no connection", nats.Config{}, `^nats: Config\.Conn is nil$`},
		{"negative MaxFrameBytes", nats.Config{Conn: nc, MaxFrameBytes: -1}, `^nats: Config\.MaxFrameBytes is -1`},
		{"huge WindowBytes", nats.Config{Conn: nc, WindowBytes: 1 << 31}, `^nats: Config\.WindowBytes is 2147483648`},
		{"negative WindowFrames", nats.Config{Conn: nc, WindowFrames: -1}, `^nats: Config\.WindowFrames is -1`},
		{"negative BacklogConns", nats.Config{Conn: nc, BacklogConns: -1}, `^nats: Config\.BacklogConns is -1`},
		{"negative PendingReadBytes", nats.Config{Conn: nc, PendingReadBytes: -1}, `^nats: Config\.PendingReadBytes is -1`},
		{"negative PingInterval", nats.Config{Conn: nc, PingInterval: -1}, `^nats: Config\.PingInterval is -1ns`},
		{"negative CloseTimeout", nats.Config{Conn: nc, CloseTimeout: -1}, `^nats: Config\.CloseTimeout is -1ns`},
		{"DeadAfter not over PingInterval", nats.Config{Conn: nc, PingInterval: 2, DeadAfter: 2}, `^nats: Config\.DeadAfter is 2ns, want more than PingInterval`},
		{"wildcard prefix", nats.Config{Conn: nc, SubjectPrefix: "sion.*"}, `^nats: Config\.SubjectPrefix "sion\.\*": token "\*" has a wildcard`},
		{"empty token", nats.Config{Conn: nc, SubjectPrefix: "sion..x"}, `empty token`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := nats.New(tc.cfg)
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.NotNil(t, tr)
				return
			}
			require.Error(t, err)
			require.Regexp(t, tc.wantErr, err.Error())
		})
	}
}

func TestListenAndDialNames(t *testing.T) {
	s := startServer(t, nil)
	cfg := nats.Config{SubjectPrefix: prefix(t)}
	a := newTransport(t, connect(t, s.ClientURL()), cfg)
	b := newTransport(t, connect(t, s.ClientURL()), cfg)
	for _, bad := range []string{"a b", "a.*", ">", "a..b", "a."} {
		_, err := a.Listen(bad)
		require.Error(t, err, "Listen(%q)", bad)
		_, err = a.Dial(t.Context(), bad)
		require.ErrorIs(t, err, transport.ErrNoListener, "Dial(%q)", bad)
	}
	l, err := a.Listen("region.switch-1")
	require.NoError(t, err)
	defer l.Close()
	assert.Equal(t, "region.switch-1", l.Addr().String())
	assert.Equal(t, "nats", l.Addr().Network())
	// Another Transport, another NATS connection: the probe finds l.
	_, err = b.Listen("region.switch-1")
	require.ErrorIs(t, err, transport.ErrAddrInUse)
	// Another prefix is another subject space.
	other := newTransport(t, connect(t, s.ClientURL()), nats.Config{SubjectPrefix: prefix(t) + ".other"})
	l2, err := other.Listen("region.switch-1")
	require.NoError(t, err)
	require.NoError(t, l2.Close())
}

package sion_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/internal/linkctl"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/mem"
)

// rawLink is a hand-driven child switch: it completes the link handshake
// and then sends whatever a test wants.
type rawLink struct {
	t    *testing.T
	conn transport.Conn
	ctx  context.Context
}

func dialRawLink(t *testing.T, n *network, at int, name string) *rawLink {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	conn, err := n.tr.Dial(ctx, n.addrs[at])
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	l := &rawLink{t: t, conn: conn, ctx: ctx}
	l.send(&wire.Hello{Version: 2, Session: name})
	require.IsType(t, &wire.Welcome{}, l.recv())
	l.sendControl(&linkctl.LinkRequest{Switch: name, Place: n.place.Name(), Link: 7})
	c, ok := l.recv().(*wire.Control)
	require.True(t, ok)
	m, err := linkctl.Decode(c)
	require.NoError(t, err)
	require.IsType(t, &linkctl.LinkAccept{}, m)
	l.sendControl(&linkctl.Synced{})
	return l
}

// controlFrame encodes link-control message m.
func controlFrame(t testing.TB, m linkctl.Message) []byte {
	t.Helper()
	f, err := linkctl.Encode(m, wire.DefaultLimits())
	require.NoError(t, err)
	return f
}

func (l *rawLink) sendControl(m linkctl.Message) {
	l.t.Helper()
	require.NoError(l.t, l.conn.Send(l.ctx, controlFrame(l.t, m)))
}

func (l *rawLink) send(m wire.Message) {
	l.t.Helper()
	f, err := wire.Encode(nil, m)
	require.NoError(l.t, err)
	require.NoError(l.t, l.conn.Send(l.ctx, f))
}

func (l *rawLink) recv() wire.Message {
	l.t.Helper()
	f, err := l.conn.Recv(l.ctx)
	require.NoError(l.t, err)
	m, err := wire.Decode(f, wire.DefaultLimits())
	require.NoError(l.t, err)
	return m
}

// recvControl reads frames until a control message of kind arrives, and
// returns it; it fails if the link ends.
func (l *rawLink) recvControl(kind linkctl.Kind) linkctl.Message {
	l.t.Helper()
	for {
		if c, ok := l.recv().(*wire.Control); ok {
			m, err := linkctl.Decode(c)
			require.NoError(l.t, err)
			if m.Kind() == kind {
				return m
			}
		}
	}
}

// closed reports whether the switch ended the link: frames until an
// error frame, then the end.
func (l *rawLink) closedWith() string {
	l.t.Helper()
	msg := ""
	for {
		f, err := l.conn.Recv(l.ctx)
		if err != nil {
			require.NotErrorIs(l.t, err, context.DeadlineExceeded, "the link stayed open")
			return msg
		}
		if m, err := wire.Decode(f, wire.DefaultLimits()); err == nil {
			if e, ok := m.(*wire.Error); ok {
				msg = e.Message
			}
		}
	}
}

// TestMalformedLinkFrames: what a peer switch sends that the switch
// cannot use closes that link only, with an error frame saying why;
// events the place refuses are counted and dropped; bad filters are
// refused in the acknowledgement.
func TestMalformedLinkFrames(t *testing.T) {
	overTransports(t, sion.PlaceConfig{}, []int{-1, 0}, func(t *testing.T, n *network) {
		sub := subscribe(t, open(t, n.sws[1], "app"), `{type ⊑ Alarm}`)

		for _, tc := range []struct {
			name  string
			frame func() []byte
			says  string
		}{
			{"garbage", func() []byte { return []byte{0xff, 0x00, 0x01} }, "protocol error"},
			{"a session frame", func() []byte { f, _ := wire.Encode(nil, &wire.Pull{Seq: 1}); return f }, "does not carry Pull frames"},
			{"register without a key", func() []byte {
				f, _ := wire.Encode(nil, &wire.Control{Body: []byte{byte(linkctl.KindRegister)}})
				return f
			}, `malformed register message: key`},
			{"release of an unknown key", func() []byte { return controlFrame(t, &linkctl.Release{Key: 99}) }, "release of key 99"},
			{"a control message out of place", func() []byte { return controlFrame(t, &linkctl.LinkAccept{Switch: "x"}) }, `unexpected link accept message`},
			{"a key that is not a minimal varint", func() []byte {
				f, _ := wire.Encode(nil, &wire.Control{Body: []byte{byte(linkctl.KindAck), 0x80, 0x00}})
				return f
			}, `malformed ack message: ack`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				l := dialRawLink(t, n, 0, "rogue")
				require.NoError(t, l.conn.Send(l.ctx, tc.frame()))
				assert.Contains(t, l.closedWith(), tc.says)
			})
		}

		// A bad filter is refused in its acknowledgement; the link stays.
		l := dialRawLink(t, n, 0, "careless")
		l.sendControl(&linkctl.Register{Ack: 1, Filter: "{type ⊑ Gossip}", Key: 1})
		ack := l.recvControl(linkctl.KindAck).(*linkctl.Ack)
		assert.Contains(t, ack.Error, `unknown event type "Gossip"`)
		// An event the place refuses is counted and dropped; the link stays.
		l.send(&wire.Forward{Event: wire.Event{ID: [16]byte{1}, Type: "Gossip", TTL: 3}})
		l.send(&wire.Forward{Event: wire.Event{ID: [16]byte{2}, Type: "Alarm", TTL: 3}})
		l.send(&wire.Forward{Event: wire.Event{ID: [16]byte{2}, Type: "Alarm", TTL: 3}}) // a duplicate
		var info sion.LinkInfo
		require.Eventually(t, func() bool {
			for _, li := range n.sws[0].Links() {
				if li.Peer == "careless" {
					info = li
				}
			}
			return info.EventsReceived == 3
		}, 10*time.Second, time.Millisecond, "all three frames handled")
		require.Eventually(t, func() bool { return count(sub) == 1 }, 10*time.Second, time.Millisecond, "the good event crossed sw0 to sw1")
		assert.Equal(t, uint64(1), info.Refused)
		assert.Equal(t, uint64(1), info.Duplicates)
		assert.Equal(t, uint64(3), info.EventsReceived)

		// The rest of the place never noticed.
		l.conn.Close() // it would not answer Flush's marker
		require.Eventually(t, func() bool { return len(n.sws[0].Links()) == 1 }, 10*time.Second, time.Millisecond)
		publish(t, open(t, n.sws[0], "pub"), &sion.Event{Type: "Alarm"})
		n.flush()
		assert.Equal(t, 1, count(sub))
	})
}

// sinceOf returns when each of sw's shared links came up, by peer: a link
// that is closed and re-established shows a later time.
func sinceOf(sw *sion.Switch) map[string]time.Time {
	out := map[string]time.Time{}
	for _, li := range sw.Links() {
		out[li.Peer] = li.Since
	}
	return out
}

// upSince waits until sw's n shared links are all up — an accepted link is
// up once its peer has acknowledged this side's filters, a little after
// Link returns on the other side — and returns sinceOf.
func upSince(t *testing.T, sw *sion.Switch, n int) map[string]time.Time {
	t.Helper()
	require.Eventually(t, func() bool {
		links := sw.Links()
		for _, li := range links {
			if li.State != sion.LinkUp {
				return false
			}
		}
		return len(links) == n
	}, 10*time.Second, time.Millisecond)
	return sinceOf(sw)
}

// TestPeerInputNeverClosesOtherLinks: what a peer sends that this switch
// cannot answer or hand on — a probe's path too long to extend or too
// large for the frames of the other links — ends at most the link it came
// on, never the switch's other links (a trial found one probe frame from
// a child re-establishing every link of the switch, losing the events in
// between), and events keep crossing the place.
func TestPeerInputNeverClosesOtherLinks(t *testing.T) {
	memTr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	n := newNetwork(t, memTr, func(i int) string { return fmt.Sprintf("sw%d", i) }, sion.PlaceConfig{}, line(3))
	sub := subscribe(t, open(t, n.sws[2], "app"), `{type ⊑ Alarm}`)
	pub := open(t, n.sws[0], "pub")
	before := upSince(t, n.sws[1], 2)

	names := func(k, size int) []string {
		path := make([]string, k)
		for i := range path {
			path[i] = strings.Repeat("n", size)
		}
		return path
	}
	// A path whose probe exactly fills a frame: the answer and the probe
	// passed on are longer than any frame of the place.
	fits := func(size int) bool {
		f, err := linkctl.Encode(&linkctl.Probe{ID: 1, Hops: 3, Dir: 2, Path: names(16, size)}, wire.DefaultLimits())
		return err == nil && len(f) <= transport.DefaultMaxFrameBytes
	}
	size := sort.Search(transport.DefaultMaxFrameBytes, func(size int) bool { return !fits(size) }) - 1
	full := names(16, size)
	require.True(t, fits(size))
	require.False(t, fits(size+1))

	t.Run("a path too long to answer ends the sender's link", func(t *testing.T) {
		l := dialRawLink(t, n, 1, "rogue")
		l.sendControl(&linkctl.Probe{ID: 1, Hops: 3, Dir: 2, Path: names(linkctl.MaxNames, 1)})
		assert.Contains(t, l.closedWith(), "a probe with a path of 65536 switches")
	})
	t.Run("a path that fills the frame is dropped; the sender's link stays", func(t *testing.T) {
		l := dialRawLink(t, n, 1, "rogue2")
		l.sendControl(&linkctl.Probe{ID: 1, Hops: 3, Dir: 2, Path: full})
		l.sendControl(&linkctl.Marker{Ack: 7})
		ack := l.recvControl(linkctl.KindAck).(*linkctl.Ack)
		assert.Equal(t, uint64(7), ack.Ack, "the link answers after the probe")
		assert.Empty(t, ack.Error)
	})
	for k := 1; k <= 5; k++ {
		publish(t, pub, &sion.Event{Type: "Alarm"})
	}
	n.flush()
	assert.Equal(t, 5, count(sub), "every event crossed")
	assert.Equal(t, before, sinceOf(n.sws[1]), "sw1's links to sw0 and sw2 were never re-established")
}

// TestFilterTooLargeForALinkIsRefused: a filter that cannot be registered
// over a link because it does not fit the link's frames makes Subscribe
// fail (the S2 contract is not granted); the link stays up (it used to be
// closed, and closed again at each re-establishment), and nothing is left
// registered.
func TestFilterTooLargeForALinkIsRefused(t *testing.T) {
	tr, err := mem.NewNetwork(mem.Config{MaxFrameBytes: 64 << 10})
	require.NoError(t, err)
	n := newNetwork(t, tr, func(i int) string { return fmt.Sprintf("sw%d", i) }, sion.PlaceConfig{}, line(2))
	before := upSince(t, n.sws[0], 1)
	s := open(t, n.sws[0], "app")
	zones := make([]string, 12000)
	for i := range zones {
		zones[i] = fmt.Sprintf("%q", fmt.Sprint("zone-", i))
	}
	big := `{type ⊑ Notice; zone in {` + strings.Join(zones, ", ") + `}}`
	require.Greater(t, len(big), 64<<10)
	_, err = s.Subscribe(context.Background(), big)
	require.ErrorIs(t, err, sion.ErrNotGranted)
	assert.Contains(t, err.Error(), "does not fit the link's frames")
	assert.Empty(t, n.sws[0].Routes(), "nothing left registered")
	assert.Equal(t, 0, n.sws[0].Stats().Subscriptions-n.sws[0].Stats().Filters, "index and table agree")

	// The link never went down; a filter that fits crosses as before.
	sub := subscribe(t, s, `{type ⊑ Alarm}`)
	publish(t, open(t, n.sws[1], "pub"), &sion.Event{Type: "Alarm"})
	n.flush()
	assert.Equal(t, 1, count(sub))
	assert.Equal(t, before, sinceOf(n.sws[0]))
}

// TestGatewayCarriesNoTreeControl: a probe is control of a place's tree;
// over a gateway it is a protocol error that ends that gateway only (it
// used to be answered, telling the other place the switch's address).
func TestGatewayCarriesNoTreeControl(t *testing.T) {
	memTr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	approve := func(context.Context, sion.FederationRequest) error { return nil }
	n := newNetwork(t, memTr, func(i int) string { return fmt.Sprintf("sw%d", i) }, sion.PlaceConfig{Federation: approve}, line(2))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := memTr.Dial(ctx, n.addrs[0])
	require.NoError(t, err)
	defer conn.Close()
	l := &rawLink{t: t, conn: conn, ctx: ctx}
	l.send(&wire.Hello{Version: 2, Session: "gw"})
	require.IsType(t, &wire.Welcome{}, l.recv())
	l.sendControl(&linkctl.Federate{Switch: "other0", Place: "other", Gateway: "gw", Link: 1, Import: true, Export: true})
	c, ok := l.recv().(*wire.Control)
	require.True(t, ok)
	m, err := linkctl.Decode(c)
	require.NoError(t, err)
	require.IsType(t, &linkctl.LinkAccept{}, m)
	l.sendControl(&linkctl.Synced{})
	l.sendControl(&linkctl.Probe{ID: 1, Hops: 2, Dir: 2, Path: []string{"other0"}})
	assert.Contains(t, l.closedWith(), "unexpected probe message")
	sub := subscribe(t, open(t, n.sws[1], "app"), `{type ⊑ Alarm}`)
	publish(t, open(t, n.sws[0], "pub"), &sion.Event{Type: "Alarm"})
	n.flush()
	assert.Equal(t, 1, count(sub), "the place's own link kept working")
}

// TestLinkOpeningNamesChecked: the names a peer gives of itself when it
// asks for a link — a switch, its place, a gateway, an agent — are checked
// as a switch's own config is (not empty, at most MaxNameBytes, no NUL
// or newline): a name no config could hold is refused with an error
// frame naming it, counted, and no link comes up.
func TestLinkOpeningNamesChecked(t *testing.T) {
	long := strings.Repeat("n", sion.MaxNameBytes+1)
	overTransports(t, sion.PlaceConfig{}, []int{-1}, func(t *testing.T, n *network) {
		for _, tc := range []struct {
			name string
			req  func(place string) linkctl.Message
			want string
		}{
			{"link request, empty switch", func(p string) linkctl.Message { return &linkctl.LinkRequest{Place: p, Link: 1} }, "the requesting switch's name is empty"},
			{"link request, NUL in switch", func(p string) linkctl.Message { return &linkctl.LinkRequest{Switch: "a\x00b", Place: p, Link: 1} }, `the requesting switch's name "a\x00b" is not UTF-8 text without NUL and newline`},
			{"link request, newline in place", func(p string) linkctl.Message { return &linkctl.LinkRequest{Switch: "x", Place: p + "\n", Link: 1} }, "its place's name"},
			{"link request, long switch", func(p string) linkctl.Message { return &linkctl.LinkRequest{Switch: long, Place: p, Link: 1} }, fmt.Sprintf("has %d bytes, at most %d", len(long), sion.MaxNameBytes)},
			{"federate, empty gateway", func(string) linkctl.Message {
				return &linkctl.Federate{Switch: "x", Place: "elsewhere", Link: 1, Export: true}
			}, "the gateway's name is empty"},
			{"federate, empty place", func(string) linkctl.Message {
				return &linkctl.Federate{Switch: "x", Gateway: "g", Link: 1, Export: true}
			}, "its place's name is empty"},
			{"overlay link, newline in switch", func(p string) linkctl.Message { return &linkctl.OverlayLink{Switch: "a\nb", Place: p} }, "the requesting switch's name"},
			{"manage, empty agent", func(p string) linkctl.Message { return &linkctl.Manage{Place: p} }, "the agent's name is empty"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				refused := n.sws[0].Stats().Refused
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				conn, err := n.tr.Dial(ctx, n.addrs[0])
				require.NoError(t, err)
				defer conn.Close()
				l := &rawLink{t: t, conn: conn, ctx: ctx}
				l.send(&wire.Hello{Version: 2, Session: "intruder"})
				require.IsType(t, &wire.Welcome{}, l.recv())
				l.sendControl(tc.req(n.place.Name()))
				msg := l.closedWith()
				assert.Contains(t, msg, "protocol")
				assert.Contains(t, msg, tc.want)
				assert.Equal(t, refused+1, n.sws[0].Stats().Refused, "counted")
				assert.Empty(t, n.sws[0].Links(), "no link came up")
			})
		}
	})
}

// TestLinkAcceptNamesChecked: a peer that accepts a link under a name no
// config could hold is refused by the requesting switch: Link returns an
// error wrapping ErrProtocol that names it.
func TestLinkAcceptNamesChecked(t *testing.T) {
	tr, err := mem.NewNetwork(mem.Config{})
	require.NoError(t, err)
	l, err := tr.Listen("parent")
	require.NoError(t, err)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { // the hostile parent
		defer close(done)
		conn, err := l.Accept(ctx)
		if err != nil {
			return
		}
		defer conn.Close()
		p := &rawLink{t: t, conn: conn, ctx: ctx}
		if _, ok := p.recv().(*wire.Hello); !ok {
			return
		}
		p.send(&wire.Welcome{Version: 2, Switch: "par\nent", Place: "test"})
		p.recv() // the link request
		p.sendControl(&linkctl.LinkAccept{Switch: "par\nent", Place: "test"})
		conn.Recv(ctx) // until the child closes
	}()
	sw := newSwitch(t, sion.PlaceConfig{})
	_, err = sw.Link(ctx, tr, "parent", sion.LinkConfig{RetryMin: time.Millisecond, RetryMax: time.Millisecond})
	require.ErrorIs(t, err, sion.ErrProtocol)
	assert.ErrorContains(t, err, `the accepting switch's name "par\nent" is not UTF-8 text without NUL and newline`)
	<-done
}

package sion_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport"
	"github.com/sion-go/sion/transport/tcp"
)

// serveTCP serves sw's remote sessions over loopback TCP with tr until the
// test ends, and returns the address.
func serveTCP(t *testing.T, sw *sion.Switch, tr transport.Transport) string {
	t.Helper()
	return serveAt(t, sw, tr, "127.0.0.1:0")
}

func newTCP(t *testing.T, cfg tcp.Config) *tcp.Transport {
	t.Helper()
	tr, err := tcp.New(cfg)
	require.NoError(t, err)
	return tr
}

// restartable returns a function that starts a switch "sw1" of one place
// serving over tr at addr (a port 0 for a new one, or the address of one
// stopped, to start it again), and returns it, its address, and a function
// that stops it.
func restartable(t *testing.T, tr transport.Transport) func(addr string) (*sion.Switch, string, func()) {
	t.Helper()
	place, err := sion.NewEventPlace(sion.PlaceConfig{Name: "test", Ontology: ont1(t)})
	require.NoError(t, err)
	return func(addr string) (*sion.Switch, string, func()) { return serveOn(t, tr, addr, place) }
}

// serveOn starts a switch of place serving remote sessions on tr at addr
// (waiting until the address is free), and returns it, the address
// listened on and a stop function, also called at cleanup.
func serveOn(t *testing.T, tr transport.Transport, addr string, place *sion.EventPlace) (*sion.Switch, string, func()) {
	t.Helper()
	sw, err := sion.NewSwitch(sion.SwitchConfig{Name: "sw1", Place: place})
	require.NoError(t, err)
	var l transport.Listener
	require.Eventually(t, func() bool { l, err = tr.Listen(addr); return err == nil }, waitFor, 10*time.Millisecond)
	sctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- sw.Serve(sctx, l) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-served; sw.Close() }) }
	t.Cleanup(stop)
	return sw, l.Addr().String(), stop
}

// fastReconnect retries at once, so that tests do not wait for backoff.
var fastReconnect = sion.ReconnectPolicy{MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}

// connectionLog records a remote session's connection events.
type connectionLog struct {
	mu     sync.Mutex
	events []sion.ConnectionEvent
	ch     chan sion.ConnectionEvent
}

func newConnectionLog() *connectionLog {
	return &connectionLog{ch: make(chan sion.ConnectionEvent, 1024)}
}

func (l *connectionLog) record(ev sion.ConnectionEvent) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
	select {
	case l.ch <- ev:
	default:
	}
}

// next returns the next event, or fails t after 10 s.
func (l *connectionLog) next(t *testing.T) sion.ConnectionEvent {
	t.Helper()
	select {
	case ev := <-l.ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no connection event within 10 s")
		return sion.ConnectionEvent{}
	}
}

func (l *connectionLog) count(connected bool) (n, resumed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range l.events {
		if ev.Connected == connected {
			n++
			if ev.Resumed {
				resumed++
			}
		}
	}
	return n, resumed
}

// cutAway cuts the proxy's connections and refuses new ones, and waits
// until both ends know that the remote session is away: the entity (its
// next connection event, in log) and the switch (Stats.Away, once
// that connection's reader and writer have returned: Stats.Disconnects
// counts it). Only then does an
// event published for the session wait in its stream unsent until the
// entity returns: before, the writer may still send it on the connection
// that was cut, and the stream then keeps it ("sent, unconfirmed": it may
// have reached the entity) over its byte bound, sends it again on the
// resume, and drops unsent events after it instead (remote_stream.go) — a
// legitimate order that a test of what the bound keeps must not leave to
// chance. Waiting for the proxy to see the switch close its socket would
// not do: the switch closes it before its writer returns, and the writer
// may take one more event meanwhile.
func cutAway(t *testing.T, sw *sion.Switch, proxy *tcpProxy, log *connectionLog) {
	t.Helper()
	gone := sw.Stats().Disconnects
	proxy.setDown(true)
	require.True(t, proxy.cut())
	require.False(t, log.next(t).Connected, "the entity knows")
	require.Eventually(t, func() bool { return sw.Stats().Disconnects > gone }, 10*time.Second, time.Millisecond,
		"the switch knows: Stats.Disconnects counts the session's departure")
}

// dialProxied starts a switch served over TCP behind a proxy that can cut
// its connections, and Dials a remote session named name through it with
// policy, whose OnChange the returned log records. The session closes
// before the switch at the test's end.
func dialProxied(t *testing.T, name string, policy sion.ReconnectPolicy) (*sion.Switch, *tcpProxy, *sion.Session, *connectionLog) {
	t.Helper()
	tr := newTCP(t, tcp.Config{})
	sw := newSwitch(t, sion.PlaceConfig{})
	proxy := newProxy(t, serveTCP(t, sw, tr))
	log := newConnectionLog()
	policy.OnChange = log.record
	s, err := sion.Dial(context.Background(), tr, proxy.Addr(), sion.SessionConfig{Name: name, Reconnect: policy})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return sw, proxy, s, log
}

// TestReconnectLosesNothingThroughCuts: a publisher and a subscriber, both
// remote, reach their switch through a proxy that cuts their TCP
// connections 20 times while the publisher sends about 2,000 events a
// second. Both reconnect and resume: the subscriber receives every event
// published, once, in order; the publisher's requests in flight at a cut
// are neither lost nor repeated.
func TestReconnectLosesNothingThroughCuts(t *testing.T) {
	const cuts = 20
	tr := newTCP(t, tcp.Config{})
	sw := newSwitch(t, sion.PlaceConfig{})
	proxy := newProxy(t, serveTCP(t, sw, tr))
	ctx := context.Background()

	subLog, pubLog := newConnectionLog(), newConnectionLog()
	dial := func(name string, log *connectionLog) *sion.Session {
		policy := fastReconnect
		policy.OnChange = log.record
		s, err := sion.Dial(ctx, tr, proxy.Addr(), sion.SessionConfig{Name: name, Reconnect: policy})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	subscriber, publisher := dial("subscriber", subLog), dial("publisher", pubLog)
	var mu sync.Mutex
	var got []int64
	sub := subscribe(t, subscriber, `{type ⊑ Reading}`, sion.WithQueue(sion.MaxQueue), sion.WithHandler(func(d sion.Delivery) {
		mu.Lock()
		got = append(got, must(d.Event.Value("n")).Int())
		mu.Unlock()
	}))

	stop := make(chan struct{})
	published := make(chan int, 1)
	go func() {
		n := 0
		defer func() { published <- n }()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for range 2 { // about 2,000 a second
				if err := publisher.Publish(ctx, reading(n+1)); err != nil {
					t.Errorf("publish %d: %v", n+1, err)
					return
				}
				n++
			}
		}
	}()
	for done := 0; done < cuts; {
		time.Sleep(100 * time.Millisecond)
		if proxy.cut() {
			done++
		}
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	n := <-published

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, subscriber.Sync(sctx))
	mu.Lock()
	defer mu.Unlock()
	subDown, _ := subLog.count(false)
	pubDown, _ := pubLog.count(false)
	_, subResumed := subLog.count(true)
	_, pubResumed := pubLog.count(true)
	t.Logf("published %d, received %d; %d cuts; subscriber: %d disconnections, %d resumed; publisher: %d, %d", n, len(got), cuts, subDown, subResumed, pubDown, pubResumed)
	require.Equal(t, seq(1, int64(n)), got, "every event once, in order")
	assert.GreaterOrEqual(t, subDown, cuts/2, "the subscriber's connection was cut")
	assert.Equal(t, subDown, subResumed, "each reconnect resumed")
	assert.Equal(t, pubDown, pubResumed, "each reconnect resumed")
	assert.Zero(t, sub.Stats().Dropped)
	assert.Zero(t, sw.Stats().Dropped)
}

// TestReconnectAfterRetentionReportsTheLoss: a subscriber away longer than
// its retention finds its session ended; it is opened anew, its
// subscription registered again, and it learns exactly how many matched
// events it lost.
func TestReconnectAfterRetentionReportsTheLoss(t *testing.T) {
	policy := fastReconnect
	policy.Retention = 200 * time.Millisecond
	sw, proxy, s, log := dialProxied(t, "away", policy)
	ctx := context.Background()
	sub := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(1000))
	pub := open(t, sw, "pub")
	for n := 1; n <= 5; n++ {
		publish(t, pub, reading(n))
	}
	require.NoError(t, s.Sync(ctx))
	assert.Equal(t, seq(1, 5), ns(queued(sub)))

	cutAway(t, sw, proxy, log)
	const lost = 50
	for n := 6; n < 6+lost; n++ { // matched, held for the session while it is away
		publish(t, pub, reading(n))
	}
	require.Eventually(t, func() bool { return sw.Stats().Sessions == 1 }, 10*time.Second, time.Millisecond, "the session ends after its retention")
	for n := 100; n < 130; n++ { // not matched for it any more
		publish(t, pub, reading(n))
	}
	proxy.setDown(false)
	ev := log.next(t)
	require.True(t, ev.Connected, "%+v", ev)
	assert.False(t, ev.Resumed, "opened anew")
	assert.True(t, ev.Expired)
	assert.Equal(t, uint64(lost), ev.Lost, "exactly the events matched and not delivered")
	assert.Equal(t, uint64(lost), sub.Stats().Dropped)

	publish(t, pub, reading(200))
	require.NoError(t, s.Sync(ctx))
	assert.Equal(t, []int64{200}, ns(queued(sub)), "the subscription was registered again")
	assert.Equal(t, uint64(lost), sw.Stats().Dropped, "the switch counted them too")
}

// TestSlowConsumerCancelsWhileResuming: a remote subscription whose
// WithSlowConsumer callback cancels it learns of the events lost while its
// session was away as the session reconnects; the callback's Cancel
// returns and the session carries on. Before: the callback ran under the
// lock that orders requests, and Cancel's request waited for it forever.
func TestSlowConsumerCancelsWhileResuming(t *testing.T) {
	policy := fastReconnect
	policy.Retention = 200 * time.Millisecond
	sw, proxy, s, log := dialProxied(t, "away", policy)
	ctx := context.Background()
	var sub *sion.Subscription
	cancelled := make(chan error, 1)
	sub = subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(1000), sion.WithSlowConsumer(func(sion.SubscriptionStats) {
		cancelled <- sub.Cancel()
	}))
	pub := open(t, sw, "pub")

	cutAway(t, sw, proxy, log)
	const lost = 10
	for n := 1; n <= lost; n++ { // matched, held for the session while it is away
		publish(t, pub, reading(n))
	}
	require.Eventually(t, func() bool { return sw.Stats().Sessions == 1 }, 10*time.Second, time.Millisecond, "the session ends after its retention")
	proxy.setDown(false)
	select {
	case err := <-cancelled:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the slow-consumer callback's Cancel did not return within 10 s")
	}
	ev := log.next(t)
	require.True(t, ev.Connected, "%+v", ev)
	assert.Equal(t, uint64(lost), ev.Lost)
	assert.Equal(t, uint64(lost), sub.Stats().Dropped)
	require.NoError(t, s.Sync(ctx), "the session carries on")
}

// TestReconnectOverTheBoundReportsTheLoss: a subscriber away for less than
// its retention, but while more than RetentionBytes of events matched,
// resumes and receives the newest that fit; the oldest were dropped,
// counted on both sides, and reported exactly when it reconnected.
func TestReconnectOverTheBoundReportsTheLoss(t *testing.T) {
	policy := fastReconnect
	policy.RetentionBytes = 32 << 10
	sw, proxy, s, log := dialProxied(t, "away", policy)
	ctx := context.Background()
	sub := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(1000))
	pub := open(t, sw, "pub")

	cutAway(t, sw, proxy, log) // so that no event is sent before the entity returns
	assert.Equal(t, 1, sw.Stats().Away, "kept for its retention")
	const published = 200
	pad := strings.Repeat("x", 1000)
	for n := 1; n <= published; n++ {
		ev := reading(n)
		ev.ContentType, ev.Data = "application/json", fmt.Appendf(nil, `{"pad":%q}`, pad)
		publish(t, pub, ev)
	}
	proxy.setDown(false)
	ev := log.next(t)
	require.True(t, ev.Connected)
	assert.True(t, ev.Resumed)
	require.NoError(t, s.Sync(ctx))
	assert.Equal(t, 0, sw.Stats().Away, "back: no longer away")
	got := ns(queued(sub))
	t.Logf("%d published while away, %d received, %d lost", published, len(got), ev.Lost)
	assert.Equal(t, seq(int64(published-len(got)+1), published), got, "the newest, in order: the oldest were dropped")
	assert.Less(t, len(got), published, "the bound dropped some")
	assert.Equal(t, uint64(published-len(got)), ev.Lost, "exactly")
	assert.Equal(t, ev.Lost, sub.Stats().Dropped)
	assert.Equal(t, ev.Lost, sw.Stats().Dropped)
	st := sub.Stats()
	assert.Equal(t, uint64(published), st.Matched, "matched on the switch, whether received or lost")
	assert.Equal(t, st.Matched, st.Delivered+st.Dropped)
}

// TestDeadPeerEventsCountedAndSaid: a subscriber that stops (its
// connection frozen, as by SIGSTOP) is declared dead by heartbeats. Every
// event the switch matched for it is either received or counted as
// dropped; without reconnect, its subscription says why it ended; with
// reconnect, it receives them all once it is back.
func TestDeadPeerEventsCountedAndSaid(t *testing.T) {
	const frozen = 2000
	for _, reconnect := range []bool{false, true} {
		t.Run(fmt.Sprintf("reconnect=%v", reconnect), func(t *testing.T) {
			tr := newTCP(t, tcp.Config{HeartbeatInterval: 50 * time.Millisecond, DeadAfter: 300 * time.Millisecond})
			sw := newSwitch(t, sion.PlaceConfig{})
			proxy := newProxy(t, serveTCP(t, sw, tr))
			ctx := context.Background()
			log := newConnectionLog()
			policy := fastReconnect
			policy.Disabled, policy.OnChange = !reconnect, log.record
			s, err := sion.Dial(ctx, tr, proxy.Addr(), sion.SessionConfig{Name: "sleeper", Reconnect: policy})
			require.NoError(t, err)
			defer s.Close()
			sub := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(4*frozen))
			pub := open(t, sw, "pub")
			for n := 1; n <= 10; n++ {
				publish(t, pub, reading(n))
			}
			require.NoError(t, s.Sync(ctx)) // received and confirmed

			proxy.freeze(true)
			for n := 11; n < 11+frozen; n++ {
				publish(t, pub, reading(n))
			}
			require.False(t, log.next(t).Connected, "declared dead")
			if !reconnect {
				<-s.Done()
				got := ns(queued(sub))
				assert.Equal(t, seq(1, 10), got)
				_, err := sub.Next(ctx)
				require.ErrorIs(t, err, sion.ErrClosed)
				require.ErrorIs(t, err, tcp.ErrPeerDead, "it says why: %v", err)
				require.ErrorIs(t, s.Err(), tcp.ErrPeerDead)
				require.Eventually(t, func() bool { return sw.Stats().Sessions == 1 }, 10*time.Second, time.Millisecond, "the switch ended its side")
				st := sw.Stats()
				assert.Equal(t, uint64(10), st.Deliveries, "received and confirmed")
				assert.Equal(t, uint64(frozen), st.Dropped, "the rest is counted")
				proxy.freeze(false)
				return
			}
			proxy.freeze(false)
			require.True(t, log.next(t).Connected)
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			require.NoError(t, s.Sync(sctx))
			assert.Equal(t, seq(1, 10+frozen), ns(queued(sub)), "every event once, in order")
			st := sw.Stats()
			assert.Equal(t, uint64(10+frozen), st.Deliveries)
			assert.Zero(t, st.Dropped)
		})
	}
}

// TestRequestsWaitForTheConnection: a call made while the session is
// disconnected waits for the reconnect and takes effect once; one whose
// ctx ends first returns ctx's error, not ErrClosed, and the session stays
// usable.
func TestRequestsWaitForTheConnection(t *testing.T) {
	sw, proxy, s, log := dialProxied(t, "pub", fastReconnect)
	ctx := context.Background()
	local := open(t, sw, "local")
	sub := subscribe(t, local, `{type ⊑ Reading}`)

	proxy.setDown(true)
	require.True(t, proxy.cut())
	require.False(t, log.next(t).Connected)
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	err := s.Publish(tctx, reading(1))
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, sion.ErrClosed)

	done := make(chan error, 1)
	go func() { done <- s.Publish(ctx, reading(2)) }()
	proxy.setDown(false)
	require.NoError(t, <-done)
	assert.Equal(t, []int64{2}, ns(queued(sub)), "published once; the call that gave up never went")
}

// TestRemoteSessionEndsWhenItCannotReconnect: with MaxAttempts, a session
// whose switch stays away ends: Done closes, and Err and OnChange say why.
func TestRemoteSessionEndsWhenItCannotReconnect(t *testing.T) {
	tr := newTCP(t, tcp.Config{})
	sw := newSwitch(t, sion.PlaceConfig{})
	proxy := newProxy(t, serveTCP(t, sw, tr))
	log := newConnectionLog()
	policy := fastReconnect
	policy.MaxAttempts, policy.OnChange = 3, log.record
	s, err := sion.Dial(context.Background(), tr, proxy.Addr(), sion.SessionConfig{Name: "lonely", Reconnect: policy})
	require.NoError(t, err)
	defer s.Close()
	sub := subscribe(t, s, `{type ⊑ Reading}`)
	proxy.setDown(true)
	require.True(t, proxy.cut())
	require.False(t, log.next(t).Connected)
	ev := log.next(t)
	assert.True(t, ev.Ended)
	assert.Equal(t, 3, ev.Attempts)
	assert.ErrorContains(t, ev.Err, "gave up reconnecting after 3 attempts")
	<-s.Done()
	require.ErrorIs(t, s.Err(), sion.ErrClosed)
	assert.ErrorContains(t, s.Err(), "gave up reconnecting")
	_, err = sub.Next(context.Background())
	require.ErrorIs(t, err, sion.ErrClosed)
	assert.ErrorContains(t, err, "gave up reconnecting")
	require.ErrorIs(t, s.Publish(context.Background(), reading(1)), sion.ErrClosed)
	require.NoError(t, s.Close())
}

// TestReconnectToARestartedSwitch: a restarted switch does not know the
// session, which is opened anew with its subscriptions.
func TestReconnectToARestartedSwitch(t *testing.T) {
	tr := newTCP(t, tcp.Config{})
	ctx := context.Background()
	start := restartable(t, tr)
	_, addr, stop := start("127.0.0.1:0")
	log := newConnectionLog()
	policy := fastReconnect
	policy.OnChange = log.record
	s, err := sion.Dial(ctx, tr, addr, sion.SessionConfig{Name: "app", Reconnect: policy})
	require.NoError(t, err)
	defer s.Close()
	sub := subscribe(t, s, `{type ⊑ Reading}`)
	stop()
	require.False(t, log.next(t).Connected)

	sw, _, stop := start(addr)
	defer stop()
	ev := log.next(t)
	require.True(t, ev.Connected)
	assert.False(t, ev.Resumed, "the new switch does not know the session")
	assert.False(t, ev.Expired)
	assert.Zero(t, ev.Lost)
	pub := open(t, sw, "pub")
	require.Eventually(t, func() bool {
		publish(t, pub, reading(1))
		require.NoError(t, s.Sync(ctx))
		return count(sub) > 0
	}, 10*time.Second, 10*time.Millisecond, "the subscription is registered on the new switch")
}

// TestReconnectPolicyRefused: bad policies are refused at Dial.
func TestReconnectPolicyRefused(t *testing.T) {
	sw := newSwitch(t, sion.PlaceConfig{})
	network := serveMem(t, sw)
	for _, p := range []sion.ReconnectPolicy{
		{MinBackoff: -1}, {MaxAttempts: -1}, {RetentionBytes: -1}, {Retention: -time.Second},
		{MinBackoff: time.Second, MaxBackoff: time.Millisecond}, {Addrs: []string{""}},
	} {
		_, err := sion.Dial(context.Background(), network, "switch", sion.SessionConfig{Name: "x", Reconnect: p})
		require.ErrorIs(t, err, sion.ErrInvalidConfig, "%+v", p)
	}
}

// TestSwitchCloseTellsRemoteSessions: a switch that closes tells its
// connected remote sessions at the end of their streams and waits for them
// to confirm, so an entity receives what was matched for it before the
// close, and knows it: it reconnects (here to a switch started again at the
// address) with nothing lost, or ends saying the switch closed. Before, the
// entity received 0 to 100 of 100 events, was told it lost none, and the
// switch counted 100 dropped.
func TestSwitchCloseTellsRemoteSessions(t *testing.T) {
	for _, reconnect := range []bool{true, false} {
		t.Run(fmt.Sprintf("reconnect=%v", reconnect), func(t *testing.T) {
			tr := newTCP(t, tcp.Config{})
			ctx := context.Background()
			start := restartable(t, tr)
			sw, addr, stop := start("127.0.0.1:0")
			log := newConnectionLog()
			policy := fastReconnect
			policy.Disabled, policy.OnChange = !reconnect, log.record
			s, err := sion.Dial(ctx, tr, addr, sion.SessionConfig{Name: "app", Reconnect: policy})
			require.NoError(t, err)
			defer s.Close()
			sub := subscribe(t, s, `{type ⊑ Reading}`, sion.WithQueue(1000))
			pub := open(t, sw, "pub")
			for n := 1; n <= 100; n++ {
				publish(t, pub, reading(n))
			}
			require.NoError(t, sw.Close())
			assert.Zero(t, sw.Stats().Dropped, "the entity confirmed them all")
			ev := log.next(t)
			require.False(t, ev.Connected)
			assert.ErrorContains(t, ev.Err, "the switch closed")
			if !reconnect {
				<-s.Done()
				assert.ErrorContains(t, s.Err(), "the switch closed")
				assert.Equal(t, seq(1, 100), ns(queued(sub)), "everything before the close arrived")
				stop()
				return
			}
			stop()
			_, _, stop = start(addr)
			defer stop()
			ev = log.next(t)
			require.True(t, ev.Connected)
			assert.False(t, ev.Resumed)
			assert.Zero(t, ev.Lost)
			require.NoError(t, s.Sync(ctx))
			assert.Equal(t, seq(1, 100), ns(queued(sub)), "everything before the close arrived")
			st := sub.Stats()
			assert.Equal(t, st.Matched, st.Delivered+st.Dropped)
		})
	}
}

// TestRemoteSessionBounds: what a remote session asks for is capped by
// its switch — the look-in spool (MaxSpoolSize), Pulls waiting (one), and
// the bytes all remote sessions' streams hold together
// (MaxRetentionTotalBytes) — and a full stream is logged as such, not as
// a subscription's queue.
func TestRemoteSessionBounds(t *testing.T) {
	logs := &logBuffer{}
	sw := newSwitchWith(t, sion.PlaceConfig{}, sion.SwitchConfig{MaxSpoolSize: 10, MaxRetentionTotalBytes: 64 << 10,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	network := serveMem(t, sw)
	pub := open(t, sw, "pub")

	spool := rawSession(t, network, &wire.Hello{Version: 2, Session: "hoarder", SpoolSize: 1<<32 - 1})
	send(t, spool, &wire.Subscribe{Seq: 1, Sub: 1, Filter: `{type ⊑ Notice}`, LookIn: true})
	require.IsType(t, &wire.Ack{}, recv(t, spool))
	for n := range 20 {
		publish(t, pub, &sion.Event{Type: "Notice", Attrs: attrs("seq", n)})
	}
	send(t, spool, &wire.Pull{Seq: 2})
	r, ok := recv(t, spool).(*wire.PullReply)
	require.True(t, ok)
	assert.Len(t, r.Deliveries, 10, "the spool holds MaxSpoolSize events")
	send(t, spool, &wire.Pull{Seq: 3})
	send(t, spool, &wire.Pull{Seq: 4})
	e, ok := recv(t, spool).(*wire.Error)
	require.True(t, ok)
	assert.Equal(t, uint64(4), e.Seq)
	assert.Contains(t, e.Message, "has a Pull waiting already")

	var sleepers []transport.Conn
	for i := range 2 { // two sessions that read nothing, each allowed 1 MiB
		c := rawSession(t, network, &wire.Hello{Version: 2, Session: fmt.Sprint("sleeper", i), RetentionBytes: 1 << 20})
		send(t, c, &wire.Subscribe{Seq: 1, Sub: 1, Filter: `{type ⊑ Reading}`})
		sleepers = append(sleepers, c)
	}
	for _, c := range sleepers {
		require.IsType(t, &wire.Ack{}, recv(t, c))
	}
	payload := fmt.Appendf(nil, `{"pad":%q}`, strings.Repeat("x", 2000))
	for n := range 200 {
		ev := reading(n)
		ev.ContentType, ev.Data = "application/json", payload
		publish(t, pub, ev)
	}
	st := sw.Stats()
	t.Logf("retained %d bytes, dropped %d", st.RetainedBytes, st.Dropped)
	assert.LessOrEqual(t, st.RetainedBytes, int64(64<<10), "the switch's total bound")
	assert.Positive(t, st.Dropped)
	assert.Contains(t, logs.String(), "stream is full")
	assert.NotContains(t, logs.String(), "slow consumer")
}

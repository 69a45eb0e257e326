package sion_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/filter"
	"github.com/sion-go/sion/internal/wire"
	"github.com/sion-go/sion/transport/tcp"
)

// The scenarios of ../shared/CASES-2.md about remote sessions that
// reconnect (RS), named after their ids, over TCP through the harness's
// proxy (proxy_test.go). sion's spool for an away session is its stream,
// bounded in bytes (ReconnectPolicy.RetentionBytes), not in events, and
// its age limit is the session's retention: a session away longer ends,
// and is opened anew with a gap report (ConnectionEvent.Lost, Expired).
// The scenarios' N_spool is met by a byte bound that holds exactly that
// many of its events; T_ret by the retention.

// rsWorld is a switch serving over TCP, a proxy in front of it, and a
// remote session R through the proxy, with its connection events.
type rsWorld struct {
	sw    *sion.Switch
	proxy *tcpProxy
	tr    *tcp.Transport
	addr  string // the switch's own address
	r     *sion.Session
	log   *connectionLog
}

func newRSWorld(t *testing.T, policy sion.ReconnectPolicy, profile ...any) *rsWorld {
	t.Helper()
	w := &rsWorld{tr: newTCP(t, tcp.Config{}), log: newConnectionLog()}
	w.sw = newSwitch(t, sion.PlaceConfig{})
	w.addr = serveTCP(t, w.sw, w.tr)
	w.proxy = newProxy(t, w.addr)
	policy.MinBackoff, policy.MaxBackoff, policy.OnChange = 5*time.Millisecond, 50*time.Millisecond, w.log.record
	var err error
	w.r, err = sion.Dial(context.Background(), w.tr, w.proxy.Addr(), sion.SessionConfig{Name: "R", Profile: attrs(profile...), Reconnect: policy})
	require.NoError(t, err)
	t.Cleanup(func() { w.r.Close() })
	return w
}

// cut breaks R's connection and refuses new ones, and waits until R and
// the switch know (cutAway): what is published for R from then on waits
// in its stream, unsent, until R returns.
func (w *rsWorld) cut(t *testing.T) {
	t.Helper()
	cutAway(t, w.sw, w.proxy, w.log)
}

// restore lets R through again and returns its reconnect's event, once it
// has resumed (its subscriptions active again).
func (w *rsWorld) restore(t *testing.T) sion.ConnectionEvent {
	t.Helper()
	w.proxy.setDown(false)
	ev := w.log.next(t)
	require.True(t, ev.Connected, "%+v", ev)
	return ev
}

// deliverFrameBytes returns the size of the Deliver frame the switch
// sends a remote session for ev, one subscription matched: the unit of the
// stream's byte bound.
func deliverFrameBytes(t *testing.T, w *rsWorld, pub *sion.Session, ev *sion.Event) int {
	t.Helper()
	conn, err := w.tr.Dial(context.Background(), w.addr)
	require.NoError(t, err)
	defer conn.Close()
	send(t, conn, &wire.Hello{Version: 2, Session: "probe"})
	require.IsType(t, &wire.Welcome{}, recv(t, conn))
	send(t, conn, &wire.Subscribe{Seq: 1, Sub: 1, Filter: `{type ⊑ Notice; seq == 0}`})
	require.IsType(t, &wire.Ack{}, recv(t, conn))
	publish(t, pub, ev)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := conn.Recv(ctx)
	require.NoError(t, err)
	send(t, conn, &wire.Bye{})
	return len(f)
}

func notice(n int) *sion.Event { return &sion.Event{Type: "Notice", Attrs: attrs("seq", n)} }

func seqs(ds []sion.Delivery) []int64 {
	var out []int64
	for _, d := range ds {
		out = append(out, must(d.Event.Value("seq")).Int())
	}
	return out
}

// TestCaseB16ReplayBoundsAndOverflow: a resumed session gets what it
// missed from the one after the last it received, once; a resume with
// nothing missed replays nothing; an overflow keeps the newest and reports
// exactly what it dropped; past the retention, nothing is replayed and the
// gap is reported.
func TestCaseB16ReplayBoundsAndOverflow(t *testing.T) {
	t.Run("spool of 8", func(t *testing.T) {
		w := newRSWorld(t, sion.ReconnectPolicy{RetentionBytes: 1}) // set below, once the frame's size is known
		pub := open(t, w.sw, "P")
		size := deliverFrameBytes(t, w, pub, notice(0))
		require.NoError(t, w.r.Close())
		w.log = newConnectionLog()
		var err error
		w.r, err = sion.Dial(context.Background(), w.tr, w.proxy.Addr(), sion.SessionConfig{Name: "R", Reconnect: sion.ReconnectPolicy{
			RetentionBytes: 8*size + size/2, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, OnChange: w.log.record}})
		require.NoError(t, err)
		defer w.r.Close()
		s := subscribe(t, w.r, `{type ⊑ Notice; seq >= 1}`, sion.WithQueue(100))
		ctx := context.Background()

		publish(t, pub, notice(1))
		publish(t, pub, notice(2))
		require.NoError(t, w.r.Sync(ctx))
		w.cut(t) // step 1
		publish(t, pub, notice(3))
		publish(t, pub, notice(4))
		ev := w.restore(t) // step 2
		assert.True(t, ev.Resumed)
		assert.Zero(t, ev.Lost)
		require.NoError(t, w.r.Sync(ctx))
		assert.Equal(t, seq(1, 4), seqs(queued(s)), "3 and 4 once; 1 and 2 not again")

		w.cut(t) // step 3: nothing published
		ev = w.restore(t)
		assert.Zero(t, ev.Lost)
		require.NoError(t, w.r.Sync(ctx))
		assert.Empty(t, queued(s), "nothing replayed")

		w.cut(t) // step 4
		for n := 5; n <= 16; n++ {
			publish(t, pub, notice(n))
		}
		ev = w.restore(t)
		assert.True(t, ev.Resumed)
		assert.Equal(t, uint64(4), ev.Lost, "one gap report: 5..8")
		require.NoError(t, w.r.Sync(ctx)) // settled: the replay is confirmed, its bytes free
		assert.Equal(t, seq(9, 16), seqs(queued(s)), "the newest 8")
		publish(t, pub, notice(17)) // step 5
		require.NoError(t, w.r.Sync(ctx))
		assert.Equal(t, []int64{17}, seqs(queued(s)))
		st := s.Stats()
		assert.Equal(t, uint64(17), st.Matched)
		assert.Equal(t, uint64(4), st.Dropped)
		assert.Equal(t, uint64(13), st.Delivered, "1..4, 9..17")
	})
	t.Run("age limit", func(t *testing.T) {
		w := newRSWorld(t, sion.ReconnectPolicy{Retention: 500 * time.Millisecond})
		pub := open(t, w.sw, "P")
		s := subscribe(t, w.r, `{type ⊑ Notice}`, sion.WithQueue(100))
		w.cut(t)
		for n := 101; n <= 105; n++ {
			publish(t, pub, notice(n))
		}
		require.Eventually(t, func() bool { return w.sw.Stats().Sessions == 1 }, 10*time.Second, time.Millisecond, "R's retention passes")
		ev := w.restore(t)
		assert.False(t, ev.Resumed)
		assert.True(t, ev.Expired)
		assert.Equal(t, uint64(5), ev.Lost)
		require.NoError(t, w.r.Sync(context.Background()))
		assert.Empty(t, queued(s), "nothing replayed")
	})
}

// TestCaseB20ResyncSendsTodaysState: after a reconnect the switch has the
// session's profile and subscriptions as they are now, not as Dial gave
// them — resumed, or opened anew.
func TestCaseB20ResyncSendsTodaysState(t *testing.T) {
	for _, anew := range []bool{false, true} {
		t.Run(fmt.Sprintf("opened anew=%v", anew), func(t *testing.T) {
			policy := sion.ReconnectPolicy{}
			if anew {
				policy.Retention = time.Millisecond
			}
			w := newRSWorld(t, policy, "tier", 1)
			pub := open(t, w.sw, "P")
			ctx := context.Background()
			s := subscribe(t, w.r, `{type ⊑ Notice}`)
			require.NoError(t, w.r.SetProfile(attrs("tier", 3))) // step 1
			s2 := subscribe(t, w.r, `{type ⊑ Alarm}`)
			require.NoError(t, s2.Cancel())
			s3 := subscribe(t, w.r, `{type ⊑ Reading}`)

			w.cut(t) // step 2
			if anew {
				require.Eventually(t, func() bool { return w.sw.Stats().Sessions == 1 }, 10*time.Second, time.Millisecond)
			}
			ev := w.restore(t)
			assert.Equal(t, !anew, ev.Resumed)
			for _, e := range []*sion.Event{ // step 3
				{Type: "Notice", Attrs: attrs("seq", 1), Condition: filter.MustCompile(`{tier >= 2}`)},
				{Type: "Notice", Attrs: attrs("seq", 2), Condition: filter.MustCompile(`{tier <= 1}`)},
				{Type: "Alarm"},
				reading(4),
			} {
				publish(t, pub, e)
			}
			require.NoError(t, w.r.Sync(ctx))
			assert.Equal(t, []int64{1}, seqs(queued(s)))
			assert.Empty(t, queued(s2))
			assert.Equal(t, []int64{4}, ns(queued(s3)))
			assert.Equal(t, attrs("tier", 3), w.r.Profile())
		})
	}
	t.Run("profile set while away", func(t *testing.T) {
		w := newRSWorld(t, sion.ReconnectPolicy{}, "tier", 3)
		pub := open(t, w.sw, "P")
		s := subscribe(t, w.r, `{type ⊑ Notice}`)
		w.cut(t)
		done := make(chan error, 1)
		go func() { done <- w.r.SetProfile(attrs("tier", 5)) }() // waits for the connection
		w.restore(t)
		require.NoError(t, <-done)
		assert.Equal(t, attrs("tier", 5), w.r.Profile())
		publish(t, pub, &sion.Event{Type: "Notice", Attrs: attrs("seq", 1), Condition: filter.MustCompile(`{tier >= 5}`)})
		require.NoError(t, w.r.Sync(context.Background()))
		assert.Equal(t, []int64{1}, seqs(queued(s)), "the switch has tier 5 too")
	})
}

// TestCaseB21PublishSaysYesTheEventArrives: a Publish on an away session
// either succeeds, and the event arrives once after the resume, or returns
// its ctx's error within its deadline, and the event never arrives. sion's
// Publish on an away session waits for the connection (A11's first
// branch), so the scenario publishes 6..8 from a goroutine of their own
// while the session is cut.
func TestCaseB21PublishSaysYesTheEventArrives(t *testing.T) {
	t.Run("cut and kept cut", func(t *testing.T) {
		w := newRSWorld(t, sion.ReconnectPolicy{})
		local := open(t, w.sw, "S")
		s := subscribe(t, local, `{type ⊑ Reading}`, sion.WithQueue(100))
		ctx := context.Background()
		for n := 1; n <= 5; n++ { // step 1
			require.NoError(t, w.r.Publish(ctx, reading(n)))
		}
		w.cut(t) // step 2
		errs := make(chan error, 3)
		go func() {
			for n := 6; n <= 8; n++ {
				errs <- w.r.Publish(ctx, reading(n))
			}
		}()
		tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		err := w.r.Publish(tctx, reading(9))
		took := time.Since(start)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, took, time.Second, "n = 9 returns with its context (a functional bound)")
		w.restore(t) // step 3
		for range 3 {
			require.NoError(t, <-errs)
		}
		for n := 10; n <= 12; n++ {
			require.NoError(t, w.r.Publish(ctx, reading(n)))
		}
		assert.Equal(t, append(seq(1, 8), seq(10, 12)...), ns(queued(s)), "every nil Publish once, in order; 9 never")
	})
	t.Run("burst", func(t *testing.T) {
		w := newRSWorld(t, sion.ReconnectPolicy{})
		local := open(t, w.sw, "S")
		var mu sync.Mutex
		got := map[int64]int{}
		subscribe(t, local, `{type ⊑ Reading}`, sion.WithQueue(sion.MaxQueue), sion.WithHandler(func(d sion.Delivery) {
			mu.Lock()
			got[must(d.Event.Value("n")).Int()]++
			mu.Unlock()
		}))
		ok := map[int64]bool{}
		for n := 1; n <= 1000; n++ {
			if n == 500 {
				w.proxy.setDown(true)
				w.proxy.cut()
				go func() { time.Sleep(300 * time.Millisecond); w.proxy.setDown(false) }()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if w.r.Publish(ctx, reading(n)) == nil {
				ok[int64(n)] = true
			}
			cancel()
		}
		require.NoError(t, local.Sync(context.Background()))
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) >= len(ok)
		}, 10*time.Second, time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		for n := range ok {
			assert.Equal(t, 1, got[n], "n = %d returned nil", n)
		}
		for n, k := range got {
			assert.Equal(t, 1, k, "n = %d arrived %d times", n, k)
		}
		t.Logf("%d of 1000 publishes returned nil; %d arrived", len(ok), len(got))
	})
}

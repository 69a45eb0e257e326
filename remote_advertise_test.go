package sion_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/ontology"
	"github.com/sion-go/sion/transport/tcp"
)

// publication is one Publish of a test and what its error must wrap; nil:
// it is accepted and the place's subscriber receives it.
type publication struct {
	typ   string
	attrs []ontology.Attr
	err   error
}

// advertisements returns one advertisement per type, without attribute
// detail.
func advertisements(types ...string) []sion.Advertisement {
	ads := make([]sion.Advertisement, len(types))
	for i, typ := range types {
		ads[i] = sion.Advertisement{Type: typ}
	}
	return ads
}

// remotePublisher sets up a place for TestRemoteAdvertise and returns a
// remote session dialled to one of its switches and a subscription to
// every event: in a place routed by rendezvous, on another switch; in an
// S1 place, a local session of the same switch.
func remotePublisher(t *testing.T, rendezvous bool) (*sion.Session, *sion.Subscription) {
	t.Helper()
	ctx := context.Background()
	if rendezvous {
		p := newOverlayPlace(t, 3, sion.PlaceConfig{})
		sub := subscribe(t, p.open(2, "sub"), `{type ⊑ *}`, sion.WithQueue(64))
		s, err := sion.Dial(ctx, p.tr, p.addrs[1], sion.SessionConfig{Name: "pub"})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s, sub
	}
	sw := newSwitch(t, sion.PlaceConfig{})
	network := serveMem(t, sw)
	sub := subscribe(t, open(t, sw, "sub"), `{type ⊑ *}`, sion.WithQueue(64))
	s, err := sion.Dial(ctx, network, "switch", sion.SessionConfig{Name: "pub"})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, sub
}

// TestRemoteAdvertise: a remote session advertises over the wire as a
// local one does. In a place routed by rendezvous (S3) its Publish is
// refused, with an error wrapping ErrNotAdvertised on the entity's side,
// until an advertisement covers the event, and then the event reaches a
// subscriber on another switch; in an S1 place Advertise is recorded and
// Publish does not check it. Refused advertisements carry their
// sentinels across the wire; Advertise stops at the first refused, and
// those before it stay.
func TestRemoteAdvertise(t *testing.T) {
	tests := []struct {
		name       string
		rendezvous bool
		ads        []sion.Advertisement
		adErr      error  // what Advertise's error wraps; nil: none
		adText     string // a substring of Advertise's error
		publish    []publication
	}{
		{
			name: "rendezvous/publish before advertising", rendezvous: true,
			publish: []publication{{"Alarm", nil, sion.ErrNotAdvertised}},
		},
		{
			name: "rendezvous/advertise, then publish", rendezvous: true, ads: advertisements("Alarm"),
			publish: []publication{{"Alarm", nil, nil}, {"KitchenFireAlarm", nil, nil}, {"Notice", nil, sion.ErrNotAdvertised}},
		},
		{
			name: "rendezvous/a synonym", rendezvous: true, ads: advertisements("Fire"),
			publish: []publication{{"FireAlarm", nil, nil}, {"Alarm", nil, sion.ErrNotAdvertised}},
		},
		{
			name: "rendezvous/attribute detail", rendezvous: true,
			ads:     []sion.Advertisement{{Type: "Notice", Attrs: attrs("zone", "hall")}},
			publish: []publication{{"Notice", attrs("zone", "hall", "seq", 1), nil}, {"Notice", attrs("zone", "lobby"), sion.ErrNotAdvertised}, {"Notice", nil, sion.ErrNotAdvertised}},
		},
		{
			name: "rendezvous/unknown type", rendezvous: true, ads: advertisements("Gossip"),
			adErr: sion.ErrUnknownEventType, adText: `"Gossip"`,
			publish: []publication{{"Alarm", nil, sion.ErrNotAdvertised}},
		},
		{
			name: "rendezvous/attribute outside the vocabulary", rendezvous: true,
			ads:   []sion.Advertisement{{Type: "Alarm", Attrs: attrs("celsius", 1.5)}},
			adErr: sion.ErrInvalidEvent, adText: `"celsius"`,
			publish: []publication{{"Alarm", nil, sion.ErrNotAdvertised}},
		},
		{
			name: "rendezvous/stops at the first refused", rendezvous: true, ads: advertisements("Alarm", "Gossip", "Notice"),
			adErr: sion.ErrUnknownEventType, adText: `"Gossip"`,
			publish: []publication{{"Alarm", nil, nil}, {"Notice", nil, sion.ErrNotAdvertised}},
		},
		{
			name: "S1/advertise, then publish", ads: advertisements("Alarm"),
			publish: []publication{{"Alarm", nil, nil}},
		},
		{
			name:    "S1/unadvertised types are published",
			publish: []publication{{"Notice", nil, nil}},
		},
		{
			name: "S1/advertise, then publish another type", ads: advertisements("Alarm"),
			publish: []publication{{"Notice", nil, nil}},
		},
		{
			name: "S1/unknown type", ads: advertisements("Gossip"),
			adErr: sion.ErrUnknownEventType, adText: `"Gossip"`,
			publish: []publication{{"Alarm", nil, nil}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s, sub := remotePublisher(t, tt.rendezvous)
			if len(tt.ads) > 0 {
				err := s.Advertise(ctx, tt.ads...)
				if tt.adErr == nil {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, tt.adErr)
					assert.Contains(t, err.Error(), tt.adText)
				}
			}
			for _, p := range tt.publish {
				err := s.Publish(ctx, &sion.Event{Type: p.typ, Attrs: p.attrs})
				if p.err != nil {
					require.ErrorIs(t, err, p.err, "publish %s", p.typ)
					assert.Contains(t, err.Error(), `"pub" publishes `+p.typ)
					continue
				}
				require.NoError(t, err, "publish %s", p.typ)
				assert.Equal(t, p.typ, next(t, sub).Event.Type, "the subscriber receives it")
			}
			require.NoError(t, s.Sync(ctx), "the session carries on")
		})
	}
}

// TestRemoteAdvertiseAgainAfterRetention: a remote publisher in a place
// routed by rendezvous, away longer than its retention, finds its session
// ended; the session is opened anew, advertises again what it had
// advertised, and publishes as before.
func TestRemoteAdvertiseAgainAfterRetention(t *testing.T) {
	ctx := context.Background()
	p := newOverlayPlace(t, 2, sion.PlaceConfig{})
	sw := p.sws[0]
	tr := newTCP(t, tcp.Config{})
	proxy := newProxy(t, serveAt(t, sw, tr, "127.0.0.1:0"))
	sub := subscribe(t, p.open(1, "sub"), `{type ⊑ Alarm}`, sion.WithQueue(64))
	log := newConnectionLog()
	policy := fastReconnect
	policy.Retention, policy.OnChange = 200*time.Millisecond, log.record
	s, err := sion.Dial(ctx, tr, proxy.Addr(), sion.SessionConfig{Name: "pub", Reconnect: policy})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, s.Advertise(ctx, sion.Advertisement{Type: "FireAlarm"}))
	publish(t, s, &sion.Event{Type: "FireAlarm"})
	assert.Equal(t, "FireAlarm", next(t, sub).Event.Type)

	cutAway(t, sw, proxy, log)
	require.Eventually(t, func() bool { return sw.Stats().Away == 0 }, 10*time.Second, time.Millisecond, "the session ends after its retention")
	proxy.setDown(false)
	ev := log.next(t)
	require.True(t, ev.Connected, "%+v", ev)
	assert.False(t, ev.Resumed, "opened anew")
	assert.True(t, ev.Expired)

	publish(t, s, &sion.Event{Type: "KitchenFireAlarm"})
	assert.Equal(t, "KitchenFireAlarm", next(t, sub).Event.Type, "advertised again, and its path installed")
	require.ErrorIs(t, s.Publish(ctx, &sion.Event{Type: "Alarm"}), sion.ErrNotAdvertised, "only what it had advertised")
}

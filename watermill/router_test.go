package watermill_test

import (
	"context"
	"strconv"
	"testing"

	wm "github.com/ThreeDotsLabs/watermill"
	wmessage "github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/watermill"
)

// TestRouter runs watermill's Router on a place: a handler consumes
// readings and publishes an alarm for each hot one, keeping the message's
// UUID (another topic: another event, not a duplicate); a handler's error
// nacks, and the reading comes again.
func TestRouter(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := newPair(t, v.make(t, loadOntology(t, readings)), watermill.SubscriberConfig{})
			alarms := subscribeTo(t, p.sub, "Alarm")

			router, err := wmessage.NewRouter(wmessage.RouterConfig{}, wm.NopLogger{})
			require.NoError(t, err)
			failOnce := map[string]bool{uuid2: true}
			router.AddHandler("alarm", "Reading", p.sub, "Alarm", p.pub, func(m *wmessage.Message) ([]*wmessage.Message, error) {
				if failOnce[m.UUID] {
					delete(failOnce, m.UUID) // one handler goroutine per subscription: no lock needed
					return nil, assert.AnError
				}
				if c, err := strconv.ParseFloat(m.Metadata.Get("celsius"), 64); err != nil || c < 30 {
					return nil, err
				}
				return []*wmessage.Message{newMessage(m.UUID, "", map[string]string{"level": "2"})}, nil
			})
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- router.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				require.NoError(t, <-ran)
			})
			<-router.Running()

			for _, r := range []struct{ uuid, celsius string }{{uuid1, "21.5"}, {uuid2, "35"}, {uuid3, "31"}} {
				require.NoError(t, p.pub.Publish("Reading", newMessage(r.uuid, "", map[string]string{"celsius": r.celsius})))
			}
			for _, want := range []string{uuid2, uuid3} {
				m := receive(t, alarms)
				assert.Equal(t, want, m.UUID)
				assert.Equal(t, "2", m.Metadata.Get("level"))
				m.Ack()
			}
		})
	}
}

package watermill_test

import (
	"context"
	"testing"

	wmessage "github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion"
	"github.com/sion-go/sion/watermill"
)

const (
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceState  = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
)

// TestTraceContextMetadata: the metadata keys traceparent and tracestate
// become the event's W3C trace context and come back as those keys, over
// every placement of the two sessions; they are never attributes; a bad
// traceparent is refused by Publish, named.
func TestTraceContextMetadata(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			n := v.make(t, loadOntology(t, readings))
			p := newPair(t, n, watermill.SubscriberConfig{})
			ch := subscribeTo(t, p.sub, "Alarm")
			raw := n.subscriberSession(t, "raw")
			rawSub, err := raw.Subscribe(context.Background(), "{type ⊑ Alarm}")
			require.NoError(t, err)
			for _, tc := range []struct {
				name string
				md   map[string]string
			}{
				{"both", map[string]string{watermill.TraceParentKey: traceParent, watermill.TraceStateKey: traceState, "level": "2"}},
				{"traceparent alone", map[string]string{watermill.TraceParentKey: traceParent}},
				{"none", map[string]string{"level": "1"}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					require.NoError(t, p.pub.Publish("Alarm", newMessage("", "", tc.md)))
					d, err := rawSub.Next(context.Background())
					require.NoError(t, err)
					assert.Equal(t, tc.md[watermill.TraceParentKey], d.Event.TraceParent)
					assert.Equal(t, tc.md[watermill.TraceStateKey], d.Event.TraceState)
					for _, a := range d.Event.Attrs {
						assert.NotContains(t, []string{"traceparent", "tracestate"}, a.Name)
					}
					m := receive(t, ch)
					assert.Equal(t, wmessage.Metadata(tc.md), m.Metadata)
					m.Ack()
				})
			}
			err = p.pub.Publish("Alarm", newMessage("", "", map[string]string{watermill.TraceParentKey: "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}))
			require.ErrorIs(t, err, sion.ErrInvalidEvent)
			assert.Contains(t, err.Error(), "parent-id is all zeros")
		})
	}
}

// TestTraceContextKeysReserved: the content type cannot travel under a
// trace context key.
func TestTraceContextKeysReserved(t *testing.T) {
	n := variants[0].make(t, loadOntology(t, readings))
	_, err := watermill.NewPublisher(n.publisherSession(t, "pub"), watermill.Config{ContentTypeKey: watermill.TraceStateKey})
	require.ErrorIs(t, err, sion.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "trace context")
}

package watermill_test

import (
	"testing"

	wmessage "github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/stretchr/testify/require"

	"github.com/sion-go/sion/watermill"
)

// suiteOntology gives the universal suite's generated topic names a home:
// every topic is the event type Message with the topic in its attribute
// "topic" (AttributeTopics), and the suite's metadata travels in the
// attribute "metadata" (Config.MetadataAttribute).
const suiteOntology = `{"types": [
  {"name": "Message", "attributes": [
    {"name": "topic", "kind": "string"}, {"name": "metadata", "kind": "string"}]}]}`

// suiteFeatures are what this adapter can honestly claim; see the package
// documentation and TestUniversalSuite.
var suiteFeatures = tests.Features{
	// No consumer groups: a Subscriber's topic queues live and die with it.
	ConsumerGroups: false,
	// A message published again with its UUID on its topic is dropped by
	// the switch, and each subscription receives each event once: nothing
	// arrives twice unless it was nacked. (This also skips TestMessageCtx,
	// which publishes one message twice and expects two, and
	// TestConcurrentClose, which needs Persistent.)
	ExactlyOnceDelivery: true,
	// Events from one publishing goroutine reach a subscription in order,
	// and a nacked message is offered again before the ones behind it.
	GuaranteedOrder:                     true,
	GuaranteedOrderWithSingleSubscriber: true,
	// sion keeps no log: a Subscriber receives what was published after
	// its topic's subscription was made, so only the instance that called
	// SubscribeInitialize holds the older messages.
	Persistent:                       false,
	RequireSingleInstance:            true,
	NewSubscriberReceivesOldMessages: false,
	// No command restarts a switch from outside the process.
	RestartServiceCommand: nil,
}

// TestUniversalSuite runs watermill's universal Pub/Sub suite over each
// variant: local sessions on one switch, two switches joined by a shared
// link over TCP, and remote sessions over TCP.
func TestUniversalSuite(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			o := loadOntology(t, suiteOntology)
			cfg := watermill.Config{
				Ontology:          o,
				Topics:            watermill.AttributeTopics{Type: "Message", Attribute: "topic"},
				MetadataAttribute: "metadata",
			}
			// Each test of the suite gets switches of its own: the tests run
			// in parallel, and their bursts (TestPublisherClose publishes
			// 10,000 messages from 20 goroutines before anyone reads) would
			// otherwise share one shared link, whose queue drops the newest
			// frames beyond 4,096 (counted in LinkInfo.Dropped).
			construct := func(t *testing.T) (wmessage.Publisher, wmessage.Subscriber) {
				n := v.make(t, o)
				pub, err := watermill.NewPublisher(n.publisherSession(t, "pub"), cfg)
				require.NoError(t, err)
				// The suite publishes up to 10,000 messages before it reads
				// them: the queue holds them all.
				sub, err := watermill.NewSubscriber(n.subscriberSession(t, "sub"),
					watermill.SubscriberConfig{Config: cfg, Queue: 1 << 14})
				require.NoError(t, err)
				return pub, sub
			}
			tests.TestPubSub(t, suiteFeatures, construct, nil)
		})
	}
}

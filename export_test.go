package sion

import (
	"slices"

	"github.com/sion-go/sion/internal/overlay"
)

// PinOverlay gives the switches of a place routed by rendezvous (r, from
// RouteByRendezvous) the overlay IDs ids instead of the hashes of their
// names, and lets each switch's table take in only the switches
// neighbours names for it, so that a test can build a given overlay (S3's
// Fig. 2). The mechanism does not depend on it.
func PinOverlay(r Routing, ids map[string][16]byte, neighbours map[string][]string) {
	rv := r.(*rendezvous)
	rv.pinned = map[string]overlay.ID{}
	names := map[overlay.ID]string{}
	for n, id := range ids {
		rv.pinned[n] = id
		names[id] = n
	}
	rv.allow = func(self, other overlay.ID) bool { return slices.Contains(neighbours[names[self]], names[other]) }
}

// OverlayKey returns the overlay key of an event type (its rendezvous
// switch is the live switch whose ID is closest to it).
func OverlayKey(eventType string) [16]byte { return overlay.HashID(eventType) }

package wire

// Limits bounds what Decode accepts and EncodeLimits produces, so that a
// peer cannot make the receiver allocate more than it chose to. A field
// that is zero or negative takes its DefaultLimits value, so the zero
// Limits means the defaults. All sizes are in bytes.
//
// Decode also never allocates for a length or count that the rest of the
// frame cannot hold, whatever the limits: its allocations are bounded by
// a small multiple of the frame's length.
type Limits struct {
	// MaxFrameBytes bounds a whole frame, version and kind bytes included.
	// Default 1 MiB (transport.DefaultMaxFrameBytes).
	MaxFrameBytes int
	// MaxAttrs bounds the attributes of one event, of one profile and of
	// one advertisement. Default 256.
	MaxAttrs int
	// MaxStringBytes bounds every string field (names, types, filter and
	// condition source, string values, error messages) and Hello.Token.
	// Default 64 KiB.
	MaxStringBytes int
	// MaxDataBytes bounds one event's Data. Default 1 MiB, so by default
	// MaxFrameBytes binds first.
	MaxDataBytes int
	// MaxMatches bounds the Matched list of one delivery. Default 1024.
	MaxMatches int
	// MaxDeliveries bounds the deliveries of one PullReply. Default 1024.
	MaxDeliveries int
}

// DefaultLimits returns the limits a zero Limits stands for, the ones
// Encode checks.
func DefaultLimits() Limits {
	return Limits{
		MaxFrameBytes:  1 << 20,
		MaxAttrs:       256,
		MaxStringBytes: 64 << 10,
		MaxDataBytes:   1 << 20,
		MaxMatches:     1024,
		MaxDeliveries:  1024,
	}
}

// norm returns l with every field that is not positive set to its default.
func (l Limits) norm() Limits {
	if l.MaxFrameBytes > 0 && l.MaxAttrs > 0 && l.MaxStringBytes > 0 && l.MaxDataBytes > 0 && l.MaxMatches > 0 && l.MaxDeliveries > 0 {
		return l // every limit set: the common case, once per frame
	}
	d := DefaultLimits()
	fill := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	fill(&l.MaxFrameBytes, d.MaxFrameBytes)
	fill(&l.MaxAttrs, d.MaxAttrs)
	fill(&l.MaxStringBytes, d.MaxStringBytes)
	fill(&l.MaxDataBytes, d.MaxDataBytes)
	fill(&l.MaxMatches, d.MaxMatches)
	fill(&l.MaxDeliveries, d.MaxDeliveries)
	return l
}

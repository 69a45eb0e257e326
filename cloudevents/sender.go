package cloudevents

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/sion-go/sion"
)

// SenderConfig configures a Sender. Codec and Target are required; the
// zero value of every other field is a usable default.
type SenderConfig struct {
	// Codec converts each delivered event to a CloudEvent.
	Codec *Codec
	// Target is the absolute http or https URL each event is POSTed to.
	Target string
	// Client sends the requests; nil means a client of its own with a
	// 10 s timeout per request.
	Client *http.Client
	// Structured sends structured mode (application/cloudevents+json);
	// false sends binary mode (ce-* headers, their values percent-encoded
	// as the HTTP binding asks: space, '"', '%' and bytes outside
	// printable ASCII as %XX, so any value travels unchanged to a
	// receiver that decodes them).
	Structured bool
	// MaxAttempts is how often one event is tried before it is given up
	// (Dropped is called); 0 means until Run's context ends, so that
	// nothing is given up while the endpoint recovers.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the wait between attempts: the
	// n-th retry waits a random time up to MinBackoff·2^(n-1), capped at
	// MaxBackoff, or what a 429 or 503's Retry-After asks (at most
	// MaxBackoff). Defaults 100 ms and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// Dropped, if set, is called with each event given up and why: a
	// 4xx answer other than 408 and 429 (the endpoint refuses it: retrying
	// cannot help), a redirect the client followed with a GET, or
	// MaxAttempts reached. It runs on Run's goroutine.
	Dropped func(ev *sion.Event, err error)
}

// SenderStats are a Sender's counters since it was made.
type SenderStats struct {
	// Sent counts events the endpoint accepted (a 2xx answer).
	Sent uint64
	// Retries counts attempts after the first.
	Retries uint64
	// Dropped counts events given up (see SenderConfig.Dropped).
	Dropped uint64
}

// Sender delivers a subscription's events to an HTTP endpoint as
// CloudEvents, one at a time in the subscription's order, retrying with
// exponential backoff and jitter while the endpoint fails (network
// errors, 408, 429, 5xx). Nothing is given up silently: an event is
// dropped only as SenderConfig says, and then counted and passed to
// Dropped. Run is called on a goroutine the caller owns; Stats may be
// called concurrently.
type Sender struct {
	cfg                    SenderConfig
	sent, retries, dropped atomic.Uint64

	// pending is the event a Run was sending when its context ended: the
	// next Run sends it first. Only Run touches it, one at a time.
	pending *sion.Event
}

// NewSender checks cfg and returns a Sender. It returns an error wrapping
// sion.ErrInvalidConfig, naming the field, when Codec is nil, Target is
// not an absolute http or https URL, MaxAttempts is negative, or the
// backoffs are negative or MinBackoff exceeds MaxBackoff.
func NewSender(cfg SenderConfig) (*Sender, error) {
	if cfg.Codec == nil {
		return nil, fmt.Errorf("%w: cloudevents: SenderConfig.Codec is nil", sion.ErrInvalidConfig)
	}
	u, err := url.Parse(cfg.Target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: cloudevents: SenderConfig.Target %q is not an absolute http or https URL", sion.ErrInvalidConfig, cfg.Target)
	}
	if cfg.MaxAttempts < 0 {
		return nil, fmt.Errorf("%w: cloudevents: SenderConfig.MaxAttempts is %d", sion.ErrInvalidConfig, cfg.MaxAttempts)
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.MinBackoff < 0 || cfg.MaxBackoff < cfg.MinBackoff {
		return nil, fmt.Errorf("%w: cloudevents: SenderConfig backoff %v to %v", sion.ErrInvalidConfig, cfg.MinBackoff, cfg.MaxBackoff)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Sender{cfg: cfg}, nil
}

// Stats returns the Sender's counters.
func (s *Sender) Stats() SenderStats {
	return SenderStats{Sent: s.sent.Load(), Retries: s.retries.Load(), Dropped: s.dropped.Load()}
}

// Run sends sub's events until ctx ends or the subscription ends. When
// ctx ends it returns ctx's error, and the event it was sending is kept:
// the next Run sends it first (it may have arrived already; a sion
// Handler then drops it as a duplicate by ID). When the subscription
// ends, Run returns Next's error, wrapping sion.ErrClosed. sub must have
// a queue (sion.WithQueue or the default). Run calls must not overlap.
func (s *Sender) Run(ctx context.Context, sub *sion.Subscription) error {
	for {
		ev := s.pending
		if ev == nil {
			d, err := sub.Next(ctx)
			if err != nil {
				return err
			}
			ev = d.Event
		}
		s.pending = ev
		if err := s.send(ctx, ev); err != nil {
			return err
		}
		s.pending = nil
	}
}

// send tries ev until it is accepted, given up (nil is returned), or ctx
// ends (ctx's error).
func (s *Sender) send(ctx context.Context, ev *sion.Event) error {
	ce, err := s.cfg.Codec.ToCloudEvent(ev)
	if err != nil {
		s.drop(ev, err)
		return nil
	}
	var body []byte
	if s.cfg.Structured {
		if body, err = ce.MarshalJSON(); err != nil { // keeps a JSON payload's bytes, as json.Marshal does not
			s.drop(ev, err)
			return nil
		}
	}
	for attempt := 1; ; attempt++ {
		var req *http.Request
		if s.cfg.Structured {
			req, err = http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.Target, bytes.NewReader(body))
			if err == nil {
				req.Header.Set("Content-Type", "application/cloudevents+json; charset=utf-8")
			}
		} else {
			req, err = cehttp.NewHTTPRequestFromEvent(ctx, s.cfg.Target, ce)
			if err == nil {
				ceHeaders(req.Header, percentEncode) // HTTP binding 3.1.3.2
			}
		}
		if err != nil {
			s.drop(ev, err)
			return nil
		}
		wait, err := s.try(req)
		if err == nil {
			s.sent.Add(1)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if wait < 0 { // refused: retrying cannot help
			s.drop(ev, err)
			return nil
		}
		if s.cfg.MaxAttempts > 0 && attempt >= s.cfg.MaxAttempts {
			s.drop(ev, fmt.Errorf("cloudevents: gave up after %d attempts: %w", attempt, err))
			return nil
		}
		if wait == 0 {
			wait = s.backoff(attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		s.retries.Add(1)
	}
}

// try sends req once. It returns nil when the endpoint accepted it; else
// the error and how long to wait before trying again: -1 for never, 0
// for the backoff, more when the answer's Retry-After asks for it.
func (s *Sender) try(req *http.Request) (time.Duration, error) {
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	if resp.Request != nil && resp.Request.Method != req.Method {
		// The client followed a 301, 302 or 303 with a GET, which carries
		// no event: whatever that answered, the event was not taken.
		return -1, fmt.Errorf("cloudevents: %s redirected the POST to a %s of %s, which carries no event", s.cfg.Target, resp.Request.Method, resp.Request.URL.Redacted())
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return 0, nil
	}
	err = fmt.Errorf("cloudevents: %s answered %s: %s", s.cfg.Target, resp.Status, bytes.TrimSpace(msg))
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if secs, perr := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); perr == nil && secs > 0 {
			if secs > int64(s.cfg.MaxBackoff/time.Second) { // also keeps secs·1s from overflowing
				return s.cfg.MaxBackoff, err
			}
			return min(time.Duration(secs)*time.Second, s.cfg.MaxBackoff), err
		}
		return 0, err
	case code == http.StatusRequestTimeout || code >= 500:
		return 0, err
	default:
		return -1, err
	}
}

// backoff returns the wait before retry n (n ≥ 1): full jitter over
// MinBackoff·2^(n-1), capped at MaxBackoff.
func (s *Sender) backoff(n int) time.Duration {
	ceil := s.cfg.MinBackoff
	for i := 1; i < n && ceil < s.cfg.MaxBackoff; i++ {
		if ceil > math.MaxInt64/2 {
			ceil = s.cfg.MaxBackoff
			break
		}
		ceil *= 2
	}
	ceil = min(ceil, s.cfg.MaxBackoff)
	if ceil <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceil))) + 1
}

func (s *Sender) drop(ev *sion.Event, err error) {
	s.dropped.Add(1)
	if s.cfg.Dropped != nil {
		s.cfg.Dropped(ev, err)
	}
}

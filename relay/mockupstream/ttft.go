package mockupstream

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"
)

// ttftSpread is the spread (the sigma of the logarithm) of the ordinary
// first-token times around TTFT.P50: with 0.25, the 99th percentile of the
// ordinary ones is about 1.8 × P50.
const ttftSpread = 0.25

// TTFT is the provider's time to first token, drawn anew for each
// streamed request: the pause after the response started (the status
// line and the role chunk, or the dialect's opening events) and before
// the first token of the answer, reasoning included. Most
// calls take about P50, log-normally spread; a Tail share take TailDelay,
// as a provider that queues a request now and then does. The zero value
// adds nothing; a first_token_after directive replaces the draw.
type TTFT struct {
	// P50 is the median of the ordinary first-token times. Zero: none.
	P50 time.Duration `koanf:"p50"`
	// Tail is the share of calls whose first token waits TailDelay
	// instead, from 0 to 1.
	Tail float64 `koanf:"tail"`
	// TailDelay is the first-token time of the tail.
	TailDelay time.Duration `koanf:"tail_delay"`
}

// validate names the first invalid field.
func (t TTFT) validate() error {
	switch {
	case t.P50 < 0:
		return errors.New("mock_upstream.ttft.p50: must not be negative")
	case t.Tail < 0 || t.Tail > 1:
		return errors.New("mock_upstream.ttft.tail: must be between 0 and 1")
	case t.TailDelay < 0:
		return errors.New("mock_upstream.ttft.tail_delay: must not be negative")
	case t.Tail > 0 && t.TailDelay == 0:
		return errors.New("mock_upstream.ttft.tail_delay: required with a tail")
	}
	return nil
}

// draw picks the first-token time of one call.
func (t TTFT) draw() time.Duration {
	if t.Tail > 0 && rand.Float64() < t.Tail {
		return t.TailDelay
	}
	if t.P50 <= 0 {
		return 0
	}
	return time.Duration(float64(t.P50) * math.Exp(ttftSpread*rand.NormFloat64()))
}

// awaitFirstToken pauses a stream that has started for its first-token
// time: f's first_token_after if given, else a draw of Config.TTFT. It
// returns false if the client went away meanwhile, which Stats counts
// (FirstTokenAbandoned): a hedged call that lost its race, typically.
func (s *Server) awaitFirstToken(ctx context.Context, out *eventWriter, f faults) bool {
	d := f.firstTokenAfter
	if !f.firstTokenSet {
		d = s.cfg.TTFT.draw()
	}
	if d <= 0 {
		return true
	}
	if out.pause(ctx, d) != nil {
		s.stats.firstTokenAbandoned()
		return false
	}
	return true
}

package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Clock is what a Backoff waits on.
type Clock interface {
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// systemClock waits on the runtime's timers (which testing/synctest fakes).
type systemClock struct{}

func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Backoff draws and waits the delays of one retry schedule. The zero value
// follows the default schedule with the real clock and math/rand/v2. It is
// safe for concurrent use if Rand is.
type Backoff struct {
	Config
	// Rand returns a uniform draw from [0, n) for n > 0; nil means
	// math/rand/v2.Int64N.
	Rand func(n int64) int64
	// Clock is waited on; nil means the runtime's timers.
	Clock Clock
}

// Ceiling is the upper bound (exclusive) of the delay before retry n,
// counted from 0: min(Cap, Base·2ⁿ).
func (b Backoff) Ceiling(n int) time.Duration {
	c := b.WithDefaults()
	d := c.Base
	for ; n > 0 && d < c.Cap; n-- {
		if d > c.Cap/2 {
			// Doubling would only be capped, and could overflow.
			return c.Cap
		}
		d *= 2
	}
	return min(d, c.Cap)
}

// Delay draws the delay before retry n (counted from 0) with full jitter,
// and raises it to floor, the wait the provider asked for (Retry-After).
func (b Backoff) Delay(n int, floor time.Duration) time.Duration {
	d := time.Duration(0)
	if ceiling := int64(b.Ceiling(n)); ceiling > 0 {
		draw := b.Rand
		if draw == nil {
			draw = rand.Int64N
		}
		d = time.Duration(draw(ceiling))
	}
	return max(d, floor)
}

// Wait draws the delay before retry n, as Delay does, and waits it out.
// It returns the delay, and ctx's error if ctx ended first.
func (b Backoff) Wait(ctx context.Context, n int, floor time.Duration) (time.Duration, error) {
	d := b.Delay(n, floor)
	return d, b.Sleep(ctx, d)
}

// Sleep waits d on the Backoff's clock, for a caller that drew the delay
// itself (to log it first, say). It returns ctx's error if ctx ended
// first.
func (b Backoff) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	clock := b.Clock
	if clock == nil {
		clock = systemClock{}
	}
	select {
	case <-clock.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

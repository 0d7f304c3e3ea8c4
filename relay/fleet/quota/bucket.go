package quota

import (
	"math"
	"time"
)

// Bucket is a token bucket: tokens refill at Rate per second up to Burst,
// a request takes some. It enforces one node's share of a limit. Over any
// interval T it lets through at most Burst + Rate·T, plus, for a limit
// debited after the fact (tokens per minute, known only when a call ends),
// what the calls admitted while the balance was positive used. The zero
// Bucket admits nothing; it is not safe for concurrent use.
type Bucket struct {
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	at     time.Time
}

// NewBucket returns a full bucket holding perMinute/60 tokens a second
// and at most burst tokens.
func NewBucket(now time.Time, perMinute, burst float64) *Bucket {
	b := &Bucket{at: now}
	b.SetRate(now, perMinute, burst)
	b.tokens = b.burst
	return b
}

// SetRate changes the rate, keeping the balance (capped by the new burst).
func (b *Bucket) SetRate(now time.Time, perMinute, burst float64) {
	b.refill(now)
	b.rate = max(perMinute, 0) / 60
	b.burst = max(burst, 0)
	b.tokens = min(b.tokens, b.burst)
}

// PerMinute is the rate.
func (b *Bucket) PerMinute() float64 { return b.rate * 60 }

func (b *Bucket) refill(now time.Time) {
	if now.After(b.at) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.at).Seconds()*b.rate)
		b.at = now
	}
}

// Take takes n tokens if the bucket holds them. Otherwise it takes nothing
// and returns how long until it will hold them at the current rate
// (math.MaxInt64 nanoseconds if never).
func (b *Bucket) Take(now time.Time, n float64) (bool, time.Duration) {
	b.refill(now)
	if b.tokens >= n {
		b.tokens -= n
		return true, 0
	}
	return false, b.wait(n)
}

// Positive admits a call whose cost is known only later (Debit): the
// balance must be positive. Otherwise it returns how long until it is.
func (b *Bucket) Positive(now time.Time) (bool, time.Duration) {
	b.refill(now)
	if b.tokens > 0 {
		return true, 0
	}
	return false, b.wait(positiveEpsilon)
}

// positiveEpsilon is the balance Positive waits for: a little above zero,
// which floating-point refills reach reliably.
const positiveEpsilon = 1e-6

// Debit takes n tokens, into debt if need be; the debt is paid by the
// refill before the next call is admitted.
func (b *Bucket) Debit(now time.Time, n float64) {
	b.refill(now)
	b.tokens -= n
}

func (b *Bucket) wait(n float64) time.Duration {
	missing := n - b.tokens
	if b.rate <= 0 || missing/b.rate > float64(math.MaxInt64)/1e9 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Ceil(missing / b.rate * 1e9))
}

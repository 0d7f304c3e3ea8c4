package edge

import (
	"math"
	"sync/atomic"
	"time"
)

// rateLimiter is a token bucket: rate tokens a second, up to burst saved.
// A nil limiter allows everything. It is used by one goroutine.
type rateLimiter struct {
	rate, burst float64
	tokens      float64
	last        time.Time
}

// newRateLimiter allows perSecond events a second in bursts of as many (at
// least one); nil when perSecond is negative (no limit).
func newRateLimiter(perSecond float64) *rateLimiter {
	if perSecond < 0 {
		return nil
	}
	burst := math.Max(1, math.Ceil(perSecond))
	return &rateLimiter{rate: perSecond, burst: burst, tokens: burst}
}

// allow takes a token at now, if there is one.
func (l *rateLimiter) allow(now time.Time) bool {
	if l == nil {
		return true
	}
	if !l.last.IsZero() {
		l.tokens = math.Min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	}
	l.last = now
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

// wsCloseReason says why the edge closed a WebSocket client that broke the
// protocol.
type wsCloseReason int

const (
	// wsClosedUnsupported: a binary message, or one that is not a known
	// JSON message (1003).
	wsClosedUnsupported wsCloseReason = iota
	// wsClosedFlood: too many messages a second (1008).
	wsClosedFlood
	numWSCloseReasons
)

// wsStats counts the WebSocket clients the edge closed, by reason; metrics
// will export them.
type wsStats struct {
	closed [numWSCloseReasons]atomic.Uint64
}

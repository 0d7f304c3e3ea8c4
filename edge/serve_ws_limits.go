package edge

import (
	"math"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// newRateLimiter allows perSecond events a second in bursts of as many (at
// least one), and everything when perSecond is negative (no limit).
func newRateLimiter(perSecond float64) *rate.Limiter {
	if perSecond < 0 {
		return rate.NewLimiter(rate.Inf, 0)
	}
	return rate.NewLimiter(rate.Limit(perSecond), int(math.Max(1, math.Ceil(perSecond))))
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

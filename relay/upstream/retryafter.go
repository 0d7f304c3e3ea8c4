package upstream

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter caps what a provider can ask for, so a bogus header cannot
// park a worker's backoff for days.
const maxRetryAfter = 24 * time.Hour

// retryAfter reads the provider's wait hint: Retry-After in seconds or as an
// HTTP date, and OpenAI's retry-after-ms. When both are present the larger
// wins, since each is a lower bound. An HTTP date is measured from the
// response's Date header when there is one, so the hint survives a skewed
// local clock.
func retryAfter(h http.Header, now time.Time) time.Duration {
	var d time.Duration
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if secs, err := strconv.ParseFloat(v, 64); err == nil {
			d = scaled(secs, time.Second)
		} else if at, err := http.ParseTime(v); err == nil {
			if date, err := http.ParseTime(h.Get("Date")); err == nil {
				now = date
			}
			d = min(max(at.Sub(now), 0), maxRetryAfter)
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil {
			d = max(d, scaled(ms, time.Millisecond))
		}
	}
	return d
}

// scaled converts a count of unit to a duration in [0, maxRetryAfter];
// negative, NaN and infinite counts mean no hint.
func scaled(n float64, unit time.Duration) time.Duration {
	if math.IsNaN(n) || math.IsInf(n, 0) || n <= 0 {
		return 0
	}
	if n >= float64(maxRetryAfter/unit) {
		return maxRetryAfter
	}
	return time.Duration(n * float64(unit))
}

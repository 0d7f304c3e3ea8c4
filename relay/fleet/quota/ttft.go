package quota

import (
	"math"
	"time"
)

// First-token times, shared so that hedging adapts to each provider's
// normal latency: each worker keeps the times its calls took to their
// first token, per "<provider>/<model>", in a sliding window of
// histograms (TTFTWindow) and sends the window with its Report; the
// coordinator adds up the fresh reports' histograms and publishes them
// with a few quantiles (TTFTFigures), from which any worker reads the
// quantile it hedges at.

// Histogram buckets: bucket i holds the times in [ttftBase·ttftGrowth^i,
// ttftBase·ttftGrowth^(i+1)), so a quantile is known within 10 %; times
// below ttftBase fall in bucket 0, above the last bound in the last.
const (
	ttftBase    = time.Millisecond
	ttftGrowth  = 1.1
	ttftBuckets = 128 // up to about 3.4 minutes
)

// Defaults of the shared first-token figures.
const (
	// TTFTWindowSpan is how far back a worker's figures reach.
	TTFTWindowSpan = time.Minute
	ttftSlots      = 6
	// MinTTFTSamples is the smallest count of a target's figures a
	// quantile is given for: below it, one slow call would be the p95.
	MinTTFTSamples = 20
)

// TTFTHistogram counts first-token times by bucket index.
type TTFTHistogram map[int]int64

// ttftBucket is the bucket of d.
func ttftBucket(d time.Duration) int {
	if d <= ttftBase {
		return 0
	}
	i := int(math.Log(float64(d)/float64(ttftBase)) / math.Log(ttftGrowth))
	return min(i, ttftBuckets-1)
}

// ttftUpper is the upper bound of bucket i.
func ttftUpper(i int) time.Duration {
	return time.Duration(float64(ttftBase) * math.Pow(ttftGrowth, float64(i+1)))
}

// Count is the number of times in h.
func (h TTFTHistogram) Count() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Add adds o's counts to h.
func (h TTFTHistogram) Add(o TTFTHistogram) {
	for i, c := range o {
		h[i] += c
	}
}

// Quantile is the upper bound of the bucket holding the q-th quantile of
// h, and false when h has fewer than MinTTFTSamples times.
func (h TTFTHistogram) Quantile(q float64) (time.Duration, bool) {
	n := h.Count()
	if n < MinTTFTSamples {
		return 0, false
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i := range ttftBuckets {
		if seen += h[i]; seen >= rank {
			return ttftUpper(i), true
		}
	}
	return ttftUpper(ttftBuckets - 1), true
}

// TTFTWindow holds one worker's first-token times of one target over the
// last TTFTWindowSpan, in ttftSlots slots. It is not safe for concurrent
// use.
type TTFTWindow struct {
	slots [ttftSlots]TTFTHistogram
	epoch int64 // index of the newest slot
}

func (w *TTFTWindow) advance(now time.Time) int {
	e := now.UnixNano() / int64(TTFTWindowSpan/ttftSlots)
	for k := max(w.epoch+1, e-ttftSlots+1); k <= e; k++ {
		w.slots[k%ttftSlots] = nil
	}
	w.epoch = max(w.epoch, e)
	return int(w.epoch % ttftSlots)
}

// Observe records a call's time to first token.
func (w *TTFTWindow) Observe(now time.Time, d time.Duration) {
	i := w.advance(now)
	if w.slots[i] == nil {
		w.slots[i] = TTFTHistogram{}
	}
	w.slots[i][ttftBucket(d)]++
}

// Histogram is the window's times; nil if none.
func (w *TTFTWindow) Histogram(now time.Time) TTFTHistogram {
	w.advance(now)
	var h TTFTHistogram
	for _, s := range w.slots {
		if len(s) > 0 {
			if h == nil {
				h = TTFTHistogram{}
			}
			h.Add(s)
		}
	}
	return h
}

// TTFTFigures is what the coordinator publishes: the fleet's first-token
// times of the last TTFTWindowSpan per "<provider>/<model>", with their
// usual quantiles for people to read.
type TTFTFigures struct {
	At      time.Time             `json:"at"`
	Targets map[string]TTFTFigure `json:"targets"`
}

// TTFTFigure is one target's figures; the quantiles are in milliseconds,
// zero while there are too few times.
type TTFTFigure struct {
	N         int64         `json:"n"`
	P50       int64         `json:"p50_ms,omitempty"`
	P95       int64         `json:"p95_ms,omitempty"`
	P99       int64         `json:"p99_ms,omitempty"`
	Histogram TTFTHistogram `json:"histogram"`
}

// NewTTFTFigure summarizes h.
func NewTTFTFigure(h TTFTHistogram) TTFTFigure {
	f := TTFTFigure{N: h.Count(), Histogram: h}
	for _, q := range []struct {
		q    float64
		into *int64
	}{{0.5, &f.P50}, {0.95, &f.P95}, {0.99, &f.P99}} {
		if d, ok := h.Quantile(q.q); ok {
			*q.into = d.Milliseconds()
		}
	}
	return f
}

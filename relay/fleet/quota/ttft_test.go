package quota

import (
	"testing"
	"time"
)

func TestTTFTHistogramQuantile(t *testing.T) {
	var w TTFTWindow
	now := time.Unix(1000, 0)
	// 95 calls near 100ms, 5 at 3s.
	for i := range 95 {
		w.Observe(now, 90*time.Millisecond+time.Duration(i)*200*time.Microsecond)
	}
	for range 5 {
		w.Observe(now, 3*time.Second)
	}
	h := w.Histogram(now)
	if h.Count() != 100 {
		t.Fatalf("count = %d, want 100", h.Count())
	}
	for _, tc := range []struct {
		q        float64
		lo, high time.Duration
	}{
		{0.5, 100 * time.Millisecond, 110 * time.Millisecond},
		{0.95, 100 * time.Millisecond, 120 * time.Millisecond},
		{0.99, 3 * time.Second, 3300 * time.Millisecond},
	} {
		got, ok := h.Quantile(tc.q)
		if !ok || got < tc.lo || got > tc.high {
			t.Errorf("quantile %v = %v, %v; want within [%v, %v]", tc.q, got, ok, tc.lo, tc.high)
		}
	}
	f := NewTTFTFigure(h)
	if f.N != 100 || f.P95 < 100 || f.P95 > 120 || f.P99 < 3000 {
		t.Errorf("figure = %+v", f)
	}
}

func TestTTFTHistogramNeedsSamples(t *testing.T) {
	h := TTFTHistogram{ttftBucket(time.Second): MinTTFTSamples - 1}
	if _, ok := h.Quantile(0.95); ok {
		t.Fatalf("a quantile of %d times", h.Count())
	}
}

func TestTTFTWindowForgets(t *testing.T) {
	var w TTFTWindow
	now := time.Unix(1000, 0)
	w.Observe(now, time.Second)
	if n := w.Histogram(now.Add(TTFTWindowSpan / 2)).Count(); n != 1 {
		t.Fatalf("half a window later: %d times, want 1", n)
	}
	w.Observe(now.Add(TTFTWindowSpan/2), time.Second)
	if n := w.Histogram(now.Add(TTFTWindowSpan + time.Second)).Count(); n != 1 {
		t.Fatalf("a window later: %d times, want the newer one", n)
	}
	if h := w.Histogram(now.Add(3 * TTFTWindowSpan)); h != nil {
		t.Fatalf("long after: %v, want nothing", h)
	}
}

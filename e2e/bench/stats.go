package main

import (
	"math"
	"slices"
	"time"
)

// manySamples is the smallest sample count for which a p99 is reported;
// below it the p99 is only the maximum in disguise, so min and max are
// shown instead.
const manySamples = 100

// dist summarizes samples of one quantity (milliseconds, bytes, rates...).
type dist struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// summarize computes the distribution of xs (nearest-rank quantiles).
func summarize(xs []float64) dist {
	if len(xs) == 0 {
		return dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return dist{N: len(s), Median: quantile(s, 0.5), P99: quantile(s, 0.99), Min: s[0], Max: s[len(s)-1]}
}

func quantile(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// scaled is d with every value multiplied by k (a change of unit).
func (d dist) scaled(k float64) dist {
	d.Median, d.P99, d.Min, d.Max = d.Median*k, d.P99*k, d.Min*k, d.Max*k
	return d
}

// ms converts durations to milliseconds for summarize.
func ms(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

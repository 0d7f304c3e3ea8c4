package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// registrar registers collectors, reusing any family already registered
// with the same description, and remembers the first error.
type registrar struct {
	reg prometheus.Registerer
	err error
}

// newRegistrar registers with reg; nil registers with a registry of its
// own, so the metrics work but nobody scrapes them.
func newRegistrar(reg prometheus.Registerer) *registrar {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	return &registrar{reg: reg}
}

func register[C prometheus.Collector](r *registrar, c C) C {
	err := r.reg.Register(c)
	if err == nil {
		return c
	}
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	if r.err == nil {
		r.err = fmt.Errorf("metrics: register: %w", err)
	}
	return c
}

func counterVec(r *registrar, name, help string, labels ...string) *prometheus.CounterVec {
	return register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

func counter(r *registrar, name, help string) prometheus.Counter {
	return register(r, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

func histogramVec(r *registrar, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return register(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

func histogram(r *registrar, name, help string, buckets []float64) prometheus.Histogram {
	return register(r, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
}

func gaugeVec(r *registrar, name, help string, labels ...string) *prometheus.GaugeVec {
	return register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

// Buckets, in seconds unless they say otherwise.
var (
	// ttftBuckets spans a cached answer to a slow model's first token.
	ttftBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2, 4, 8, 15, 30}
	// overheadBuckets spans what the relay adds: milliseconds normally,
	// seconds when it retried.
	overheadBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	// gapBuckets spans token pacing to stalls.
	gapBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 15}
	// batchBuckets, in frames, span a frame alone to a full atomic batch
	// (chunklog's 256).
	batchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}
	// waitBuckets spans a short shared Retry-After to a long quota wait.
	waitBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
)

package app

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/relaydev/relay/relay/metrics"
)

// newRegistry is a process's metrics registry: the Go runtime's and the
// process's collectors, and the families of every role the process runs
// (relay/metrics), which each role registers when it is created. Every
// role's /metrics serves it.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// ops serves the /healthz, /readyz and /metrics of role (the worker, the
// coordinator) on addr (zero: fallback; the worker's is a free loopback
// port, which the log names) and returns its address. started is
// serveOps'.
func (r roles) ops(ctx context.Context, g *errgroup.Group, role, addr, fallback string, started *atomic.Bool) (string, error) {
	ln, err := listen(addr, fallback)
	if err != nil {
		return "", fmt.Errorf("app: %s ops: %w", role, err)
	}
	g.Go(func() error { return serveOps(ctx, ln, r.nc, r.js, r.reg, started) })
	r.logger.Info(role+" ops listening", "role", role, "addr", ln.Addr().String(), "paths", "/healthz /readyz /metrics")
	return ln.Addr().String(), nil
}

// breakerMetrics is the breaker families in the process's registry; as a
// breaker.EventHandler it counts every transition the process makes.
func (r roles) breakerMetrics() (*metrics.Breaker, error) {
	var providers []string
	for _, p := range r.catalog.Providers() {
		providers = append(providers, p.Name)
	}
	return metrics.NewBreaker(r.reg, metrics.NewNames(providers, r.catalog.Models(), nil))
}

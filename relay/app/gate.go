package app

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/worker"
)

// sharedGate is the worker's cluster-wide gate: circuit breakers, shared
// pauses, retry budgets, rate limits and canaries, in KV (through the
// region's JetStream, so a region reads its mirror).
func (r roles) sharedGate(ctx context.Context) (*fleet.SharedGate, error) {
	events, err := r.breakerMetrics() // relay_breaker_* (ops.go)
	if err != nil {
		return nil, err
	}
	return fleet.NewSharedGate(ctx, fleet.SharedGateConfig{ID: r.cfg.Worker.ID}, fleet.SharedGateDeps{
		JS: r.js, Catalog: r.catalog, Logger: r.logger.With("role", "worker"), Events: events,
	})
}

// runGate follows the shared state for the worker until it stopped: a
// draining worker's last calls still consult and report to it.
func runGate(ctx context.Context, g *errgroup.Group, gate *fleet.SharedGate, w *worker.Worker) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		<-w.Closed()
		cancel()
	}()
	g.Go(func() error { return gate.Run(gctx) })
}

package fleet

import (
	"github.com/relaydev/relay/relay/fleet/canary"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/wire"
)

// Route puts the model's canary first for the requests its weight picks,
// and leaves it out of the others' routes.
func (g *SharedGate) Route(streamID, model string, route []provider.Candidate) []provider.Candidate {
	cfg, ok := g.canaryOf(model)
	if !ok {
		return route
	}
	weight := 0.0
	if row, ok := g.view.Canaries.Get(wire.KeyToken(model)); ok && row.Value.Provider == cfg.Provider {
		weight = row.Value.Weight
	}
	var first, rest []provider.Candidate
	for _, c := range route {
		if isCanary(cfg, model, c) {
			first = append(first, c)
		} else {
			rest = append(rest, c)
		}
	}
	if len(first) == 0 || !canary.Pick(streamID, weight) {
		return rest
	}
	return append(first, rest...)
}

// StreamEnded counts a stream whose route put the model's canary first:
// one more of the canary's streams, and one more of its client-visible
// failures if the stream ended failed or incomplete on the canary. A
// stream a fallback rescued ended well for its client (the canary's
// failed call is counted as a call), and one that failed on the fallback
// failed there; a stream the client cancelled says nothing.
func (g *SharedGate) StreamEnded(e StreamEnd) {
	cfg, ok := g.canaryOf(e.Model)
	if !ok || !isCanary(cfg, e.Model, e.First) || e.Status == wire.StatusCancelled {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.callsOf(cfg.Provider + "/" + e.Model)
	c.Streams++
	if (e.Status == wire.StatusFailed || e.Status == wire.StatusIncomplete) && isCanary(cfg, e.Model, e.Last) {
		c.StreamFailures++
	}
}

// canaryOf is the canary configured for model, if any.
func (g *SharedGate) canaryOf(model string) (canary.Config, bool) {
	m, ok := g.catalog.ModelSettings(model)
	if !ok || m.Canary == nil {
		return canary.Config{}, false
	}
	return *m.Canary, true
}

// isCanary reports whether c is model's canary, cfg.
func isCanary(cfg canary.Config, model string, c provider.Candidate) bool {
	return c.Provider.Name == cfg.Provider && c.Model == model
}

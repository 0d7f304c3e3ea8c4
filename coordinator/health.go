package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/wire"
)

// healthRefresh is how often the published health follows the breakers
// and the workers' failures between two probes.
const healthRefresh = 500 * time.Millisecond

// runHealth probes every provider each HealthInterval, and publishes its
// health whenever the probe, its breaker or its recent failures change it.
func (c *Coordinator) runHealth(ctx context.Context, s *state) {
	probes := map[string]wire.Health{}
	published := map[string]wire.Health{}
	probe := time.NewTicker(c.cfg.HealthInterval)
	defer probe.Stop()
	refresh := time.NewTicker(min(healthRefresh, c.cfg.HealthInterval))
	defer refresh.Stop()
	doProbe := true
	for {
		for _, p := range c.deps.Catalog.Providers() {
			if doProbe {
				probes[p.Name] = c.probe(ctx, p, "")
			}
			h := c.judge(s, p, probes[p.Name], time.Now())
			if last, ok := published[p.Name]; ok && !doProbe && same(last, h) {
				continue
			}
			if c.publish(ctx, s, h) {
				published[p.Name] = h
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-probe.C:
			doProbe = true
		case <-refresh.C:
			doProbe = false
		}
	}
}

func same(a, b wire.Health) bool {
	return a.State == b.State && a.Breaker == b.Breaker && a.LastError == b.LastError && a.LastFailureAt == b.LastFailureAt
}

// judge combines the last probe of p with its breakers and the workers'
// failures: red if the probe failed or a breaker is open; yellow if the
// probe was slow, a breaker half-open, or a call failed within
// FailureWindow; green otherwise.
func (c *Coordinator) judge(s *state, p provider.Config, probe wire.Health, now time.Time) wire.Health {
	h := probe
	phase := c.worstBreaker(s, p.Name)
	if phase != breaker.Closed {
		h.Breaker = string(phase)
	}
	last := s.calls.lastFailure(p.Name)
	if !last.IsZero() {
		h.LastFailureAt = last.Unix()
	}
	recent := !last.IsZero() && now.Sub(last) < c.cfg.FailureWindow
	switch {
	case h.State == wire.HealthRed:
	case phase == breaker.Open:
		h.State, h.LastError = wire.HealthRed, "circuit breaker open"
	case phase == breaker.HalfOpen:
		h.State, h.LastError = wire.HealthYellow, "circuit breaker half-open: probing"
	case h.State == wire.HealthYellow:
	case recent:
		h.State, h.LastError = wire.HealthYellow, fmt.Sprintf("a call failed %v ago", now.Sub(last).Round(time.Second))
	}
	return h
}

// worstBreaker is the worst phase among the breakers of provider (one,
// or one per model).
func (c *Coordinator) worstBreaker(s *state, name string) breaker.Phase {
	worst := breaker.Closed
	for key, row := range s.Breakers.All() {
		if p, _ := fleet.ParseScope(key); p != name {
			continue
		}
		switch row.Value.Current() {
		case breaker.Open:
			return breaker.Open
		case breaker.HalfOpen:
			worst = breaker.HalfOpen
		}
	}
	return worst
}

func (c *Coordinator) publish(ctx context.Context, s *state, h wire.Health) bool {
	if err := s.PublishHealth(ctx, h); err != nil {
		if ctx.Err() == nil {
			c.deps.Logger.Warn("publish health", "provider", h.Provider, "err", err)
		}
		return false
	}
	c.deps.Logger.Debug("provider health", "provider", h.Provider, "state", h.State, "breaker", h.Breaker, "latency_ms", h.LatencyMS, "err", h.LastError)
	return true
}

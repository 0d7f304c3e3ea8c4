package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/canary"
	"github.com/relaydev/relay/relay/wire"
)

// runCanaries moves every configured canary ramp each CanaryInterval,
// from the fleet's counts of the canary provider and model: its calls,
// and the streams routed to it, by how they ended for their clients. A
// call the canary's breaker refused counts as a failed call: a canary
// whose breaker opened is failing.
func (c *Coordinator) runCanaries(ctx context.Context, s *state) {
	tick := time.NewTicker(c.cfg.CanaryInterval)
	defer tick.Stop()
	select {
	case <-ctx.Done():
		return
	case <-s.Canaries.Synced():
	}
	// Counts before this coordinator became active are not comparable
	// with its own: every running step counts again from now.
	rebase := true
	for {
		for _, model := range c.deps.Catalog.Models() {
			m, ok := c.deps.Catalog.ModelSettings(model)
			if !ok || m.Canary == nil {
				continue
			}
			c.ramp(ctx, s, model, *m.Canary, rebase)
		}
		rebase = false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (c *Coordinator) ramp(ctx context.Context, s *state, model string, cfg canary.Config, rebase bool) {
	calls := s.calls.get(cfg.Provider + "/" + model)
	total := canary.Counts{Calls: calls.Calls + calls.Open, Errors: calls.Failures + calls.Open,
		Streams: calls.Streams, Failed: calls.StreamFailures}
	var ev *canary.Event
	_, written, err := s.Canaries.Update(ctx, wire.KeyToken(model), func(cur canary.State, _ bool) (canary.State, error) {
		ev = nil
		if rebase && cur.Phase == canary.Ramping && cur.Plan == cfg.Plan() {
			cur.Base, cur.Seen = total, total
			return cur, nil
		}
		next, e, err := canary.Next(cur, cfg, model, time.Now(), total)
		if err != nil {
			return cur, fleet.ErrNoChange
		}
		if e == nil && next.Seen == cur.Seen && next.Reason == cur.Reason {
			return cur, fleet.ErrNoChange
		}
		ev = e
		return next, nil
	})
	if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		c.deps.Logger.Warn("canary ramp not written", "model", model, "err", err)
		return
	}
	if written && ev != nil {
		level := slog.LevelInfo
		if ev.Phase == canary.Aborted {
			level = slog.LevelWarn
		}
		c.event("canary", ev.String(), level)
	}
}

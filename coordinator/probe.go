package coordinator

import (
	"context"
	"log/slog"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/wire"
)

// probeTick is how often the active coordinator looks for breakers that
// nobody probes.
const probeTick = 100 * time.Millisecond

// releaseTimeout bounds the release of a probe claim by a coordinator
// that is stopping.
const releaseTimeout = 2 * time.Second

// runProbes probes, with the provider's probe call, every breaker whose probe nobody
// claimed within ProbeGrace of becoming claimable: a provider that gets no
// request would otherwise stay open forever. The claim is the same
// revision-checked Claim the workers make, so the cluster still sends one
// probe.
func (c *Coordinator) runProbes(ctx context.Context, s *state) {
	if c.cfg.ProbeGrace < 0 {
		return
	}
	tick := time.NewTicker(probeTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		for key, row := range s.Breakers.All() {
			if !breaker.ClaimableFor(row.Value, now, c.cfg.ProbeGrace) {
				continue
			}
			c.probeBreaker(ctx, s, key)
		}
	}
}

// probeBreaker claims the probe of breaker key and resolves it with a
// health probe of its provider.
func (c *Coordinator) probeBreaker(ctx context.Context, s *state, key string) {
	name, model := fleet.ParseScope(key)
	p, ok := c.deps.Catalog.Provider(name)
	if !ok {
		return
	}
	cfg := p.Breaker.WithDefaults()
	id := c.name + "-" + randomID()
	ev, won, err := s.Transition(ctx, key, func(cur breaker.State) (breaker.State, breaker.Event, bool) {
		return breaker.Claim(cur, cfg, time.Now(), key, c.name, id)
	})
	if err != nil {
		c.deps.Logger.Warn("breaker probe not claimed", "breaker", key, "err", err)
		return
	}
	if !won {
		return
	}
	c.breakerEvent(ev)
	h := c.probe(ctx, p, model)
	v, reason := breaker.Failure, "health probe failed: "+h.LastError
	if h.State != wire.HealthRed {
		v, reason = breaker.Success, "health probe succeeded"
	}
	if ctx.Err() != nil {
		// The coordinator stopped (or lost the lease) during the probe:
		// that says nothing of the provider. Release the claim at once
		// rather than leave it to expire after probe_timeout.
		v, reason = breaker.Neutral, "coordinator stopped during its probe"
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
	}
	res, written, err := s.Transition(ctx, key, func(cur breaker.State) (breaker.State, breaker.Event, bool) {
		return breaker.Resolve(cur, cfg, time.Now(), key, c.name, id, v, reason)
	})
	switch {
	case err != nil:
		// The claim expires after probe_timeout; until then no other
		// probe is let through.
		c.deps.Logger.Warn("breaker probe verdict not written", "breaker", key, "verdict", v, "err", err)
	case written:
		c.breakerEvent(res)
	}
}

// breakerEvent logs, forwards and counts a breaker transition the
// coordinator made.
func (c *Coordinator) breakerEvent(ev breaker.Event) {
	level := slog.LevelInfo
	if ev.To == breaker.Open {
		level = slog.LevelWarn
	}
	c.event("probe", ev.String(), level)
	if c.deps.Breakers != nil {
		c.deps.Breakers.OnEvent(ev)
	}
}

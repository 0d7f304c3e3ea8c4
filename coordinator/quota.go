package coordinator

import (
	"context"
	"encoding/json"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/wire"
)

// runQuotas splits every shared limit into shares, each QuotaInterval:
// the nodes' reports (each in a key of its own) give their demand, and
// each fresh node gets a share key of its own, so the KV traffic grows
// with the nodes, not with the requests. The tenant limits are published
// too, for edges that have no share yet, and the fleet's first-token
// figures (ttft.go).
func (c *Coordinator) runQuotas(ctx context.Context, s *state) {
	tick := time.NewTicker(c.cfg.QuotaInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c.allocate(ctx, s, time.Now())
	}
}

// tenantLimits is the configured tenant limits record.
func (c *Coordinator) tenantLimits(edges int) quota.Limits {
	l := quota.Limits{
		TenantRPM:     float64(c.cfg.TenantRPM),
		TenantTPM:     float64(c.cfg.TenantTPM),
		MaxConcurrent: c.cfg.TenantMaxConcurrent,
		Concurrent:    c.cfg.TenantConcurrency,
		Edges:         edges,
	}
	l.Tenants = perMinute(c.cfg.TenantLimits)
	l.TPM = perMinute(c.cfg.TenantTPMLimits)
	return l
}

// perMinute converts configured per-tenant limits; none: nil.
func perMinute(limits map[string]int) map[string]float64 {
	if len(limits) == 0 {
		return nil
	}
	out := make(map[string]float64, len(limits))
	for t, n := range limits {
		out[t] = float64(n)
	}
	return out
}

// limitOf is the cluster-wide value of a limit key: the coordinator's own
// configuration for a provider it knows, else what the nodes report.
func (c *Coordinator) limitOf(key string, reported float64, tenants quota.Limits) float64 {
	if quota.IsTenant(key) {
		name, err := fleet.TenantName(key)
		if err != nil {
			return 0
		}
		return tenants.OfKey(key, name)
	}
	for _, p := range c.deps.Catalog.Providers() {
		tok := wire.KeyToken(p.Name)
		switch key {
		case quota.ProviderRPM(tok):
			if p.RateLimit.RPM > 0 {
				return float64(p.RateLimit.RPM)
			}
		case quota.ProviderTPM(tok):
			if p.RateLimit.TPM > 0 {
				return float64(p.RateLimit.TPM)
			}
		}
	}
	return reported
}

// allocate computes and writes one round of shares.
func (c *Coordinator) allocate(ctx context.Context, s *state, now time.Time) {
	var fresh []quota.Report
	edges := 0
	for _, row := range s.Demand.All() {
		if row.Value.Fresh(now) {
			fresh = append(fresh, row.Value)
			if row.Value.Role == "edge" {
				edges++
			}
		}
	}
	tenants := c.tenantLimits(edges)
	demand := map[string]map[string]float64{} // key → node → demand
	reported := map[string]float64{}
	for _, r := range fresh {
		for key, d := range r.Demand {
			if demand[key] == nil {
				demand[key] = map[string]float64{}
			}
			demand[key][r.Node] = d
			reported[key] = max(reported[key], r.Limits[key])
		}
	}
	// A tenant's limit is split over every edge, not only those that saw
	// the tenant lately: an edge it comes to next has its share at once,
	// rather than the default on top of the whole limit handed out.
	for key, nodes := range demand {
		if !quota.IsTenant(key) {
			continue
		}
		for _, r := range fresh {
			if _, ok := nodes[r.Node]; !ok && r.Role == "edge" {
				nodes[r.Node] = 0
			}
		}
	}
	shares := map[string]*quota.Shares{}
	for _, r := range fresh {
		sh := &quota.Shares{At: now.UTC(), PerMinute: map[string]float64{}, Nodes: map[string]int{}}
		if r.Role == "edge" && tenants.TenantRPM > 0 && edges > 0 {
			sh.TenantDefault = tenants.TenantRPM / float64(edges)
		}
		shares[r.Node] = sh
	}
	for key, nodes := range demand {
		limit := c.limitOf(key, reported[key], tenants)
		if limit <= 0 {
			continue
		}
		for node, share := range quota.Allocate(limit, nodes) {
			shares[node].PerMinute[key] = share
			shares[node].Nodes[key] = len(nodes)
		}
	}
	for node, sh := range shares {
		data, _ := json.Marshal(sh)
		if _, err := s.Quotas.Put(ctx, fleet.ShareKey(node), data); err != nil && ctx.Err() == nil {
			c.deps.Logger.Debug("share not written", "node", node, "err", err)
		}
	}
	data, _ := json.Marshal(tenants)
	if _, err := s.Quotas.Put(ctx, fleet.LimitsKey, data); err != nil && ctx.Err() == nil {
		c.deps.Logger.Debug("tenant limits not written", "err", err)
	}
	c.publishTTFT(ctx, s, fresh, now)
}

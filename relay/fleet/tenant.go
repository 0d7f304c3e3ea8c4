package fleet

import (
	"context"
	"time"

	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/wire"
)

// TenantLimiter enforces the per-tenant requests per minute at an edge,
// shared by every edge: the limits are configured on the coordinators
// (coordinator.tenant_rpm, coordinator.tenant_limits), which publish them
// with each edge's share (see QuotaNode). With no limits published, every
// request is allowed.
type TenantLimiter struct {
	node *QuotaNode
}

// NewTenantLimiter returns the limiter of the edge node, reporting through
// node (Role "edge"); run node.Run for the shares to follow the demand.
func NewTenantLimiter(node *QuotaNode) *TenantLimiter {
	node.Role = "edge"
	return &TenantLimiter{node: node}
}

// Allow counts one request of tenant ("" until tenants exist) and reports
// whether this edge's share of the tenant's limit allows it now; if not,
// retryAfter says when the next request would be allowed. It never makes
// a round trip.
func (l *TenantLimiter) Allow(_ context.Context, tenant string) (ok bool, retryAfter time.Duration) {
	key := quota.TenantRPM(wire.KeyToken(tenant))
	if !l.node.EnsureTenant(key, tenant) {
		return true, 0
	}
	ok, wait := l.node.Take(key, 1)
	if !ok {
		return false, min(max(wait, time.Second), time.Hour)
	}
	return true, 0
}

// Reserve admits a generation of tenant against its tokens per minute
// while the edge's share has tokens left, taking the mean cost of the
// tenant's generations at once (QuotaNode.Reserve); Settle pays the
// actual cost when the generation's usage is known. If not ok, retryAfter
// says when the share will have tokens again.
func (l *TenantLimiter) Reserve(tenant string) (ok bool, retryAfter time.Duration, reserved float64) {
	key := quota.TenantTPM(wire.KeyToken(tenant))
	if !l.node.EnsureTenant(key, tenant) {
		return true, 0, 0
	}
	ok, wait, reserved := l.node.Reserve(key, true)
	if !ok {
		return false, min(max(wait, time.Second), time.Hour), 0
	}
	return true, 0, reserved
}

// Settle pays a generation's tokens against what Reserve took.
func (l *TenantLimiter) Settle(tenant string, reserved float64, tokens int) {
	l.node.Settle(quota.TenantTPM(wire.KeyToken(tenant)), reserved, float64(tokens))
}

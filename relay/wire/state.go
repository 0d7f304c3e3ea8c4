package wire

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cluster-wide provider state: circuit breakers, shared Retry-After pauses,
// quota shares, canary ramps, the coordinator lease and provider health.
// Each lives in a KV bucket of its own, changed by revision-checked updates
// (never a lock) and followed by every node through a watch, with a local
// copy on the hot path.
//
//	bucket            key                          value                         written by
//	relay_breakers    <scope>                      breaker.State (JSON)          workers (trip, probe claim and verdict), the active coordinator (probes of idle breakers)
//	relay_pauses      <scope>                      Pause                         workers that got a Retry-After (only ever raised)
//	relay_quotas      demand.<role>.<node>         quota.Report                  each worker and edge, every quota interval
//	                  share.<node>                 quota.Shares                  the active coordinator
//	                  limits                       quota.Limits                  the active coordinator (the tenant limits)
//	                  ttft                         quota.TTFTFigures             the active coordinator (the fleet's first-token times, for hedging)
//	relay_canaries    <model>                      canary.State                  the active coordinator
//	relay_leases      coordinator                  Lease (per-key TTL)           coordinators
//	relay_health      <provider>                   Health                        the active coordinator
//
// A scope is a provider name, or "<provider>.<model>" for a provider whose
// breaker is per model (ScopeKey); tokens that are not letters, digits, '-'
// or '_' are escaped (KeyToken).
//
// # Regions
//
// SharedStateBuckets lists exactly the buckets another region mirrors. Every
// reader of shared state works against a mirror: reads and watches are
// local, writes go to the origin (nats.go forwards a mirror bucket's writes
// to its origin), and a mirror's revisions equal the origin's, so a
// revision read from a mirror that caught up is a valid compare-and-swap
// base; one read from a lagging mirror fails the swap, and the writer reads
// again, a bounded number of times. No reader assumes it sees its own write
// through its watch at once: a writer applies what it wrote to its local
// copy itself. Setup leaves a bucket that exists as a mirror as it is.
const (
	BreakerBucket = "relay_breakers"
	PauseBucket   = "relay_pauses"
	QuotaBucket   = "relay_quotas"
	CanaryBucket  = "relay_canaries"
	LeaseBucket   = "relay_leases"
)

// SharedStateBuckets are the buckets of cluster-wide provider state, the
// ones regions share.
var SharedStateBuckets = []string{BreakerBucket, PauseBucket, QuotaBucket, CanaryBucket, LeaseBucket, HealthBucket}

// CoordinatorLeaseKey is the key of the active coordinator's lease in
// LeaseBucket.
const CoordinatorLeaseKey = "coordinator"

// Pause is a provider's (or a model's) shared Retry-After: no worker calls
// it before Until.
type Pause struct {
	Until time.Time `json:"until"`
	// RetryAfterMS is the wait the provider asked for, By the node that
	// was told, At when.
	RetryAfterMS int64     `json:"retry_after_ms"`
	By           string    `json:"by"`
	At           time.Time `json:"at"`
}

// Lease is the record of a coordinator lease.
type Lease struct {
	Holder string    `json:"holder"`
	Since  time.Time `json:"since"`
	TTLMS  int64     `json:"ttl_ms"`
}

// ScopeKey is the key of the breaker and pause of model on provider: the
// provider's if model is empty (one breaker per provider).
func ScopeKey(provider, model string) string {
	if model == "" {
		return KeyToken(provider)
	}
	return KeyToken(provider) + "." + KeyToken(model)
}

// KeyToken escapes s into one KV key token: letters, digits, '-' and '_'
// stay, every other byte becomes "=XX" (hex). Provider names need no
// escape; model names ("org/model:tag") and tenants may.
func KeyToken(s string) string {
	if s == "" {
		return "="
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	return b.String()
}

// ParseKeyToken undoes KeyToken.
func ParseKeyToken(tok string) (string, error) {
	if tok == "=" {
		return "", nil
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		if tok[i] != '=' {
			b.WriteByte(tok[i])
			continue
		}
		if i+2 >= len(tok) {
			return "", fmt.Errorf("wire: key token %q: truncated escape", tok)
		}
		c, err := strconv.ParseUint(tok[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("wire: key token %q: %w", tok, err)
		}
		b.WriteByte(byte(c))
		i += 2
	}
	return b.String(), nil
}

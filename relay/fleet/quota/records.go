package quota

import (
	"strings"
	"time"
)

// Limit keys name one shared limit: "p.<provider>.rpm", "p.<provider>.tpm"
// (enforced by workers) and "t.<tenant>.rpm" (enforced by edges), where
// the names are KV key tokens (wire.KeyToken).
const (
	ProviderPrefix = "p."
	TenantPrefix   = "t."
	SuffixRPM      = ".rpm"
	SuffixTPM      = ".tpm"
)

// ProviderRPM, ProviderTPM and TenantRPM build limit keys from key tokens.
func ProviderRPM(token string) string { return ProviderPrefix + token + SuffixRPM }
func ProviderTPM(token string) string { return ProviderPrefix + token + SuffixTPM }
func TenantRPM(token string) string   { return TenantPrefix + token + SuffixRPM }

// IsTenant reports whether key is a tenant limit.
func IsTenant(key string) bool { return strings.HasPrefix(key, TenantPrefix) }

// TenantToken is the tenant's key token in a tenant limit key.
func TenantToken(key string) string {
	return strings.TrimSuffix(strings.TrimPrefix(key, TenantPrefix), SuffixRPM)
}

// Calls counts one node's calls of one provider and model since it
// started: the canary's error rate and the health's recent failures are
// computed from their differences.
type Calls struct {
	// Calls were admitted; Failures of them ended with a failure verdict;
	// Refused were not admitted (breaker open, pause, budget, limit), Open
	// of them because the breaker was open (or its probe taken).
	Calls    int64 `json:"calls"`
	Failures int64 `json:"failures"`
	Refused  int64 `json:"refused"`
	Open     int64 `json:"open,omitempty"`
	// LastFailure is when the last failure ended, LastError its class.
	LastFailure time.Time `json:"last_failure,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
}

// Retries are one node's retry budget counts for a provider, in the
// budget's window.
type Retries struct {
	Requests int `json:"requests"`
	Retries  int `json:"retries"`
	Denied   int `json:"denied"` // since start
}

// Report is what a node writes to its demand key each interval.
type Report struct {
	Node     string    `json:"node"`
	Role     string    `json:"role"`
	At       time.Time `json:"at"`
	Interval int64     `json:"interval_ms"`
	// Demand is, per limit key, what the node asked for per minute
	// (refused calls included), smoothed; Used what it was given.
	Demand map[string]float64 `json:"demand,omitempty"`
	Used   map[string]float64 `json:"used,omitempty"`
	// Limits are the cluster-wide limits the node knows from its own
	// configuration, per minute.
	Limits map[string]float64 `json:"limits,omitempty"`
	// Calls by "<provider>/<model>" and Retries by provider (workers).
	Calls   map[string]Calls   `json:"calls,omitempty"`
	Retries map[string]Retries `json:"retries,omitempty"`
	// TTFT holds the node's first-token times of the last TTFTWindowSpan
	// by "<provider>/<model>" (workers).
	TTFT map[string]TTFTHistogram `json:"ttft,omitempty"`
}

// Fresh reports whether the report is recent enough to count: written
// within three of its intervals.
func (r Report) Fresh(now time.Time) bool {
	iv := time.Duration(r.Interval) * time.Millisecond
	return now.Sub(r.At) <= 3*max(iv, time.Second)
}

// Shares is what the coordinator writes to a node's share key.
type Shares struct {
	At time.Time `json:"at"`
	// PerMinute is the node's share of each limit key.
	PerMinute map[string]float64 `json:"per_minute"`
	// Nodes is how many nodes share each limit key.
	Nodes map[string]int `json:"nodes,omitempty"`
	// TenantDefault is the share of a tenant this node has not reported
	// yet, per minute: the default tenant limit split over the edges.
	TenantDefault float64 `json:"tenant_default,omitempty"`
}

// Limits is the tenant limits record the coordinator publishes, so that an
// edge without a share yet (or while no coordinator runs) knows them.
type Limits struct {
	// TenantRPM is every tenant's limit unless Tenants names it; zero: no
	// limit.
	TenantRPM float64            `json:"tenant_rpm,omitempty"`
	Tenants   map[string]float64 `json:"tenants,omitempty"`
	// Edges is how many edges shared the tenant limits last time.
	Edges int `json:"edges,omitempty"`
}

// Tenant is the limit of tenant, zero for none.
func (l Limits) Tenant(tenant string) float64 {
	if v, ok := l.Tenants[tenant]; ok {
		return v
	}
	return l.TenantRPM
}

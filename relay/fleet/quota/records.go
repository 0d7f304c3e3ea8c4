package quota

import (
	"strings"
	"time"
)

// Limit keys name one shared limit: "p.<provider>.rpm", "p.<provider>.tpm"
// (enforced by workers) and "t.<tenant>.rpm", "t.<tenant>.tpm" (enforced
// by edges), where the names are KV key tokens (wire.KeyToken).
const (
	ProviderPrefix = "p."
	TenantPrefix   = "t."
	SuffixRPM      = ".rpm"
	SuffixTPM      = ".tpm"
)

// ProviderRPM, ProviderTPM, TenantRPM and TenantTPM build limit keys from
// key tokens.
func ProviderRPM(token string) string { return ProviderPrefix + token + SuffixRPM }
func ProviderTPM(token string) string { return ProviderPrefix + token + SuffixTPM }
func TenantRPM(token string) string   { return TenantPrefix + token + SuffixRPM }
func TenantTPM(token string) string   { return TenantPrefix + token + SuffixTPM }

// IsTenant reports whether key is a tenant limit.
func IsTenant(key string) bool { return strings.HasPrefix(key, TenantPrefix) }

// TenantToken is the tenant's key token in a tenant limit key.
func TenantToken(key string) string {
	key = strings.TrimPrefix(key, TenantPrefix)
	return strings.TrimSuffix(strings.TrimSuffix(key, SuffixRPM), SuffixTPM)
}

// IsTokens reports whether key is a tokens-per-minute limit: paid after
// the call (QuotaNode.Reserve, Settle) rather than taken before it.
func IsTokens(key string) bool { return strings.HasSuffix(key, SuffixTPM) }

// Calls counts one node's calls of one provider and model since it
// started, and the streams it ended that the provider was the canary of:
// the canary's failure rates and the health's recent failures are
// computed from their differences.
type Calls struct {
	// Calls were admitted; Failures of them ended with a failure verdict;
	// Refused were not admitted (breaker open, pause, budget, limit), Open
	// of them because the breaker was open (or its probe taken).
	Calls    int64 `json:"calls"`
	Failures int64 `json:"failures"`
	Refused  int64 `json:"refused"`
	Open     int64 `json:"open,omitempty"`
	// Streams are the streams routed to this canary first that the node
	// ended, the cancelled ones aside; StreamFailures of them ended failed
	// or incomplete for the client on the canary (canary.Counts).
	Streams        int64 `json:"streams,omitempty"`
	StreamFailures int64 `json:"stream_failures,omitempty"`
	// LastFailure is when the last failure ended, LastError its class.
	LastFailure time.Time `json:"last_failure,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
}

// Retries are one node's retry budget counts for a scope (a model on a
// provider, or a provider), in the budget's window.
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
	// Calls by "<provider>/<model>" and Retries by scope (workers).
	Calls   map[string]Calls   `json:"calls,omitempty"`
	Retries map[string]Retries `json:"retries,omitempty"`
	// TTFT holds the node's first-token times of the last TTFTWindowSpan
	// by "<provider>/<model>" (workers).
	TTFT map[string]TTFTHistogram `json:"ttft,omitempty"`
	// Keys are the checks of the provider API keys, by provider (workers).
	Keys map[string][]APIKey `json:"keys,omitempty"`
}

// APIKey is the check of one of a worker's provider API keys, named by
// its fingerprint: a report never holds a key.
type APIKey struct {
	// Index is the key's position in api_keys or api_keys_file, from 0.
	Index       int    `json:"index"`
	Fingerprint string `json:"fingerprint"`
	// State is verified, failed (the provider refused it), pending (not
	// told yet) or unchecked (see package apikeys).
	State     string    `json:"state"`
	Reason    string    `json:"reason,omitempty"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
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
// Each limit is every tenant's unless its map names the tenant; zero: no
// limit.
type Limits struct {
	// TenantRPM and Tenants are requests per minute.
	TenantRPM float64            `json:"tenant_rpm,omitempty"`
	Tenants   map[string]float64 `json:"tenants,omitempty"`
	// TenantTPM and TPM are tokens per minute (prompt and completion),
	// counted from the usage of the generations' end frames.
	TenantTPM float64            `json:"tenant_tpm,omitempty"`
	TPM       map[string]float64 `json:"tpm,omitempty"`
	// MaxConcurrent and Concurrent cap the generations a tenant runs at
	// once over the whole fleet, queued ones included.
	MaxConcurrent int            `json:"max_concurrent,omitempty"`
	Concurrent    map[string]int `json:"concurrent,omitempty"`
	// Edges is how many edges shared the tenant limits last time.
	Edges int `json:"edges,omitempty"`
}

// Tenant is the requests per minute of tenant, zero for none.
func (l Limits) Tenant(tenant string) float64 {
	if v, ok := l.Tenants[tenant]; ok {
		return v
	}
	return l.TenantRPM
}

// Tokens is the tokens per minute of tenant, zero for none.
func (l Limits) Tokens(tenant string) float64 {
	if v, ok := l.TPM[tenant]; ok {
		return v
	}
	return l.TenantTPM
}

// ConcurrencyOf is the cap on tenant's concurrent generations, zero for
// none.
func (l Limits) ConcurrencyOf(tenant string) int {
	if v, ok := l.Concurrent[tenant]; ok {
		return v
	}
	return l.MaxConcurrent
}

// OfKey is the per-minute limit of a tenant limit key: its requests or
// its tokens.
func (l Limits) OfKey(key, tenant string) float64 {
	if IsTokens(key) {
		return l.Tokens(tenant)
	}
	return l.Tenant(tenant)
}

package provider

import (
	"fmt"
	"slices"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// CacheMode is when a model's kept answers (wire "Cached answers") are
// served.
type CacheMode string

const (
	// CacheFallback serves a kept answer only to a request that no
	// provider of its route could take: the alternative is an error.
	CacheFallback CacheMode = "fallback"
	// CachePrefer also serves a deterministic request (temperature 0)
	// from the cache before calling any provider; other requests are
	// served as with CacheFallback.
	CachePrefer CacheMode = "prefer"
)

// DefaultCacheTTL is how long an answer is kept when the model's cache
// names no TTL.
const DefaultCacheTTL = 24 * time.Hour

// Cache is a model's answer cache: off unless Mode is set. A kept answer
// is served to an identical request of the same tenant only, and always
// marked as such to the client.
type Cache struct {
	// Mode is fallback or prefer; zero: off.
	Mode CacheMode `koanf:"mode"`
	// TTL is how long an answer is kept after it completed; zero:
	// DefaultCacheTTL. At most wire.AnswerMaxTTL.
	TTL time.Duration `koanf:"ttl"`
	// Tenants opts tenants in (edge.api_keys tenants); empty: every
	// tenant.
	Tenants []string `koanf:"tenants"`
}

// For reports whether the cache is on for tenant's requests.
func (c Cache) For(tenant string) bool {
	return c.Mode != "" && (len(c.Tenants) == 0 || slices.Contains(c.Tenants, tenant))
}

// KeepFor is how long an answer is kept: TTL, or its default.
func (c Cache) KeepFor() time.Duration {
	if c.TTL == 0 {
		return DefaultCacheTTL
	}
	return c.TTL
}

func (c Cache) validate(key string) error {
	switch {
	case c.Mode != "" && c.Mode != CacheFallback && c.Mode != CachePrefer:
		return fmt.Errorf("%s.mode: %q is not fallback or prefer", key, c.Mode)
	case c.TTL < 0 || c.TTL > wire.AnswerMaxTTL:
		return fmt.Errorf("%s.ttl: %v is not between 0 (the default, %v) and %v", key, c.TTL, DefaultCacheTTL, wire.AnswerMaxTTL)
	case c.Mode == "" && (c.TTL != 0 || len(c.Tenants) > 0):
		return fmt.Errorf("%s.mode: required with ttl or tenants (fallback or prefer)", key)
	}
	for i, t := range c.Tenants {
		if t == "" {
			return fmt.Errorf("%s.tenants[%d]: empty", key, i)
		}
	}
	return nil
}

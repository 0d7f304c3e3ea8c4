package edge

import (
	"fmt"

	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/spend"
)

// SpendConfig sets tenants' spend budgets (admit_spend.go); a key's own are
// APIKey.Budget. The zero value sets none: nothing is checked and nothing
// refused. Every edge must be given the same.
type SpendConfig struct {
	// WarnAt is the fraction of a budget at which the edge logs a warning,
	// once per budget and period, and counts
	// relay_edge_spend_warnings_total (zero: 0.8; 1 or more: no warning
	// before the budget is used up).
	WarnAt float64 `koanf:"warn_at"`
	// Tenants are the tenants' budgets, each over all of its keys.
	Tenants []TenantSpend `koanf:"tenants"`
	// MaxN and MaxBestOf are the largest n and best_of a forwarded
	// completion (/v1/completions) may ask for, each choice costing up
	// to max_tokens (zero: 8; negative: no cap). A chat completion's n
	// is always 1.
	MaxN      int `koanf:"max_n"`
	MaxBestOf int `koanf:"max_best_of"`
}

// TenantSpend is one tenant's budgets.
type TenantSpend struct {
	Tenant string `koanf:"tenant"`
	// Limits are the hard budgets: once one is used up, the tenant's new
	// generations are refused with 429 insufficient_quota until it resets.
	Limits spend.Limits `koanf:"limits"`
	// Soft are budgets past which the tenant's generations for a model
	// of Downgrade are sent to its cheaper model instead.
	Soft      spend.Limits `koanf:"soft"`
	Downgrade []Downgrade  `koanf:"downgrade"`
	// MaxTokens, MaxN and MaxBestOf replace, for this tenant,
	// edge.max_tokens_cap, edge.spend.max_n and edge.spend.max_best_of
	// (zero: those; negative: no cap).
	MaxTokens int `koanf:"max_tokens"`
	MaxN      int `koanf:"max_n"`
	MaxBestOf int `koanf:"max_best_of"`
}

// Downgrade sends a generation for model From to model To.
type Downgrade struct {
	From string `koanf:"from"`
	To   string `koanf:"to"`
}

// DefaultWarnAt is SpendConfig.WarnAt's default.
const DefaultWarnAt = 0.8

// DefaultMaxChoices is SpendConfig.MaxN's and MaxBestOf's default.
const DefaultMaxChoices = 8

// withDefaults fills zero fields.
func (c SpendConfig) withDefaults() SpendConfig {
	if c.WarnAt == 0 {
		c.WarnAt = DefaultWarnAt
	}
	if c.MaxN == 0 {
		c.MaxN = DefaultMaxChoices
	}
	if c.MaxBestOf == 0 {
		c.MaxBestOf = DefaultMaxChoices
	}
	return c
}

// validate names the first invalid field under prefix ("edge"): of
// c, as edge.spend, and of the keys' budgets.
func (c SpendConfig) validate(prefix string, keys []APIKey) error {
	if c.WarnAt < 0 {
		return fmt.Errorf("%s.spend.warn_at: must not be negative", prefix)
	}
	seen := map[string]bool{}
	for i, t := range c.Tenants {
		at := fmt.Sprintf("%s.spend.tenants[%d]", prefix, i)
		if !validTenant(t.Tenant) {
			return fmt.Errorf("%s.tenant: %q: want 1 to 64 letters, digits, '.', '-' or '_'", at, t.Tenant)
		}
		if seen[t.Tenant] {
			return fmt.Errorf("%s.tenant: %q is configured twice", at, t.Tenant)
		}
		seen[t.Tenant] = true
		if err := t.Limits.Validate(at + ".limits"); err != nil {
			return err
		}
		if err := t.Soft.Validate(at + ".soft"); err != nil {
			return err
		}
		if len(t.Downgrade) > 0 && t.Soft.IsZero() {
			return fmt.Errorf("%s.downgrade: needs a soft limit (%s.soft) to apply past", at, at)
		}
		for j, d := range t.Downgrade {
			if d.From == "" || d.To == "" || d.From == d.To {
				return fmt.Errorf("%s.downgrade[%d]: want two different models, from and to", at, j)
			}
		}
	}
	for i, k := range keys {
		if err := k.Budget.Validate(fmt.Sprintf("%s.api_keys[%d].budget", prefix, i)); err != nil {
			return err
		}
	}
	return nil
}

// checkModels names the first downgrade to a model catalog does not serve.
func (c SpendConfig) checkModels(catalog *provider.Catalog) error {
	for i, t := range c.Tenants {
		for j, d := range t.Downgrade {
			if !catalog.Serves(d.To) {
				return fmt.Errorf("edge.spend.tenants[%d].downgrade[%d].to: %q is not served by any provider", i, j, d.To)
			}
		}
	}
	return nil
}

package breaker

import (
	"fmt"
	"time"
)

// Defaults of the zero Config.
const (
	DefaultFailures       = 5
	DefaultFailureRatio   = 0.5
	DefaultMinCalls       = 20
	DefaultWindow         = 30 * time.Second
	DefaultCooldown       = 5 * time.Second
	DefaultMaxCooldown    = 5 * time.Minute
	DefaultProbeTimeout   = 2 * time.Minute
	DefaultRecoveryJitter = 5 * time.Second
	DefaultMaxWait        = time.Minute
)

// Config is the `breaker` section of a provider. The zero value means the
// defaults.
type Config struct {
	// Failures is how many calls in a row must fail on one worker, with no
	// success between them, to open the breaker for the whole cluster,
	// whatever FailureRatio says: the rule that catches an outage at
	// once. A call that streamed content counts as a success even if it
	// was cut later (see Verdict). Zero: 5; negative: no breaker.
	Failures int `koanf:"failures"`
	// FailureRatio opens the breaker when at least this share of the calls
	// one worker made in the last Window failed, once the window holds
	// MinCalls calls: the rule that catches a provider failing most of the
	// time even when successes break up the runs of failures. Zero: 0.5;
	// negative: no ratio rule (only Failures in a row). At most 1.
	FailureRatio float64 `koanf:"failure_ratio"`
	// MinCalls is how many calls (successes and failures; neutral verdicts
	// do not count) the window must hold before FailureRatio is judged,
	// so that a few unlucky calls of a quiet worker do not open the
	// breaker. Zero: 20.
	MinCalls int `koanf:"min_calls"`
	// Window is the sliding window FailureRatio is judged over. Zero:
	// 30s.
	Window time.Duration `koanf:"window"`
	// Cooldown is how long the breaker stays open the first time, before
	// one probe is let through. Zero: 5s: the probe is one call, and the
	// requests waiting for its verdict (MaxWait) should not wait longer
	// than the outage. It doubles with each failed probe.
	Cooldown time.Duration `koanf:"cooldown"`
	// MaxCooldown caps the cooldown, which doubles each time a probe fails.
	// Zero: 5m.
	MaxCooldown time.Duration `koanf:"max_cooldown"`
	// ProbeTimeout is how long a probe may run before its claim expires and
	// another node may probe (its owner died, say). Zero: 2m.
	ProbeTimeout time.Duration `koanf:"probe_timeout"`
	// RecoveryJitter is the window over which the calls that waited for
	// the breaker (or for a shared Retry-After pause) are let go once it
	// closes: each waits a uniform draw from [0, RecoveryJitter) after the
	// moment of the close, which all nodes share, so the fleet's retries
	// spread instead of arriving together. Zero: 5s; negative: none.
	RecoveryJitter time.Duration `koanf:"recovery_jitter"`
	// MaxWait is how long a call with no other candidate left waits for
	// an open breaker's probe (or a pause) before its request fails: a
	// short outage costs latency, not answers. A request that asked to
	// fail fast does not wait. Zero: 1m; negative: never wait.
	MaxWait time.Duration `koanf:"max_wait"`
	// Scope is what one breaker (with its shared Retry-After pause and
	// retry budget) guards: ScopeModel, each model of the provider
	// apart, so that a model that is down never refuses the calls of a
	// sibling that serves (the fallback a route moves to, often); or
	// ScopeProvider, the provider as a whole, for a provider whose models
	// fail together. Zero: model.
	Scope Scope `koanf:"scope"`
}

// Scope is a Config.Scope.
type Scope string

// The scopes a breaker may have.
const (
	ScopeModel    Scope = "model"
	ScopeProvider Scope = "provider"
)

// PerModel reports whether each model of the provider has a breaker of
// its own.
func (c Config) PerModel() bool { return c.Scope != ScopeProvider }

// Validate names the first invalid field under prefix (e.g.
// "providers[0].breaker").
func (c Config) Validate(prefix string) error {
	switch {
	case c.Scope != "" && c.Scope != ScopeModel && c.Scope != ScopeProvider:
		return fmt.Errorf("%s.scope: %q is neither %q nor %q", prefix, c.Scope, ScopeModel, ScopeProvider)
	case c.Cooldown < 0:
		return fmt.Errorf("%s.cooldown: must not be negative", prefix)
	case c.MaxCooldown < 0:
		return fmt.Errorf("%s.max_cooldown: must not be negative", prefix)
	case c.ProbeTimeout < 0:
		return fmt.Errorf("%s.probe_timeout: must not be negative", prefix)
	case c.FailureRatio > 1:
		return fmt.Errorf("%s.failure_ratio: %v is more than 1 (every call)", prefix, c.FailureRatio)
	case c.MinCalls < 0:
		return fmt.Errorf("%s.min_calls: must not be negative", prefix)
	case c.Window < 0:
		return fmt.Errorf("%s.window: must not be negative", prefix)
	case c.Window > 0 && c.Window < 10*time.Millisecond:
		return fmt.Errorf("%s.window: %v is below 10ms", prefix, c.Window)
	}
	if d := c.WithDefaults(); d.MaxCooldown < d.Cooldown {
		return fmt.Errorf("%s.max_cooldown: %v is below cooldown %v", prefix, d.MaxCooldown, d.Cooldown)
	}
	return nil
}

// WithDefaults fills the zero fields; negative Failures, FailureRatio,
// RecoveryJitter and MaxWait stay negative.
func (c Config) WithDefaults() Config {
	if c.Failures == 0 {
		c.Failures = DefaultFailures
	}
	if c.FailureRatio == 0 {
		c.FailureRatio = DefaultFailureRatio
	}
	if c.MinCalls == 0 {
		c.MinCalls = DefaultMinCalls
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Cooldown == 0 {
		c.Cooldown = DefaultCooldown
	}
	if c.MaxCooldown == 0 {
		c.MaxCooldown = max(DefaultMaxCooldown, c.Cooldown)
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.RecoveryJitter == 0 {
		c.RecoveryJitter = DefaultRecoveryJitter
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	return c
}

// Enabled reports whether the provider has a breaker.
func (c Config) Enabled() bool { return c.Failures >= 0 }

// CooldownAfter is the cooldown of the trips-th open in a row (1 for the
// first): Cooldown·2^(trips-1), capped by MaxCooldown.
func (c Config) CooldownAfter(trips int) time.Duration {
	c = c.WithDefaults()
	d := c.Cooldown
	for ; trips > 1 && d < c.MaxCooldown; trips-- {
		if d > c.MaxCooldown/2 {
			return c.MaxCooldown
		}
		d *= 2
	}
	return min(d, c.MaxCooldown)
}

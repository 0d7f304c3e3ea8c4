package backoff

import (
	"fmt"
	"time"
)

// Defaults of the zero Config.
const (
	DefaultBase       = 500 * time.Millisecond
	DefaultCap        = 8 * time.Second
	DefaultMaxRetries = 6
)

// Config is a retry schedule: the `retry` section of a provider. The zero
// value means the defaults.
type Config struct {
	// Base is the ceiling of the first retry's delay; each further retry
	// doubles the ceiling. Zero: 500ms.
	Base time.Duration `koanf:"base"`
	// Cap bounds the ceiling, whatever the number of retries. Zero: 8s.
	Cap time.Duration `koanf:"cap"`
	// MaxRetries is how many times one request may call a provider again
	// after a failure (retries, continuations and fallbacks on it alike).
	// Zero: 6; negative: never again, the first failure is final.
	MaxRetries int `koanf:"max_retries"`
}

// Validate names the first invalid field under prefix (e.g.
// "providers[0].retry").
func (c Config) Validate(prefix string) error {
	switch {
	case c.Base < 0:
		return fmt.Errorf("%s.base: %v is negative (0 for the default %v)", prefix, c.Base, DefaultBase)
	case c.Cap < 0:
		return fmt.Errorf("%s.cap: %v is negative (0 for the default %v)", prefix, c.Cap, DefaultCap)
	}
	if d := c.WithDefaults(); d.Cap < d.Base {
		return fmt.Errorf("%s.cap: %v is below base %v", prefix, d.Cap, d.Base)
	}
	return nil
}

// WithDefaults fills the zero fields. MaxRetries stays negative when it is,
// so that Retries can tell "never" from "default".
func (c Config) WithDefaults() Config {
	if c.Base == 0 {
		c.Base = DefaultBase
	}
	if c.Cap == 0 {
		c.Cap = DefaultCap
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	return c
}

// Retries is the number of retries the schedule allows: MaxRetries with
// its default applied, and 0 for a negative value.
func (c Config) Retries() int {
	return max(c.WithDefaults().MaxRetries, 0)
}

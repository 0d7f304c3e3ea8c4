package quota

import (
	"fmt"
	"time"
)

// Defaults of the zero Limit.
const (
	DefaultMaxWait = time.Minute
	// DefaultBurst is how many seconds of its share a node may spend at
	// once; at least one request always fits.
	DefaultBurst = time.Second
)

// Limit is a provider's `rate_limit` section: limits shared by every
// worker of the cluster. The zero value means no limit.
type Limit struct {
	// RPM is the most requests per minute the cluster sends to the
	// provider (every call counts: retries and continuations too). Zero:
	// no limit.
	RPM int `koanf:"rpm"`
	// TPM is the most tokens (prompt and completion, as the provider
	// reports them) per minute. A call is let through while the worker's
	// share has tokens left and pays for its usage when it ends. Zero: no
	// limit.
	TPM int `koanf:"tpm"`
	// MaxWait is how long a call over the limit waits for the limit when
	// its route has no other candidate (a limit is a queue, as a pause is);
	// with another candidate, or when its request asked to fail fast, it
	// moves on at once. Zero: 1m; negative: never wait.
	MaxWait time.Duration `koanf:"max_wait"`
	// Burst is how many seconds of its share a worker may spend at once
	// (at least one request). Zero: 1s.
	Burst time.Duration `koanf:"burst"`
}

// Validate names the first invalid field under prefix.
func (l Limit) Validate(prefix string) error {
	switch {
	case l.RPM < 0:
		return fmt.Errorf("%s.rpm: must not be negative (0: no limit)", prefix)
	case l.TPM < 0:
		return fmt.Errorf("%s.tpm: must not be negative (0: no limit)", prefix)
	case l.Burst < 0:
		return fmt.Errorf("%s.burst: must not be negative", prefix)
	}
	return nil
}

// Wait is MaxWait with its default; zero for never.
func (l Limit) Wait() time.Duration {
	switch {
	case l.MaxWait == 0:
		return DefaultMaxWait
	case l.MaxWait < 0:
		return 0
	}
	return l.MaxWait
}

// BurstOf is the bucket size for a share of perMinute: Burst's worth of
// it, and at least one unit.
func (l Limit) BurstOf(perMinute float64) float64 {
	b := l.Burst
	if b == 0 {
		b = DefaultBurst
	}
	return max(1, perMinute/60*b.Seconds())
}

package quota

import (
	"fmt"
	"time"
)

// Defaults of the zero BudgetConfig.
const (
	DefaultBudgetRatio  = 0.2
	DefaultBudgetWindow = 10 * time.Second
	DefaultMinRetries   = 10
	budgetSlots         = 10
)

// BudgetConfig is a provider's `retry_budget` section. The zero value means
// the defaults.
type BudgetConfig struct {
	// Ratio caps the retries a worker sends to the provider at this share
	// of the requests it sent to it in the last Window, beyond MinRetries
	// (a request's first call on the provider is a request; its later
	// calls on it are retries, but for those that continue an answer the
	// provider was streaming when it was cut, which the budget neither
	// counts nor refuses). Zero: 0.2; negative: no budget.
	Ratio float64 `koanf:"ratio"`
	// Window is the sliding window the shares are counted over. Zero: 10s.
	Window time.Duration `koanf:"window"`
	// MinRetries are allowed per worker and window whatever the ratio: the
	// reserve that lets a quiet worker give a request its whole retry
	// depth (retry.max_retries, 6 by default), so that the budget only
	// bites when retries outnumber it and a fifth of the requests, which
	// takes a provider failing broadly under load. Zero: 10; negative:
	// none.
	MinRetries int `koanf:"min_retries"`
}

// Validate names the first invalid field under prefix.
func (c BudgetConfig) Validate(prefix string) error {
	switch {
	case c.Ratio > 100:
		return fmt.Errorf("%s.ratio: %v is more than 100 retries per request", prefix, c.Ratio)
	case c.Window < 0:
		return fmt.Errorf("%s.window: must not be negative", prefix)
	case c.Window > 0 && c.Window < 10*time.Millisecond:
		return fmt.Errorf("%s.window: %v is below 10ms", prefix, c.Window)
	}
	return nil
}

// WithDefaults fills the zero fields.
func (c BudgetConfig) WithDefaults() BudgetConfig {
	if c.Ratio == 0 {
		c.Ratio = DefaultBudgetRatio
	}
	if c.Window == 0 {
		c.Window = DefaultBudgetWindow
	}
	if c.MinRetries == 0 {
		c.MinRetries = DefaultMinRetries
	}
	return c
}

// Budget counts one worker's requests and retries to one provider over a
// sliding window of budgetSlots slots. It is not safe for concurrent use.
type Budget struct {
	cfg      BudgetConfig
	slot     time.Duration
	requests [budgetSlots]int
	retries  [budgetSlots]int
	epoch    int64 // index of the newest slot
}

// NewBudget returns an empty budget.
func NewBudget(cfg BudgetConfig) *Budget {
	cfg = cfg.WithDefaults()
	return &Budget{cfg: cfg, slot: cfg.Window / budgetSlots}
}

func (b *Budget) advance(now time.Time) int {
	e := now.UnixNano() / int64(b.slot)
	if e-b.epoch >= budgetSlots {
		b.requests, b.retries = [budgetSlots]int{}, [budgetSlots]int{}
	} else {
		for k := b.epoch + 1; k <= e; k++ {
			b.requests[k%budgetSlots], b.retries[k%budgetSlots] = 0, 0
		}
	}
	if e > b.epoch {
		b.epoch = e
	}
	return int(b.epoch % budgetSlots)
}

// Request counts a request.
func (b *Budget) Request(now time.Time) {
	b.requests[b.advance(now)]++
}

// Retry counts a retry and reports true if the budget allows it; a retry
// it refuses is not counted.
func (b *Budget) Retry(now time.Time) bool {
	i := b.advance(now)
	if b.cfg.Ratio < 0 {
		b.retries[i]++
		return true
	}
	q, r := b.Counts(now)
	if float64(r+1) > b.cfg.Ratio*float64(q)+float64(max(b.cfg.MinRetries, 0)) {
		return false
	}
	b.retries[i]++
	return true
}

// CanRetry reports whether Retry would allow a retry now, without
// counting one.
func (b *Budget) CanRetry(now time.Time) bool {
	if b.cfg.Ratio < 0 {
		return true
	}
	q, r := b.Counts(now)
	return float64(r+1) <= b.cfg.Ratio*float64(q)+float64(max(b.cfg.MinRetries, 0))
}

// Counts are the requests and retries in the window.
func (b *Budget) Counts(now time.Time) (requests, retries int) {
	b.advance(now)
	for i := range budgetSlots {
		requests += b.requests[i]
		retries += b.retries[i]
	}
	return requests, retries
}

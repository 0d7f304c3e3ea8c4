package provider

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults and bounds of a model's hedging settings.
const (
	// DefaultHedgeBudget is the share of calls that may be hedged when
	// hedge_budget is zero.
	DefaultHedgeBudget = 0.1
	// MinHedgeDelay is the floor of an adaptive hedge delay (hedge_after):
	// a provider whose usual first token comes within a few milliseconds
	// would otherwise be hedged on every hiccup of the network.
	MinHedgeDelay = 50 * time.Millisecond
	// The hedging of a model with no first_token_sla: a call is hedged
	// once it waited DefaultHedgeScale times the p99 of the fleet's recent
	// first-token times of its provider and model for its first token,
	// and at least DefaultHedgeFloor; while there are no such figures,
	// not at all. Only a call far slower than its provider usually is
	// gets a hedge.
	DefaultHedgeQuantile = 0.99
	DefaultHedgeScale    = 2
	DefaultHedgeFloor    = time.Second
)

// Hedge is when a call of a request for a model that has produced no token
// yet is joined by a call of the next candidate of its route, racing it
// for the first token (the model's first_token_sla, hedge_after and
// hedge_budget). The zero value hedges nothing.
type Hedge struct {
	// SLA is the fixed delay, and the fallback of an adaptive one while
	// no figures exist; zero: none.
	SLA time.Duration
	// Quantile, if set, makes the delay adaptive: Scale times this
	// quantile (0.95 for "p95") of the first-token times the fleet
	// observed of the called provider and model, never below Floor.
	Quantile float64
	Scale    float64
	Floor    time.Duration
	// Budget caps hedges at this share of the calls made with the
	// setting, per worker, as a retry budget caps retries.
	Budget float64
}

// On reports whether calls are hedged at all.
func (h Hedge) On() bool { return h.SLA > 0 || h.Quantile > 0 }

// Hedge is the hedging of requests for model: its entry's settings, and
// the adaptive default (DefaultHedgeQuantile) for a model without
// first_token_sla; none for one whose first_token_sla is negative.
func (c *Catalog) Hedge(model string) Hedge {
	m := c.settings[model]
	budget := cmp.Or(m.HedgeBudget, DefaultHedgeBudget)
	switch {
	case m.FirstTokenSLA < 0:
		return Hedge{}
	case m.FirstTokenSLA == 0:
		return Hedge{Quantile: DefaultHedgeQuantile, Scale: DefaultHedgeScale, Floor: DefaultHedgeFloor, Budget: budget}
	}
	q, _ := parseQuantile(m.HedgeAfter)
	return Hedge{SLA: m.FirstTokenSLA, Quantile: q, Scale: 1, Floor: MinHedgeDelay, Budget: budget}
}

// validateHedge checks a model entry's hedging settings under key.
func (m Model) validateHedge(key string) error {
	switch {
	case m.FirstTokenSLA > 0 && m.FirstTokenSLA < 10*time.Millisecond:
		return fmt.Errorf("%s.first_token_sla: %v is below 10ms", key, m.FirstTokenSLA)
	case m.HedgeBudget < 0 || m.HedgeBudget > 1:
		return fmt.Errorf("%s.hedge_budget: must be between 0 and 1, got %v", key, m.HedgeBudget)
	case m.HedgeAfter != "" && m.FirstTokenSLA <= 0:
		return fmt.Errorf("%s.first_token_sla: required with hedge_after (it is the delay while no figures exist)", key)
	}
	if _, err := parseQuantile(m.HedgeAfter); err != nil {
		return fmt.Errorf("%s.hedge_after: %w", key, err)
	}
	return nil
}

// parseQuantile reads "p50" to "p99.9" as 0.5 to 0.999; "" is 0.
func parseQuantile(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	digits, ok := strings.CutPrefix(s, "p")
	n, err := strconv.ParseFloat(digits, 64)
	if !ok || err != nil || n < 50 || n >= 100 {
		return 0, fmt.Errorf("%q is not a quantile from p50 to p99.9", s)
	}
	return n / 100, nil
}

package provider

import (
	"fmt"
	"time"

	"github.com/relaydev/relay/relay/fleet/canary"
)

// DefaultMaxRetriesPerModel is how many retries a request makes on one
// model on one provider before the next step of its route takes over.
const DefaultMaxRetriesPerModel = 3

// Model is an element of the top-level `models` list: the settings of one
// model name that providers serve. A model without an entry has no
// fallbacks, no price and the defaults below.
type Model struct {
	// Name is the model, as clients and providers call it; some provider
	// must serve it.
	Name string `koanf:"name"`
	// Fallbacks are tried, in order, after the providers of this model,
	// when a request for it has spent its retries there; the fallback
	// continues the same answer. Only the fallbacks of the requested model
	// are followed, not the fallbacks' own.
	Fallbacks []Fallback `koanf:"fallbacks"`
	// MaxRetriesPerModel is how many retries a request makes on this model
	// on one provider before the next step of the route takes over; with
	// no next step, retries go on while the provider's retry.max_retries
	// allows. Zero: 3; negative: move on after the first failure.
	MaxRetriesPerModel int `koanf:"max_retries_per_model"`
	// Continuation overrides the provider's continuation mode for this
	// model. Zero: the provider's.
	Continuation Continuation `koanf:"continuation"`
	// ContinuePrompt overrides the provider's prompt-mode message for this
	// model. Zero: the provider's.
	ContinuePrompt string `koanf:"continue_prompt"`
	// ContextWindow is how many tokens the model takes, prompt and answer
	// together. A request a provider refuses as too long for a model goes
	// on along the route, past the steps whose window is no larger than
	// what the refusal said the request needs (or, if it did not say, no
	// larger than this one). Zero: unknown, and only steps on the same
	// model are passed.
	ContextWindow int `koanf:"context_window"`
	// Price is what the model costs; the end of every stream reports the
	// cost of its calls. Zero: not priced (cost 0).
	Price Price `koanf:"price"`
	// Canary sends a share of the model's requests to another provider
	// first, ramping the share through steps while its error rate stays
	// low (relay/canary). Nil: none.
	Canary *canary.Config `koanf:"canary"`
	// Cache keeps the model's completed answers and serves them when no
	// provider can answer (cache.go). Zero: off.
	Cache Cache `koanf:"cache"`
	// FirstTokenSLA is how long a call of a request for this model may go
	// without a token before the worker starts the next candidate of the
	// route beside it; the first of the two to produce a token answers,
	// the other is cancelled (a hedge). Zero: the adaptive default, twice
	// the p99 of the fleet's recent first-token times of the provider and
	// model, at least 1s, and no hedge while there are none (hedge.go);
	// negative: no hedging.
	FirstTokenSLA time.Duration `koanf:"first_token_sla"`
	// HedgeAfter, "p50" to "p99.9", makes the delay that quantile of the
	// called provider's first-token times across the fleet (at least
	// MinHedgeDelay), and FirstTokenSLA only while no figures exist. Zero:
	// FirstTokenSLA always.
	HedgeAfter string `koanf:"hedge_after"`
	// HedgeBudget caps each worker's hedges at this share of its calls
	// for the model over 10s, beyond one hedge in that window, with the
	// default hedging too. Zero: 0.1.
	HedgeBudget float64 `koanf:"hedge_budget"`
}

// Fallback is one step of a model's fallback chain.
type Fallback struct {
	// Model is the model to continue with; some provider must serve it.
	Model string `koanf:"model"`
	// Provider, if set, restricts the step to this provider, which must
	// serve Model; otherwise every provider of Model is tried, as for a
	// request for it.
	Provider string `koanf:"provider"`
}

// retriesPerModel applies the default and the "negative means none" rule.
func (m Model) retriesPerModel() int {
	switch {
	case m.MaxRetriesPerModel == 0:
		return DefaultMaxRetriesPerModel
	case m.MaxRetriesPerModel < 0:
		return 0
	}
	return m.MaxRetriesPerModel
}

// validate checks the entry against the providers, by name.
func (m Model) validate(key string, providers map[string]Config, served func(string) bool) error {
	if m.Name == "" {
		return fmt.Errorf("%s.name: required", key)
	}
	if !served(m.Name) {
		return fmt.Errorf("%s.name: no provider serves %q", key, m.Name)
	}
	for i, f := range m.Fallbacks {
		fk := fmt.Sprintf("%s.fallbacks[%d]", key, i)
		if f.Model == "" {
			return fmt.Errorf("%s.model: required", fk)
		}
		if f.Provider == "" {
			if !served(f.Model) {
				return fmt.Errorf("%s.model: no provider serves %q", fk, f.Model)
			}
			continue
		}
		p, ok := providers[f.Provider]
		switch {
		case !ok:
			return fmt.Errorf("%s.provider: no provider is named %q", fk, f.Provider)
		case !p.Serves(f.Model):
			return fmt.Errorf("%s.model: provider %q does not serve %q", fk, f.Provider, f.Model)
		}
	}
	if m.ContextWindow < 0 {
		return fmt.Errorf("%s.context_window: must not be negative", key)
	}
	if err := m.Continuation.validate(key + ".continuation"); err != nil {
		return err
	}
	if m.Canary != nil {
		if err := m.Canary.Validate(key + ".canary"); err != nil {
			return err
		}
		p, ok := providers[m.Canary.Provider]
		switch {
		case !ok:
			return fmt.Errorf("%s.canary.provider: no provider is named %q", key, m.Canary.Provider)
		case !p.Serves(m.Name):
			return fmt.Errorf("%s.canary.provider: %q does not serve %q", key, m.Canary.Provider, m.Name)
		}
	}
	if err := m.Cache.validate(key + ".cache"); err != nil {
		return err
	}
	if err := m.validateHedge(key); err != nil {
		return err
	}
	return m.Price.validate(key + ".price")
}

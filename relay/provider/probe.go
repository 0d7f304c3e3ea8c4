package provider

import "fmt"

// Probe is the call the coordinator makes to judge a provider: for its
// health, and to resolve an open breaker nobody else probes.
type Probe string

const (
	// ProbeChat sends a minimal streaming chat completion (one short user
	// message, max_tokens 1) through the same client as the workers' calls.
	// A provider is healthy only if it can answer what the traffic asks:
	// its model list may be served while every completion fails.
	ProbeChat Probe = "chat"
	// ProbeModels sends GET /models: free of tokens, but it only tells that
	// the API and the key answer, not that completions work.
	ProbeModels Probe = "models"
)

// ProbeMessage is the user message of a chat probe: short, so that the
// probe costs a handful of input tokens.
const ProbeMessage = "ping"

func (p Probe) validate(key string) error {
	switch p {
	case "", ProbeChat, ProbeModels:
		return nil
	}
	return fmt.Errorf("%s: %q is not chat or models", key, p)
}

// ProbeKind is Probe with its default applied.
func (c Config) ProbeKind() Probe {
	if c.Probe == "" {
		return ProbeChat
	}
	return c.Probe
}

// ProbeModelFor is the model a chat probe of breaker scope model asks
// for: the breaker's own model when it has one (a per-model breaker), else
// ProbeModel, else the provider's first model.
func (c Config) ProbeModelFor(model string) string {
	switch {
	case model != "":
		return model
	case c.ProbeModel != "":
		return c.ProbeModel
	}
	return c.Models[0]
}

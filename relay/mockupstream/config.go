package mockupstream

import (
	"fmt"
	"time"
)

// Defaults applied to the zero values of Config.
const (
	defaultTokens        = 40
	defaultTokenInterval = 20 * time.Millisecond
	// maxTokens bounds Config.Tokens: every request holds the whole answer in
	// memory, and a typo in a config file should not take the machine down.
	maxTokens = 1_000_000
)

var defaultModels = []string{"mock-1", "mock-2"}

// Config configures the mock upstream. The zero value is a working server
// with the defaults below and no faults. It is loaded with koanf under the
// key mock_upstream, which is why Validate names keys that way.
type Config struct {
	// Tokens is the length of every answer in tokens. Zero means 40.
	Tokens int `koanf:"tokens"`

	// TokenInterval is the pause before each content token, which makes a
	// stream last about Tokens × TokenInterval, like a real model. Zero means
	// 20ms. A negative value such as -1ns removes the pause: tokens are sent
	// at full speed, which is what most tests want.
	TokenInterval time.Duration `koanf:"token_interval"`

	// CommentInterval makes a stream that is already open send an SSE
	// comment line ": keepalive" whenever it has been silent this long: during
	// a stall_after stall or a long TokenInterval. It never applies before the
	// response starts (stall_before sends no byte at all). Zero turns
	// comments off.
	CommentInterval time.Duration `koanf:"comment_interval"`

	// APIKeys, when non-empty, are the only accepted "Authorization: Bearer"
	// values; anything else gets 401. Empty means no authentication. Rotate
	// them at runtime with Server.SetAPIKeys.
	APIKeys []string `koanf:"api_keys"`

	// Models are the model names the server answers for and lists under
	// /v1/models; any other model gets 404 model_not_found, which is how a
	// test makes one provider's model fail. Empty means mock-1 and mock-2.
	Models []string `koanf:"models"`

	// ContextWindows gives models a context window in tokens: a request
	// whose prompt (promptTokens) and max_tokens add up to more is refused
	// with 400 as each provider refuses it (OpenAI's code
	// context_length_exceeded, Anthropic's "prompt is too long"), after
	// it counts in its conversation and before its faults apply. A model
	// without an entry takes any length.
	ContextWindows map[string]int `koanf:"context_windows"`

	// NoPrefill are models that refuse an assistant prefill (a
	// conversation that ends with an assistant message) with 400, as
	// providers without prefill support do; reject_prefill makes any
	// model do so for one conversation.
	NoPrefill []string `koanf:"no_prefill"`

	// Faults is the server-wide fault spec, the same "key=value, ..." list
	// that a [[mock: ...]] directive holds (README.md, "Fault directives").
	// It applies to every chat request that carries no directive of its
	// own; GET /v1/models still answers, like a provider whose API is up
	// while its completions fail. Empty means no faults.
	Faults string `koanf:"faults"`

	// Weather is the provider's ordinary misbehaviour, drawn per request
	// that neither Faults nor a directive of its own decides (see Weather;
	// PUT /mock/weather changes it while the server runs). The zero value
	// is fair weather.
	Weather Weather `koanf:"weather"`

	// TTFT is the time to first token of streamed answers (see TTFT).
	// The zero value adds none.
	TTFT TTFT `koanf:"ttft"`
}

// Validate reports the first invalid setting, naming its config key.
func (c Config) Validate() error {
	_, err := c.validate()
	return err
}

// validate checks c and returns its parsed fault spec, so that New does not
// parse it twice.
func (c Config) validate() (faults, error) {
	switch {
	case c.Tokens < 0 || c.Tokens > maxTokens:
		return faults{}, fmt.Errorf("mock_upstream.tokens: must be between 1 and %d, or 0 for the default %d, got %d",
			maxTokens, defaultTokens, c.Tokens)
	case c.CommentInterval < 0:
		return faults{}, fmt.Errorf("mock_upstream.comment_interval: must be >= 0 (0 turns comments off), got %s", c.CommentInterval)
	}
	for i, key := range c.APIKeys {
		if key == "" {
			return faults{}, fmt.Errorf("mock_upstream.api_keys[%d]: must not be empty", i)
		}
	}
	seen := make(map[string]bool, len(c.Models))
	for i, model := range c.Models {
		if model == "" {
			return faults{}, fmt.Errorf("mock_upstream.models[%d]: must not be empty", i)
		}
		if seen[model] {
			return faults{}, fmt.Errorf("mock_upstream.models[%d]: duplicate model %q", i, model)
		}
		seen[model] = true
	}
	for model, w := range c.ContextWindows {
		if w < 1 {
			return faults{}, fmt.Errorf("mock_upstream.context_windows.%s: must be at least 1, got %d", model, w)
		}
	}
	if err := c.Weather.validate(); err != nil {
		return faults{}, err
	}
	if err := c.TTFT.validate(); err != nil {
		return faults{}, err
	}
	f, err := parseFaults(c.Faults)
	if err != nil {
		return faults{}, fmt.Errorf("mock_upstream.faults: %w", err)
	}
	return f, nil
}

// withDefaults returns c with its zero values replaced by the defaults and a
// negative TokenInterval turned into no pause.
func (c Config) withDefaults() Config {
	if c.Tokens == 0 {
		c.Tokens = defaultTokens
	}
	switch {
	case c.TokenInterval == 0:
		c.TokenInterval = defaultTokenInterval
	case c.TokenInterval < 0:
		c.TokenInterval = 0
	}
	if len(c.Models) == 0 {
		c.Models = defaultModels
	}
	return c
}

// ServedModels returns the models the server answers for, with the default
// applied, so that `relay dev` can register the fake as a provider of
// exactly those.
func (c Config) ServedModels() []string {
	return c.withDefaults().Models
}

// Package provider describes the upstream LLM providers a relay can call,
// which of them serve which model, and the route a request for a model
// takes through them when calls fail (see Catalog.Route). Any
// OpenAI-compatible endpoint is a provider, and so is one that speaks
// Anthropic's Messages API or OpenAI's Responses API (see Type).
package provider

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/quota"
)

// Defaults of a provider's zero fields.
const (
	// DefaultFirstTokenTimeout bounds the wait for the first byte of the
	// answer: long enough for a loaded provider, short enough that a dead
	// one is left while the client still waits.
	DefaultFirstTokenTimeout = 30 * time.Second
	// DefaultStallTimeout bounds the silence in a stream that has started.
	DefaultStallTimeout = 15 * time.Second
	// DefaultContentStallTimeout bounds the time between two deltas with
	// content (reasoning counts), keep-alives aside: twice the byte
	// bound, for a provider that keeps a connection alive with comments
	// while its answer stopped.
	DefaultContentStallTimeout = 30 * time.Second
)

// Config is one provider, an element of the top-level `providers` list.
type Config struct {
	// Name identifies the provider in logs, metrics and fallback lists.
	Name string `koanf:"name"`
	// Type is the API the provider speaks: openai (chat completions),
	// anthropic (Messages) or openai_responses. Zero: openai.
	Type Type `koanf:"type"`
	// BaseURL is the API root, e.g. "https://api.example.com/v1"; the
	// relay appends "/chat/completions", "/messages" or "/responses" as
	// Type says.
	BaseURL string `koanf:"base_url"`
	// HTTP2PriorKnowledge calls a plain http BaseURL over HTTP/2 without
	// TLS (h2c with prior knowledge), for a server known to speak it (the
	// fake upstream, a local server behind an h2c-capable proxy): a
	// worker's streams then share a few connections, where HTTP/1.1 holds
	// one connection, with its buffers and goroutines, per stream in
	// flight. A server that speaks only HTTP/1.1 fails every call. False:
	// HTTP/1.1. Not allowed with https, where TLS settles the protocol
	// (HTTP/2 wherever the provider offers it).
	HTTP2PriorKnowledge bool `koanf:"http2_prior_knowledge"`
	// APIKeys are used in order: a key the provider rejects (401/403) is
	// set aside and the next one takes over. Empty, with no APIKeysFile:
	// requests carry no Authorization header.
	APIKeys []string `koanf:"api_keys"`
	// APIKeysFile names a file holding the keys instead, one per line
	// (blank lines and lines starting with # are skipped). The worker
	// re-reads it when it changes and on SIGHUP, so keys rotate without a
	// restart. Exclusive with APIKeys.
	APIKeysFile string `koanf:"api_keys_file"`
	// VerifyKeys checks every key, at start and when it is added, with a
	// call that costs no tokens (GET {base_url}/models) before it takes
	// traffic: a key the provider refuses is reported and set aside, and a
	// key not yet verified waits while a verified one serves (see package
	// apikeys). Nil: true; false sends the keys unchecked.
	VerifyKeys *bool `koanf:"verify_keys"`
	// Models this provider serves, by the name clients use.
	Models []string `koanf:"models"`
	// BackupProviders are tried, in order, right after this provider for
	// the models they serve too, before any other provider of the model
	// (see Catalog.Route).
	BackupProviders []string `koanf:"backup_providers"`
	// RequestHeaders are headers sent with every call, whose values may
	// name {stream_id}, {request_id} and {tenant} (headers.go). Nil:
	// DefaultRequestHeaders (X-Relay-Stream-Id and X-Request-Id).
	RequestHeaders map[string]string `koanf:"request_headers"`
	// Retry is the backoff between calls to this provider and the number
	// of retries a request may spend on it.
	Retry backoff.Config `koanf:"retry"`
	// FirstTokenTimeout bounds the wait from sending a request to the first
	// byte of the answer (an SSE comment counts). Zero: 30s; negative: no
	// bound.
	FirstTokenTimeout time.Duration `koanf:"first_token_timeout"`
	// StallTimeout bounds the silence between two bytes of a stream that
	// has started; SSE keep-alive comments count as life. A stall aborts
	// the call and the answer is continued. Zero: 15s; negative: no bound.
	StallTimeout time.Duration `koanf:"stall_timeout"`
	// ContentStallTimeout bounds the time between two deltas with content
	// (text, reasoning, a refusal, tool calls) once the answer started:
	// keep-alive comments and pings do not count. A model that streams
	// its reasoning is making progress; one that sends only keep-alives
	// for this long is stalled, and the answer is continued. Zero: 30s;
	// negative: no bound.
	ContentStallTimeout time.Duration `koanf:"content_stall_timeout"`
	// Continuation is how a cut answer is continued on this provider,
	// unless the model says otherwise. Zero: prefill, and always prompt
	// for type openai_responses, which cannot prefill.
	Continuation Continuation `koanf:"continuation"`
	// ContinuePrompt is the user message of prompt-mode continuations.
	// Zero: DefaultContinuePrompt.
	ContinuePrompt string `koanf:"continue_prompt"`
	// Breaker is the provider's circuit breaker, shared by the whole
	// cluster (relay/fleet/breaker), one per model of the provider
	// unless its scope is the provider. Zero: open after 5 failures in a
	// row on one worker, or half of its calls in 30s once they are 20,
	// for 5s.
	Breaker breaker.Config `koanf:"breaker"`
	// RateLimit holds the provider's requests and tokens per minute,
	// shared by every worker of the cluster. Zero: no limit.
	RateLimit quota.Limit `koanf:"rate_limit"`
	// Probe is the call the coordinator judges the provider's health by,
	// and resolves its idle breakers with: chat (a one-token streaming
	// completion) or models (GET /models). Zero: chat.
	Probe Probe `koanf:"probe"`
	// ProbeModel is the model of a chat probe of the provider's health or
	// of a provider-wide breaker (a per-model breaker is probed with its
	// own model). Zero: the first of Models.
	ProbeModel string `koanf:"probe_model"`
	// RetryBudget caps each worker's retries to the provider at a share
	// of its requests. Zero: 20% over 10s.
	RetryBudget quota.BudgetConfig `koanf:"retry_budget"`
}

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Validate names the first invalid field, with key the config path of the
// provider (e.g. "providers[0]"). Backup providers are checked by
// NewCatalog, which knows the other providers.
func (c Config) Validate(key string) error {
	if !namePattern.MatchString(c.Name) {
		return fmt.Errorf("%s.name: %q must be 1-64 letters, digits, '-' or '_'", key, c.Name)
	}
	if err := c.Type.validate(key + ".type"); err != nil {
		return err
	}
	if err := validateRequestHeaders(key, c.RequestHeaders); err != nil {
		return err
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s.base_url: %q is not an http(s) URL", key, c.BaseURL)
	}
	if c.HTTP2PriorKnowledge && u.Scheme != "http" {
		return fmt.Errorf("%s.http2_prior_knowledge: only for an http base_url; over https, TLS settles the protocol (HTTP/2 where the provider offers it)", key)
	}
	if len(c.APIKeys) > 0 && c.APIKeysFile != "" {
		return fmt.Errorf("%s.api_keys_file: set api_keys or api_keys_file, not both", key)
	}
	for i, k := range c.APIKeys {
		if k == "" {
			return fmt.Errorf("%s.api_keys[%d]: empty key", key, i)
		}
	}
	if len(c.Models) == 0 {
		return fmt.Errorf("%s.models: at least one model required", key)
	}
	for i, m := range c.Models {
		if m == "" {
			return fmt.Errorf("%s.models[%d]: empty model name", key, i)
		}
	}
	if err := c.Probe.validate(key + ".probe"); err != nil {
		return err
	}
	if err := c.Retry.Validate(key + ".retry"); err != nil {
		return err
	}
	if err := c.Continuation.validate(key + ".continuation"); err != nil {
		return err
	}
	if c.Continuation == Prefill && !c.Type.prefills() {
		return fmt.Errorf("%s.continuation: type %s cannot prefill; use prompt", key, c.Type)
	}
	if err := c.Breaker.Validate(key + ".breaker"); err != nil {
		return err
	}
	if err := c.RateLimit.Validate(key + ".rate_limit"); err != nil {
		return err
	}
	return c.RetryBudget.Validate(key + ".retry_budget")
}

// VerifiesKeys is VerifyKeys with its default applied.
func (c Config) VerifiesKeys() bool { return c.VerifyKeys == nil || *c.VerifyKeys }

// Serves reports whether the provider lists model.
func (c Config) Serves(model string) bool { return slices.Contains(c.Models, model) }

// FirstTokenBound is FirstTokenTimeout with its default applied; negative
// means no bound, as in upstream.Client.
func (c Config) FirstTokenBound() time.Duration {
	return orDefault(c.FirstTokenTimeout, DefaultFirstTokenTimeout)
}

// StallBound is StallTimeout with its default applied; negative means no
// bound, as in upstream.Client.
func (c Config) StallBound() time.Duration {
	return orDefault(c.StallTimeout, DefaultStallTimeout)
}

// ContentStallBound is ContentStallTimeout with its default applied;
// negative means no bound, as in upstream.Client.
func (c Config) ContentStallBound() time.Duration {
	return orDefault(c.ContentStallTimeout, DefaultContentStallTimeout)
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

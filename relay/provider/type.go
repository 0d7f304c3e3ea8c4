package provider

import (
	"fmt"

	"github.com/relaydev/relay/relay/upstream"
)

// Type is the API a provider speaks. The relay's requests and chunks are
// chat completions whatever the type: the worker's client translates them
// to and from the provider's API (relay/upstream).
type Type string

const (
	// TypeOpenAI is OpenAI's chat completions, POST {base_url}/chat/completions,
	// which most providers and local servers imitate.
	TypeOpenAI Type = "openai"
	// TypeAnthropic is Anthropic's Messages API, POST {base_url}/messages
	// with x-api-key and anthropic-version. Prefill continuations work
	// natively there.
	TypeAnthropic Type = "anthropic"
	// TypeOpenAIResponses is OpenAI's Responses API, POST
	// {base_url}/responses. It answers an assistant message last with a
	// new message instead of extending it, so its continuations are
	// always in prompt mode.
	TypeOpenAIResponses Type = "openai_responses"
)

func (t Type) validate(key string) error {
	switch t {
	case "", TypeOpenAI, TypeAnthropic, TypeOpenAIResponses:
		return nil
	}
	return fmt.Errorf("%s: %q is not openai, anthropic or openai_responses", key, t)
}

// prefills reports whether the provider extends a final assistant message.
func (t Type) prefills() bool { return t != TypeOpenAIResponses }

// Target is the upstream endpoint of the provider, called with key.
func (c Config) Target(key string) upstream.Target {
	d := upstream.DialectChat
	if c.Type != "" {
		d = upstream.Dialect(c.Type)
	}
	return upstream.Target{Provider: c.Name, BaseURL: c.BaseURL, APIKey: key, Dialect: d, HTTP2PriorKnowledge: c.HTTP2PriorKnowledge}
}

package anthropic

import "github.com/relaydev/relay/relay/wire"

// Usage is a Message's usage. Its input_tokens leaves out the prompt
// tokens written to or read from the prompt cache, which chat usage counts
// in prompt_tokens (Prompt, PromptDetails, UsageOf).
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	// ServerToolUse is the provider's server tools' calls, as Anthropic
	// counts them (web_search_requests); absent when none were counted.
	ServerToolUse wire.TokenCounts `json:"server_tool_use,omitempty"`
}

// Prompt is every input token, cached or not: what chat usage calls
// prompt_tokens.
func (u Usage) Prompt() int {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// PromptDetails are the chat usage's prompt_tokens_details of the cache
// counts: cached_tokens (what OpenAI-shaped clients read) for the tokens
// read from the cache, and wire.CacheCreationTokens for the tokens written
// to it, which chat has no name for; nil when there are neither.
func (u Usage) PromptDetails() wire.TokenCounts {
	if u.CacheReadInputTokens == 0 && u.CacheCreationInputTokens == 0 {
		return nil
	}
	return wire.TokenCounts{{Name: "cached_tokens", N: u.CacheReadInputTokens}, {Name: wire.CacheCreationTokens, N: u.CacheCreationInputTokens}}
}

// UsageOf is the Anthropic usage of a stream's chat usage u (zero for
// nil): the cache counts come from the prompt details, cached_tokens (any
// provider's cache reads) and wire.CacheCreationTokens (an Anthropic
// provider's cache writes).
func UsageOf(u *wire.Usage) Usage {
	if u == nil {
		return Usage{}
	}
	read := u.PromptTokensDetails.Get("cached_tokens")
	created := u.PromptTokensDetails.Get(wire.CacheCreationTokens)
	return Usage{
		InputTokens:              max(u.PromptTokens-read-created, 0),
		CacheCreationInputTokens: created,
		CacheReadInputTokens:     read,
		OutputTokens:             u.CompletionTokens,
		ServerToolUse:            u.ServerToolUse,
	}
}

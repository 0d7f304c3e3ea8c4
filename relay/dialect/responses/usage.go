package responses

import "github.com/relaydev/relay/relay/wire"

// Usage is a Response's usage.
type Usage struct {
	InputTokens         int           `json:"input_tokens"`
	InputTokensDetails  InputDetails  `json:"input_tokens_details"`
	OutputTokens        int           `json:"output_tokens"`
	OutputTokensDetails OutputDetails `json:"output_tokens_details"`
	TotalTokens         int           `json:"total_tokens"`
}

// InputDetails are the input tokens read from the provider's prompt cache.
type InputDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// OutputDetails are the output tokens the model spent reasoning.
type OutputDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// UsageOf is the Responses usage of a stream's chat usage u; nil stays
// nil. The details are the providers' cached_tokens and reasoning_tokens
// (0 when they sent none); the Responses API has no place for the others.
func UsageOf(u *wire.Usage) *Usage {
	if u == nil {
		return nil
	}
	return &Usage{
		InputTokens:         u.PromptTokens,
		InputTokensDetails:  InputDetails{CachedTokens: u.PromptTokensDetails.Get("cached_tokens")},
		OutputTokens:        u.CompletionTokens,
		OutputTokensDetails: OutputDetails{ReasoningTokens: u.CompletionTokensDetails.Get("reasoning_tokens")},
		TotalTokens:         u.TotalTokens,
	}
}

// PromptDetails are the chat usage's prompt_tokens_details of u: its
// cached tokens, nil when there are none.
func (u Usage) PromptDetails() wire.TokenCounts {
	if u.InputTokensDetails.CachedTokens == 0 {
		return nil
	}
	return wire.TokenCounts{{Name: "cached_tokens", N: u.InputTokensDetails.CachedTokens}}
}

// CompletionDetails are the chat usage's completion_tokens_details of u:
// its reasoning tokens, nil when there are none.
func (u Usage) CompletionDetails() wire.TokenCounts {
	if u.OutputTokensDetails.ReasoningTokens == 0 {
		return nil
	}
	return wire.TokenCounts{{Name: "reasoning_tokens", N: u.OutputTokensDetails.ReasoningTokens}}
}

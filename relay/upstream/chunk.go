package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Delta is what one chat.completion.chunk says about choice 0. A Delta may be
// empty: providers send chunks with no choices (Azure's content-filter
// preamble) or an empty delta next to a finish_reason.
type Delta struct {
	// Role is set on the first chunk of a message, usually "assistant".
	Role string
	// Content is the text fragment. Content sent as an array of parts
	// (Mistral) is flattened to the concatenation of its "text" parts.
	Content string
	// Reasoning is a fragment of the model's reasoning, not of its answer:
	// reasoning_content (DeepSeek, vLLM), reasoning (OpenRouter), or
	// Anthropic's thinking. A continuation never replays it as text.
	Reasoning string
	// ToolCalls is the raw tool_calls fragment array, nil when absent, null
	// or empty. Fragments must be merged by index by the consumer.
	ToolCalls json.RawMessage
	// FinishReason is set on the chunk that ends the choice ("stop",
	// "length", "tool_calls", "content_filter", ...).
	FinishReason string
	// Usage is set on the usage chunk, typically the last one with empty
	// choices when stream_options.include_usage was requested.
	Usage *Usage
	// Model is the model the provider says served the chunk.
	Model string
}

// Usage is the token accounting of a completion, as OpenAI reports it.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// chunk is the subset of chat.completion.chunk that Delta needs, plus the
// fields by which providers signal an error in the middle of a stream.
type chunk struct {
	Model   string `json:"model"`
	Object  string `json:"object"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage       `json:"usage"`
	Error *OpenAIError `json:"error"`
}

// ParseChunk decodes the data of one SSE event of a streaming chat
// completion. Data that is not a JSON object of the chunk's shape yields an
// error wrapping ErrMalformed. An error payload ({"error": ...}, or vLLM's
// {"object": "error", ...}) yields an error wrapping *OpenAIError.
func ParseChunk(data []byte) (Delta, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Delta{}, fmt.Errorf("%w: chunk is not a JSON object", ErrMalformed)
	}
	var c chunk
	if err := json.Unmarshal(trimmed, &c); err != nil {
		return Delta{}, fmt.Errorf("%w: chunk: %w", ErrMalformed, err)
	}
	if c.Error != nil {
		return Delta{}, fmt.Errorf("error in stream: %w", c.Error)
	}
	if c.Object == "error" {
		e, _ := parseErrorBody(trimmed)
		return Delta{}, fmt.Errorf("error in stream: %w", &e)
	}
	d := Delta{Usage: c.Usage, Model: c.Model}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		content, err := decodeContent(ch.Delta.Content)
		if err != nil {
			return Delta{}, fmt.Errorf("%w: chunk content: %w", ErrMalformed, err)
		}
		d.Role = ch.Delta.Role
		d.Content = content
		d.ToolCalls = nonEmptyArray(ch.Delta.ToolCalls)
		d.FinishReason = ch.FinishReason
		break
	}
	return d, nil
}

// decodeContent accepts content as a string, null, or an array of typed
// parts of which only "text" parts are kept.
func decodeContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// nonEmptyArray returns nil for an absent, null or empty tool_calls field,
// so callers can test len(d.ToolCalls) == 0.
func nonEmptyArray(raw json.RawMessage) json.RawMessage {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", "[]":
		return nil
	}
	return raw
}

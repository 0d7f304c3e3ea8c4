package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Usage counts tokens over every upstream attempt of a stream. The details
// are OpenAI's prompt_tokens_details and completion_tokens_details
// (cached_tokens, reasoning_tokens, ...), summed by name like the totals.
type Usage struct {
	PromptTokens            int         `json:"prompt_tokens"`
	CompletionTokens        int         `json:"completion_tokens"`
	TotalTokens             int         `json:"total_tokens"`
	PromptTokensDetails     TokenCounts `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails TokenCounts `json:"completion_tokens_details,omitempty"`
	// ServerToolUse counts the provider's own tool calls by kind
	// (Anthropic's server_tool_use: web_search_requests, ...), summed
	// like the details; chat clients see it under the same name.
	ServerToolUse TokenCounts `json:"server_tool_use,omitempty"`
}

// TokenCounts is a usage details object: integer counts by name, in the
// order the provider sent them, so that the details of a stream of one
// attempt reach the client as the provider wrote them, names the relay
// does not know included. Members that are not integers are not kept.
type TokenCounts []TokenCount

// TokenCount is one member of a TokenCounts.
type TokenCount struct {
	Name string
	N    int
}

// Get returns the count named name, 0 when there is none.
func (c TokenCounts) Get(name string) int {
	for _, t := range c {
		if t.Name == name {
			return t.N
		}
	}
	return 0
}

// Add returns c with every count of o added to the one of the same name,
// names c lacks appended in o's order. c is not modified.
func (c TokenCounts) Add(o TokenCounts) TokenCounts {
	sum := append(TokenCounts(nil), c...)
next:
	for _, t := range o {
		for i := range sum {
			if sum[i].Name == t.Name {
				sum[i].N += t.N
				continue next
			}
		}
		sum = append(sum, t)
	}
	return sum
}

// MarshalJSON renders the counts as an object in their order.
func (c TokenCounts) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, t := range c {
		if i > 0 {
			b = append(b, ',')
		}
		name, err := json.Marshal(t.Name)
		if err != nil {
			return nil, err
		}
		b = append(b, name...)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(t.N), 10)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads an object's integer members in order; null is empty.
func (c *TokenCounts) UnmarshalJSON(data []byte) error {
	*c = nil
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("wire: token counts: %w", err)
	}
	if tok == nil {
		return nil
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("wire: token counts: %v is not an object", tok)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("wire: token counts: %w", err)
		}
		name, _ := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("wire: token counts: %s: %w", name, err)
		}
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				*c = append(*c, TokenCount{Name: name, N: int(i)})
			}
		}
	}
	return nil
}

// CacheCreationTokens names, in PromptTokensDetails, the prompt tokens a
// provider wrote to its prompt cache (Anthropic's
// cache_creation_input_tokens, under its own name as chat has none); the
// tokens read from it are OpenAI's cached_tokens.
const CacheCreationTokens = "cache_creation_input_tokens"

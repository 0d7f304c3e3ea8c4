package upstream

import (
	"encoding/json"
	"fmt"
	"strings"
)

// chatRequest is what the translations to other dialects read of a chat
// completion request. Fields it does not name have no equivalent there and
// are dropped: those APIs refuse parameters they do not know.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Temperature         json.RawMessage `json:"temperature"`
	TopP                json.RawMessage `json:"top_p"`
	Tools               []chatTool      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	User                string          `json:"user"`
	ReasoningEffort     string          `json:"reasoning_effort"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// contentPart is one element of a message's content array.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

func parseChatRequest(body []byte) (chatRequest, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return chatRequest{}, fmt.Errorf("chat request: %w", err)
	}
	return req, nil
}

// maxTokens is the request's smallest limit on the answer's tokens, 0 if
// it sets none.
func (r chatRequest) maxTokens() int {
	n := 0
	for _, p := range [...]*int{r.MaxTokens, r.MaxCompletionTokens} {
		if p != nil && *p > 0 && (n == 0 || *p < n) {
			n = *p
		}
	}
	return n
}

// stopSequences reads stop, a string or an array of strings.
func (r chatRequest) stopSequences() ([]string, error) {
	if len(r.Stop) == 0 || string(r.Stop) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(r.Stop, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(r.Stop, &many); err != nil {
		return nil, fmt.Errorf("stop: want a string or an array of strings")
	}
	return many, nil
}

// parts reads a message's content: a string is one text part, null none.
func parts(content json.RawMessage) ([]contentPart, error) {
	if len(content) == 0 || string(content) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []contentPart{{Type: "text", Text: s}}, nil
	}
	var ps []contentPart
	if err := json.Unmarshal(content, &ps); err != nil {
		return nil, fmt.Errorf("content: want a string or an array of parts")
	}
	return ps, nil
}

// text reads a content that may hold only text, such as a system message's
// or a tool result's.
func text(content json.RawMessage) (string, error) {
	ps, err := parts(content)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range ps {
		if p.Type != "text" {
			return "", fmt.Errorf("content part of type %q: only text is allowed here", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// toolChoice reads tool_choice: its string form ("auto", "none",
// "required") as mode, or mode "function" and the name of the function an
// object forces ({"type": "function", "function": {"name": ...}}).
func toolChoice(raw json.RawMessage) (mode, name string, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", "", nil
	}
	if json.Unmarshal(raw, &mode) == nil {
		return mode, "", nil
	}
	var obj struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Function.Name == "" {
		return "", "", fmt.Errorf("tool_choice: want a string or a function to call")
	}
	return "function", obj.Function.Name, nil
}

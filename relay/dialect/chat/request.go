package chat

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Request is what the translations to and from other dialects read and
// write of a chat completion request. Fields it does not name have no
// equivalent in those dialects: the Messages and Responses APIs refuse
// parameters they do not know.
type Request struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Temperature         json.RawMessage `json:"temperature"`
	TopP                json.RawMessage `json:"top_p"`
	Tools               []Tool          `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	User                string          `json:"user"`
	ReasoningEffort     string          `json:"reasoning_effort"`
}

// Message is a message of a chat completion request.
type Message struct {
	Role string `json:"role"`
	// Content is a string or an array of Parts; null for an assistant
	// message of tool calls only.
	Content    json.RawMessage `json:"content"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// ToolCall is a complete tool call, as in an assistant message or a
// chat.completion.
type ToolCall struct {
	ID       string   `json:"id,omitempty"`
	Type     string   `json:"type,omitempty"`
	Function Function `json:"function"`
}

// Function is the function a ToolCall calls, with its arguments.
type Function struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Tool is a function the model may call.
type Tool struct {
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction declares a Tool's function.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Part is one element of a message's content array: text or an image by
// URL.
type Part struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL *Image `json:"image_url,omitempty"`
}

// Image is an image Part's image.
type Image struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// ParseRequest decodes a chat completion request.
func ParseRequest(body []byte) (Request, error) {
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		return Request{}, fmt.Errorf("chat request: %w", err)
	}
	return req, nil
}

// AnswerLimit is the request's smallest limit on the answer's tokens
// (max_tokens, max_completion_tokens), 0 if it sets none.
func (r Request) AnswerLimit() int {
	n := 0
	for _, p := range [...]*int{r.MaxTokens, r.MaxCompletionTokens} {
		if p != nil && *p > 0 && (n == 0 || *p < n) {
			n = *p
		}
	}
	return n
}

// StopSequences reads stop, a string or an array of strings.
func (r Request) StopSequences() ([]string, error) {
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

// Parts reads a message's content: a string is one text part, null none.
func Parts(content json.RawMessage) ([]Part, error) {
	if len(content) == 0 || string(content) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []Part{{Type: "text", Text: s}}, nil
	}
	var ps []Part
	if err := json.Unmarshal(content, &ps); err != nil {
		return nil, fmt.Errorf("content: want a string or an array of parts")
	}
	return ps, nil
}

// Text reads a content that may hold only text, such as a system
// message's or a tool result's.
func Text(content json.RawMessage) (string, error) {
	ps, err := Parts(content)
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

// URL is an image part's URL, "" for a part without one.
func (p Part) URL() string {
	if p.ImageURL == nil {
		return ""
	}
	return p.ImageURL.URL
}

// ToolChoice reads tool_choice: its string form ("auto", "none",
// "required") as mode, or mode "function" and the name of the function an
// object forces ({"type": "function", "function": {"name": ...}}).
func ToolChoice(raw json.RawMessage) (mode, name string, err error) {
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

package responses

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/relaydev/relay/relay/dialect/chat"
)

// providerRequest is a streaming request to OpenAI's Responses API. The
// relay keeps the conversation itself, so the provider is asked not to
// store the response.
type providerRequest struct {
	Model             string          `json:"model"`
	Input             []any           `json:"input"`
	MaxOutputTokens   int             `json:"max_output_tokens,omitempty"`
	Temperature       json.RawMessage `json:"temperature,omitempty"`
	TopP              json.RawMessage `json:"top_p,omitempty"`
	Tools             []providerTool  `json:"tools,omitempty"`
	ToolChoice        any             `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	Reasoning         *providerEffort `json:"reasoning,omitempty"`
	User              string          `json:"user,omitempty"`
	Store             bool            `json:"store"`
	Stream            bool            `json:"stream"`
}

type providerEffort struct {
	Effort string `json:"effort"`
}

// providerTool is a function tool. Strict is sent false because chat
// completions' tools are not strict unless asked, and the Responses API's
// are by default.
type providerTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict"`
}

// The input items of a Responses request.
type (
	providerMessage struct {
		Type    string            `json:"type"`
		Role    string            `json:"role"`
		Content []providerContent `json:"content"`
	}
	providerContent struct {
		Type     string `json:"type"`
		Text     string `json:"text,omitempty"`
		ImageURL string `json:"image_url,omitempty"`
	}
	providerCall struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	providerCallOutput struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
)

// ErrNoStop refuses a request with stop sequences: the Responses API has
// none, and an answer that runs past them is not the one asked for.
var ErrNoStop = errors.New("stop has no equivalent in the Responses API")

// FromChat translates a chat completion request into a streaming
// Responses request for a provider: each message becomes an input
// message (text and images), a tool call a function_call item and a tool
// message its function_call_output.
//
// The Responses API answers an assistant message last with a new message,
// it does not extend it: a cut answer on such a provider is continued in
// prompt mode (see provider.Config.Type).
func FromChat(body []byte) ([]byte, error) {
	req, err := chat.ParseRequest(body)
	if err != nil {
		return nil, err
	}
	if stops, err := req.StopSequences(); err != nil || len(stops) > 0 {
		return nil, errors.Join(err, ErrNoStop)
	}
	rr := providerRequest{
		Model:             req.Model,
		MaxOutputTokens:   outputLimit(req.AnswerLimit()),
		Temperature:       req.Temperature,
		TopP:              req.TopP,
		ParallelToolCalls: req.ParallelToolCalls,
		User:              req.User,
		Stream:            true,
	}
	if req.ReasoningEffort != "" {
		rr.Reasoning = &providerEffort{Effort: req.ReasoningEffort}
	}
	for i, m := range req.Messages {
		items, err := providerItems(m)
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		rr.Input = append(rr.Input, items...)
	}
	for i, t := range req.Tools {
		if t.Type != "function" {
			return nil, fmt.Errorf("tools[%d]: type %q has no equivalent in the Responses API", i, t.Type)
		}
		rr.Tools = append(rr.Tools, providerTool{Type: "function", Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	mode, name, err := chat.ToolChoice(req.ToolChoice)
	switch {
	case err != nil:
		return nil, err
	case mode == "function":
		rr.ToolChoice = map[string]string{"type": "function", "name": name}
	case mode != "":
		rr.ToolChoice = mode
	}
	return json.Marshal(rr)
}

// minOutputTokens is the smallest max_output_tokens the Responses API
// takes.
const minOutputTokens = 16

// outputLimit is max_output_tokens for a limit of n tokens (0: none). A
// smaller limit is raised to the API's minimum rather than refused: a
// continuation near the client's limit asks for a few tokens, and a
// health probe for one.
func outputLimit(n int) int {
	if n == 0 {
		return 0
	}
	return max(n, minOutputTokens)
}

// providerItems translates one chat message into input items.
func providerItems(m chat.Message) ([]any, error) {
	switch m.Role {
	case "system", "developer", "user", "assistant":
	case "tool":
		s, err := chat.Text(m.Content)
		if err != nil {
			return nil, err
		}
		return []any{providerCallOutput{Type: "function_call_output", CallID: m.ToolCallID, Output: s}}, nil
	default:
		return nil, fmt.Errorf("role %q has no equivalent in the Responses API", m.Role)
	}
	ps, err := chat.Parts(m.Content)
	if err != nil {
		return nil, err
	}
	textType := "input_text"
	if m.Role == "assistant" {
		textType = "output_text"
	}
	msg := providerMessage{Type: "message", Role: m.Role}
	for _, p := range ps {
		switch {
		case p.Type == "text":
			msg.Content = append(msg.Content, providerContent{Type: textType, Text: p.Text})
		case p.Type == "image_url" && m.Role == "user":
			msg.Content = append(msg.Content, providerContent{Type: "input_image", ImageURL: p.URL()})
		default:
			return nil, fmt.Errorf("content part of type %q has no equivalent in the Responses API", p.Type)
		}
	}
	var items []any
	if len(msg.Content) > 0 || len(m.ToolCalls) == 0 {
		items = append(items, msg)
	}
	for _, tc := range m.ToolCalls {
		items = append(items, providerCall{Type: "function_call", CallID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return items, nil
}
